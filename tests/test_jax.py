"""convt.jax against jax.lax.conv_transpose.

Three layers: the committed golden fixtures (made by docs/scripts/fixtures_jax.py with the real
jax: every output matches, every refusal raises), convt's own reference (and the translator's
``_canonical`` describing every call), and, where jax is importable, fresh random cases
against it.
"""
from collections import namedtuple

import numpy as np
import pytest

import convt
from convt._backends.reference import conv_transpose_reference
from conftest import (DTYPES, FIXTURES, assert_close, fixture_arrays, fixture_cases,
                      fixture_output, np_dtype)

FIXTURE = FIXTURES / "jax.json.gz"
CASES = fixture_cases("jax")
ct = convt.jax.conv_transpose



def call_kwargs(case):
    """docs/scripts/fixtures_jax.py's call_kwargs: JSON lists back into jax's tuples."""
    kw = dict(case["kwargs"])
    if isinstance(kw["padding"], list) and not case.get("pairs_as_lists"):
        kw["padding"] = tuple(tuple(p) for p in kw["padding"])
    if kw.get("dimension_numbers") is not None:
        kw["dimension_numbers"] = tuple(kw["dimension_numbers"])
    return kw


def test_fixture_file_is_small_and_varied():
    assert FIXTURE.stat().st_size < 300_000
    assert {len(c["x_shape"]) for c in CASES} == {2, 3, 4, 5}
    assert sum("error" in c for c in CASES) > 50 and sum("y" in c for c in CASES) > 300
    kws = [c["kwargs"] for c in CASES if "y" in c]
    assert {k["transpose_kernel"] for k in kws} == {False, True}
    assert {"SAME", "VALID", "same"} <= {k["padding"] for k in kws if isinstance(k["padding"], str)}
    assert any(min(min(p) for p in k["padding"]) < 0 for k in kws if isinstance(k["padding"], list))


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{len(c['x_shape']) - 2}d"
                                             for i, c in enumerate(CASES)])
def test_fixture(case):
    x, w = fixture_arrays(case)
    if "error" in case:
        with pytest.raises((ValueError, TypeError), match="^jax: "):
            ct(x, w, **call_kwargs(case))
        return
    y = ct(x, w, **call_kwargs(case))
    dt = np.dtype(case["kwargs"].get("preferred_element_type") or case["dtype"])
    want = fixture_output(case, dt)
    assert y.shape == want.shape and y.dtype == want.dtype
    tol = 1e-12 if dt == np.float64 else 1e-5
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * scale)


SPATIAL = "HWD"


def _draw(rng, nd, *, explicit_only=False):
    """A random call that jax accepts: arrays and keyword arguments."""
    sp = SPATIAL[:nd]
    lhs = "".join(rng.permutation(list("NC" + sp)))
    rhs = "".join(rng.permutation(list("OI" + sp)))
    out = "".join(rng.permutation(list("NC" + sp)))
    c_in, c_out, tk = int(rng.integers(1, 4)), int(rng.integers(1, 4)), bool(rng.random() < .5)
    rsp = [c for c in rhs if c in sp]
    dims = {"N": 2, "C": c_in, **{c: int(rng.integers(1, 5)) for c in sp}}
    wd = {"I": c_out if tk else c_in, "O": c_in if tk else c_out,
          **{c: int(rng.integers(1, 4)) for c in rsp}}
    x = rng.standard_normal(tuple(dims[c] for c in lhs))
    w = rng.standard_normal(tuple(wd[c] for c in rhs))
    s = tuple(int(v) for v in rng.integers(1, 4, nd))
    d = tuple(int(v) for v in rng.integers(1, 3, nd))
    r = 1.0 if explicit_only else rng.random()
    pad = ("SAME" if r < .3 else "VALID" if r < .6 else
           tuple((int(rng.integers(-1, 4)), int(rng.integers(-1, 4))) for _ in range(nd)))
    return x, w, dict(strides=s, padding=pad, rhs_dilation=d,
                      dimension_numbers=(lhs, rhs, out), transpose_kernel=tk)


def canonical_output(c, x, w):
    """The output ``Canonical`` ``c`` describes: the reference on the mapped arrays."""
    xc = (x[None] if c.unbatched else x).transpose(c.x_axes)
    wc = w.transpose(c.w_axes)
    if c.w_flip:
        wc = np.flip(wc, tuple(2 + a for a in c.w_flip))
    y = conv_transpose_reference(xc, wc, None, c.geometry).transpose(c.y_axes)
    return y[0] if c.unbatched else y


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_canonical_describes_the_call(nd):
    rng = np.random.default_rng(60 + nd)
    done = 0
    while done < 15:
        x, w, kw = _draw(rng, nd)
        try:
            y = ct(x, w, **kw)
        except ValueError:   # pads cropping more than the input holds
            continue
        if y.size == 0:
            continue
        c = convt.jax._canonical(x.shape, w.shape, **kw)
        assert c.convention == "jax" and c.geometry.data_format == "NCX" and not c.has_bias
        assert c.w_flip == (() if kw["transpose_kernel"] else tuple(range(nd)))
        np.testing.assert_allclose(canonical_output(c, x, w), y, rtol=1e-12, atol=1e-12)
        done += 1


def _correlation(x_nc, w_io, s, d, pads):
    """jax's definition, independently: dilate the input by s, pad (lo, hi) (negative:
    crop), correlate with the d-dilated kernel (w_io: (C_in, C_out, *K), not flipped)."""
    nd = len(s)
    xd = np.zeros(x_nc.shape[:2] + tuple((i - 1) * ss + 1 for i, ss in zip(x_nc.shape[2:], s)))
    xd[(slice(None),) * 2 + tuple(slice(None, None, ss) for ss in s)] = x_nc
    for a, (lo, hi) in enumerate(pads):
        ax = 2 + a
        xd = np.concatenate([np.zeros(xd.shape[:ax] + (max(lo, 0),) + xd.shape[ax + 1:]), xd,
                             np.zeros(xd.shape[:ax] + (max(hi, 0),) + xd.shape[ax + 1:])], ax)
        xd = np.take(xd, range(max(-lo, 0), xd.shape[ax] - max(-hi, 0)), axis=ax)
    k = w_io.shape[2:]
    out = [xd.shape[2 + a] - (k[a] - 1) * d[a] for a in range(nd)]
    y = np.zeros((x_nc.shape[0], w_io.shape[1], *out))
    for idx in np.ndindex(*k):
        win = xd[(slice(None),) * 2 + tuple(slice(i * dd, i * dd + o)
                                            for i, dd, o in zip(idx, d, out))]
        y += np.einsum("nc...,co->no...", win, w_io[(slice(None),) * 2 + idx])
    return y


@pytest.mark.parametrize("method", ["direct", "fft", "reference"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_against_correlation_of_dilated_input(nd, method):
    rng = np.random.default_rng(10 * nd + len(method))
    for _ in range(8):
        s = tuple(int(v) for v in rng.integers(1, 4, nd))
        d = tuple(int(v) for v in rng.integers(1, 3, nd))
        k = tuple(int(v) for v in rng.integers(1, 4, nd))
        x = rng.standard_normal((2, 3) + tuple(int(v) for v in rng.integers(2, 5, nd)))
        w = rng.standard_normal((3, 2) + k)
        pads = tuple((int(rng.integers(-1, 4)), int(rng.integers(0, 4))) for _ in range(nd))
        if any((i - 1) * ss + 1 + lo + hi - (kk - 1) * dd < 1 for i, ss, (lo, hi), kk, dd
               in zip(x.shape[2:], s, pads, k, d)):
            continue   # no output (test_empty_results_are_zeros)
        ref = _correlation(x, w, s, d, pads)
        sp = SPATIAL[:nd]
        y = ct(x, w, s, pads, d, dimension_numbers=("NC" + sp, "IO" + sp, "NC" + sp),
               method=method)
        assert_close(y, ref, method, "float64")


def test_padding_forms():
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((1, 5, 4, 2)), rng.standard_normal((3, 2, 2, 3))
    y = ct(x, w, (2, 1), ((1, -1), (0, 2)))
    for pads in ([[1, -1], [0, 2]], np.array([[1, -1], [0, 2]])):
        np.testing.assert_array_equal(ct(x, w, (2, 1), pads), y)
    with pytest.raises(ValueError, match="sequence of tuples with use_consistent_padding"):
        ct(x, w, (2, 1), np.array([[1, 1], [0, 0]]), use_consistent_padding=True)


def test_same_and_valid_lengths():
    x, w = np.ones((1, 5, 2)), np.ones((3, 2, 4))          # NHC, HIO
    assert ct(x, w, (2,), "SAME").shape == (1, 10, 4)      # I*s
    assert ct(x, w, (2,), "VALID").shape == (1, 11, 4)     # (I-1)*s + max(E, s)
    assert ct(x, w, (4,), "VALID").shape == (1, 20, 4)
    # any other string is a forward padding of the undilated input (strides 1 only)
    assert ct(x, w, (1,), "valid").shape == (1, 3, 4)      # I - E + 1
    assert ct(x, w, (1,), "same").shape == (1, 5, 4)


def test_same_differs_from_lowercase_same_at_even_kernel():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 5, 1)), rng.standard_normal((4, 1, 1))
    upper, lower = ct(x, w, (1,), "SAME"), ct(x, w, (1,), "same")
    full = ct(x, w, (1,), ((3, 3),))                        # every tap: length 8
    np.testing.assert_allclose(upper, full[:, 1:6])         # SAME: odd pad before
    np.testing.assert_allclose(lower, full[:, 2:7])         # same: odd pad after


def test_transpose_kernel_flips_and_swaps():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 4, 5, 3)), rng.standard_normal((3, 2, 4, 3))   # HWOI-ish
    y = ct(x, w, (2, 1), "SAME", transpose_kernel=True)
    w2 = np.flip(w, (0, 1)).swapaxes(2, 3)
    np.testing.assert_allclose(y, ct(x, w2, (2, 1), "SAME"), rtol=1e-13, atol=1e-13)


def test_spatial_order_follows_the_kernel_spec():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 2, 4, 5)), rng.standard_normal((3, 2, 2, 3))   # NCHW, OIHW
    y = ct(x, w, (2, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))
    # the kernel spec names W first: strides now pair with (W, H), the arrays' axes unchanged
    y2 = ct(x, w.swapaxes(2, 3), (1, 2), "VALID", dimension_numbers=("NCHW", "OIWH", "NCHW"))
    np.testing.assert_allclose(y, y2, rtol=1e-13, atol=1e-13)
    Dn = namedtuple("ConvDimensionNumbers", "lhs_spec rhs_spec out_spec")
    y3 = ct(x, w, (2, 1), "VALID", dimension_numbers=Dn((0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 3)))
    np.testing.assert_allclose(y, y3, rtol=1e-13, atol=1e-13)


def test_rank_2_is_a_matrix_product():
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((5, 3)), rng.standard_normal((3, 4))    # NC, IO
    np.testing.assert_allclose(ct(x, w, (), "SAME"), x @ w, rtol=1e-13)
    np.testing.assert_allclose(ct(x, w.T, (), (), transpose_kernel=True), x @ w, rtol=1e-13)
    np.testing.assert_allclose(ct(x.T, w.T, [], "valid", dimension_numbers=("CN", "OI", "CN")),
                               (x @ w).T, rtol=1e-13)
    with pytest.raises(ValueError, match="'strides' must be 0 positive integers"):
        ct(x, w, (1,), "SAME")
    with pytest.raises(ValueError, match="jax: 'lhs' must have 1-3 spatial axes"):
        convt.jax._canonical(x.shape, w.shape, strides=(), padding="SAME")


def test_preferred_element_type_widens():
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((1, 6, 3)), rng.standard_normal((3, 3, 2))
    y = ct(x.astype(np.float32), w.astype(np.float32), (2,), "SAME",
           preferred_element_type=np.float64)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, ct(x.astype(np.float32).astype(np.float64),
                                     w.astype(np.float32).astype(np.float64), (2,), "SAME"))
    with pytest.raises(TypeError, match="'preferred_element_type' must not be narrower than "
                       "the operands' float64; got 'float32'"):
        ct(x, w, (2,), "SAME", preferred_element_type="float32")


def test_empty_results_are_zeros():
    x, w = np.ones((1, 5, 2)), np.ones((3, 2, 4))
    assert ct(x, w, (1,), ((-3, -2),)).shape == (1, 0, 4)
    assert ct(x[:0], w, (2,), "SAME").shape == (0, 10, 4)
    y = ct(x[:, :0], w, (2,), "SAME")                      # no input: zeros
    assert y.shape == (1, 1, 4) and not y.any()
    with pytest.raises(ValueError, match="jax: 'lhs' gives an empty result"):
        convt.jax._canonical(x.shape, w.shape, strides=(1,), padding=((-3, -2),))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes(dtype):
    rng = np.random.default_rng(7)
    x, w, kw = _draw(rng, 2)
    dt = np_dtype(dtype)
    xs, ws = x.astype(dt), w.astype(dt)
    assert_close(ct(xs, ws, **kw), ct(xs.astype(np.float64), ws.astype(np.float64), **kw),
                 "direct", dtype)


X, W = np.ones((1, 4, 4, 2)), np.ones((3, 3, 2, 3))


@pytest.mark.parametrize("args, kw, exc, match", [
    ((X, W, (2, 2), "same"), {}, ValueError, "jax: 'padding' as a string other than 'SAME'"),
    ((X, W, (1, 1), "FOO"), {}, ValueError, "jax: 'padding' must be 'SAME', 'VALID' or"),
    ((X, W, (2, 2), [(1, 1)]), {}, ValueError, r"'padding' must hold one \(low, high\) pair"),
    ((X, W, (2, 2), (1, 1)), {}, ValueError, r"'padding' must be 'SAME', 'VALID' or a sequence"),
    ((X, W, (1, 1), ((-5, -5), (0, 0))), {}, ValueError, "'padding' crops more than"),
    ((X, W, (2, 2), [[1, 1], [1, 1]]), {"use_consistent_padding": True}, ValueError,
     "'padding' must be 'SAME', 'VALID' or a sequence of tuples"),
    # (the differential fuzz's: a bare TypeError, and a message ending "got None")
    ((X, W, (2, 2), 5), {"use_consistent_padding": True}, TypeError,
     "jax: 'padding' must be 'SAME', 'VALID' or a sequence of tuples with "
     "use_consistent_padding=True; got 5"),
    ((X, W, (2, 2), [5, 5]), {"use_consistent_padding": True}, ValueError,
     "use_consistent_padding=True; got 5$"),
    ((X, W, 2, "SAME"), {}, TypeError, "jax: 'strides' must be a sequence of 2 positive"),
    ((X, W, (2, 0), "SAME"), {}, ValueError, r"'strides' must be 2 positive .*; got \(2, 0\)"),
    ((X, W, (2, 2, 2), "SAME"), {}, ValueError, "'strides' must be 2 positive integers"),
    ((X, W, (2, 2), "SAME"), {"rhs_dilation": (0, 1)}, ValueError, "'rhs_dilation' must be"),
    ((X, W[:, :, :1], (2, 2), "SAME"), {}, ValueError, "jax: 'lhs' must have the kernel's 1"),
    ((X, W, (2, 2), "SAME"), {"transpose_kernel": True}, ValueError,
     r"'lhs' must have the kernel's 3 input features \(O of the rhs spec\)"),
    ((X, W[None], (2, 2), "SAME"), {}, ValueError, "jax: 'rhs' must have the rank of lhs"),
    ((X, W, (2, 2), "SAME"), {"dimension_numbers": ("NHWC", "HWIO")}, TypeError,
     "'dimension_numbers' must be a tuple of 3 strings"),
    ((X, W, (2, 2), "SAME"), {"dimension_numbers": ("nhwc", "hwio", "nhwc")}, TypeError,
     "'NHWC' must hold|'nhwc' must hold 'N' and 'C' exactly once"),
    ((X, W, (2, 2), "SAME"), {"dimension_numbers": ("NHWC", "HXIO", "NHWC")}, TypeError,
     "must name the same spatial characters"),
    ((X, W, (2, 2), "SAME"), {"dimension_numbers": "NHWC"}, TypeError,
     "'dimension_numbers' must be None, a tuple / list of 3 strings or a ConvDimensionNumbers"),
    ((X[0, 0, 0], W[0, 0, 0], (), "SAME"), {}, ValueError, "'lhs' must have rank 2 to 5"),
    ((X, W.astype(np.float32), (2, 2), "SAME"), {}, TypeError, "jax: 'lhs' must have the dtype of 'rhs', float32"),
    ((X.astype(int), W, (2, 2), "SAME"), {}, TypeError, "'lhs' must have a floating dtype"),
])
def test_refusals_pinned(args, kw, exc, match):
    with pytest.raises(exc, match=match):
        ct(*args, **kw)


def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    from jax import lax
    seed = int(np.random.default_rng().integers(2**31))
    rng = np.random.default_rng(seed)
    names = ["float64", "float32", "float16"] + (["bfloat16"] if "bfloat16" in DTYPES else [])
    for _ in range(60):
        nd = int(rng.integers(0, 4))
        x, w, kw = _draw(rng, nd)
        kw["use_consistent_padding"] = bool(rng.random() < 0.2)
        if rng.random() < 0.2:
            kw["padding"] = str(rng.choice(["same", "valid", "SAME_LOWER"]))
        name = str(rng.choice(names))
        if rng.random() < 0.15:
            kw["preferred_element_type"] = str(rng.choice(["float32", "float64"]))
        xs, ws = x.astype(np_dtype(name)), w.astype(np_dtype(name))
        try:
            want = np.asarray(lax.conv_transpose(xs, ws, **kw))
        except (ValueError, TypeError, RuntimeError):
            with pytest.raises((ValueError, TypeError)):
                ct(xs, ws, **kw)
            continue
        y = ct(xs, ws, **kw)
        assert y.shape == want.shape and y.dtype == want.dtype, (seed, kw)
        tol = {"float64": 1e-12, "float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}[name]
        tol = min(tol, {"float64": 1e-12, "float32": 1e-5}.get(str(y.dtype), 1))
        ref = want.astype(np.float64)
        np.testing.assert_allclose(y.astype(np.float64), ref, rtol=tol,
                                   atol=tol * max(1.0, np.abs(ref).max(initial=0)),
                                   err_msg=f"seed {seed}: {x.shape} {w.shape} {kw} {name}")
