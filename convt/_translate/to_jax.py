"""jax as the destination: ``jax.lax.conv_transpose``.

jax/_src/lax/convolution.py ``conv_transpose``: a forward ``conv_general_dilated`` of the input
dilated by the strides (lhs_dilation), padded by (lo, hi) per axis, with the kernel dilated by
rhs_dilation. With e = (K-1)*d, its output o is the full transposed output at o + e - lo when the
kernel is the canonical one flipped, so the window is pb_d = e - lo, pe_d = e - hi: any window
at all (negative lo / hi crop, XLA takes them). ``transpose_kernel=True`` flips the kernel's
spatial axes and swaps its "I" and "O" axes first, so a canonical (unflipped) IOX filter goes in
with its C_in axis labelled "O". The strings "SAME" / "VALID" become (lo, hi) through
``_conv_transpose_padding`` (same file); they are used when they give the exact window.

``dimension_numbers`` may name any layout, so the call takes the source's arrays in their own
layouts: only an unbatched input or a grouped filter needs reshaping. jax's conv_transpose has
no feature groups.
"""
from __future__ import annotations

from .emit import Call, inverse

__all__ = ["build"]


def _jax_string_pads(ax, padding):
    """(lo, hi) of jax's ``_conv_transpose_padding(E, s, padding)``."""
    k, s = ax.e, ax.s
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    else:
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    return lo, total - lo


def _spec(layout, labels):
    """The dimension-numbers string of an array whose axis m holds canonical axis
    layout[m]."""
    return "".join(labels[a] for a in layout)


def build(canon, axes, options):
    geom, nd = canon.geometry, canon.geometry.ndim
    if geom.groups > 1:
        raise ValueError("translate (to jax): 'groups' cannot be expressed: "
                         "jax.lax.conv_transpose has no feature groups; got "
                         f"{geom.groups}")
    exact = [(ax.e - 1 - ax.pb, ax.e - 1 - ax.pe) for ax in axes]
    padding = exact
    for mode in ("VALID", "SAME"):
        if all(_jax_string_pads(ax, mode) == p for ax, p in zip(axes, exact)):
            padding = mode
            break
    space = "DHW"[3 - nd:]
    data = {0: "N", 1: "C", **{2 + j: space[j] for j in range(nd)}}
    # an unflipped source filter goes through transpose_kernel=True (C_in labelled "O")
    flipped = set(canon.w_flip) == set(range(nd))
    kernel = {0: "I" if flipped else "O", 1: "O" if flipped else "I",
              **{2 + j: space[j] for j in range(nd)}}
    x_layout = inverse(canon.x_axes)
    y_layout = tuple(canon.y_axes)
    if canon.w_grouped:
        w_layout = tuple(range(nd + 2))   # merged to canonical IOX by a reshape
    else:
        w_layout = inverse(canon.w_axes)
    kwargs = {"strides": geom.strides, "padding": padding if isinstance(padding, str)
              else tuple(padding)}
    if any(d > 1 for d in geom.dilations):
        kwargs["rhs_dilation"] = geom.dilations
    kwargs["dimension_numbers"] = (_spec(x_layout, data), _spec(w_layout, kernel),
                                   _spec(y_layout, data))
    if not flipped:
        kwargs["transpose_kernel"] = True
    w_ops = (("transpose", w_layout),) + ((("flip", tuple(range(nd))),) if flipped else ())
    return Call(function="jax.lax.conv_transpose", convt_function="convt.jax.conv_transpose",
                dialect="jax", kwargs=kwargs, x_layout=x_layout, y_layout=y_layout,
                pads=tuple((ax.pb, ax.pe) for ax in axes), w_ops=w_ops)
