"""convt.keras against keras.ops.conv_transpose (Keras 3).

Three layers: the committed golden fixtures (made by docs/scripts/fixtures_keras.py with the
real Keras on its TensorFlow backend, cross-checked with its jax backend: every output
matches, every refusal raises), an independent oracle -- Keras's jax-backend recipe (pad the
stride-dilated input by (left_pad, right_pad), correlate with the flipped dilated kernel),
written out here in NumPy -- over a parametrized space, with the translator's ``_canonical``
describing every call, and, where Keras is importable, fresh random cases against it.
"""

import numpy as np
import pytest

import convt
from convt._backends.reference import conv_transpose_reference
from conftest import (DTYPES, FIXTURES, assert_close, fixture_arrays, fixture_cases,
                      fixture_output, np_dtype)

K = convt.keras
FIXTURE = FIXTURES / "keras.json.gz"
CASES = fixture_cases("keras")
TOL = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-2, "bfloat16": 2e-2}



def test_fixture_file_is_small_and_varied():
    assert FIXTURE.stat().st_size < 300_000
    assert sum("error" in c for c in CASES) > 50 and sum("y" in c for c in CASES) > 300
    assert sum("derived" in c for c in CASES) > 20
    assert sum("jax_accepted" in c for c in CASES) > 20     # TF backend refuses, jax computes
    assert {len(c["x_shape"]) for c in CASES if "y" in c} == {3, 4, 5}
    assert any("output_padding" in c["kwargs"] for c in CASES if "y" in c)


@pytest.mark.parametrize("case", CASES, ids=[f"{i}" for i in range(len(CASES))])
def test_fixture(case):
    x, w = fixture_arrays(case)
    if "error" in case:
        with pytest.raises((ValueError, TypeError), match="^keras: "):
            K.conv_transpose(x, w, **case["kwargs"])
        return
    y = K.conv_transpose(x, w, **case["kwargs"])
    want = fixture_output(case)
    assert y.shape == want.shape and y.dtype == want.dtype
    tol = TOL[case["dtype"]]
    want = want.astype(np.float64)
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol * scale)


# -- an independent oracle: Keras's jax-backend recipe ----------------------------------------

def jax_pads(k, s, d, padding, op):
    """backend_utils._convert_conv_transpose_padding_args_from_keras_to_jax, restated."""
    ext = (k - 1) * d + 1
    if padding == "valid":
        op = max(ext, s) - ext if op is None else op
        return ext - 1, ext - 1 + op
    pad_len = s + ext - 2 if op is None else ext + ext % 2 - 2 + op
    left = min(pad_len // 2 + pad_len % 2, ext - 1)
    return left, pad_len - left


def oracle(x, w, strides, padding, op, dilations, first):
    """Dilate the input by the stride, pad (left, right) (negative: crop), correlate with the
    spatially flipped, dilated kernel (*K, C_out, C_in)."""
    nd = w.ndim - 2
    xc = x if first else np.moveaxis(x, -1, 1)
    n, c = xc.shape[:2]
    grown = np.zeros((n, c, *((i - 1) * s + 1 for i, s in zip(xc.shape[2:], strides))))
    grown[(slice(None), slice(None), *(slice(None, None, s) for s in strides))] = xc
    for a in range(nd):
        lo, hi = jax_pads(w.shape[a], strides[a], dilations[a], padding,
                          None if op is None else op[a])
        width = [(0, 0)] * grown.ndim
        width[a + 2] = (max(lo, 0), max(hi, 0))
        grown = np.pad(grown, width)
        cut = [slice(None)] * grown.ndim
        cut[a + 2] = slice(max(-lo, 0), grown.shape[a + 2] - max(-hi, 0))
        grown = grown[tuple(cut)]
    ext = [(k - 1) * d + 1 for k, d in zip(w.shape[:nd], dilations)]
    out = [g - e + 1 for g, e in zip(grown.shape[2:], ext)]
    y = np.zeros((n, w.shape[-2], *out))
    flipped = w[tuple(slice(None, None, -1) for _ in range(nd))]
    for k in np.ndindex(*w.shape[:nd]):
        win = grown[(slice(None), slice(None),
                     *(slice(kk * d, kk * d + o) for kk, d, o in zip(k, dilations, out)))]
        y += np.einsum("nc...,oc->no...", win, flipped[k])
    return y if first else np.moveaxis(y, 1, -1)


def _draw(rng, nd, first, padding, with_op, max_dilation=2):
    s = [int(v) for v in rng.integers(1, 4, nd)]
    d = [int(v) for v in rng.integers(1, max_dilation + 1, nd)]
    k = [int(v) for v in rng.integers(1, 5, nd)]
    i = [int(v) for v in rng.integers(2, 5, nd)]
    op = None
    if with_op:
        ext = [(kk - 1) * dd + 1 for kk, dd in zip(k, d)]
        lo = [0 if padding == "valid" else 1 - e % 2 for e in ext]
        hi = [ss - 1 if padding == "valid" else ss - e % 2 for ss, e in zip(s, ext)]
        op = [int(rng.integers(a, b + 1)) for a, b in zip(lo, hi)]
    c_in, c_out = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    x = rng.standard_normal((2, c_in, *i) if first else (2, *i, c_in))
    w = rng.standard_normal((*k, c_out, c_in))
    kw = dict(strides=s, padding=padding, output_padding=op, dilation_rate=d,
              data_format="channels_first" if first else "channels_last")
    return x, w, kw


GRID = [(nd, first, padding, with_op) for nd in (1, 2, 3) for first in (False, True)
        for padding in ("valid", "same") for with_op in (False, True)]


@pytest.mark.parametrize("nd,first,padding,with_op", GRID)
def test_against_jax_recipe(nd, first, padding, with_op):
    rng = np.random.default_rng(nd * 100 + first * 10 + len(padding) + with_op)
    for _ in range(6):
        x, w, kw = _draw(rng, nd, first, padding, with_op)
        want = oracle(x, w, kw["strides"], padding, kw["output_padding"],
                      kw["dilation_rate"], first)
        y = K.conv_transpose(x, w, **kw)
        assert y.shape == want.shape
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nd,first,padding,with_op", GRID)
def test_canonical_describes_the_call(nd, first, padding, with_op):
    rng = np.random.default_rng(7 + nd * 100 + first * 10 + len(padding) + with_op)
    for _ in range(4):
        x, w, kw = _draw(rng, nd, first, padding, with_op)
        c = K._canonical(x.shape, w.shape, **kw)
        assert c.convention == "keras" and c.geometry.data_format == "NCX"
        assert not c.has_bias and not c.unbatched and c.w_flip == ()
        ref = conv_transpose_reference(x.transpose(c.x_axes), w.transpose(c.w_axes), None,
                                       c.geometry).transpose(c.y_axes)
        np.testing.assert_allclose(K.conv_transpose(x, w, **kw), ref, rtol=1e-12, atol=1e-12)


def test_canonical_validates_as_the_function_does():
    with pytest.raises(ValueError, match="'output_padding' must be lower than the stride"):
        K._canonical((1, 3, 2), (3, 1, 2), strides=2, output_padding=2)
    with pytest.raises(ValueError, match="'bias' does not exist"):
        K._canonical((1, 3, 2), (3, 1, 2), (1,))
    c = K._canonical((1, 2, 3, 3), (3, 3, 4, 2), strides=2, padding="same",
                     data_format="channels_first")
    assert c.x_axes == (0, 1, 2, 3) and c.w_axes == (3, 2, 0, 1)
    assert c.geometry.out_shape == (6, 6) and c.geometry.pads_begin == (0, 0)


def test_same_rule_changes_when_output_padding_is_given():
    """'same' is I*s without output_padding, (I-1)*s + E % 2 + op with it: op=0 with an even
    kernel is one stride *shorter* than leaving output_padding out."""
    x = np.ones((1, 4, 1))
    for k, want_none, want_zero, want_one in ((3, 8, 7, 8), (4, 8, 6, 7)):
        w = np.ones((k, 1, 1))
        assert K.conv_transpose(x, w, 2, "same").shape[1] == want_none
        assert K.conv_transpose(x, w, 2, "same", output_padding=1).shape[1] == want_one
        if want_zero is not None and k % 2:
            assert K.conv_transpose(x, w, 2, "same", output_padding=0).shape[1] == want_zero
    with pytest.raises(ValueError, match=r"'output_padding' must be in \[1, 2\]"):
        K.conv_transpose(x, np.ones((4, 1, 1)), 2, "same", output_padding=0)
    # valid without output_padding: (I-1)*s + max(E, s), zeros after a short kernel
    y = K.conv_transpose(x, np.ones((1, 1, 1)), 3, "valid")
    assert y[0, :, 0].tolist() == [1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", ["direct", "fft"])
def test_dtypes_and_methods(dtype, method):
    rng = np.random.default_rng(3)
    x, w, kw = _draw(rng, 2, False, "same", True)
    want = K.conv_transpose(x, w, **kw, method="reference")
    dt = np_dtype(dtype)
    assert_close(K.conv_transpose(x.astype(dt), w.astype(dt), **kw, method=method), want,
                 method, dtype)


X, W = np.ones((1, 3, 3, 2)), np.ones((3, 3, 4, 2))


@pytest.mark.parametrize("kw,exc,match", [
    (dict(padding="full"), ValueError, "'padding' must be one of 'valid', 'same'"),
    (dict(padding=None), TypeError, "'padding' must be a string"),
    (dict(data_format="NHWC"), ValueError, "'data_format' must be one of"),
    (dict(strides=[2]), ValueError, "'strides' must be an int or a tuple of 2 ints"),
    (dict(strides=[2, 2, 2]), ValueError, "'strides' must be an int or a tuple of 2 ints"),
    (dict(strides=0), ValueError, "'strides' must be positive"),
    (dict(strides=1.5), TypeError, "'strides' must be an int"),
    (dict(dilation_rate=0), ValueError, "'dilation_rate' must be positive"),
    (dict(output_padding=-1), ValueError, "'output_padding' must be non-negative"),
    (dict(strides=2, output_padding=2), ValueError,
     r"'output_padding' must be lower than the stride 2 on spatial axis 0 \(padding 'valid'\)"),
    (dict(strides=2, padding="same", output_padding=2), ValueError,
     r"'output_padding' must be in \[0, 1\] on spatial axis 0"),
])
def test_refusals_pinned(kw, exc, match):
    with pytest.raises(exc, match="^keras: " + match):
        K.conv_transpose(X, W, **kw)


def test_tensor_refusals_pinned():
    with pytest.raises(ValueError, match="^keras: 'inputs' must have the kernel's 2 input"):
        K.conv_transpose(X, W, data_format="channels_first")
    with pytest.raises(ValueError, match="^keras: 'kernel' must have the inputs' rank 4"):
        K.conv_transpose(X, W[0])
    with pytest.raises(ValueError, match=r"^keras: 'output_padding' must be in \[1, 1\]"):
        K.conv_transpose(np.ones((1, 1, 1)), np.ones((2, 1, 1)), 1, "same", 0)   # L = 0
    with pytest.raises(TypeError, match="^keras: "):
        K.conv_transpose(X, W.astype(np.float32))


def test_against_keras():
    keras = pytest.importorskip("keras")
    if keras.config.backend() == "tensorflow":
        pytest.importorskip("tensorflow")
    rng = np.random.default_rng(99)
    for nd, first, padding, with_op in GRID:
        if first or nd == 3:
            continue   # TensorFlow's float64 CPU kernels: channels-last, 1-D / 2-D here
        x, w, kw = _draw(rng, nd, first, padding, with_op, max_dilation=1)   # nor dilations
        want = np.asarray(keras.ops.conv_transpose(x, w, **kw))
        np.testing.assert_allclose(K.conv_transpose(x, w, **kw), want, rtol=1e-12,
                                   atol=1e-12)
