"""Python side of the direct backend's depthwise variant (few channels per group): planning
per geometry, the channels-last weight layout, the kernel call.

The kernels (convt._kernels._depthwise) work on 3 spatial axes; rank-1 and rank-2 geometries
get leading unit axes here. Channels-first inputs stay channels-first (no transpose): the
kernel vectorises along the innermost spatial axis, phase by phase. See that module for the
contract.

The channels-first kernel runs every few-channel layer (depthwise, multipliers 2-3, 1 -> 3,
3 -> 64, 64 -> 3) faster than the pixel kernel; channels-last with 2-3 channels per group is
transposed to channels-first and back, which beats both the pixel kernel and a scalar
channels-last loop (docs/performance.md, "Measurements behind the constants (moved from code
comments, 2026-11-26)", `_MIN_GEMM_CHANNELS`, and "Figures moved out of code comments").
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import prod

import numpy as np

from .base import DirectKind, Variant
from .phases import axes, axis_phases, gemm_counts
from .pixel import bias_filled, new_output, pad3, tables
from .storage import ALIGN, aligned_empty, as_compute, half_kind
from ..._kernels import _cpu, _half
from ..._kernels._depthwise import ROWS_PER_TASK as _ROWS_PER_TASK, depthwise_ncx
from ..._kernels._depthwise_nxc import depthwise_nxc

__all__ = ["VARIANT", "DepthwiseLayout", "depthwise_kind", "depthwise_layout", "inner_phases",
           "inner_split", "run_depthwise"]

# Per-thread phase buffer, in elements: s2 phases of at most QB outputs each. 2048 float32
# (8 KiB) stays in L1 while the phases are accumulated and interleaved into y's row; rows
# longer than that are split into blocks, which also gives threads work on long 1-D signals.
_PHASE_BUFFER = 2048
_MIN_QBLOCK = 64


def _qblock(s2, q):
    """Phase outputs per block of an innermost row of ``q`` phase outputs at stride ``s2``
    (``DepthwiseLayout.qblock``: _PHASE_BUFFER over the phases, at least _MIN_QBLOCK)."""
    return max(1, min(q, max(_MIN_QBLOCK, _PHASE_BUFFER // s2)))


def _channels_last_kernel(geom):
    """Whether ``depthwise_nxc`` runs ``geom``: channels-last with one channel per group in
    and out (else the channels-first kernel, channels-last data transposed around it)."""
    return geom.data_format == "NXC" and geom.c_in == geom.groups == geom.c_out

# Outputs of at least this many bytes are stored past the caches (streamed: no read of y's
# lines for ownership, _dwkernel.h), into a new y on a storage.ALIGN-byte line (np.empty
# gives 16).
# Streaming saves y's read for ownership on large outputs; below 8 MiB it gains nothing and a
# later read of y is slower (docs/performance.md, "depthwise: streamed stores, an honest
# traffic floor").
_STREAM_BYTES = 8 << 20
# Rows of stride 2 with 4 taps a phase (a 4 x 4 stride-2 kernel's: depthwise_bilinear's) run
# _dwkernel.h's own row kernel (CONVT_DW_ROW4; the same bits as the generic row, which the
# tests switch back to with this).
_ROW4 = True


@dataclass(frozen=True)
class DepthwiseLayout:
    tabs: tuple          # per-axis phase tables (O_a, 3), 3 axes (convt._backends.direct.pixel.tables)
    steps: np.ndarray    # (6,) kstep, istep per axis
    phases: np.ndarray   # (s2, 5) Q, q_lo, q_hi, first tap, number of taps (innermost axis)
    ptaps: np.ndarray    # (taps, 2) k2, e of every phase's taps, phase after phase
    qblock: int          # outputs q per task and phase
    rows1: np.ndarray    # (O1, 2) axis 1's output rows phase by phase, continues a run


def inner_phases(s, d, k_len, i_len, pb, o_len):
    """Innermost-axis phases: (s, 5) rows (Q, q_lo, q_hi, first, count) and (taps, 2) (k, e).

    Phase c holds the outputs o = q*s + c, q < Q; tap k of the phase reads input q + e with
    e = (c + pb - k*d) / s, and all of the phase's taps are in range for q_lo <= q < q_hi
    (empty when q_lo >= q_hi).
    """
    rows, taps = [], []
    for c in range(s):
        q = max(0, -(-(o_len - c) // s))
        es = [(k, (c + pb - k * d) // s) for k in range(k_len) if (c + pb - k * d) % s == 0]
        lo = max((max(0, -e) for _, e in es), default=0)
        hi = min((min(q, i_len - e) for _, e in es), default=q)
        rows.append((q, lo, hi, len(taps), len(es)))
        taps += es
    phases = np.array(rows, np.int64).reshape(s, 5)
    ptaps = np.array(taps or [(0, 0)], np.int64).reshape(-1, 2)
    return phases, ptaps


def row_runs(tab, s):
    """Axis 1's output rows o phase by phase (o = q*s + p), and for each whether it continues
    a run: the row before it in that order is o - s with the same taps (first kernel index,
    count) one input row earlier (``tab`` rows: k_first, i_first, count). A run's rows are one
    call of the AVX2 row kernel (its terms built once, then shifted by a row of x)."""
    o_len = tab.shape[0]
    order = np.concatenate([np.arange(p, o_len, s) for p in range(s)]).astype(np.int64)
    t = tab[order]
    cont = np.zeros(o_len, np.int64)
    if o_len > 1:
        cont[1:] = ((order[1:] == order[:-1] + s) & (t[1:, 0] == t[:-1, 0])
                    & (t[1:, 2] == t[:-1, 2]) & (t[1:, 1] == t[:-1, 1] + 1))
    return np.stack([order, cont], axis=1)


def depthwise_layout(geom):
    """The ``DepthwiseLayout`` of ``geom`` (any rank, padded to 3 spatial axes)."""
    # depthwise_ncx walks the innermost axis by phases; only depthwise_nxc reads its table
    tabs, steps = tables(geom, inner=geom.data_format == "NXC")
    s2 = geom.strides[-1]
    phases, ptaps = inner_phases(s2, geom.dilations[-1], geom.kernel[-1], geom.in_shape[-1],
                                 geom.pads_begin[-1], geom.out_shape[-1])
    qblock = _qblock(s2, int(phases[0, 0]))
    s1 = pad3(geom.strides, 1)[1]
    return DepthwiseLayout(tabs=tuple(tabs), steps=steps, phases=phases, ptaps=ptaps,
                           qblock=qblock, rows1=row_runs(tabs[1], s1))


def _pack_nxc(plan):
    # (G, K0, K1, K2, Cg, Mg) -> (K0, K1, K2, G, Cg, Mg): one contiguous channel row per tap
    return np.ascontiguousarray(plan.w_packed.transpose(1, 2, 3, 0, 4, 5))


def run_depthwise(xa, layout, geom, plan, out=None):
    """y in ``geom``'s data layout and the compute dtype (``out`` when given: ``new_output``,
    or a 16-bit array of ``xa``'s dtype: ``writes_16bit``); ``xa`` in that layout too."""
    ct = plan.compute_dtype
    y16 = out if out is not None and half_kind(out.dtype) is not None else None
    if geom.c_in == 0:  # nothing to contract: every position is the bias (rounded as astype)
        return bias_filled(geom, plan.bias_compute, ct, out)
    shape = geom.array_shape("output")
    stream = prod(shape) * (ct if y16 is None else y16.dtype).itemsize >= _STREAM_BYTES
    y = (y16 if y16 is not None else aligned_empty(shape, ct, ALIGN) if stream and out is None
         else new_output(geom, ct, out))
    if y.size == 0:
        return y
    if geom.data_format == "NCX" and ct == np.float32:
        kind = half_kind(xa.dtype)
        if kind is not None and _slab_bytes(geom) > _SLAB_BYTES:
            kind = None   # the rows a task reads would not fit in cache: one widening pass
        if kind is not None or y16 is not None:
            with plan.workspace.borrow() as arena:
                x = xa if kind is not None else as_compute(xa, ct, plan.threads(geom), arena)
                _ncx(x, y, plan.bias_compute, layout, geom, plan, stream)
            return y
    if geom.data_format == "NCX" and xa.dtype == ct and xa.flags.c_contiguous:
        # x read in place: no arena to borrow (the context manager is cold code in a call
        # after a cache eviction)
        _ncx(xa, y, plan.bias_compute, layout, geom, plan, stream)
        return y
    with plan.workspace.borrow() as arena:   # 16-bit: one parallel widening, kept buffer
        return _run(as_compute(xa, ct, plan.threads(geom), arena), y, layout, geom, plan,
                    stream)


# Bytes of a thread's float32 copy of the input rows a task reads from a 16-bit x
# (_depthwise.pyx: per input channel of the group, the rows of axis 0 an output row's taps
# reach, whole); beyond, x is widened in one pass before the kernel instead.
_SLAB_BYTES = 1 << 20


def _slab_bytes(geom):
    i3, s3, d3, k3 = (pad3(v, 1) for v in (geom.in_shape, geom.strides, geom.dilations,
                                           geom.kernel))
    rows0 = min(i3[0], (-(-k3[0] // s3[0]) - 1) * d3[0] + 1)
    return 4 * (geom.c_in // geom.groups) * rows0 * i3[1] * i3[2]


def _run(x, y, layout, geom, plan, stream):
    n, c_in, c_out, ct = geom.batch, geom.c_in, geom.c_out, plan.compute_dtype
    nxc = geom.data_format == "NXC"
    b = plan.bias_compute
    i3, o3 = pad3(geom.in_shape, 1), pad3(geom.out_shape, 1)
    tabs = layout.tabs
    if nxc and not _channels_last_kernel(geom):
        # Channels-last with 2-3 channels per group: strided channel loops do not vectorise;
        # the channels-first kernel plus two transposes is faster (module docstring).
        x = np.ascontiguousarray(np.moveaxis(x, -1, 1))
        yc = np.empty((n, c_out, *geom.out_shape), ct)
        _ncx(x, yc, b, layout, geom, plan)
        y[...] = np.moveaxis(yc, 1, -1)
    elif nxc:
        w = plan.packed("depthwise_nxc", _pack_nxc)
        depthwise_nxc(x.reshape(n, *i3, c_in), w, b, y.reshape(n, *o3, c_out), tabs[0],
                      tabs[1], tabs[2], layout.steps, plan.threads(geom))
    else:
        _ncx(x, y, b, layout, geom, plan, stream)
    return y


def _ncx(x, y, b, layout, geom, plan, stream=False):
    """depthwise_ncx on channels-first ``x`` and ``y``: float32 or float64, or (float32
    compute) 16-bit storage of either, converted by the kernel block by block."""
    i3, o3 = pad3(geom.in_shape, 1), pad3(geom.out_shape, 1)
    xs, ys = (geom.batch, geom.c_in, *i3), (geom.batch, geom.c_out, *o3)
    ct = plan.compute_dtype
    kind = half_kind(x.dtype) if ct == np.float32 else None
    ykind = half_kind(y.dtype) if ct == np.float32 else None
    x16 = y16 = None
    if kind is not None:
        x16, x = np.ascontiguousarray(x).reshape(xs).view(np.uint16), _DUMMY
    if ykind is not None:
        y16, y, kind = y.reshape(ys).view(np.uint16), _DUMMY_OUT, ykind
    _NCX.get(ct, depthwise_ncx)(
        x.reshape(xs) if x16 is None else x, plan.w_packed, b,
        y.reshape(ys) if y16 is None else y, layout.tabs[0], layout.tabs[1], layout.rows1,
        layout.steps, layout.phases, layout.ptaps, layout.qblock, plan.threads(geom), _cpu.ISA,
        stream, _ROW4, x16, y16, 0 if kind is None else kind,
        0 if kind is None else _half.level(kind))


# depthwise_ncx's specialisation per compute dtype, called directly: the fused function's
# dispatch on its arguments' types is cold code a call after a cache eviction paid for
_NCX = {np.dtype(np.float32): depthwise_ncx["float"],
        np.dtype(np.float64): depthwise_ncx["double"]}


# the kernel's x or y where it reads or writes 16-bit storage instead (never touched)
_DUMMY = np.zeros((1, 1, 1, 1, 1), np.float32)
_DUMMY_OUT = np.zeros((1, 1, 1, 1, 1), np.float32)


# Below this many input or output channels per group, the depthwise kernel (memory-bound,
# DESIGN.md) is a candidate, priced against the dense variants; with fewer than 2 on a side,
# or under _THICK_SIDE on both, it always runs (GEMMs that thin run far below the model's
# rate: measured figures in docs/dispatch.md, "Few channels on one side").
MIN_DENSE_CHANNELS = 4
_THICK_SIDE = 16


# Outputs a phase's interior takes in blocks of vectors (_dwkernel.h: 2 or 4 float32 vectors
# of 8 lanes); the rest of a row goes one vector at a time, one chain of dependent fused
# multiply-adds over every tap of the phase, masked outside its interior. The portable loop
# (no AVX2: _depthwise.pyx's _phase) is priced by these outputs.
_BLOCK_LANES = 16


def _portable_split(geom):
    # (fast, slow) outputs x taps of the portable loop, per row term set
    s, d, k_len = geom.strides[-1], geom.dilations[-1], geom.kernel[-1]
    i_len, pb, o_len = geom.in_shape[-1], geom.pads_begin[-1], geom.out_shape[-1]
    phases = [(q, [e for _, e in taps]) for q, taps in axis_phases(s, d, k_len, pb, o_len)]
    spans = [(max(0, -min(es, default=0)), min(q, i_len - max(es, default=0)))
             for q, es in phases]
    if s <= 2:
        common = (max(lo for lo, _ in spans), min(hi for _, hi in spans))
        spans = [common] * s
    fast = slow = 0
    for (q, es), (lo, hi) in zip(phases, spans):
        inner = max(0, hi - lo) // _BLOCK_LANES * _BLOCK_LANES
        fast += inner * len(es)
        slow += (q - inner) * len(es)
    return fast, slow


def _whole_steps(start, n, lanes, lo, hi):
    # of the single vectors at start + j * lanes, j < n: those inside [lo, hi)
    first = max(0, -(-(lo - start) // lanes))
    last = min(n, (hi - lanes - start) // lanes + 1)
    return max(0, last - first)


def _row_lanes(qa, qe, lo, hi, nts, lanes):
    """(lanes x taps of whole vectors, of masked vectors) of one row block as _dwkernel.h's
    CONVT_DW_ROW takes it: phases c < len(qe) of outputs [qa, qe[c]), interiors [lo[c],
    hi[c]), nts[c] taps; from qa one vector at a time up to the common interior [L, H),
    blocks of 4 vectors (then one of 2) inside it, single vectors after it. A single vector
    of phase c is whole when inside its own interior, else masked; every vector computes all
    its lanes, stored or not (a row of 9 outputs is 2 vectors of 8)."""
    first, last = max([qa, *lo]), min([qe[0], *hi, *qe])
    steps = -(-(qe[0] - qa) // lanes)
    whole = 0
    runs = [(qa, steps)]
    if first < last:
        pre = min(steps, -(-(first - qa) // lanes))
        start = qa + pre * lanes
        blocks = max(0, last - start) // (4 * lanes) * 4
        if max(0, last - start) - blocks * lanes >= 2 * lanes:
            blocks += 2
        whole += blocks * lanes * sum(nts)
        after = start + blocks * lanes
        runs = [(qa, pre), (after, max(0, -(-(qe[0] - after) // lanes)))]
    singles = sum(n for _, n in runs)
    masked = 0
    for c, nt in enumerate(nts):
        inside = sum(_whole_steps(q, n, lanes, lo[c], min(hi[c], qe[c])) for q, n in runs)
        whole += lanes * nt * inside
        masked += lanes * nt * (singles - inside)
    return whole, masked


def _block_lanes(ph, cs, qa, qb, lanes):
    return _row_lanes(qa, [min(qa + qb, int(ph[c, 0])) for c in cs],
                      [int(ph[c, 1]) for c in cs], [int(ph[c, 2]) for c in cs],
                      [int(ph[c, 4]) for c in cs], lanes)


def _rows_lanes(ph, cs, qb, lanes):
    # every block of a row of phases cs: blocks between two of the phases' breakpoints
    # (interior bounds, lengths) count alike, so one of each run of them is counted
    q = int(ph[cs[0], 0])
    nb = -(-q // qb)
    marks = {0, nb - 1}
    for c in cs:
        marks |= {min(nb - 1, max(0, int(v) // qb)) for v in ph[c, :3]}
        marks |= {min(nb - 1, max(0, (int(v) - 1) // qb)) for v in ph[c, :3]}
    marks = sorted(marks)
    whole = masked = 0
    for i, j in zip(marks, marks[1:] + [nb]):
        v, m = _block_lanes(ph, cs, i * qb, qb, lanes)
        whole, masked = whole + v, masked + m
        if j > i + 1:
            v, m = _block_lanes(ph, cs, (i + 1) * qb, qb, lanes)
            whole, masked = whole + v * (j - i - 1), masked + m * (j - i - 1)
    return whole, masked


def inner_split(geom, lanes=None):
    """(vector, masked): per output row term set (an output row x input channel x tap row in
    the data), the innermost axis's lanes x taps the channels-first kernel computes in whole
    vectors, and those it computes in masked ones (single vectors outside a phase's
    interior: one chain of dependent fused multiply-adds each), over every block of the row.
    ``lanes``: float32 lanes a vector at the kernel's level (default: this CPU's; None for
    the portable loop, priced by outputs: blocks of 16 in the interior, the rest slow).
    With stride 1-2 the phases are taken in one pass (one vector of each phase at a time),
    from stride 3 on phase by phase as stride-1 rows (_depthwise.pyx's _row_ncx)."""
    if lanes is None:
        level = _cpu.kernel_level("depthwise")
        lanes = 8 << (level - 1) if level > 0 else 0
    if not lanes:
        return _portable_split(geom)
    # the innermost axis's phases and block only (depthwise_layout's tables of the other
    # axes are the size of the output's rows: an estimate allocates nothing that large)
    s2 = geom.strides[-1]
    ph, _ = inner_phases(s2, geom.dilations[-1], geom.kernel[-1], geom.in_shape[-1],
                         geom.pads_begin[-1], geom.out_shape[-1])
    qb = _qblock(s2, int(ph[0, 0]))
    if ph[0, 0] == 0:
        return 0, 0
    rows = [list(range(s2))] if s2 <= 2 else [[c] for c in range(s2) if ph[c, 0] > 0]
    whole = masked = 0
    for cs in rows:
        v, m = _rows_lanes(ph, cs, qb, lanes)
        whole, masked = whole + v, masked + m
    return whole, masked


def depthwise_kind(geom, per_axis=None, exact=None):
    """The ``DirectKind`` of the depthwise kernel on ``geom``. Its row terms: per output row
    (axes 0, 1) and input channel of its group, each tap row in the data (``axis_sums``'
    ``inside``), times the innermost axis's taps (set up per row, ``_row_ncx``). Its
    multiply-adds: those ``inner_split`` counts, per row term set; ``border`` the slow ones
    (the channels-last kernel with one channel per group runs the taps in the data only)."""
    per_axis = axes(geom) if per_axis is None else per_axis
    if exact is None:
        exact = gemm_counts(geom, per_axis)[1]
    (_, _, _, in0, _), (_, _, _, in1, _) = per_axis[:2]
    sets = geom.batch * geom.c_out * (geom.c_in // geom.groups) * in0 * in1
    rows = sets * geom.kernel[-1]
    if _channels_last_kernel(geom):
        return DirectKind("depthwise", "", exact, exact, rows)
    fast, slow = inner_split(geom)
    return DirectKind("depthwise", "", sets * (fast + slow), exact, rows, sets * slow)


@lru_cache(maxsize=256)
def _wide_counts(geom):
    """(multiply-adds, masked ones) of the channels-first kernel in a compute dtype of 8
    bytes: vectors of half the float32 lanes (``depthwise_kind`` counts float32's)."""
    level = _cpu.kernel_level("depthwise")
    if level == 0:
        return None
    whole, masked = inner_split(geom, 4 << (level - 1))
    sets = depthwise_kind(geom).rows // geom.kernel[-1]
    return sets * (whole + masked), sets * masked


# _ROWS_PER_TASK (imported from the kernel): output rows (blocks of an innermost row) per
# task of the channels-first kernel; a call of fewer rows than threads x this runs on fewer
# threads than it is given (1-D layers of few output channels and long rows: one task).


def _row_blocks(geom):
    """(output rows, blocks per innermost row) of the channels-first kernel: its task rows
    are their product (N x C_out x O0 x O1 x blocks)."""
    s2 = geom.strides[-1]
    q = -(-geom.out_shape[-1] // s2)
    block = _qblock(s2, q)
    o0, o1, _ = pad3(geom.out_shape, 1)
    return geom.batch * geom.c_out * o0 * o1, -(-q // block)


def _row_calls(geom):
    """Row kernel calls of the channels-first kernel (_row_ncx): per output row of axis 0 and
    block of an innermost row, with innermost stride 1-2 one per run of axis 1's rows (a
    phase's rows with its full set of taps are one run, each border row one: at most 2T - 1
    runs of a phase with T taps; at least one per task of 64 rows), from stride 3 on one per
    row of axis 1, block and phase with outputs in the block (phase c < s2 has
    ceil((O2 - c) / s2): rows shorter than the stride leave phases empty, never called)."""
    s2, o2 = geom.strides[-1], geom.out_shape[-1]
    q = -(-o2 // s2)
    block = _qblock(s2, q)
    o0, o1, _ = pad3(geom.out_shape, 1)
    if s2 > 2:
        # only the phases with outputs in a block are called: rows shorter than the stride
        # call few of them (docs/performance.md, "Figures moved out of code comments")
        blocks = sum(-(-max(0, -(-(o2 - c) // s2)) // block) for c in range(s2))
        return geom.batch * geom.c_out * o0 * o1 * blocks
    outer = geom.batch * geom.c_out * o0 * -(-q // block)
    s1, d1, k1 = (pad3(v, 1)[1] for v in (geom.strides, geom.dilations, geom.kernel))
    runs = sum(min(q1, max(1, 2 * len(taps) - 1))
               for q1, taps in axis_phases(s1, d1, k1, pad3(geom.pads_begin, 0)[1], o1))
    return outer * max(runs, -(-o1 // 64))


class Depthwise(Variant):
    """Few channels per group (depthwise, channel multipliers): x read and y written once,
    vectorised along the innermost axis, phase by phase."""

    name = "depthwise"

    def may_claim(self, geom):
        g = max(geom.groups, 1)
        return min(geom.c_in // g, geom.c_out // g) < MIN_DENSE_CHANNELS

    def claim(self, geom, rule):
        if not self.may_claim(geom):
            return None
        cg, mg = geom.c_in // geom.groups, geom.c_out // geom.groups
        kind = depthwise_kind(geom, rule.axes, rule.exact)
        if min(cg, mg) < 2 or max(cg, mg) < _THICK_SIDE:
            return kind
        # the dense rule's pick (the pixel kernel included) against this one, by their
        # estimates: with enough channels on one side the dense pick can be the faster
        # (docs/performance.md, "Figures moved out of code comments")
        dense = rule.next()
        return dense if rule.seconds(dense) < rule.seconds(kind) else kind

    def rate(self, geom, kind, c):
        return c["depthwise_macs_per_s"]

    def extra_seconds(self, geom, kind, c, rate, itemsize):
        # The multiply-adds taken one vector at a time (kind.border: a chain of dependent
        # fused multiply-adds, masked, over every tap of the phase) cost depthwise_border
        # times a blocked one: long kernels over short inputs (K >> I, every output a
        # border one) and stride 3-4 rows run far over a taps-in-the-data estimate
        # (docs/dispatch.md, "The random sweep (issue 38)"; docs/performance.md, "Figures
        # moved out of code comments").
        macs, border = kind.macs, kind.border
        wide = (_wide_counts(geom) if itemsize > 4 and not _channels_last_kernel(geom)
                else None)
        if wide is not None:
            # float64's vectors hold half the lanes: its own blocks and masked vectors
            # (a row of 9 outputs is 3 vectors of 4, not 2 of 8)
            macs, border = wide
        return ((macs - kind.macs) / rate + kind.rows * c["depthwise_row_s"]
                + _row_calls(geom) * c["depthwise_call_s"]
                + border * (c["depthwise_border"] - 1) / rate)

    def tasks(self, geom, kind, itemsize=4):
        # the channels-first kernel's tasks of _ROWS_PER_TASK row blocks (fewer row blocks
        # than that are one task, so one thread: docs/dispatch.md, "Main after session 5's
        # merges: fresh seeds 107-110"); the channels-last one (one channel per group)
        # takes a pixel per task
        if _channels_last_kernel(geom):
            return None
        rows, blocks = _row_blocks(geom)
        return -(-rows * blocks // _ROWS_PER_TASK)

    def layout(self, geom, mode):
        return depthwise_layout(geom)

    def writes_16bit(self, geom):
        # the channels-first kernel rounds each run of rows into a 16-bit out (float32
        # compute); channels-last layers still get a float32 y, rounded by guard.deliver
        return geom.data_format == "NCX"

    def new_16bit(self, shape, dtype):
        # aligned where the kernel streams its lines (as a float32 y of that size)
        big = prod(shape) * np.dtype(dtype).itemsize >= _STREAM_BYTES
        return aligned_empty(shape, dtype, ALIGN) if big else np.empty(shape, dtype)

    def prepare(self, geom, plan, layout):
        return self.name, run_depthwise, depthwise_layout(geom) if layout is None else layout

    def table_axes(self, geom):
        # the channels-first kernel never builds the innermost axis's phase table
        return geom.out_shape[:-1] if geom.data_format == "NCX" else geom.out_shape


VARIANT = Depthwise()
