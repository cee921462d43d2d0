"""NaN and Inf propagate alike in every backend: a non-finite input element reaches exactly
the outputs it touches (those the float64 reference gives a nonzero value for an indicator
input and positive weights), a non-finite weight exactly the outputs of its tap, a
non-finite bias its channel. The FFT backend runs non-finite data on the direct backend
(docs/reliability.md): its own transforms would spread one NaN over the whole output. So does
finite data near the float range, whose transforms could overflow."""
import numpy as np
import pytest

import convt
from convt._backends.fft import run_fft

from test_threads import CASES, IDS

DT = [np.float32, np.float64]


def _setup(case, dtype, monkeypatch):
    if case[0] == "fft-overlap-add":
        monkeypatch.setattr("convt._backends.fft.FFT_MEMORY_BUDGET", 1 << 12)
    _, xs, ws, kw, method, *_ = case
    rng = np.random.default_rng(5)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    return x, w, kw, method


def _touched(x_ind, w_ind, kw):
    """Outputs a nonzero input / weight pattern reaches, from the reference on |values|."""
    y = convt.conv_transpose(np.abs(x_ind), np.abs(w_ind), method="reference", **kw)
    return y != 0


def _position(shape, seed):
    rng = np.random.default_rng(seed)
    return tuple(int(rng.integers(0, n)) for n in shape)


@pytest.mark.parametrize("dtype", DT, ids=["f32", "f64"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_input_nonfinite_reaches_exactly_the_outputs_it_touches(case, value, dtype,
                                                                monkeypatch):
    x, w, kw, method = _setup(case, dtype, monkeypatch)
    for seed in range(3):
        pos = _position(x.shape, seed)
        xb = x.copy()
        xb[pos] = value
        ind = np.zeros_like(x)
        ind[pos] = 1
        touched = _touched(ind, np.ones_like(w), kw)
        y = convt.conv_transpose(xb, w, method=method, **kw)
        bad = np.isnan(y) if np.isnan(value) else np.isinf(y)
        np.testing.assert_array_equal(bad, touched)
        assert np.isfinite(y[~touched]).all()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_weight_nan_reaches_exactly_its_taps_outputs(case, monkeypatch):
    x, w, kw, method = _setup(case, np.float32, monkeypatch)
    pos = _position(w.shape, 1)
    wb = w.copy()
    wb[pos] = np.nan
    ind = np.zeros_like(w)
    ind[pos] = 1
    touched = _touched(np.abs(x) + 1, ind, kw)
    y = convt.conv_transpose(x, wb, method=method, **kw)
    np.testing.assert_array_equal(np.isnan(y), touched)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bias_nan_fills_its_channel(case, monkeypatch):
    x, w, kw, method = _setup(case, np.float32, monkeypatch)
    c_out = w.shape[1] * kw.get("group", 1)
    b = np.zeros(c_out, np.float32)
    b[c_out - 1] = np.nan
    y = convt.conv_transpose(x, w, b, method=method, **kw)
    ch = -1 if kw.get("data_format") == "NXC" else 1
    nan = np.isnan(y)
    assert np.take(nan, [c_out - 1], axis=ch).all()
    assert not np.take(nan, range(c_out - 1), axis=ch).any()


def test_raw_fft_would_spread_one_nan():
    """Why the FFT backend falls back: its transforms mix every input into every output."""
    x = np.ones((1, 4, 40), np.float32)
    x[0, 0, 3] = np.nan
    w = np.ones((4, 6, 31), np.float32)
    op = convt.ConvTranspose(w, method="fft")
    p = op._plan.geometry(x.shape)
    raw = run_fft(x, p.state, p.geom, op._plan)
    touched = _touched(np.isnan(x).astype(np.float32), w, {})
    assert np.isnan(raw).sum() > 2 * touched.sum()
    np.testing.assert_array_equal(np.isnan(op(x)), touched)


def test_fft_keeps_finite_calls_on_the_transforms():
    """The fallback is for non-finite data only: a finite call still runs the FFT."""
    x = np.ones((1, 4, 40), np.float32)
    w = np.ones((4, 6, 31), np.float32)
    op = convt.ConvTranspose(w, method="fft")
    p = op._plan.geometry(x.shape)
    raw = run_fft(x, p.state, p.geom, op._plan)
    np.testing.assert_array_equal(op(x), raw)    # bit for bit: the same code ran


@pytest.mark.parametrize("dtype", DT, ids=["f32", "f64"])
@pytest.mark.parametrize("where", ["x", "w"])
@pytest.mark.parametrize("budget", [None, 1 << 14], ids=["fft", "overlap-add"])
def test_fft_takes_values_near_the_float_range_to_the_direct_backend(dtype, where, budget,
                                                                      monkeypatch):
    """Finite values whose transforms could overflow (a transform sums many of them) run on
    the direct backend too: x = 1e35 with this kernel once gave Inf and NaN in float32
    where every true output is finite (at most about 5e35)."""
    if budget:
        monkeypatch.setattr("convt._backends.fft.FFT_MEMORY_BUDGET", budget)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 24, 24)).astype(dtype)
    w = rng.standard_normal((16, 16, 15, 15)).astype(dtype)
    huge = 1e35 if dtype == np.float32 else 1e305
    (x if where == "x" else w)[(0, 3, 10, 10)] = huge
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), method="reference")
    assert np.isfinite(ref).all()
    for method in ("fft", "auto"):
        op = convt.ConvTranspose(w, method=method, workers=1)
        assert op.method_for(x.shape) == "fft"
        p = op._plan.geometry(x.shape)
        assert (p.variant == "fft-overlap-add") == bool(budget)
        with np.errstate(over="ignore", invalid="ignore"):   # the raw transforms overflow
            raw = run_fft(x, p.state, p.geom, op._plan)
        assert not np.isfinite(raw).all()
        y = op(x)
        assert np.isfinite(y).all()
        err = np.abs(y - ref).max() / np.abs(ref).max()
        assert err < (1e-5 if dtype == np.float32 else 1e-12)


def test_fft_keeps_large_ordinary_values_on_the_transforms():
    """The bound leaves room: values of 1e20 (float32) still run the transforms."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((1, 16, 24, 24)) * 1e20).astype(np.float32)
    w = rng.standard_normal((16, 16, 15, 15)).astype(np.float32)
    op = convt.ConvTranspose(w, method="fft", workers=1)
    p = op._plan.geometry(x.shape)
    np.testing.assert_array_equal(op(x), run_fft(x, p.state, p.geom, op._plan))


@pytest.mark.parametrize("method", ["fft", "auto"])
def test_explain_says_non_finite_data_runs_on_the_direct_backend(method):
    """`convt.explain` given the input, and `ConvTranspose.explain` for the weights, report
    the direct backend the call runs on when the FFT's transforms cannot take the data (the
    differential fuzz found the explanation saying "fft" there, session 11)."""
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((1, 4, 40, 40)), rng.standard_normal((4, 4, 31, 31))
    assert convt.explain(x, w, method=method).choice == "fft"
    xn = x.copy()
    xn[0, 1, 5, 7] = np.nan
    e = convt.explain(xn, w, method=method)
    assert e.choice == "direct" and "the input or weights hold NaN, Inf" in e.reason
    assert str(e).endswith("runs on the direct backend (docs/reliability.md)")
    assert convt.explain(xn.shape, w, method=method).choice == "fft"   # values unknown
    big = x / np.abs(x).max() * (np.finfo(np.float64).max / 4)
    assert convt.explain(big, w, method=method).choice == "direct"
    wn = w.copy()
    wn[2, 3, 0, 0] = -np.inf
    e = convt.ConvTranspose(wn, method=method).explain(x.shape)
    assert e.choice == "direct" and "but the weights hold NaN, Inf" in e.reason
    assert convt.ConvTranspose(w, method=method).explain(x.shape).choice == "fft"
    # and the calls run where the explanations say: the direct backend's bits
    direct = convt.conv_transpose(xn, w, method="direct")
    np.testing.assert_array_equal(convt.conv_transpose(xn, w, method=method), direct)
