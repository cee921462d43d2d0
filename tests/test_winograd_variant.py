"""The Winograd variant of the direct backend (F(2, 2) products along two-tap axes, F(2, 3)
along three-tap ones, stride-1 dilated axes folded into residues of adjacent taps).

Forced on a wide random space of geometries that have Winograd axes, against the float64
reference, with both kernels; the edges of the planning (odd output counts, tiles read from
the halo, several tasks and channel chunks, groups, phases without taps, 3-D, folds); the
input transforms' sums in both bodies; thread-count
independence; the fall-backs for non-finite or huge inputs and weights; the dispatch rule; dask
blocks that keep the whole array's tile pairs.
"""
import numpy as np
import pytest

from convt._kernels import _cpu

import convt
from convt._backends.direct import micro as _micro
from convt._dispatch import plan as _plan
from convt._backends.direct import winograd as _winograd
from convt._backends.direct import winograd_layout as _winograd_layout
from convt._backends.direct.winograd_layout import product_bits
from convt._backends.direct import cfwino as _cfwino
from convt._kernels import _pack as _kpack
from convt._kernels import _wino as _kwino

from conftest import (assert_close, assert_same_for_any_thread_count,
                      assert_weight_fallback, random_cases)

ISAS = _cpu.levels()


def _force(monkeypatch):
    # the NXC kernel, also on the 1-D layers the channels-first one takes (tests/test_cfwino.py
    # checks that it gives this kernel's bits)
    orig = _plan.direct_variant
    monkeypatch.setattr(_plan, "direct_variant",
                        lambda geom, pin=None: orig(geom, pin or ("winograd", False)))
    monkeypatch.setattr(_cfwino, "cf_layout", lambda geom, itemsize: None)


def _has_winograd_axis(case):
    x = np.zeros((case["batch"], case["cg"] * case["kw"]["group"], *case["size"]))
    w = np.zeros((case["cg"] * case["kw"]["group"], case["mg"], *case["k"]))
    try:
        geom = convt.ConvTranspose(w, **case["kw"])._plan.geometry(x.shape).geom
    except ValueError:
        return False
    return _winograd.wino_layout(geom, 16) is not None


CASES = random_cases(80, 11, k_max=7, size_max=10, c_max=30,
                     keep=_has_winograd_axis)
# dilations up to 4: stride-1 axes folded into up to 4 residues
DILATED = random_cases(40, 17, k_max=5, size_max=14, c_max=20, d_max=5,
                       keep=lambda c: _has_winograd_axis(c) and 1 in c["kw"]["strides"]
                       and max(c["kw"]["dilations"]) > 2)


def _data(xs, ws, kw, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(xs), rng.standard_normal(ws),
            rng.standard_normal(ws[1] * kw.get("group", 1)))


def _check(x, w, b, kw, dtype, data_format, monkeypatch, workers=2):
    ref = convt.conv_transpose(x, w, b, method="reference", **kw)
    nxc = data_format == "NXC"
    _force(monkeypatch)
    op = convt.ConvTranspose(w.astype(dtype), b.astype(dtype), method="direct",
                             workers=workers, data_format=data_format, **kw)
    xl = np.moveaxis(x, 1, -1) if nxc else x
    assert op._plan.geometry(xl.shape).variant == "winograd"
    y = op(xl.astype(dtype))
    assert_close(np.moveaxis(y, -1, 1) if nxc else y, ref, "direct", dtype)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES + DILATED,
                         ids=[f"c{i}" for i in range(len(CASES))]
                         + [f"d{i}" for i in range(len(DILATED))])
def test_winograd_matches_reference(case, dtype, isa, monkeypatch):
    monkeypatch.setattr(_cpu, "ISA", isa)
    g = case["kw"]["group"]
    x, w, b = _data((case["batch"], case["cg"] * g, *case["size"]),
                    (case["cg"] * g, case["mg"], *case["k"]), case["kw"], len(str(case)))
    _check(x, w, b, case["kw"], dtype, case["data_format"], monkeypatch)


# (x shape, w shape, keywords) with what each exercises.
EDGES = [
    # 1-D, 2 taps per phase, odd Q (the last tile's second output is not one)
    ((2, 8, 7), (8, 12, 4), dict(strides=(2,), pads=(1, 1))),
    # hifigan-like: 8 phases of 2 taps, C_in 560 (channel chunks of 512 + 48: past KC, one
    # tap a block)
    ((1, 560, 9), (560, 20, 16), dict(strides=(8,), pads=(4, 4))),
    # 2-D, 2 x 2 taps, several tasks per phase (rows past one task), a padded last panel
    ((3, 16, 23, 21), (16, 33, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    # 3 x 3 stride 2 with output_padding: phases of 1 and 2 taps per axis mixed
    ((2, 12, 9, 8), (12, 10, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1),
                                         output_padding=(1, 1))),
    # 3-D, 27 products in the all-Winograd phase; groups
    ((1, 12, 5, 4, 6), (12, 8, 3, 3, 3), dict(strides=(2, 2, 2), pads=(1,) * 6,
                                              output_padding=(1, 1, 1), group=2)),
    # stride 1, two taps: one phase, tiles read the zero halo on both sides
    ((2, 6, 9, 10), (6, 7, 2, 2), dict()),
    # dilation 2, stride 4: taps 2 apart in k, 1 apart in input offset
    ((1, 6, 11), (6, 5, 3), dict(strides=(4,), dilations=(2,), pads=(2, 1))),
    # phases without taps (bias only) and an explicit output shape past the natural one
    ((2, 8, 6, 6), (8, 8, 4, 1), dict(strides=(2, 3), output_shape=(16, 19))),
    # Q = 2 per phase, batch 5: a tile per image and axis
    ((5, 8, 2, 2), (8, 9, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    # a four-tap axis (not Winograd) beside a two-tap one
    ((1, 8, 6, 7), (8, 8, 8, 4), dict(strides=(2, 2), pads=(1, 2, 1, 1))),
    # the same with 130 channels: blocks of one tap (TB = 256 // 130) in 4-tap products
    ((1, 130, 5, 6), (130, 8, 8, 4), dict(strides=(2, 2), pads=(1, 2, 1, 1))),
    # whole panels of 16 and 16 taps (float32 taps packed by 8 x 8 transposes), 2 groups
    ((2, 24, 5, 6), (24, 16, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=2)),
    # the same in 1-D, 8 taps
    ((1, 20, 9), (20, 32, 8), dict(strides=(4,), pads=(2, 2))),
    # three taps one input apart (stride 1): F(2, 3), 4 products a pair of outputs; odd Q,
    # pads at one end only
    ((2, 7, 9), (7, 5, 3), dict(pads=(0, 2))),
    # dilated_s1's shape: stride 1, taps two inputs apart, folded into 2 x 2 residues of
    # 3 x 3 adjacent taps (16 products for 36 taps)
    ((2, 8, 12, 12), (8, 6, 3, 3), dict(dilations=(2, 2), pads=(2, 2, 2, 2))),
    # folded with dilations 3 and 2, two taps each (F(2, 2)), pads that give the residues
    # different input residues and offsets, 2 groups
    ((1, 6, 8, 7), (6, 9, 2, 2), dict(dilations=(3, 2), pads=(1, 0, 2, 1), group=2)),
    # 3-D: folded F(2, 3) axes (Q 5 and 4 along the first) around an unfolded F(2, 2) one:
    # 4 x 3 x 4 products, weights summed from up to 18 taps
    ((1, 4, 8, 4, 6), (4, 4, 3, 2, 3), dict(dilations=(2, 1, 2), pads=(1, 0, 1, 2, 1, 1))),
    # F(2, 3) along phases of 3 taps (5 x 5 at stride 2) beside a phase of 2 (F(2, 2))
    ((1, 9, 7, 6), (9, 6, 5, 5), dict(strides=(2, 2), pads=(2, 2, 2, 2),
                                      output_padding=(1, 1))),
    # phases without taps beside one with taps, equal in tiles: sets of the last axis's three
    # residues, two of them only the bias
    ((2, 8, 6, 6), (8, 8, 4, 1), dict(strides=(2, 3), output_shape=(16, 18))),
    # sets of 8 residues along the last axis, the last without taps: it follows 7 consecutive
    # outputs of its set-mates (a block of 8 never holds a bias-only row)
    ((1, 8, 5, 4), (8, 16, 4, 7), dict(strides=(2, 8), pads=(1, 0, 1, 0),
                                       output_padding=(0, 1))),
    # hifigan_up1's channels: tiles 2 x 512 channels (4 KiB in float32) apart, so the plain
    # product's rows are copied (_tile.pxd's _wino_build), one chunk of 512
    ((1, 512, 7), (512, 20, 16), dict(strides=(8,), pads=(4, 4))),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs, ws, kw", EDGES, ids=[f"e{i}" for i in range(len(EDGES))])
def test_winograd_edges(xs, ws, kw, dtype, data_format, isa, monkeypatch):
    monkeypatch.setattr(_cpu, "ISA", isa)
    x, w, b = _data(xs, ws, kw, 3)
    _check(x, w, b, kw, dtype, data_format, monkeypatch)


def _sets_or_staged(w, b, kw, x, dtype, sets, monkeypatch, workers=2):
    """y of the forced Winograd variant with channels-first y written by sets of real
    phases (sets=True, where _sets allows them) or staged channels-last (False)."""
    orig = _winograd.wino_layout
    with monkeypatch.context() as m:
        _force(m)
        m.setattr(_winograd, "wino_layout",
                  lambda geom, nr, align=None: orig(geom, nr, align, sets=sets))
        op = convt.ConvTranspose(w.astype(dtype), b.astype(dtype), method="direct",
                                 workers=workers, **kw)
        return op(x.astype(dtype)), orig(op._plan.geometry(x.shape).geom, 16, None, sets)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs, ws, kw", EDGES + [
    ((c["batch"], c["cg"] * c["kw"]["group"], *c["size"]),
     (c["cg"] * c["kw"]["group"], c["mg"], *c["k"]), c["kw"]) for c in CASES[:40]],
    ids=[f"e{i}" for i in range(len(EDGES))] + [f"c{i}" for i in range(40)])
@pytest.mark.parametrize("isa", ISAS)
def test_sets_write_the_staged_bits(xs, ws, kw, dtype, isa, monkeypatch):
    """Channels-first y written from a set's tiles (the residues of the last axis: runs of 8
    outputs in transposed blocks, the rest one value per store) holds the bits of the staged
    write-out (channels-last, then transposed), with 1 and 2 threads; where a table cannot be
    grouped (tiles or Winograd axes that differ along the last axis), the plan stages."""
    monkeypatch.setattr(_cpu, "ISA", isa)
    x, w, b = _data(xs, ws, kw)
    staged, lay = _sets_or_staged(w, b, kw, x, dtype, False, monkeypatch)
    assert not lay.sets
    for workers in (1, 2):
        y, lay = _sets_or_staged(w, b, kw, x, dtype, True, monkeypatch, workers)
        np.testing.assert_array_equal(y, staged)
        assert lay.sets == (_winograd_layout._sets(lay.real.tolist()) is not None)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("edge", [1, 20])
def test_wide_chunks_give_the_bits_of_kc_chunks(edge, data_format, dtype, monkeypatch):
    """Past KC channels the products take chunks of up to _WIDE_KC (one tap a block): the
    tile sums each output over the channels in the same order, so y is bit for bit what
    chunks of KC give."""
    xs, ws, kw = EDGES[edge]
    x, w, b = _data(xs, ws, kw, 4)
    if data_format == "NXC":
        x = np.moveaxis(x, 1, -1).copy()
        kw = dict(kw, data_format="NXC")
    ys, ccs = [], []
    for wide in (_winograd_layout._WIDE_KC, _micro.KC):
        with monkeypatch.context() as m:
            _force(m)
            m.setattr(_winograd_layout, "_WIDE_KC", wide)
            _winograd_layout.wino_layout.cache_clear()
            op = convt.ConvTranspose(w.astype(dtype), b.astype(dtype), method="direct", **kw)
            ys.append(op(x.astype(dtype)))
            ccs.append(op._plan.geometry(x.shape).state[0].cc)
    _winograd_layout.wino_layout.cache_clear()
    assert ccs == [512, 256]
    np.testing.assert_array_equal(ys[0].view(f"u{ys[0].itemsize}"),
                                  ys[1].view(f"u{ys[1].itemsize}"))


def test_sets_reach_what_they_name():
    """The set cases above reach sets of 2 to 8 phases, tap-less phases among them, and the
    rule: hifigan_up3's and dcgan_g3's layers write from sets, hifigan_up1's (8 phases of
    1 MiB of tiles) and dcgan_g1's stage, and dilated_s1's in float64 (1.8 MiB of tiles at
    96 rows); NXC y needs no sets. Tasks of light weights take smaller tiles."""
    def layout(xs, ws, kw, nr=16, sets=True, fmt="NCX"):
        op = convt.ConvTranspose(np.zeros(ws, np.float32), data_format=fmt, **kw)
        shape = xs if fmt == "NCX" else (xs[0], *xs[2:], xs[1])
        return _winograd.wino_layout(op._plan.geometry(shape).geom, nr, None, sets)

    e = [layout(*edge) for edge in EDGES]
    assert e[0].sets and (e[0].tasks[:, 3] == 2).all()
    assert e[1].sets and (e[1].tasks[:, 3] == 8).all()
    assert e[18].sets and (e[18].tasks[:, 3] == 3).all()               # tap-less phases
    assert (e[18].real[:, 10] == 0).sum() == 2 * (e[18].real[:, 10] > 0).sum()
    assert not e[7].sets                                               # Q differs
    assert e[19].sets and (e[19].tasks[:, 3] == 8).all() and e[19].real[7, 10] == 0
    # residues that differ in Winograd axes (or tiles, or tile pairs) are not a set
    row = [1, 1, 4, 0, 0, 0, 1, 1, 2, 0, 3, 1, 1, 8, 0, 0, 0, 1, 1, 3]
    assert _winograd_layout._sets([row, row[:5] + [1] + row[6:]]) == [[0, 1]]
    for col, v in [(8, 1), (2, 5), (16, 1)]:
        other = row[:5] + [1] + row[6:]
        other[col] = v
        assert _winograd_layout._sets([row, other]) is None, col
    assert e[14].sets and (e[14].tasks[:, 3] == 2).all()               # folded residues
    assert not e[3].sets                                               # 2- and 1-tap tiles
    hifigan_up3 = ((1, 128, 4096), (128, 64, 4), dict(strides=(2,), pads=(1, 1)))
    dcgan_g3 = ((16, 128, 16, 16), (128, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)))
    hifigan_up1 = ((1, 512, 256), (512, 256, 16), dict(strides=(8,), pads=(4, 4)))
    dcgan_g1 = ((16, 512, 4, 4), (512, 256, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)))
    assert layout(*hifigan_up3, sets=None).sets and layout(*dcgan_g3, sets=None).sets
    assert not layout(*hifigan_up1, sets=None).sets and not layout(*dcgan_g1, sets=None).sets
    assert layout(*dcgan_g3, sets=None, nr=8).sets                      # float64: 96 rows
    dilated_s1 = ((1, 64, 64, 64), (64, 64, 3, 3), dict(dilations=(2, 2), pads=(2, 2, 2, 2)))
    assert layout(*dilated_s1, sets=None).sets and not layout(*dilated_s1, nr=8, sets=None).sets
    assert not layout(*dcgan_g3, sets=True, fmt="NXC").sets
    # tiles: 256 KiB a task when its weights take at most 1 MiB, else 1 MiB
    # (hifigan_up3: 6 products of 80-value rows; dcgan_g1: 9 of 272, 4.5 MiB of weights)
    assert layout(*hifigan_up3, sets=None).mb == (1 << 18) // (6 * 80 * 4) // 6 * 6
    assert layout(*dcgan_g1, sets=None).mb == (1 << 20) // (9 * 272 * 4) // 6 * 6


def test_edges_reach_what_they_name():
    def layout(xs, ws, kw):
        geom = convt.ConvTranspose(np.zeros(ws), **kw)._plan.geometry(xs).geom
        return _winograd.wino_layout(geom, 16)

    e = [layout(*edge) for edge in EDGES]
    assert (e[0].real[:, 13] % 2 == 1).all()                       # odd Q, 1-D
    assert len(e[1].real) == 8 and e[1].cc == 512 and e[1].tb == 1  # chunks of 512 + 48
    assert len(e[2].tasks) > len(e[2].real) and e[2].panels == 3   # 33 = 2 panels + 1
    assert sorted(set(e[3].real[:, 10])) == [1, 3, 9]              # 1, 3 or 9 products
    assert e[4].prod_max == 27
    assert min(e[5].halo[1:]) == 1 and len(e[5].real) == 1
    assert (e[7].real[:, 10] == 0).any()                           # a tap-less phase
    assert (e[8].real[:, 1:3] == 1).all()                          # one tile per axis
    assert (e[9].real[:, 7] == 1).all() and (e[9].real[:, 8] == 2).all()
    assert e[10].tb == 1 and (e[10].prods[:, 7] == 4).all()
    assert e[11].panels == 1 and e[12].panels == 2                 # Mg % 16 == 0, K % 8 == 0
    assert (e[13].real[:, 19] == 4).all() and (e[13].prods[:, 7] == 1).all()
    assert e[14].ostep == (1, 2, 2) and len(e[14].real) == 4       # residues of 2 x 2
    assert (e[14].real[:, 10] == 16).all() and (e[14].prods[:, 7] == 1).all()
    assert e[14].gstep == (e[14].zstr[0], 2 * e[14].zstr[1], 2 * e[14].zstr[2])
    assert e[15].ostep == (1, 3, 2) and len(e[15].real) == 6 and e[15].real[:, 10].max() == 9
    assert e[16].ostep == (2, 1, 2) and e[16].real[:, 10].max() == 48
    assert np.count_nonzero(e[16].cf, axis=1).max() == 18
    assert sorted(set(e[17].real[:, 10])) == [9, 12, 16]           # 3 x 3, 3 x 4, 4 x 4
    assert e[20].cc == 512 and e[20].gstep[2] * 2 * 4 % 4096 == 0   # copied plain rows
    # every input transform: differences one and two apart, sums, plain
    codes = {int(k) >> (2 * a) & 3 for lay in e for k in lay.tkind for a in range(3)}
    assert codes == {0, 1, 2, 3}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("edge", [14, 15, 16])
def test_folded_residues_share_their_products_weights(edge, dtype):
    """The residues of a folded stride-1 axis sum the same taps for their products: one copy
    of each sum is packed (a quarter of dilated_s1's room, 2 x 2 residues), every product
    points at a copy made from its own taps and coefficients, and y has the bits of a layout
    that packs every product apart."""
    import dataclasses

    xs, ws, kw = EDGES[edge]
    rng = np.random.default_rng(edge)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    plan = convt.ConvTranspose(w, method="direct", **kw)._plan
    geom = plan.geometry(xs).geom
    lay = _winograd.wino_layout(geom, _micro.micro_nr(np.dtype(dtype)))
    p = lay.prods
    taps = lambda q: [tuple(map(tuple, a[p[q, 6]:p[q, 6] + p[q, 7]])) for a in (lay.ck, lay.cf)]
    owner = {int(p[o, 8]): o for o in lay.owners}
    assert len(owner) == len(lay.owners) < len(p)
    assert all(taps(q) == taps(owner[p[q, 8]]) for q in range(len(p)))
    per_tap = lay.packed // p[lay.owners, 7].sum()
    apart = p.copy()
    apart[:, 8] = np.concatenate([[0], np.cumsum(p[:, 7])[:-1]]) * per_tap
    lone = dataclasses.replace(lay, prods=apart, owners=np.arange(len(p)),
                               packed=int(p[:, 7].sum() * per_tap))
    if edge == 14:
        assert lone.packed == 4 * lay.packed
    ys = []
    for layout in (lay, lone):
        wp, ok = _winograd.wino_weights(layout, plan.w_iox_compute, geom.groups, 2, _cpu.ISA)
        with plan.workspace.borrow() as arena:
            ys.append(_winograd.run_wino(x, layout, geom, wp, plan.bias_compute, 2, arena,
                                         _cpu.ISA))
    assert ok and ys[0] is not None
    np.testing.assert_array_equal(ys[0].view(f"u{ys[0].itemsize}"),
                                  ys[1].view(f"u{ys[1].itemsize}"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k, kw", [((4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
                                   ((3, 3), dict(dilations=(2, 2), pads=(2, 2, 2, 2)))])
def test_winograd_bit_identical_for_any_thread_count(dtype, k, kw, monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 64, 13, 11)).astype(dtype)
    w = rng.standard_normal((64, 48, *k)).astype(dtype)
    _force(monkeypatch)
    assert_same_for_any_thread_count(w, x, "winograd", **kw)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, neg", [(2, 1), (2, 0), (4, 3), (4, 1), (4, 2), (4, 0), (8, 7),
                                    (8, 5), (8, 2)])
@pytest.mark.parametrize("isa", ISAS)
def test_corner_transforms_sum_in_corner_order(n, neg, isa, dtype):
    """The input transforms a product tap reads (convt_corners; AVX2: 2 and 4 corners
    unrolled, subtracting for differences along every axis, else flipping signs and adding;
    8 in a loop; then the tail): corner j subtracted when its bits along the axes in neg
    (the differences; the others are sums) are odd in number, added otherwise, left to
    right, so both bodies give numpy's bits for the same sum in the same order."""
    rng = np.random.default_rng(n * 8 + neg)
    src = (rng.standard_normal(400) * 10.0 ** rng.integers(-3, 4, 400)).astype(dtype)
    src[rng.integers(0, 400, 120)] = 0.0     # signed zeros: x + (-y) must give x - y's
    src[rng.integers(0, 400, 120)] = -0.0
    off = np.array([0, 37, 90, 127, 150, 187, 240, 277][:n], np.int64)
    for c in (1, 7, 8, 9, 16, 37, 100):
        dst = np.full(c, np.nan, dtype)
        _kwino.wino_corners(src, off, dst, isa, neg)
        want = src[off[0]:off[0] + c].copy()
        for j in range(1, n):
            part = src[off[j]:off[j] + c]
            want = want - part if bin(j & neg).count("1") % 2 else want + part
        np.testing.assert_array_equal(dst.view(f"u{dst.itemsize}"),
                                      want.view(f"u{want.itemsize}"))


def test_wino_corners_refuses_reads_past_its_source():
    src, dst = np.zeros(10), np.zeros(4)
    with pytest.raises(ValueError, match=r"wino_corners: 2, 4 or 8 corners within src "
                                         r"\(10 values\) for 4 values each; got offsets "
                                         r"\[0, 7\]"):
        _kwino.wino_corners(src, np.array([0, 7], np.int64), dst)
    with pytest.raises(ValueError, match=r"got offsets \[0, 1, 2\]"):
        _kwino.wino_corners(src, np.array([0, 1, 2], np.int64), dst)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs, ws, kw", EDGES, ids=[f"e{i}" for i in range(len(EDGES))])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize("tiny", [False, True], ids=["normal", "subnormal"])
def test_product_weights_identical_from_both_kernels(xs, ws, kw, dtype, stream, tiny,
                                                     monkeypatch):
    """The products' packed weights (sums of +-1 or +-1/2^k times taps, in entry order, fused
    multiply-adds) are the same bits from the AVX2 sums and the portable ones, on 1 and 2
    threads, stored through the caches or past them (large packs:
    _winograd._STREAM_PACK_BYTES, lowered here to every pack); also for weights near the
    smallest normal number, whose halves are subnormal (the portable sums rounded the
    product before adding it: 4,340 of 16,384 F(2, 3) weights differed)."""
    if stream:
        monkeypatch.setattr(_winograd, "_STREAM_PACK_BYTES", 0)
    w = np.random.default_rng(4).standard_normal(ws).astype(dtype)
    if tiny:
        w *= np.finfo(dtype).tiny
    plan = convt.ConvTranspose(w, **kw)._plan
    layout = _winograd.wino_layout(plan.geometry(xs).geom, _micro.micro_nr(np.dtype(dtype)))
    if layout is None:
        pytest.skip("no Winograd axis")
    w_iox = plan.w_iox_compute
    ref, ok = _winograd.wino_weights(layout, w_iox, kw.get("group", 1), 1, 0)
    assert ok
    for isa in ISAS:
        for workers in (1, 2):
            packed, ok = _winograd.wino_weights(layout, w_iox, kw.get("group", 1), workers, isa)
            assert ok
            np.testing.assert_array_equal(packed.view(f"u{packed.itemsize}"),
                                          ref.view(f"u{ref.itemsize}"))


def _late_and_products(x, w, b, kw, workers, monkeypatch):
    """(one-shot y with the products' weights summed in the kernel, prepared y from
    pack_wino's products), the variant forced and _LATE_SUM_BYTES lowered to every pack."""
    monkeypatch.setattr(_winograd, "_LATE_SUM_BYTES", 0)
    _force(monkeypatch)
    kw = dict(kw, method="direct", workers=workers)
    one = convt._api._OneShot(w, b, **kw)
    planned = one._plan.geometry(x.shape)
    assert planned.variant == "winograd" and planned.state[3] is True     # late sums
    prepared = convt.ConvTranspose(w, b, **kw)
    assert prepared._plan.geometry(x.shape).state[3] is False            # products
    return one(x), prepared(x)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES[:40], ids=[f"c{i}" for i in range(40)])
def test_late_sums_give_the_products_bits(case, dtype, isa, monkeypatch):
    """One-shot calls with large products sum each panel's product weights in the kernel
    from the packed taps (_winograd.late_sums); the sums are pack_wino's, term by term, so y
    is the prepared operator's to the bit (random layers with Winograd axes, both kernels)."""
    monkeypatch.setattr(_cpu, "ISA", isa)
    g = case["kw"]["group"]
    x, w, b = _data((case["batch"], case["cg"] * g, *case["size"]),
                    (case["cg"] * g, case["mg"], *case["k"]), case["kw"], len(str(case)))
    if case["data_format"] == "NXC":
        x = np.moveaxis(x, 1, -1)
    kw = dict(case["kw"], data_format=case["data_format"])
    late, products = _late_and_products(x.astype(dtype), w.astype(dtype), b.astype(dtype),
                                        kw, 2, monkeypatch)
    np.testing.assert_array_equal(late, products)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs, ws, kw", EDGES, ids=[f"e{i}" for i in range(len(EDGES))])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_late_sums_on_the_edges(xs, ws, kw, dtype, stream, isa, monkeypatch):
    """The same on the planning's edges (channel chunks of 256 + 44, a padded last panel,
    3-D products of 8 taps, groups, tap-less phases, whole panels for the transposing
    packer), both kernels, on 1 and 2 threads (pack and kernel: conftest lifts the serial
    thresholds), with the taps stored through the caches or past them; and against the
    float64 reference."""
    monkeypatch.setattr(_cpu, "ISA", isa)
    if stream:
        monkeypatch.setattr(_winograd, "_STREAM_PACK_BYTES", 0)
    x, w, b = (a.astype(dtype) for a in _data(xs, ws, kw, 6))
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               b.astype(np.float64), method="reference", **kw)
    for workers in (1, 2):
        late, products = _late_and_products(x, w, b, kw, workers, monkeypatch)
        np.testing.assert_array_equal(late, products)
        assert_close(late, ref, "direct", dtype)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs, ws, kw", [EDGES[i] for i in (1, 2, 4, 11, 12)] + [
    # whole panels, 9 taps (a block of 8 and one tap past it) and 3 (none in blocks)
    ((1, 8, 6, 6), (8, 32, 3, 3), dict(dilations=(2, 2), pads=(2, 2, 2, 2))),
    ((1, 8, 9), (8, 16, 3), dict(pads=(1, 1)))],
    ids=["e1", "e2", "e4", "e11", "e12", "k9", "k3"])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_late_sums_taps_layout(xs, ws, kw, dtype, isa, stream, monkeypatch):
    """wino_taps against its layout written out in numpy: tap k of input channel c (group
    g) and output channel m of the group at k * line + ((g * panels + m // NR) * Cg + c) * NR
    + m % NR, zeros in a last panel's padding, line = tap_values (a tap's values and a gap
    of NR, never read); by 8 x 8 transposes and the taps past the last 8 one by one
    (float32, whole panels: e11, e12, k9, k3) or by pack_wino's one-term sums, on 1 and 2
    threads."""
    if stream:
        monkeypatch.setattr(_winograd, "_STREAM_PACK_BYTES", 0)
    w = np.random.default_rng(7).standard_normal(ws).astype(dtype)
    plan = convt.ConvTranspose(w, **kw)._plan
    layout = _winograd.wino_layout(plan.geometry(xs).geom, _micro.micro_nr(np.dtype(dtype)))
    g, nr, np_ = kw.get("group", 1), layout.nr, layout.panels
    cg, mg, kt = ws[0] // g, ws[1], int(np.prod(ws[2:]))
    want = np.zeros((kt, g, np_ * nr // nr, cg, nr), dtype)
    wk = np.zeros((g, cg, np_ * nr, kt), dtype)
    wk[:, :, :mg] = w.reshape(g, cg, mg, kt)
    want[:] = wk.reshape(g, cg, np_, nr, kt).transpose(4, 0, 2, 1, 3)
    line = _winograd.tap_values(layout, ws[0])
    assert line == (np_ * ws[0] + 1) * nr
    for workers in (1, 2):
        taps, ok = _winograd.wino_taps(layout, plan.w_iox_compute, g, workers, isa)
        assert ok and taps.size == kt * line
        np.testing.assert_array_equal(taps.reshape(kt, line)[:, :-nr],
                                      want.reshape(kt, -1))


@pytest.mark.parametrize("bad", ["wbuf", "rstride", "cf"])
def test_wino_conv_refuses_late_sums_it_cannot_hold(bad, monkeypatch):
    """wino_conv's late sums check their scratch and taps before any thread reads them: a
    per-thread buffer too small, a tap stride shorter than a tap, or tables that disagree
    raise ValueError (the arguments run_wino passes, one of them spoiled)."""
    monkeypatch.setattr(_winograd, "_LATE_SUM_BYTES", 0)
    _force(monkeypatch)
    real = _winograd.wino_conv

    def spoiled(*args, **kw):
        if bad == "wbuf":
            kw["wbuf"] = kw["wbuf"][:-1]
        elif bad == "rstride":
            kw["rstride"] -= 16 + 1   # the gap after a tap's lines (tap_values), and one more
        else:
            kw["cf"] = kw["cf"][:-1]
        return real(*args, **kw)

    monkeypatch.setattr(_winograd, "wino_conv", spoiled)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 32, 4, 4)).astype(np.float32)
    x = rng.standard_normal((1, 16, 5, 5)).astype(np.float32)
    one = convt._api._OneShot(w, method="direct", strides=(2, 2), pads=(1, 1, 1, 1))
    message = {"wbuf": r"wino_conv: late sums need cf and a wbuf of nthreads \* TB \* CC \* NR",
               "rstride": r"wino_conv: ck, cf \(27 entries per product tap\) and rstride do "
                          r"not fit the taps in wp"}
    message["cf"] = message["rstride"]
    with pytest.raises(ValueError, match=message[bad]):
        one(x)


def test_pack_taps_refuses_what_it_cannot_hold():
    """The transposing packer takes whole 16-channel panels, into an output that holds every
    tap's lines; anything else is refused before a store."""
    from convt._kernels._pack import pack_taps
    w = np.zeros((4, 32, 16), np.float32)
    with pytest.raises(ValueError, match=r"pack_taps: Mg must be a multiple of 16; got 20"):
        pack_taps(np.zeros((4, 20, 16), np.float32), np.zeros(4096, np.float32), 1, 128, 1)
    with pytest.raises(ValueError, match=r"pack_taps: line 128 and out \(2047 values\) do not "
                                         r"hold 16 taps of 128 values"):
        pack_taps(w, np.zeros(2047, np.float32), 1, 128, 1)
    with pytest.raises(ValueError, match=r"pack_taps: line 64 and out"):
        pack_taps(w, np.zeros(4096, np.float32), 1, 64, 1)
    assert pack_taps(w, np.zeros(2048, np.float32), 1, 128, 1)



def _misaligned(n, dtype, shift):
    """n zeros of dtype starting ``shift`` values past a 64-byte boundary."""
    raw = np.zeros(n + 64, dtype)
    start = (-raw.ctypes.data % 64) // raw.itemsize + shift
    return raw[start:start + n]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shift, line", [(1, 128), (0, 132), (4, 128)])
def test_pack_taps_streams_only_into_aligned_lines(isa, shift, line):
    """Streamed stores fault on an address that is not 32-byte aligned; the packer takes the
    stream flag as a hint and stores any other destination normally, with the same values
    (it crashed before; convt's own callers always pass aligned packs)."""
    from convt._kernels._pack import pack_taps
    w = np.random.default_rng(3).standard_normal((4, 32, 16)).astype(np.float32)
    n = 15 * line + 128
    want = _misaligned(n, np.float32, 0)
    assert pack_taps(w, want, 1, line, 1, isa, False)
    got = _misaligned(n, np.float32, shift)
    assert pack_taps(w, got, 1, line, 2, isa, True)
    np.testing.assert_array_equal(got, want)
    assert np.count_nonzero(want) == 16 * 128


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shift, pad", [(1, 0), (0, 1), (0, 0)])
def test_pack_wino_streams_only_into_aligned_lines(isa, dtype, shift, pad):
    """As pack_taps: a streamed pack into lines off a 32-byte boundary (a shifted start, or
    a line stride that is not a multiple of 32 bytes) is stored normally, same values."""
    w = np.random.default_rng(4).standard_normal((2, 16, 9)).astype(dtype)
    nr = 64 // np.dtype(dtype).itemsize
    panels = -(-16 // nr)
    ck = np.zeros((9, _kpack.WSUM_MAX), np.int64)
    ck[:, 0] = np.arange(9)
    cf = np.zeros((9, _kpack.WSUM_MAX), dtype)
    cf[:, 0] = 1
    line = panels * 2 * nr + pad                 # one tap's lines, [panel][C_in][NR]
    udst = np.arange(9, dtype=np.int64) * line
    ustride = np.full(9, 2 * nr, np.int64)
    n = 9 * line
    outs = []
    for out, stream in ((_misaligned(n, dtype, 0), False), (_misaligned(n, dtype, shift), True)):
        scratch = np.zeros(2 * _kpack.PACK_KB * panels * nr, dtype)
        assert _kpack.pack_wino(w, out, ck, cf, udst, ustride, scratch, 1, nr, 2, isa, stream)
        outs.append(out)
    np.testing.assert_array_equal(outs[1], outs[0])
    assert np.count_nonzero(outs[0]) == w.size

@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("mg", [20, 32])
@pytest.mark.parametrize("m", [4, 12, 19])
@pytest.mark.parametrize("k", [4, 3], ids=["F22", "F23"])
def test_late_sums_take_weights_whose_sums_cannot_overflow(k, m, mg, nd, isa, monkeypatch):
    """wino_taps' bound: a product weight sums up to 2^nd taps (F(2, 2), 4 x 4 at stride 2)
    or 3^nd (F(2, 3), 3 x 3 at stride 1), so a weight of 2^(128 - 64 - b) or more (float32;
    2^b the first power of two at least that count, 64 = product_bits: the products' half
    of the exponent range) could pass the products' bound and the one-shot call runs the
    micro variant (whose result it returns exactly); just under the bound it runs the
    products. mg = 32 with 16 or 64 taps: tested in the 8 x 8 transposes (convt_taps_f32),
    the weight in either half of a 16-channel panel (output channel m)."""
    monkeypatch.setattr(_cpu, "ISA", isa)
    monkeypatch.setattr(_winograd, "_LATE_SUM_BYTES", 0)
    rng = np.random.default_rng(12)
    w = rng.standard_normal((16, mg, *(k,) * nd)).astype(np.float32)
    x = (1e-30 * rng.standard_normal((1, 16, *(5,) * nd))).astype(np.float32)
    kw = dict(strides=(2 if k == 4 else 1,) * nd, pads=(1,) * (2 * nd))
    bits = ((2 if k == 4 else 3) ** nd - 1).bit_length()   # 2^nd or 3^nd taps
    bits += product_bits(np.float32)
    _force(monkeypatch)
    for big, variant in ((np.float32(2.0 ** (128 - bits)), "micro"),
                         (np.nextafter(np.float32(2.0 ** (128 - bits)), np.float32(0)),
                          "winograd")):
        w[(3, m) + (1,) * nd] = big   # not w[3, m, *...]: a SyntaxError before Python 3.11
        one = convt._api._OneShot(w, method="direct", **kw)
        assert one._plan.geometry(x.shape).variant == variant
        y = one(x)
        assert np.isfinite(y).all()
        if variant == "micro":
            np.testing.assert_array_equal(y, _micro_result(w, x, kw, monkeypatch))
        else:
            ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                       method="reference", **kw)
            assert_close(y, ref, "direct", "float32")


def _micro_result(w, x, kw, monkeypatch):
    orig = _plan.direct_variant
    with monkeypatch.context() as m:
        m.setattr(_plan, "direct_variant", lambda geom, pin=None: orig(geom, ("micro", False)))
        return convt.ConvTranspose(w, method="direct", **kw)(x)


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e38])
@pytest.mark.parametrize("xs, at, fmt", [
    ((1, 16, 9, 9), (0, 3, 4, 2), "NCX"),
    ((2, 16, 9, 9), (1, 15, 8, 8), "NCX"),      # the last value: last block, last channel
    ((2, 16, 9, 9), (1, 0, 0, 0), "NCX"),
    ((2, 9, 9, 16), (1, 8, 8, 15), "NXC"),
    ((1, 16, 700), (0, 9, 699), "NCX"),         # one row, split into shortened blocks
    ((1, 16, 700), (0, 15, 256), "NCX"),
])
def test_winograd_input_it_cannot_take_runs_the_micro_variant(bad, xs, at, fmt, monkeypatch):
    """A NaN or Inf would turn into NaN where the taps give Inf, and a value near the float32
    range (here above 2^125: four of them summed could overflow) would overflow in a
    difference: such a call runs the micro variant, whose result
    (and NaN and Inf pattern) it returns exactly. Channels-first inputs are tested in the
    transpose into the grid, block by block (to_padded_nxc's spare_bits): a bad value in any
    block, the last included, is seen."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal(xs).astype(np.float32)
    x[at] = bad
    nd = len(xs) - 2
    c_in = xs[1] if fmt == "NCX" else xs[-1]
    w = rng.standard_normal((c_in, 20, *(4,) * nd)).astype(np.float32)
    kw = dict(strides=(2,) * nd, pads=(1,) * (2 * nd), data_format=fmt)
    _force(monkeypatch)
    op = convt.ConvTranspose(w, method="direct", **kw)
    assert op._plan.geometry(x.shape).variant == "winograd"
    y = op(x)
    np.testing.assert_array_equal(y, _micro_result(w, x, kw, monkeypatch))
    ok = op(rng.standard_normal(x.shape).astype(np.float32))   # the next call: Winograd
    assert np.isfinite(ok).all()


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("bad", [np.nan, 2e38])
def test_winograd_weights_it_cannot_take_run_another_variant(bad, isa, monkeypatch):
    """A NaN weight runs the pixel kernel (through the micro variant's check); two finite
    weights whose sum overflows float32 run the micro variant."""
    monkeypatch.setattr(_cpu, "ISA", isa)
    rng = np.random.default_rng(9)
    w = rng.standard_normal((16, 20, 4, 4)).astype(np.float32)
    w[2, 3, 0, 1] = w[2, 3, 2, 1] = bad   # the two taps of one phase along axis 0
    x = (0.01 * rng.standard_normal((1, 16, 7, 7))).astype(np.float32)   # y within range
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    _force(monkeypatch)
    op = convt.ConvTranspose(w, method="direct", **kw)
    assert_weight_fallback(op, x, w, bad, **kw)


@pytest.mark.skipif(_cpu.ISA < 1, reason="the Winograd variant runs only with AVX2+FMA")
@pytest.mark.parametrize("xs, ws, kw, variant", [
    ((1, 512, 256), (512, 256, 16), dict(strides=(8,), pads=(4, 4)), "winograd"),
    ((1, 128, 64, 64), (128, 64, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1),
                                              output_padding=(1, 1)), "winograd"),
    # 32 -> 16 channels: the differences and the combining cost more than the products save
    ((1, 32, 24, 24, 24), (32, 16, 3, 3, 3), dict(strides=(2, 2, 2), pads=(1,) * 6,
                                                   output_padding=(1, 1, 1)), "micro"),
    # one tap per phase: nothing to pair
    ((1, 256, 64, 64), (256, 128, 2, 2), dict(strides=(2, 2)), "upsample"),
])
def test_variant_rule(xs, ws, kw, variant):
    op = convt.ConvTranspose(np.ones(ws, np.float32), **kw)
    assert op._plan.geometry(xs).variant == variant


@pytest.mark.skipif(_cpu.ISA < 1, reason="the Winograd variant runs only with AVX2+FMA")
def test_cost_model_prices_the_products():
    geom = convt.ConvTranspose(np.ones((512, 256, 4, 4), np.float32), strides=(2, 2),
                               pads=(1, 1, 1, 1))._plan.geometry((16, 512, 4, 4)).geom
    kind = convt._dispatch.cost.direct_kind(geom)
    layout = _winograd.wino_layout(geom, 16)
    # 16 images x 4 phases x 2 x 2 tiles x 9 products x 512 x 256
    assert kind.variant == "winograd" and kind.macs == layout.macs == 16 * 4 * 4 * 9 * 512 * 256


@pytest.mark.skipif(_cpu.ISA < 1, reason="the Winograd variant runs only with AVX2+FMA")
@pytest.mark.parametrize("size, chunks, ks, kw", [
    # F(2, 2) along 2-tap phases, F(2, 3) along the 3-tap one
    ((12, 9), ((3, 5, 4), (4, 5)), (4, 3),
     dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(0, 1))),
    # stride 1, dilations 2 and 3: folded residues, F(2, 3) and F(2, 2)
    ((24, 26), ((7, 9, 8), (8, 9, 9)), (3, 2), dict(dilations=(2, 3), pads=(2, 1, 1, 2))),
])
def test_dask_blocks_keep_the_whole_arrays_pairs(size, chunks, ks, kw):
    """Blocks starting at odd tiles (chunks of 3, 5 and 4 inputs) pair the outputs as the
    whole array does, so the values are bit for bit the in-memory call's."""
    da = pytest.importorskip("dask.array")
    import convt.dask as cdask

    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 64, *size)).astype(np.float32)
    w = rng.standard_normal((64, 64, *ks)).astype(np.float32)
    op = convt.ConvTranspose(w, **kw)
    assert op._plan.geometry(x.shape).variant == "winograd"
    y = cdask.conv_transpose(da.from_array(x, chunks=(1, 64, *chunks)), w, **kw)
    np.testing.assert_array_equal(y.compute(scheduler="threads"), op(x))


@pytest.mark.skipif(_cpu.ISA < 1, reason="the Winograd variant runs only with AVX2+FMA")
@pytest.mark.parametrize("w_shape, kw, sizes", [
    # F(2, 2): both sizes' reads past the data end at the same grid edge
    ((64, 64, 4, 4), dict(strides=(2, 2), pads=(3, 3, 1, 1)), ((9, 9), (8, 8))),
    # F(2, 3), stride 1
    ((64, 64, 3, 3), dict(pads=(2, 2, 0, 0)), ((8, 8), (7, 7))),
])
def test_grid_rezeroed_for_a_smaller_input_on_the_same_grid(w_shape, kw, sizes):
    """Two input sizes whose zero-haloed grids have one shape: the smaller one's call must not
    read the larger one's data where its own grid holds zeros (the buffer was zeroed by the
    grid's shape alone: 0.63 normwise error on the second call, prepared and one-shot)."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal(w_shape).astype(np.float32)
    big, small = (rng.standard_normal((1, 64, *s)).astype(np.float32) for s in sizes)
    op = convt.ConvTranspose(w, **kw)
    assert op._plan.geometry(small.shape).variant == "winograd"
    g_big, g_small = (_winograd.wino_layout(op._plan.geometry(x.shape).geom, 16).grid
                      for x in (big, small))
    assert g_big == g_small
    ref = convt.conv_transpose(small.astype(np.float64), w.astype(np.float64), **kw,
                               method="reference")
    op(big)
    assert_close(op(small), ref, "direct", "float32")
    convt.conv_transpose(big, w, **kw)
    assert_close(convt.conv_transpose(small, w, **kw), ref, "direct", "float32")


def test_dask_block_with_a_large_halo_keeps_the_products(monkeypatch):
    """A small edge block of a folded layer (dilation 3) whose grid is many times its data
    still runs the whole array's Winograd products (it ran the micro variant: 14 outputs
    differed in their last bits)."""
    da = pytest.importorskip("dask.array")
    import convt.dask as cdask

    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 8, 6, 11)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 4)).astype(np.float32)
    kw = dict(dilations=(3, 3), pads=(2, 1, 1, 3))
    _force(monkeypatch)
    monkeypatch.setattr(cdask, "variant_choice", lambda geom, storage=None: ("winograd", False))
    op = convt.ConvTranspose(w, method="direct", **kw)
    assert op._plan.geometry(x.shape).variant == "winograd"
    y = cdask.conv_transpose(da.from_array(x, chunks=(1, 8, (3, 3), (3, 6, 2))), w,
                             method="direct", **kw)
    np.testing.assert_array_equal(y.compute(scheduler="threads"), op(x))


@pytest.mark.skipif(_cpu.ISA < 1, reason="the Winograd variant runs only with AVX2+FMA")
@pytest.mark.parametrize("xs, ws, kw", [((1, 128, 64), (128, 128, 3), dict(pads=(1, 1))),
                                        ((1, 128, 16, 16), (128, 64, 3, 3),
                                         dict(pads=(1, 1, 1, 1)))])
def test_dask_blocks_of_one_output_position(xs, ws, kw):
    """Dask blocks of one output position of a layer the cost model puts on the Winograd
    variant (nothing forced): their channels-first y has channel stride 1, as its last axis,
    so they stage instead of writing from sets (wino_conv refused them), and hold the whole
    array's bits."""
    da = pytest.importorskip("dask.array")
    import convt.dask as cdask

    rng = np.random.default_rng(9)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    op = convt.ConvTranspose(w, **kw)
    assert op._plan.geometry(x.shape).variant == "winograd"
    for sp in [[(1, s - 1) for s in xs[2:]], [(1,) * s for s in xs[2:]]]:
        y = cdask.conv_transpose(da.from_array(x, chunks=(1, xs[1], *sp)), w, **kw)
        np.testing.assert_array_equal(y.compute(scheduler="sync"), op(x))


@pytest.mark.parametrize("bad", ["columns", "radix", "rows", "dims", "task", "strides"])
def test_wino_conv_refuses_a_real_table_it_cannot_read(bad, monkeypatch):
    """wino_conv reads each real phase's products as the digits of its axes' radices, a
    task's rows from a stack table of _MAX_ROWS, a task's real phases from the table and
    sets' runs of y along a contiguous last axis: a table of other columns, a phase whose
    products are not the product of its radices, tasks of more rows, dims or tasks of
    another length, a task past the table, or sets with a strided last axis raise ValueError
    before any thread runs (run_wino's arguments, one spoiled)."""
    _force(monkeypatch)
    real = _winograd.wino_conv

    def spoiled(x, zero, wp, bias, y, real_ph, prods, toff, tkind, tasks, dims, ystr, *args,
                **kw):
        assert dims[23] == 1   # (this layer writes from sets)
        if bad == "columns":
            real_ph = np.ascontiguousarray(real_ph[:, :17])
        elif bad == "radix":
            real_ph = real_ph.copy()
            real_ph[:, 19] = 5
        elif bad == "rows":
            dims = dims.copy()
            dims[14] = 193
        elif bad == "dims":
            dims = np.ascontiguousarray(dims[:23])
        elif bad == "task":
            tasks = tasks.copy()
            tasks[0, 3] = 2
        else:
            ystr = ystr.copy()
            ystr[3] = 2
        return real(x, zero, wp, bias, y, real_ph, prods, toff, tkind, tasks, dims, ystr,
                    *args, **kw)

    monkeypatch.setattr(_winograd, "wino_conv", spoiled)
    w = np.random.default_rng(3).standard_normal((16, 32, 3, 3)).astype(np.float32)
    x = np.ones((1, 16, 6, 6), np.float32)
    message = {"columns": r"wino_conv: real_ph needs 20 columns; got 17",
               "radix": r"wino_conv: real phase 0 has 16 products, not the product of its "
                        r"radices",
               "rows": r"wino_conv: at most 192 rows a task; got 193",
               "dims": r"wino_conv: dims needs 24 values, tasks 4 columns; got 23 and 4",
               "task": r"wino_conv: task 0 runs real phases 0 to 1 of 1 \(sets of at most "
                       r"16\)",
               "strides": r"wino_conv: sets write channels-first y, its last axis "
                          r"contiguous; got element strides \(\d+, 0, \d+, 2, \d+\)"}
    with pytest.raises(ValueError, match=message[bad]):
        convt.ConvTranspose(w, method="direct", pads=(1, 1, 1, 1))(x)


def test_pack_wino_refuses_tables_it_cannot_read():
    w = np.zeros((2, 16, 9), np.float32)
    out = np.zeros(4096, np.float32)
    scratch = np.zeros(64 * 16, np.float32)
    ck = np.zeros((3, _kpack.WSUM_MAX), np.int64)
    cf = np.zeros((3, _kpack.WSUM_MAX), np.float32)
    one = np.zeros(3, np.int64)
    msg = (r"pack_wino: ck and cf need 27 entries per product tap \(kernel taps below 9\) "
           r"and udst, ustride one per product tap")
    for spoiled in (dict(ck=ck[:, :8].copy(), cf=cf[:, :8].copy()), dict(ck=ck + 9),
                    dict(ck=ck - 1), dict(cf=cf[:2]), dict(udst=one[:2])):
        args = {**dict(ck=ck, cf=cf, udst=one, ustride=one), **spoiled}
        with pytest.raises(ValueError, match=msg):
            _kpack.pack_wino(w, out, args["ck"], args["cf"], args["udst"], args["ustride"],
                             scratch, 1, 16, 1)
    assert _kpack.pack_wino(w, out, ck, cf, one, one, scratch, 1, 16, 1)
