"""The micro variant's channels-first write-out into a 16-bit y at the ends of runs: rows
contiguous in y go out in 8-row transposed blocks (_writeout.h's convt_cf8_h16), and a run's
last 1-7 rows (a short output line, or a task whose rows end mid-line, as grouped_g8's tasks
of 114 rows in lines of 32) through the same body on a staged block (_tilewrite.pxd's
_part16). The promise: the float32 call's result rounded once by astype, bit for bit, with
groups, channel counts that are not a multiple of 8, one and two threads, at every ISA level
that runs the micro tiles and with float16's portable bodies (no F16C).
"""
import numpy as np
import pytest

from convt._backends.direct import micro
from convt._kernels import _cpu, _half

from _helpers import micro_ops
from conftest import DTYPES, np_dtype

HALF = [d for d in DTYPES if d in ("float16", "bfloat16")]
MICRO_LEVELS = [lv for lv in _cpu.levels() if lv >= 1]

# (x NCX, w IOX per group, keywords): stride-2 pairs of phases (runs of 2 outputs a row) and
# stride 1 (one phase, runs of 1); output lines of 5-20 rows a phase; Mg 12 and 20 (a block
# of 8 channels and 4 past it), 8, 16
_CASES = [
    ((2, 16, 9, 13), (16, 12, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=2,
                                          output_padding=(1, 1))),
    ((1, 24, 6, 20), (24, 8, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=3)),
    ((2, 10, 7, 13), (10, 20, 3, 3), dict(pads=(1, 1, 1, 1))),
    ((1, 64, 11, 23), (64, 16, 3, 3), dict(strides=(2, 2), pads=(1, 1, 0, 0), group=4)),
    ((1, 256, 16, 32), (256, 32, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=8,
                                            output_padding=(1, 1))),
]


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint16)


def _partial_runs(geom):
    """Whether some task of the layout ends a run of rows along the last axis with 1-7 rows
    left (what _part16 writes): the cases must reach it."""
    lay = micro.micro_layout(geom, micro.NR_F32)
    if lay.batch_inner:
        return True
    for first, count, r0, size in lay.tasks:
        for ph in lay.phases[first:first + count]:
            rows, line = geom.batch * ph[0] * ph[1] * ph[2], ph[2]
            r, end = r0, min(r0 + size, rows)
            while r < end:
                nxt = min(end, (r // line + 1) * line)
                if (nxt - r) % 8:
                    return True
                r = nxt
    return False


@pytest.mark.parametrize("isa", MICRO_LEVELS)
@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("case", range(len(_CASES)))
def test_run_ends_give_the_float32_result_rounded_once(case, name, isa, rng, monkeypatch):
    monkeypatch.setattr(_cpu, "ISA", isa)
    xs, wg, kw = _CASES[case]
    g = kw.get("group", 1)
    dt = np_dtype(name)
    x = rng.standard_normal(xs).astype(dt)
    w = rng.standard_normal(wg).astype(dt)
    b = rng.standard_normal(wg[1] * g).astype(dt)
    ys = []
    for workers in (1, 2):
        op16, op32 = micro_ops(w, b, kw, workers)
        p = op16._plan.geometry(x.shape)
        assert p.variant == "micro" and _partial_runs(p.geom)
        want = op32(x.astype(np.float32)).astype(dt)
        y = op16(x)
        np.testing.assert_array_equal(_bits(y), _bits(want))
        out = np.full(want.shape, 3, dt)
        assert op16(x, out=out) is out
        np.testing.assert_array_equal(_bits(out), _bits(want))
        ys.append(_bits(y))
    np.testing.assert_array_equal(ys[0], ys[1])


@pytest.mark.skipif(not MICRO_LEVELS, reason="the micro tiles need AVX2 + FMA")
@pytest.mark.parametrize("case", range(len(_CASES)))
def test_run_ends_without_f16c_and_with_specials(case, rng, monkeypatch):
    # float16's portable bodies (_half.level 0) on the staged blocks; NaN, Inf and overflow
    # in the rows a block stages take convt_cf8_h16's portable body for the whole block
    monkeypatch.setattr(_half, "F16C", False)
    xs, wg, kw = _CASES[case]
    g = kw.get("group", 1)
    x = rng.standard_normal(xs).astype(np.float16)
    flat = x.reshape(-1)
    flat[::97] = 6e4
    flat[5::89] = np.inf
    flat[13::101] = np.nan
    w = rng.standard_normal(wg).astype(np.float16)
    b = rng.standard_normal(wg[1] * g).astype(np.float16)
    op16, op32 = micro_ops(w, b, kw, 2)
    with np.errstate(invalid="ignore", over="ignore"):
        want = op32(x.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(_bits(op16(x)), _bits(want))
