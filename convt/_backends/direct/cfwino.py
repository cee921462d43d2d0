"""Planning for the Winograd variant's channels-first kernel (convt._kernels._cfwino): 1-D
channels-first layers of stride S whose S phases each have two taps one input apart (2S taps:
HiFi-GAN's and MelGAN's up-sampling layers), every phase with F(2, 2) tiles.

The kernel computes the NXC Winograd kernel's products and sums on x as it is, so the two give
the same bits; it saves the transposes of x and y (docs/performance.md, "Channels-first
Winograd"). Per geometry (``cf_layout``): each phase's taps and input offset, the tiles per
block (3 vectors) and the blocks per image. Per plan (``cf_weights``): the products' weights,
(G, QD, S, 3, Cg, 4) (blocks of four output channels, the last padded with zeros; per phase
W_lo, W_lo + W_hi, -W_hi as pack_wino makes them).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .pixel import new_output
from .storage import as_compute, half_kind
from ..._kernels import _cpu, _half
from ..._kernels._cfwino import cf_pack, cfwino_conv
from . import micro as _micro
from .winograd_layout import input_bits, product_bits, wino_axes

__all__ = ["CfLayout", "cf_layout", "cf_weights", "prepare", "run_cf"]

_VECTOR_BYTES = 32   # one AVX2 register
_VECTORS = 3         # tiles per block: 3 vectors (4 rows x 3 accumulators, _cwkernel.h)
_ROWS = 4            # output channels per register tile
# An input transform here sums two values (winograd_layout's diff_axes: 1); the bounds on x
# and on the products' weights are winograd_layout's input_bits and product_bits.
DIFF_AXES = 1
# Input channels at most: a block's transforms take 6 x 3 vectors per channel of the thread's
# scratch (1.7 MiB of float32 at 2048, past L2's share for more; and the bound keeps the
# workspace from growing with C_in past what the NXC kernel needs).
_MAX_CHANNELS = 2048
# Strides at most: a block's product tiles take 3 S x 4 x 3 vectors (18 KiB of float32 at 16).
_MAX_STRIDE = 16
# The products' weights at most (3 S x C_in x 4 ceil(Mg / 4) values): every block streams
# all of them from L3 or memory for its 3 vectors of tiles, where the NXC kernel's tasks reuse
# a phase's weights over 128-192 tile rows: up to about 6 MB this kernel is the faster, at
# HiFi-GAN's 12.6 MB a tie and past it slower (in-process A/B against the NXC kernel,
# docs/scripts/cf_strides.py; docs/performance.md, "Channels-first Winograd").
_MAX_WEIGHT_BYTES = 8 << 20


@dataclass(frozen=True)
class CfLayout:
    e: tuple        # per phase c < S: e_c, W_lo's input offset (tile j reads x[2j + e_c ...])
    k_lo: tuple     # per phase: W_lo's kernel tap ...
    k_hi: tuple     # ... and W_hi's (one input further)
    tile: int       # tiles per block (3 vectors: the register tile's width)
    blocks: int     # blocks per image
    quads: int      # blocks of _ROWS output channels per group
    seg: int        # values of the input segment a block reads per channel (even)

    @property
    def stride(self):
        return len(self.e)


def cf_layout(geom, itemsize):
    """The ``CfLayout`` of ``geom`` for values of ``itemsize`` bytes, or None when the kernel
    does not compute it: it needs the AVX2 + FMA path (``convt._kernels._cpu.ISA`` at least
    1, read on each call), channels-first data, one spatial axis of stride 2 to _MAX_STRIDE
    (no folding) whose phases all get F(2, 2) tiles (``wino_axes``: two taps one input
    apart, enough outputs) and read x from offsets at most one apart (true of every 2S-tap
    layer: phase c's lower tap reads x[q + floor((c + pad) / S) - 1]), 1 to _MAX_CHANNELS
    input channels and at most _MAX_WEIGHT_BYTES of product weights."""
    if _cpu.ISA < 1:
        return None
    return _cf_layout(geom, itemsize)


@functools.lru_cache(maxsize=64)
def _cf_layout(geom, itemsize):
    if (geom.data_format != "NCX" or geom.ndim != 1 or geom.c_in == 0
            or geom.c_in > _MAX_CHANNELS):
        return None
    step, unit, phases = wino_axes(geom)[2]
    if not 2 <= step <= _MAX_STRIDE or unit != 1 or len(phases) != step:
        return None
    quads = -(-(geom.c_out // geom.groups) // _ROWS)
    if 3 * step * geom.c_in * quads * _ROWS * itemsize > _MAX_WEIGHT_BYTES:
        return None
    e, k_lo, k_hi = [], [], []
    for q, taps, wino, _ in phases:
        if not wino or len(taps) != 2:
            return None
        (klo, elo), (khi, _) = sorted(taps, key=lambda t: t[1])
        e.append(elo)
        k_lo.append(klo)
        k_hi.append(khi)
    if max(e) - min(e) > 1:
        return None
    tile = _VECTORS * (_VECTOR_BYTES // itemsize)
    tiles = -(-geom.out_shape[0] // (2 * step))
    return CfLayout(e=tuple(e), k_lo=tuple(k_lo), k_hi=tuple(k_hi), tile=tile,
                    blocks=-(-tiles // tile), quads=quads, seg=2 * (tile + 2))


def cf_weights(layout, geom, w_iox):
    """(packed, finite): the products' weights from the IOX filter ``w_iox`` (C_in, Mg, 2S)
    in the compute dtype, (G, QD, S, 3, Cg, 4) C-contiguous: per phase W_lo, W_lo + W_hi and
    -W_hi (the sums pack_wino makes: a sum of two is the same whichever comes first), rows
    past Mg zero (``cf_pack``); finite is False when one of them is not below
    ``product_bits``' bound (the caller runs the micro variant then)."""
    g, s = geom.groups, layout.stride
    w3 = np.ascontiguousarray(w_iox).reshape(w_iox.shape[0], -1, 2 * s)
    out = np.empty(g * layout.quads * 3 * s * (geom.c_in // g) * _ROWS, w_iox.dtype)
    taps = np.array([k for pair in zip(layout.k_lo, layout.k_hi) for k in pair], np.int64)
    return out, bool(cf_pack(w3, out, taps, g, product_bits(out.dtype)))


def run_cf(xa, layout, geom, wp, bias, workers, arena, out=None):
    """y (channels-first, the dtype of ``wp``; ``out`` when given: ``new_output``, or a
    float16 / bfloat16 ``out`` of a float32 call, each value rounded into it as it is
    stored) from channels-first ``xa``, or None when a value of x is past the Winograd bound
    (``out`` is then partly written: the caller runs the micro variant, which writes all of
    it)."""
    ct = wp.dtype
    ykind = half_kind(out.dtype) if out is not None and out.dtype != ct else None
    y = out if ykind is not None else new_output(geom, ct, out)   # (no layer without C_in)
    if y.size == 0:
        return y
    kind = half_kind(xa.dtype) if ct == np.float32 else None
    if kind is None or (kind == 0 and not _half.F16C):
        x, x16 = as_compute(xa, ct, workers, arena).reshape(-1), None
    else:   # 16-bit: each block's segments widened as the kernel copies them, no pass of x
        x, x16 = wp[:1], np.ascontiguousarray(xa).reshape(-1).view(np.uint16)
    n, c_in, g, s = geom.batch, geom.c_in, geom.groups, layout.stride
    e0 = min(layout.e)
    # the phases read their tiles' inputs from offset e0 (row set 0) or e0 + 1 (row set 1)
    dims = np.array([n, c_in, geom.in_shape[0], geom.out_shape[0], g, c_in // g,
                     geom.c_out // g, layout.quads, layout.tile, layout.blocks, e0,
                     0, 1, input_bits(DIFF_AXES, c_in, ct), layout.seg, s, *(e - e0 for e in layout.e)], np.int64)
    # 16-bit y: a row's 2 S J outputs a block combined in float32 at the thread's scratch end
    per = (2 * layout.seg + 6 * c_in * layout.tile + 3 * s * _ROWS * layout.tile
           + (0 if ykind is None else 2 * s * layout.tile))
    scratch = arena.get("cf_block", (workers * per,), ct)
    y16 = {} if ykind is None else dict(y16=y.reshape(-1).view(np.uint16), ykind=ykind)
    if not cfwino_conv(x, wp, bias, y.reshape(-1) if ykind is None else scratch[:0], dims,
                       scratch, workers, x16, 0 if kind is None else kind, **y16):
        return None
    return y


def prepare(layout, geom, plan):
    """The Winograd variant's ``(name, runner, state)`` on this kernel, or None when a
    product's weight is not finite (the caller runs the micro variant then)."""
    wp, finite = cf_weights(layout, geom, plan.w_iox_compute)
    return ("winograd", _run_cf, (layout, wp, [])) if finite else None


def _run_cf(xa, state, geom, plan, out=None):
    layout, wp, fallback = state
    with plan.workspace.borrow() as arena:
        y = run_cf(xa, layout, geom, wp, plan.bias_compute, plan.threads(geom), arena, out)
    return y if y is not None else _micro.run_instead(xa, fallback, geom, plan, out)
