"""The cost model (convt._dispatch.cost), method="auto", convt.explain and the calibration file."""
import itertools
import json
import math

import numpy as np
import pytest

import convt
from convt._dispatch import calibrate as _calibrate
from convt._backends.direct import registry as _direct
from convt._dispatch import cost as _cost
from convt._geometry.geometry import OpSpec, PadRule, resolve
from convt._backends.direct.gemm import gemm_layout
from convt._dispatch.plan import direct_variant

from conftest import assert_close


def _geom(x, w, **kw):
    return convt.ConvTranspose(np.zeros(w, np.float32), **kw).geometry(x)


def _random_geoms(n, seed=5):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        nd = int(rng.integers(1, 4))
        ints = lambda lo, hi: tuple(int(v) for v in rng.integers(lo, hi, nd))
        rule = PadRule("explicit", (0,) * nd, ints(-2, 5), ints(-2, 5))
        spec = OpSpec("t", ints(1, 5), ints(1, 4), ints(1, 7), 1, 4, 4, rule,
                      data_format=("NCX", "NXC")[len(out) % 2])
        try:
            out.append(resolve(spec, (int(rng.integers(1, 4)), 4, *ints(1, 10))))
        except ValueError:
            pass
    return out


@pytest.mark.parametrize("geom", _random_geoms(40), ids=lambda g: "")
def test_counts_match_the_gemm_layout(geom):
    """The per-axis counts the model prices equal the layout the kernel runs."""
    layout = gemm_layout(geom)
    assert _direct.gemm_counts(geom) == (layout.gemm_macs, layout.exact_macs)
    kind = _cost.direct_kind(geom)
    variant, state = direct_variant(geom)
    assert variant == kind.variant
    if variant == "gemm":
        assert state.batch_rows == (kind.mode == "batch-rows")


def test_estimate_is_pure():
    # large enough that the FFT's fixed cost (~0.35 ms in 2-D) leaves it estimated
    g = _geom((4, 16, 64, 64), (16, 8, 5, 5), strides=(2, 2))
    before = dict(_cost.CONSTANTS)
    a = _cost.estimate(g, np.float32, 2)
    assert _cost.estimate(g, np.float32, 2) == a
    assert _cost.CONSTANTS == before
    assert set(a.seconds) == {"direct", "fft"}
    assert all(t > 0 for t in a.seconds.values())


@pytest.mark.parametrize("what", ["batch", "kernel", "channels", "length"])
def test_estimate_grows_with_work(what):
    base = dict(x=(1, 16, 32, 32), w=(16, 16, 7, 7))
    big = {"batch": dict(x=(4, 16, 32, 32), w=(16, 16, 7, 7)),
           "kernel": dict(x=(1, 16, 32, 32), w=(16, 16, 15, 15)),
           "channels": dict(x=(1, 64, 32, 32), w=(64, 64, 7, 7)),
           "length": dict(x=(1, 16, 96, 96), w=(16, 16, 7, 7))}[what]
    small = _cost.estimate(_geom(**base), np.float32, 2).seconds
    large = _cost.estimate(_geom(**big), np.float32, 2).seconds
    assert large["direct"] > small["direct"]
    assert large["fft"] > small["fft"] or what == "kernel"  # FFT length hardly moves


def test_estimate_dtype_and_threads():
    g = _geom((1, 64, 64, 64), (64, 64, 5, 5))
    f32 = _cost.estimate(g, np.float32, 2).seconds
    f64 = _cost.estimate(g, np.float64, 2).seconds
    one = _cost.estimate(g, np.float32, 1).seconds
    assert f64["direct"] >= f32["direct"] and f64["fft"] >= f32["fft"]
    assert one["direct"] >= f32["direct"] and one["fft"] >= f32["fft"]


def test_tiny_work_skips_the_fft_estimate():
    est = _cost.estimate(_geom((1, 2, 8), (2, 2, 3)), np.float32, 1)
    assert est.seconds["fft"] is None and "FFT not estimated" in est.note


@pytest.mark.parametrize("x, w, kw, expect", [
    ((1, 16, 64, 64), (16, 16, 31, 31), {}, "fft"),
    ((4, 8, 16000), (8, 8, 255), {}, "fft"),
    ((1, 64, 32, 32), (64, 32, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)), "direct"),
    ((2, 8, 16, 16), (8, 8, 3, 3), {}, "direct"),
])
def test_auto_picks_the_clear_winner(x, w, kw, expect):
    op = convt.ConvTranspose(np.zeros(w, np.float32), **kw)
    assert op.method_for(x) == expect
    assert op.explain(x).choice == expect


# Few channels on one side with a kernel far longer than the input: the depthwise kernel sweeps
# every tap over whole blocks of outputs. Measured on the 2-core AMD EPYC (issue 38's random
# sweep, seed 1, docs/dispatch.md), direct (depthwise) against FFT, prepared: 23.4 against 1.9
# ms, 1.32 against 0.29, 1.79 against 0.42; estimated 0.9, 0.16 and 0.11 ms before the
# model priced the outputs the kernel takes one vector at a time over every tap of the
# phase ("depthwise_border": here every output), so "auto" took direct.
@pytest.mark.parametrize("x, w, kw, dtype", [
    ((3, 181, 90), (181, 1, 405), dict(strides=(2,), dilations=(2,), pads=(285, 285)),
     np.float64),
    ((3, 78, 2), (78, 1, 167), dict(group=2, pads=(19, 19)), np.float32),
    ((3, 16, 8), (16, 1, 508), dict(strides=(4,), group=16, pads=(30, 30)), np.float32),
], ids=["181to1_k405", "78to2_g2_k167", "dw16_k508"])
def test_long_kernels_over_short_inputs_go_to_the_fft(x, w, kw, dtype):
    op = convt.ConvTranspose(np.zeros(w, dtype), **kw)
    assert _cost.direct_kind(op.geometry(x)).variant == "depthwise"
    assert op.method_for(x) == "fft"


def test_auto_result_is_exact(rng):
    x = rng.standard_normal((1, 2, 40, 40)).astype(np.float64)
    w = rng.standard_normal((2, 3, 25, 25)).astype(np.float64)
    op = convt.ConvTranspose(w, pads=(3, 3, 3, 3))
    ref = convt.conv_transpose(x, w, pads=(3, 3, 3, 3), method="reference")
    assert_close(op(x), ref, op.method_for(x.shape), np.float64)


def test_explain_contents():
    w = np.zeros((16, 16, 31, 31), np.float32)
    e = convt.explain((1, 16, 64, 64), w, pads=(15, 15, 15, 15))
    text = str(e)
    assert e.geometry.out_shape == (64, 64)
    assert "pads_begin (15, 15)" in text and "input (64, 64) -> output (64, 64)" in text
    for m, t in e.estimates.items():
        assert f"{t * 1e3:.3f} ms" in text and m in text
    assert f"method='auto' -> {e.choice}: " in text and e.reason in text
    forced = convt.explain(np.zeros((1, 16, 64, 64), np.float32), w, method="direct")
    assert forced.choice == "direct" and "forced" in forced.reason


def test_explain_shows_the_fft_tiling_and_the_one_shot_split():
    """explain() names the FFT's tiling of a prepared and of a one-shot call (the backend's
    describe) and the one-shot call's set-up (kernel spectra, weight packing)."""
    from convt._backends import fft as _fft

    w = np.zeros((32, 32, 9, 9), np.float32)
    e = convt.explain((1, 32, 48, 48), w)
    text = str(e)
    prep, one = e.tilings["fft"]
    assert prep == _fft.BACKEND.describe(e.geometry, np.float32, one_shot=False)
    assert one == _fft.BACKEND.describe(e.geometry, np.float32, one_shot=True)
    assert (f"[{prep}]" if prep == one else f"[prepared: {prep}; one-shot: {one}]") in text
    assert "direct" not in e.tilings
    for m, (p, o, setup) in e.split.items():
        assert 0 < setup < o and p < o
        if m == "direct":   # the same kernel runs: the prepared call plus the set-up
            assert o == pytest.approx(p + setup)
        assert f"{p * 1e3:.3f} ms prepared, {o * 1e3:.3f} ms one-shot (of which set-up " \
               f"{setup * 1e3:.3f} ms)" in text
    # a 1-D signal long enough for overlap-save blocks says so
    long = convt.explain((1, 8, 16000), np.zeros((8, 8, 255), np.float32), method="fft")
    assert any("overlap-save" in t or "overlap-add" in t for t in long.tilings["fft"])


def test_explain_takes_conv_transposes_keywords():
    w = np.zeros((4, 2, 3), np.float32)
    out = np.full((1, 2, 10), 7.0, np.float32)
    e = convt.explain((1, 4, 8), w, out=out, workers=1)   # was an unexpected keyword
    assert e.geometry.out_shape == (10,) and (out == 7).all()


def test_explain_plans_nothing():
    op = convt.ConvTranspose(np.zeros((8, 8, 3, 3), np.float32))
    op.explain((1, 8, 16, 16))
    assert not op._plan._geoms


_SHAPE = (r"conv_transpose: 'x_shape' must be an array shape, a sequence of non-negative "
          r"integers \(x.shape, not x\); got ")


@pytest.mark.parametrize("bad, exc, shown", [
    ((1, 4, 5.0, 5), TypeError, r"5.0$"),
    ((1, 4, True, 5), TypeError, r"True$"),
    ((1, 4, -5, 5), ValueError, r"\(1, 4, -5, 5\)$"),
    ("1455", TypeError, r"'1455'$"),
    (5, TypeError, r"5$"),
    (np.zeros((1, 4, 5, 5)), TypeError, r"array\(shape=\(1, 4, 5, 5\), dtype=float64\)$"),
    (np.array([1.0, 4, 5, 5]), TypeError, r"\[1.0, 4.0, 5.0, 5.0\]$"),
])
def test_shape_methods_check_the_shape(bad, exc, shown):
    # a float length once gave a geometry of floats, and it stayed in the plan's cache under
    # the integer shape's key: the next call on that shape failed inside the kernels' setup
    op = convt.ConvTranspose(np.ones((4, 2, 3, 3), np.float32), strides=(2, 2), workers=1)
    for method in (op.geometry, op.explain, op.method_for):
        with pytest.raises(exc, match=_SHAPE + shown):
            method(bad)
    assert not op._plan._geoms
    x = np.ones((1, 4, 5, 5), np.float32)
    assert op(x).shape == (1, 2, 11, 11)
    if isinstance(bad, tuple):
        with pytest.raises(exc, match=_SHAPE.replace("conv_transpose", "explain")
                           .replace("'x_shape'", "'x'") + shown):
            convt.explain(bad, np.ones((4, 2, 3, 3), np.float32))


def test_shape_methods_take_integer_sequences():
    op = convt.ConvTranspose(np.ones((4, 2, 3, 3), np.float32), strides=(2, 2), workers=1)
    for shape in ([1, 4, 5, 5], np.array([1, 4, 5, 5]), (np.int32(1), 4, np.int64(5), 5)):
        g = op.geometry(shape)
        assert g.out_shape == (11, 11) and all(type(v) is int for v in g.in_shape)
        assert "input (5, 5) -> output (11, 11)" in str(op.explain(shape))


@pytest.mark.parametrize("kw, exc, match", [
    (dict(method="fast"), ValueError,
     r"conv_transpose: 'method' must be one of \('auto', 'direct', 'fft', 'reference', "
     r"'tune'\); got 'fast'"),
    (dict(tune="yes"), TypeError, r"conv_transpose: 'tune' must be True or False; got 'yes'"),
    (dict(tune=True, method="fft"), ValueError,
     r"conv_transpose: 'tune' conflicts with method='fft' \(tuning chooses the method\); "
     r"got True"),
])
def test_bad_method_or_tune(kw, exc, match):
    w = np.zeros((2, 2, 3), np.float32)
    with pytest.raises(exc, match=match):
        convt.ConvTranspose(w, **kw)
    with pytest.raises(exc, match=match):
        convt.explain((1, 2, 8), w, **kw)


def test_front_ends_accept_tune(rng):
    x = rng.standard_normal((1, 2, 9)).astype(np.float32)
    w = rng.standard_normal((2, 3, 4)).astype(np.float32)
    ref = convt.conv_transpose(x, w, method="reference")
    assert_close(convt.onnx.conv_transpose(x, w, method="tune"), ref, "direct", "float32")
    with pytest.raises(ValueError, match=r"onnx \(opset 11\): 'method' must be one of "
                                         r"\('auto', 'direct', 'fft', 'reference', 'tune'\); "
                                         r"got 'nope'"):
        convt.onnx.conv_transpose(x, w, method="nope")


# ---------------------------------------------------------------- calibration

@pytest.fixture
def constants():
    saved = dict(_cost.CONSTANTS)
    yield _cost.CONSTANTS
    _cost.set_constants(saved)


STAMP = {"convt": convt.__version__, "cpu": "test cpu"}


def test_calibration_file_round_trip(tmp_path, constants):
    path = str(tmp_path / "c.json")
    new = {k: v * 2 for k, v in _cost.DEFAULTS.items()}
    _cost.save_calibration(new, STAMP, path)
    assert _cost.load_calibration(path, STAMP)
    assert constants == new
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]   # no temporary file left


@pytest.mark.parametrize("content, match", [
    ("{not json", "ignoring the cost-model calibration"),
    (json.dumps({"format": 1, "constants": {"call_s": 1.0}}), "unknown format or constants"),
    (json.dumps({"format": 1, "constants": dict(_cost.DEFAULTS, call_s=-1)}), "positive"),
    (json.dumps({"format": 1, "cpu": "other cpu", "constants": _cost.DEFAULTS}),
     "measured on 'other cpu'"),
])
def test_bad_calibration_file_warns_and_is_ignored(tmp_path, constants, content, match):
    path = tmp_path / "c.json"
    path.write_text(content)
    before = dict(constants)
    with pytest.warns(RuntimeWarning, match=match):
        assert not _cost.load_calibration(str(path), STAMP)
    assert constants == before


def test_missing_calibration_file_is_silent(tmp_path, recwarn):
    assert not _cost.load_calibration(str(tmp_path / "none.json"), STAMP)
    assert not recwarn.list


def test_fit_recovers_known_constants():
    """Timings made by the model with known constants are fitted back to the same estimates."""
    truth = dict(_cost.DEFAULTS, gemm_macs_per_s=12e9, fft_cmac_s=2e-9, pixel_macs_per_s=1e9,
                 depthwise_macs_per_s=3e9)
    shapes = [((1, 64, 32, 32), (64, 64, 3, 3), {}), ((1, 8, 6, 6), (8, 8, 9, 9),
              dict(pads=(6,) * 4)), ((1, 16, 64, 64), (16, 16, 15, 15), {}),
              ((1, 32, 64, 64), (32, 1, 4, 4), dict(strides=(2, 2), group=32)),
              ((1, 8, 64, 64), (8, 8, 3, 3), {}), ((4, 8, 8000), (8, 8, 63), {})]
    samples = []
    for (x, w, kw), ct in itertools.product(shapes, (np.float32, np.float64)):
        g = _geom(x, w, **kw)
        for m, t in _cost.estimate(g, ct, 2, truth).seconds.items():
            if t is not None:
                samples.append((g, np.dtype(ct), 2, m, t))
    fitted = _calibrate.fit_constants(samples)
    for g, ct, wk, m, t in samples:
        assert math.isclose(_cost.estimate(g, ct, wk, fitted).seconds[m], t, rel_tol=0.05)


def test_calibrate_fits_and_saves(tmp_path, monkeypatch, constants):
    from convt._dispatch import tune as _tune

    monkeypatch.setattr(_tune, "time_candidates",
                        lambda runs: {m: (2e-3 if m == "fft" else 1e-3) for m in runs})
    path = str(tmp_path / "cal.json")
    got = convt.calibrate(workers=2, save=True, path=path)
    assert set(got) == set(_cost.DEFAULTS)
    assert all(v > 0 and math.isfinite(v) for v in got.values())
    assert constants == got and got["call_s"] == 1e-3
    _cost.set_constants(_cost.DEFAULTS)
    assert _cost.load_calibration(path, _tune.stamp()) and constants == got


# Few channels on one side: the depthwise kernel against the dense variant, priced. Measured
# (2 workers, float32, NCX; docs/dispatch.md, "Few channels on one side"): 64 -> 3 channels
# depthwise 4.46 ms, GEMM 1.43; 3 -> 16 depthwise 4.70, micro 2.92 (GEMM 3.40); 1 -> 64
# depthwise 0.49, GEMM 1.60; depthwise layers stay on the depthwise kernel.
@pytest.mark.parametrize("x, w, kw, variants", [
    ((16, 64, 32, 32), (64, 3, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)), {"gemm"}),
    ((4, 3, 64, 64), (3, 16, 9, 9), {}, {"micro", "gemm"}),
    ((1, 1, 128, 128), (1, 64, 3, 3), dict(pads=(1, 1, 1, 1)), {"depthwise"}),
    ((1, 64, 64, 64), (64, 1, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=64),
     {"depthwise"}),
    ((4, 16, 20000), (16, 2, 8), dict(strides=(4,), pads=(2, 2), group=16), {"depthwise"}),
], ids=["64to3", "3to16_k9", "1to64", "depthwise", "depthwise_x2_1d"])
def test_few_channels_priced_against_the_dense_variant(x, w, kw, variants):
    g = _geom(x, w, **kw)
    kind = _cost.direct_kind(g)
    assert kind.variant in variants
    dense = _direct.select(g, _cost.CONSTANTS, start=1)   # the variants after depthwise
    cost = lambda k: _direct.seconds(g, k, False, 1, _cost.CONSTANTS)
    assert cost(kind) <= cost(dense) and cost(kind) <= cost(_direct.depthwise.depthwise_kind(g))
