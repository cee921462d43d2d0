"""What the adversarial sweep of test_adversarial16 found broken on 2026-11-27, as tests of
the promises as they now hold: fixed in the library (Winograd products past the float range,
convt.dask's bfloat16 blocks, the reference's bfloat16 rounding) or stated as they hold in
the docs (the bits of method="auto" across thread counts and one-shot calls, vdpbf16ps'
flush of tiny products).
"""
import math

import numpy as np
import pytest

import convt
from convt._dispatch import plan as _plan
from convt._dispatch.guard import deliver
from convt._kernels import _cpu

from _helpers import same_bits, spy
from test_adversarial16 import BF, _child, _dt, arrays, oracle_violations

ml_dtypes = pytest.importorskip("ml_dtypes")


def _auto_layers():
    """Depthwise 2-D layers of 16 x 16 inputs, stride 2, kernels 8-17: where the cost model's
    choice between the direct kernel and FFT moves with ``workers`` (it prices each backend's
    threads differently), for the dtype ``float16``."""
    for k in (8, 11, 14, 17):
        for c in (1, 4, 16):
            w = np.random.default_rng(k).standard_normal((c, 3, k, k)).astype(np.float16)
            yield w, dict(group=c, strides=(2, 2)), (1, c, 16, 16)


@pytest.mark.parametrize("method", ["direct", "fft"])
def test_one_backend_gives_the_same_bits_for_any_worker_count(method):
    """README's promise, for one backend: on these layers "auto" picks the depthwise kernel
    for one worker and FFT for more (it prices the threads per backend), so its bits move
    with ``workers`` (as the README says); each backend's do not."""
    for w, kw, xs in _auto_layers():
        x = np.random.default_rng(0).standard_normal(xs).astype(np.float16)
        ys = {n: convt.ConvTranspose(w, **kw, method=method, workers=n)(x) for n in (1, 2, 3, 7)}
        assert all(same_bits(ys[n], ys[1]) for n in (2, 3, 7)), (w.shape, method)


_WINO_CHILD = """
import json, numpy as np, ml_dtypes
import test_found16 as t
print(json.dumps(t.winograd_overflow("bfloat16")))
"""


def winograd_overflow(dtname):
    """(variant, outputs not finite, largest |reference|) of a 2-D F(2, 2) layer whose one
    non-zero input, 3.9e37 (below the Winograd input bound 2^125 for 2-D layers), meets
    weights of 3.0: every exact output is one product, 1.19e38, inside the float32 range."""
    dt = _dt(dtname)
    x = np.zeros((1, 64, 6, 6), dt)
    x[0, 0, 3, 3] = 2.0 ** 124.9
    w = np.zeros((64, 64, 4, 4), dt)
    w[0] = 3.0
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    op = convt.ConvTranspose(w, method="direct", **kw)
    y = np.asarray(op(x), np.float64)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), method="reference",
                               **kw)
    return op._plan.geometry(x.shape).variant, int((~np.isfinite(y)).sum()), float(
        np.abs(ref).max())


@pytest.mark.skipif(_cpu.CPU_ISA < 1, reason="the Winograd variant needs the AVX2 level")
@pytest.mark.parametrize("where", ["float32", "bfloat16_avx2"])
def test_winograd_products_do_not_overflow_where_the_taps_do_not(where):
    """x = 3.9e37 and weights of 3.0: every exact output is one product, 1.19e38. wino_ready
    bounded |x| alone, and the products (sums of 4 taps, 12) gave Inf at 256 outputs; the
    bounds on x and the products' weights (winograd_layout.input_bits, product_bits) now
    send such data to the micro variant."""
    if where == "float32":
        if _cpu.ISA < 1:
            pytest.skip("capped below the AVX2 level")
        variant, bad, top = winograd_overflow("float32")
    else:
        variant, bad, top = _child("avx2", _WINO_CHILD)
    assert variant == "winograd" and top < 1.2e38
    assert bad == 0


@pytest.mark.skipif(_cpu.ISA < 1, reason="the Winograd variant needs the AVX2 level")
@pytest.mark.parametrize("one_shot", [False, True])
@pytest.mark.parametrize("layer", ["2d_f22", "1d_f23", "1d_channels_first", "1d_nxc", "3d_f22"])
def test_winograd_layers_stay_finite_where_the_reference_is(layer, one_shot):
    """An input and weights whose every exact output is in the float32 range, on each
    Winograd kernel (channels-first, channels-last, F(2, 2) and F(2, 3), one-shot late
    sums): no Inf or NaN, and the reference's values (the micro variant runs them)."""
    shapes = {"2d_f22": ((1, 64, 6, 6), (64, 64, 4, 4), dict(strides=(2, 2), pads=(1,) * 4)),
              "1d_f23": ((1, 64, 12), (64, 64, 3), dict(pads=(1, 1))),
              "1d_channels_first": ((1, 64, 256), (64, 64, 4), dict(strides=(2,), pads=(1, 1))),
              "1d_nxc": ((1, 256, 64), (64, 64, 4), dict(strides=(2,), pads=(1, 1),
                                                          data_format="NXC")),
              "3d_f22": ((1, 64, 6, 6, 6), (64, 64, 4, 4, 4),
                         dict(strides=(2, 2, 2), pads=(1,) * 6))}
    xs, ws, kw = shapes[layer]
    nd, nxc = len(ws) - 2, kw.get("data_format") == "NXC"
    # one input just under the old bound on x alone (2^(127 - nd)) meets weights of 3: each
    # output that reads it is one product, in range; a product weight sums 2 to 8 taps (or,
    # F(2, 3), halves 3): 256 to 512 outputs were Inf
    x = np.zeros(xs, np.float32)
    mid = tuple(s // 2 for s in (xs[1:-1] if nxc else xs[2:]))
    x[(0, *mid, 0) if nxc else (0, 0, *mid)] = 2.0 ** (126.9 - nd)
    w = np.zeros(ws, np.float32)
    w[0] = 3.0
    planned = convt.ConvTranspose(w, method="direct", **kw)._plan.geometry(x.shape)
    assert planned.variant == "winograd"
    call = (convt.conv_transpose if one_shot else
            lambda x, w, **k: convt.ConvTranspose(w, **k)(x))
    y = call(x, w, method="direct", **kw).astype(np.float64)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), method="reference",
                               **kw)
    fits = np.abs(ref) < float(np.finfo(np.float32).max)
    assert fits.all() and np.isfinite(y).all()
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=0)


@pytest.mark.skipif(not _cpu.bf16(), reason="no AVX512-BF16: bfloat16 runs the float32 kernels "
                    "pinned or not")
def test_a_pinned_plan_gives_the_bfloat16_bits_of_the_unpinned_call():
    x, w, b, kw = arrays("wino_f22", "bfloat16")
    op = convt.ConvTranspose(w, b, method="direct", workers=2, **kw)
    planned = op._plan.geometry(x.shape)
    assert planned.variant == "micro_bf16"
    # convt.dask pins the variant that runs the storage dtype (variant_choice with it): the
    # float32 kernels' other summation order gave other bits (0.02% of the outputs)
    pinned = op._plan.with_spec(op.spec, _plan.variant_choice(planned.geom, op._plan.dtype))
    assert same_bits(pinned(x), op(x))


def test_the_direct_backend_gives_the_prepared_bits_one_shot():
    """On this layer "auto" runs FFT prepared and the direct kernel one-shot (it prices the
    one-shot call's weight packing): other bits, as the README says; so does FFT alone (a
    one-shot call tiles its own way, docs/fft.md). The direct backend's agree."""
    method = "direct"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float16)
    w = rng.standard_normal((32, 32, 5, 5)).astype(np.float16)
    assert same_bits(convt.conv_transpose(x, w, method=method, workers=2),
                     convt.ConvTranspose(w, method=method, workers=2)(x))


def test_reference_rounds_the_float64_result_once_in_bfloat16():
    # ml_dtypes' cast goes float64 -> float32 -> bfloat16: 1 + 2^-8 + 2^-30 became the tie
    # 1 + 2^-8, then 1.0 (fixed: guard._bfloat16_once)
    x = np.array([[[1.0], [2.0 ** -8], [2.0 ** -30]]]).astype(BF)   # (N, C_in = 3, 1)
    w = np.ones((3, 1, 1), BF)
    y = convt.conv_transpose(x, w, method="reference")
    assert float(y.reshape(-1)[0]) == 1 + 2.0 ** -7


def _bf16_nearest_even(v):
    """The bfloat16 nearest ``v`` (ties to even), by hand: Python's round() on the value over
    its ulp (exact in float64 for every finite float64 in bfloat16's range)."""
    if math.isnan(v) or math.isinf(v) or v == 0:
        return v
    ulp = 2.0 ** (max(math.floor(math.log2(abs(v))), -126) - 7)
    r = round(v / ulp) * ulp
    return math.copysign(math.inf, v) if abs(r) > float(ml_dtypes.finfo(BF).max) else r


def test_float64_to_bfloat16_rounds_once_over_the_range():
    rng = np.random.default_rng(7)
    n = 20000
    # values with bits just past bfloat16's and float32's last places, ties, subnormals, the
    # edge of the range, and the specials
    y = np.concatenate([
        rng.standard_normal(n) * np.exp2(rng.integers(-140, 129, n)),
        (1 + rng.integers(0, 2 ** 9, n) * 2.0 ** -9 + rng.choice([0, 2.0 ** -30, -2.0 ** -30], n))
        * np.exp2(rng.integers(-133, 128, n)) * rng.choice([-1, 1], n),
        [np.inf, -np.inf, np.nan, 0.0, -0.0, 3.3895e38, 3.3896e38, 3.4e38, 1e39, -1e39,
         2.0 ** -133 * 1.5, 2.0 ** -134, 2.0 ** -135, 2.0 ** -134 * 1.0000001]])
    got = deliver(y, np.dtype(BF), None).astype(np.float64)
    want = np.array([_bf16_nearest_even(v) for v in y])
    assert np.array_equal(got, want, equal_nan=True)
    out = np.empty(y.shape, BF)
    assert deliver(y, np.dtype(BF), out) is out
    assert same_bits(out, got.astype(BF))


@pytest.mark.skipif(not _cpu.bf16(), reason="no AVX512-BF16: the float32 kernels keep them")
def test_pair_tiles_flush_products_below_2_126():
    """docs/precision.md: vdpbf16ps flushes a product below 2^-126 of normal bfloat16
    values (x = w = 2^-64: every output 0 on micro_bf16), where the float32 kernels keep it
    (CONVT_ISA=avx2 gives 1.9e-37 to 7.5e-37, the exact values' roundings)."""
    x = np.full((1, 64, 4, 4), 2.0 ** -64).astype(BF)
    w = np.full((64, 32, 3, 3), 2.0 ** -64).astype(BF)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    op = convt.ConvTranspose(w, method="direct", **kw)
    assert op._plan.geometry(x.shape).variant == "micro_bf16"
    assert not np.asarray(op(x), np.float32).any()
    kept = convt.ConvTranspose(w.astype(np.float32), method="direct", **kw)(x.astype(np.float32))
    assert not oracle_violations(kept.astype(BF), x, w, np.zeros(32, BF), kw).any()

@pytest.mark.parametrize("dtname", ["float16", "bfloat16"])
@pytest.mark.parametrize("layer", [((1, 64, 64), (64, 32, 4), dict(strides=(2,), pads=(1, 1))),
                                   ((1, 32, 8, 8), (32, 16, 2, 2), dict(strides=(2, 2)))])
def test_an_unaligned_16_bit_out_gets_the_bits(layer, dtname, monkeypatch):
    """An out at an odd address (review, 2026-11-27): the kernels' 16-bit stores would be
    misaligned uint16_t stores, undefined in C; the plan stages the float32 result and
    rounds it in a pass instead."""
    xs, ws, kw = layer
    dt = _dt(dtname)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(xs).astype(dt), rng.standard_normal(ws).astype(dt)
    op = convt.ConvTranspose(w, **kw)
    want = op(x)
    raw = np.zeros(want.nbytes + 1, np.uint8)
    out = raw[1:].view(dt).reshape(want.shape)
    assert not out.flags.aligned
    passes = spy(monkeypatch, _plan, "deliver")
    assert op(x, out=out) is out and same_bits(out, want)
    assert len(passes) == 1   # rounded in the plan's pass, not by the kernel's stores
