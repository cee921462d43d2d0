"""Python side of the direct backend's pixel variant: phase tables, weight packing (shared with
the GEMM variant, convt._backends.direct.gemm), the kernel call.

The compiled kernel (convt._kernels._direct.direct_nxc) works channels-last on 3 spatial axes;
rank-1 and rank-2 geometries get leading unit axes here. See that module for the contract.
"""
from __future__ import annotations

from math import gcd, prod

import numpy as np

from .base import DirectKind, Variant
from .phases import pad3
from .storage import as_compute, padded_nxc
from ..._kernels._direct import direct_nxc
from ..._kernels._layout import iox_to_kio

__all__ = ["VARIANT", "axis_taps", "bias_filled", "element_strides", "pack_weights", "pad3",
           "run_direct", "tables"]


def axis_taps(s, d, k_len, i_len, pb, o_len):
    """Phase table of one axis: (O, 3) int64 rows (k_first, i_first, count) and the steps.

    Output o receives tap k from input i iff i*s + k*d = o + pb. With g = gcd(s, d) the
    solutions k form the progression k0(t mod s) + j*(s/g), where t = o + pb (DESIGN.md, phase
    decomposition), and i = (t - k*d)/s falls by d/g per step. The taps in range are those with
    max(0, ceil((t - (I-1)*s)/d)) <= k <= min(K-1, floor(t/d)).
    """
    g = gcd(s, d)
    kstep, istep = s // g, d // g
    k0 = np.full(s, -1, np.int64)                 # smallest k >= 0 of each residue, or -1
    for k in range(kstep - 1, -1, -1):
        k0[(k * d) % s] = k
    t = np.arange(o_len, dtype=np.int64) + pb
    base = k0[t % s]
    lo = np.maximum(0, -((-(t - (i_len - 1) * s)) // d))   # ceil division
    hi = np.minimum(k_len - 1, t // d)
    first = base + (-((base - lo) // kstep)).clip(min=0) * kstep  # first k >= lo on the grid
    count = np.where((base >= 0) & (first <= hi), (hi - first) // kstep + 1, 0)
    first = np.where(count > 0, first, 0)
    ifirst = np.where(count > 0, (t - first * d) // s, 0)
    tab = np.ascontiguousarray(np.stack([first, ifirst, count], axis=1), dtype=np.int64)
    return tab, kstep, istep


def new_output(geom, ct, out=None):
    """The array a backend writes ``geom``'s output into, in dtype ``ct``: ``out`` when given
    (the caller's, which ``Plan.__call__`` passes only when it is C-contiguous, of this
    shape, of dtype ``ct`` and apart from the input: the kernels then write the result in
    place, with no copy), else a new array."""
    return np.empty(geom.array_shape("output"), ct) if out is None else out


def bias_filled(geom, bias, ct, out=None):
    """The output of ``geom`` in dtype ``ct`` (in ``out`` when given, ``new_output``), every
    position holding ``bias`` (C_out,): what a call computes when no input reaches it (no
    input channels)."""
    y = new_output(geom, ct, out)
    y[...] = bias if geom.data_format == "NXC" else bias.reshape(-1, *[1] * geom.ndim)
    return y


def element_strides(y, geom):
    """y's strides in elements, as the kernels address it: (n, o0, o1, o2, channel), with
    0 for the unit axes that pad a rank-1 or rank-2 geometry to 3 spatial axes."""
    st = [v // y.itemsize for v in y.strides]
    nxc = geom.data_format == "NXC"
    sp = st[1:-1] if nxc else st[2:]
    return np.array([st[0], *(0,) * (3 - geom.ndim), *sp, st[-1] if nxc else st[1]], np.int64)


def pack_weights(w_iox, groups, dtype, workers=1):
    """IOX (C_in, C_out/G, *K) -> (G, K0, K1, K2, C_in/G, C_out/G), C-contiguous, ``dtype``."""
    c_in, mg, *kernel = w_iox.shape
    nd, cg, kt = len(kernel), c_in // groups, prod(kernel)
    out = np.empty((groups, *pad3(kernel, 1), cg, mg), dtype)
    if groups > _KERNEL_PACK_MAX_GROUPS or out.size == 0:
        wg = w_iox.reshape(groups, cg, mg, *kernel).transpose(0, *range(3, 3 + nd), 1, 2)
        out[...] = wg.reshape(out.shape)
        return out
    # NumPy's strided copy runs this transpose far below copy bandwidth, slow enough to
    # take a one-shot call's whole budget on large weights (docs/performance.md, "Figures
    # moved out of code comments"); the blocked kernel runs at copy speed.
    w3 = np.ascontiguousarray(w_iox, dtype=dtype).reshape(groups, cg, mg, kt)
    o4 = out.reshape(groups, kt, cg, mg)
    threads = workers if out.size >= _PARALLEL_PACK_VALUES else 1
    for g in range(groups):
        iox_to_kio(w3[g], o4[g], threads)
    return out


_KERNEL_PACK_MAX_GROUPS = 16   # beyond, per-group calls cost more than they save
_PARALLEL_PACK_VALUES = 1 << 21  # smaller weights pack faster than a thread team starts


def tables(geom, inner=True):
    """Per-axis phase tables and steps for ``geom``, padded to 3 axes. ``inner=False``
    leaves the innermost axis's table out (a unit placeholder): it has one 24-byte row per
    output position along that axis (80 bytes at peak while built), and a kernel that
    walks that axis by phases never reads it."""
    tabs, steps = [], []
    unit = np.array([[0, 0, 1]], np.int64)
    for a in range(geom.ndim):
        if not inner and a == geom.ndim - 1:
            tabs.append(unit)
            steps += [1, 1]
            continue
        tab, ks, is_ = axis_taps(geom.strides[a], geom.dilations[a], geom.kernel[a],
                                 geom.in_shape[a], geom.pads_begin[a], geom.out_shape[a])
        tabs.append(tab)
        steps += [ks, is_]
    tabs = [unit] * (3 - geom.ndim) + tabs
    steps = [1, 1] * (3 - geom.ndim) + steps
    return tabs, np.array(steps, np.int64)


def run_direct(x_nxc, w_packed, bias, geom, taps, workers, out=None):
    """y (N, *O, C_out) in the compute dtype of ``x_nxc`` (channels-last, contiguous; ``out``
    when given, C-contiguous of that shape and dtype); ``bias`` (C_out,) contiguous in that
    dtype (zeros for none)."""
    n, c_out = geom.batch, geom.c_out
    y = np.empty((n, *geom.out_shape, c_out), dtype=x_nxc.dtype) if out is None else out
    if geom.c_in == 0 or y.size == 0:  # nothing to contract: every position is the bias
        y[...] = bias
        return y
    x5 = x_nxc.reshape(n, *pad3(geom.in_shape, 1), geom.c_in)
    y5 = y.reshape(n, *pad3(geom.out_shape, 1), c_out)
    tabs, steps = taps
    direct_nxc(x5, w_packed, bias, y5, tabs[0], tabs[1], tabs[2], steps, workers)
    return y


def _run_pixel(xa, taps, geom, plan, out=None):
    ct = plan.w_packed.dtype
    nxc = geom.data_format == "NXC"
    workers = plan.threads(geom)
    if nxc:   # 16-bit: one parallel widening
        x_nxc = as_compute(xa, ct, workers)
    else:     # the blocked transpose (widening 16-bit data as it reads)
        n, c_in, in3 = geom.batch, geom.c_in, pad3(geom.in_shape, 1)
        x_nxc = np.empty((n, *geom.in_shape, c_in), ct)
        padded_nxc(xa.reshape(n, c_in, *in3), x_nxc.reshape(n, *in3, c_in), (0, 0, 0), workers)
    # the kernel writes channels-last: into out only when that is the data layout
    y = run_direct(x_nxc, plan.w_packed, plan.bias_compute, geom, taps, workers,
                   out if nxc else None)
    return y if nxc else np.moveaxis(y, -1, 1)


class Pixel(Variant):
    """The gather kernel: per output pixel, only the taps that hit real input. It runs every
    geometry and, since it never multiplies a weight by a zero off the data, any weights
    (a NaN or Inf reaches exactly the outputs its tap touches): the variants' fallback."""

    name = "pixel"

    def claim(self, geom, rule):
        return DirectKind("pixel", "", rule.exact, rule.exact)

    def rate(self, geom, kind, c):
        # the kernel's innermost loop runs along a group's output channels (_direct.pyx)
        mg = geom.c_out // geom.groups
        return c["pixel_macs_per_s"] * mg / (mg + c["pixel_channel_half"])

    def f64_slowdown(self, geom, kind, c):
        # Of the time an input channel's step takes, mg / (mg + pixel_channel_half) is its
        # loop over mg output channels, which float64 slows by direct_f64 (twice the
        # vectors); the rest, the step's set-up, it does not: layers of 2-8 output channels
        # run as fast in float64 as in float32 (docs/dispatch.md, "The GEMM variant's BLAS
        # paths"; a pixel layer's float64 figures: docs/performance.md, "Figures moved out of
        # code comments").
        mg = geom.c_out // geom.groups
        half = c["pixel_channel_half"]
        return (mg * c["direct_f64"] + half) / (mg + half)

    def layout(self, geom, mode):
        return tables(geom)

    def prepare(self, geom, plan, layout):
        return self.name, _run_pixel, tables(geom) if layout is None else layout


VARIANT = Pixel()
