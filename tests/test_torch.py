"""convt.torch against torch.nn.functional.conv_transpose{1,2,3}d.

Three layers: the committed golden fixtures (made by docs/scripts/fixtures_torch.py with the
real torch: every output matches, every refusal raises), convt's own reference over a
parametrized space (and the translator's ``_canonical`` describing every call), and, where
torch is importable, fresh random cases against it.
"""

import numpy as np
import pytest

import convt
from convt._backends.reference import conv_transpose_reference
from _helpers import reference_at
from conftest import (DTYPES, FIXTURES, assert_close, fixture_arrays, fixture_cases,
                      fixture_output, np_dtype)

FIXTURE = FIXTURES / "torch.json.gz"
CASES = fixture_cases("torch")
FNS = {1: convt.torch.conv_transpose1d, 2: convt.torch.conv_transpose2d,
       3: convt.torch.conv_transpose3d}



def test_fixture_file_is_small_and_varied():
    assert FIXTURE.stat().st_size < 300_000
    fns = {c["fn"] for c in CASES}
    assert fns == {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
    assert sum("error" in c for c in CASES) > 50 and sum("y" in c for c in CASES) > 250
    assert any(len(c["x_shape"]) == int(c["fn"][-2]) + 1 for c in CASES if "y" in c)  # unbatched


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['fn'][-2:]}" for i, c in enumerate(CASES)])
def test_fixture(case):
    x, w, b = fixture_arrays(case, bias=True)
    fn = getattr(convt.torch, case["fn"])
    if "error" in case:
        with pytest.raises((ValueError, TypeError), match="^torch: "):
            fn(x, w, b, **case["kwargs"])
        return
    y = fn(x, w, b, **case["kwargs"])
    want = fixture_output(case)
    assert y.shape == want.shape and y.dtype == want.dtype
    tol = 1e-12 if case["dtype"] == "float64" else 1e-5
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * scale)


def _draw(rng, nd):
    g = int(rng.choice([1, 2, 3]))
    s = tuple(int(v) for v in rng.integers(1, 4, nd))
    d = tuple(int(v) for v in rng.integers(1, 3, nd))
    k = tuple(int(v) for v in rng.integers(1, 4, nd))
    p = tuple(int(rng.integers(0, (kk - 1) * dd // 2 + 1)) for kk, dd in zip(k, d))
    op = tuple(int(rng.integers(0, max(a, b))) for a, b in zip(s, d))
    size = tuple(int(v) for v in rng.integers(1, 5, nd))
    c_in, cog = g * int(rng.integers(1, 3)), int(rng.integers(1, 3))
    unbatched = rng.random() < 0.25
    x = rng.standard_normal(((c_in,) if unbatched else (2, c_in)) + size)
    w = rng.standard_normal((c_in, cog) + k)
    b = rng.standard_normal(cog * g) if rng.random() < 0.6 else None
    return x, w, b, dict(stride=s, padding=p, output_padding=op, groups=g, dilation=d)


def _reference(x, w, b, kw):
    """torch's definition at canonical pads: pb = padding, pe = padding - output_padding."""
    unbatched = x.ndim == w.ndim - 1
    xb = x[None] if unbatched else x
    pe = tuple(p - o for p, o in zip(kw["padding"], kw["output_padding"]))
    y = reference_at(xb, w, b, kw["stride"], kw["dilation"], kw["padding"], pe, kw["groups"])
    return y[0] if unbatched else y


@pytest.mark.parametrize("method", ["direct", "fft", "reference"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_against_reference(nd, method):
    rng = np.random.default_rng(100 * nd + len(method))
    for _ in range(12):
        x, w, b, kw = _draw(rng, nd)
        assert_close(FNS[nd](x, w, b, **kw, method=method), _reference(x, w, b, kw), method,
                     "float64")


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes(dtype):
    rng = np.random.default_rng(7)
    x, w, b, kw = _draw(rng, 2)
    dt = np_dtype(dtype)
    xs, ws, bs = (None if a is None else a.astype(dt) for a in (x, w, b))
    ref = _reference(*(None if a is None else a.astype(np.float64) for a in (xs, ws, bs)), kw)
    assert_close(FNS[2](xs, ws, bs, **kw), ref, "direct", dtype)


def canonical_output(c, x, w, b):
    """The output ``Canonical`` ``c`` describes: the reference on the mapped arrays."""
    xc = (x[None] if c.unbatched else x).transpose(c.x_axes)
    wc = w.transpose(c.w_axes)
    if c.w_flip:
        wc = np.flip(wc, tuple(2 + a for a in c.w_flip))
    y = conv_transpose_reference(xc, wc, b if c.has_bias else None, c.geometry)
    y = y.transpose(c.y_axes)
    return y[0] if c.unbatched else y


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_canonical_describes_the_call(nd):
    rng = np.random.default_rng(40 + nd)
    for _ in range(15):
        x, w, b, kw = _draw(rng, nd)
        c = convt.torch._canonical(x.shape, w.shape, None if b is None else b.shape, **kw)
        assert c.convention == "torch" and c.geometry.data_format == "NCX"
        assert c.unbatched == (x.ndim == nd + 1) and c.has_bias == (b is not None)
        np.testing.assert_allclose(canonical_output(c, x, w, b), FNS[nd](x, w, b, **kw),
                                   rtol=1e-12, atol=1e-12)


def test_canonical_validates_as_the_function_does():
    with pytest.raises(ValueError, match="'output_padding' must be smaller than either"):
        convt.torch._canonical((1, 2, 5), (2, 3, 3), stride=2, output_padding=2)
    with pytest.raises(ValueError, match="'weight' must have rank 3, 4 or 5"):
        convt.torch._canonical((1, 2), (2, 3))


def test_argument_forms():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 2, 4, 5)), rng.standard_normal((2, 3, 2, 3))
    y = FNS[2](x, w, stride=(2, 2), padding=(1, 1))
    for kw in ({"stride": 2, "padding": 1}, {"stride": [2], "padding": [1]},
               {"stride": (np.int64(2), 2), "padding": (1, np.int32(1))}):
        np.testing.assert_array_equal(FNS[2](x, w, **kw), y)
    # op = stride is fine when the dilation is larger (torch's "either")
    y1 = FNS[1](x[:, :, 0], w[:, :, 0], stride=2, output_padding=2, dilation=3)
    assert y1.shape == (1, 3, 17)


def test_unbatched_and_empty_batch():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((2, 3, 3, 3)), rng.standard_normal((2, 3, 2, 2, 2)), None
    y = FNS[3](x, w, stride=(1, 2, 1))
    assert y.shape == (3, 4, 6, 4)
    np.testing.assert_array_equal(y, FNS[3](x[None], w, stride=(1, 2, 1))[0])
    out = np.empty_like(y)
    assert FNS[3](x, w, b, stride=(1, 2, 1), out=out) is out
    np.testing.assert_array_equal(out, y)
    assert FNS[2](np.ones((0, 2, 3, 3)), np.ones((2, 3, 2, 2)), np.ones(3)).shape == (0, 3, 4, 4)


def test_bias_of_another_float_dtype_is_cast():
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((1, 2, 5)), rng.standard_normal((2, 3, 3)), np.ones(3)
    y = FNS[1](x.astype(np.float32), w.astype(np.float32), b)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, FNS[1](x, w, b), rtol=1e-5, atol=1e-5)


X2, W2 = np.ones((1, 2, 4, 4)), np.ones((2, 3, 3, 3))


@pytest.mark.parametrize("kw, exc, match", [
    ({"stride": 2, "output_padding": 2}, ValueError,
     r"torch: 'output_padding' must be smaller than either stride or dilation .*; got \(2, 2\)"),
    ({"padding": -1}, ValueError, r"torch: 'padding' must be non-negative; got \(-1, -1\)"),
    ({"output_padding": (0, -1)}, ValueError, "'output_padding' must be non-negative"),
    ({"stride": 0}, ValueError, r"torch: 'stride' must be positive; got \(0, 0\)"),
    ({"dilation": (1, 0)}, ValueError, "'dilation' must be positive"),
    ({"groups": 0}, ValueError, "torch: 'groups' must be positive; got 0"),
    ({"groups": 2.0}, TypeError, "torch: 'groups' must be an int; got 2.0"),
    ({"groups": True}, TypeError, "'groups' must be an int; got True"),
    ({"stride": (1, 2, 3)}, ValueError,
     r"'stride' must be a single integer value or a list of 2 values"),
    ({"stride": 2.0}, TypeError, "'stride' must be an int or a tuple of 2 ints; got 2.0"),
    ({"stride": np.array([2, 2])}, TypeError, "'stride' must be an int or a tuple of 2 ints"),
    ({"padding": "same"}, TypeError, "'padding' must be an int or a tuple of 2 ints"),
    ({"padding": 3}, ValueError, r"torch: 'padding' leaves no output for input \(1, 2, 4, 4\)"),
])
def test_refusals_pinned(kw, exc, match):
    with pytest.raises(exc, match=match):
        FNS[2](X2, W2, **kw)


@pytest.mark.parametrize("args, exc, match", [
    ((np.ones((1, 3, 4, 4)), W2), ValueError, r"torch: 'input' must have 2 channels \(the weight"),
    ((X2, W2, np.ones(2)), ValueError, "torch: 'bias' must be a 1-D array of length C_out = 3"),
    ((X2, np.ones((2, 3, 3))), ValueError, r"'weight' must have rank 4, \(C_in, C_out / groups"),
    ((np.ones((4, 4)), W2), ValueError, "'input' must have rank 3 \\(unbatched\\) or 4"),
    ((np.ones((1, 2, 0, 4)), W2), ValueError, "'input' must have spatial lengths >= 1"),
    ((X2, np.ones((2, 0, 3, 3))), ValueError, "'weight' must be non-empty"),
    ((X2, W2.astype(np.float32)), TypeError, "torch: 'input' must have the dtype of 'weight', float32"),
    ((X2.astype(int), W2), TypeError, "torch: 'input' must have a floating dtype"),
])
def test_tensor_refusals_pinned(args, exc, match):
    with pytest.raises(exc, match=match):
        FNS[2](*args)


def test_groups_must_divide():
    with pytest.raises(ValueError, match="torch: 'groups' must divide the input channels C_in = 3"):
        FNS[2](np.ones((1, 3, 4, 4)), np.ones((3, 2, 3, 3)), groups=2)


def test_empty_output_where_torch_onednn_path_gives_one():
    # L = 0 on the first axis: float64 / float16 refuse (torch's slow path), float32 with
    # groups > 1 or a batch > 1 and bfloat16 return an empty array (its oneDNN path)
    x, w = np.ones((1, 2, 1, 3)), np.ones((2, 3, 2, 2))
    with pytest.raises(ValueError, match=r"'padding' leaves no output .* is \(0, 4\)"):
        FNS[2](x, w, padding=(1, 0))
    with pytest.raises(ValueError, match="'padding' leaves no output"):
        FNS[2](x.astype(np.float32), w.astype(np.float32), padding=(1, 0))
    y = FNS[2](np.ones((2, 2, 1, 3), np.float32), w.astype(np.float32), padding=(1, 0))
    assert y.shape == (2, 3, 0, 4) and y.dtype == np.float32
    with pytest.raises(ValueError, match="'padding' leaves no output"):   # L < 0: refused
        FNS[2](np.ones((2, 2, 1, 3), np.float32), w.astype(np.float32), padding=(2, 0))


def test_float32_bias_must_match_on_torch_onednn_path():
    x, w = np.ones((2, 2, 4, 4), np.float32), np.ones((2, 3, 3, 3), np.float32)
    with pytest.raises(TypeError, match="torch: 'bias' must have the input's dtype float32"):
        FNS[2](x, w, np.ones(3))


def test_bfloat16_bias_must_match():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = np.dtype(ml_dtypes.bfloat16)
    with pytest.raises(TypeError, match="torch: 'bias' must have the input's dtype bfloat16"):
        FNS[2](X2.astype(bf), W2.astype(bf), np.ones(3, np.float32))


def test_against_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng()
    seed = int(rng.integers(2**31))
    rng = np.random.default_rng(seed)
    dts = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16}
    if "bfloat16" in DTYPES:
        dts["bfloat16"] = torch.bfloat16
    for _ in range(60):
        nd = int(rng.integers(1, 4))
        x, w, b, kw = _draw(rng, nd)
        r = rng.random()
        if r < 0.2:   # now and then a refusal torch makes
            kw["output_padding"] = tuple(max(a, b) for a, b in zip(kw["stride"], kw["dilation"]))
        elif r < 0.4:   # a padding that leaves a length of 0 or less on the first axis
            full = ((x.shape[-nd] - 1) * kw["stride"][0] + kw["dilation"][0] * (w.shape[2] - 1)
                    + kw["output_padding"][0] + 1)
            kw["padding"] = ((full + 1) // 2,) + kw["padding"][1:]
        name = str(rng.choice(list(dts)))
        tx, tw = (torch.from_numpy(a).to(dts[name]) for a in (x, w))
        tb = None if b is None else torch.from_numpy(b).to(dts[name])
        xs, ws = (t.to(torch.float64).numpy().astype(np_dtype(name)) for t in (tx, tw))
        bs = None if b is None else tb.to(torch.float64).numpy().astype(np_dtype(name))
        try:
            want = getattr(F, f"conv_transpose{nd}d")(tx, tw, tb, **kw)
        except RuntimeError:
            with pytest.raises((ValueError, TypeError)):
                FNS[nd](xs, ws, bs, **kw)
            continue
        y = FNS[nd](xs, ws, bs, **kw)
        tol = {"float64": 1e-12, "float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}[name]
        assert y.shape == tuple(want.shape) and y.dtype == np_dtype(name)
        ref = want.to(torch.float64).numpy()
        np.testing.assert_allclose(y.astype(np.float64), ref, rtol=tol,
                                   atol=tol * max(1.0, np.abs(ref).max(initial=0)),
                                   err_msg=f"seed {seed}: {x.shape} {w.shape} {kw} {name}")
