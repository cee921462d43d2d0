"""Checks before allocation (convt._dispatch.guard): calls that would need more memory than the
machine are refused, geometries beyond 64-bit indexing are refused, 64-bit index arithmetic
on a cheap geometry with offsets far beyond 2**31; and ``out=`` on every entry point."""
import os
import re
import tracemalloc

import numpy as np
import pytest

import convt
from convt._dispatch import guard as _guard
from convt._dispatch.guard import MemoryLimitError, estimate_bytes


@pytest.fixture
def limit(monkeypatch):
    def set_limit(n):
        monkeypatch.setattr(_guard, "MEMORY_LIMIT", n)
    return set_limit


def test_refused_before_any_allocation(limit):
    limit(1 << 30)
    x = np.ones((1, 1, 8, 8), np.float32)
    w = np.ones((1, 1, 2, 2), np.float32)
    msg = ("conv_transpose: 'x' needs about 4 GiB for an output of shape (1, 1, 32768, 32768) "
           "(float32, method 'direct'), more than the 1 GiB memory limit (physical memory, or "
           "CONVT_MEMORY_LIMIT); got (1, 1, 8, 8)")
    tracemalloc.start()
    try:
        with pytest.raises(MemoryLimitError, match=re.escape(msg)):
            convt.conv_transpose(x, w, output_shape=(32768, 32768), method="direct")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak     # nothing near the 4 GiB output was allocated


def test_limit_error_is_a_memory_error_and_a_value_error(limit):
    limit(1 << 20)
    x, w = np.ones((1, 1, 8, 8)), np.ones((1, 1, 2, 2))
    for exc in (MemoryError, ValueError):
        with pytest.raises(exc, match=re.escape("conv_transpose: 'x' needs about")):
            convt.conv_transpose(x, w, output_shape=(1024, 1024))


def test_absurd_output_refused_by_physical_memory():
    x, w = np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 2, 2), np.float32)
    with pytest.raises(MemoryLimitError, match=re.escape(
            "onnx (opset 11): 'X' needs about 3.73e+03 GiB for an output of shape "
            "(1, 1, 1000000, 1000000)")):
        convt.onnx.conv_transpose(x, w, output_shape=[10**6, 10**6])


def test_environment_variable_sets_the_limit(monkeypatch):
    monkeypatch.setattr(_guard, "MEMORY_LIMIT", None)
    monkeypatch.setenv("CONVT_MEMORY_LIMIT", str(1 << 16))   # the call needs ~200 KiB
    src, wts = np.ones((1, 64, 64, 4), np.float32), np.ones((4, 4, 8, 4), np.float32)
    kw = dict(strides=[1, 1], dilations=[1, 1], pads_begin=[0, 0], pads_end=[0, 0])
    with pytest.raises(MemoryLimitError, match=re.escape("onednn: 'src' needs about")):
        convt.onednn.conv_transpose(src, wts, **kw)
    monkeypatch.setenv("CONVT_MEMORY_LIMIT", str(1 << 30))
    assert convt.onednn.conv_transpose(src, wts, **kw).shape == (1, 67, 67, 8)


@pytest.mark.parametrize("text", ["abc", "1 GB", "nan", "-1", "0", ""])
def test_environment_variable_must_be_a_positive_number(text, monkeypatch):
    monkeypatch.setattr(_guard, "MEMORY_LIMIT", None)
    monkeypatch.setenv("CONVT_MEMORY_LIMIT", text)
    x, w = np.ones((1, 1, 4), np.float32), np.ones((1, 1, 3), np.float32)
    if not text:   # unset or empty: the machine's memory
        assert convt.conv_transpose(x, w).shape == (1, 1, 6)
        return
    with pytest.raises(ValueError, match=re.escape(
            "convt: the environment variable CONVT_MEMORY_LIMIT must be a positive number of "
            f"bytes (e.g. 8e9, or inf for no limit); got {text!r}")):
        convt.conv_transpose(x, w)
    monkeypatch.setenv("CONVT_MEMORY_LIMIT", "inf")      # no limit
    assert _guard.memory_limit() == 2**63
    assert convt.conv_transpose(x, w).shape == (1, 1, 6)


def test_fft_buffers_are_counted(limit):
    """The kernel spectra of method='fft' are far larger than this call's output: the FFT
    call is refused, the direct one (same output) is not."""
    x = np.ones((1, 64, 512), np.float32)
    w = np.ones((64, 64, 255), np.float32)
    geom = convt.ConvTranspose(w, method="direct").geometry(x.shape)
    direct, fft = (estimate_bytes(geom, m, np.float32) for m in ("direct", "fft"))
    assert fft > 4 * direct
    limit((direct + fft) // 2)
    assert convt.conv_transpose(x, w, method="direct").shape == (1, 64, 766)
    with pytest.raises(MemoryLimitError, match="method 'fft'"):
        convt.conv_transpose(x, w, method="fft")


ESTIMATE_CASES = [
    ((2, 32, 32, 32), (32, 16, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)), "direct"),
    ((1, 8, 16, 16), (8, 8, 3, 3), dict(dilations=(4, 4)), "direct"),
    ((2, 32, 64, 64), (32, 1, 4, 4), dict(group=32, strides=(2, 2)), "direct"),
    ((2, 16, 2000), (16, 16, 255), {}, "fft"),
    ((2, 16, 32, 32), (16, 8, 3, 3), dict(strides=(2, 2)), "reference"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("xs, ws, kw, method", ESTIMATE_CASES)
def test_estimate_is_the_size_of_what_a_call_holds(xs, ws, kw, method, dtype):
    """The estimate against the peak NumPy allocation (tracemalloc) of a planned call: the
    same order of magnitude (measured 0.7x-2.8x; the FFT estimate also counts the kernel
    spectra the plan already holds)."""
    x, w = np.ones(xs, dtype), np.ones(ws, dtype)
    op = convt.ConvTranspose(w, method=method, **kw)
    op(x)
    tracemalloc.start()
    try:
        op(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    peak += op._plan.stage.nbytes()   # a 16-bit call's float32 result, kept from the first
    if method == "fft":   # its working arrays, kept in the plan's workspace from the first call
        peak += op._plan.workspace.nbytes()
    est = estimate_bytes(op.geometry(x.shape), method, dtype)
    assert 0.5 * peak <= est <= 4 * peak, (est, peak)


def test_frame_beyond_64_bit_indexing_is_refused():
    x, w = np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 2, 2), np.float32)
    d = 2**40
    with pytest.raises(ValueError, match=re.escape(
            "conv_transpose: 'x' with these attributes spans a frame of")):
        convt.conv_transpose(x, w, dilations=(d, d), pads=(d, d, 0, 0))
    with pytest.raises(ValueError, match=re.escape("onnx (opset 11): 'X' with these")):
        convt.onnx.conv_transpose(x[..., 0], w[..., 0], dilations=[2**57], pads=[2**57, 0])
    # a dilation past the indices, on a kernel axis of length 1 (which spans one position
    # whatever it is): an OverflowError deep in the planning before (the fuzz's case)
    for d in (2**58, 2**63):
        with pytest.raises(ValueError, match=re.escape(
                f"conv_transpose: 'dilations' must be below 2**58 (the positions convt "
                f"indexes); got ({d}, 1)")):
            convt.conv_transpose(x, w[..., :1, :], strides=(2, 2), dilations=(d, 1))
    with pytest.raises(ValueError, match=re.escape("keras: 'dilations' must be below 2**58")):
        convt.keras.conv_transpose(np.ones((1, 5, 1), np.float32), np.ones((1, 1, 1), np.float32),
                                   strides=2, dilation_rate=2**63)
    # an output_shape that implies it: the message gives the output it asked for
    with pytest.raises(ValueError, match=re.escape(
            "output (1000000000, 1000000000)), beyond the 2**58 that convt indexes")):
        convt.conv_transpose(x, w, output_shape=(10**9, 10**9))


@pytest.mark.parametrize("c, method", [(1, "direct"), (4, "direct")], ids=["depthwise", "pixel"])
def test_64_bit_offsets_on_a_cheap_geometry(c, method):
    """Dilation and padding of 2**40: tap offsets, phase tables and range checks hold values
    far beyond 2**31 (a 32-bit index would wrap and read or write out of bounds), on a
    9-element output. With d = pb = 2**40, output o receives tap 1 of input o only."""
    d = 2**40
    x = np.arange(1, 2 * c * 4 + 1, dtype=np.float64).reshape(2, c, 4)
    w = np.zeros((c, c, 3))
    w[:, :, 1] = np.arange(1, c * c + 1).reshape(c, c)
    b = np.arange(c, dtype=np.float64)
    op = convt.ConvTranspose(w, b, dilations=(d,), pads=(d, d - 5), method=method)
    y = op(x)
    assert op._plan.geometry(x.shape).variant == ("depthwise" if c == 1 else "pixel")
    expect = np.zeros((2, c, 9)) + b[:, None]
    expect[:, :, :4] += np.einsum("nci,cm->nmi", x, w[:, :, 1])
    np.testing.assert_array_equal(y, expect)
    for m in ("fft", "reference"):   # their buffers would span the 2**41-long frame
        with pytest.raises(MemoryLimitError, match=f"method '{m}'"):
            convt.conv_transpose(x, w, b, dilations=(d,), pads=(d, d - 5), method=m)


# --- out= -------------------------------------------------------------------------------

X = np.random.default_rng(0).standard_normal((2, 4, 5, 5)).astype(np.float32)
W = np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype(np.float32)
B = np.random.default_rng(2).standard_normal(3).astype(np.float32)
KW = dict(strides=[2, 2], dilations=[1, 1], pads_begin=[1, 1], pads_end=[1, 1])
ENTRY_POINTS = {
    "conv_transpose": lambda out: convt.conv_transpose(X, W, B, strides=(2, 2),
                                                       pads=(1, 1, 1, 1), out=out),
    "ConvTranspose": lambda out: convt.ConvTranspose(W, B, strides=(2, 2),
                                                     pads=(1, 1, 1, 1))(X, out=out),
    "onnx": lambda out: convt.onnx.conv_transpose(X, W, B, strides=[2, 2], pads=[1, 1, 1, 1],
                                                  out=out),
    "openvino": lambda out: convt.openvino.convolution_backprop_data(X, W, **KW, out=out),
    "openvino grouped": lambda out: convt.openvino.group_convolution_backprop_data(
        X, W.reshape(1, 4, 3, 3, 3), **KW, out=out),
    "onednn": lambda out: convt.onednn.conv_transpose(X, W, B, data_format="NCX",
                                                      filter_format="IOX", **KW, out=out),
}


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_out_receives_the_result(name):
    call = ENTRY_POINTS[name]
    want = call(None)
    out = np.full(want.shape, np.nan, np.float32)
    got = call(out)
    assert got is out
    np.testing.assert_array_equal(out, want)


def test_out_nxc_layout():
    x = np.ascontiguousarray(np.moveaxis(X, 1, -1))
    out = np.empty((2, 9, 9, 3), np.float32)
    y = convt.conv_transpose(x, W, B, strides=(2, 2), pads=(1, 1, 1, 1), data_format="NXC",
                             out=out)
    assert y is out
    np.testing.assert_array_equal(np.moveaxis(out, -1, 1), ENTRY_POINTS["conv_transpose"](None))


OUT_ERRORS = [
    (lambda: np.empty((2, 3, 9, 10), np.float32), ValueError,
     "conv_transpose: 'out' must have the result's shape (2, 3, 9, 9); got (2, 3, 9, 10)"),
    (lambda: np.empty((2, 3, 9, 9), np.float64), TypeError,
     "conv_transpose: 'out' must have the result's dtype float32; got 'float64'"),
    (lambda: np.empty((2, 3, 9, 9), np.float32, order="F"), ValueError,
     "conv_transpose: 'out' must be C-contiguous; got 'strides (4, 8, 24, 216)'"),
    (lambda: np.empty((2, 3, 9, 18), np.float32)[..., ::2], ValueError,
     "conv_transpose: 'out' must be C-contiguous"),
    (lambda: np.lib.stride_tricks.as_strided(np.empty((2, 3, 9, 9), np.float32),
                                             writeable=False), ValueError,
     "conv_transpose: 'out' must be writeable; got 'a read-only array'"),
    (lambda: [[0.0]], TypeError, "conv_transpose: 'out' must be a numpy.ndarray; got 'list'"),
]


@pytest.mark.parametrize("make, exc, msg", OUT_ERRORS, ids=[m[30:70] for _, _, m in OUT_ERRORS])
def test_out_errors(make, exc, msg):
    out = make()
    with pytest.raises(exc, match=re.escape(msg)):
        ENTRY_POINTS["conv_transpose"](out)


def test_out_overlapping_an_input_is_refused_and_left_alone():
    buf = np.zeros(2 * 3 * 9 * 9 + X.size, np.float32)
    out = buf[:2 * 3 * 9 * 9].reshape(2, 3, 9, 9)
    x = buf[-X.size:].reshape(X.shape)   # the same buffer, but not out's part of it
    x[...] = X
    y = convt.conv_transpose(x, W, B, strides=(2, 2), pads=(1, 1, 1, 1), out=out)
    assert y is out                     # disjoint parts of one buffer are fine
    x2 = out.reshape(-1)[:X.size].reshape(X.shape)
    before = out.copy()
    with pytest.raises(ValueError, match=re.escape(
            "conv_transpose: 'out' must not share memory with the input 'x'")):
        convt.conv_transpose(x2, W, B, strides=(2, 2), pads=(1, 1, 1, 1), out=out)
    np.testing.assert_array_equal(out, before)
    w_out = np.empty((2, 3, 9, 9), np.float32)
    with pytest.raises(ValueError, match=re.escape(
            "onnx (opset 11): 'out' must not share memory with the input 'W'")):
        w = w_out.reshape(-1)[:W.size].reshape(W.shape)
        w[...] = W
        convt.onnx.conv_transpose(X, w, B, strides=[2, 2], pads=[1, 1, 1, 1], out=w_out)
    op = convt.ConvTranspose(W, B, strides=(2, 2), pads=(1, 1, 1, 1))
    with pytest.raises(ValueError, match=re.escape("'out' must not share memory with the "
                                                   "input 'x'")):
        op(x2, out=out)


def test_too_many_output_phases_are_refused():
    x, w = np.ones((1, 1, 2), np.float32), np.ones((1, 1, 1), np.float32)
    with pytest.raises(ValueError, match=re.escape(
            "openvino: 'strides' must have a product of at most 2**18 = 262144 (the output "
            "phases every backend plans); got (262145,)")):
        convt.openvino.convolution_backprop_data(x, w, strides=[2**18 + 1], dilations=[1],
                                                 pads_begin=[0], pads_end=[0])


def test_long_1d_channels_last_depthwise_counts_its_tables(limit):
    """Channels-last depthwise builds a 24-byte phase-table row per output position (80
    bytes at peak): a 2**31-long 1-D output is refused on the tables alone."""
    limit(100 << 30)
    x, w = np.ones((1, 2, 1), np.float32), np.ones((1, 1, 1), np.float32)
    with pytest.raises(MemoryLimitError, match=re.escape(
            "conv_transpose: 'x' needs about 168 GiB for an output of shape "
            "(1, 2147483648, 1)")):
        convt.conv_transpose(x, w, output_shape=(2**31,), data_format="NXC", method="direct")


@pytest.mark.skipif(os.environ.get("CONVT_BIG_TESTS") != "1",
                    reason="allocates 8 GiB; opt in with CONVT_BIG_TESTS=1")
def test_output_beyond_2_31_elements():
    """A real output of 2**31 + 1 elements (8 GiB of float32) from a 2-element input (the
    rest is bias): the channels-first depthwise kernel indexes it in 64 bits."""
    n = 2**31 + 1
    x = np.array([1.0, 2.0], np.float32).reshape(1, 1, 2)
    w = np.full((1, 1, 1), 3.0, np.float32)
    op = convt.ConvTranspose(w, np.array([0.5], np.float32), output_shape=(n,),
                             method="direct")
    assert op._plan.geometry(x.shape).variant == "depthwise"
    pb = op.geometry(x.shape).pads_begin[0]
    y = op(x).reshape(-1)
    assert y.size == n
    assert (y[-pb], y[1 - pb]) == (3.5, 6.5)
    step = 1 << 26
    assert sum(int(np.count_nonzero(y[i:i + step] != 0.5)) for i in range(0, n, step)) == 2
