"""One-shot calls remember what their arguments resolve to, never what their arrays hold.

``convt.conv_transpose`` keeps the spec its attributes resolve to (``convt._api._SPECS``) and
every one-shot plan keeps its decision per input shape (geometry, checks, method:
``convt._dispatch.plan._DECISIONS``). A call with the same arguments skips that Python; its weights
are packed afresh, refused arguments are still refused with their own message, and the
memory limit and the cost model's constants in force are the ones applied.
"""
import numpy as np
import pytest

import convt
from convt import _api
from convt._dispatch import cost as _cost
from convt._dispatch import plan as _plan

from conftest import assert_close

KW = dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1))


@pytest.fixture(autouse=True)
def _nothing_kept():
    """Each test starts with both caches empty (others may have filled them)."""
    _api._SPECS.clear()
    _plan.forget_decisions()


@pytest.fixture
def arrays():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((2, 8, 9, 7)).astype(np.float32),
            rng.standard_normal((8, 6, 3, 3)).astype(np.float32),
            rng.standard_normal(6).astype(np.float32))


def _counting(monkeypatch, module, name):
    calls = []
    orig = getattr(module, name)

    def counted(*a, **k):
        calls.append(1)
        return orig(*a, **k)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_repeated_call_resolves_nothing_again_and_packs_its_own_weights(arrays,
                                                                          monkeypatch):
    x, w, b = arrays
    w2 = w.copy()
    w2[3, 2] *= -2          # same shapes, other weights: the new ones are used
    refs = [convt.conv_transpose(x, v, b, method="reference", **KW) for v in (w, w2)]
    specs = _counting(monkeypatch, _api, "onnx_spec")
    resolves = _counting(monkeypatch, _plan, "resolve")
    first = convt.conv_transpose(x, w, b, **KW)
    assert len(specs) == len(resolves) == 1
    second = convt.conv_transpose(x, w2, b, **KW)
    assert len(specs) == len(resolves) == 1
    assert_close(first, refs[0], "direct", "float32")
    assert_close(second, refs[1], "direct", "float32")
    # a list where a tuple was, an XOI filter: keyed apart, the same spec (and decision)
    convt.conv_transpose(x, w, b, **dict(KW, strides=[2, 2]))
    xoi = np.ascontiguousarray(w.transpose(2, 3, 1, 0))
    for f in ("XOI", "xoi", "xoi"):
        np.testing.assert_array_equal(
            convt.conv_transpose(x, xoi, b, filter_format=f, **KW), first)
    for _ in range(2):   # the kept entry applies the canonical spelling
        np.testing.assert_array_equal(convt.conv_transpose(x, w, b, filter_format="iox", **KW),
                                      first)
    assert len(specs) == 5 and len(resolves) == 1
    convt.conv_transpose(x[:1], w, b, **KW)     # another input shape: decided anew
    assert len(specs) == 5 and len(resolves) == 2


@pytest.mark.parametrize("change, exc, match", [
    (dict(strides=(2.0, 2)), TypeError, r"conv_transpose: 'strides' must be positive "
                                        r"integers, one per spatial axis \(2\); got 2.0"),
    (dict(strides=(2, 0)), ValueError, r"'strides' must be positive integers, one per "
                                       r"spatial axis \(2\); got \(2, 0\)"),
    (dict(group=True), TypeError, r"conv_transpose: 'group'"),
    (dict(group=2.5), TypeError, r"conv_transpose: 'group' must be an integer >= 1; "
                                 r"got 2.5"),
    (dict(method="fastest"), ValueError, r"conv_transpose: 'method' must be one of"),
    (dict(workers=0), ValueError, r"conv_transpose: 'workers' must be a non-zero integer"),
    (dict(output_padding=(2, 1)), ValueError, r"'output_padding' must be less than "
                                              r"max\(stride, dilation\)"),
])
def test_a_remembered_call_does_not_vouch_for_other_arguments(arrays, change, exc, match):
    x, w, b = arrays
    convt.conv_transpose(x, w, b, **KW)
    with pytest.raises(exc, match=match):
        convt.conv_transpose(x, w, b, **dict(KW, **change))


def test_a_remembered_call_still_checks_its_arrays(arrays):
    x, w, b = arrays
    convt.conv_transpose(x, w, b, **KW)
    with pytest.raises(TypeError, match=r"conv_transpose: 'x' must have the weights' dtype "
                                        r"float32 \(pass dtype=... to cast\); got 'float64'"):
        convt.conv_transpose(x.astype(np.float64), w, b, **KW)
    with pytest.raises(ValueError, match=r"conv_transpose: 'x'"):
        convt.conv_transpose(x[:, :5], w, b, **KW)
    with pytest.raises(ValueError, match=r"conv_transpose: 'b' must be a 1-D array of "
                                         r"length C_out = 6"):
        convt.conv_transpose(x, w, b[:5], **KW)
    with pytest.raises(ValueError, match=r"conv_transpose: 'out' must have the result's "
                                         r"shape \(2, 6, 18, 14\)"):
        convt.conv_transpose(x, w, b, out=np.empty((2, 6, 18, 13), np.float32), **KW)


def test_the_memory_limit_in_force_applies(arrays, monkeypatch):
    x, w, b = arrays
    convt.conv_transpose(x, w, b, **KW)
    monkeypatch.setenv("CONVT_MEMORY_LIMIT", "1024")
    with pytest.raises(MemoryError, match=r"conv_transpose: 'x' needs about"):
        convt.conv_transpose(x, w, b, **KW)


def test_new_cost_constants_forget_the_decisions(arrays):
    x, w, b = arrays
    convt.conv_transpose(x, w, b, **KW)
    assert _plan._DECISIONS
    _cost.set_constants(dict(_cost.CONSTANTS))
    assert not _plan._DECISIONS


def test_a_decision_made_while_the_constants_change_is_not_kept(monkeypatch):
    """A call that decides with the old constants and stores after set_constants (another
    thread's calibration) leaves nothing that later calls would find."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 8, 64, 64)).astype(np.float32)
    w = rng.standard_normal((8, 8, 31, 31)).astype(np.float32)
    old = dict(_cost.CONSTANTS)
    assert convt.ConvTranspose(w).method_for(x.shape) == "fft"
    slow_fft = dict(old, fft_cmac_s=old["fft_cmac_s"] * 1e6,
                    fft_transform_s=old["fft_transform_s"] * 1e6)
    real = _plan.check_memory

    def constants_change_meanwhile(*a, **k):
        monkeypatch.setattr(_plan, "check_memory", real)
        _cost.set_constants(slow_fft)
        return real(*a, **k)

    monkeypatch.setattr(_plan, "check_memory", constants_change_meanwhile)
    try:
        convt.conv_transpose(x, w)
        assert convt.ConvTranspose(w).method_for(x.shape) == "direct"
        methods = _counting(monkeypatch, _plan, "pick")
        convt.conv_transpose(x, w)
        assert len(methods) == 1      # decided anew, with the new constants
    finally:
        _cost.set_constants(old)


def test_the_fft_memory_budget_in_force_applies(monkeypatch):
    """The FFT's buffers grow with its budget (convt._backends.fft.FFT_MEMORY_BUDGET): a budget
    raised after a call is checked against the memory limit again."""
    from convt._backends import fft as _fft
    from convt._dispatch import guard as _guard

    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 16, 64, 64)).astype(np.float32)
    w = rng.standard_normal((16, 16, 31, 31)).astype(np.float32)
    geom = convt.ConvTranspose(w, method="fft").geometry(x.shape)
    monkeypatch.setattr(_fft, "FFT_MEMORY_BUDGET", 1 << 16)
    monkeypatch.setattr(_guard, "MEMORY_LIMIT",
                        _guard.estimate_bytes(geom, "fft", np.float32) + 1000)
    convt.conv_transpose(x, w, method="fft")
    monkeypatch.setattr(_fft, "FFT_MEMORY_BUDGET", 256 << 20)
    with pytest.raises(MemoryError, match=r"conv_transpose: 'x' needs about .* method "
                                          r"'fft'\), more than the"):
        convt.conv_transpose(x, w, method="fft")


def test_tuned_calls_keep_no_decision(arrays, tmp_path, monkeypatch):
    x, w, b = arrays
    monkeypatch.setenv("CONVT_TUNING_DIR", str(tmp_path))
    _plan.forget_decisions()
    convt.conv_transpose(x, w, b, method="tune", **KW)
    assert not _plan._DECISIONS


def test_what_is_kept_is_bounded(arrays):
    x, w, b = arrays
    for n in range(1, _plan._DECISIONS_SIZE + 10):
        convt.conv_transpose(x[:, :, :1, :1].repeat(n, axis=3), w, b, **KW)
    for k in range(1, _api._SPECS_SIZE + 10):
        convt.conv_transpose(x, w, b, **dict(KW, workers=k))
    assert len(_plan._DECISIONS) == _plan._DECISIONS_SIZE
    assert len(_api._SPECS) == _api._SPECS_SIZE
