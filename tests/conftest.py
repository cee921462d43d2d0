"""Shared test fixtures: the tolerance table and small helpers.

Tolerances (STYLE.md: one table keyed by (backend, dtype), always an atol). Errors are measured
against the float64 reference, relative to the largest |output| (normwise), because every
output is a sum of K*C products of O(1) numbers:
- float64: accumulation error ~ taps * eps64 ~ 1e-15; 1e-12 leaves room for long sums.
- float32: worst seen over tests/test_direct.py ~ 3e-7 normwise; 1e-5.
- fft: normwise error measured over 1-D to 3-D, kernels 7..1023, 4..64 channels (docs/fft.md,
  "Precision"): at most 3.1e-7 in float32 and 5.5e-15 in float64; 1e-5 and 1e-12 leave 30x and
  180x. float16 / bfloat16 as for direct (the final rounding dominates).
- float16 / bfloat16: accumulate in float32, one final rounding: half an ulp, 2^-11 (4.9e-4) and
  2^-8 (3.9e-3) relative to each element, plus the float32 sum: 1e-3 and 8e-3.
"""
import base64
import gzip
import json
import pathlib

import numpy as np
import pytest

import convt

# Tests that read the repository's own files (README.md, docs/, docs/examples, ...) run only in
# the source tree: CI also runs a copy of tests/ against each installed wheel (.ci/run), where
# those files do not exist. A git checkout always counts as the source tree, so a file missing
# from the repository still fails there instead of skipping.
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
IN_SOURCE_TREE = (REPO_ROOT / ".git").exists() or (REPO_ROOT / "docs").is_dir()
NEEDS_SOURCE_TREE = ("needs the source repository (docs/, README.md): not in a wheel install "
                     f"({REPO_ROOT} has neither .git nor docs/)")
needs_source_tree = pytest.mark.skipif(not IN_SOURCE_TREE, reason=NEEDS_SOURCE_TREE)

try:
    import ml_dtypes
except ImportError:  # bfloat16 is optional
    ml_dtypes = None

TOL = {
    ("direct", "float64"): 1e-12, ("direct", "float32"): 1e-5,
    ("direct", "float16"): 1e-3, ("direct", "bfloat16"): 8e-3,
    ("fft", "float64"): 1e-12, ("fft", "float32"): 1e-5,
    ("fft", "float16"): 1e-3, ("fft", "bfloat16"): 8e-3,
    ("reference", "float64"): 1e-13, ("reference", "float32"): 1e-6,
    ("reference", "float16"): 1e-3, ("reference", "bfloat16"): 8e-3,
}

DTYPES = ["float64", "float32", "float16"] + (["bfloat16"] if ml_dtypes else [])


def np_dtype(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def fixture_cases(name):
    """The cases of tests/fixtures/<name>.json.gz, made by docs/scripts/fixtures_<name>.py."""
    return json.loads(gzip.decompress((FIXTURES / f"{name}.json.gz").read_bytes()))["cases"]


def fixture_arrays(case, bias=False):
    """A golden case's input and weights (and, with ``bias``, its bias or None), drawn as the
    fixture scripts draw them: standard normal from the case's seed, in that order."""
    rng = np.random.default_rng(case["seed"])
    dt = np_dtype(case["dtype"])
    x = rng.standard_normal(case["x_shape"]).astype(dt)
    w = rng.standard_normal(case["w_shape"]).astype(dt)
    if not bias:
        return x, w
    return x, w, (None if case["b_shape"] is None
                  else rng.standard_normal(case["b_shape"]).astype(dt))


def fixture_output(case, dtype=None):
    """A golden case's recorded output (little-endian bytes, base64) in ``dtype`` (default
    the case's)."""
    dt = np_dtype(case["dtype"]) if dtype is None else np.dtype(dtype)
    raw = np.frombuffer(base64.b64decode(case["y"]), dt.newbyteorder("<"))
    return raw.reshape(case["y_shape"])


def assert_close(y, ref, backend, dtype):
    """y (any float dtype) against the float64 reference, normwise by the table above."""
    dtype = np.dtype(dtype).name
    assert y.shape == ref.shape, (y.shape, ref.shape)
    assert y.dtype.name == dtype, (y.dtype, dtype)
    tol = TOL[(backend, dtype)]
    scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
    np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=tol, atol=tol * scale)


def random_cases(count, seed, *, k_max, size_max, c_max, keep=None, d_max=3):
    """``count`` random layers (strides, dilations, pads, output padding, groups, kernel,
    spatial size, channels per group, batch, layout; 1-D to 3-D) for the direct variants'
    tests, drawn from ``seed``: kernel sides below ``k_max`` (4 in 3-D), spatial sides below
    ``size_max`` (6 in 3-D), channels per group below ``c_max``, dilations below ``d_max``.
    ``keep(case)``: whether a drawn case is used (default: all)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        nd = int(rng.integers(1, 4))
        s = tuple(int(v) for v in rng.integers(1, 4, nd))
        d = tuple(int(v) for v in rng.integers(1, d_max, nd))
        k = tuple(int(v) for v in rng.integers(1, 4 if nd == 3 else k_max, nd))
        pads = tuple(int(v) for v in rng.integers(0, 3, 2 * nd))
        op = tuple(int(rng.integers(0, max(a, b))) for a, b in zip(s, d))
        size = tuple(int(v) for v in rng.integers(1, 6 if nd == 3 else size_max, nd))
        case = dict(nd=nd, kw=dict(strides=s, dilations=d, pads=pads, output_padding=op,
                                   group=int(rng.choice([1, 2, 3]))),
                    k=k, size=size, cg=int(rng.integers(1, c_max)),
                    mg=int(rng.integers(1, c_max)), batch=int(rng.integers(1, 4)),
                    data_format=str(rng.choice(["NCX", "NXC"])))
        if keep is None or keep(case):
            out.append(case)
    return out


def assert_same_for_any_thread_count(w, x, variant, pin=None, **kw):
    """``convt.ConvTranspose(w, **kw)`` on x with 1, 2, 3 and again 1 workers runs the
    direct ``variant`` (imposed by ``pin`` when given, else by the caller) and gives the same
    bits every time."""
    ops = {n: convt.ConvTranspose(w, workers=n, **kw) for n in (1, 2, 3)}
    if pin is not None:
        for op in ops.values():
            op._plan.pin = pin
    assert ops[1]._plan.geometry(x.shape).variant == variant
    ys = [ops[n](x) for n in (1, 2, 3, 1)]
    for y in ys[1:]:
        np.testing.assert_array_equal(ys[0], y)


def assert_weight_fallback(op, x, w, bad, **kw):
    """``op`` (weights ``w`` holding ``bad`` where two taps of one Winograd phase sum) runs
    the pixel kernel for a NaN (through the micro variant's check) and the micro variant for
    finite weights whose sum overflows; its y has the float64 reference's NaN pattern, and
    is finite and close to it otherwise."""
    assert op._plan.geometry(x.shape).variant == ("pixel" if np.isnan(bad) else "micro")
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), method="reference",
                               **kw)
    y = op(x)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    if not np.isnan(bad):
        assert np.isfinite(y).all()
        assert_close(y, ref, "direct", "float32")


def pytest_configure(config):
    try:
        from hypothesis import settings
    except ImportError:
        return
    settings.register_profile("convt", derandomize=True, max_examples=60, deadline=None,
                              print_blob=True)
    settings.load_profile("convt")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True)
def _parallel_even_when_small(monkeypatch):
    """Test shapes are tiny; the direct kernels would run them serially (convt._backends.direct's
    small-work threshold), and the weight packs too (_PARALLEL_PACK_VALUES,
    _PARALLEL_WINO_PACK_VALUES, micro_bf16's _PARALLEL_PAIRS). Lift them so every test also
    exercises the threaded paths."""
    from convt._backends.direct import registry as _backend
    from convt._backends.direct import pixel as _direct
    from convt._backends.direct import micro as _micro
    from convt._backends.direct import micro_bf16 as _micro_bf16
    from convt._backends.direct import winograd as _winograd

    monkeypatch.setattr(_backend, "_PARALLEL_MIN_MACS", 0)
    monkeypatch.setattr(_backend, "_PARALLEL_MIN_OUTPUTS", 0)
    monkeypatch.setattr(_direct, "_PARALLEL_PACK_VALUES", 0)
    monkeypatch.setattr(_micro, "PARALLEL_PACK_VALUES", 0)
    monkeypatch.setattr(_micro_bf16, "_PARALLEL_PAIRS", 0)
    monkeypatch.setattr(_winograd, "_PARALLEL_PACK_VALUES", 0)
    monkeypatch.setattr(_winograd, "_PARALLEL_WINO_PACK_VALUES", 0)
