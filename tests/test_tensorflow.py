"""convt.tensorflow against tf.nn.conv_transpose / conv1d / conv2d / conv3d_transpose.

Three layers: the committed golden fixtures (made by docs/scripts/fixtures_tensorflow.py with
the real TensorFlow: every output matches, every refusal raises), the op's definition -- the
adjoint (gradient) of a forward convolution written out here in NumPy -- over a parametrized
space, with the translator's ``_canonical`` describing every call, and, where TensorFlow is
importable, fresh random cases against it.
"""

import numpy as np
import pytest

import convt
from convt._backends.reference import conv_transpose_reference
from conftest import (DTYPES, FIXTURES, assert_close, fixture_arrays, fixture_cases,
                      fixture_output, np_dtype)

T = convt.tensorflow
FIXTURE = FIXTURES / "tensorflow.json.gz"
CASES = fixture_cases("tensorflow")
TOL = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-2, "bfloat16": 2e-2}



def test_fixture_file_is_small_and_varied():
    assert FIXTURE.stat().st_size < 300_000
    assert {c["fn"] for c in CASES} == {"conv_transpose", "conv1d_transpose",
                                        "conv2d_transpose", "conv3d_transpose"}
    assert sum("error" in c for c in CASES) > 50 and sum("y" in c for c in CASES) > 300
    assert sum("derived" in c for c in CASES) > 20           # CPU-kernel gaps, computed
    assert any(c["error"]["type"] == "crash" for c in CASES if "error" in c)
    assert any(isinstance(c["kwargs"]["padding"], list) for c in CASES if "y" in c)
    assert any(str(c["kwargs"].get("data_format", "")).startswith("NC") for c in CASES
               if "y" in c)


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['fn']}" for i, c in enumerate(CASES)])
def test_fixture(case):
    x, w = fixture_arrays(case)
    fn = getattr(T, case["fn"])
    if "error" in case:
        with pytest.raises((ValueError, TypeError), match="^tensorflow: "):
            fn(x, w, **case["kwargs"])
        return
    y = fn(x, w, **case["kwargs"])
    want = fixture_output(case)
    assert y.shape == want.shape and y.dtype == want.dtype
    tol = TOL[case["dtype"]]
    want = want.astype(np.float64)
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol * scale)


# -- the op's definition: the gradient of a forward convolution -------------------------------

def forward_conv(u, w_oix, strides, dilations, pads_before, out_len):
    """tf.nn.convolution's forward pass on NCX ``u`` with filters (C_out, C_in, *K) (u has
    C_out channels here: the transposed op's output), zero padding ``pads_before`` at the
    start and enough at the end; output of spatial shape ``out_len``."""
    n = u.shape[0]
    kernel = w_oix.shape[2:]
    need = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out_len, strides, kernel,
                                                                 dilations)]
    size = [max(pb + length, nn) for pb, length, nn in zip(pads_before, u.shape[2:], need)]
    padded = np.zeros((n, u.shape[1], *size))
    padded[(slice(None), slice(None), *(slice(pb, pb + length) for pb, length
                                        in zip(pads_before, u.shape[2:])))] = u
    y = np.zeros((n, w_oix.shape[1], *out_len))
    for k in np.ndindex(*kernel):
        idx = tuple(slice(kk * d, kk * d + (o - 1) * s + 1, s)
                    for kk, d, o, s in zip(k, dilations, out_len, strides))
        y += np.einsum("nc...,ci->ni...", padded[(slice(None), slice(None), *idx)],
                       w_oix[(Ellipsis, *k)])
    return y


def _draw(rng, nd, first, mode):
    s = [int(v) for v in rng.integers(1, 4, nd)]
    d = [int(v) for v in rng.integers(1, 3, nd)]
    k = [int(v) for v in rng.integers(1, 4, nd)]
    i = [int(v) for v in rng.integers(1, 5, nd)]
    ext = [(kk - 1) * dd + 1 for kk, dd in zip(k, d)]
    pads = [[int(a), int(b)] for a, b in rng.integers(0, 3, (nd, 2))]
    lengths, before = [], []
    for a in range(nd):
        full = (i[a] - 1) * s[a] + ext[a]
        if sum(pads[a]) >= full:
            pads[a] = [0, 0]
        if mode == "SAME":
            length = int(rng.integers((i[a] - 1) * s[a] + 1, i[a] * s[a] + 1))
            before.append(max(0, full - length) // 2)
        else:
            extra = sum(pads[a]) if mode == "EXPLICIT" else 0
            length = int(rng.integers(full - extra, full - extra + s[a]))
            before.append(pads[a][0] if mode == "EXPLICIT" else 0)
        lengths.append(length)
    n, c_in, c_out = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
    x = rng.standard_normal((n, c_in, *i) if first else (n, *i, c_in))
    w = rng.standard_normal((*k, c_out, c_in))
    os_ = [n, c_out, *lengths] if first else [n, *lengths, c_out]
    padding = mode
    if mode == "EXPLICIT":
        padding = [[0, 0], [0, 0], *pads] if first else [[0, 0], *pads, [0, 0]]
    fmt = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}[nd][first]
    kw = dict(output_shape=os_, strides=s, padding=padding, data_format=fmt, dilations=d)
    return x, w, kw, before


CASES_DEF = [(nd, first, mode) for nd in (1, 2, 3) for first in (False, True)
             for mode in ("SAME", "VALID", "EXPLICIT") if mode != "EXPLICIT" or nd == 2]


@pytest.mark.parametrize("nd,first,mode", CASES_DEF)
def test_adjoint_of_forward_convolution(nd, first, mode):
    """<conv(u), x> == <u, conv_transpose(x)>: the op is the forward convolution's gradient
    with respect to its input, whose padding before each axis is TensorFlow's."""
    rng = np.random.default_rng(nd * 10 + first * 3 + len(mode))
    for _ in range(8):
        x, w, kw, before = _draw(rng, nd, first, mode)
        y = T.conv_transpose(x, w, **kw)
        assert y.shape == tuple(kw["output_shape"])
        x_ncx = x if first else np.moveaxis(x, -1, 1)
        y_ncx = y if first else np.moveaxis(y, -1, 1)
        u = rng.standard_normal(y_ncx.shape)
        w_oix = np.moveaxis(np.moveaxis(w, -2, 0), -1, 1)   # (C_out, C_in, *K)
        fu = forward_conv(u, w_oix, kw["strides"], kw["dilations"], before, x_ncx.shape[2:])
        np.testing.assert_allclose(np.vdot(fu, x_ncx), np.vdot(u, y_ncx), rtol=1e-11,
                                   atol=1e-11)


@pytest.mark.parametrize("nd,first,mode", CASES_DEF)
def test_canonical_describes_the_call(nd, first, mode):
    rng = np.random.default_rng(100 + nd * 10 + first * 3 + len(mode))
    for _ in range(6):
        x, w, kw, _ = _draw(rng, nd, first, mode)
        c = T._canonical(x.shape, w.shape, **kw)
        assert c.convention == "tensorflow" and c.geometry.data_format == "NCX"
        assert not c.has_bias and not c.unbatched and c.w_flip == ()
        ref = conv_transpose_reference(x.transpose(c.x_axes), w.transpose(c.w_axes), None,
                                       c.geometry).transpose(c.y_axes)
        np.testing.assert_allclose(T.conv_transpose(x, w, **kw), ref, rtol=1e-12,
                                   atol=1e-12)


def test_canonical_validates_as_the_function_does():
    with pytest.raises(ValueError, match="'output_shape' does not fit"):
        T._canonical((1, 3, 3, 2), (3, 3, 4, 2), output_shape=[1, 7, 7, 4], strides=2)
    with pytest.raises(ValueError, match="'bias' does not exist"):
        T._canonical((1, 3, 3, 2), (3, 3, 4, 2), (4,), output_shape=[1, 6, 6, 4], strides=2)
    c = T._canonical((1, 3, 2), (3, 4, 2), output_shape=[1, 6, 4], strides=2,
                     function="conv1d_transpose")
    assert c.y_axes == (0, 2, 1) and c.geometry.out_shape == (6,)
    assert all(type(v) is int for v in c.geometry.in_shape + c.geometry.pads_end)
    with pytest.raises(ValueError, match="'function' must be one of"):
        T._canonical((1, 3, 2), (3, 4, 2), output_shape=[1, 6, 4], function="conv4d")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", ["direct", "fft", "reference"])
def test_dtypes_and_methods(dtype, method):
    rng = np.random.default_rng(5)
    x, w, kw, _ = _draw(rng, 2, False, "SAME")
    want = T.conv_transpose(x, w, **kw, method="reference")
    dt = np_dtype(dtype)
    y = T.conv_transpose(x.astype(dt), w.astype(dt), **kw, method=method)
    backend = "reference" if method == "reference" else method
    assert_close(y, want, backend if (backend, dtype) != ("reference", "float64") else
                 "reference", dtype)


def test_length_range_and_crop_window():
    """One input, every accepted length: a shorter SAME output moves the crop window."""
    x = np.arange(1.0, 4.0).reshape(1, 3, 1)
    w = np.ones((3, 1, 1))
    full = T.conv1d_transpose(x, w, [1, 7, 1], 2, "VALID")[0, :, 0]   # F = 7
    assert full.tolist() == [1, 1, 3, 2, 5, 3, 3]
    six = T.conv1d_transpose(x, w, [1, 6, 1], 2)[0, :, 0]         # T = 1: crop 0 | 1
    five = T.conv1d_transpose(x, w, [1, 5, 1], 2)[0, :, 0]        # T = 2: crop 1 | 1
    assert six.tolist() == full[:6].tolist() and five.tolist() == full[1:6].tolist()
    eight = T.conv1d_transpose(x, w, [1, 8, 1], 2, "VALID")[0, :, 0]
    assert eight.tolist() == full.tolist() + [0.0]                  # VALID: zeros at the end
    for bad in (4, 7):
        with pytest.raises(ValueError, match=r"must be in \[5, 6\]"):
            T.conv1d_transpose(x, w, [1, bad, 1], 2)


def test_argument_forms():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 3, 3, 2)), rng.standard_normal((3, 3, 4, 2))
    want = T.conv2d_transpose(x, w, [1, 6, 6, 4], [2, 2])
    for strides in (2, [2], (2, 2), [1, 2, 2, 1], np.array([2, 2])):
        np.testing.assert_array_equal(T.conv2d_transpose(x, w, [1, 6, 6, 4], strides), want)
    np.testing.assert_array_equal(T.conv2d_transpose(x, w, [6, 6], 2), want)   # spatial only
    np.testing.assert_array_equal(T.conv2d_transpose(x, w, np.array([1, 6, 6, 4]), 2), want)
    np.testing.assert_array_equal(T.conv_transpose(x, w, (1, 6, 6, 4), 2, data_format=None),
                                  want)
    one = T.conv2d_transpose(x, w, [1, 3, 3, 4], None)                 # strides None: 1
    np.testing.assert_array_equal(one, T.conv2d_transpose(x, w, [1, 3, 3, 4], 1))
    nchw = T.conv2d_transpose(x.transpose(0, 3, 1, 2), w, [1, 4, 6, 6], [1, 1, 2, 2],
                              data_format="NCHW")
    np.testing.assert_allclose(nchw, want.transpose(0, 3, 1, 2), rtol=1e-13, atol=1e-13)


X2, W2, OS2 = np.ones((1, 3, 3, 2)), np.ones((3, 3, 4, 2)), [1, 6, 6, 4]


@pytest.mark.parametrize("kw,exc,match", [
    (dict(padding="same"), ValueError, r"'padding' must be 'SAME' or 'VALID' \(upper case\)"),
    (dict(padding="EXPLICIT"), ValueError, "'EXPLICIT' is not a valid value"),
    (dict(padding=[[1, 1], [1, 1]]), ValueError, "must have 4 .before, after. pairs"),
    (dict(padding=[[1, 0], [1, 1], [1, 1], [0, 0]]), ValueError,
     "zero in the batch and channel dimensions"),
    (dict(padding=[[0, 0], [-1, 1], [1, 1], [0, 0]]), ValueError, "must be non-negative"),
    (dict(padding=[1, 1, 1, 1]), ValueError, "list of .before, after. pairs"),
    (dict(padding=3), TypeError, "'padding' must be 'SAME', 'VALID' or a list"),
    (dict(strides=[2, 2, 2]), ValueError, "'strides' must be an int or a list of length 1, 2 "
     "or 4; got \\[2, 2, 2\\]"),
    (dict(strides=[2, 2, 2, 1]), ValueError, "must be 1 in the batch and channel"),
    (dict(strides=0), ValueError, "'strides' must be positive"),
    (dict(strides=2.0), TypeError, "'strides' must be positive integers"),
    (dict(dilations=[1, 2, 1, 2]), ValueError, "'dilations' must be 1 in the batch"),
    (dict(data_format="NCW"), ValueError, r"'data_format' must be one of \('NHWC', 'NCHW'\)"),
    (dict(data_format="nhwc"), ValueError, "'data_format' must be one of"),
    (dict(output_shape=[2, 6, 6, 4]), ValueError, "must have the input's batch size 1"),
    (dict(output_shape=[1, 6, 6, 8]), ValueError, "must have 4 channels .* no groups"),
    (dict(output_shape=[1, 6, 6]), ValueError, "the full output shape \\(4\\) or its 2 "
     "spatial lengths"),
    (dict(output_shape=[1, 7, 6, 4]), ValueError, r"does not fit the input length 3 on "
     r"spatial axis 0: with padding 'SAME' the output length must be in \[5, 6\]"),
    (dict(output_shape=[1, 6.0, 6, 4]), TypeError, "'output_shape' must be a 1-D sequence"),
])
def test_refusals_pinned(kw, exc, match):
    args = dict(output_shape=OS2, strides=2) | kw
    with pytest.raises(exc, match="^tensorflow: .*" + match):
        T.conv2d_transpose(X2, W2, **args)


def test_rank_and_layout_refusals_pinned():
    with pytest.raises(ValueError, match="'output_shape' must be of length 3, 4 or 5"):
        T.conv_transpose(X2, W2, [6, 6], 2)
    with pytest.raises(ValueError, match=r"'data_format' must be one of \('NWC', 'NCW'\)"):
        T.conv1d_transpose(X2[:, 0], W2[0], [1, 6, 4], 2, data_format="NHWC")
    with pytest.raises(TypeError, match="'padding' must be 'SAME' or 'VALID' for 1 spatial"):
        T.conv1d_transpose(X2[:, 0], W2[0], [1, 5, 4], 2, [[0, 0], [1, 1], [0, 0]])
    with pytest.raises(ValueError, match="'input' must have 1 channels"):
        T.conv2d_transpose(X2, W2[..., :1], OS2, 2)
    with pytest.raises(ValueError, match="'filters' must have rank 4"):
        T.conv2d_transpose(X2, W2[0], OS2, 2)
    with pytest.raises(TypeError, match="'filters' must have the dtype|dtype"):
        T.conv2d_transpose(X2, W2.astype(np.float32), OS2, 2)
    with pytest.raises(TypeError, match="'input' must have a floating dtype"):
        T.conv2d_transpose(X2.astype(np.int32), W2.astype(np.int32), OS2, 2)


def test_against_tensorflow():
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(2026)
    for nd in (1, 2, 3):
        for mode in ("SAME", "VALID", "EXPLICIT") if nd == 2 else ("SAME", "VALID"):
            for _ in range(6):
                x, w, kw, _ = _draw(rng, nd, False, mode)
                kw["dilations"] = 1   # TensorFlow's float64 CPU kernels refuse dilations
                x_shape = x.shape
                try:
                    want = tf.nn.conv_transpose(x, w, **kw).numpy()
                except Exception:   # noqa: BLE001 -- the drawn length needs dilations
                    with pytest.raises(ValueError):
                        T.conv_transpose(x, w, **kw)
                    continue
                y = T.conv_transpose(x, w, **kw)
                assert y.shape == want.shape, x_shape
                np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


def test_against_tensorflow_onednn_path():
    """float32 runs on TensorFlow's oneDNN kernels, which take dilations and channels-first
    data (not explicit padding with channels-first data)."""
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(2027)
    for nd in (1, 2, 3):
        for first in (False, True):
            for mode in ("SAME", "VALID"):
                for _ in range(4):
                    x, w, kw, _ = _draw(rng, nd, first, mode)
                    x, w = x.astype(np.float32), w.astype(np.float32)
                    want = tf.nn.conv_transpose(x, w, **kw).numpy()
                    y = T.conv_transpose(x, w, **kw)
                    assert y.shape == want.shape and y.dtype == want.dtype
                    np.testing.assert_allclose(y, want, rtol=2e-5, atol=2e-5)
