"""The depthwise kernel's streamed stores (y's whole vectors past the caches, for outputs of
convt._backends.direct.depthwise._STREAM_BYTES or more): the same bits as ordinary stores at
every ISA level, for 1, 2 and 3 threads, into a new aligned y or the caller's ``out`` (aligned
or not); and traffic_probe, the traffic script's floor."""
import numpy as np
import pytest

import convt
from convt._backends.direct import depthwise as dw
from convt._kernels import _cpu
from convt._kernels._depthwise import traffic_probe

from test_depthwise import CASES, ROW_SWEEP, ROWS, _run


def _streamed(monkeypatch, on):
    monkeypatch.setattr(dw, "_STREAM_BYTES", 0 if on else 1 << 62)


def _bits(case, dtype, isa, on, monkeypatch, workers=None):
    monkeypatch.setattr(_cpu, "ISA", isa)
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)   # the zmm body even on Zen 4
    _streamed(monkeypatch, on)
    y, _ = _run(case, dtype, workers)
    return y.tobytes()


def _cases():
    cases = [(*row, 2, "NCX") for row in ROWS]
    cases += [((2, n), k, s, d, p, op, (2, 1, 1), 1, "NCX")
              for k, s, d, p, op in ROW_SWEEP for n in (1, 7, 8, 9, 16, 33, 64, 71, 130)]
    return cases + [c for c in CASES if c[-1] == "NCX" and c[-2] > 0]


@pytest.mark.parametrize("isa", _cpu.levels()[:3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_streamed_stores_give_the_same_bits(dtype, isa, monkeypatch):
    """Every path of the row kernel (blocks, single and masked vectors, partial last vectors,
    strides 1-4, phases without taps) streamed or not: bit for bit, and against the
    reference (test_depthwise's cases and row sweep)."""
    checked = 0
    for case in _cases():
        try:
            plain = _bits(case, dtype, isa, False, monkeypatch)
        except pytest.skip.Exception:   # pads that leave no output
            continue
        assert _bits(case, dtype, isa, True, monkeypatch) == plain, case
        checked += 1
    assert checked > 80


@pytest.mark.parametrize("isa", _cpu.levels()[:3])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_streamed_layer_any_thread_count(workers, isa, monkeypatch):
    """A layer past the default threshold (8 MiB of float32 y: depthwise_bilinear's shape at
    half the channels) gives the ordinary stores' bits for any thread count; its new y is
    C-contiguous, writable, 64-byte aligned, of the right shape and dtype."""
    monkeypatch.setattr(_cpu, "ISA", isa)
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)
    rng = np.random.default_rng(37)
    x = rng.standard_normal((1, 128, 64, 64)).astype(np.float32)
    w = rng.standard_normal((128, 1, 4, 4)).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1), group=128)
    op = convt.ConvTranspose(w, b, workers=workers, **kw)
    assert op._plan.geometry(x.shape).variant == "depthwise"
    y = op(x)
    assert y.nbytes >= dw._STREAM_BYTES
    assert y.shape == (1, 128, 128, 128) and y.dtype == np.float32
    assert y.flags.c_contiguous and y.flags.writeable
    assert y.__array_interface__["data"][0] % 64 == 0
    monkeypatch.setattr(dw, "_STREAM_BYTES", 1 << 62)
    np.testing.assert_array_equal(y, convt.ConvTranspose(w, b, workers=1, **kw)(x))
    ref = convt.conv_transpose(x[:, :8].astype(np.float64), w[:8].astype(np.float64),
                               b[:8].astype(np.float64), method="reference",
                               **dict(kw, group=8))
    np.testing.assert_allclose(y[:, :8], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("isa", _cpu.levels()[:3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width", [40, 42])
@pytest.mark.parametrize("offset", [0, 4, 8, 16, 32, 48])
def test_streamed_into_out_aligned_or_not(offset, width, dtype, isa, monkeypatch):
    """``out=`` at any 4-byte offset from a 64-byte line (a large numpy array is at 16): rows
    whose vectors are 64-byte aligned stream whole vectors, rows 16-byte aligned stream the
    16-byte parts inside their whole lines, the others store as before; the same bits either
    way, written in place, and nothing written outside ``out``. Rows of 80 values start where
    ``out`` does in their lines; rows of 84 (336 bytes) at every 16-byte offset in turn, so a
    run's rows are of both kinds."""
    monkeypatch.setattr(_cpu, "ISA", isa)
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)
    _streamed(monkeypatch, True)
    rng = np.random.default_rng(offset)
    x = rng.standard_normal((2, 6, 9, width)).astype(dtype)
    w = rng.standard_normal((6, 1, 4, 4)).astype(dtype)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1), group=6)
    op = convt.ConvTranspose(w, workers=2, **kw)
    shape = (2, 6, 18, 2 * width)
    n = int(np.prod(shape))
    raw = np.full(n + 64, np.nan, dtype)
    base = raw.__array_interface__["data"][0]
    at = (-base % 64 + offset) // raw.itemsize
    if (base + at * raw.itemsize) % 64 != offset:
        pytest.skip("offset not a multiple of the item size")
    out = raw[at:at + n].reshape(shape)
    assert op(x, out=out) is out
    assert np.isnan(raw[:at]).all() and np.isnan(raw[at + n:]).all()
    _streamed(monkeypatch, False)
    np.testing.assert_array_equal(out, op(x))


@pytest.mark.parametrize("n, r, offset", [(8, 1, 0), (64, 3, 0), (4096 * 3 + 8, 4, 0),
                                          (4096 * 2, 4, 1), (24, 2, 5)])
@pytest.mark.parametrize("workers", [1, 2])
def test_traffic_probe_values(n, r, offset, workers):
    """dst seen as (n / 8, r, 8) holds src seen as (n / 8, 1, 8) r times, dst aligned
    (streamed) or not (ordinary stores)."""
    src = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    raw = np.full(n * r + 32, np.nan, np.float32)
    at = (-raw.__array_interface__["data"][0] % 64) // 4 + offset
    dst = raw[at:at + n * r]
    traffic_probe(src, dst, workers)
    np.testing.assert_array_equal(dst.reshape(-1, r, 8),
                                  np.broadcast_to(src.reshape(-1, 1, 8), (n // 8, r, 8)))
    assert np.isnan(raw[:at]).all() and np.isnan(raw[at + n * r:]).all()


@pytest.mark.parametrize("n, m", [(12, 24), (0, 0), (16, 24)])
def test_traffic_probe_refuses_bad_lengths(n, m):
    with pytest.raises(ValueError, match=rf"traffic_probe: src must hold a positive multiple "
                                         rf"of 8 values and dst a multiple of src's; got {n} "
                                         rf"and {m}"):
        traffic_probe(np.zeros(n, np.float32), np.zeros(m, np.float32), 1)
