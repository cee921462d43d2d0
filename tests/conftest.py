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
import numpy as np
import pytest

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


def assert_close(y, ref, backend, dtype):
    """y (any float dtype) against the float64 reference, normwise by the table above."""
    dtype = np.dtype(dtype).name
    assert y.shape == ref.shape, (y.shape, ref.shape)
    assert y.dtype.name == dtype, (y.dtype, dtype)
    tol = TOL[(backend, dtype)]
    scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
    np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=tol, atol=tol * scale)


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
    """Test shapes are tiny; the direct kernels would run them serially (convt._cost's
    small-work threshold). Lift it so every test also exercises the threaded paths."""
    from convt import _cost

    monkeypatch.setattr(_cost, "_PARALLEL_MIN_MACS", 0)
    monkeypatch.setattr(_cost, "_PARALLEL_MIN_OUTPUTS", 0)
