"""The micro variant of the direct backend (register-blocked kernel over an indirection table).

Forced on a wide random space of geometries against the float64 reference, with both kernels
(AVX2+FMA where the CPU has it, and the portable C one); the blocking edges (tile padding of
the output channels, channel chunks, tap blocks, rows not a multiple of MR, several tasks per
phase); thread-count independence; the dispatch rule.
"""
import numpy as np
import pytest

from convt._kernels import _cpu

import convt
from convt._dispatch import cost as _cost
from convt._backends.direct import micro as _micro
from convt._dispatch import plan as _plan
from convt._kernels._micro import MR

from conftest import assert_close, assert_same_for_any_thread_count, random_cases


CASES = random_cases(120, 7, k_max=6, size_max=9, c_max=40)


def _force(monkeypatch):
    orig = _plan.direct_variant
    monkeypatch.setattr(_plan, "direct_variant", lambda geom, pin=None: orig(geom, ("micro", False)))


def _run(case, dtype, monkeypatch, workers=2):
    rng = np.random.default_rng(len(str(case)))
    g, cg, mg = case["kw"]["group"], case["cg"], case["mg"]
    x = rng.standard_normal((case["batch"], cg * g, *case["size"]))
    w = rng.standard_normal((cg * g, mg, *case["k"]))
    b = rng.standard_normal(mg * g)
    try:
        ref = convt.conv_transpose(x, w, b, method="reference", **case["kw"])
    except ValueError:
        pytest.skip("pads leave no output")
    nxc = case["data_format"] == "NXC"
    xl = np.moveaxis(x, 1, -1) if nxc else x
    _force(monkeypatch)
    op = convt.ConvTranspose(w.astype(dtype), b.astype(dtype), method="direct", workers=workers,
                             data_format=case["data_format"], **case["kw"])
    assert op._plan.geometry(xl.shape).variant == "micro"
    y = op(xl.astype(dtype))
    return (np.moveaxis(y, -1, 1) if nxc else y), ref


@pytest.mark.parametrize("isa", _cpu.levels())
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=[f"c{i}" for i in range(len(CASES))])
def test_micro_matches_reference(case, dtype, isa, monkeypatch):
    monkeypatch.setattr(_cpu, "ISA", isa)
    y, ref = _run(case, dtype, monkeypatch)
    assert_close(y, ref, "direct", dtype)


# Blocking edges: (x shape, w shape, keywords) with what each exercises.
# (phases sharing (c0, c1) run in one task: convt._backends.direct.micro._SET_WEIGHTS; EDGES[2] has such sets,
# test_micro_sets_split_when_weights_exceed_l2 the other case)
EDGES = [
    # C_in 300: channel chunks of 256 + 44; 9 taps, one per block (TB = 1)
    ((1, 300, 7, 9), (300, 20, 3, 3), dict(pads=(1, 1, 1, 1))),
    # 8 channels, 40 taps in one phase: tap blocks of 32 + 8
    ((2, 8, 50), (8, 16, 40), dict(pads=(3, 2))),
    # 2000 rows per phase: several tasks, the last one partial; 33 = 2 panels + 1
    ((3, 12, 31, 23), (12, 33, 2, 2), dict(strides=(2, 2))),
    # groups with a padded last panel each, 3-D
    ((1, 24, 5, 6, 7), (24, 17, 3, 2, 3), dict(strides=(2, 1, 2), group=3, pads=(1, 0, 1, 1, 1, 0))),
    # phases without taps (bias only) and negative effective pads
    ((2, 16, 6, 6), (16, 16, 1, 1), dict(strides=(3, 3), output_shape=(20, 19))),
    # C_in 0 after grouping is impossible; a single output row per phase
    ((1, 16, 1), (16, 16, 3), dict(strides=(4,))),
    # channels-first write-out in transposed blocks: stride 1 with lines of 13 (runs of 8 and
    # a remainder, a block crossing no line end), 19 = 2 blocks of 8 channels + 3
    ((2, 10, 5, 13), (10, 19, 3, 3), dict(pads=(1, 1, 1, 1))),
    # ... the pairs of phases c2 = 0, 1 of stride 2 (equal Q2: 2 x 11 outputs per line), 2
    # groups of 9 channels; and a layer whose last axis has unequal Q2 (no pairs)
    ((2, 6, 4, 11), (6, 9, 3, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=2)),
    ((1, 8, 3, 9), (8, 8, 2, 3), dict(strides=(1, 2))),
    # batch 7 over 3 x 4 positions: rows run batch innermost, so sub-tiles share their border
    # taps, which are skipped
    ((7, 12, 3, 4), (12, 20, 4, 4), dict(strides=(2, 2), pads=(1, 1, 2, 1))),
]


@pytest.mark.parametrize("isa", _cpu.levels())
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs, ws, kw", EDGES, ids=[f"e{i}" for i in range(len(EDGES))])
def test_micro_blocking_edges(xs, ws, kw, dtype, data_format, isa, monkeypatch):
    monkeypatch.setattr(_cpu, "ISA", isa)
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    b = rng.standard_normal(ws[1] * kw.get("group", 1))
    ref = convt.conv_transpose(x, w, b, method="reference", **kw)
    nxc = data_format == "NXC"
    _force(monkeypatch)
    op = convt.ConvTranspose(w.astype(dtype), b.astype(dtype), method="direct",
                             data_format=data_format, **kw)
    xl = np.moveaxis(x, 1, -1) if nxc else x
    assert op._plan.geometry(xl.shape).variant == "micro"
    y = op(xl.astype(dtype))
    assert_close(np.moveaxis(y, -1, 1) if nxc else y, ref, "direct", dtype)


def test_edges_reach_the_blocking_they_name():
    """Guards EDGES: channel chunks, tap blocks, partial tasks, padded panels, sets of phases
    and the channels-first write-out's transposed blocks and their remainders occur."""
    from convt._geometry.geometry import resolve

    def layout(xs, ws, kw, dtype=np.float32, data_format="NCX"):
        op = convt.ConvTranspose(np.zeros(ws, dtype), data_format=data_format, **kw)
        if data_format == "NXC":
            xs = (xs[0], *xs[2:], xs[1])
        return _micro.micro_layout(resolve(op._plan.spec, xs), _micro.micro_nr(dtype))

    lay = layout(*EDGES[0])
    assert lay.cc == 256 and lay.tb == 1 and lay.phases[0, 7] == 9
    lay = layout(*EDGES[1])
    assert lay.tb == 32 and lay.phases[0, 7] == 40
    rows = 3 * 31 * 23
    # channels-first, one set of all 4 phases; channels-last, the 2 sharing (c0, c1)
    for data_format, nph in [("NCX", 4), ("NXC", 2)]:
        lay = layout(*EDGES[2], data_format=data_format)
        blocks = lay.tasks[lay.tasks[:, 0] == 0]
        assert len(blocks) > 2 and (blocks[:, 1] == nph).all() and lay.panels == 3
        assert (blocks[:, 3] % MR == 0).all() and (blocks[:, 3] <= lay.mb).all()
        assert blocks[-1, 2] < rows < blocks[-1, 2] + blocks[-1, 3]   # the last one clipped
    lay = layout(*EDGES[4])
    assert (lay.phases[:, 7] == 0).any() and (lay.phases[:, 7] > 0).any()
    # write-out: stride 1, lines of 13 rows; pairs of phases c2 = 0, 1 with equal Q2; unequal
    lay = layout(*EDGES[6])
    assert len(lay.phases) == 1 and lay.phases[0, 2] == 13
    for xs, ws, kw in (EDGES[7], EDGES[8]):
        ph = layout(xs, ws, kw).phases
        q2 = {int(c): int(q) for q, c in zip(ph[:, 2], ph[:, 5])}
        assert set(q2) == {0, 1} and (q2[0] == q2[1]) == (kw["strides"] == (2, 2))
    assert layout(*EDGES[9]).batch_inner and not layout(*EDGES[2]).batch_inner


def test_to_padded_nxc_matches_numpy():
    """The channels-last copy of x (micro and GEMM variants): 8 x 8 transposed blocks and the
    scalar remainders, both ISAs, with a halo and with fewer rows than threads."""
    from convt._kernels._layout import to_padded_nxc

    rng = np.random.default_rng(11)
    for shape, halo in [((2, 19, 3, 2, 37), (0, 0, 0)), ((1, 16, 1, 1, 300), (0, 0, 0)),
                        ((1, 8, 1, 4, 16), (1, 2, 3)), ((3, 5, 2, 1, 7), (0, 1, 0))]:
        x = rng.standard_normal(shape)
        for dtype in ["float32", "float64"]:
            for isa in _cpu.levels():
                n, c, *sp = shape
                xp = np.full((n, *(s + 2 * h for s, h in zip(sp, halo)), c), -1.0, dtype)
                to_padded_nxc(x.astype(dtype), xp, np.array(halo, np.int64), 2, isa)
                inner = tuple(slice(h, h + s) for s, h in zip(sp, halo))
                assert np.array_equal(xp[(slice(None), *inner)],
                                      np.moveaxis(x, 1, -1).astype(dtype))
                xp[(slice(None), *inner)] = -1.0
                assert (xp == -1.0).all()     # the halo untouched


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("isa", _cpu.levels())
def test_to_padded_nxc_tests_every_value_it_copies(isa, dtype):
    """With spare_bits, the transpose reports any value of x whose exponent field is at least
    all ones minus spare_bits (the Winograd variant's wino_ready bound), in a whole 8 x 16
    block (tested in registers for float32), a remainder channel or a remainder position, and
    copies x all the same; the largest value under the bound passes."""
    from convt._kernels._layout import to_padded_nxc

    ft = np.finfo(dtype)
    spare = 2
    # exponent field all ones - spare: 2^(emax + 1 - spare) (NaN, Inf and above fail too)
    bound = np.array(2.0 ** (ft.maxexp - spare), dtype)
    under = np.nextafter(bound, np.array(0, dtype))
    shape = (1, 19, 2, 1, 37)                  # channels 16-18, positions 32-36: remainders
    rng = np.random.default_rng(12)
    for at in [(0, 3, 1, 0, 5), (0, 15, 0, 0, 31), (0, 17, 1, 0, 2), (0, 4, 0, 0, 35),
               (0, 18, 1, 0, 36)]:
        for bad, ok in [(bound, False), (-bound, False), (np.nan, False), (under, True),
                        (-under, True)]:
            x = rng.standard_normal(shape).astype(dtype)
            x[at] = bad
            xp = np.zeros((1, 2, 1, 37, 19), dtype)
            assert to_padded_nxc(x, xp, np.zeros(3, np.int64), 2, isa, spare) == ok, (at, bad)
            np.testing.assert_array_equal(xp, np.moveaxis(x, 1, -1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs", [(4, 64, 20, 20), (8, 64, 5, 6)])   # rows (n, q), (q, n)
def test_micro_bit_identical_for_any_thread_count(dtype, xs, monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((64, 48, 4, 4)).astype(dtype)
    _force(monkeypatch)
    assert_same_for_any_thread_count(w, x, "micro", strides=(2, 2), pads=(1, 1, 1, 1))


def test_micro_nonfinite_input_reaches_only_the_outputs_it_touches(monkeypatch):
    """Rows off the data read a zero vector and padded channels are never written, so an
    Inf in x spreads exactly as in the reference."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 16, 9, 9))
    x[0, 3, 4, 2] = np.inf
    x[0, 5, 0, 8] = np.nan
    w = rng.standard_normal((16, 20, 3, 3))
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    ref = convt.conv_transpose(x, w, method="reference", **kw)
    _force(monkeypatch)
    y = convt.ConvTranspose(w.astype(np.float32), method="direct", **kw)(x.astype(np.float32))
    np.testing.assert_array_equal(np.isfinite(y), np.isfinite(ref))
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))


def test_micro_nonfinite_weights_run_the_pixel_kernel(monkeypatch):
    """As for the GEMM variant: taps on zeros would turn 0 * NaN into NaN elsewhere."""
    w = np.ones((16, 16, 3, 3), np.float32)
    w[2, 3, 1, 1] = np.nan
    _force(monkeypatch)
    op = convt.ConvTranspose(w, strides=(2, 2), method="direct")
    assert op._plan.geometry((1, 16, 5, 5)).variant == "pixel"
    y = op(np.ones((1, 16, 5, 5), np.float32))
    ref = convt.conv_transpose(np.ones((1, 16, 5, 5)), w.astype(np.float64), strides=(2, 2),
                               method="reference")
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))


@pytest.mark.skipif(_cpu.ISA < 1, reason="the micro variant runs only with AVX2+FMA")
@pytest.mark.parametrize("xs, ws, kw, variant", [
    # 2 x 2 taps per phase, 64+ channels: Winograd products (convt._backends.direct.winograd)
    ((16, 512, 4, 4), (512, 256, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)), "winograd"),
    # the same taps on 32 channels per group: the micro variant
    ((2, 256, 32, 32), (256, 32, 3, 3),
     dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1), group=8), "micro"),
    # dilated_s1: stride 1, taps two apart, folded into residues of adjacent taps: F(2, 3)
    ((1, 64, 64, 64), (64, 64, 3, 3), dict(dilations=(2, 2), pads=(2, 2, 2, 2)), "winograd"),
    # the same with 32 channels: too thin for the products
    ((1, 32, 64, 64), (32, 32, 3, 3), dict(dilations=(2, 2), pads=(2, 2, 2, 2)), "micro"),
    # pure upsampling (K = s), stride 2 on the last axis: the upsample variant
    ((1, 256, 64, 64), (256, 128, 2, 2), dict(strides=(2, 2)), "upsample"),
    # ... with 1024 input channels, or stride 4 on the last axis: grid mode's one GEMM
    ((1, 1024, 16, 16), (1024, 128, 2, 2), dict(strides=(2, 2)), "gemm"),
    ((1, 256, 64, 64), (256, 128, 2, 4), dict(strides=(2, 4)), "gemm"),
    # 21 output channels pad the 16-wide tile to 32
    ((1, 21, 16, 16), (21, 21, 64, 64), dict(strides=(32, 32), pads=(16,) * 4), "gemm"),
    # mostly taps off the data
    ((1, 16, 3, 3), (16, 16, 3, 3), dict(dilations=(4, 4)), "pixel"),
])
def test_variant_rule(xs, ws, kw, variant):
    op = convt.ConvTranspose(np.ones(ws, np.float32), **kw)
    assert op._plan.geometry(xs).variant == variant


def test_packed_weights_start_on_a_cache_line():
    op = convt.ConvTranspose(np.ones((16, 20, 3, 3), np.float32), strides=(2, 2))
    geom = op.geometry((1, 16, 5, 5))
    for dtype in (np.float32, np.float64):
        lay = _micro.micro_layout(geom, _micro.micro_nr(dtype))
        for _ in range(4):
            wp, finite = _micro.packed_weights(lay, np.ones((16, 20, 3, 3), dtype), 1, 1)
            assert finite
            assert wp.ctypes.data % 64 == 0 and wp.size == lay.packed


def test_micro_sets_split_when_weights_exceed_l2():
    """Phases sharing (c0, c1) run one per task when their weights would not stay in L2
    (hifigan_up1: 8 phases of 1 MiB), together otherwise (hifigan_up3)."""
    from convt._geometry.geometry import resolve

    for ws, kw, nph in [((512, 256, 16), dict(strides=(8,), pads=(4, 4)), 1),
                        ((128, 64, 4), dict(strides=(2,), pads=(1, 1)), 2)]:
        op = convt.ConvTranspose(np.zeros(ws, np.float32), **kw)
        lay = _micro.micro_layout(resolve(op._plan.spec, (1, ws[0], 256)), 16)
        assert set(lay.tasks[:, 1]) == {nph}


def test_cost_model_counts_the_layouts_work():
    """The cost model's per-axis count (convt._backends.direct.micro.micro_macs) is the layout's own, so the
    estimate prices the work the kernel does (border taps and tile padding included)."""
    from convt._geometry.geometry import resolve

    checked = 0
    for case in CASES:
        g, cg, mg = case["kw"]["group"], case["cg"], case["mg"]
        op = convt.ConvTranspose(np.zeros((cg * g, mg, *case["k"])), **case["kw"])
        try:
            geom = resolve(op._plan.spec, (case["batch"], cg * g, *case["size"]))
        except ValueError:
            continue
        for nr in (_micro.NR_F32, _micro.NR_F64):
            assert _micro.micro_macs(geom, nr) == _micro.micro_layout(geom, nr).macs, case
        checked += 1
    assert checked > 80


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_packed_weights_report_non_finite(dtype):
    """The packing pass says whether every weight is finite: one NaN or +-Inf anywhere
    (a tap no phase uses, a channel in the transposes' remainder) makes it False; the
    largest finite values and subnormals do not."""
    op = convt.ConvTranspose(np.ones((13, 20, 3, 3), np.float32), strides=(2, 2))
    lay = _micro.micro_layout(op.geometry((1, 13, 5, 5)), _micro.micro_nr(dtype))
    rng = np.random.default_rng(3)
    w = rng.standard_normal((13, 20, 3, 3)).astype(dtype)
    info = np.finfo(dtype)
    w[0, 0, 0, 0], w[12, 19, 2, 2], w[5, 17, 1, 2] = info.max, -info.max, info.smallest_subnormal
    assert _micro.packed_weights(lay, w, 1, 2)[1]
    for bad in (np.nan, np.inf, -np.inf):
        for idx in [(0, 0, 0, 0), (12, 19, 2, 2), (7, 16, 1, 0), (3, 4, 2, 1)]:
            wb = w.copy()
            wb[idx] = bad
            assert not _micro.packed_weights(lay, wb, 1, 2)[1], (bad, idx)
