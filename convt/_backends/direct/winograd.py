"""The Winograd variant of the direct backend: product weights, the kernel call, the rule.

Where the micro variant would run with thick channels, along each axis whose phase has two
taps one input apart (or three), pairs of outputs come from three products instead of four,
F(2, 2) (or four instead of six, F(2, 3)): the planning is ``winograd_layout``'s, the kernel
``convt._kernels._micro``'s ``wino_conv``; 1-D channels-first layers of stride S and 2S taps
run the channels-first kernel (``cfwino``).

The products' weights are packed once per prepared plan (``wino_weights``), one copy per
distinct sum: the residues of a folded axis share theirs. A one-shot call whose products
would take _LATE_SUM_BYTES or more packs the kernel taps instead (``wino_taps``) and the
kernel sums each panel's product weights in cache, per task (``late_sums``; the same sums in
the same order, so the same bits).
"""
from __future__ import annotations

from math import prod

import numpy as np

from . import cfwino, micro
from .cfwino import cf_layout as _cf_rule_layout   # (tests patch cfwino.cf_layout)
from .base import DirectKind, Variant
from ..base import parallel
from .micro import packing_arrays
from .pixel import bias_filled, element_strides, new_output, pad3
from .storage import half_kind, padded_nxc
from .winograd_layout import (WinoLayout, input_bits, product_bits, wino_alignment,
                              wino_axes, wino_layout)
from ..._kernels import _cpu
from ..._kernels._layout import to_padded_nxc, to_padded_nxc_narrow
from ..._kernels._micro import MR
from ..._kernels._pack import PACK_KB, WSUM_MAX, pack_taps, pack_wino
from ..._kernels._wino import wino_conv, wino_ready
from ..._kernels._half import pack_taps16

__all__ = ["VARIANT", "WinoLayout", "late_sums", "run_wino", "wino_alignment", "wino_axes",
           "wino_layout", "wino_taps", "wino_weights"]

# Packed weights of at least this size are stored past the caches (pack_wino's stream): a
# one-shot call reads them back from memory anyway (A/B: docs/performance.md, "Measurements
# behind the constants").
_STREAM_PACK_BYTES = 8 << 20
# One-shot calls whose products would take this much sum them in the kernel (late_sums):
# products made for one call would be written to memory and read back once (dcgan_g1,
# hifigan_up1; A/B of 2026-11-22: docs/performance.md, "Measurements behind the constants").
_LATE_SUM_BYTES = 8 << 20
# Products' weights of at least this many values are summed by all the workers (each value
# sums up to 27 taps: more work than the micro variant's pack; docs/performance.md,
# "Measurements behind the constants").
_PARALLEL_WINO_PACK_VALUES = 1 << 15
# Kernel taps (wino_taps) pack like the micro variant's weights: threaded from as many values.
_PARALLEL_PACK_VALUES = micro.PARALLEL_PACK_VALUES


def wino_weights(layout, w_iox, groups, workers, isa, buffer=None, one_shot=False):
    """(packed, finite): the products' weights as ``wino_conv`` reads them, from the IOX
    filter in the compute dtype, starting on a 64-byte boundary; finite is False when a
    weight or a sum of weights is not finite, or a weight is 2^(emax + 1 - spare) or more in
    magnitude, spare = ``sum_bits`` + ``product_bits`` (the caller runs another variant
    then: ``input_bits``' bound on x holds for those products). ``isa``:
    the sums' kernel (``convt._kernels._cpu.ISA``; all levels give identical values).
    ``one_shot``: the pack serves one call, and is stored past the caches whatever its size
    (_STREAM_PACK_BYTES)."""
    out, w3 = packing_arrays(layout.packed, w_iox, buffer)
    if w3 is None:
        return out, bool(np.isfinite(w_iox).all())
    line = (w3.shape[0] // groups) * layout.nr        # one tap's lines of a panel
    ck, cf, udst, ustride = layout.pack_args(line, w_iox.dtype)
    threads = workers if layout.packed >= _PARALLEL_WINO_PACK_VALUES else 1
    scratch = np.zeros(threads * PACK_KB * layout.panels * layout.nr, w_iox.dtype)
    finite = pack_wino(w3, out, ck, cf, udst, ustride, scratch, groups, layout.nr, threads, isa,
                       one_shot or layout.packed * out.itemsize >= _STREAM_PACK_BYTES,
                       layout.sum_bits + product_bits(out.dtype))
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
    at k * ``tap_values(layout, C_in)`` laid out [G][panel][C_in / G][NR], then a gap of NR
    values never read (``pack_wino`` with one product per tap, each the tap itself, stored
    past the caches as the products are),
    starting on a 64-byte boundary; finite is False when a weight is 2^(emax + 1 - spare) or
    more in magnitude, spare = log2 of the most taps a product's weight sums
    (``sum_bits``) + ``product_bits``, so that no sum passes ``product_bits``' bound (the
    caller runs another variant then, as for ``wino_weights``)."""
    kt = prod(w_iox.shape[2:])
    line = tap_values(layout, w_iox.shape[0])
    kind = half_kind(w_iox.dtype)   # 16-bit weights: widened by the pack (pack_taps16)
    out, w3 = packing_arrays(kt * line, w_iox, buffer, np.float32 if kind is not None else None)
    if w3 is None:
        return out, bool(np.isfinite(w_iox).all())
    spare = layout.sum_bits + product_bits(np.float32 if kind is not None else w_iox.dtype)
    threads = workers if out.size >= _PARALLEL_PACK_VALUES else 1
    stream = out.size * out.itemsize >= _STREAM_PACK_BYTES
    if kind is not None:
        return out, bool(pack_taps16(w3.view(np.uint16), out, groups, line, threads, isa,
                                     stream, spare, kind))
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
    """Values from one kernel tap to the next in ``wino_taps``' layout: its G x panels x
    C_in / G x NR values, then a gap of one 64-byte line (NR values)."""
    # The gap: taps a power of two apart (dcgan_g1, hifigan_up1: 512 KiB) put the 16 lines
    # of a block the pack stores at once, and the taps a late sum reads together, in one
    # cache set; one line more spreads them over the sets (docs/performance.md, "One-shot
    # Winograd: the taps one line apart; the IOX weights read directly, measured and not
    # built").
    return (layout.panels * c_in + 1) * layout.nr


def run_wino(xa, layout, geom, wp, bias, workers, arena, isa, late=False, out=None):
    """y in ``geom``'s data layout and the dtype of ``wp`` (``out`` when given:
    ``new_output``), or None when the input is not finite or holds a value a difference could
    overflow on (``wino_ready``): the caller runs the micro variant then, and ``out`` is
    untouched. ``late``: ``wp`` holds ``wino_taps``, not the products. A float16 / bfloat16
    ``out`` of a float32 call, for channels-first y (``Winograd.writes_16bit``): each value
    is rounded into it as the sets write it, or as the transpose of y staged channels-last
    stores it; channels-last y is a new float32 array instead (the plan rounds it)."""
    ct = wp.dtype
    n, c_in = geom.batch, geom.c_in
    # Channels-first y without sets is written channels-last first, then transposed: a
    # sub-phase's outputs are 2 * s apart along the last axis, and stores of one value each
    # into y's channel rows (each 64-byte line filled by 4 phases x 2 sub-phases, from
    # different tasks) cost more than staging and transposing (docs/performance.md, "Figures
    # moved out of code comments"). A set's task holds all of a line's phases and
    # sub-phases, and writes them in transposed blocks (_MIN_SET_MB).
    staged = geom.data_format == "NCX" and not layout.sets
    ykind = half_kind(out.dtype) if out is not None and out.dtype != ct else None
    if ykind is not None and geom.data_format != "NCX":
        out, ykind = None, None
    if c_in == 0:
        return bias_filled(geom, bias, ct, out)
    y = new_output(geom, ct, out)
    if y.size == 0:
        return y
    in3 = pad3(geom.in_shape, 1)
    img = prod(layout.grid)
    x = arena.get("wino_x", (n, *layout.grid, c_in), ct,
                  zero_key=("wino", layout.halo, layout.grid, in3, n, c_in))
    h, spare = layout.halo, input_bits(layout.diff_axes, c_in, ct)
    if geom.data_format == "NXC":
        x[:, h[0]:h[0] + in3[0], h[1]:h[1] + in3[1], h[2]:h[2] + in3[2]] = \
            xa.reshape(n, *in3, c_in)
        ready = wino_ready(x.reshape(-1), spare, workers)
    else:   # the transpose tests each block it reads: no second pass, no second region
        # (16-bit data widened by the same pass)
        ready = padded_nxc(xa.reshape(n, c_in, *in3), x, h, workers, isa, spare)
    if not ready:
        return None
    x = x.reshape(-1)
    zero = arena.get("zero", (c_in,), ct, zero_key=c_in)
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
    extra = {}
    if ykind is not None and not staged:   # the sets round each value as they write it
        extra = dict(y16=yl.reshape(-1).view(np.uint16), ykind=ykind)
    if late:
        extra = dict(ck=layout.ck, cf=layout.cf.astype(ct), rstride=tap_values(layout, c_in),
                     wbuf=arena.get("wino_wb", (workers * layout.tb * layout.cc * layout.nr,),
                                    ct), **extra)
    y32 = yl.reshape(-1) if yl.dtype == ct else zero[:0]   # (16-bit sets: y16 instead)
    wino_conv(x, zero, wp, bias, y32, layout.real, layout.prods, layout.toff,
              layout.tkind, layout.tasks, dims, ystr, tiles, pointers, isa, workers,
              **extra)
    if staged:   # (N, O, C) -> (N, C, O), as to_padded_nxc's transpose of (N, C', 1, 1, I2)
        o = prod(geom.out_shape)
        src, dst = yl.reshape(n, o, 1, 1, geom.c_out), y.reshape(n, 1, 1, geom.c_out, o)
        if ykind is None:
            to_padded_nxc(src, dst, np.zeros(3, np.int64), workers, isa)
        else:   # rounded to 16 bits as the transpose stores it
            to_padded_nxc_narrow(src, dst.view(np.uint16), np.zeros(3, np.int64), workers,
                                 isa, ykind)
    return y


def _run_wino(xa, state, geom, plan, out=None):
    layout, wp, fallback, late = state
    with plan.workspace.borrow() as arena:
        y = run_wino(xa, layout, geom, wp, plan.bias_compute, plan.threads(geom), arena,
                     _cpu.ISA, late, out)
    if y is not None:
        return y
    return micro.run_instead(xa, fallback, geom, plan, out)


# It runs instead of the micro variant when its products cut the multiply-adds to _WINO_GAIN
# or less of the micro variant's and both channel counts per group are at least
# _WINO_MIN_CHANNELS: each product builds its differences (C_in values a row) and each output
# is combined from 2^w products (C_out values), work only a thick contraction hides
# (docs/performance.md, "Measurements behind the constants", `_WINO_GAIN`).
_WINO_GAIN = 0.8
_WINO_MIN_CHANNELS = 64


def _useful_padded(geom, useful, nr):
    """The micro variant's multiply-adds without the taps it skips (off the data): the useful
    ones with the output channels padded to ``nr``."""
    mg = geom.c_out // geom.groups
    return useful * (-(-mg // nr) * nr) // max(mg, 1)


class Winograd(Variant):
    """Winograd's F(2, 2) / F(2, 3) products on the micro variant's tiles."""

    name = "winograd"

    def writes_16bit(self, geom):
        # channels-first y: the channels-first kernel rounds each row as it stores it, the
        # NXC kernel's sets each value as they write it, its staged y the transpose (run_wino);
        # channels-last y is written in float32 (the plan rounds it)
        return geom.data_format == "NCX"

    def claim(self, geom, rule):
        kind = rule.next()
        if kind.variant != "micro" or min(geom.c_in, geom.c_out) < _WINO_MIN_CHANNELS * geom.groups:
            return None
        layout = wino_layout(geom, micro.NR_F32)
        if layout is None or layout.macs > _WINO_GAIN * _useful_padded(geom, kind.useful,
                                                                       micro.NR_F32):
            return None
        # 1-D channels-first layers of stride S and 2S taps run the channels-first kernel (its
        # rules as for float32): no transposes of x and y
        mode = "channels-first" if _cf_rule_layout(geom, 4) is not None else ""
        return DirectKind("winograd", mode, layout.macs, kind.useful)

    def rate(self, geom, kind, c):
        return micro.micro_rate(geom, c)

    def describe(self, kind):
        return (super().describe(kind) + f", Winograd products: "
                f"{kind.macs / max(kind.useful, 1):.2f}x the taps' multiply-adds")

    def block_pin(self, geom, second, out_starts):
        # tiles pair outputs from the block's start: a block takes the whole array's pairs
        # and Winograd axes, so its outputs are the same sums
        return self.name, wino_alignment(geom, out_starts)

    def pack_seconds(self, geom, kind, c, itemsize, threads):
        # A one-shot call with late sums (late_sums) packs the kernel taps (wino_taps: a
        # transpose, read and written once, streamed past the caches) and its tasks sum their
        # phases' product weights from them in the kernel, each product value once per task
        # holding its phase: far less than the default prices (docs/performance.md, "One-shot
        # Winograd: the taps one line apart; the IOX weights read directly, measured and not
        # built"). That is pack_taps' path (float32 compute, 16 output channels a group);
        # float64's taps go through pack_wino, and its one-shot calls run at the default's price
        # (docs/dispatch.md, "The estimates' tail: depthwise tasks and phases, the Winograd
        # one-shot set-up"). Otherwise the products are packed: the default.
        lay = wino_layout(geom, micro.NR_F32) if itemsize == 4 else None
        if (lay is None or kind.mode == "channels-first" or (geom.c_out // geom.groups) % 16
                or not late_sums(lay, True, itemsize)):
            return super().pack_seconds(geom, kind, c, itemsize, threads)
        pack = threads if geom.weights >= _PARALLEL_PACK_VALUES else 1
        tasks = len(lay.tasks)
        held = min(threads, tasks / -(-tasks // threads))   # the busiest thread's share
        sums = lay.packed * int(lay.tasks[:, 3].sum()) / max(len(lay.real), 1)
        return (2 * geom.weights * itemsize / c["wino_taps_bytes_per_s"] / parallel(pack, c)
                + sums * c["wino_late_sum_s"] / parallel(held, c))

    def extra_moved(self, geom, kind):
        # x made channels-last, y written channels-last then transposed
        if geom.data_format == "NCX" and kind.mode != "channels-first":
            return prod(geom.array_shape("input")) + 2 * prod(geom.array_shape("output"))
        return 0

    def prepare(self, geom, plan, layout):
        # The products' weights are sums of taps: a weight that is not finite, or a sum that
        # overflows, runs the micro variant (which then checks its own).
        align = plan.pin[1] if plan.pin is not None and plan.pin[1] else None
        lay = wino_layout(geom, micro.micro_nr(plan.compute_dtype), align)
        # a dask block (align) runs the NXC kernel
        cf = (cfwino.cf_layout(geom, plan.compute_dtype.itemsize)
              if lay is not None and align is None else None)
        if cf is not None:
            prepared = cfwino.prepare(cf, geom, plan)
            return prepared if prepared is not None else micro.VARIANT.prepare(geom, plan, None)
        if lay is not None:
            late = late_sums(lay, plan.one_shot, plan.compute_dtype.itemsize)
            # the late sums' taps pack 16-bit weights as they are (widened by the pack)
            direct16 = (late and half_kind(plan.dtype) is not None
                        and (geom.c_out // geom.groups) % 16 == 0)
            args = (lay, plan.w_iox if direct16 else plan.w_iox_compute, geom.groups,
                    plan.workers, _cpu.ISA, plan.pack_buffer("packed_wino"))
            wp, finite = wino_taps(*args) if late else wino_weights(*args, plan.one_shot)
            if finite:
                return self.name, _run_wino, (lay, wp, [], late)
        return micro.VARIANT.prepare(geom, plan, None)


VARIANT = Winograd()
