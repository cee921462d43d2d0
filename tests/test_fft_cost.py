"""The FFT backend's fixed cost and scipy.fft thread rule (docs/fft.md, "Fixed cost")."""
from math import prod

import numpy as np
import pytest

import convt
import convt._backends.fft as fft_mod
import convt._backends.fft_spectra as spectra_mod
from convt._dispatch.constants import current


def test_fft_threads_rule():
    bound = spectra_mod._MIN_THREADED_FFT
    assert spectra_mod.fft_threads(20 * 20 * 8, (20, 20), 2) == 1        # small: one thread
    assert spectra_mod.fft_threads(2048 * 16, (2048,), 2) == 1
    assert spectra_mod.fft_threads(160 * 160 * 16, (160, 160), 2) == 2   # large_k31_s1
    assert spectra_mod.fft_threads(16384 * 32, (16384,), 3) == 3
    assert bound[0] <= 16384 * 32 * 14 and bound[1] <= 160 * 160 * 16 * np.log2(25600)


@pytest.mark.parametrize("x_shape, w_shape", [
    ((1, 4, 64), (4, 4, 9)), ((1, 4, 16, 16), (4, 4, 5, 5)), ((1, 2, 8, 8, 8), (2, 2, 3, 3, 3))])
def test_fixed_cost_terms(x_shape, w_shape):
    c = current()
    geom = convt.explain(x_shape, np.zeros(w_shape, np.float32), method="fft").geometry
    nd = geom.ndim
    fixed = fft_mod.BACKEND.fixed_seconds(geom, c)
    assert fixed == pytest.approx(c["call_s"] + c["fft_call_s"] + nd * c["fft_axis_call_s"])
    own, setup = fft_mod.BACKEND.estimate_parts(geom, np.float32, 2, c, one_shot=True)
    assert own >= fixed and setup >= nd * c["fft_one_shot_axis_s"]
    own_p, setup_p = fft_mod.BACKEND.estimate_parts(geom, np.float32, 2, c)
    assert setup_p == 0.0 and own_p >= fixed
    # a small call is priced within 2x of 50 us prepared (measured 45-90 us, 2-core EPYC)
    assert 20e-6 < own_p < 200e-6


def test_small_multi_axis_call_runs_one_fft_thread(monkeypatch):
    seen = []
    real = fft_mod.rfft_into   # the input transform (scipy.fft's pocketfft, into the workspace)

    def spy(x, axes, out, threads):
        seen.append(threads)
        return real(x, axes, out, threads)

    monkeypatch.setattr(fft_mod, "rfft_into", spy)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 16, 16)).astype(np.float32)
    w = rng.standard_normal((4, 4, 5, 5)).astype(np.float32)
    y = convt.ConvTranspose(w, method="fft", workers=2)(x)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), method="reference")
    assert seen == [1]
    assert np.max(np.abs(y - ref)) <= 1e-5 * np.max(np.abs(ref))


def _opts(lay):
    return tuple(zip(lay.small, lay.block, lay.tiles))


@pytest.mark.parametrize("x_shape, w_shape, kw", [
    ((2, 6, 9, 7), (6, 1, 5, 4), dict(group=6, strides=(2, 1))),   # depthwise: 1 x 1 products
    ((3, 8, 40), (8, 3, 9), dict(strides=(3,))),                   # 3 columns: all one at a time
    ((1, 4, 5, 5, 5), (4, 20, 3, 3, 3), {}),                       # 20 = 2 x 8 + 4 (float32)
    ((2, 4, 30), (4, 9, 7), dict(group=2)),                        # 9 = 8 + 1
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("isa", [None, 0])
def test_contraction_counts_match_the_run(x_shape, w_shape, kw, dtype, isa, monkeypatch):
    """The contraction's item visits and one-at-a-time column steps that the model prices
    (fft_cost._contraction) are those of the calls the backend makes: per phase, bin row
    and item, C_out/G mod (vector lanes) columns past the last whole vector, each C_in/G
    steps (AVX2 and up: 32-byte vectors; the portable build: 16)."""
    from convt._backends import fft_cost
    from convt._kernels import _cpu

    if isa is not None:
        monkeypatch.setattr(_cpu, "ISA", isa)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    op = convt.ConvTranspose(w, method="fft", workers=2, **kw)
    seen = []
    real = fft_mod.contract

    def spy(spec, wsplit, workers, out=None):
        seen.append((spec.size, wsplit.shape))
        return real(spec, wsplit, workers, out)

    monkeypatch.setattr(fft_mod, "contract", spy)
    y = op(x)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), method="reference",
                               **kw)
    assert np.max(np.abs(y - ref)) <= 1e-4 * np.max(np.abs(ref))
    geom = op.geometry(x.shape)
    itemsize = np.dtype(dtype).itemsize
    lanes = (32 if _cpu.ISA >= 1 else 16) // itemsize
    visits = steps = 0
    for size, (phases, _, rows, cg, mg) in seen:
        items = size // (rows * cg)
        visits += phases * rows * items
        steps += phases * rows * items * cg * (mg % lanes)
    assert visits > 0
    feats = fft_cost._features(geom, _opts(fft_mod.fft_layout(geom, dtype)), itemsize)
    assert feats[5:] == (visits, steps)


def test_kernel_spectra_streamed_once_per_chunk(monkeypatch):
    """Spectra past fft_cost._STREAM_BYTES are priced as read once per batch chunk
    (fft_read_s per byte): the contraction runs once per chunk, each over all of them;
    spectra that stay in cache are not."""
    from convt._backends import fft_cost

    c = dict(current())
    rates = fft_cost.unit_rates(c)
    none = fft_cost.unit_rates(dict(c, fft_read_s=0.0))
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 96, 2, 2)).astype(np.float32)
    w = rng.standard_normal((96, 96, 31, 31)).astype(np.float32)
    op = convt.ConvTranspose(w, method="fft", workers=2)
    geom = op.geometry(x.shape)
    big = fft_cost.layout(geom, np.float32, 256 << 20, False, rates)
    assert big.kernel_bytes > fft_cost._STREAM_BYTES
    budget = big.kernel_bytes + 2 * big.work_bytes      # two batch elements per chunk
    lay = fft_cost.layout(geom, np.float32, budget, False, rates)
    assert lay.chunk == 2 and lay.kernel_bytes == big.kernel_bytes
    free = fft_cost.layout(geom, np.float32, budget, False, none)
    assert lay.cost - free.cost == pytest.approx(2 * lay.kernel_bytes * c["fft_read_s"])
    monkeypatch.setattr(fft_mod, "FFT_MEMORY_BUDGET", budget)
    calls = []
    real = fft_mod.contract
    monkeypatch.setattr(fft_mod, "contract",
                        lambda spec, ws, workers, out=None: calls.append(ws.nbytes)
                        or real(spec, ws, workers, out))
    convt.ConvTranspose(w, method="fft", workers=2)(x)
    assert calls == [lay.kernel_bytes] * 2
    small = _geom_of((4, 8, 16, 16), (8, 8, 5, 5))
    lay = fft_cost.layout(small, np.float32, 256 << 20, False, rates)
    assert lay.kernel_bytes < fft_cost._STREAM_BYTES
    assert lay.cost == fft_cost.layout(small, np.float32, 256 << 20, False, none).cost


def test_fused_dft_stream_priced_when_it_outgrows_the_cache():
    """A one-shot call whose fused axis-0 DFT (fft_contract_dft) re-reads a packed kernel
    past fft_cost._STREAM_BYTES once per pair of rows pays fft_read_s per byte of those
    reads."""
    from convt._backends import fft_cost

    big = _geom_of((1, 128, 2, 2), (128, 128, 19, 19))
    small = _geom_of((1, 8, 2, 2), (8, 8, 19, 19))
    for geom, streamed in ((big, True), (small, False)):
        lay = fft_mod.fft_layout(geom, np.float32, one_shot=True)
        assert spectra_mod.fuses_lead(geom, lay.small)
        n = fft_cost._fused_stream(geom, lay.small, 4)
        assert (n > 0) == streamed
        if streamed:   # 19 // 2 + 1 terms, 16-weight blocks, even and odd, real and imaginary
            rows = (lay.small[0] // 2 + 2) // 2
            per_row = prod(lay.small[1:-1]) * (lay.small[-1] // 2 + 1) * 128 * 128 * 10 * 2 * 2 * 4
            assert n == rows * per_row


def _geom_of(x_shape, w_shape, **kw):
    return convt.explain(x_shape, np.zeros(w_shape, np.float32), method="fft", **kw).geometry

