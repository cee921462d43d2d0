"""1-D overlap-save in block groups (``convt._backends.fft_blocks.run_save``): forced on, over
a parametrized space of geometries (strides, dilations, pads of either sign, groups,
layouts, output_padding), one-shot and prepared, against the float64 reference; the same
bits for 1, 2 and 3 workers with groups of one block; the cost model's layout."""
import itertools

import numpy as np
import pytest

import convt
import convt._backends.fft as fft_mod
import convt._backends.fft_blocks as blocks_mod

TOL = {np.float32: 1e-5, np.float64: 1e-12}

GEOMETRIES = [  # (N, C_in, C_out, groups), input length, kernel, attributes
    (g, i, k, dict(strides=[s], dilations=[d], pads=list(p)))
    for g, i, k, s, d, p in itertools.product(
        [(2, 4, 6, 1), (1, 6, 4, 2), (3, 3, 3, 3)], [1, 9, 130], [1, 4, 31], [1, 3], [1, 2],
        [(0, 0), (5, 2), (3, 40)])
    if (i - 1) * s + (k - 1) * d + 1 - sum(p) > 0   # a non-empty output
] + [
    ((1, 2, 2, 1), 700, 255, dict(pads=[127, 127])),
    ((2, 3, 5, 1), 400, 16, dict(strides=[4], output_padding=[3])),
    ((1, 4, 4, 1), 300, 9, dict(data_format="NXC", strides=[2], pads=[4, 4])),
    ((1, 2, 2, 1), 50, 7, dict(output_shape=[60], strides=[2])),
]


def _data(case, dtype, seed=5):
    (n, c, m, g), length, k, kw = case
    rng = np.random.default_rng(seed)
    shape = (n, length, c) if kw.get("data_format") == "NXC" else (n, c, length)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((c, m // g, k)).astype(dtype)
    b = rng.standard_normal(m).astype(dtype)
    return x, w, b, dict(kw, group=g)


def _error(y, ref):
    return float(np.max(np.abs(y - ref)) / max(np.max(np.abs(ref)), 1e-300))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", GEOMETRIES, ids=[
    f"{i}-{c[1]}x{c[2]}-{'-'.join(f'{k}{v}' for k, v in c[3].items())}"
    for i, c in enumerate(GEOMETRIES)])
def test_save_matches_reference(case, dtype, monkeypatch):
    monkeypatch.setattr(fft_mod, "FFT_OVERLAP_SAVE", True)
    monkeypatch.setattr(blocks_mod, "SAVE_CACHE", 1 << 12)   # several groups
    x, w, b, kw = _data(case, dtype)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               b.astype(np.float64), method="reference", **kw)
    one = convt.conv_transpose(x, w, b, method="fft", workers=2, **kw)
    op = convt.ConvTranspose(w, b, method="fft", workers=2, **kw)
    prepared = op(x)
    for y in (one, prepared):
        assert y.dtype == dtype and y.shape == ref.shape
        assert _error(y, ref) <= TOL[dtype]
    variant = op._plan.geometry(x.shape).variant
    assert variant == "fft-overlap-save"


@pytest.mark.parametrize("one_shot", [True, False])
def test_save_bits_do_not_depend_on_workers(one_shot, monkeypatch):
    monkeypatch.setattr(fft_mod, "FFT_OVERLAP_SAVE", True)
    monkeypatch.setattr(blocks_mod, "SAVE_CACHE", 1)   # one block per group: many groups
    x, w, b, kw = _data(((2, 8, 8, 1), 3000, 63, dict(pads=[31, 31])), np.float32, seed=7)
    ys = []
    for workers in (1, 2, 3):
        if one_shot:
            ys.append(convt.conv_transpose(x, w, b, method="fft", workers=workers, **kw))
        else:
            ys.append(convt.ConvTranspose(w, b, method="fft", workers=workers, **kw)(x))
    np.testing.assert_array_equal(ys[0], ys[1])
    np.testing.assert_array_equal(ys[0], ys[2])


def test_save_layout_and_groups():
    geom = convt.explain((4, 8, 16000), np.zeros((8, 8, 255), np.float32)).geometry
    lay = fft_mod.fft_layout(geom, np.float32)
    # audio_k255_s1: the cost model takes overlap-save blocks (docs/fft.md, "Overlap-save")
    assert lay.save > 0 and lay.tiles[0] > 1
    assert lay.small[0] - lay.block[0] + 1 == 255            # B = L - Q + 1
    assert lay.block[0] * lay.tiles[0] >= 16000 + 254        # every output position covered
    groups = -(-lay.tiles[0] // lay.save)
    assert blocks_mod.save_groups(lay.small[0], lay.tiles[0], 4, 8, 8, 8) == lay.save
    assert 1 <= groups <= lay.tiles[0]
    # a short signal keeps one transform; 2-D never takes overlap-save
    short = convt.explain((1, 8, 200), np.zeros((8, 8, 9), np.float32)).geometry
    assert fft_mod.fft_layout(short, np.float32).save == 0
    two_d = convt.explain((1, 4, 64, 64), np.zeros((4, 4, 9, 9), np.float32)).geometry
    assert fft_mod.fft_layout(two_d, np.float32).save == 0


def test_save_ruled_out(monkeypatch):
    monkeypatch.setattr(fft_mod, "FFT_OVERLAP_SAVE", False)
    geom = convt.explain((4, 8, 16000), np.zeros((8, 8, 255), np.float32)).geometry
    assert fft_mod.fft_layout(geom, np.float32).save == 0


def test_save_groups_bound():
    # every group's arrays within SAVE_CACHE, unless one block alone is larger
    for length, blocks in [(256, 100), (4096, 7), (16384, 3)]:
        per = blocks_mod.save_groups(length, blocks, 1, 8, 8, 8)
        bins = length // 2 + 1
        block_bytes = bins * 8 * 16 + length * 4 * 8
        assert per == 1 or per * block_bytes <= blocks_mod.SAVE_CACHE * 1.5
        assert 1 <= per <= blocks


def test_describe_names_the_tiling():
    backend = fft_mod.BACKEND
    audio = convt.explain((4, 8, 16000), np.zeros((8, 8, 255), np.float32)).geometry
    lay = fft_mod.fft_layout(audio, np.float32)
    assert backend.describe(audio, np.float32) == (
        f"overlap-save: {lay.tiles[0]} blocks of {lay.small[0]} in "
        f"{-(-lay.tiles[0] // lay.save)} groups")
    short = convt.explain((1, 8, 200), np.zeros((8, 8, 9), np.float32)).geometry
    assert backend.describe(short, np.float32) == \
        f"one {fft_mod.fft_layout(short, np.float32).small[0]}"
    nine = convt.explain((1, 32, 48, 48), np.zeros((32, 32, 9, 9), np.float32)).geometry
    assert backend.describe(nine, np.float32, one_shot=True).startswith("overlap-add: ")
