"""Planning for the GEMM variant of the direct backend (kernel: convt._kernels._gemm).

For a geometry this computes, once: the zero halo H and grid P of the padded input (laid out
like the data; channels last in batch-rows mode), the phases (per-axis output counts Q and
residues c) and, per phase, its taps as (flat grid offset, weight offset) pairs; the sets of
phases a task covers and their GEMM ops (taps reading one input offset, side by side); the
tasks. Per plan and geometry, ``merged_weights`` lays the weights out for those ops. See the
kernel module for the algorithm.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
from dataclasses import dataclass
from math import prod
from typing import NamedTuple

import numpy as np

from ..blas import blas_threads
from .base import MAX_GEMM_WASTE, DirectKind, Variant
from .phases import axes3 as _axes3, axis_phases as _axis_phases, phase_combos
from .pixel import VARIANT as PIXEL, element_strides, new_output, pad3
from .storage import as_compute, padded_nxc
from ..._kernels._gemm import phase_gemm
from ..._kernels._layout import MERGE_TAPS, merge_iox

__all__ = ["VARIANT", "GemmLayout", "gemm_fits", "batch_rows_layout", "gemm_layout", "grid_shape", "merged_weights",
           "phase_combos", "run_gemm", "write_segments"]


@dataclass(frozen=True)
class GemmLayout:
    halo: tuple          # zero elements before the data, per axis (3 axes)
    grid: tuple          # padded spatial shape P (3 axes)
    phases: np.ndarray   # (n_phases, 8): Q0, Q1, Q2, c0, c1, c2, first tap, number of taps
    xoff: np.ndarray     # per tap, flat pixel offset in the grid
    woff: np.ndarray     # per tap, element offset of its (Cg, Mg) block in group 0
    tap_e: np.ndarray    # per tap, e + H per axis (flat, 3 per tap)
    sets: np.ndarray     # (n_sets, 4): first phase, phases, first op, ops (grid mode)
    ops: np.ndarray      # (n_ops, 6): xoff, woff in the merged weights, j1, nj, beta, and
                         # the grid rows of one image its phases need
    op_taps: tuple       # per op, the woff (in the packed weights) of each of its nj taps
    merge_dst: np.ndarray   # per tap (flat kernel index): offset of its (Cg, Mg) column
                            # block in the merged weights (row 0), -1 if no op uses it
    merge_step: np.ndarray  # per tap: row length of its op in the merged weights (nj * Mg)
    tasks: np.ndarray    # (n_tasks, 4): set or phase, first row (or position), rows, kind
    tile_rows: int       # rows of a grid task's tile
    tile: int            # scratch values per thread (grid mode)
    gemm_macs: int       # multiply-adds of grid mode (one GEMM per tap, halo rows included)
    exact_macs: int      # multiply-adds of batch-rows mode (taps inside the data only)
    channels_first: bool = False  # grid mode on an NCX grid (else NXC), channel-major tiles
    batch_rows: bool = False  # run each output position as GEMMs with M = batch (NXC grid)


def grid_shape(geom):
    """(per-axis phases, halo H, grid P) of ``geom``, 3 axes: the zero-haloed input grid the
    GEMM variant reads (cheap: the planner checks its size before building a layout)."""
    strides, dils, kernel, in_shape, pbs, out_shape = _axes3(geom)
    per_axis = [_axis_phases(*a) for a in zip(strides, dils, kernel, pbs, out_shape)]
    halo, grid = [], []
    for phases, i_len in zip(per_axis, in_shape):
        es = [(e, q) for q, taps in phases if q for _, e in taps]
        lo = min((e for e, _ in es), default=0)
        h = max(0, -lo)
        top = max((q - 1 + e + h + 1 for e, q in es), default=0)
        # Tile rows are output positions unravelled over the grid, for every phase of a set,
        # tap-less ones included: the grid must hold each phase's Q (with s > E and negative
        # pads, a tap-less residue can have more outputs than the data has rows).
        top = max(top, max(q for q, _ in phases))
        halo.append(h)
        grid.append(max(h + i_len, top))
    return per_axis, halo, grid


# Shared by the cost model (gemm_calls) and the plan (Gemm.layout): built once per geometry
# (it loops over the taps in Python, slow for thousands of taps (docs/performance.md, "Figures moved out of code comments")). Read-only: the kernel
# only reads its arrays.
@functools.lru_cache(maxsize=32)
def gemm_layout(geom):
    """The ``GemmLayout`` of ``geom`` (any rank, padded to 3 spatial axes)."""
    strides, dils, kernel, in_shape, pbs, out_shape = _axes3(geom)
    per_axis, halo, grid = grid_shape(geom)
    n = geom.batch
    cg, mg = geom.c_in // geom.groups, geom.c_out // geom.groups
    rows_stride = (grid[1] * grid[2], grid[2], 1)
    rows_of = lambda q: (((n - 1) * grid[0] + q[0] - 1) * grid[1] + q[1] - 1) * grid[2] + q[2]
    phases, xoff, woff, tap_e = [], [], [], []
    gemm_macs = exact_macs = 0
    phase_rows = []
    per_group = cg * mg * geom.groups
    for cs, qs, taps in phase_combos(per_axis, kernel):
        if min(qs) == 0:
            taps = []
        phases.append((*qs, *cs, len(xoff), len(taps)))
        for k, es in taps:
            xoff.append(sum((e + h) * st for e, h, st in zip(es, halo, rows_stride)))
            woff.append(k * cg * mg)
            tap_e.extend(e + h for e, h in zip(es, halo))
            # output positions of this phase whose input q + e is real data, per axis
            inside = prod(max(0, min(q, i - e) - max(0, -e))
                          for e, q, i in zip(es, qs, in_shape))
            exact_macs += n * inside * per_group
        phase_rows.append(rows_of(qs) if min(qs) else 0)
        if taps:
            gemm_macs += rows_of(qs) * len(taps) * per_group
    phases = np.array(phases, np.int64).reshape(-1, 8)
    size = _set_size(len(phases), strides[2], geom.c_out)
    img = prod(grid)
    sets, ops, op_taps = _sets_and_ops(phases, xoff, woff, phase_rows, size, strides[2],
                                      per_group, n, img)
    merge_dst, merge_step = _merge_tables(ops, op_taps, prod(kernel), cg * mg, mg)
    cf = geom.data_format == "NCX"
    tile_rows = max(_MIN_TILE_ROWS, _TILE_VALUES // max(geom.c_out * size, 1))
    return GemmLayout(halo=tuple(halo), grid=tuple(grid), phases=phases,
                      xoff=np.array(xoff, np.int64), woff=np.array(woff, np.int64),
                      tap_e=np.array(tap_e, np.int64), sets=sets, ops=ops, op_taps=op_taps,
                      merge_dst=merge_dst, merge_step=merge_step,
                      tasks=_grid_tasks(phases, sets, phase_rows, tile_rows, n,
                                        img if cf else 0), channels_first=cf,
                      tile_rows=tile_rows, tile=tile_rows * size * geom.c_out,
                      gemm_macs=gemm_macs, exact_macs=exact_macs)


def _merge_tables(ops, op_taps, kt, block, mg):
    """``GemmLayout.merge_dst`` / ``merge_step``: where ``merged_weights`` puts each tap."""
    nj = ops[:, 3]
    k = np.fromiter(itertools.chain.from_iterable(op_taps), np.int64, int(nj.sum()))
    k //= max(block, 1)
    if len(np.unique(k)) != len(k):
        raise RuntimeError("a GEMM layout uses a tap twice; this is a bug in convt")
    j = np.arange(len(k)) - np.repeat(np.cumsum(nj) - nj, nj)
    dst = np.full(kt, -1, np.int64)
    step = np.zeros(kt, np.int64)
    dst[k] = np.repeat(ops[:, 1], nj) + j * mg
    step[k] = np.repeat(nj * mg, nj)
    return dst, step


def _set_size(n_phases, s2, c_out):
    """Phases per grid task: all of them when a tile row (phases x C_out values) stays
    short (taps of different phases reading the same input then share one GEMM), else as
    many of those sharing (c0, c1) as fit (the write-out then fills whole lines)."""
    if n_phases <= _MAX_SET and n_phases * c_out <= _SET_VALUES:
        return n_phases
    return max(1, min(s2, _MAX_SET, _SET_VALUES // max(c_out, 1)))


def _sets_and_ops(phases, xoff, woff, phase_rows, size, s2, block, n, img):
    """Sets of ``size`` consecutive phases (never across a (c0, c1) boundary unless a set is
    every phase) and their GEMM ops: per input offset, each run of consecutive phases with a
    tap reading it. beta = 0 for a run whose phases no earlier op touched, 1 otherwise (runs
    are split where that changes), so each output's taps are summed in one planned order."""
    sets, ops, op_taps, woff_m = [], [], [], 0
    if size == len(phases):
        spans = [(0, size)]
    else:
        spans = [(b + o, min(size, s2 - o)) for b in range(0, len(phases), s2)
                 for o in range(0, s2, size)]
    for base, count in spans:
        stop = base + count
        by_off = {}
        for j, ph in enumerate(range(base, stop)):
            f, nt = phases[ph, 6], phases[ph, 7]
            for t in range(f, f + nt):
                by_off.setdefault(xoff[t], []).append((j, woff[t]))
        first_op, touched = len(ops), set()
        for off in sorted(by_off):
            for run in _runs(by_off[off], touched):
                js = [j for j, _ in run]
                rows = max(phase_rows[base + j] for j in js) - (n - 1) * img
                ops.append((off, woff_m, js[0], len(js), int(js[0] in touched), rows))
                woff_m += len(js) * block
                op_taps.append(tuple(w for _, w in run))
            touched.update(j for j, _ in by_off[off])
        sets.append((base, stop - base, first_op, len(ops) - first_op))
    return (np.array(sets, np.int64).reshape(-1, 4), np.array(ops, np.int64).reshape(-1, 6),
            tuple(op_taps))


def _runs(taps, touched):
    """``taps`` [(j, woff)] split into runs of consecutive j with the same touched status."""
    runs = []
    for j, w in taps:
        if runs and runs[-1][-1][0] == j - 1 and (runs[-1][-1][0] in touched) == (j in touched):
            runs[-1].append((j, w))
        else:
            runs.append([(j, w)])
    return runs


def merged_weights(layout, w_iox, workers, buffer=None):
    """(merged, finite): per op and group, the (Cg, nj*Mg) weights of its taps side by side,
    flat, made in one pass from the IOX filter ``w_iox`` (C_in, Mg, *K), C-contiguous in the
    compute dtype; and whether every weight is finite, checked in that pass. ``buffer(size,
    dtype)``: where the values go (a one-shot plan's workspace), default a new array."""
    c_in, mg = w_iox.shape[:2]
    size = c_in * mg * int(layout.ops[:, 3].sum())
    out = (np.empty if buffer is None else buffer)(max(1, size), w_iox.dtype)
    if not size:
        return out, bool(np.isfinite(w_iox).all())
    threads = workers if size >= _PARALLEL_MERGE_VALUES else 1
    scratch = np.empty(threads * MERGE_TAPS * mg, w_iox.dtype)
    finite = merge_iox(w_iox.reshape(-1), out, layout.merge_dst, layout.merge_step, mg,
                       threads, scratch, ISA)
    return out, bool(finite)


# Smaller weights merge faster than a thread team starts (docs/performance.md, "Figures moved out of code comments").
_PARALLEL_MERGE_VALUES = 1 << 19


# A task's tile (rows x phases x C_out) stays in L2 while it is written out to y: 512 KiB
# of float32 at most (L2 is 1 to 2 MiB on current x86 cores). Never fewer than 64 rows,
# so each GEMM keeps an M that BLAS runs at full speed. Block sizes depend on the geometry
# only, never on the thread count: the results must not either.
_TILE_VALUES = 1 << 17
# Write-out kernels: -1 the best this CPU has (AVX2 when it has it), 0 portable; tests set 0
# to run both on one machine.
ISA = -1
_MIN_TILE_ROWS = 64
_MAX_SET = 64         # phases per set (the kernel keeps per-set tables on the stack)
# Tile row width (phases x C_out) of a set. BLAS repacks the whole weight operand (Cg x N)
# at every call, so a GEMM needs M (tile rows) well above a few dozen for that to vanish
# (docs/performance.md, "Figures moved out of code comments"). 512 keeps M >= 256 within the tile budget.
_SET_VALUES = 512
_BIAS_ROWS = 64   # output rows (of Q2 positions) per task of a phase that only holds the bias
# Task kinds, as the kernel (convt._kernels._gemm) numbers them.
_GRID, _BIAS, _BATCH = 0, 1, 2


def _bias_tasks(phases, ph, n):
    q0, q1, q2 = phases[ph, :3]
    rows = n * q0 * q1 if q2 else 0
    return [(ph, r, min(_BIAS_ROWS, rows - r), _BIAS) for r in range(0, rows, _BIAS_ROWS)]


def _grid_tasks(phases, sets, phase_rows, tile_rows, n, img):
    """Tasks of grid mode: row blocks of each set (never across images when ``img``, the
    rows of one image, is given: channels-first tasks address one image); sets that no tap
    reaches get bias tasks per phase."""
    tasks = []
    for k, (base, size, _, nops) in enumerate(sets):
        rows = max(phase_rows[base:base + size])
        if not nops:
            for ph in range(base, base + size):
                tasks += _bias_tasks(phases, ph, n)
            continue
        bounds = range(0, rows, img) if img else [0]
        for lo in bounds:
            hi = min(rows, lo + img) if img else rows
            tasks += [(k, r, min(tile_rows, hi - r), _GRID) for r in range(lo, hi, tile_rows)]
    return np.array(tasks, np.int64).reshape(-1, 4)


def batch_rows_layout(layout, n):
    """``layout`` in batch-rows mode (``n`` images): one task per output position of a phase
    with taps, bias tasks for the others."""
    tasks = []
    for ph, row in enumerate(layout.phases):
        if row[7]:
            tasks += [(ph, pos, 1, _BATCH) for pos in range(int(np.prod(row[:3])))]
        else:
            tasks += _bias_tasks(layout.phases, ph, n)
    return dataclasses.replace(layout, batch_rows=True, channels_first=False,
                               tasks=np.array(tasks, np.int64).reshape(-1, 4))


def _padded_input(xa, layout, geom, ct, arena, workers):
    """x as the zero-haloed grid in dtype ``ct``: (N, C_in, P0, P1, P2) for a channels-first
    layout, else (N, P0, P1, P2, C_in) (the batch-rows mode always reads channels last)."""
    n, c_in, nxc = geom.batch, geom.c_in, geom.data_format == "NXC"
    in3 = pad3(geom.in_shape, 1)
    cf = layout.channels_first
    shape = (n, c_in, *layout.grid) if cf else (n, *layout.grid, c_in)
    if nxc or cf:    # the data is in the grid's layout: no copy without a halo
        x5 = xa.reshape((n, c_in, *in3) if cf else (n, *in3, c_in))
        if not any(layout.halo) and in3 == layout.grid:   # 16-bit: one parallel widening
            return as_compute(x5, ct, workers, arena)
        xp = arena.get("xp", shape, ct, zero_key=(layout.halo, layout.grid, in3, cf))
        inner = tuple(slice(h, h + i) for h, i in zip(layout.halo, in3))
        xp[(slice(None), slice(None), *inner) if cf else (slice(None), *inner)] = x5
        return xp
    xp = arena.get("xp", shape, ct, zero_key=(layout.halo, layout.grid, in3, cf))
    padded_nxc(xa.reshape(n, c_in, *in3), xp, layout.halo, workers)   # 16-bit widened too
    return xp


def run_gemm(xa, layout, geom, w_merged, bias, workers, arena, out=None):
    """y in ``geom``'s data layout, in the dtype of ``w_merged`` (``merged_weights``, or in
    batch-rows mode the packed weights flat; ``out`` when given: ``new_output``); ``xa`` in
    that layout too; ``bias`` (C_out,) contiguous in that dtype (zeros for none)."""
    ct = w_merged.dtype
    n, c_in, c_out = geom.batch, geom.c_in, geom.c_out
    xp = _padded_input(xa, layout, geom, ct, arena, workers)
    y = new_output(geom, ct, out)
    ystr = element_strides(y, geom)
    tile = n * c_out if layout.batch_rows else layout.tile
    scratch = arena.get("tiles", (workers * tile,), ct)
    g = geom.groups
    dims = np.array([n, *layout.grid, *pad3(geom.strides, 1), g, c_in // g, c_out // g, c_in,
                     prod(geom.kernel) * (c_in // g) * (c_out // g), *layout.halo, *pad3(geom.in_shape, 1),
                     int(layout.batch_rows), int(layout.channels_first)], np.int64)
    # OpenMP threads run the tasks; each task's GEMMs run on one BLAS thread.
    with blas_threads(1):
        phase_gemm(xp.reshape(-1), w_merged, w_merged, bias, scratch, y.reshape(-1),
                   layout.phases, layout.sets, layout.ops, layout.tasks, layout.xoff,
                   layout.woff, layout.tap_e, dims, ystr, layout.tile_rows, tile, workers, ISA)
    return y


def _run_gemm(xa, state, geom, plan, out=None):
    layout, w_merged = state
    with plan.workspace.borrow() as arena:
        return run_gemm(xa, layout, geom, w_merged, plan.bias_compute, plan.threads(geom),
                        arena, out)


# scipy's OpenBLAS runs our (M, N, K) as its (N, M, K): unpacked on small-matrix kernels when
# M N K <= 100**3 (x86-64 builds set SMALL_MATRIX_OPT; that bound in the permits of kernel/
# generic/ and, on AVX-512 cores, kernel/x86_64/sgemm_small_kernel_permit_skylakex.c), else
# packed, in blocks of 16 of N (0.3.30's SkylakeX kernels here: sgemm_kernel_16x4) whose
# narrow tails reuse a packed value less (docs/dispatch.md, "The GEMM variant's BLAS paths").
_BLAS_SMALL_MNK = 100 ** 3
_BLAS_UNROLL_N = 16
# Grid pixels (halo included) per input + output pixel beyond which the GEMM variant is not
# used (gemm_fits); the 14 bench workloads have 0.0-0.85.
_MAX_GRID_GROWTH = 8
# Batch-rows mode (M = batch, no halo work) needs this many images to make a GEMM.
_MIN_BATCH_ROWS = 8
# Mostly halo and a small batch: grid mode only when priced this far below the pixel kernel
# (1.5 before the BLAS-path terms; docs/dispatch.md, "The GEMM variant's BLAS paths").
_PIXEL_MARGIN = 1.3


class GemmCalls(NamedTuple):
    """The BLAS calls of a layout, per kind (calls of one size): ``count`` calls of M =
    ``rows`` / ``count``, N = ``columns``, K = ``depth``; ``tasks``: the kernel's tasks."""
    count: np.ndarray
    rows: np.ndarray
    columns: np.ndarray
    depth: np.ndarray
    tasks: int

    def small(self):
        """Per kind, whether BLAS runs it unpacked (M N K <= _BLAS_SMALL_MNK)."""
        return self.rows / np.maximum(self.count, 1) * self.columns * self.depth <= _BLAS_SMALL_MNK


@functools.lru_cache(maxsize=256)
def gemm_calls(geom, batch_rows):
    """The ``GemmCalls`` the kernel (convt._kernels._gemm) makes on ``geom``: per op of a
    set, one GEMM per group and task whose rows reach the op's last needed row (a task's
    rows are capped there, ``_grid_task``); in batch-rows mode one (N, Mg, Cg) GEMM per
    output position, tap and group."""
    layout = gemm_layout(geom)
    g, cg, mg = geom.groups, geom.c_in // geom.groups, geom.c_out // geom.groups
    if batch_rows:
        ph = layout.phases
        count = np.array([float(np.prod(ph[:, :3], axis=1) @ ph[:, 7]) * g])
        n_tasks = len(batch_rows_layout(layout, geom.batch).tasks)
        return GemmCalls(count, count * geom.batch, np.array([mg]), np.array([cg]), n_tasks)
    tasks, img, tile = layout.tasks, prod(layout.grid), layout.tile_rows
    count, rows, cols = [], [], []
    for k, (_, _, first, nops) in enumerate(layout.sets):
        mine = tasks[(tasks[:, 0] == k) & (tasks[:, 3] == _GRID)]
        if not nops or not len(mine):
            continue
        ops = layout.ops[first:first + nops]
        end = int((mine[:, 1] + mine[:, 2]).max())
        # a set's tasks tile its rows (channels first: each image's) from the start: an op
        # runs those below its last row, whole tiles then a shorter call (BLAS's path
        # depends on the size)
        if layout.channels_first:
            spans = [(min(end - i * img, img), ops[:, 5]) for i in range(geom.batch)]
        else:
            spans = [(end, ops[:, 5] + (geom.batch - 1) * img)]
        for span, last in spans:
            run = np.clip(last, 0, span)
            full, rest = run // tile, run % tile
            count, rows = count + [g * full, g * (rest > 0)], rows + [g * full * tile, g * rest]
            cols += [ops[:, 3] * mg] * 2
    if not count:
        return GemmCalls(np.zeros(1), np.zeros(1), np.ones(1), np.array([cg]), len(tasks))
    count, rows, cols = (np.concatenate(a).astype(float) for a in (count, rows, cols))
    return GemmCalls(count[count > 0], rows[count > 0], cols[count > 0], np.array([cg]),
                     len(tasks))


@functools.lru_cache(maxsize=256)
def write_segments(geom):
    """Segments of y the grid-mode write-out (convt._kernels._gemm) starts: per task, each
    run of its rows along the grid's last axis visits the set's phases (``_slots``), and
    each row of a bias task is one; per output channel when channels-first. A short last
    axis (a unit one: every row a run) pays this set-up per value."""
    layout = gemm_layout(geom)
    tasks, p2 = layout.tasks, layout.grid[2]
    per_line = geom.c_out if layout.channels_first else 1
    grid = tasks[tasks[:, 3] == _GRID]
    runs = (grid[:, 1] + grid[:, 2] - 1) // max(p2, 1) - grid[:, 1] // max(p2, 1) + 1
    visits = float(np.sum(runs * layout.sets[grid[:, 0], 1])) if len(grid) else 0.0
    bias_rows = float(tasks[tasks[:, 3] == _BIAS, 2].sum())
    return (visits + bias_rows) * per_line


def gemm_fits(geom):
    """The zero-haloed input grid stays within _MAX_GRID_GROWTH times the data (a large
    dilation with heavy cropping can make the halo, not the data, the size of it: a 4x4
    input at dilation 3000 needed an 8.6 GiB grid in batch-rows mode), and every size and
    leading dimension passed to BLAS fits its 32-bit int (the largest: one image of the
    grid, all channels, in batch-rows mode)."""
    img = prod(grid_shape(geom)[2])
    data = prod(geom.in_shape) + prod(geom.out_shape)
    # a tile has at most _TILE_VALUES values or _MIN_TILE_ROWS rows of a set's columns
    blas = max(img * geom.c_in, geom.batch, _MIN_TILE_ROWS * _MAX_SET * geom.c_out,
               _TILE_VALUES)
    return img <= _MAX_GRID_GROWTH * data and blas < 2**31


class Gemm(Variant):
    """BLAS GEMMs per set of phases and input offset over a zero-haloed grid (grid mode, halo
    rows included), or per output position with M = batch (batch-rows mode)."""

    name = "gemm"

    def claim(self, geom, rule):
        if not gemm_fits(geom):
            return None
        gemm, exact = rule.gemm, rule.exact
        if rule.grid_ok:
            return DirectKind("gemm", "grid", gemm, exact)
        if geom.batch >= _MIN_BATCH_ROWS:
            return DirectKind("gemm", "batch-rows", exact, exact)
        grid = DirectKind("gemm", "grid", gemm, exact)
        if gemm <= MAX_GEMM_WASTE * max(exact, 1):
            return grid
        pixel_kind = DirectKind("pixel", "", exact, exact)
        return grid if _PIXEL_MARGIN * rule.seconds(grid) <= rule.seconds(pixel_kind) else None

    def rate(self, geom, kind, c):
        return c["gemm_macs_per_s"]

    def tasks(self, geom, kind, itemsize=4):
        return gemm_calls(geom, kind.mode == "batch-rows").tasks

    def extra_seconds(self, geom, kind, c, rate, itemsize):
        # The GEMMs as the kernel issues them (gemm_calls), in place of ``kind.macs / rate``
        # (which the registry adds): m x k x n multiply-adds at the rate x m / (m +
        # gemm_rows_half) x n / (n + gemm_channel_half) x k / (k + gemm_depth_half) (a
        # shallow product is bound by C's update); gemm_stream_s per value of A a packed call
        # packs (_BLAS_SMALL_MNK: an unpacked call streams nothing extra, whatever A's size;
        # both: docs/dispatch.md, "The GEMM variant's BLAS paths");
        # gemm_write_s per output value (its strided write-out); in grid mode gemm_call_s
        # per GEMM, gemm_line_s per segment of the write-out (write_segments).
        batch_rows = kind.mode == "batch-rows"
        calls = gemm_calls(geom, batch_rows)
        n, k = calls.columns, calls.depth
        m = calls.rows + calls.count * c["gemm_rows_half"]
        macs = float(np.sum(m * (k + c["gemm_depth_half"]) * (n + c["gemm_channel_half"])))
        packed = float(np.sum(np.where(calls.small(), 0.0, calls.rows * k)
                              * _BLAS_UNROLL_N / (_BLAS_UNROLL_N + n)))
        out = geom.batch * geom.c_out * prod(geom.out_shape)
        per_call = 0.0 if batch_rows else float(calls.count.sum()) * c["gemm_call_s"]
        lines = 0.0 if batch_rows else write_segments(geom) * c["gemm_line_s"]
        return ((macs - kind.macs) / rate + per_call + out * c["gemm_write_s"] + lines
                + packed * c["gemm_stream_s"])

    def describe(self, kind):
        text = super().describe(kind)
        if kind.macs > kind.useful:
            text += f", GEMM work {kind.macs / max(kind.useful, 1):.2f}x the useful"
        return text

    def layout(self, geom, batch_rows):
        layout = gemm_layout(geom)
        return batch_rows_layout(layout, geom.batch) if batch_rows else layout

    def prepare(self, geom, plan, layout):
        # The GEMMs also multiply each tap's weights by the halo's zeros: weights that are
        # not finite run the pixel kernel (0 * NaN would reach outputs the tap misses).
        if layout is None:
            layout = gemm_layout(geom)
        if not layout.batch_rows:
            # the layout's weights merged per GEMM op, once per geometry; finiteness checked
            # in the merging pass (one read)
            merged, finite = merged_weights(layout, plan.w_iox_compute, plan.workers,
                                            plan.pack_buffer("merged_gemm"))
            plan.packed("finite", lambda p: finite)
            state = (layout, merged)
        else:   # batch rows: the direct kernels' packed weights
            finite = plan.packed("finite", lambda p: bool(np.isfinite(p.w_iox).all()))
            state = (layout, plan.w_packed.reshape(-1)) if finite else None
        if not finite:
            return PIXEL.prepare(geom, plan, None)
        return self.name, _run_gemm, state


VARIANT = Gemm()
