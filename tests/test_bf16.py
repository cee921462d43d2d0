"""bfloat16 storage on the AVX512-BF16 dot-product tiles (convt._backends.direct.micro_bf16,
convt/_kernels/_bf16kernel.h): against the float64 reference of the bfloat16 inputs over a
wide space of layers, the same bits for any thread count and from the portable body, the
CONVT_ISA cap, and the documented edges (odd channel counts, denormals, NaN and Inf)."""
import hashlib
import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import convt
from convt._backends.direct import micro_bf16
from convt._kernels import _cpu

from conftest import REPO_ROOT, assert_close, assert_same_for_any_thread_count, random_cases

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
needs_bf16 = pytest.mark.skipif(not _cpu.bf16(), reason="no AVX512-BF16 on this CPU (or "
                                                        "CONVT_ISA caps it)")
# The tiles' float32 result (before the final rounding) against the float64 reference of the
# same bfloat16 inputs, normwise: the float32 tiles' bound (tests/conftest.py, direct
# float32); measured at most 4e-7 over the cases below (docs/precision.md).
TOL_F32 = 1e-5


def _layer(case, rng):
    cg, mg, g = case["cg"], case["mg"], case["kw"]["group"]
    x = rng.standard_normal((case["batch"], cg * g, *case["size"])).astype(BF16)
    w = rng.standard_normal((cg * g, mg, *case["k"])).astype(BF16)
    b = rng.standard_normal(mg * g).astype(BF16)
    return x, w, b


def _reference(x, w, b, **kw):
    return convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                b.astype(np.float64), method="reference", **kw)


def _tiles_output(op, x):
    """The tiles' float32 result (before the rounding to bfloat16) and the variant that
    runs x (the plan's float32 result when another variant does)."""
    p = op._plan.geometry(x.shape)
    if p.variant != "micro_bf16":
        return p.runner(x, p.state, p.geom, op._plan), p.variant
    return micro_bf16.run_f32(x, p.state, p.geom, op._plan), p.variant


def _nxc(a):
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


def _has_output(case):
    kw = case["kw"]
    nd = case["nd"]
    return all((i - 1) * s + (k - 1) * d + 1 + o - a - e >= 1 for i, s, k, d, o, a, e in zip(
        case["size"], kw["strides"], case["k"], kw["dilations"], kw["output_padding"],
        kw["pads"][:nd], kw["pads"][nd:]))


CASES = random_cases(64, 37, k_max=5, size_max=9, c_max=12, keep=_has_output)


def _forced(op, x):
    """The bfloat16 tiles' float32 result on x whatever variant the rule would run."""
    geom = op._plan.geometry(x.shape).geom
    name, runner, state = micro_bf16.VARIANT.prepare(geom, op._plan, None)
    assert name == "micro_bf16"
    return micro_bf16.run_f32(x, state, geom, op._plan)


@needs_bf16
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['nd']}d-g{c['kw']['group']}-"
                         f"cg{c['cg']}-mg{c['mg']}-n{c['batch']}-{c['data_format']}")
def test_against_the_reference_of_the_bf16_inputs(case, rng):
    """Ranks 1-3, strides, dilations, pads, output padding, groups, odd and even channel
    counts, batch and both layouts: the tiles (forced) within the float32 bound of the
    float64 reference of the same bfloat16 inputs, and the call within bfloat16's."""
    x, w, b = _layer(case, rng)
    kw = dict(case["kw"], data_format=case["data_format"])
    ref = _reference(x, w, b, **case["kw"])
    if case["data_format"] == "NXC":
        x, ref = _nxc(x), _nxc(ref)
    op = convt.ConvTranspose(w, b, method="direct", **kw)
    y32 = _forced(op, x)
    assert y32.dtype == np.float32 and y32.shape == ref.shape
    assert float(np.abs(y32 - ref).max()) <= TOL_F32 * max(1.0, float(np.abs(ref).max()))
    assert_close(op(x), ref, "direct", "bfloat16")


def test_pairs_copy_refuses_short_arrays():
    from convt._kernels._bf16 import to_pairs_nxc
    with pytest.raises(ValueError, match=r"to_pairs_nxc: x \(11\) or xp \(16 values\) is too "
                                         r"short for N 1, S 4, 1 groups of 3 channels"):
        to_pairs_nxc(np.zeros(11, np.uint16), np.zeros(16, np.uint16), 1, 4, 1, 3, True, 1)
    with pytest.raises(ValueError, match=r"to_pairs_nxc: x \(12\) or xp \(15 values\)"):
        to_pairs_nxc(np.zeros(12, np.uint16), np.zeros(15, np.uint16), 1, 4, 1, 3, True, 1)


@needs_bf16
@pytest.mark.parametrize("xs, ws, kw", [
    ((2, 64, 6, 6), (64, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),     # Winograd's
    ((1, 32, 8, 8), (32, 16, 2, 2), dict(strides=(2, 2))),                         # upsample's
    ((1, 24, 7, 9), (24, 40, 3, 3), dict(pads=(1, 1, 1, 1), group=2)),             # micro's
    ((3, 7, 11), (7, 33, 5), dict(strides=(3,), pads=(2, 1))),                     # odd C_in
    ((2, 9, 5, 4, 3), (9, 16, 3, 2, 2), dict(strides=(2, 1, 2), group=3)),         # 3-D, odd Cg
    ((4, 40, 5), (40, 48, 4), dict(strides=(2,), dilations=(2,), pads=(3, 0))),
])
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_dense_variants_give_way_for_bf16_storage(xs, ws, kw, data_format, rng):
    x = rng.standard_normal(xs).astype(BF16)
    w = rng.standard_normal(ws).astype(BF16)
    b = rng.standard_normal(ws[1] * kw.get("group", 1)).astype(BF16)
    ref = _reference(x, w, b, **kw)
    if data_format == "NXC":
        x, ref = _nxc(x), _nxc(ref)
    op = convt.ConvTranspose(w, b, data_format=data_format, **kw)
    y32, variant = _tiles_output(op, x)
    assert variant == "micro_bf16"
    assert y32.dtype == np.float32
    assert float(np.abs(y32 - ref).max()) <= TOL_F32 * max(1.0, float(np.abs(ref).max()))
    y = op(x)
    assert y.dtype == BF16 and y.shape == ref.shape
    # rounded once: every output is the float32 result rounded to nearest even
    np.testing.assert_array_equal(y.view(np.uint16), y32.astype(BF16).view(np.uint16))
    out = np.full_like(y, np.nan)       # written in place by the tiles' write-out, same bits
    assert op(x, out=out) is out
    np.testing.assert_array_equal(out.view(np.uint16), y.view(np.uint16))
    # the float32 storage of the same values runs the float32 kernels
    op32 = convt.ConvTranspose(w.astype(np.float32), b.astype(np.float32),
                               data_format=data_format, **kw)
    assert op32._plan.geometry(x.shape).variant != "micro_bf16"
    assert "micro_bf16" in str(convt.explain(x, w, b, data_format=data_format, **kw))


@needs_bf16
@pytest.mark.parametrize("ws, kw", [
    ((64, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    ((24, 40, 3, 3), dict(pads=(1, 1, 1, 1), group=2)),
    ((21, 16, 3), dict(strides=(2,))),
])
def test_the_same_bits_for_any_thread_count(ws, kw, rng):
    nd = len(ws) - 2
    x = rng.standard_normal((5, ws[0], *(9,) * nd)).astype(BF16)
    w = rng.standard_normal(ws).astype(BF16)
    assert_same_for_any_thread_count(w, x, "micro_bf16", **kw)


@needs_bf16
@pytest.mark.parametrize("ws, kw", [
    ((64, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),   # 12 x 32 tiles
    ((19, 48, 3, 3), dict(pads=(1, 1, 1, 1))),                   # 12 x 16, odd channels
    ((30, 16, 2, 3, 2), dict(strides=(2, 1, 2), group=3)),
])
def test_portable_body_gives_the_vdpbf16ps_bits(ws, kw, rng, monkeypatch):
    """The portable C body sums the same terms in vdpbf16ps's order (odd element of a pair
    first) with one rounding per step: the same bits, no denormal being involved."""
    nd = len(ws) - 2
    x = rng.standard_normal((3, ws[0], *(7,) * nd)).astype(BF16)
    w = rng.standard_normal(ws).astype(BF16)
    op = convt.ConvTranspose(w, **kw)
    hw, variant = _tiles_output(op, x)
    assert variant == "micro_bf16"
    monkeypatch.setattr(micro_bf16._cpu, "bf16", lambda level=None: False)
    portable, _ = _tiles_output(op, x)
    np.testing.assert_array_equal(hw, portable)


@needs_bf16
def test_denormals_are_flushed_as_documented():
    """vdpbf16ps treats denormal inputs as zero (docs/precision.md): a denormal x times 1 adds
    nothing, where the reference keeps it; normal values are exact."""
    tiny = np.float32(2.0 ** -130)   # a bfloat16 denormal (the smallest normal is 2^-126)
    x = np.zeros((1, 2, 4, 4), np.float32)
    x[0, 0, 1, 1], x[0, 1, 2, 2] = tiny, 1.5
    w = np.ones((2, 16, 1, 1), np.float32)
    x, w = x.astype(BF16), w.astype(BF16)
    op = convt.ConvTranspose(w, strides=(1, 1))
    op._plan.pin = None
    y32, variant = _tiles_output(op, x)
    ref = _reference(x, w, np.zeros(16, BF16))
    if variant != "micro_bf16":
        pytest.skip(f"this layer runs {variant}")
    assert ref[0, 0, 1, 1] == tiny and y32[0, 0, 1, 1] == 0.0
    assert y32[0, 0, 2, 2] == 1.5


@needs_bf16
def test_nan_and_inf_in_x_reach_only_their_outputs(rng):
    x = rng.standard_normal((2, 32, 6, 6)).astype(np.float32)
    x[0, 3, 2, 2], x[1, 5, 0, 4] = np.nan, np.inf
    w = rng.standard_normal((32, 32, 4, 4)).astype(np.float32)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    x, w = x.astype(BF16), w.astype(BF16)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               method="reference", **kw)
    op = convt.ConvTranspose(w, **kw)
    y32, variant = _tiles_output(op, x)
    assert variant == "micro_bf16"
    np.testing.assert_array_equal(np.isnan(y32), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(y32), np.isinf(ref))


@needs_bf16
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_weights_that_are_not_finite_run_the_pixel_kernel(bad, rng):
    w = rng.standard_normal((16, 32, 3, 3)).astype(np.float32)
    w[3, 7, 1, 2] = bad
    w = w.astype(BF16)
    x = rng.standard_normal((1, 16, 5, 5)).astype(BF16)
    op = convt.ConvTranspose(w, pads=(1, 1, 1, 1))
    assert op._plan.geometry(x.shape).variant == "pixel"
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), method="reference",
                               pads=(1, 1, 1, 1))
    y = op(x)
    np.testing.assert_array_equal(np.isnan(y.astype(np.float32)), np.isnan(ref))


@needs_bf16
def test_the_cost_model_prices_the_bf16_tiles():
    from convt._dispatch.cost import estimate
    from convt._geometry.geometry import Geometry
    geom = Geometry(batch=16, c_in=128, c_out=64, groups=1, in_shape=(16, 16),
                    out_shape=(32, 32), kernel=(4, 4), strides=(2, 2), dilations=(1, 1),
                    pads_begin=(1, 1), pads_end=(1, 1))
    f32 = estimate(geom, np.float32, 2)
    bf = estimate(geom, np.float32, 2, storage=BF16)
    assert bf.direct.variant == "micro_bf16" and f32.direct.variant != "micro_bf16"
    assert bf.seconds["direct"] < f32.seconds["direct"]


def test_unused_without_the_hardware(monkeypatch, rng):
    """With bf16() off (no AVX512-BF16, or the cap), bfloat16 storage runs the float32
    kernels, as before."""
    monkeypatch.setattr(micro_bf16._cpu, "bf16", lambda level=None: False)
    w = rng.standard_normal((64, 64, 4, 4)).astype(BF16)
    x = rng.standard_normal((2, 64, 6, 6)).astype(BF16)
    op = convt.ConvTranspose(w, strides=(2, 2), pads=(1, 1, 1, 1))
    assert op._plan.geometry(x.shape).variant != "micro_bf16"


_CHILD = r"""
import hashlib, json
import numpy as np, ml_dtypes
import convt
from convt._kernels import _cpu
bf = ml_dtypes.bfloat16
rng = np.random.default_rng(3)
x = rng.standard_normal((2, 64, 6, 6)).astype(bf)
w = rng.standard_normal((64, 64, 4, 4)).astype(bf)
kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
op = convt.ConvTranspose(w, **kw)
y = op(x)
y32 = convt.ConvTranspose(w.astype(np.float32), **kw)(x.astype(np.float32)).astype(bf)
print(json.dumps({"bf16": _cpu.BF16, "table": _cpu.kernel_isas()["micro_bf16"],
                  "variant": op._plan.geometry(x.shape).variant,
                  "same": bool((y.view(np.uint16) == y32.view(np.uint16)).all())}))
"""


@pytest.mark.parametrize("cap", ["avx2", "generic"])
def test_the_isa_cap_turns_the_bf16_tiles_off(cap):
    env = dict(os.environ, CONVT_ISA=cap, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, check=True, cwd=str(REPO_ROOT))
    got = json.loads(run.stdout)
    assert got == {"bf16": False, "table": "off", "variant": got["variant"], "same": True}
    assert got["variant"] != "micro_bf16"


@pytest.mark.parametrize("n, s, g, cg", [(2, 37, 1, 32), (1, 64, 2, 17), (3, 9, 3, 5),
                                         (1, 8, 1, 48), (2, 23, 4, 16), (1, 1, 1, 1),
                                         (1, 600, 1, 20), (3, 300, 2, 16)])
@pytest.mark.parametrize("channels_first", [True, False])
def test_to_pairs_nxc_pads_each_group_to_even(n, s, g, cg, channels_first, rng):
    from convt._kernels._bf16 import to_pairs_nxc
    cg2 = cg + cg % 2
    x = rng.integers(1, 1 << 16, (n, g * cg, s), dtype=np.uint16)
    want = np.zeros((n, s, g, cg2), np.uint16)
    want[..., :cg] = np.moveaxis(x, 1, -1).reshape(n, s, g, cg)
    src = x if channels_first else np.ascontiguousarray(np.moveaxis(x, 1, -1))
    for isa, sblock in itertools.product(_cpu.levels(), (0, 32, 64, 256, 1 << 20)):
        got = np.full(n * s * g * cg2, 7, np.uint16)
        to_pairs_nxc(src.reshape(-1), got, n, s, g, cg, channels_first, 2, isa, sblock)
        np.testing.assert_array_equal(got.reshape(want.shape), want)




@pytest.mark.parametrize("xs, ws, kw", [
    ((16, 16, 16, 16), (16, 8, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),  # dcgan_g3's cut
    ((1, 8, 40, 40), (8, 12, 2, 2), dict(strides=(2, 2))),
    ((3, 6, 50), (6, 4, 5), dict(strides=(3,), pads=(2, 1))),
    ((3, 32, 37, 37), (32, 16, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),  # 12-row units
])
def test_equal_blocks_cover_the_rows_with_the_same_bits(xs, ws, kw, rng):
    """The tasks re-cut into equal blocks (micro_bf16._even_tasks) cover each set's rows once,
    in order, within the tile memory (mb rows), and give the bits of micro_layout's cut."""
    x = rng.standard_normal(xs).astype(BF16)
    w = rng.standard_normal(ws).astype(BF16)
    op = convt.ConvTranspose(w, **kw)
    geom = op._plan.geometry(x.shape).geom
    _, _, (lay, wp) = micro_bf16.VARIANT.prepare(geom, op._plan, None)
    old = micro_bf16.micro_layout(geom, lay.nr)
    for key in {tuple(t[:2]) for t in old.tasks.tolist()}:
        mine = lay.tasks[(lay.tasks[:, 0] == key[0]) & (lay.tasks[:, 1] == key[1])]
        before = old.tasks[(old.tasks[:, 0] == key[0]) & (old.tasks[:, 1] == key[1])]
        assert len(mine) == len(before)
        assert mine[0, 2] == 0 and (mine[1:, 2] == mine[:-1, 2] + mine[:-1, 3]).all()
        rows = max(geom.batch * int(np.prod(lay.phases[p, :3]))
                   for p in range(key[0], key[0] + key[1]))
        assert mine[-1, 2] + mine[-1, 3] >= rows and (mine[:, 3] <= lay.mb).all()
    results = []
    for tasks in (lay.tasks, old.tasks):
        state = (micro_bf16.dataclasses.replace(lay, tasks=tasks), wp)
        results.append(micro_bf16.run_f32(x, state, geom, op._plan))
    np.testing.assert_array_equal(results[0].view(np.uint32), results[1].view(np.uint32))
    if xs[0] == 16:
        assert not np.array_equal(lay.tasks, old.tasks)   # the case the re-cut is for


@pytest.mark.parametrize("xs, ws, kw, unit, sizes", [
    # dcgan_g3: 4096 rows in whole 16-row lines
    ((16, 16, 16, 16), (16, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)), 16,
     [192] * 14 + [176] * 8),
    # 37-row lines: 6 x 37 passes mb = 192, so 12-row units (once, every set: micro_layout's
    # last block of 75 rows is gone)
    ((3, 32, 37, 37), (32, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)), 12,
     [192] * 13 + [180] * 8 + [171]),
])
def test_even_cut_in_lines_or_tiles(xs, ws, kw, unit, sizes):
    """_even_tasks cuts each set into blocks of whole lines, or of 12 rows where whole lines
    would pass mb: block sizes one unit apart, each start on a unit, the rows covered once."""
    w = np.zeros(ws, BF16)
    geom = convt.ConvTranspose(w, **kw)._plan.geometry(xs).geom
    lay = micro_bf16.bf16_layout(geom)
    assert lay.mb == 192
    for key in dict.fromkeys(map(tuple, lay.tasks[:, :2].tolist())):
        mine = lay.tasks[(lay.tasks[:, 0] == key[0]) & (lay.tasks[:, 1] == key[1])]
        rows = max(geom.batch * int(np.prod(lay.phases[p, :3]))
                   for p in range(key[0], key[0] + key[1]))
        assert mine[:, 3].tolist() == sizes and mine[:, 3].sum() == rows
        assert (mine[:, 2] % unit == 0).all() and mine[0, 2] == 0
        assert (mine[1:, 2] == mine[:-1, 2] + mine[:-1, 3]).all()
