"""PyTorch as the destination: ``torch.nn.functional.conv_transpose1d / 2d / 3d``.

torch's padding model (torch/nn/functional.py conv_transpose2d's docstring; the length rule in
aten/src/ATen/native/Convolution.cpp, ``conv_output_size`` / ``_convolution``'s transposed
branch): symmetric padding p >= 0 removed from both ends of the full output and output_padding
op added at the end, L = (I-1)*s - 2p + (K-1)*d + op + 1, so the window is pb_d = p,
pe_d = p - op. Convolution.cpp (``check_input_shape_forward`` / the output_padding check in
``_convolution``) refuses op >= max(stride, dilation): "output padding must be smaller than
either stride or dilation". Layouts: NCX input, IOX weight (C_in, C_out / groups, *K), a bias
argument.
"""
from __future__ import annotations

from .emit import Call, identity
from .window import clamp, covers, pick

__all__ = ["build"]


def _axis(ax):
    """(pb_d, pe_d, padding, output_padding) for one axis: the largest p <= max(pb, 0) that
    still lets p - op reach down to max(pe, 0), then the op closest to the source's pe."""
    m = max(ax.s, ax.d)
    top, tail = max(ax.pb, 0), max(ax.pe, 0)
    p = min(top, tail + m - 1)
    pe_d = clamp(ax.pe, p - m + 1, min(p, tail))
    if covers(ax, p, pe_d):
        return p, pe_d, p, p - pe_d
    # the source's window lies past an end of the full output (bias only) and the closed
    # form leaves torch no output: search every window torch has that is not empty
    return pick(ax, [(q, q - op, q, op) for q in range(min(top, ax.full) + 1)
                     for op in range(m)])


def build(canon, axes, options):
    geom, nd = canon.geometry, canon.geometry.ndim
    chosen = [_axis(ax) for ax in axes]
    kwargs = {"stride": geom.strides}
    if any(c[2] for c in chosen):
        kwargs["padding"] = tuple(c[2] for c in chosen)
    if any(c[3] for c in chosen):
        kwargs["output_padding"] = tuple(c[3] for c in chosen)
    if geom.groups > 1:
        kwargs["groups"] = geom.groups
    if any(d > 1 for d in geom.dilations):
        kwargs["dilation"] = geom.dilations
    ident = identity(nd + 2)
    return Call(function=f"torch.nn.functional.conv_transpose{nd}d",
                convt_function=f"convt.torch.conv_transpose{nd}d", dialect="torch",
                kwargs=kwargs, x_layout=ident, y_layout=ident,
                pads=tuple(c[:2] for c in chosen), takes_bias=True, unbatched_ok=True)
