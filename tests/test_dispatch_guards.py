"""The dispatcher under the reliability guards: what a review of the merged dispatcher,
guard and Dask work found, each pinned by a test that fails without its fix."""
import numpy as np
import pytest

import convt
from convt._dispatch import guard as _guard
from convt._dispatch.cost import direct_kind


@pytest.fixture(autouse=True)
def _no_tuning():
    convt.forget_tuning()
    yield
    convt.forget_tuning()


def test_tune_refuses_by_memory_before_timing(rng, monkeypatch):
    monkeypatch.setattr(_guard, "MEMORY_LIMIT", 10_000)
    w = rng.standard_normal((8, 8, 9, 9)).astype(np.float32)
    op = convt.ConvTranspose(w, tune=True)
    with pytest.raises(MemoryError, match="conv_transpose"):
        op(np.zeros((1, 8, 64, 64), np.float32))
    assert convt.export_tuning()["entries"] == {}   # nothing was timed


def test_shape_queries_of_a_tune_operator_tune_nothing(rng):
    w = rng.standard_normal((8, 8, 9, 9)).astype(np.float32)
    op = convt.ConvTranspose(w, tune=True)
    assert op.method_for((1, 8, 32, 32)) in ("direct", "fft")
    assert op.geometry((1, 8, 32, 32)).out_shape == (40, 40)
    assert convt.export_tuning()["entries"] == {}
    op(rng.standard_normal((1, 8, 32, 32)).astype(np.float32))   # the real call tunes
    assert len(convt.export_tuning()["entries"]) == 1


def test_explain_applies_the_range_guard(rng):
    w = rng.standard_normal((1, 1, 2)).astype(np.float32)
    with pytest.raises(ValueError, match="strides"):
        convt.explain((1, 1, 4), w, strides=(2**22,))


def test_cost_model_prices_the_variant_that_runs(rng):
    # dilation 400 with heavy cropping: the GEMM grid would dwarf the data (convt._dispatch.guard),
    # so the pixel kernel runs, and the estimate and explain() must say so.
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    op = convt.ConvTranspose(w, dilations=(400, 400), pads=(390,) * 4, method="direct")
    shape = (8, 8, 12, 12)
    geom = op.geometry(shape)
    assert op._plan.geometry(shape).variant == direct_kind(geom).variant == "pixel"
    assert "[pixel" in str(op.explain(shape))


def test_dask_tune_runs_one_backend_on_every_block(rng):
    da = pytest.importorskip("dask.array")
    import convt.dask

    x = rng.standard_normal((1, 8, 40, 40)).astype(np.float32)
    w = rng.standard_normal((8, 8, 5, 5)).astype(np.float32)
    kw = dict(strides=(2, 2), pads=(2, 2, 2, 2))
    y = convt.dask.conv_transpose(da.from_array(x, chunks=(1, 8, 7, 13)), w, method="tune",
                                  **kw).compute(scheduler="threads")
    method = convt.ConvTranspose(w, **kw).method_for(x.shape)
    assert method == "direct"
    np.testing.assert_array_equal(y, convt.conv_transpose(x, w, method=method, **kw))
    assert convt.export_tuning()["entries"] == {}   # chosen by the cost model, not timed


def test_dask_applies_the_range_guard(rng):
    da = pytest.importorskip("dask.array")
    import convt.dask

    w = rng.standard_normal((1, 1, 2)).astype(np.float32)
    with pytest.raises(ValueError, match="strides"):
        convt.dask.conv_transpose(da.zeros((1, 1, 4), chunks=2, dtype=np.float32), w,
                                  strides=(2**22,))
