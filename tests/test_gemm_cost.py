"""The GEMM variant's cost model: the BLAS calls it prices are the ones the kernel makes."""
import numpy as np
import pytest

import convt
from convt._backends.direct import gemm as _gemm
from convt._backends.direct import registry as _direct
from convt._dispatch import cost as _cost

from _helpers import random_geometries


def _kernel_calls(geom, batch_rows):
    """{(m, n, k): count} of the GEMMs convt._kernels._gemm issues, task by task and op by
    op as its ``_grid_task`` / ``_batch_task`` loops do (the obvious enumeration)."""
    layout = _gemm.gemm_layout(geom)
    g, cg, mg = geom.groups, geom.c_in // geom.groups, geom.c_out // geom.groups
    out = {}
    if batch_rows:
        for row in layout.phases:
            if row[7]:
                key = (geom.batch, mg, cg)
                out[key] = out.get(key, 0) + int(np.prod(row[:3])) * int(row[7]) * g
        return out
    img = int(np.prod(layout.grid))
    for s, r0, m, kind in layout.tasks:
        if kind != 0:   # bias tasks make no GEMM
            continue
        first, nops = layout.sets[s][2], layout.sets[s][3]
        n0 = r0 // img
        for op in layout.ops[first:first + nops]:
            last = op[5] + (n0 if layout.channels_first else geom.batch - 1) * img
            run = min(m, last - r0)
            if run > 0:
                key = (int(run), int(op[3] * mg), cg)
                out[key] = out.get(key, 0) + g
    return out


def _random_geoms(n, seed=38):
    return random_geometries(n, seed, lambda rng, g: (6 * g, g * int(rng.integers(1, 5))),
                             _gemm.gemm_fits)


@pytest.mark.parametrize("geom", _random_geoms(40), ids=lambda g: "")
@pytest.mark.parametrize("batch_rows", [False, True])
def test_calls_are_the_kernels(geom, batch_rows):
    calls = _gemm.gemm_calls(geom, batch_rows)
    want = _kernel_calls(geom, batch_rows)
    assert calls.count.sum() == sum(want.values())
    assert calls.rows.sum() == sum(c * m for (m, _, _), c in want.items())
    assert (calls.rows * calls.columns).sum() == sum(c * m * n for (m, n, _), c in want.items())
    assert set(calls.depth) <= {geom.c_in // geom.groups}
    layout = _gemm.gemm_layout(geom)
    n_tasks = len(_gemm.batch_rows_layout(layout, geom.batch).tasks if batch_rows
                  else layout.tasks)
    assert calls.tasks == n_tasks


def _gemm_seconds_per_mac(x, w, **kw):
    geom = convt.ConvTranspose(np.zeros(w, np.float32), method="direct", **kw).geometry(x)
    c = _cost.current()
    kind = _direct.select(geom, c, start=_direct.VARIANTS.index(_gemm.VARIANT))
    assert kind.variant == "gemm"
    return _direct.seconds(geom, kind, False, 1, c) / kind.macs


def test_thin_gemm_priced_below_its_peak():
    """113 -> 2 channels over 80 x 80: n = 2 columns per tap and an A operand of 3.4 MB per
    call; BLAS ran it at 3.8 G MAC/s against 25-36 G on thick or cached ones (docs/dispatch.md),
    and the model prices it at least 3x a thick layer's time per multiply-add."""
    thick = _gemm_seconds_per_mac((1, 64, 32, 32), (64, 64, 2, 2), strides=(2, 2))
    assert _gemm_seconds_per_mac((1, 113, 80, 80), (113, 2, 6, 6)) > 3 * thick


def test_thin_layer_runs_the_depthwise_kernel():
    """Priced so, that layer goes to the depthwise kernel: 3.8 ms against the GEMMs' 11.2 ms
    (2 workers, 2-core AMD EPYC Zen 4, 2026-11-26)."""
    op = convt.ConvTranspose(np.zeros((113, 2, 6, 6), np.float32), method="direct")
    assert _cost.direct_kind(op.geometry((1, 113, 80, 80))).variant == "depthwise"


def test_threads_limited_by_tasks():
    """A call whose kernel has one task runs on one thread: two workers price it as one."""
    geom = convt.ConvTranspose(np.zeros((123, 104, 285), np.float32), strides=[4],
                               method="direct").geometry((1, 123, 26))
    kind = _cost.direct_kind(geom)
    assert kind.variant == "gemm" and _gemm.gemm_calls(geom, False).tasks == 1
    c = _cost.current()
    one = _direct.seconds(geom, kind, False, 1, c)
    assert _direct.seconds(geom, kind, False, 2, c) == pytest.approx(one)
