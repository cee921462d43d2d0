"""Planning for the "upsample" variant of the direct backend (kernel: convt._kernels._upsample).

Channels-first pure upsampling: the kernel equals the stride on every axis (2 on the last), no
dilation, padding or output padding, so each output position has exactly one tap and y is s
times x along every axis (U-Net's 2 x 2 stride-2 up-convolution). Per geometry: the blocks of
the last input axis (at most 3 vectors each, sizes within one vector of each other; a task
copies one block of its input row at a time, so its scratch is C_in x 3 vectors) and, per
pair of output rows (co, a0, a1) x (b = 0, 1), where in y it starts from its input row's
first output. Per plan, ``packed_up`` lays the IOX filter out as the tile reads it: per tile
of two pairs, per input channel of its group, the four weights (pair, b).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from math import prod

import numpy as np

from .pixel import new_output, pad3
from .storage import as_compute, half_kind
from ..._kernels._upsample import upsample_conv
from .base import DirectKind, Variant
from .micro import micro_rate
from ..._kernels import _cpu, _half

__all__ = ["UpLayout", "up_eligible", "up_macs", "up_layout", "packed_up", "run_up"]

_VECTOR_BYTES = 32   # one AVX2 register
_MAX_VECTORS = 3     # per block: 4 x 3 accumulators fill the 16 registers with x and w


def up_eligible(geom):
    """Whether the upsample kernel computes ``geom``: a CPU with AVX2 and FMA (the kernel's
    only body), channels-first, K == s on every axis (so every phase has one tap), 2 on the
    last, no dilation where K > 1, no padding."""
    return (_cpu.ISA >= 1 and geom.data_format == "NCX" and geom.c_in > 0
            and geom.kernel[-1] == geom.strides[-1] == 2
            and all(k == s and (k == 1 or d == 1)
                    for k, s, d in zip(geom.kernel, geom.strides, geom.dilations))
            and not any(geom.pads_begin) and not any(geom.pads_end)
            and tuple(geom.out_shape) == tuple(i * s for i, s in zip(geom.in_shape,
                                                                      geom.strides)))


def up_macs(geom, itemsize=4):
    """Multiply-adds of the upsample kernel: every output's one tap, the last axis padded to
    whole vectors of ``itemsize``-byte values (float32 by default)."""
    v = _VECTOR_BYTES // itemsize
    w = geom.in_shape[-1]
    return geom.macs * (-(-w // v) * v) // max(w, 1)


@dataclass(frozen=True)
class UpLayout:
    blocks: np.ndarray   # (NB, 2): first input position j, vectors (at most 3)
    tiles: int           # tiles per group: pairs of output rows (co, a0, a1), rounded up
    poff: np.ndarray     # per tile of every group, y offsets of its two rows (-1: padding)
    vector: int          # values per vector


@functools.lru_cache(maxsize=64)
def up_layout(geom, itemsize, vector_bytes=_VECTOR_BYTES):
    """The ``UpLayout`` of ``geom`` (``up_eligible``) for values of ``itemsize`` bytes in
    vectors of ``vector_bytes`` (32: the AVX2 tile; 64: the AVX-512 one)."""
    v = vector_bytes // itemsize
    w = geom.in_shape[-1]
    vectors = -(-w // v)
    nb = -(-vectors // _MAX_VECTORS)
    sizes = [vectors // nb + (i < vectors % nb) for i in range(nb)]
    starts = np.cumsum([0] + sizes[:-1])
    blocks = np.array([(s * v, n) for s, n in zip(starts, sizes)], np.int64).reshape(-1, 2)
    g, mg = geom.groups, geom.c_out // geom.groups
    s3 = pad3(geom.strides, 1)
    o3 = pad3(geom.out_shape, 1)
    # y's element offsets (channels-first, contiguous): channel, output row a0, a1
    oc, o0, o1 = prod(o3), o3[1] * o3[2], o3[2]
    outer = s3[0] * s3[1]
    pairs = mg * outer
    tiles = -(-pairs // 2)
    co = np.arange(g)[:, None] * mg + np.arange(pairs)[None, :] // outer
    a0, a1 = (np.arange(pairs) % outer) // s3[1], np.arange(pairs) % s3[1]
    off = co * oc + a0 * o0 + a1 * o1
    poff = np.full((g, 2 * tiles), -1, np.int64)
    poff[:, :pairs] = off
    return UpLayout(blocks=blocks, tiles=tiles, poff=poff.reshape(-1),
                    vector=v)


def packed_up(layout, geom, w_iox, bias, buffer=None):
    """(weights, bias per tile): the IOX filter ``w_iox`` (C_in, Mg, *K) as the tile reads
    it, (G, T, Cg, 4) C-contiguous, zero rows for a padding pair; and per tile the bias of
    its two pairs' channels (zeros for a padding pair). ``buffer(size, dtype)``: where the
    weights go (a one-shot plan's workspace, ``convt._dispatch.plan.Plan.pack_buffer``),
    default a new array."""
    g, t = geom.groups, layout.tiles
    cg, mg = geom.c_in // g, geom.c_out // g
    pairs = mg * prod(geom.kernel[:-1])
    full = pairs // 2       # tiles of two pairs: a tile's 4 weights per channel are adjacent
    dt = w_iox.dtype
    w = w_iox.reshape(g, cg, 2 * pairs)
    size = g * t * cg * 4
    packed = (np.empty(size, dt) if buffer is None else buffer(size, dt)).reshape(g, t, cg, 4)
    packed[:, full:] = 0
    src, dst = w[:, :, :4 * full].reshape(g, cg, full, 4), packed[:, :full]
    # each channel's 4 weights of a tile moved as one 16-byte value (complex128): numpy's
    # transposing copy of float32 quadruples goes value by value, several times slower
    # (docs/performance.md, "One-shot calls: where the time goes; upsample's pack")
    if dt.itemsize in (4, 8) and full:
        src, dst = src.view(np.complex128), dst.view(np.complex128)
    np.copyto(dst, src.transpose(0, 2, 1, 3))
    if pairs % 2:   # the last tile's odd pair is padding
        packed[:, full, :, 0:2] = w[:, :, 4 * full:]
    outer = pairs // mg
    pb = np.zeros((g, 2 * t), dt)
    pb[:, :pairs] = np.repeat(bias.reshape(g, mg), outer, axis=1)
    return packed.reshape(-1), pb.reshape(-1)


def _zmm_pads_no_more(geom, itemsize):
    """Whether 64-byte vectors pad the last input axis to no more values than 32-byte ones.
    Where they pad more, the zmm tile computes and partly stores the padding, and is slower
    than the ymm tile (vnet3d_up's 24 values a row: 3 ymm, 2 zmm vectors; docs/performance.md,
    "AVX-512 bodies of the memory-bound kernels")."""
    w, v = geom.in_shape[-1], 64 // itemsize
    return -(-w // v) * v <= -(-w // (v // 2)) * (v // 2)


def _call_vector_bytes(geom, itemsize):
    """The vector of a call at the current level (``_cpu.kernel_level``, read per call): 64
    bytes at level 2 where that pads the rows no more, else 32."""
    if _cpu.kernel_level("upsample") >= 2 and _zmm_pads_no_more(geom, itemsize):
        return 64
    return _VECTOR_BYTES


def _scratch_values(geom, vector):
    # per thread: a block's inputs (C_in x 3 vectors), then two rows of outputs (the 16-bit
    # y rounded from there when the conversions run without F16C)
    return (geom.c_in + 4) * _MAX_VECTORS * vector


def run_up(xa, layout, geom, packed, workers, arena, out=None):
    """y (channels-first, the dtype of the packed weights, or ``out`` when given: ``new_output``,
    or a 16-bit array of ``xa``'s dtype) from ``xa`` (channels-first). At level 2
    (``_cpu.kernel_level``, read per call), where that pads the rows no more, the blocks are
    re-cut into 64-byte vectors for the AVX-512 tile (the packed weights do not depend on the
    vector). 16-bit ``xa`` (float32 compute) is widened block by block as the kernel copies
    it, and a 16-bit ``out`` receives each value rounded as the tile stores it: no float32
    copy of x or y."""
    wp, pb = packed
    ct = wp.dtype
    vector_bytes = _call_vector_bytes(geom, ct.itemsize)
    if vector_bytes != _VECTOR_BYTES:
        layout = up_layout(geom, ct.itemsize, vector_bytes)
    y16 = out if out is not None and half_kind(out.dtype) is not None else None
    y = new_output(geom, ct, out) if y16 is None else y16
    if y.size == 0:
        return y
    kind = half_kind(xa.dtype) if ct == np.float32 else None
    if kind is None:
        x, x16 = as_compute(xa, ct, workers, arena).reshape(-1), None
        kind = half_kind(y16.dtype) if y16 is not None else 0
    else:
        x, x16 = wp[:1], np.ascontiguousarray(xa).reshape(-1).view(np.uint16)
    n = geom.batch
    i3, s3, o3 = pad3(geom.in_shape, 1), pad3(geom.strides, 1), pad3(geom.out_shape, 1)
    xs = (geom.c_in * prod(i3), prod(i3), i3[1] * i3[2], i3[2])
    ys = (geom.c_out * prod(o3), s3[0] * o3[1] * o3[2], s3[1] * o3[2])
    dims = np.array([n, i3[0], i3[1], i3[2], geom.c_in, geom.groups, geom.c_in // geom.groups,
                     layout.tiles, layout.vector, len(layout.blocks), *xs, *ys], np.int64)
    scratch = arena.get("up_block", (workers * _scratch_values(geom, layout.vector),), ct)
    yk, y16k = (y.reshape(-1), None) if y16 is None else (scratch[:1], y16.reshape(-1))
    upsample_conv(x, wp, pb, yk, dims, layout.poff, layout.blocks.reshape(-1), scratch,
                  workers, x16, None if y16k is None else y16k.view(np.uint16), kind,
                  _half.level(kind))
    return y


def _run_up(xa, state, geom, plan, out=None):
    layout, packed = state
    with plan.workspace.borrow() as arena:
        return run_up(xa, layout, geom, packed, plan.threads(geom), arena, out)


# Input channels per group it takes (beyond, the input block and a tile's weights leave L1
# and float64 falls behind the GEMM variant: docs/performance.md, "Measurements behind the
# constants").
_UP_CHANNELS = (16, 512)


class Upsample(Variant):
    """K = s (one tap per output), channels-first: x read as it is, y stored interleaved from
    the registers."""

    name = "upsample"
    fallback = "micro"   # the same sums, for a pinned block it cannot compute

    def claim(self, geom, rule):
        if _UP_CHANNELS[0] <= geom.c_in // geom.groups <= _UP_CHANNELS[1] and up_eligible(geom):
            return DirectKind("upsample", "", up_macs(geom), rule.exact)
        return None

    def runs(self, geom):
        return up_eligible(geom)

    def writes_16bit(self, geom):
        return True   # its tiles round each value into a 16-bit out as they store it

    def workspace_bytes(self, geom, itemsize, storage_itemsize=None):
        """A C-contiguous copy of x where x is not one, in its storage dtype (16-bit x is
        widened block by block in the kernel's scratch, never as a whole array), and one
        thread's scratch (each further thread takes as much again); no phase tables."""
        n_in = geom.batch * geom.c_in * prod(geom.in_shape)
        vector = _call_vector_bytes(geom, itemsize) // itemsize
        return n_in * (storage_itemsize or itemsize) + _scratch_values(geom, vector) * itemsize

    def rate(self, geom, kind, c):
        return micro_rate(geom, c)

    def prepare(self, geom, plan, layout):
        # every output has its one tap and no halo: a weight that is not finite reaches
        # exactly the outputs its tap touches, as in the reference
        lay = up_layout(geom, plan.compute_dtype.itemsize)
        return self.name, _run_up, (lay, packed_up(lay, geom, plan.w_iox_compute,
                                                   plan.bias_compute,
                                                   plan.pack_buffer("packed_up")))


VARIANT = Upsample()
