"""Planning for the Winograd variant of the direct backend (kernel: convt._kernels._micro's
``wino_conv``; the algorithm is described there, above it).

Per geometry and register-tile width NR: which axes of each phase are Winograd axes (two or
three taps one input apart, after folding a stride-1 dilated axis into residues of adjacent
taps, and enough outputs that tiles of two save work), the products of each phase (3 per
F(2, 2) axis, 4 per F(2, 3) axis; the other axes' taps summed in each), each product's taps
as flat offsets into the zero-haloed channels-last input grid with the input transform they
read per axis (a difference one or two apart, or a sum), the weights of each product tap as
sums of kernel taps times +-1 or +-1/2^k, and the tasks (blocks of tile rows of a phase, or
of a set of phases). The micro variant's tile width, panels, channel chunks and tap blocks
are reused as they are.
Workspace per call: the grid (the input plus its halo) and, per thread, a task's product tiles
(at most _TILE_BYTES, _LIGHT_TILE_BYTES when its weights are light, or one sub-tile per
product) plus a tap block of input transforms (TB x MB x C_in values); channels-first y is
also staged channels-last, unless the tasks run sets of real phases (``_sets``), which write
it from their tiles.

The products' weights are packed once per prepared plan (``wino_weights``), one copy per
distinct sum: the residues of a folded axis share theirs. A one-shot call
whose products would take _LATE_SUM_BYTES or more packs the kernel taps instead
(``wino_taps``: 4/9 of the room in 2-D F(2, 2)) and the kernel sums each panel's product
weights in cache, per task, channel chunk and panel (``late_sums``; the same sums in the same
order, so the same bits), in one more buffer per thread of at most TB x CC x NR values
(16 KiB of float32).
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from math import prod

import numpy as np

from ._direct import bias_filled, element_strides, new_output, pad3
from ._kernels._layout import to_padded_nxc
from ._kernels._micro import MR
from ._kernels._pack import PACK_KB, WSUM_MAX, pack_taps, pack_wino
from ._kernels._wino import SET_MAX, wino_conv, wino_ready
from ._micro import _KC, _MAX_MB, _MAX_TB, _PARALLEL_PACK_VALUES, packing_arrays
from ._phase_gemm import _axes3, _axis_phases

__all__ = ["WinoLayout", "wino_alignment", "wino_axes", "wino_layout", "wino_weights",
           "run_wino"]

# The grid may hold at most this many pixels per input + output pixel: the halo of a heavily
# cropped or padded layer would otherwise make it, not the data, the size of the call.
_MAX_GRID_GROWTH = 8
# A task's product tiles, all held until combined: 1 MiB (dcgan_g1, 512 KiB of weights per
# product: 4.4 ms with one task per phase, 5.1 with two at 512 KiB; 2 workers, float32).
_TILE_BYTES = 1 << 20
# ... 256 KiB when the weights it streams take at most 1 MiB: more, smaller tasks, whose tiles
# stay in L2 beside the weights. Light / 1 MiB, in-process A/B (medians of 40-50 calls taking
# turns, 2 workers, the two built in either order: the op built first ran up to 5% faster),
# float32, six runs: dilated_s1 (24 rows a task against 102) 0.99-1.18, geometric mean 1.07;
# dcgan_g3 (42 against 180) 0.99-1.09, 1.03; hifigan_up3 (132 against 192) 0.97-1.05, 1.02;
# unet_up3x3_op (90 against 192) 0.97-1.05, 1.00. float64, two runs: hifigan_up3 1.10, 1.11;
# dilated_s1 1.05, 1.11; unet_up3x3_op 1.03, 1.03. dcgan_g1 and hifigan_up1 (heavy) keep
# 1 MiB: at 256 KiB they ran 0.94 and 0.98.
_LIGHT_TILE_BYTES = 1 << 18
_LIGHT_WEIGHT_BYTES = 1 << 20
# Packed weights of at least this size are stored past the caches (pack_wino's stream): a
# one-shot call reads them back from memory anyway. dcgan_g1's 18.9 MB pack: 1.47-1.56 ->
# 1.29-1.37 ms, its one-shot call 1.45 -> 1.38-1.40x the prepared one; hifigan_up1's
# 12.6 MB: 1.30-1.33 -> 1.24-1.25x (2 workers, best of 30, two runs each). A one-shot call's
# products stream whatever their size (wino_weights' one_shot): right after a kernel call,
# through the caches / past them, 25th percentiles of 150 calls taking turns, 2 workers,
# pack and pack + kernel call (us): dilated_s1 199 / 123, 1620 / 1555; dcgan_g3 365 / 321,
# 4811 / 4723; unet_up3x3_op 270 / 238, 3973 / 3913; hifigan_up3 199 / 199, 1934 / 1907.
_STREAM_PACK_BYTES = 8 << 20
# One-shot calls whose products would take this much sum them in the kernel (late_sums):
# products made for one call are written to memory and read back once. dcgan_g1 (18.9 MB of
# products, 8.4 MB of taps): one-shot / prepared 1.37-1.39 -> 1.16-1.23 (medians of 30, 2
# workers, three alternating runs), the taps' pack 0.44-0.51 ms against 1.1-1.4 for the
# products; hifigan_up1 (12.6 MB): 1.22-1.26 -> 1.16-1.18. The kernel's sums cost nothing
# measurable (dcgan_g1's call from either: 4.09 / 4.24 ms best). On Winograd layers with
# small products, products against late sums (one-shot / prepared, medians of 40 calls, each
# one-shot call right after a prepared one, one process, 2 workers, two runs; products / taps
# in room): dilated_s1 (F(2, 3) on 2 x 2 folded residues, 7.1) 1.46, 1.45 -> 1.30, 1.34;
# dcgan_g3 (2.25) 1.16, 1.16 -> 1.16, 1.13; unet_up3x3_op (1.78) 1.12, 1.13 -> 1.19, 1.14;
# hifigan_up3 (1.5) 1.30, 1.22 -> 1.36, 1.28;
# so from 3fde965 late sums also ran on products of 4 times the taps' room (dilated_s1). With
# _LIGHT_TILE_BYTES' smaller tasks, each summing its panels' weights, that rule went:
# dilated_s1 (22 tasks), the same A/B, four runs: late sums 1.45-1.65, products 1.35-1.48.
_LATE_SUM_BYTES = 8 << 20
# Products' weights of at least this many values are summed by all the workers (each value
# sums up to 27 taps: more work a value than the micro variant's pack, _PARALLEL_PACK_VALUES).
# 1 -> 2 workers, medians of 100 packs, two runs: dilated_s1 (262,144 values) 177-179 ->
# 103-104 us, dcgan_g3 (294,912) 190 -> 107-110, unet_up3x3_op (131,072) 104 -> 64,
# hifigan_up3 (49,152) 66-67 -> 45.
_PARALLEL_WINO_PACK_VALUES = 1 << 15
# Sets of real phases (the residues of the last axis, run by one task) write channels-first y
# from their tiles, in 8 x 8 transposed blocks of consecutive outputs, instead of staging it
# channels-last and transposing it (a pass over y and its 4 MB workspace for hifigan_up3),
# when a set's tiles fit _SET_RULE_BYTES at this many rows a task.
# Sets / staged (before _LIGHT_TILE_BYTES), in-process A/B, medians of 60-150 calls taking
# turns, 2 workers, float32 NCX, same bits (three to five runs): hifigan_up3 (MB 192) 1.048,
# 1.077, 1.089, 1.039, 1.060; dcgan_g3 (180 rows, 192 staged) 1.018, 1.054, 1.043;
# dilated_s1 (102 rows, 192 staged) 0.985, 0.936, 1.061, 1.001, 1.028. Forced past the
# bound: hifigan_up1 (36 rows, 8 phases of 272-value rows) 0.861, dcgan_g1 (48 rows) 0.809.
# float64 (two runs): hifigan_up3 1.102, 1.206; dcgan_g3 (96 rows) 1.133, 1.065.
_MIN_SET_MB = 96
_SET_RULE_BYTES = 1 << 20   # (the tile budget this rule was measured with)


@dataclass(frozen=True)
class WinoLayout:
    real: np.ndarray     # (n_phases, 20): J0..2 (tiles), c0..2, m0..2 (2: Winograd axis),
                         # first product, products, Q0..2 (outputs), pi0..2 (tile j covers
                         # q = 2j - pi, 2j + 1 - pi), R0..2 (products per axis: 3 for
                         # F(2, 2), 4 for F(2, 3), 1 off the Winograd axes)
    prods: np.ndarray    # (n_products, 9): J0..2, m0..2, first tap, taps, weight offset
    owners: np.ndarray   # the products whose weights are packed (the first of each sum; the
                         # others' weight offsets are theirs)
    toff: np.ndarray     # per product tap: flat offset into the grid (image 0, tile 0)
    tkind: np.ndarray    # per product tap: its input transform per axis (2 bits at bit 2a:
                         # PLAIN, DIFF, DIFF2, SUM)
    ck: np.ndarray       # per product tap: WSUM_MAX kernel taps (flat index) ...
    cf: np.ndarray       # ... and their coefficients, +-1, +-1/2, ... (0: unused entry)
    tasks: np.ndarray    # (n_tasks, 4): first real phase, first tile row, rows, real phases
    sets: bool           # tasks run sets of real phases, which write channels-first y
    halo: tuple          # zero elements before the data, per axis
    grid: tuple          # spatial shape P of the zero-haloed input grid
    zstr: tuple          # the grid's strides per axis, in values (channels last)
    ostep: tuple         # per axis S: output o = S q + c of phase c (_axis_plan)
    gstep: tuple         # per axis U * zstr: the grid step of one tap offset e
    diff_axes: int       # most axes a tap's input transform spans
    nr: int
    panels: int
    cc: int
    tb: int
    mb: int
    prod_max: int        # most products of a task (tiles held per thread)
    ldc: int
    packed: int          # values of the packed weights
    macs: int            # multiply-adds of every product tap of every tile row (NR padding in)

    @functools.cached_property
    def packing(self):
        """What ``wino_weights`` hands ``pack_wino`` for the product taps it packs (the
        owners'), once per layout: their ck and cf rows, their products' weight offsets, and
        their index in their product and their product's taps, which times one tap's lines of
        a panel (C_in / G x NR values) give the offset of their line and their panel
        stride."""
        own = self.prods[self.owners]
        first, per = own[:, 6], own[:, 7]
        u = np.repeat(first - np.cumsum(per) + per, per) + np.arange(per.sum(), dtype=np.int64)
        return (np.ascontiguousarray(self.ck[u]), np.ascontiguousarray(self.cf[u]),
                np.repeat(own[:, 8], per), u - np.repeat(first, per), np.repeat(per, per))

    @functools.cached_property
    def sum_bits(self):
        """log2 of the most kernel taps a product's weight sums, rounded up (``wino_taps``'
        bound)."""
        return int(np.count_nonzero(self.cf, axis=1).max(initial=1) - 1).bit_length()


# Input transforms of a product tap along one axis (2 bits of its kind per axis, at bit 2a;
# the kernel's _wino_build): 0 x[u] itself, 1 x[u] - x[u+1], 2 x[u] - x[u+2], 3 x[u] + x[u+1];
# and how many inputs past u each reads.
PLAIN, DIFF, DIFF2, SUM = 0, 1, 2, 3
_REACH = (0, 1, 2, 1)


def _axis_wino(q, taps):
    """Whether an axis of a phase (Q outputs, taps [(k, e)]) gets tiles of two: two taps one
    input apart (F(2, 2): 3 products a tile) or three (F(2, 3): 4), and fewer products times
    ceil(Q / 2) than its taps times Q."""
    es = sorted(e for _, e in taps)
    if len(es) not in (2, 3) or es[-1] - es[0] != len(es) - 1:
        return False
    return (len(es) + 1) * (-(-q // 2)) < len(es) * q


def _axis_plan(s, d, k_len, pb, o_len):
    """One axis for the planner: (S, U, phases [(Q, taps [(k, e)], Winograd?, r)]), output
    o = S q + c of phase c reading input i = U (q + e) + r for its tap (k, e).

    Unfolded (U = 1, r = 0): the phases of stride S = s, convt._phase_gemm's. A stride-1
    axis whose 2 or 3 taps are d > 1 inputs apart is folded (S = U = d): y[o] sums
    x[o + pb - k d], so the outputs of residue c = o mod d read only the inputs of residue
    r = (c + pb) mod d, where the taps are adjacent, e = (c + pb) // d - k (dilated_s1: 3 x 3
    taps two apart become 2 x 2 residues of adjacent 3 x 3 taps)."""
    if s == 1 and d > 1 and k_len in (2, 3):
        phases = []
        for c in range(d):
            q = max(0, -(-(o_len - c) // d))
            f, r = divmod(c + pb, d)
            taps = [(k, f - k) for k in range(k_len)]
            phases.append((q, taps, _axis_wino(q, taps), r))
        return d, d, phases
    return s, 1, [(q, taps, _axis_wino(q, taps), 0)
                  for q, taps in _axis_phases(s, d, k_len, pb, o_len)]


def wino_axes(geom):
    """Per axis (3, padded in front) ``_axis_plan``: (S, U, phases (Q, taps, Winograd?, r))."""
    strides, dils, kernel, _, pbs, out_shape = _axes3(geom)
    return [_axis_plan(*a) for a in zip(strides, dils, kernel, pbs, out_shape)]


def _axis_products(q, taps, wino, pi):
    """One axis of a phase: (tiles J, step m, products), each product a list of terms (input
    transform, input offset, [(k, coefficient)]) summed in one tile; tile j covers q = 2j - pi
    and 2j + 1 - pi. The kernel combines a Winograd axis's products as its digits: 3
    products y0 = m0 + m1, y1 = m2 + m1; 4 products y0 = (m0 + m1) - m2, y1 = (m3 + m1) + m2."""
    if not wino:
        return q, 1, [[(PLAIN, e, [(k, 1)]) for k, e in taps]]
    tiles = -(-(q + pi) // 2)
    if len(taps) == 2:
        (k_lo, e_lo), (k_hi, _) = sorted(taps, key=lambda t: t[1])
        e = e_lo - pi   # u = 2j + e: m0 = (x[u] - x[u+1]) W_lo, m1 = x[u+1] (W_lo + W_hi),
        #                 m2 = (x[u+1] - x[u+2]) (-W_hi)
        return tiles, 2, [[(DIFF, e, [(k_lo, 1)])],
                          [(PLAIN, e + 1, [(k_lo, 1), (k_hi, 1)])],
                          [(DIFF, e + 1, [(k_hi, -1)])]]
    (k0, e0), (k1, _), (k2, _) = sorted(taps, key=lambda t: t[1])
    e = e0 - pi   # y[2j] = x[u] W0 + x[u+1] W1 + x[u+2] W2, y[2j+1] the same from x[u+1]:
    # Winograd's F(2, 3) (interpolation points 0, 1, -1, infinity), with m2 and m3 negated so
    # that only y0's m2 subtracts: m0 = (x[u] - x[u+2]) W0, m1 = (x[u+1] + x[u+2]) (W0 + W1 +
    # W2) / 2, m2 = (x[u+1] - x[u+2]) (W0 - W1 + W2) / 2, m3 = (x[u+1] - x[u+3]) (-W2)
    half = 0.5
    return tiles, 2, [[(DIFF2, e, [(k0, 1)])],
                      [(SUM, e + 1, [(k0, half), (k1, half), (k2, half)])],
                      [(DIFF, e + 1, [(k0, half), (k1, -half), (k2, half)])],
                      [(DIFF2, e + 1, [(k2, -1)])]]


def wino_alignment(geom, out_start):
    """The ``align`` of ``wino_layout`` for a block of ``geom``'s output that starts at
    ``out_start`` (per spatial axis; convt.dask): per axis (3, padded in front), the start
    modulo 2 S and whether each residue of ``geom`` has a Winograd axis there, so that the
    block pairs the outputs (and so sums the terms) as the whole array does."""
    starts = pad3(tuple(out_start), 0)
    return tuple((o % (2 * st), tuple(w for _, _, w, _ in ax))
                 for o, (st, _, ax) in zip(starts, wino_axes(geom)))


@functools.lru_cache(maxsize=64)
def wino_layout(geom, nr, align=None, sets=None):
    """The ``WinoLayout`` of ``geom`` for tile width ``nr``, or None when no phase has a
    Winograd axis, the kernel has more than PACK_KB taps or the grid would exceed
    _MAX_GRID_GROWTH times the data. ``align`` (``wino_alignment``): a dask block's, whose
    phases take the whole array's Winograd axes and tile pairs (and whose grid is not held to
    _MAX_GRID_GROWTH: the block must run what the whole array runs). ``sets``: whether tasks
    run sets of real phases and write channels-first y from their tiles (``_sets``); None:
    ``_use_sets``' rule."""
    plans = wino_axes(geom)
    ostep = tuple(st for st, _, _ in plans)
    units = tuple(u for _, u, _ in plans)
    axes = [ax for _, _, ax in plans]
    if align is not None:   # local residue c is the whole array's (start + c) mod S
        axes = [[(q, taps, flags[(r + c) % st], res) for c, (q, taps, _, res) in enumerate(ax)]
                for ax, st, (r, flags) in zip(axes, ostep, align)]
    pis = [[((r + c) // st) % 2 for c in range(st)]
           for st, (r, _) in zip(ostep, align or ((0, ()),) * 3)]
    if not any(w for ax in axes for _, _, w, _ in ax):
        return None
    kernel = pad3(geom.kernel, 1)
    in3 = pad3(geom.in_shape, 1)
    if prod(kernel) > PACK_KB:
        return None
    n, g = geom.batch, geom.groups
    cg, mg = geom.c_in // g, geom.c_out // g
    panels = -(-mg // nr)
    ldc = (g * panels + 1 - g * panels % 2) * nr
    # pass 1: every phase's per-axis products, and the input range each axis reads
    phases, lo, hi = [], [0, 0, 0], [i - 1 for i in in3]
    for cs in itertools.product(*(range(len(ax)) for ax in axes)):
        pi = tuple(pis[a][c] if axes[a][c][2] else 0 for a, c in enumerate(cs))
        per = [_axis_products(*axes[a][c][:3], pi[a]) for a, c in enumerate(cs)]
        qs = tuple(axes[a][c][0] for a, c in enumerate(cs))
        res = tuple(axes[a][c][3] for a, c in enumerate(cs))
        if n * prod(qs) == 0:
            continue
        # offsets e count steps of U inputs from the phase's input residue r (_axis_plan)
        for a, (j, m, products) in enumerate(per):
            for terms in products:
                for code, e, _ in terms:
                    lo[a] = min(lo[a], units[a] * e + res[a])
                    hi[a] = max(hi[a], units[a] * (m * (j - 1) + e + _REACH[code]) + res[a])
        phases.append((cs, qs, per, pi, res))
    halo = tuple(max(0, -v) for v in lo)
    grid = tuple(max(h + i, top + h + 1) for h, i, top in zip(halo, in3, hi))
    img = prod(grid)
    # (a dask block, align given, plans whatever its whole array planned: its Winograd sums
    # must be the whole array's, and its halo, relative to a small block, may be large)
    if align is None and img > _MAX_GRID_GROWTH * (prod(in3) + prod(pad3(geom.out_shape, 1))):
        return None
    zstr = (grid[1] * grid[2] * geom.c_in, grid[2] * geom.c_in, geom.c_in)
    # pass 2: the tables
    real, prods, toff, tkind, ck, cf, owners = [], [], [], [], [], [], []
    woff = macs = 0
    per_tap = g * panels * cg * nr
    # a product's weight lines by the sums that make them: phases whose products sum the same
    # taps with the same coefficients (a folded stride-1 axis's residues: dilated_s1's 4
    # phases x 16 products) share one copy, packed once (a quarter of the room there)
    shared = {}
    for cs, qs, per, pi, res in phases:
        js = tuple(p[0] for p in per)
        ms = tuple(p[1] for p in per)
        has_taps = all(p[2][0] for p in per)
        first = len(prods)
        if has_taps:
            # products in C order of the Winograd axes' digits (the kernel's slot numbering)
            for combo in itertools.product(*(p[2] for p in per)):
                terms = list(itertools.product(*combo))
                sums = tuple(tuple(itertools.product(*(t[2] for t in term))) for term in terms)
                own = sums not in shared
                if own:
                    shared[sums] = woff
                    owners.append(len(prods))
                prods.append([*js, *ms, len(toff), len(terms), shared[sums]])
                for term in terms:
                    kind = sum(code << (2 * a) for a, (code, _, _) in enumerate(term))
                    pos = sum((u * e + r + h) * st for (_, e, _), u, r, h, st
                              in zip(term, units, res, halo, zstr))
                    toff.append(pos)
                    tkind.append(kind)
                    entries = [((k0 * kernel[1] + k1) * kernel[2] + k2, f0 * f1 * f2)
                               for (k0, f0), (k1, f1), (k2, f2)
                               in itertools.product(*(t[2] for t in term))]
                    ck.append([k for k, _ in entries] + [0] * (WSUM_MAX - len(entries)))
                    cf.append([f for _, f in entries] + [0] * (WSUM_MAX - len(entries)))
                woff += len(terms) * per_tap if own else 0
                macs += n * prod(js) * len(terms) * per_tap
        radix = [len(p[2]) if p[1] == 2 else 1 for p in per]
        real.append([*js, *cs, *ms, first, len(prods) - first, *qs, *pi, *radix])
    # (channels-first y of one position per image has channel stride 1, as its last axis:
    # only a dask block's can, and it stages)
    ncx = geom.data_format == "NCX" and prod(geom.out_shape) > 1
    groups = _sets(real) if ncx and sets is not False else None
    if groups is not None and sets is None:
        groups = groups if _use_sets(nr, _most_products(real, groups), ldc) else None
    in_sets = groups is not None
    groups = groups or [[p] for p in range(len(real))]
    prod_max = _most_products(real, groups) or 1
    # the most weights a task streams (its phases' product taps' lines, in values): light ones
    # take smaller tiles
    ptaps = [sum(prods[q][7] for q in range(r[9], r[9] + r[10])) for r in real]
    weights = max((sum(ptaps[p] for p in ps) for ps in groups), default=0) * per_tap
    light = weights * (64 // nr) <= _LIGHT_WEIGHT_BYTES
    set_values = (_LIGHT_TILE_BYTES if light else _TILE_BYTES) // (64 // nr)
    mb = set_values // (prod_max * ldc) // MR * MR
    mb = max(MR, min(_MAX_MB, mb))
    tasks = []
    for ps in groups:
        r = real[ps[0]]
        rows = n * r[0] * r[1] * r[2]
        size = -(-rows // -(-rows // mb) // MR) * MR
        tasks += [(ps[0], r0, min(size, rows - r0), len(ps)) for r0 in range(0, rows, size)]
    cc = max(1, min(cg, _KC))
    return WinoLayout(real=np.array(real, np.int64).reshape(-1, 20),
                      prods=np.array(prods, np.int64).reshape(-1, 9),
                      owners=np.array(owners, np.int64),
                      toff=np.array(toff, np.int64), tkind=np.array(tkind, np.int64),
                      ck=np.array(ck, np.int64).reshape(-1, WSUM_MAX),
                      cf=np.array(cf, np.float64).reshape(-1, WSUM_MAX),
                      tasks=np.array(tasks, np.int64).reshape(-1, 4),
                      sets=in_sets,
                      halo=halo, grid=grid, zstr=zstr, ostep=ostep,
                      gstep=tuple(u * st for u, st in zip(units, zstr)),
                      diff_axes=max((sum(k >> (2 * a) & 3 != 0 for a in range(3))
                                     for k in tkind), default=0), nr=nr,
                      panels=panels, cc=cc, tb=max(1, min(_MAX_TB, _KC // cc)), mb=mb,
                      prod_max=prod_max, ldc=ldc, packed=woff, macs=macs)


def _sets(real):
    """The real phases (rows of the layout's table) as sets that write channels-first y
    together, or None when some cannot: the residues of the last axis of each (c0, c1), all
    with the same tiles, Winograd axes and tile pairs (pi), so that a tile's outputs and its
    neighbours' fill runs of a line of y (wino_conv's _wino_set_write), at most SET_MAX."""
    groups = []
    for p, r in enumerate(real):
        if groups and real[groups[-1][0]][3:5] == r[3:5]:
            groups[-1].append(p)
        else:
            groups.append([p])
    for ps in groups:
        first = real[ps[0]]
        if len(ps) > SET_MAX or any(real[p][:3] != first[:3] or real[p][6:9] != first[6:9]
                                    or real[p][14:17] != first[14:17] for p in ps):
            return None
    return groups


def _most_products(real, groups):
    """The most products a task of ``groups`` (lists of real phases) holds tiles for."""
    return max((sum(real[p][10] for p in ps) for ps in groups), default=0)


def _use_sets(nr, most, ldc):
    """Whether channels-first y is written by sets (``_sets``) instead of staged channels-last
    and transposed: when a set's tiles (``most`` products, ``_most_products``) fit
    _SET_RULE_BYTES at _MIN_SET_MB rows (NR values take 64 bytes in either dtype)."""
    return most * ldc * _MIN_SET_MB * (64 // nr) <= _SET_RULE_BYTES


def wino_weights(layout, w_iox, groups, workers, isa, buffer=None, one_shot=False):
    """(packed, finite): the products' weights as ``wino_conv`` reads them, from the IOX
    filter in the compute dtype, starting on a 64-byte boundary; finite is False when a
    weight or a sum of weights is not finite (the caller runs another variant then). ``isa``:
    the sums' kernel (``convt._micro.ISA``; both give identical values). ``one_shot``: the
    pack serves one call, and is stored past the caches whatever its size
    (_STREAM_PACK_BYTES)."""
    out, w3 = packing_arrays(layout.packed, w_iox, buffer)
    if w3 is None:
        return out, bool(np.isfinite(w_iox).all())
    ck, cf, at, lines, taps = layout.packing
    line = (w3.shape[0] // groups) * layout.nr        # one tap's lines of a panel
    threads = workers if layout.packed >= _PARALLEL_WINO_PACK_VALUES else 1
    scratch = np.zeros(threads * PACK_KB * layout.panels * layout.nr, w_iox.dtype)
    finite = pack_wino(w3, out, ck, cf.astype(w_iox.dtype, copy=False), at + lines * line,
                       taps * line, scratch, groups, layout.nr, threads, isa,
                       one_shot or layout.packed * out.itemsize >= _STREAM_PACK_BYTES)
    return out, bool(finite)


def late_sums(layout, one_shot, itemsize):
    """Whether a call sums the products' weights inside the kernel (``wino_taps``) instead of
    reading ``wino_weights``' products: one-shot calls whose products would take
    _LATE_SUM_BYTES or more. Products made for one call are written to memory and read back
    once; the kernel sums a panel's product weights in cache once per task, for all its
    rows."""
    return one_shot and layout.packed * itemsize >= _LATE_SUM_BYTES


def wino_taps(layout, w_iox, groups, workers, isa, buffer=None):
    """(taps, finite): the kernel taps as ``wino_conv``'s late sums read them, tap k's lines
    at k * ``tap_values(layout, C_in)`` laid out [G][panel][C_in / G][NR] (``pack_wino`` with
    one product per tap, each the tap itself, stored past the caches as the products are),
    starting on a 64-byte boundary; finite is False when a weight is 2^(emax + 1 - spare) or
    more in magnitude, spare = log2 of the most taps a product's weight sums, so that no sum
    can overflow (the caller runs another variant then, as for ``wino_weights``' non-finite
    sums)."""
    kt = prod(w_iox.shape[2:])
    line = tap_values(layout, w_iox.shape[0])
    out, w3 = packing_arrays(kt * line, w_iox, buffer)
    if w3 is None:
        return out, bool(np.isfinite(w_iox).all())
    spare = layout.sum_bits
    threads = workers if out.size >= _PARALLEL_PACK_VALUES else 1
    stream = out.size * out.itemsize >= _STREAM_PACK_BYTES
    if w3.dtype == np.float32 and w3.shape[1] % 16 == 0:
        return out, bool(pack_taps(w3, out, groups, line, threads, isa, stream, spare))
    # otherwise pack_wino, with one product per tap: the tap itself
    ck = np.zeros((kt, WSUM_MAX), np.int64)
    ck[:, 0] = np.arange(kt)
    cf = np.zeros((kt, WSUM_MAX), w_iox.dtype)
    cf[:, 0] = 1
    udst = np.arange(kt, dtype=np.int64) * line
    ustride = np.full(kt, (w3.shape[0] // groups) * layout.nr, np.int64)
    scratch = np.zeros(threads * PACK_KB * layout.panels * layout.nr, w_iox.dtype)
    finite = pack_wino(w3, out, ck, cf, udst, ustride, scratch, groups, layout.nr, threads,
                       isa, stream, spare)
    return out, bool(finite)


def tap_values(layout, c_in):
    """Values of one kernel tap in ``wino_taps``' layout (G x panels x C_in / G x NR)."""
    return layout.panels * c_in * layout.nr


def run_wino(xa, layout, geom, wp, bias, workers, arena, isa, late=False, out=None):
    """y in ``geom``'s data layout and the dtype of ``wp`` (``out`` when given:
    ``new_output``), or None when the input is not finite or holds a value a difference could
    overflow on (``wino_ready``): the caller runs the micro variant then, and ``out`` is
    untouched. ``late``: ``wp`` holds ``wino_taps``, not the products."""
    ct = wp.dtype
    n, c_in = geom.batch, geom.c_in
    if c_in == 0:
        return bias_filled(geom, bias, ct, out)
    y = new_output(geom, ct, out)
    if y.size == 0:
        return y
    in3 = pad3(geom.in_shape, 1)
    img = prod(layout.grid)
    x = arena.get("wino_x", (n, *layout.grid, c_in), ct,
                  zero_key=("wino", layout.halo, layout.grid, in3, n, c_in))
    h, spare = layout.halo, layout.diff_axes + 1
    if geom.data_format == "NXC":
        x[:, h[0]:h[0] + in3[0], h[1]:h[1] + in3[1], h[2]:h[2] + in3[2]] = \
            xa.reshape(n, *in3, c_in)
        ready = wino_ready(x.reshape(-1), spare, workers)
    else:   # the transpose tests each block it reads: no second pass, no second region
        x5 = np.ascontiguousarray(xa, dtype=ct).reshape(n, c_in, *in3)
        ready = to_padded_nxc(x5, x, np.array(h, np.int64), workers, isa, spare)
    if not ready:
        return None
    x = x.reshape(-1)
    zero = arena.get("zero", (c_in,), ct, zero_key=c_in)
    # Channels-first y without sets is written channels-last first, then transposed: a
    # sub-phase's outputs are 2 * s apart along the last axis, and stores of one value each
    # into y's channel rows (each 64-byte line filled by 4 phases x 2 sub-phases, from
    # different tasks) took about 1.5 ms of dcgan_g3's 10.5 on one thread (perf); staged and
    # transposed, 0.9. A set's task holds all of a line's phases and sub-phases, and writes
    # them in transposed blocks (_MIN_SET_MB).
    staged = geom.data_format == "NCX" and not layout.sets
    yl = arena.get("wino_y", (n, *pad3(geom.out_shape, 1), geom.c_out), ct) if staged else y
    ystr = (np.array([v // yl.itemsize for v in yl.strides], np.int64) if staged
            else element_strides(yl, geom))
    g = geom.groups
    dims = np.array([n, *in3, *layout.ostep, g, c_in // g, geom.c_out // g,
                     layout.panels, c_in, layout.cc, layout.tb, layout.mb, layout.ldc,
                     layout.prod_max, layout.nr, 0, *layout.gstep, img * c_in, layout.sets],
                    np.int64)
    tiles = arena.get("tiles", (workers * (layout.prod_max * layout.ldc + layout.tb * c_in)
                                * layout.mb,), ct)
    pointers = arena.get("pointers",
                         (workers * (layout.mb * (layout.tb + 1) + layout.mb // MR),), np.int64)
    late_args = {}
    if late:
        late_args = dict(ck=layout.ck, cf=layout.cf.astype(ct), rstride=tap_values(layout, c_in),
                         wbuf=arena.get("wino_wb", (workers * layout.tb * layout.cc
                                                    * layout.nr,), ct))
    wino_conv(x, zero, wp, bias, yl.reshape(-1), layout.real, layout.prods, layout.toff,
              layout.tkind, layout.tasks, dims, ystr, tiles, pointers, isa, workers,
              **late_args)
    if staged:   # (N, O, C) -> (N, C, O), as to_padded_nxc's transpose of (N, C', 1, 1, I2)
        o = prod(geom.out_shape)
        to_padded_nxc(yl.reshape(n, o, 1, 1, geom.c_out), y.reshape(n, 1, 1, geom.c_out, o),
                      np.zeros(3, np.int64), workers, isa)
    return y
