"""One-shot calls with remembered arguments run on the first call's plan skeleton.

``convt.conv_transpose`` keeps, per key of its arguments (``convt._api._SPECS``), the first
call's plan without its weights (``Plan.skeleton``) and binds each later call's weights to it
(``Plan.rebind``) instead of building a plan. A rebound plan must give a fresh operator's
bits for new weights, biases and inputs of the same shapes; a call with any other key is
never served a remembered skeleton; the skeleton keeps no array of the caller's alive; and
threads calling at once each get their own weights' result.
"""
import gc
import threading
import weakref

import numpy as np
import pytest

import convt
from convt import _api
from convt._dispatch import plan as _plan

from test_one_shot_parity import DTYPES, GEOMETRIES, _arrays, _needs_avx2


@pytest.fixture(autouse=True)
def _nothing_kept():
    _api._SPECS.clear()
    _plan.forget_decisions()


def _counting_rebinds(monkeypatch):
    calls = []
    orig = _plan.Plan.rebind

    def counted(self, *a, **k):
        calls.append(self)
        return orig(self, *a, **k)

    monkeypatch.setattr(_plan.Plan, "rebind", counted)
    return calls


def _same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_a_rebound_plan_gives_a_fresh_operators_bits(name, dtype, monkeypatch):
    _needs_avx2(name)   # else one-shot and prepared calls may pick other methods
    rebinds = _counting_rebinds(monkeypatch)
    for seed in range(3):   # other weights, bias and input of the same shapes each time
        x, w, b, kw = _arrays(name, dtype, seed)
        want = convt.ConvTranspose(w, b, **kw)(x)
        _same_bits(convt.conv_transpose(x, w, b, **kw), want)
        assert len(rebinds) == seed   # the first call builds its plan, the others rebind
    x, w, b, kw = _arrays(name, dtype, 3)
    x2 = np.concatenate([x, x[:1] * 2])   # another batch: the same skeleton, decided anew
    _same_bits(convt.conv_transpose(x2, w, b, **kw), convt.ConvTranspose(w, b, **kw)(x2))
    assert len(rebinds) == 3


@pytest.mark.parametrize("change", [
    dict(dtype=np.float64), dict(bias=None), dict(strides=(1, 1)), dict(workers=1),
    dict(method="reference"), dict(c_out=8), dict(filter_format="XOI"),
])
def test_another_key_is_never_served_a_remembered_skeleton(change, monkeypatch):
    x, w, b, kw = _arrays("winograd_strided", np.float32)
    convt.conv_transpose(x, w, b, **kw)
    convt.conv_transpose(x, w, b, **kw)
    rebinds = _counting_rebinds(monkeypatch)
    dtype = change.get("dtype", np.float32)
    x, w, b = (a.astype(dtype) for a in (x, w, b))
    kw = dict(kw, strides=change.get("strides", kw["strides"]))
    call = dict(workers=change.get("workers"), method=change.get("method", "auto"))
    if "c_out" in change:
        w, b = w[:, :change["c_out"]].copy(), b[:change["c_out"]].copy()
    if "bias" in change:
        b = None
    op = convt.ConvTranspose(w, b, **kw, **call)
    want = op(x)
    w_call = np.ascontiguousarray(w.transpose(2, 3, 1, 0)) if "filter_format" in change else w
    extra = dict(filter_format="XOI") if "filter_format" in change else {}
    for k in range(2):
        _same_bits(convt.conv_transpose(x, w_call, b, **kw, **call, **extra), want)
        assert len(rebinds) == k   # its own skeleton from its second call on
        if rebinds:
            assert rebinds[-1].spec == op.spec and rebinds[-1].dtype == op.dtype


def test_non_finite_weights_on_a_remembered_skeleton_give_the_prepared_bits():
    x, w, b, kw = _arrays("winograd_strided", np.float32)
    convt.conv_transpose(x, w, b, **kw)   # finite: the Winograd products
    w = w.copy()
    w[3, 5, 1, 2] = np.nan   # the pack refuses it: the plan runs another variant
    _same_bits(convt.conv_transpose(x, w, b, **kw), convt.ConvTranspose(w, b, **kw)(x))
    w[3, 5, 1, 2] = 1.0
    _same_bits(convt.conv_transpose(x, w, b, **kw), convt.ConvTranspose(w, b, **kw)(x))


def test_the_skeleton_holds_no_array_of_the_callers():
    x, w, b, kw = _arrays("micro_grouped", np.float32)
    refs = [weakref.ref(a) for a in (x, w, b)]
    for _ in range(2):
        convt.conv_transpose(x, w, b, **kw)
    assert len(_api._SPECS) == 1
    del x, w, b
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_workers_none_follows_the_openmp_default_in_force(monkeypatch):
    x, w, b, kw = _arrays("micro_grouped", np.float32)
    convt.conv_transpose(x, w, b, **kw)
    (_, skeleton), = _api._SPECS.values()
    monkeypatch.setattr(_plan, "_max_threads", lambda: (lambda: 3))
    assert skeleton.rebind(w, b, None)._workers == 3
    assert np.shares_memory(skeleton.rebind(w, b, None).w_iox, w)   # no copy


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
def test_threads_calling_at_once_each_get_their_own_weights_result(dtype):
    name = "winograd_strided"
    _needs_avx2(name)
    cases = [_arrays(name, dtype, seed) for seed in range(4)]
    wants = [convt.ConvTranspose(w, b, **kw)(x) for x, w, b, kw in cases]
    convt.conv_transpose(*cases[0][:3], **cases[0][3])   # the skeleton exists before
    start, errors = threading.Barrier(len(cases)), []

    def run(i):
        x, w, b, kw = cases[i]
        try:
            start.wait()
            for _ in range(15):
                _same_bits(convt.conv_transpose(x, w, b, **kw), wants[i])
        except BaseException as e:   # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_a_rebound_plan_has_a_fresh_plans_attributes():
    # Plan.skeleton keeps a list of argument attributes; a rebound plan must hold exactly
    # what a plan built from the same arguments holds, with the same argument values
    x, w, b, kw = _arrays("micro_grouped", np.float32)
    convt.conv_transpose(x, w, b, **kw)
    (_, skeleton), = _api._SPECS.values()
    fresh = _plan.Plan(skeleton.spec, w, b, skeleton.dtype, allowed=skeleton.allowed,
                       method=skeleton.method, one_shot=True, castable=skeleton.castable)
    rebound = skeleton.rebind(w, b, None)
    assert set(rebound.__dict__) == set(fresh.__dict__)
    for name in _plan.Plan._SKELETON:
        assert getattr(rebound, name) == getattr(fresh, name), name
    assert set(skeleton.__dict__) == set(_plan.Plan._SKELETON)


def test_channels_last_and_out_on_a_remembered_skeleton():
    x, w, b, kw = _arrays("micro_grouped", np.float32)
    convt.conv_transpose(x, w, b, **kw)          # a channels-first skeleton
    xl = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    want = np.ascontiguousarray(np.moveaxis(convt.ConvTranspose(w, b, **kw)(x), 1, -1))
    for _ in range(2):   # its own key, then its own skeleton: never the channels-first one
        _same_bits(convt.conv_transpose(xl, w, b, **kw, data_format="NXC"), want)
    assert len(_api._SPECS) == 2
    out = np.full(want.shape, np.nan, np.float32)
    got = convt.conv_transpose(xl, w, b, **kw, data_format="NXC", out=out)
    assert got is out
    _same_bits(out, want)
