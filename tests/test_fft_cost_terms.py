"""The FFT cost model's placement and spectra-traffic terms (``convt._backends.fft_cost``):
what each counts, checked against the arrays the backend really makes (docs/dispatch.md,
"FFT and depthwise estimates"). No timing."""
from math import prod

import numpy as np
import pytest

import convt
import convt._backends.fft as fft_mod
import convt._backends.fft_spectra as spectra_mod
from convt._backends import fft_cost
from convt._dispatch.constants import current


def _geom(x_shape, w_shape, **kw):
    return convt.explain(x_shape, np.zeros(w_shape, np.float32), method="fft", **kw).geometry


def _opts(lay):
    return [(s, b, t) for s, b, t in zip(lay.small, lay.block, lay.tiles)]


@pytest.mark.parametrize("x_shape, w_shape, kw", [
    ((2, 3, 8, 8), (3, 5, 4, 4), {}),
    ((1, 6, 9, 7), (6, 2, 3, 5), dict(strides=(2, 3), group=3)),
    ((2, 4, 40), (4, 6, 9), dict(strides=(2,), dilations=(3,))),
])
def test_copies_count_spectra_and_the_placed_window(x_shape, w_shape, kw):
    """fft_copy_s counts the spectra's values (the input tiles' and the products'), and a
    frame value only when overlap-add sums tiles; fft_place_s counts the output window
    (batch x C_out x outputs), the values the placement writes."""
    c = current()
    geom = _geom(x_shape, w_shape, **kw)
    lay = fft_mod.fft_layout(geom, np.float32)
    assert not lay.blocked
    nbins = prod(lay.small[:-1]) * (lay.small[-1] // 2 + 1)
    phases = prod(geom.strides)
    feats = fft_cost._features(geom, _opts(lay), 4)
    assert feats[2] == geom.batch * (geom.c_in + phases * geom.c_out) * nbins
    rates = fft_cost.unit_rates(c)
    free = fft_cost.unit_rates(dict(c, fft_place_s=0.0))
    budget = fft_mod.FFT_MEMORY_BUDGET
    priced = fft_cost.layout(geom, np.float32, budget, False, rates)
    unpriced = fft_cost.layout(geom, np.float32, budget, False, free)
    placed = geom.batch * geom.c_out * prod(geom.out_shape)
    assert priced.cost - unpriced.cost == pytest.approx(placed * c["fft_place_s"])


@pytest.mark.parametrize("x_shape, w_shape, kw, opts, passes", [
    ((1, 2, 64, 64), (2, 2, 3, 3), {}, [(16, 14, 5), (16, 14, 5)], 3),         # 25 tiles: sum
    ((1, 2, 64, 64), (2, 2, 3, 3), {}, [(40, 38, 2), (24, 22, 3)], 1),         # 6: place2
    ((1, 64, 64, 2), (2, 2, 3, 3), dict(data_format="NXC"),
     [(40, 38, 2), (24, 22, 3)], 2),                                           # _place_tiles
    ((2, 3, 500), (3, 4, 9), dict(strides=(2,)), [(64, 60, 9)], 3),
    ((2, 3, 500), (3, 4, 9), dict(strides=(2,)), [(128, 124, 5)], 2),
    ((2, 3, 500), (3, 4, 9), dict(strides=(2,)), [(512, 500, 1)], 0),          # one tile
    ((2, 3, 500), (3, 4, 9), dict(strides=(2,)), [(128, 124, 5, 2)], 0),       # overlap-save
])
def test_tile_frames_count_the_passes_of_each_placement_path(x_shape, w_shape, kw, opts,
                                                             passes):
    """An overlap-add tiling's frame values, once per pass the placement path makes over
    them (fft_move_s): place2 adds them into y (1), _place_tiles by NumPy per tile
    (2), the overlap-add sum past PLACE_TILES tiles (3); the copy unit counts the spectra
    only."""
    geom = _geom(x_shape, w_shape, **kw)
    tiles = prod(o[2] for o in opts)
    frames = geom.batch * tiles * prod(geom.strides) * geom.c_out * prod(o[0] for o in opts)
    assert fft_cost._tile_frames(geom, opts) == passes * frames
    nbins = prod(o[0] for o in opts[:-1]) * (opts[-1][0] // 2 + 1)
    if len(opts[0]) == 3:
        feats = fft_cost._features(geom, opts, 4)
        assert feats[2] == geom.batch * tiles * (geom.c_in + prod(geom.strides) * geom.c_out) \
            * nbins


def test_one_shot_dft_multiply_adds_priced_at_their_own_rate():
    """A one-shot call's kernel-spectra DFT multiply-adds are priced at fft_dft_cmac_s,
    whatever the order of COST_UNITS."""
    c = dict(current())
    geom = _geom((1, 32, 48, 48), (32, 32, 9, 9))
    budget = fft_mod.FFT_MEMORY_BUDGET
    lay = fft_mod.fft_layout(geom, np.float32, one_shot=True)
    pick = lambda options: [next(o for o in opts if o[:3] == (s, b, t))   # noqa: E731
                            for opts, s, b, t in zip(options, lay.small, lay.block, lay.tiles)]
    spectra = [fft_cost.layout(geom, np.float32, budget, True, fft_cost.unit_rates(
        dict(c, fft_dft_cmac_s=r)), pick=pick).spectra for r in (0.0, 1e-9)]
    fused = spectra_mod.fuses_lead(geom, lay.small)
    feats = spectra_mod.spectrum_features(geom, lay.small, True)
    assert feats[1] > 0 and fused
    assert spectra[1] - spectra[0] == pytest.approx(feats[1] * 1e-9)


def test_place_lines_priced_where_place2_gathers_from_memory(monkeypatch):
    """2-D channels-first frames past fft_cost._PLACE_CACHE: per output pixel, batch
    element, group and tile, the 64-byte lines of its C_out/G values; frames in cache, the
    channels-last layout and 1-D calls (not ``place2``) pay nothing."""
    dw = _geom((2, 47, 24, 55), (47, 1, 27, 27), strides=(2, 2), dilations=(2, 1), group=47)
    lay = fft_mod.fft_layout(dw, np.float32)
    opts = _opts(lay)
    frames = lay.chunk * dw.c_out * prod(lay.small) * prod(dw.strides) * prod(lay.tiles)
    assert frames * 4 > fft_cost._PLACE_CACHE and prod(lay.tiles) <= fft_cost.PLACE_TILES
    n = fft_cost._place_lines(dw, opts, 4, lay.chunk)
    assert n == dw.batch * 47 * prod(dw.out_shape) * prod(lay.tiles) * 64
    # 38 float32 output channels a group: three lines a pixel (152 bytes)
    dense = _geom((3, 2, 21, 21), (2, 38, 29, 29), strides=(2, 2))
    lay_d = fft_mod.fft_layout(dense, np.float32)
    assert fft_cost._place_lines(dense, _opts(lay_d), 4, lay_d.chunk) == \
        3 * prod(dense.out_shape) * 3 * 64
    assert fft_cost._place_lines(dense, _opts(lay_d), 8, lay_d.chunk) == \
        3 * prod(dense.out_shape) * 5 * 64
    small = _geom((1, 4, 8, 8), (4, 4, 3, 3))
    lay_s = fft_mod.fft_layout(small, np.float32)
    assert fft_cost._place_lines(small, _opts(lay_s), 4, lay_s.chunk) == 0
    nxc = _geom((2, 24, 55, 47), (47, 1, 27, 27), strides=(2, 2), dilations=(2, 1), group=47,
                data_format="NXC")
    assert nxc.data_format == "NXC" and fft_cost._place_lines(nxc, opts, 4, lay.chunk) == 0
    one_d = _geom((2, 47, 3000), (47, 1, 27), group=47)
    lay_1 = fft_mod.fft_layout(one_d, np.float32)
    assert fft_cost._place_lines(one_d, _opts(lay_1), 4, max(lay_1.chunk, 1)) == 0
    # the term is priced exactly where the backend places by place2
    seen = []
    real = fft_mod.place2
    monkeypatch.setattr(fft_mod, "place2", lambda *a: seen.append(a[2]) or real(*a))
    x = np.zeros((2, 47, 24, 55), np.float32)
    w = np.zeros((47, 1, 27, 27), np.float32)
    convt.ConvTranspose(w, method="fft", strides=(2, 2), dilations=(2, 1), group=47)(x)
    assert len(seen) == -(-dw.batch // lay.chunk)


def test_spectra_stream_mirrors_kernel_spectrum(monkeypatch):
    """A one-shot call's whole spectra (not fused: 273 taps a phase) stream each array of
    the chain past fft_cost._STREAM_BYTES twice (written, read): the polyphase kernel and
    its copy, the transform's output and its split copy, sized as kernel_spectrum makes
    them; the one-shot price grows by those bytes at fft_read_s."""
    geom = convt.explain((3, 215, 22), np.zeros((215, 13, 364)), strides=(4,), dilations=(3,),
                         method="fft").geometry
    lay = fft_mod.fft_layout(geom, np.float64, one_shot=True)
    assert not spectra_mod.fuses_lead(geom, lay.small)
    taps = spectra_mod.phase_taps(geom)[0]
    cols = 4 * 215 * 13
    assert not spectra_mod.uses_dft(taps, lay.small[0], last=True)   # scipy.fft's rfft
    poly, spec = cols * taps * 8, cols * (lay.small[0] // 2 + 1) * 16
    padded = cols * lay.small[0] * 8   # the polyphase copy, padded to the rfft's length
    assert poly > fft_cost._STREAM_BYTES and spec > fft_cost._STREAM_BYTES
    assert fft_cost.spectra_stream(geom, lay.small, 8) == 2 * poly + 2 * padded + 4 * spec
    made = []
    real = spectra_mod._polyphase
    monkeypatch.setattr(spectra_mod, "_polyphase",
                        lambda *a: made.append(real(*a)) or made[-1])
    w = np.zeros((215, 13, 364))
    out = spectra_mod.kernel_spectrum(w, geom, lay.small, np.float64, 2)
    assert made[0].nbytes == padded and out.nbytes == spec
    c = dict(current())
    rates = fft_cost.unit_rates(c)
    none = fft_cost.unit_rates(dict(c, fft_read_s=0.0))
    budget = fft_mod.FFT_MEMORY_BUDGET
    pick = lambda options: [(lay.small[0], lay.block[0], lay.tiles[0])]   # noqa: E731
    a = fft_cost.layout(geom, np.float64, budget, True, rates, pick=pick)
    b = fft_cost.layout(geom, np.float64, budget, True, none, pick=pick)
    assert a.spectra - b.spectra == pytest.approx((2 * poly + 2 * padded + 4 * spec)
                                                  * c["fft_read_s"])
    small = _geom((1, 8, 64), (8, 8, 9))
    assert fft_cost.spectra_stream(small, fft_mod.fft_layout(small, np.float32).small, 4) == 0
