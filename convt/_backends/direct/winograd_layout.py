"""Planning for the Winograd variant of the direct backend: its ``WinoLayout`` per geometry.

Per geometry and register-tile width NR: which axes of each phase are Winograd axes (two or
three taps one input apart, after folding a stride-1 dilated axis into residues of adjacent
taps, and enough outputs that tiles of two save work), the products of each phase (3 per
F(2, 2) axis, 4 per F(2, 3) axis; the other axes' taps summed in each), each product's taps
as flat offsets into the zero-haloed channels-last input grid with the input transform they
read per axis (a difference one or two apart, or a sum), the weights of each product tap as
sums of kernel taps times +-1 or +-1/2^k, and the tasks (blocks of tile rows of a phase, or
of a set of phases). The micro variant's tile width, panels, channel chunks and tap blocks
are reused as they are. The algorithm is described in the kernel (convt._kernels._micro's
``wino_conv``).
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from math import prod

import numpy as np

from .micro import KC, MAX_MB, MAX_TB
from .phases import axes3 as _axes3, axis_phases as _axis_phases
from .pixel import pad3
from ..._kernels._micro import MR
from ..._kernels._pack import PACK_KB, WSUM_MAX
from ..._kernels._wino import SET_MAX

__all__ = ["WinoLayout", "input_bits", "product_bits", "wino_alignment", "wino_axes",
           "wino_layout"]

# The grid may hold at most this many pixels per input + output pixel: the halo of a heavily
# cropped or padded layer would otherwise make it, not the data, the size of the call.
_MAX_GRID_GROWTH = 8
# A task's product tiles, all held until combined: 1 MiB (dcgan_g1's A/B: docs/performance.md,
# "Measurements behind the constants").
_TILE_BYTES = 1 << 20
# ... 256 KiB when the weights it streams take at most 1 MiB: more, smaller tasks, whose tiles
# stay in L2 beside the weights (A/B on the light and heavy layers: docs/performance.md,
# "Measurements behind the constants").
_LIGHT_TILE_BYTES = 1 << 18
_LIGHT_WEIGHT_BYTES = 1 << 20
# Sets of real phases (the residues of the last axis, run by one task) write channels-first y
# from their tiles in 8 x 8 transposed blocks, instead of staging it channels-last and
# transposing it, when a set's tiles fit _SET_RULE_BYTES at this many rows a task: with
# fewer rows the sets run slower than the staged path (docs/performance.md, "Measurements
# behind the constants").
_MIN_SET_MB = 96
_SET_RULE_BYTES = 1 << 20   # (the tile budget the rule's A/B ran with)
# Channels a chunk of a product's taps takes when C_in / G is past the micro variant's KC
# (a 512-channel chunk's panel of 16 outputs: 32 KiB, Zen 4's L1).
_WIDE_KC = 2 * KC




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

    def pack_args(self, line, dtype):
        """``pack_wino``'s ck, cf (in ``dtype``), line offsets and panel strides of the
        packed product taps for ``line`` values a tap's lines of a panel (``packing``),
        read-only, made once per layout, line and dtype (not four numpy operations in every
        one-shot call, run cold right after a kernel)."""
        cache = self.__dict__.setdefault("_pack_args", {})   # (frozen: past __setattr__)
        key = (line, np.dtype(dtype).str)
        hit = cache.get(key)
        if hit is None:
            ck, cf, at, lines, taps = self.packing
            hit = (ck, cf.astype(dtype), at + lines * line, taps * line)
            for a in hit[1:]:
                a.flags.writeable = False
            cache[key] = hit
        return hit

    @functools.cached_property
    def sum_bits(self):
        """log2 of the most kernel taps a product's weight sums, rounded up (``wino_taps``'
        bound)."""
        return int(np.count_nonzero(self.cf, axis=1).max(initial=1) - 1).bit_length()


# The bounds that keep every value the Winograd kernels make inside the float range (the
# reference's terms x * w may overflow where these do too; then the micro variant runs,
# which overflows exactly where the taps do). The exponent budget of the float type is
# split: the products' weights stay below 2^(emax + 1 - product_bits) (their packs test it
# on the taps, a product weight summing up to 2^sum_bits of them), and x below
# 2^(emax + 1 - input_bits): an input transform sums up to 2^diff_axes values, a product
# is one of those times one weight, a channel sum adds C_in products, and an output adds
# up to 27 sums (3 per F(2, 3) axis) and the bias. Data past them runs the micro variant:
# for float32, |x| from 2^46 up for 512 channels, or weights from 2^64 / 2^sum_bits up.
_OUTPUT_SUMS = 27


@functools.lru_cache(maxsize=8)
def product_bits(dtype):
    """Spare exponent bits below the float range for the products' weights: half of it."""
    return np.finfo(dtype).maxexp // 2


def input_bits(diff_axes, c_in, dtype):
    """``wino_ready``'s spare bits for x: its values below 2^(emax + 1 - this) keep every
    transform, product and sum of a layer of ``c_in`` input channels in the float range
    when the products' weights are within ``product_bits``."""
    return (product_bits(dtype) + diff_axes + 1
            + (max(c_in, 1) * _OUTPUT_SUMS - 1).bit_length())


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

    Unfolded (U = 1, r = 0): the phases of stride S = s, convt._backends.direct.gemm's. A stride-1
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
    mb = max(MR, min(MAX_MB, mb))
    tasks = []
    for ps in groups:
        r = real[ps[0]]
        rows = n * r[0] * r[1] * r[2]
        size = -(-rows // -(-rows // mb) // MR) * MR
        tasks += [(ps[0], r0, min(size, rows - r0), len(ps)) for r0 in range(0, rows, size)]
    # chunks of KC channels, as the micro variant's; past KC (one tap a block, whose sums run
    # over the channels in order whatever the chunks: the same bits), up to _WIDE_KC, the
    # tile's sums stored and reloaded half as often (docs/performance.md, "hifigan_up1: the
    # plain product's rows copied, wider channel chunks")
    cc = max(1, min(cg, KC if cg <= KC else _WIDE_KC))
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
                      panels=panels, cc=cc, tb=max(1, min(MAX_TB, KC // cc)), mb=mb,
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
