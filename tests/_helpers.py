"""Helpers for tests: the reference at canonical pads, independent of any front end."""

from convt._geometry.geometry import Geometry
from convt._backends.reference import conv_transpose_reference


def reference_at(x_ncx, w_iox, b, strides, dilations, pb, pe, groups=1):
    """Reference output at canonical pads (pb, pe) -- the oracle for every front end."""
    nd = w_iox.ndim - 2
    in_shape, kernel = x_ncx.shape[2:], w_iox.shape[2:]
    full = [(i - 1) * s + (k - 1) * d + 1 for i, s, k, d in zip(in_shape, strides, kernel,
                                                                 dilations)]
    geom = Geometry(batch=x_ncx.shape[0], c_in=x_ncx.shape[1], c_out=w_iox.shape[1] * groups,
                    groups=groups, in_shape=tuple(in_shape),
                    out_shape=tuple(f - a - e for f, a, e in zip(full, pb, pe)),
                    kernel=tuple(kernel), strides=tuple(strides), dilations=tuple(dilations),
                    pads_begin=tuple(pb), pads_end=tuple(pe))
    assert geom.ndim == nd
    return conv_transpose_reference(x_ncx, w_iox, b, geom)
