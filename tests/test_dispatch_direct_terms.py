"""Terms of the direct backend's estimates that count what a kernel does: the GEMM variant's
write-out segments and the micro variant's tile depth, each against the obvious enumeration
of the kernel's loops (convt._kernels._gemm, convt._kernels._micro)."""
import numpy as np
import pytest

from convt._backends.direct import gemm as _gemm
from convt._backends.direct import micro as _micro
from convt._backends.direct import registry as _direct
from convt._dispatch import cost as _cost
from convt._geometry.geometry import OpSpec, PadRule, resolve

from _helpers import random_geometries


def _geoms(n, seed, keep):
    return random_geometries(n, seed, lambda rng, g: (g * int(rng.integers(1, 9)),
                                                      g * int(rng.integers(1, 20))), keep)


def _kernel_segments(geom):
    """Segments the grid-mode write-out starts, walked as ``_grid_task`` / ``_slots`` and
    ``_bias_task`` walk them: per run of a task's rows along the grid's last axis, each
    phase of the set; per bias-task row, one; times C_out when channels-first."""
    layout = _gemm.gemm_layout(geom)
    p2 = layout.grid[2]
    total = 0
    for s, r0, m, kind in layout.tasks:
        if kind == 1:
            total += m
            continue
        r = r0
        while r < r0 + m:
            run = min(p2 - r % p2, r0 + m - r)
            total += layout.sets[s][1]
            r += run
    return total * (geom.c_out if layout.channels_first else 1)


@pytest.mark.parametrize("geom", _geoms(40, 380, _gemm.gemm_fits), ids=lambda g: "")
def test_write_segments_are_the_kernels(geom):
    assert _gemm.write_segments(geom) == _kernel_segments(geom)


def test_write_segments_priced():
    # a unit last axis makes every grid row a run: the segments price the write-out there
    spec = OpSpec("t", (2, 2, 1), (1, 1, 1), (1, 1, 1), 1, 2, 62,
                  PadRule("explicit", (0,) * 3, (0,) * 3, (0,) * 3))
    geom = resolve(spec, (1, 2, 16, 26, 1))
    c = _cost.current()
    kind = _direct.select(geom, c, start=_direct.VARIANTS.index(_gemm.VARIANT))
    assert kind.variant == "gemm"
    with_lines = _direct.seconds(geom, kind, False, 1, c)
    without = _direct.seconds(geom, kind, False, 1, dict(c, gemm_line_s=0.0))
    segments = _gemm.write_segments(geom)
    assert segments >= geom.c_out * 16 * 26   # every (channel, row) is one
    assert with_lines - without == pytest.approx(segments * c["gemm_line_s"])


def _micro_ok(geom):
    return _micro.micro_layout(geom, _micro.NR_F32).phases.shape[0] > 0


@pytest.mark.parametrize("geom", _geoms(30, 381, _micro_ok), ids=lambda g: "")
def test_tile_depth_is_channels_times_mean_taps(geom):
    layout = _micro.micro_layout(geom, _micro.NR_F32)
    ph = layout.phases
    positions = np.prod(ph[:, :3], axis=1)
    taps = float(positions @ ph[:, 7]) / max(float(positions.sum()), 1)
    macs = _micro.micro_macs(geom)
    kind = _direct.DirectKind("micro", "", macs, macs)
    cg = geom.c_in // geom.groups
    assert _micro.tile_depth(geom, kind) == pytest.approx(max(cg * taps, 1e-3))


def test_tile_depth_sets_the_rate():
    # 2 input channels, 69 taps a phase: priced as a deep sum, not as 2 channels
    spec = OpSpec("t", (2,), (1,), (138,), 1, 2, 170, PadRule("explicit", (0,), (0,), (0,)))
    geom = resolve(spec, (1, 2, 73))
    macs = _micro.micro_macs(geom)
    kind = _direct.DirectKind("micro", "", macs, macs)
    c = _cost.current()
    depth = _micro.tile_depth(geom, kind)
    assert depth == pytest.approx(2 * 69)
    assert _micro.VARIANT.rate(geom, kind, c) == pytest.approx(
        c["micro_macs_per_s"] * _micro._LEVEL_RATE.get(_micro._cpu.ISA, 1.0)
        * depth / (depth + c["micro_depth_half"]))
    assert _micro.VARIANT.rate(geom, kind, c) > _micro.micro_rate(geom, c)
