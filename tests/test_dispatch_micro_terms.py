"""The micro variant's estimate follows what its kernel does (convt._kernels._micro): one
pointer-table entry per output position of a phase and tap, whatever the channels; the
threads share its tasks, so a plan of one task runs on one thread. No timings."""
import numpy as np
import pytest

from convt._backends.base import parallel
from convt._backends.direct import micro as _micro
from convt._backends.direct import registry as _direct
from convt._dispatch import cost as _cost
from convt._geometry.geometry import OpSpec, PadRule, resolve
from convt._kernels import _cpu

from _helpers import random_geometries


def _micro_ok(geom):
    return _micro.micro_layout(geom, _micro.NR_F32).phases.shape[0] > 0


def _geoms(n, seed):
    return random_geometries(n, seed, lambda rng, g: (g * int(rng.integers(1, 9)),
                                                      g * int(rng.integers(1, 20))), _micro_ok)


def _kind(geom):
    macs = _micro.micro_macs(geom)
    return _direct.DirectKind("micro", "", macs, macs)


def _geom_1d(batch, c_in, c_out, length, kernel, stride, groups=1, data_format="NCX"):
    spec = OpSpec("t", (stride,), (1,), (kernel,), groups, c_in, c_out,
                  PadRule("explicit", (0,), (0,), (0,)), data_format=data_format)
    return resolve(spec, (batch, c_in, length))


def _kernel_entries(layout, batch):
    """Pointer-table entries as ``micro_conv`` fills them (``_set_task`` -> ``_tile`` ->
    ``_pointers``): per task, per phase of its set with taps and rows in the task, its rows
    rounded up to MR times its taps (each block of taps fills rows x the block's taps)."""
    mr = _micro.MR
    total = 0
    for first, nph, r0, m in layout.tasks:
        for p in range(first, first + nph):
            q0, q1, q2, _, _, _, _, taps, _ = layout.phases[p]
            rows = max(0, min(m, batch * q0 * q1 * q2 - r0))
            total += -(-rows // mr) * mr * taps
    return total


@pytest.mark.parametrize("geom", _geoms(30, 382), ids=lambda g: "")
def test_table_entries_are_the_kernels(geom):
    layout = _micro.micro_layout(geom, _micro.NR_F32)
    ph = layout.phases
    exact = geom.batch * int(np.prod(ph[:, :3], axis=1) @ ph[:, 7])
    entries = _micro.table_entries(geom, _kind(geom))
    assert entries == exact
    # the kernel pads each task's rows of a phase to whole sub-tiles: at most MR - 1 rows
    pad = sum((_micro.MR - 1) * int(layout.phases[p, 7]) for first, nph, _, _ in layout.tasks
              for p in range(first, first + nph))
    assert entries <= _kernel_entries(layout, geom.batch) <= entries + pad


@pytest.mark.parametrize("c_in, c_out, groups", [(2, 16, 1), (64, 16, 1), (2, 160, 1),
                                                 (64, 64, 4)])
def test_table_entries_ignore_channels(c_in, c_out, groups):
    # positions x taps: 2 images x 4 phases x 73 positions x 52 taps (kernel 206, stride 4:
    # phases of 52, 52, 51, 51 taps), whatever the channels and groups
    geom = _geom_1d(2, c_in, c_out, 236, 206, 4, groups)
    out = geom.out_shape[0]
    want = 2 * sum(len(range(c, out, 4)) * len(range(c, 206, 4)) for c in range(4))
    assert _micro.table_entries(geom, _kind(geom)) == want


def test_table_entries_priced():
    c = _cost.current()
    for f64 in (False, True):
        geom = _geom_1d(3, 3, 27, 236, 206, 4)
        kind = _kind(geom)
        with_table = _direct.seconds(geom, kind, f64, 1, c)
        without = _direct.seconds(geom, kind, f64, 1, dict(c, micro_tap_s=0.0))
        entries = _micro.table_entries(geom, kind)
        assert with_table - without == pytest.approx(entries * c["micro_tap_s"])
        # 3 channels a group over 52 taps a phase: the table is a large part of the price
        assert entries * c["micro_tap_s"] > 0.25 * with_table


def test_table_entries_scale_with_positions_and_taps():
    base = _geom_1d(1, 4, 32, 300, 24, 1)
    entries = _micro.table_entries(base, _kind(base))
    assert entries == (300 + 23) * 24
    twice = _geom_1d(2, 4, 32, 300, 24, 1)
    assert _micro.table_entries(twice, _kind(twice)) == 2 * entries
    longer = _geom_1d(1, 4, 32, 300, 48, 1)
    assert _micro.table_entries(longer, _kind(longer)) == (300 + 47) * 48


@pytest.mark.parametrize("geom", _geoms(20, 383), ids=lambda g: "")
def test_tasks_are_the_plans(geom):
    kind = _kind(geom)
    for itemsize, nr in ((4, _micro.NR_F32), (8, _micro.NR_F64)):
        assert (_micro.VARIANT.tasks(geom, kind, itemsize)
                == len(_micro.micro_layout(geom, nr).tasks))


def test_one_task_runs_on_one_thread():
    # 1d_n3_c39-106_i27_k23_s2_f64 of random sweep seed 103: the whole layer is one task
    # (2 phases of 111 rows, one set), so the second worker has nothing to do
    geom = _geom_1d(3, 39, 106, 27, 23, 2)
    kind = _kind(geom)
    c = _cost.current()
    for f64 in (False, True):
        assert _micro.VARIANT.tasks(geom, kind, 8 if f64 else 4) == 1
        assert _direct.seconds(geom, kind, f64, 2, c) == pytest.approx(
            _direct.seconds(geom, kind, f64, 1, c))


def _split(geom, kind, f64, c):
    one = _direct.seconds(geom, kind, f64, 1, c) - c["call_s"]
    return one / (_direct.seconds(geom, kind, f64, 2, c) - c["call_s"])


def test_tasks_share_the_threads():
    # 5 tasks on 2 threads: the busiest runs 3, the threads' speed-up is that of 5/3
    geom = _geom_1d(3, 3, 27, 236, 206, 4)
    kind = _kind(geom)
    c = _cost.current()
    assert _micro.VARIANT.tasks(geom, kind, 8) == 5
    assert _split(geom, kind, True, c) == pytest.approx(parallel(5 / 3, c))
    assert _split(geom, kind, True, c) < parallel(2, c)


def test_tasks_follow_the_dtype():
    # 3d_n2_c18-172_i3x3x3_k3x5x2_s2x2x2 (seed 104's, unpadded): float32's 16-value tiles
    # make 2 tasks, float64's 8-value tiles 3 (each dtype priced with its own plan)
    spec = OpSpec("t", (2, 2, 2), (1, 1, 1), (3, 5, 2), 1, 18, 172,
                  PadRule("explicit", (0,) * 3, (0,) * 3, (0,) * 3))
    geom = resolve(spec, (2, 18, 3, 3, 3))
    kind = _kind(geom)
    c = _cost.current()
    assert _micro.VARIANT.tasks(geom, kind, 4) == 2
    assert _micro.VARIANT.tasks(geom, kind, 8) == 3
    assert _split(geom, kind, False, c) == pytest.approx(parallel(2, c))
    assert _split(geom, kind, True, c) == pytest.approx(parallel(3 / 2, c))


@pytest.mark.skipif(_cpu.ISA < 1, reason="the micro variant and those built on it need the AVX2 level (CONVT_ISA caps it)")
def test_estimate_uses_the_table():
    # the dispatcher's estimate is the registry's with the table: explain shows that one
    geom = _geom_1d(3, 3, 27, 236, 206, 4)
    kind = _cost.direct_kind(geom)
    assert kind.variant == "micro"
    c = _cost.current()
    est = _cost.estimate(geom, np.float64, 2)
    assert est.seconds["direct"] == pytest.approx(_direct.seconds(geom, kind, True, 2, c))
    assert est.seconds["direct"] > _direct.seconds(geom, kind, True, 2,
                                                   dict(c, micro_tap_s=0.0))
