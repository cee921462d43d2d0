"""Plain NumPy transposed convolution: the test oracle and ``method="reference"``.

Scatter form, read straight off the definition in DESIGN.md: every kernel tap k moves the whole
input by k*d on a grid of step s into the full (uncropped) output, then the canonical pads crop it
(pb, pe > 0) or extend it with bias-only positions (pb, pe < 0). Computes in float64.
"""
from __future__ import annotations

from math import prod

import numpy as np

__all__ = ["BACKEND", "conv_transpose_reference"]


def conv_transpose_reference(x, w, b, geom):
    """x: (N, C_in, *I) NCX; w: (C_in, C_out/G, *K) IOX; b: (C_out,) or None -> (N, C_out, *O)."""
    n, g = geom.batch, geom.groups
    cg, mg = geom.c_in // g, geom.c_out // g
    xg = np.asarray(x, np.float64).reshape(n, g, cg, *geom.in_shape)
    wg = np.asarray(w, np.float64).reshape(g, cg, mg, *geom.kernel)
    full = np.zeros((n, g, mg, *geom.full_shape))
    for k in np.ndindex(*geom.kernel):
        # sum over the input channels of each group, for this one tap
        contrib = np.einsum("ngc...,gcm->ngm...", xg, wg[(Ellipsis, *k)])
        dest = tuple(slice(kk * d, kk * d + (i - 1) * s + 1, s) for kk, d, i, s in
                     zip(k, geom.dilations, geom.in_shape, geom.strides))
        full[(slice(None),) * 3 + dest] += contrib
    # y[o] = full[o + pb]: copy the overlap of [pb, pb + O) with [0, F)
    y = np.zeros((n, g, mg, *geom.out_shape))
    src, dst = [], []
    for pb, o, f in zip(geom.pads_begin, geom.out_shape, geom.full_shape):
        lo, hi = max(pb, 0), min(pb + o, f)
        src.append(slice(lo, max(hi, lo)))
        dst.append(slice(lo - pb, max(hi, lo) - pb))
    y[(slice(None),) * 3 + tuple(dst)] = full[(slice(None),) * 3 + tuple(src)]
    y = y.reshape(n, geom.c_out, *geom.out_shape)
    if b is not None:
        y += np.asarray(b, np.float64).reshape(-1, *([1] * geom.ndim))
    return y


def _run_reference(xa, state, geom, plan, out=None):   # (its own array, whatever out)
    nxc = geom.data_format == "NXC"
    x_ncx = np.moveaxis(xa, -1, 1) if nxc else xa
    y = conv_transpose_reference(x_ncx, plan.w_iox, plan.bias, geom)
    return np.moveaxis(y, 1, -1) if nxc else y


class ReferenceBackend:
    """``method="reference"``: never estimated, never chosen by "auto" or "tune"."""

    name = "reference"
    label = "reference"

    def estimate(self, geom, compute_dtype, workers, c):
        return None

    def prepare(self, geom, plan):
        return "numpy", _run_reference, None

    def workspace_bytes(self, geom, compute_dtype):
        # float64 input, full (uncropped) sum and output
        n_in = geom.batch * geom.c_in * prod(geom.in_shape)
        n_out = geom.batch * geom.c_out * prod(geom.out_shape)
        n_full = geom.batch * geom.c_out * prod(geom.full_shape)
        return 8 * (n_in + n_full + 2 * n_out)


BACKEND = ReferenceBackend()
