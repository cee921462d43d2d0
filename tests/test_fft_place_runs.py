"""The FFT cost model's placement runs (``convt._backends.fft_cost._place_runs``,
``fft_place_run_s``): what they count, checked against the frames and output the backend
really hands ``fft_place2``, and where they are priced (docs/dispatch.md, "Few channels a
group in the FFT's placement"). No timing."""
from math import prod

import numpy as np
import pytest

import convt
import convt._backends.fft as fft_mod
from convt._backends import fft_cost
from convt._dispatch.constants import current


def _geom(x_shape, w_shape, **kw):
    return convt.explain(x_shape, np.zeros(w_shape, np.float32), method="fft", **kw).geometry


def _opts(lay):
    return [(s, b, t) for s, b, t in zip(lay.small, lay.block, lay.tiles)]


def _runs_of_place2_calls(calls):
    """Runs counted from ``place2``'s own arguments: per output row (batch element, group,
    row of the view (nc, G, Mg, O0, O1)), ceil(Mg / 16) channel blocks, each over the row's
    O1 columns plus ``_PLACE_BLOCK_RUNS`` per block of 16 columns."""
    total = 0
    for view_shape in calls:
        nc, g, mg, o0, o1 = view_shape
        total += nc * g * o0 * -(-mg // 16) * (o1 + fft_cost._PLACE_BLOCK_RUNS * -(-o1 // 16))
    return total


@pytest.mark.parametrize("x_shape, w_shape, kw", [
    ((2, 2, 46, 8), (2, 1, 25, 7), dict(strides=(3, 3), dilations=(2, 2), group=2)),  # dw
    ((1, 6, 9, 7), (6, 2, 3, 5), dict(strides=(2, 3), group=3)),                       # 2 a group
    ((3, 4, 10, 12), (4, 17, 3, 3), {}),                                               # 17: 2 blocks
    ((2, 8, 5, 40), (8, 4, 6, 2), dict(strides=(1, 2), group=2)),
    ((1, 32, 6, 6), (32, 16, 4, 4), dict(strides=(2, 2))),                             # 16: 1 block
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_place_runs_are_place2s_channel_blocks(monkeypatch, x_shape, w_shape, kw, dtype):
    """On a 2-D channels-first call the runs equal the ones counted from the views the
    backend's ``place2`` is really given (batch chunks included)."""
    geom = _geom(x_shape, w_shape, **kw)
    lay = fft_mod.fft_layout(geom, dtype)
    assert prod(lay.tiles) <= fft_cost.PLACE_TILES and not lay.save
    seen = []
    real = fft_mod.place2

    def spy(y, z, geom_, lay_, n0, workers):
        nc = z.shape[3]
        seen.append((nc, geom_.groups, geom_.c_out // geom_.groups, *geom_.out_shape))
        return real(y, z, geom_, lay_, n0, workers)

    monkeypatch.setattr(fft_mod, "place2", spy)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    got = convt.conv_transpose(x, w, method="fft", **kw)
    ref = convt.conv_transpose(x, w, method="reference", **kw)
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3)
    assert seen
    assert fft_cost._place_runs(geom, _opts(lay)) == _runs_of_place2_calls(seen)


def test_place_runs_grow_as_channels_a_group_shrink():
    """Per output value, one channel a group costs 16 times the runs of 16 a group, and 17
    channels a group take two blocks (the kernel's inner loop is started per 16)."""
    per_value = {}
    for mg in (1, 2, 16, 17):
        geom = _geom((1, 4, 16, 32), (4, mg, 3, 3), group=4)
        lay = fft_mod.fft_layout(geom, np.float32)
        values = geom.batch * geom.c_out * prod(geom.out_shape)
        per_value[mg] = fft_cost._place_runs(geom, _opts(lay)) / values
    assert per_value[1] == pytest.approx(16 * per_value[16])
    assert per_value[2] == pytest.approx(8 * per_value[16])
    assert per_value[17] == pytest.approx(2 * per_value[16] * 16 / 17)


@pytest.mark.parametrize("x_shape, w_shape, kw, opts", [
    ((1, 4, 64, 64), (4, 1, 3, 3), dict(group=4), [(16, 14, 5), (16, 14, 5)]),     # 25 tiles
    ((1, 64, 64, 4), (4, 1, 3, 3), dict(group=4, data_format="NXC"),
     [(72, 64, 1), (72, 64, 1)]),                                                  # NXC
    ((2, 3, 500), (3, 1, 9), dict(strides=(2,), group=3), [(512, 500, 1)]),         # 1-D
    ((2, 3, 500), (3, 1, 9), dict(strides=(2,), group=3), [(128, 124, 5, 2)]),      # save
    ((1, 2, 6, 6, 6), (2, 1, 3, 3, 3), dict(group=2), [(8, 6, 1)] * 3),              # 3-D
])
def test_no_place_runs_off_place2s_path(x_shape, w_shape, kw, opts):
    """Only ``place2`` (2-D channels-first, at most PLACE_TILES tiles) pays runs: the NumPy
    placements (channels-last, 1-D, 3-D, the overlap-add sum) and overlap-save do not."""
    geom = _geom(x_shape, w_shape, **kw)
    assert fft_cost._place_runs(geom, opts) == 0


def test_place_runs_priced_at_fft_place_run_s():
    """The call's price moves by runs x fft_place_run_s, the same tiling held."""
    c = dict(current())
    geom = _geom((2, 2, 138, 8), (2, 1, 25, 7), strides=(3, 3), dilations=(2, 2), group=2)
    lay = fft_mod.fft_layout(geom, np.float32)
    pick = lambda options: [next(o for o in opts if o[:3] == (s, b, t))   # noqa: E731
                            for opts, s, b, t in zip(options, lay.small, lay.block, lay.tiles)]
    budget = fft_mod.FFT_MEMORY_BUDGET
    cost = [fft_cost.layout(geom, np.float32, budget, False, fft_cost.unit_rates(
        dict(c, fft_place_run_s=r)), pick=pick).cost for r in (0.0, 1e-9)]
    runs = fft_cost._place_runs(geom, _opts(lay))
    assert runs == 2 * 2 * prod(geom.out_shape[:1]) * (geom.out_shape[1] + 4 * 3)
    assert cost[1] - cost[0] == pytest.approx(runs * 1e-9)
    assert "fft_place_run_s" in fft_cost.COST_UNITS and c["fft_place_run_s"] > 0
