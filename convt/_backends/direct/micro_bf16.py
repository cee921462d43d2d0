"""bfloat16 storage on the micro variant's tiles, by AVX512-BF16 dot products (vdpbf16ps).

Where a CPU has AVX512-BF16 (``convt._kernels._cpu.bf16()``; ``CONVT_ISA=avx2`` turns it
off) and the storage dtype is bfloat16, the dense variants (micro, Winograd, upsample and
the GEMMs) give way to this one (``takes``; the registry asks it, ``storage_kind``, after
convt._backends.direct.micro_amx, which takes them first at ISA level 3): the
micro variant's phases, tasks and tiles (``convt._backends.direct.micro``), with each pair
of input channels multiplied in one step (convt/_kernels/_bf16kernel.h). x stays bfloat16:
its channels-last copy (``to_pairs_nxc``, or x itself when it is channels-last with an even
channel count per group) moves half the float32 path's bytes and nothing converts it; the
weights are packed once per plan as [phase][G][NP][tap][Cg2/2][NR][2] bfloat16 (each
group's channels padded to an even Cg2, output channels to NP panels of NR, with zeros).
The tiles accumulate in float32 and are written out as the float32 path's (one rounding to
bfloat16 at the end, docs/precision.md). Winograd stays off: its input transforms would be
rounded to bfloat16 before the products, which the float32 accumulation promise forbids.

The kernel reads x and the packed weights as 32-bit slots, one pair of channels each: the
pointer tables and blocking of the float32 tiles (convt._kernels._tile) then serve it
unchanged, with channel counts in pairs.
"""
from __future__ import annotations

import dataclasses
import functools
from math import prod

import numpy as np

from ..._kernels import _cpu
from ..._kernels._bf16 import BF16_HW, BF16_ON, BF16_STREAM, BF16_WIDE, to_pairs_nxc
from ..._kernels._micro import NR_F32
from ..._kernels._pack import pack_pairs   # in 8 x 8 blocks (_packkernel.h's convt_pairs)
from ..base import parallel
from .base import MAX_GEMM_WASTE, DirectKind, Variant
from .micro import (KC, MAX_TB, MR, MicroLayout, micro_layout, micro_macs, micro_rate,
                    pack_tables, packing_arrays, tile_call)
from .pixel import VARIANT as PIXEL, bias_filled, new_output, pad3
from .storage import new_output16, streams16

__all__ = ["VARIANT", "PairLayout", "bf16_layout", "bf16_mode", "bf16_nr", "new_output16",
           "packed_pairs", "run_16bit", "run_f32", "run_micro_bf16", "stream_bit"]

# The variants whose geometries the bfloat16 tiles take (the dense ones; depthwise and pixel
# keep theirs: few channels, or weights that are not finite).
_TAKES_FROM = ("micro", "winograd", "upsample", "gemm")
# Output channels per group padded to the 16-wide tile by at most this factor: the dot
# products run about twice the float32 tiles' rate (_BF16_RATE), so up to 2x padding still
# does not lose to the float32 path.
_PAD_OK = 2.0
# The bfloat16 tiles' multiply-adds per second relative to the float32 ones (micro_rate): the
# float32 micro variant's time over this one's on the 8 dense layers of shared/bench, by
# their geometric mean (docs/performance.md, "bfloat16 on AVX512-BF16 dot products").
# vdpbf16ps does 32 multiply-adds a zmm to the FMA's 16.
_BF16_RATE = 1.9
# Packs of at least this many slots (pairs) run on every worker: inside a one-shot call the
# thread team is warm, so 2 workers halve packs far below the float32 packs'
# PARALLEL_PACK_VALUES (docs/performance.md, "bfloat16 one-shot calls: the pair pack").
_PARALLEL_PAIRS = 1 << 14


def _is_bf16(dtype):
    return dtype is not None and np.dtype(dtype).name == "bfloat16"


def _pairs(geom):
    return _pairs_of(geom.c_in // geom.groups)


def _pairs_of(cg):
    """Pairs of input channels of a group of ``cg`` (the last padded with a zero)."""
    return (cg + 1) // 2


class MicroBf16(Variant):
    """The micro variant's tiles on bfloat16 pairs of input channels (vdpbf16ps), for
    bfloat16 storage on CPUs with AVX512-BF16. Not in the rule's list: it takes a geometry
    from the dense variants when the storage is bfloat16 (``takes``)."""

    name = "micro_bf16"
    label = "micro_bf16 (AVX512-BF16 dot products on bfloat16 pairs)"
    fallback = "micro"

    def writes_16bit(self, geom):
        return True   # a bfloat16 out gets each value rounded as it is written

    def takes(self, geom, variant, storage):
        """Whether this variant runs ``geom`` in place of ``variant`` for ``storage``."""
        return _cpu.bf16() and self.fits(geom, variant, storage)

    def fits(self, geom, variant, storage):
        """Whether bfloat16 pair tiles suit ``geom`` in place of ``variant`` for ``storage``
        (bfloat16, a dense variant's geometry, output-channel padding and border work within
        bounds), whatever the CPU."""
        return _is_bf16(storage) and variant in _TAKES_FROM and _fits(geom)

    def kind(self, geom, kind):
        cg = geom.c_in // geom.groups
        macs = micro_macs(geom, bf16_nr(geom)) * 2 * _pairs(geom) // max(cg, 1)
        return DirectKind(self.name, "", macs, kind.useful)

    def rate(self, geom, kind, c):
        return micro_rate(geom, c) * _BF16_RATE

    def extra_moved(self, geom, kind):
        # the channels-last copy of x, in half-size values
        return prod(geom.array_shape("input")) // 2 if geom.data_format == "NCX" else 0

    def pack_seconds(self, geom, kind, c, itemsize, threads):
        # the 16-bit weights read and written once by the pair pack (packed_pairs; not the
        # default's 4 bytes a value of the compute dtype, which prices this pack several
        # times too high: docs/performance.md, "bfloat16 one-shot calls: the pair pack"),
        # on every worker from _PARALLEL_PAIRS slots
        pack = threads if bf16_layout(geom).packed >= _PARALLEL_PAIRS else 1
        return 2 * 2 * geom.weights / c["pairs_bytes_per_s"] / parallel(pack, c)

    def describe(self, kind):
        text = self.label
        if kind.macs > kind.useful:
            text += (f", work (border taps, padding) {kind.macs / max(kind.useful, 1):.2f}x "
                     "the useful")
        return text

    def new_16bit(self, shape, dtype):
        """A new 16-bit result for these tiles' write-out (``new_output16``)."""
        return new_output16(shape, dtype)

    def tiles(self):
        """(layout of a geometry, weight packing, runner) of these tiles: ``prepare``'s
        parts, which the AMX tiles (micro_amx) replace."""
        return bf16_layout, packed_pairs, _run

    def prepare(self, geom, plan, layout):
        # Weights that are not finite run the pixel kernel (micro.py's Micro.prepare: a zero
        # row times NaN or Inf would reach outputs the tap does not touch; for the AMX
        # tiles, the K tail's zeros times the next lines must stay 0 too).
        layout_of, pack, run = self.tiles()
        lay, name = layout_of(geom), f"packed_{self.name}"
        # Kept per plan by what the pack follows: another input shape of the same operator
        # may have other pads (ONNX's output_shape; convt.dask's blocks), so other phases
        # and another order of the taps' lines.
        key = (name, lay.nr, lay.packed, lay.kdst.tobytes(), lay.kstride.tobytes())
        weights, finite = plan.packed(key, lambda p: pack(lay, p.w_iox, geom.groups,
                                                          p.workers, p.pack_buffer(name)))
        plan.packed("finite", lambda p: finite)
        if not finite:
            return PIXEL.prepare(geom, plan, None)
        return self.name, run, (lay, weights)


@functools.lru_cache(maxsize=64)
def _fits(geom):
    # MicroBf16.fits past the dtype and variant: a function of the geometry alone, kept
    # (micro_macs is a visible part of a one-shot call's planning: docs/performance.md,
    # "bfloat16 one-shot calls: the pair pack"). It reads _PAD_OK and
    # MAX_GEMM_WASTE: whoever patches them must call _fits.cache_clear() too.
    if geom.c_in == 0 or geom.c_out == 0:
        return False
    mg = geom.c_out // geom.groups
    nr = bf16_nr(geom)
    if -(-mg // nr) * nr > _PAD_OK * mg:
        return False
    useful = max(geom.macs, 1)
    return micro_macs(geom, nr) <= MAX_GEMM_WASTE * _PAD_OK * useful


def bf16_nr(geom):
    """The tile width: 32 output channels (two zmm a row: half the broadcasts per
    multiply-add of 16) unless that pads a group's output channels more than 16 does."""
    mg = geom.c_out // geom.groups
    return 2 * NR_F32 if -(-mg // (2 * NR_F32)) * 2 == -(-mg // NR_F32) else NR_F32


@dataclasses.dataclass(frozen=True)
class PairLayout(MicroLayout):
    """A ``MicroLayout`` in pairs of input channels, with the pair pack's tables: per flat
    kernel tap, where its line of (group 0, panel 0, pair 0) goes and its panel stride
    (``pack_tables`` for the geometry's pairs and taps, read-only), built once with it."""
    kdst: np.ndarray = None
    kstride: np.ndarray = None


@functools.lru_cache(maxsize=64)
def bf16_layout(geom):
    """``micro_layout(geom, bf16_nr(geom))`` with its channel counts in pairs (a
    ``PairLayout``): per phase, the packed weights' offsets in 32-bit slots (a pair each),
    the chunk and tap blocking for pairs; tile rows an odd number of 64-byte lines apart (as
    micro_layout's); the pair pack's tables."""
    nr = bf16_nr(geom)
    lay = micro_layout(geom, nr)
    cg = geom.c_in // geom.groups
    pairs = _pairs(geom)
    if cg:
        phases = lay.phases.copy()
        phases[:, 8] = phases[:, 8] // cg * pairs
        cc = max(1, min(pairs, KC))
        ldc = geom.groups * lay.panels * nr + NR_F32 if nr > NR_F32 else lay.ldc
        lay = dataclasses.replace(
            lay, phases=phases, cc=cc, tb=max(1, min(MAX_TB, KC // cc)),
            packed=lay.packed // cg * pairs, ldc=ldc,
            tasks=_even_tasks(lay.tasks, lay.phases, geom.batch, lay.mb, lay.batch_inner))
    kdst, kstride = pack_tables(lay, pairs, prod(geom.kernel))
    kdst.flags.writeable = kstride.flags.writeable = False
    fields = {f.name: getattr(lay, f.name) for f in dataclasses.fields(MicroLayout)}
    return PairLayout(**fields, kdst=kdst, kstride=kstride)


def _even_tasks(tasks, phases, n, mb, batch_inner=False):
    """``tasks`` (first phase, phases, first row, rows) with each set's rows cut into as many
    blocks as before, as equal as they come: micro_layout cuts dcgan_g3's 4096 rows into 21
    blocks of 192 and one of 64, so one thread would run 11 full blocks and the other 10 and
    the short one. The rows each output is summed over, and so its bits, do not depend on the
    cut. A set whose last block holds at least half a block's rows (dcgan_g1: 90, 90, 76)
    keeps its cut. Blocks are of whole output lines (``_line``) where the set's phases have
    lines of 12 to ``mb / 4`` rows: dcgan_g3's 4096 then go as 14 x 192 + 8 x 176, and
    every block's runs of 16 rows are whole lines for the channels-first write-out's 16-row
    blocks and its border rows one per line (the kernels take any number of rows:
    _tile.pxd's _rows_outer). Where whole lines would pass ``mb`` rows a block (37-row
    lines: 6 x 37 > 192), the set's blocks are of 12 rows (2 * MR) instead, and where those
    too would (``mb`` not a multiple of 12), that set alone keeps micro_layout's cut."""
    out = []
    for first, count in dict.fromkeys(map(tuple, tasks[:, :2].tolist())):
        rows = max(n * int(np.prod(phases[p, :3])) for p in range(first, first + count))
        mine = tasks[(tasks[:, 0] == first) & (tasks[:, 1] == count)]
        nt = len(mine)
        if 2 * (rows - mine[-1, 2]) >= mine[0, 3]:
            out.extend(map(tuple, mine.tolist()))
            continue
        cut = None
        for unit in dict.fromkeys((_line(phases[first:first + count], mb, batch_inner),
                                   2 * MR)):
            cut = _cut(rows, nt, unit, mb)
            if cut is not None:
                break
        out.extend((first, count, r, size) for r, size in (cut or mine[:, 2:].tolist()))
    return np.array(out, np.int64).reshape(-1, 4)


def _cut(rows, nt, unit, mb):
    """(first row, rows) of ``rows`` cut into at most ``nt`` blocks of whole ``unit`` rows, as
    equal as they come, or None when a block would pass ``mb`` rows."""
    units = -(-rows // unit)
    nt = min(nt, units)
    base, extra, r = units // nt, units % nt, 0
    if (base + (extra > 0)) * unit > mb:
        return None
    cut = []
    for k in range(nt):
        size = (base + (k < extra)) * unit
        cut.append((r, min(size, rows - r)))
        r += size
    return cut


def _line(phases, mb, batch_inner):
    """Rows of a block unit for ``_even_tasks``: a line of the phases' last axis when they
    share one of 2 * MR to ``mb / 4`` rows, in (n, q0, q1, q2) order; else 2 * MR."""
    q = {int(p[2]) for p in phases}
    line = q.pop() if len(q) == 1 else 0
    return line if not batch_inner and 2 * MR <= line <= mb // 4 else 2 * MR


def packed_pairs(layout, w_iox, groups, workers=1, buffer=None):
    """(packed, finite): the bfloat16 IOX weights ``w_iox`` (C_in, Mg, *K) as the bfloat16
    tiles of ``layout`` (their geometry's ``PairLayout``, whose tables it follows) read
    them, per phase [G][NP][tap][Cg2/2][NR][2] (one 32-bit slot per pair, float32 array on a
    64-byte line; ``pack_pairs``), and whether every weight is finite.
    ``buffer(size, dtype)``: where the values come from (``micro.packing_arrays``)."""
    c_in, mg = w_iox.shape[:2]
    out16, w3 = packing_arrays(2 * layout.packed, w_iox, buffer)
    out = out16.view(np.float32) if out16.size % 2 == 0 else np.zeros(1, np.float32)
    if w3 is None:
        w = np.ascontiguousarray(w_iox).view(np.uint16)
        return out, not bool(((w & 0x7F80) == 0x7F80).any())   # exponent all ones
    cg = c_in // groups
    if cg % 2 or mg % layout.nr:   # padding: the slots no weight is written to
        out[:] = 0
    threads = workers if layout.packed >= _PARALLEL_PAIRS else 1
    finite = pack_pairs(w3.view(np.uint16), out16.view(np.uint16), layout.kdst,
                        layout.kstride, groups, layout.nr, threads)
    return out, bool(finite)


def run_micro_bf16(xa, layout, geom, wp, bias, workers, arena, out=None, mode=None,
                   conv=None):
    """y in ``geom``'s data layout for the bfloat16 ``xa`` in that layout: float32, or
    ``out`` when given (``new_output``; a bfloat16 ``out`` gets each float32 sum rounded once
    as the tiles are written out); ``wp`` from ``packed_pairs``, ``bias`` (C_out,) float32.
    ``mode``, ``conv``: the tiles' mode bits (default ``bf16_mode``, streaming the write-out
    where ``storage.streams16``) and ``micro_conv``'s
    build (``tile_call``), for the AMX tiles (convt._backends.direct.micro_amx)."""
    n, c_in, g = geom.batch, geom.c_in, geom.groups
    if c_in == 0:
        return bias_filled(geom, bias, np.float32, out)
    y = new_output(geom, np.float32, out)
    if y.size == 0:
        return y
    cg = c_in // g
    pairs = _pairs_of(cg)
    in3 = pad3(geom.in_shape, 1)
    nxc = geom.data_format == "NXC"
    x16 = np.ascontiguousarray(xa).view(np.uint16).reshape(-1)
    if nxc and 2 * pairs == cg and x16.ctypes.data % 4 == 0:
        x = x16
    else:
        x = arena.get("x_pairs", (n * prod(in3) * g * 2 * pairs,), np.uint16)
        to_pairs_nxc(x16, x, n, prod(in3), g, cg, not nxc, workers, _cpu.ISA)
    zero = arena.get("zero", (g * pairs,), np.float32, zero_key=g * pairs)
    if mode is None:
        mode = bf16_mode(layout.nr, _cpu.bf16()) | stream_bit(y)
    tile_call(x.view(np.float32), zero, wp, bias, y, layout, geom, pairs, workers, arena,
              bf16=mode, conv=conv)
    return y


def stream_bit(y):
    """The tiles' STREAM mode bit for ``y`` (``storage.streams16``), else 0."""
    return BF16_STREAM if streams16(y) else 0


def bf16_mode(nr, hw):
    """micro_conv's ``bf16``: the tiles' mode bits (_bf16kernel.h) for width ``nr``, on
    vdpbf16ps when ``hw``, else in portable C."""
    return BF16_ON | (BF16_HW if hw else 0) | (BF16_WIDE if nr > NR_F32 else 0)


def run_f32(xa, state, geom, plan, out=None):
    """The float32 result of the tiles (``run_micro_bf16``) for a plan prepared by this
    variant (``state``), in ``out`` when given."""
    layout, wp = state
    with plan.workspace.borrow() as arena:
        return run_micro_bf16(xa, layout, geom, wp, plan.bias_compute, plan.threads(geom),
                              arena, out)


def run_16bit(run, xa, state, geom, plan, out=None):
    """A plan runner's bfloat16 result from ``run`` (this module's ``run_f32`` or
    micro_amx's): ``out`` when given (the plan passes a 16-bit one, the variant
    ``writes_16bit``), else ``new_output16``, each value rounded once by the write-out."""
    if out is None:
        out = new_output16(geom.array_shape("output"), plan.dtype)
    return run(xa, state, geom, plan, out)


def _run(xa, state, geom, plan, out=None):
    return run_16bit(run_f32, xa, state, geom, plan, out)


VARIANT = MicroBf16()
