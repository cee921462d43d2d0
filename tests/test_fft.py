"""The FFT backend against the reference: geometry sweep, dtypes, layouts, front ends, the
overlap-add path, the kernel-spectrum cache and thread-count determinism."""
import itertools

import numpy as np
import pytest

import convt
import convt._backends.fft as fft_mod
import convt._backends.fft_blocks as blocks_mod
import convt.onednn
import convt.onnx
import convt.openvino

from _helpers import spy
from conftest import DTYPES, assert_close, np_dtype


def _natural(size, strides, kern, dil, op):
    return [(i - 1) * s + (k - 1) * d + 1 + o for i, s, k, d, o in
            zip(size, strides, kern, dil, op)]


def _geometries():
    """Deterministic sweep: rank x stride x dilation x kernel, with random pads (or an
    output_shape up to 4 larger than natural: negative canonical pads), op, groups, batch."""
    rng = np.random.default_rng(404)
    cases = []
    for nd in (1, 2, 3):
        for s, d, k in itertools.product((1, 2, 3, 4), (1, 2, 3), (1, 2, 3, 6)):
            if nd == 3 and rng.random() < 0.7:   # keep 3-D from dominating the runtime
                continue
            strides = tuple(int(v) for v in rng.integers(1, s + 1, nd - 1)) + (s,)
            dil = tuple(int(v) for v in rng.integers(1, d + 1, nd - 1)) + (d,)
            kern = tuple(int(v) for v in rng.integers(1, k + 1, nd - 1)) + (k,)
            op = tuple(int(rng.integers(0, max(a, b))) for a, b in zip(strides, dil))
            groups, cg, mg = [(1, 3, 2), (2, 2, 3), (4, 1, 1), (3, 1, 2)][int(rng.integers(4))]
            batch = (0, 1, 3)[int(rng.integers(3))]
            size = tuple(int(v) for v in rng.integers(1, (12, 7, 4)[nd - 1], nd))
            kw = dict(strides=strides, dilations=dil, output_padding=op, group=groups)
            if rng.random() < 0.3:
                nat = _natural(size, strides, kern, dil, op)
                kw["output_shape"] = [max(1, v + int(rng.integers(-2, 5))) for v in nat]
            else:
                kw["pads"] = tuple(int(v) for v in rng.integers(0, 4, 2 * nd))
            fmt = "NXC" if rng.random() < 0.3 else "NCX"
            cases.append((size, kern, groups, cg, mg, batch, fmt, kw))
    return cases


GEOMS = _geometries()


def _make(case, rng, dtype=np.float64):
    size, kern, groups, cg, mg, batch, fmt, kw = case
    x = rng.standard_normal((batch, groups * cg, *size))
    if fmt == "NXC":
        x = np.moveaxis(x, 1, -1)
    w = rng.standard_normal((groups * cg, mg, *kern))
    b = rng.standard_normal(groups * mg)
    return x.astype(dtype), w.astype(dtype), b.astype(dtype), dict(kw, data_format=fmt)


def _reference(x, w, b, kw):
    f64 = [None if a is None else np.asarray(a, np.float64) for a in (x, w, b)]
    return convt.conv_transpose(*f64, method="reference", **kw)


def _valid(x, w, b, kw):
    try:
        return _reference(x, w, b, kw)
    except ValueError as e:   # pads that leave no output: fft must refuse alike
        with pytest.raises(ValueError, match=str(e)[:40]):
            convt.conv_transpose(x, w, b, method="fft", **kw)
        return None


@pytest.mark.parametrize("case", GEOMS, ids=[f"g{i}" for i in range(len(GEOMS))])
def test_fft_matches_reference(case):
    rng = np.random.default_rng(hash(str(case)) % 2**32)
    x, w, b, kw = _make(case, rng)
    ref = _valid(x, w, b, kw)
    if ref is not None:
        assert_close(convt.conv_transpose(x, w, b, method="fft", **kw), ref, "fft", "float64")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", GEOMS[::7], ids=[f"g{i}" for i in range(0, len(GEOMS), 7)])
def test_fft_dtypes(case, dtype):
    dt = np_dtype(dtype)
    x, w, b, kw = _make(case, np.random.default_rng(7), dt)
    ref = _valid(x, w, b, kw)
    if ref is not None:
        assert_close(convt.conv_transpose(x, w, b, method="fft", **kw), ref, "fft", dtype)


@pytest.mark.parametrize("case", GEOMS[::3], ids=[f"g{i}" for i in range(0, len(GEOMS), 3)])
def test_overlap_add_path(case, monkeypatch):
    """A budget of a few KiB forces tiles (and batch chunks of one) wherever they fit."""
    monkeypatch.setattr(fft_mod, "FFT_MEMORY_BUDGET", 4096)
    size, kern, groups, cg, mg, batch, fmt, kw = case
    big = [v * 3 for v in size]
    if "output_shape" in kw:   # keep its distance from the natural length (negative pads)
        args = kern, kw["dilations"], kw["output_padding"]
        kw = dict(kw, output_shape=[
            max(1, o - a + b) for o, a, b in zip(kw["output_shape"],
                                                 _natural(size, kw["strides"], *args),
                                                 _natural(big, kw["strides"], *args))])
    case = (big, kern, groups, cg, mg, batch, fmt, kw)
    x, w, b, kw = _make(case, np.random.default_rng(11))
    ref = _valid(x, w, b, kw)
    if ref is None:
        return
    op = convt.ConvTranspose(w, b, method="fft", **kw)
    assert_close(op(x), ref, "fft", "float64")


def test_overlap_add_is_used_and_chunks_batch(monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 50, 40))
    w = rng.standard_normal((4, 2, 7, 5))
    ref = _reference(x, w, None, dict(strides=(2, 1), pads=(3, 1, 2, 0)))
    monkeypatch.setattr(fft_mod, "FFT_MEMORY_BUDGET", 200_000)
    op = convt.ConvTranspose(w, strides=(2, 1), pads=(3, 1, 2, 0), method="fft")
    planned = op._plan.geometry(x.shape)
    assert planned.variant == "fft-overlap-add"
    lay = planned.state[0]
    assert lay.kernel_bytes <= 100_000 and lay.chunk < 3
    assert_close(op(x), ref, "fft", "float64")


def test_large_kernel_float32():
    """The regime FFT exists for: normwise error well inside the float32 tolerance."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 40, 36)).astype(np.float32)
    w = rng.standard_normal((6, 4, 21, 17)).astype(np.float32)
    ref = _reference(x, w, None, dict(pads=(10, 8, 10, 8)))
    y = convt.conv_transpose(x, w, pads=(10, 8, 10, 8), method="fft")
    assert_close(y, ref, "fft", "float32")


def test_kernel_spectrum_once_per_length(monkeypatch):
    calls = spy(monkeypatch, fft_mod, "kernel_spectrum")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 2, 9))
    x = rng.standard_normal((2, 3, 30))
    op = convt.ConvTranspose(w, method="fft")
    y1, y2 = op(x), op(x)
    assert len(calls) == 1
    np.testing.assert_array_equal(y1, y2)
    y3 = op(x[:1])                 # another batch: the same transform lengths, kept spectra
    assert len(calls) == 1
    np.testing.assert_allclose(y3, y1[:1], rtol=1e-12, atol=1e-12)
    assert op._plan.geometry(x[..., :20].shape).state[0].small \
        != op._plan.geometry(x.shape).state[0].small
    assert len(calls) == 2         # another length: another spectrum
    convt.conv_transpose(x, w, method="fft")
    convt.conv_transpose(x, w, method="fft")
    assert len(calls) == 4         # the one-shot call keeps nothing between calls


def test_bias_only_positions_and_empty_batch():
    # output_shape far beyond the natural length: the tail holds only the bias
    x = np.ones((1, 1, 3))
    w = np.ones((1, 2, 2))
    b = np.array([5.0, -1.0])
    y = convt.conv_transpose(x, w, b, output_shape=[9], method="fft")
    ref = _reference(x, w, b, dict(output_shape=[9]))
    assert_close(y, ref, "fft", "float64")
    y0 = convt.conv_transpose(np.ones((0, 1, 3)), w, b, method="fft")
    assert y0.shape == (0, 2, 4) and y0.dtype == np.float64


def test_memory_order_and_read_only():
    rng = np.random.default_rng(9)
    x = np.asfortranarray(rng.standard_normal((2, 4, 9, 7)))
    x.flags.writeable = False
    w = rng.standard_normal((4, 3, 5, 5))[:, :, ::-1]
    kw = dict(strides=(2, 3), pads=(1, 2, 0, 1))
    y = convt.conv_transpose(x[:, :, ::2], w, method="fft", **kw)
    assert y.flags.c_contiguous
    assert_close(y, _reference(x[:, :, ::2], w, None, kw), "fft", "float64")


def test_threads_bit_identical(monkeypatch):
    monkeypatch.setattr(blocks_mod, "_MIN_THREADED_CMACS", 0)   # split the GEMM over threads too
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 16, 64, 60)).astype(np.float32)
    w = rng.standard_normal((16, 16, 9, 9)).astype(np.float32)
    y1 = convt.conv_transpose(x, w, method="fft", workers=1)
    y2 = convt.conv_transpose(x, w, method="fft", workers=2)
    np.testing.assert_array_equal(y1, y2)


def test_auto_picks_fft_for_large_kernels():
    w = np.zeros((16, 16, 31, 31), np.float32)
    assert convt.ConvTranspose(w).method_for((1, 16, 128, 128)) == "fft"
    assert convt.ConvTranspose(np.zeros((8, 8, 255), np.float32)).method_for((4, 8, 16000)) \
        == "fft"
    assert convt.ConvTranspose(np.zeros((8, 4, 3, 3), np.float32),
                               strides=(2, 2)).method_for((1, 8, 32, 32)) == "direct"


# Front ends: each convention's attributes through method="fft" against its own reference.
_FRONT_CASES = [
    ("onnx1", lambda x, w, b, m: convt.onnx.conv_transpose(
        x, w, b[:3], opset=1, auto_pad="SAME_UPPER", strides=[2, 1], output_shape=[13, 9],
        method=m)),
    ("onnx11", lambda x, w, b, m: convt.onnx.conv_transpose(
        x, w, b, strides=[3, 2], dilations=[2, 1], pads=[2, 0, 1, 3], output_padding=[1, 0],
        group=2, method=m)),
    ("openvino", lambda x, w, b, m: convt.openvino.convolution_backprop_data(
        x, w, [16, 11], strides=[2, 2], dilations=[1, 2], auto_pad="same_lower", method=m)),
    ("openvino-group", lambda x, w, b, m: convt.openvino.group_convolution_backprop_data(
        x, w.reshape(2, 2, *w.shape[1:]), strides=[1, 2], pads_begin=[1, 0], pads_end=[2, 1],
        dilations=[1, 1], method=m)),
    ("onednn", lambda x, w, b, m: np.moveaxis(convt.onednn.conv_transpose(
        np.moveaxis(x, 1, -1), np.moveaxis(w, (0, 1), (-1, -2)), b, strides=[2, 2],
        pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1], auto_pad="same_upper",
        groups=2, method=m), -1, 1)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("front", _FRONT_CASES, ids=[f[0] for f in _FRONT_CASES])
def test_front_ends(front, dtype):
    name, call = front
    if name == "onednn" and dtype == "float64":
        pytest.skip("oneDNN Graph has no f64")
    rng = np.random.default_rng(21)
    dt = np.dtype(dtype)
    x = rng.standard_normal((2, 4, 7, 5)).astype(dt)
    w = rng.standard_normal((4, 3, 4, 3)).astype(dt)
    b = rng.standard_normal(6).astype(dt)
    # the reference rounds its float64 result once to dtype: 6e-8 relative in float32
    ref = call(x, w, b, "reference").astype(np.float64)
    assert_close(call(x, w, b, "fft"), ref, "fft", dtype)
