"""Planning for the GEMM variant of the direct backend (kernel: convt._kernels._gemm).

For a geometry this computes, once: the zero halo H and grid P of the padded channels-last
input, the phases (per-axis output counts Q and residues c) and, per phase, its taps as (flat
grid offset, weight offset) pairs. See the kernel module for the algorithm.
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from math import prod

import numpy as np

from ._blas import blas_threads
from ._direct import pad3
from ._kernels._gemm import phase_gemm
from ._kernels._layout import to_padded_nxc

__all__ = ["GemmLayout", "gemm_layout", "run_gemm"]


@dataclass(frozen=True)
class GemmLayout:
    halo: tuple          # zero elements before the data, per axis (3 axes)
    grid: tuple          # padded spatial shape P (3 axes)
    phases: np.ndarray   # (n_phases, 8): Q0, Q1, Q2, c0, c1, c2, first tap, number of taps
    xoff: np.ndarray     # per tap, flat pixel offset in the grid
    woff: np.ndarray     # per tap, element offset of its (Cg, Mg) block in group 0
    tap_e: np.ndarray    # per tap, e + H per axis (flat, 3 per tap)
    tasks: np.ndarray    # (n_tasks, 3): phase, first row (position in batch mode), rows
    tile_rows: int       # rows of a task's tile (scratch = tile_rows * C_out per thread)
    gemm_macs: int       # multiply-adds of grid mode (one GEMM per tap, halo rows included)
    exact_macs: int      # multiply-adds of batch-rows mode (taps inside the data only)
    batch_rows: bool = False  # run each output position as GEMMs with M = batch


def _axes3(geom):
    return (pad3(geom.strides, 1), pad3(geom.dilations, 1), pad3(geom.kernel, 1),
            pad3(geom.in_shape, 1), pad3(geom.pads_begin, 0), pad3(geom.out_shape, 1))


def _axis_phases(s, d, k_len, pb, o_len):
    """Per residue c: (Q, [(k, e), ...]) with input i = q + e for output o = q*s + c."""
    out = []
    for c in range(s):
        q = max(0, -(-(o_len - c) // s))
        taps = [(k, (c + pb - k * d) // s) for k in range(k_len) if (c + pb - k * d) % s == 0]
        out.append((q, taps))
    return out


def gemm_layout(geom):
    """The ``GemmLayout`` of ``geom`` (any rank, padded to 3 spatial axes)."""
    strides, dils, kernel, in_shape, pbs, out_shape = _axes3(geom)
    per_axis = [_axis_phases(*a) for a in zip(strides, dils, kernel, pbs, out_shape)]
    halo, grid = [], []
    for phases, i_len in zip(per_axis, in_shape):
        es = [(e, q) for q, taps in phases if q for _, e in taps]
        lo = min((e for e, _ in es), default=0)
        h = max(0, -lo)
        top = max((q - 1 + e + h + 1 for e, q in es), default=0)
        halo.append(h)
        grid.append(max(h + i_len, top))
    n = geom.batch
    cg, mg = geom.c_in // geom.groups, geom.c_out // geom.groups
    rows_stride = (grid[1] * grid[2], grid[2], 1)
    rows_of = lambda q: (((n - 1) * grid[0] + q[0] - 1) * grid[1] + q[1] - 1) * grid[2] + q[2]
    phases, xoff, woff, tap_e = [], [], [], []
    gemm_macs = exact_macs = 0
    phase_rows = []
    per_group = cg * mg * geom.groups
    for combo in itertools.product(*[list(enumerate(p)) for p in per_axis]):
        cs = tuple(c for c, _ in combo)
        qs = tuple(q for _, (q, _) in combo)
        taps = list(itertools.product(*[t for _, (_, t) in combo]))
        if min(qs) == 0:
            taps = []
        phases.append((*qs, *cs, len(xoff), len(taps)))
        for tap in taps:
            xoff.append(sum((e + h) * st for (_, e), h, st in zip(tap, halo, rows_stride)))
            k0, k1, k2 = (k for k, _ in tap)
            woff.append(((k0 * kernel[1] + k1) * kernel[2] + k2) * cg * mg)
            tap_e.extend(e + h for (_, e), h in zip(tap, halo))
            # output positions of this phase whose input q + e is real data, per axis
            inside = prod(max(0, min(q, i - e) - max(0, -e))
                          for (_, e), q, i in zip(tap, qs, in_shape))
            exact_macs += n * inside * per_group
        phase_rows.append(rows_of(qs) if min(qs) else 0)
        if taps:
            gemm_macs += rows_of(qs) * len(taps) * per_group
    phases = np.array(phases, np.int64).reshape(-1, 8)
    tile_rows = max(_MIN_TILE_ROWS, _TILE_VALUES // max(geom.c_out * strides[2], 1))
    return GemmLayout(halo=tuple(halo), grid=tuple(grid), phases=phases,
                      xoff=np.array(xoff, np.int64), woff=np.array(woff, np.int64),
                      tap_e=np.array(tap_e, np.int64),
                      tasks=_grid_tasks(phases, phase_rows, strides[2], tile_rows, n),
                      tile_rows=tile_rows, gemm_macs=gemm_macs, exact_macs=exact_macs)


# A task's tile (s2 phases x rows x C_out) stays in L2 while it is written out to y: about
# 256 KiB of float32 (L2 is 512 KiB to 2 MiB on current x86 cores). Never fewer than 64 rows,
# so each GEMM keeps an M that BLAS runs at full speed. Block sizes depend on the geometry
# only, never on the thread count: the results must not either.
_TILE_VALUES = 1 << 16
_MIN_TILE_ROWS = 64
_BIAS_ROWS = 64   # output rows (of Q2 positions) per task of a phase that only holds the bias
# Task kinds, as the kernel (convt._kernels._gemm) numbers them.
_GRID, _BIAS, _BATCH = 0, 1, 2


def _bias_tasks(phases, ph, n):
    q0, q1, q2 = phases[ph, :3]
    rows = n * q0 * q1 if q2 else 0
    return [(ph, r, min(_BIAS_ROWS, rows - r), _BIAS) for r in range(0, rows, _BIAS_ROWS)]


def _grid_tasks(phases, phase_rows, s2, tile_rows, n):
    """Tasks of grid mode: row blocks of each set of s2 phases that share (c0, c1); sets
    that no tap reaches get bias tasks per phase."""
    tasks = []
    for base in range(0, len(phases), s2):
        rows = max(phase_rows[base:base + s2])
        if phases[base:base + s2, 7].any():
            tasks += [(base, r, min(tile_rows, rows - r), _GRID)
                      for r in range(0, rows, tile_rows)]
        else:
            for ph in range(base, base + s2):
                tasks += _bias_tasks(phases, ph, n)
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
    return dataclasses.replace(layout, batch_rows=True,
                               tasks=np.array(tasks, np.int64).reshape(-1, 4))


def _padded_input(xa, layout, geom, ct, arena, workers):
    """x as the zero-haloed channels-last grid (N, P0, P1, P2, C_in), in dtype ``ct``."""
    n, c_in, nxc = geom.batch, geom.c_in, geom.data_format == "NXC"
    in3 = pad3(geom.in_shape, 1)
    if nxc and not any(layout.halo) and in3 == layout.grid:
        x5 = xa.reshape(n, *in3, c_in)
        if x5.dtype == ct and x5.flags.c_contiguous:
            return x5          # already the grid: no copy
    xp = arena.get("xp", (n, *layout.grid, c_in), ct, zero_key=(layout.halo, layout.grid))
    if nxc:
        inner = tuple(slice(h, h + i) for h, i in zip(layout.halo, in3))
        xp[(slice(None), *inner)] = xa.reshape(n, *in3, c_in)
    else:
        x5 = np.ascontiguousarray(xa, dtype=ct).reshape(n, c_in, *in3)
        to_padded_nxc(x5, xp, np.array(layout.halo, np.int64), workers)
    return xp


def _channel_major(geom):
    """Whether a task's tile is channel-major (for channels-first y: the write-out then never
    transposes). BLAS runs that product as a transposed-operands GEMM, which measured up to
    2x slower than the plain one on thin channel counts (16 x 16: 41 vs 83 GFLOP/s, one
    thread) and 12% slower at 256 x 128; with 64 or more channels on both sides the saved
    transpose pays for it (U-Net layers)."""
    return (geom.data_format == "NCX" and geom.c_in // geom.groups >= _CM_MIN_CHANNELS
            and geom.c_out // geom.groups >= _CM_MIN_CHANNELS)


_CM_MIN_CHANNELS = 64


def run_gemm(xa, layout, geom, w_packed, bias, workers, arena):
    """y in ``geom``'s data layout, in the dtype of ``w_packed``; ``xa`` in that layout too."""
    ct = w_packed.dtype
    nd, n, c_in, c_out = geom.ndim, geom.batch, geom.c_in, geom.c_out
    nxc = geom.data_format == "NXC"
    xp = _padded_input(xa, layout, geom, ct, arena, workers)
    y = np.empty(geom.array_shape("output"), ct)
    item = y.itemsize
    st = [v // item for v in y.strides]
    sp = st[1:-1] if nxc else st[2:]
    ystr = np.array([st[0], *(0,) * (3 - nd), *sp, st[-1] if nxc else st[1]], np.int64)
    b = np.zeros(c_out, ct) if bias is None else np.ascontiguousarray(bias, ct)
    tile = (n if layout.batch_rows else layout.tile_rows * pad3(geom.strides, 1)[2]) * c_out
    scratch = arena.get("tiles", (workers * tile,), ct)
    g = geom.groups
    dims = np.array([n, *layout.grid, *pad3(geom.strides, 1), g, c_in // g, c_out // g, c_in,
                     prod(w_packed.shape[1:]), *layout.halo, *pad3(geom.in_shape, 1),
                     int(layout.batch_rows), int(_channel_major(geom))], np.int64)
    # OpenMP threads run the tasks; each task's GEMMs run on one BLAS thread.
    with blas_threads(1):
        phase_gemm(xp.reshape(-1), w_packed.reshape(-1), b, scratch, y.reshape(-1),
                   layout.phases, layout.tasks, layout.xoff, layout.woff, layout.tap_e, dims,
                   ystr, layout.tile_rows, tile, workers)
    return y
