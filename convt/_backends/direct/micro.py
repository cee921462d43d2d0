"""Planning for the micro variant of the direct backend (kernel: convt._kernels._micro).

Per geometry and register-tile width NR (16 float32, 8 float64 values): the phases (per-axis
output counts Q and residues c) with their taps (input offset e per axis, flat kernel index),
the tasks (a block of MB output positions of each phase of a set: see micro_layout), the
blocking (CC channels x TB taps per weight panel), the row order and where each phase's packed
weights start. Per plan, ``packed_weights`` lays the IOX filter out as the kernel reads it:
per phase [G][NP][tap][Cg][NR], the last panel of each group padded with zero weights. See
the kernel module for the algorithm.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from math import prod

import numpy as np

from .pixel import VARIANT as PIXEL, bias_filled, element_strides, new_output, pad3
from .storage import as_compute, half_kind, new_output16, padded_nxc, streams16
from ..._kernels import _cpu
from ..._kernels._micro import MR, NR_F32, NR_F64, micro_conv
from ..._kernels._pack import PACK_KB, pack_micro
from .base import MAX_GEMM_WASTE, DirectKind, Variant
from .phases import axes, axes3 as _axes3, axis_phases as _axis_phases, phase_combos

__all__ = ["VARIANT", "MicroLayout", "micro_layout", "micro_macs", "micro_nr", "micro_rate",
           "pack_tables", "packed_weights", "packing_arrays", "run_micro", "table_entries",
           "tile_call", "tile_depth"]

# The tile blocking (public: the Winograd variant runs on the same tiles).
# Weights of one (tap block x channel chunk) panel: KC rows of NR values, 16 KiB in float32
# and float64, half of a 32 KiB L1 (the task's input rows stream through the other half).
KC = 256
MAX_TB = 64          # taps per block: bounds the pointer table (MB x TB per thread)
_TILE_VALUES = 1 << 15  # tile (MB x ldc) values: 128 KiB of float32, L2-resident
# The tiles of a task's set of phases, all held until written: 512 KiB (in either dtype:
# NR values are 64 bytes); half that left tasks too short to gain over sets of 2 phases
# (docs/performance.md, "Figures moved out of code comments (2026-11-28, session 10)").
_SET_TILE_BYTES = 1 << 19
MIN_MB, MAX_MB = 4 * MR, 32 * MR
# Phases sharing (c0, c1) run in one task only while their packed weights stay in L2 (values,
# 512 KiB of float32): grouped past it, the phases evict each other's panels (hifigan_up1;
# docs/performance.md, "Figures moved out of code comments (2026-11-28, session 10)").
_SET_WEIGHTS = 1 << 17
# Rows run batch innermost (a sub-tile is one position of MR images, which share their border
# taps: the kernel skips those that fall off the data) when no phase has more positions per
# image than this; past it, borders are a small share and (n, q) order keeps runs of rows
# contiguous in y for the channels-first write-out.
_BATCH_INNER_ROWS = 64
PARALLEL_PACK_VALUES = 1 << 19  # smaller weights pack faster than a thread team starts


@dataclass(frozen=True)
class MicroLayout:
    phases: np.ndarray   # (n_phases, 9): Q0, Q1, Q2, c0, c1, c2, first tap, taps, weight offset
    tap_e: np.ndarray    # per tap, input offset e per axis (3 values)
    tap_k: np.ndarray    # per tap, flat kernel index
    tasks: np.ndarray    # (n_tasks, 4): first phase, phases, first row, rows (at most)
    nr: int              # register-tile width (output channels)
    panels: int          # NR-wide panels per group
    cc: int              # input channels per chunk
    tb: int              # taps per block
    mb: int              # rows per task (a multiple of MR)
    set_max: int         # most phases in one task (tiles held per thread)
    batch_inner: bool    # rows run over (q0, q1, q2, n) instead of (n, q0, q1, q2)
    ldc: int             # tile row stride: groups x panels x NR, plus NR when that is an
                         # even number of NR-value (64-byte) lines
    packed: int          # values of the packed weights
    macs: int            # multiply-adds of every tap of every row and the NR padding: an
                         # upper bound (the kernel skips a sub-tile's taps off the data)


def micro_nr(dtype):
    """The register-tile width for the compute dtype."""
    return NR_F64 if np.dtype(dtype) == np.float64 else NR_F32


@functools.lru_cache(maxsize=64)
def micro_layout(geom, nr):
    """The ``MicroLayout`` of ``geom`` for tile width ``nr``."""
    strides, dils, kernel, _, pbs, out_shape = _axes3(geom)
    per_axis = [_axis_phases(*a) for a in zip(strides, dils, kernel, pbs, out_shape)]
    g = geom.groups
    cg, mg = geom.c_in // g, geom.c_out // g
    panels = -(-mg // nr)
    n = geom.batch
    phases, tap_e, tap_k, tasks = [], [], [], []
    woff = macs = 0
    # An odd number of 64-byte lines per tile row: the channels-first write-out reads a
    # column of rows, which with a power-of-two stride fell into 4 of L1's 64 sets
    # (grouped_g8: 256 values per row).
    ldc = (g * panels + 1 - g * panels % 2) * nr
    for cs, qs, taps in phase_combos(per_axis, kernel):
        if n * prod(qs) == 0:
            continue
        phases.append([*qs, *cs, len(tap_k), len(taps), woff])
        for k, es in taps:
            tap_e.extend(es)
            tap_k.append(k)
        woff += len(taps) * g * panels * cg * nr
        macs += n * prod(qs) * len(taps) * g * panels * cg * nr
    # Sets: phases that run in one task, each over the same block of rows, so that lines of
    # y that several of them fill are completed while in cache; while their packed weights
    # stay in L2 (_SET_WEIGHTS) and their tiles, held until the set is written, fit
    # _SET_TILE_BYTES. Channels-first, all the phases: each channel's plane is then written
    # in runs of whole output lines (by (c0, c1), a 3-D stride-2 layer wrote runs of one
    # line in 4, 192 bytes each, and every store missed). Channels-last, the phases sharing
    # (c0, c1): those interleave along the last axis of y.
    per_tap = g * panels * cg * nr
    set_values = _SET_TILE_BYTES // (64 // nr)
    max_set = max(1, set_values // (max(ldc, 1) * MIN_MB))
    keys = [lambda p: tuple(phases[p][3:5]), lambda p: p]   # by (c0, c1), then one each
    if geom.data_format == "NCX":
        keys.insert(0, lambda p: ())                         # first all the phases
    sets = _sets(list(range(len(phases))), keys,
                 lambda ps: sum(phases[p][7] for p in ps) * per_tap <= _SET_WEIGHTS, max_set)
    set_max = max((len(s) for s in sets), default=1)
    mb = min(_TILE_VALUES, set_values // set_max) // max(ldc, 1) // MR * MR
    mb = max(MIN_MB, min(MAX_MB, mb))
    # Tasks: blocks of a set's rows of equal size (at most mb, multiples of MR), with no
    # short last block that streams a whole panel of weights for a few rows.
    for group in sets:
        rows = max(n * prod(phases[p][:3]) for p in group)
        size = -(-rows // -(-rows // mb) // MR) * MR
        tasks += [(group[0], len(group), r, size) for r in range(0, rows, size)]
    cc = max(1, min(cg, KC))
    batch_inner = n >= MR and max((prod(p[:3]) for p in phases), default=0) <= _BATCH_INNER_ROWS
    return MicroLayout(phases=np.array(phases, np.int64).reshape(-1, 9),
                       tap_e=np.array(tap_e, np.int64), tap_k=np.array(tap_k, np.int64),
                       tasks=np.array(tasks, np.int64).reshape(-1, 4), nr=nr, panels=panels,
                       cc=cc, tb=max(1, min(MAX_TB, KC // cc)), mb=mb,
                       set_max=set_max, batch_inner=batch_inner, ldc=ldc, packed=woff,
                       macs=macs)


def _sets(phases, keys, fits, max_set):
    """``phases`` grouped by the first of ``keys`` whose groups pass ``fits`` (a group that
    does not is split by the next key), in runs of at most ``max_set``."""
    out = []
    for _, group in itertools.groupby(phases, key=keys[0]):
        group = list(group)
        if fits(group) or len(keys) == 1:
            out += [group[i:i + max_set] for i in range(0, len(group), max_set)]
        else:
            out += _sets(group, keys[1:], fits, max_set)
    return out


def pack_tables(layout, cg, kt):
    """Per flat kernel tap: where ``pack_micro`` writes its line of (group 0, panel 0, input
    channel 0), -1 for a tap no phase uses, and its panel stride (taps x Cg x NR)."""
    kdst = np.full(kt, -1, np.int64)
    kstride = np.zeros(kt, np.int64)
    first, taps, woff = layout.phases[:, 6], layout.phases[:, 7], layout.phases[:, 8]
    t = np.arange(len(layout.tap_k)) - np.repeat(first, taps)
    kdst[layout.tap_k] = np.repeat(woff, taps) + t * cg * layout.nr
    kstride[layout.tap_k] = np.repeat(taps * cg * layout.nr, taps)
    return kdst, kstride


def packing_arrays(values, w_iox, buffer=None, dtype=None):
    """(out, w3): ``values`` (at least one) uninitialised values of ``dtype`` (default
    ``w_iox``'s) starting on a 64-byte boundary (one cache line), and the IOX weights as
    (C_in, Mg, prod(K)), C-contiguous (None when there is nothing to pack).
    ``buffer(size, dtype)``: where the values come from (a one-shot plan's workspace,
    convt._dispatch.plan), default a new array."""
    dtype = w_iox.dtype if dtype is None else np.dtype(dtype)
    item = dtype.itemsize
    size = max(1, values) + 64 // item
    buf = np.empty(size, dtype) if buffer is None else buffer(size, dtype)
    start = (-buf.ctypes.data % 64) // item
    out = buf[start:start + max(1, values)]
    w3 = np.ascontiguousarray(w_iox).reshape(*w_iox.shape[:2], -1) if values else None
    return out, w3


def packed_weights(layout, w_iox, groups, workers, buffer=None):
    """(packed, finite): the weights as ``micro_conv`` reads them, from the IOX filter
    ``w_iox`` (C_in, Mg, *K) in the compute dtype, the array starting on a 64-byte boundary
    (one cache line); and whether every weight is finite, checked in the same pass (a separate
    ``np.isfinite`` pass reads the weights once more, a large share of a one-shot call)."""
    out, w3 = packing_arrays(layout.packed, w_iox, buffer)
    if w3 is None:
        return out, bool(np.isfinite(w_iox).all())
    threads = workers if layout.packed >= PARALLEL_PACK_VALUES else 1
    kdst, kstride = pack_tables(layout, w3.shape[0] // groups, w3.shape[2])
    scratch = np.zeros(threads * PACK_KB * layout.panels * layout.nr, w_iox.dtype)
    finite = pack_micro(w3, out, kdst, kstride, scratch, groups, layout.nr, threads,
                        _cpu.ISA)
    return out, bool(finite)


def run_micro(xa, layout, geom, wp, bias, workers, arena, out=None):
    """y in ``geom``'s data layout and the dtype of ``wp`` (``out`` when given:
    ``new_output``; a float16 or bfloat16 ``out`` of float32 weights gets each value rounded
    once as the kernel stores it); ``xa`` in that layout too; ``bias`` (C_out,) contiguous in
    that dtype (zeros for none)."""
    ct = wp.dtype
    n, c_in = geom.batch, geom.c_in
    nxc = geom.data_format == "NXC"
    if c_in == 0:  # nothing to contract: every position is the bias
        return bias_filled(geom, bias, ct, out)
    y = new_output(geom, ct, out)
    if y.size == 0:
        return y
    in3 = pad3(geom.in_shape, 1)
    if nxc:   # 16-bit data widened in one parallel pass
        x = as_compute(xa, ct, workers, arena)
    else:     # ... or by the transpose as it reads
        x = arena.get("x_nxc", (n, *in3, c_in), ct)
        padded_nxc(xa.reshape(n, c_in, *in3), x, (0, 0, 0), workers, _cpu.ISA)
    zero = arena.get("zero", (c_in,), ct, zero_key=c_in)
    tile_call(x.reshape(-1), zero, wp, bias, y, layout, geom, c_in // geom.groups, workers,
              arena, stream=int(streams16(y)))
    return y


def tile_call(x, zero, wp, bias, y, layout, geom, cg, workers, arena, bf16=0, conv=None,
              stream=0):
    """``micro_conv`` over ``layout``'s tiles, for the micro variant and the bfloat16 ones
    (``bf16``: micro_conv's mode bits): ``x`` flat channels-last with ``cg`` channel slots per
    group (bfloat16 pairs with ``bf16``), ``zero`` a row of zero slots, ``wp`` the packed
    weights in the tiles' dtype; writes ``y`` in that dtype or, from float32 tiles, 16-bit
    (each value rounded once as it is stored). ``conv``: another build of ``micro_conv``
    (the AMX emulation's, convt._kernels._amxemu). ``stream``: a 16-bit ``y``'s whole aligned
    lines streamed past the caches (micro_conv's; ``bf16``'s STREAM bit does the same)."""
    g = geom.groups
    dims = np.array([geom.batch, *pad3(geom.in_shape, 1), *pad3(geom.strides, 1), g, cg,
                     geom.c_out // g, layout.panels, g * cg, layout.cc, layout.tb, layout.mb,
                     layout.ldc, layout.set_max, layout.nr, layout.batch_inner], np.int64)
    tiles = arena.get("tiles", (workers * layout.set_max * layout.mb * layout.ldc,), wp.dtype)
    # 8-byte slots: a pointer fits one on every platform
    pointers = arena.get(
        "pointers", (workers * (layout.mb * (layout.tb + layout.set_max) + layout.mb // MR),),
        np.int64)
    kind = half_kind(y.dtype) if wp.dtype == np.float32 else None
    y16 = {} if kind is None else dict(y16=y.reshape(-1).view(np.uint16), kind=kind)
    conv = micro_conv if conv is None else conv
    conv(x, zero, wp, bias, y.reshape(-1) if kind is None else zero, layout.phases,
         layout.tap_e, layout.tasks, dims, element_strides(y, geom), tiles, pointers,
         _cpu.ISA, workers, bf16=bf16, stream=stream, **y16)


# The register tiles' speed at each ISA level (convt._kernels._cpu) relative to the AVX2 one
# the constants were fitted on. AVX-512's 12 x 16 zmm tiles run at the 6 x 16 ymm ones' rate
# on Zen 4, which splits a zmm FMA into two ymm halves, so the peak is the same
# (docs/performance.md, "Figures moved out of code comments (2026-11-28, session 10)"). Not
# measured on a CPU with two full-width FMA units (Intel Xeon), where it should be higher.
_LEVEL_RATE = {1: 1.0, 2: 1.0, 3: 1.0}


def micro_rate(geom, c, depth=None):
    """Multiply-adds per second of one float32 thread of the register tiles (the micro,
    Winograd and upsample variants) at the process's ISA level: half the rate at
    ``micro_channel_half`` input channels per group, or (the micro variant) at
    ``micro_depth_half`` values of ``depth``, the sum a tile runs per visit (``tile_depth``)."""
    cg = geom.c_in // geom.groups
    share = (cg / (cg + c["micro_channel_half"]) if depth is None
             else depth / (depth + c["micro_depth_half"]))
    return c["micro_macs_per_s"] * _LEVEL_RATE.get(_cpu.ISA, 1.0) * share


def tile_depth(geom, kind):
    """Products a register tile of the micro variant sums per visit of its output positions:
    the input channels of a group times the phase's taps (the kernel runs taps x channels as
    one reduction, KC rows of a weight panel at a time), on average over the positions.
    Priced by input channels alone, layers with 2-6 channels a group and long kernels were
    priced far too high, while 3 x 3 layers with as few were not (docs/dispatch.md, "The
    direct backend's estimates (seeds 71-76, 93-95)")."""
    g = max(geom.groups, 1)
    cg, mgp = geom.c_in // g, -(-(geom.c_out // g) // NR_F32) * NR_F32
    positions = geom.batch * prod(geom.out_shape) * g * cg * mgp
    return max(cg * kind.macs / max(positions, 1), 1e-3)   # > 0: rates stay finite


def table_entries(geom, kind):
    """Entries of the pointer tables the micro variant's tiles build (``_tile.pxd``'s
    ``_pointers`` and ``_tap_masks``): one per output position of a phase and tap of the
    phase, shared by the groups, panels and channels (each points at a pixel's channels),
    ``kind.macs`` (``micro_macs`` at the float32 tile width) over those.
    Their set-up (index arithmetic, a bounds test and a store an entry, then the sub-tiles'
    tap masks) costs the same with 2 channels as with 200: without it, layers of 2-6 input
    channels a group over long kernels were priced far too low (docs/dispatch.md, "The
    micro variant's pointer tables and tasks (seeds 101-106, 120)")."""
    g = max(geom.groups, 1)
    per_entry = g * (geom.c_in // g) * (-(-(geom.c_out // g) // NR_F32) * NR_F32)
    return kind.macs // max(per_entry, 1)


def micro_macs(geom, nr=NR_F32, per_axis=None):
    """Multiply-adds of the micro variant at tile width ``nr`` (phase output positions x
    taps x input channels x output channels padded to ``nr``, per group): the ``macs`` of
    ``micro_layout(geom, nr)``, computed per axis."""
    per_axis = axes(geom) if per_axis is None else per_axis
    g = geom.groups
    mgp = -(-(geom.c_out // g) // nr) * nr
    return geom.batch * prod(a[2] for a in per_axis) * g * (geom.c_in // g) * mgp


def _run_micro(xa, state, geom, plan, out=None):
    layout, wp = state
    with plan.workspace.borrow() as arena:
        return run_micro(xa, layout, geom, wp, plan.bias_compute, plan.threads(geom), arena,
                         out)


def run_instead(xa, fallback, geom, plan, out):
    """The call on this variant, prepared once into the list ``fallback``: for the Winograd
    kernels, on an input with a NaN, Inf or huge value, which their products would not
    propagate as the taps do (docs/reliability.md)."""
    if not fallback:
        fallback.append(VARIANT.prepare(geom, plan, None))
    _, runner, state = fallback[0]
    return runner(xa, state, geom, plan, out)


# Output channels per group padded to the 16-wide tile by at most this factor: past it the
# padding's wasted multiply-adds lose to grid-mode GEMMs (fcn32s_k64's 21 channels padded
# to 32).
_MICRO_PAD_OK = 1.25


class Micro(Variant):
    """Register tiles (6 x 16 float32, 6 x 8 float64; with AVX-512 pairs of them as 12 x 16
    and 12 x 8) over an indirection table of input pixels, on CPUs with AVX2 + FMA. It does
    not take pure upsampling that grid-mode GEMMs run as one GEMM (every phase at most one
    tap), nor layers whose tile padding or taps off the data pass the waste bounds."""

    name = "micro"

    def writes_16bit(self, geom):
        return True   # its tiles round each value into a 16-bit out as they store it

    def new_16bit(self, shape, dtype):
        """A new 16-bit result: on a cache line where the write-out may stream it
        (``storage.new_output16``, as the bfloat16 tiles')."""
        return new_output16(shape, dtype)

    def claim(self, geom, rule):
        if _cpu.ISA < 1:   # the rule and the kernels read the one decision
            return None
        mg = geom.c_out // geom.groups
        one_tap = all(a[4] <= 1 for a in rule.axes)
        if -(-mg // NR_F32) * NR_F32 > _MICRO_PAD_OK * mg or (one_tap and rule.grid_ok):
            return None
        macs = micro_macs(geom, per_axis=rule.axes)
        if macs > MAX_GEMM_WASTE * _MICRO_PAD_OK * max(rule.exact, 1):
            return None
        return DirectKind("micro", "", macs, rule.exact)

    def rate(self, geom, kind, c):
        return micro_rate(geom, c, tile_depth(geom, kind))

    def extra_seconds(self, geom, kind, c, rate, itemsize):
        # the call's set-up besides the tiles (the task plan), which the smallest layers
        # show (docs/dispatch.md, "One-shot set-up and the GEMM's per-call cost (seeds 51-53)");
        # and the pointer table, micro_tap_s an entry (table_entries)
        return c["micro_call_s"] + c["micro_tap_s"] * table_entries(geom, kind)

    def tasks(self, geom, kind, itemsize=4):
        # the plan's for the dtype: float64's 8-value tiles may cut a set's rows
        # differently (5 of seeds 101-106's 84 micro layers: 3d_n2_c18-172_i3x3x3_k3x5x2_
        # s2x2x2_f64 is 1 task in float32, 3 in float64)
        return len(micro_layout(geom, NR_F64 if itemsize == 8 else NR_F32).tasks)

    def describe(self, kind):
        text = super().describe(kind)
        if kind.macs > kind.useful:
            text += (f", work (border taps, tile padding) {kind.macs / max(kind.useful, 1):.2f}x "
                     "the useful")
        return text

    def extra_moved(self, geom, kind):
        # x is made channels-last first
        return prod(geom.array_shape("input")) if geom.data_format == "NCX" else 0

    def prepare(self, geom, plan, layout):
        # The tiles also multiply each tap's weights by zeros (rows off the data): 0 * NaN
        # or 0 * Inf would reach outputs the tap does not touch, so weights that are not
        # finite (checked in the packing pass) run the pixel kernel.
        lay = micro_layout(geom, micro_nr(plan.compute_dtype))
        weights, finite = packed_weights(lay, plan.w_iox_compute, geom.groups, plan.workers,
                                         plan.pack_buffer("packed_micro"))
        plan.packed("finite", lambda p: finite)
        if not finite:
            return PIXEL.prepare(geom, plan, None)
        return self.name, _run_micro, (lay, weights)


VARIANT = Micro()
