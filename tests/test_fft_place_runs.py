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
    """Runs counted by walking ``fft_place2``'s loops over its own arguments (the frames
    z (N0, N1, G, nc, ..., Mg), the output's O0 x O1, the tiles, offsets and steps): per
    output row, channel block and block of 16 columns, ``_PLACE_BLOCK_RUNS``, plus one run
    per column of each tile whose frame covers it."""
    total = 0
    for n0_, n1_, g, nc, mg, o0n, o1n, tiles, off, step in calls:
        per_block = 0
        for o0 in range(o0n):
            for b1 in range(0, o1n, 16):
                ob = min(16, o1n - b1)
                per_block += fft_cost._PLACE_BLOCK_RUNS
                for t0 in range(tiles[0]):
                    if not 0 <= o0 + off[0] - t0 * step[0] < n0_:
                        continue
                    for t1 in range(tiles[1]):
                        lo = max(b1, t1 * step[1] - off[1])
                        hi = min(b1 + ob, n1_ + t1 * step[1] - off[1])
                        per_block += max(0, hi - lo)
        total += nc * g * -(-mg // 16) * per_block
    return total


@pytest.mark.parametrize("x_shape, w_shape, kw", [
    ((2, 2, 46, 8), (2, 1, 25, 7), dict(strides=(3, 3), dilations=(2, 2), group=2)),  # dw
    ((1, 6, 9, 7), (6, 2, 3, 5), dict(strides=(2, 3), group=3)),                       # 2 a group
    ((3, 4, 10, 12), (4, 17, 3, 3), {}),                                               # 17: 2 blocks
    ((2, 8, 5, 40), (8, 4, 6, 2), dict(strides=(1, 2), group=2)),
    ((1, 32, 6, 6), (32, 16, 4, 4), dict(strides=(2, 2))),                             # 16: 1 block
    ((1, 32, 48, 48), (32, 32, 9, 9), {}),                             # one-shot: 2 x 2 tiles
    ((4, 8, 32, 32), (8, 8, 4, 4), dict(strides=(2, 2), pads=(1, 2, 1, 0))),   # tiles, offsets
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_place_runs_are_place2s_channel_blocks(monkeypatch, x_shape, w_shape, kw, dtype):
    """On a 2-D channels-first call (one-shot) the runs equal the ones counted by walking
    the loops of ``fft_place2`` over the arguments the backend's ``place2`` really gets
    (batch chunks, tiles and offsets included)."""
    geom = _geom(x_shape, w_shape, **kw)
    lay = fft_mod.fft_layout(geom, dtype, one_shot=True)
    assert prod(lay.tiles) <= fft_cost.PLACE_TILES and not lay.save
    seen = []
    real = fft_mod.place2

    def spy(y, z, geom_, lay_, n0, workers):
        assert lay_.tiles == lay.tiles
        steps = [b * s for b, s in zip(lay_.block, geom_.strides)]
        seen.append((z.shape[0], z.shape[1], z.shape[2], z.shape[3], z.shape[-1],
                     *y.shape[-2:], lay_.tiles, lay_.offset, steps))
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
