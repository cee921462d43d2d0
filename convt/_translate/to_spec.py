"""The spec conventions as destinations: ONNX ConvTranspose, OpenVINO
(Group)ConvolutionBackpropData-1 and oneDNN Graph ConvTranspose-1, each called through convt's
own front end (its ``.code`` is NumPy + convt).

Each is given explicit pads only (never auto_pad or output_shape, whose readings differ
between the spec and the runtimes, CONVENTIONS.md), so the window is pb_d = pads_begin >= 0,
pe_d = pads_end - output_padding with pads_end >= 0 and output_padding bounded:
- ONNX-11 / 22: op < max(stride, dilation) (shared/specs 004 line 62); ONNX-1: no bound
  (001 line 44);
- OpenVINO: no bound in the spec (003 line 91), but the CPU plugin computes op >= stride
  wrongly when pads_begin > 0 (CONVENTIONS.md), so op < stride there;
- oneDNN: op < stride, which the library enforces (CONVENTIONS.md; the spec, 000 line 109,
  says only "non-negative").
Whatever the pads cannot express (a negative pads_begin, a pads_end below -bound) is cropped
or zero-padded with NumPy.
"""
from __future__ import annotations

from .emit import Call, identity
__all__ = ["onnx", "openvino", "onednn"]


def _explicit(axes, bound):
    """Per axis (pb_d, pe_d, pads_begin, pads_end, output_padding); ``bound(ax, pads_begin)``
    is the largest output_padding allowed, None for no bound."""
    out = []
    for ax in axes:
        pb_d = max(ax.pb, 0)
        top = bound(ax, pb_d)
        pe_d = ax.pe if top is None else max(ax.pe, -top)
        if ax.full - pb_d - pe_d < 1:
            # a window past an end of the full output (bias only): the nearest non-empty one
            pb_d = max(0, min(pb_d, ax.full - 1 - pe_d))
            top = bound(ax, pb_d)
            pe_d = min(max(ax.pe, -ax.full if top is None else -top), ax.full - 1 - pb_d)
        out.append((pb_d, pe_d, pb_d, max(pe_d, 0), max(-pe_d, 0)))
    return out


def _layouts(nd):
    ident = identity(nd + 2)
    return ident, ident


def onnx(canon, axes, options):
    geom, nd = canon.geometry, canon.geometry.ndim
    opset = options.get("dst_opset", 11)
    if opset >= 11:
        chosen = _explicit(axes, lambda ax, _: max(ax.s, ax.d) - 1)
    else:
        chosen = _explicit(axes, lambda ax, _: None)
    kwargs = {} if opset == 11 else {"opset": opset}
    kwargs["strides"] = geom.strides
    kwargs["pads"] = tuple(c[2] for c in chosen) + tuple(c[3] for c in chosen)
    if any(d > 1 for d in geom.dilations):
        kwargs["dilations"] = geom.dilations
    if any(c[4] for c in chosen):
        kwargs["output_padding"] = tuple(c[4] for c in chosen)
    if geom.groups > 1:
        kwargs["group"] = geom.groups
    x_layout, y_layout = _layouts(nd)
    return Call(function="convt.onnx.conv_transpose", convt_function="convt.onnx.conv_transpose",
                dialect="numpy", kwargs=kwargs, x_layout=x_layout, y_layout=y_layout,
                pads=tuple(c[:2] for c in chosen), takes_bias=True)


def openvino(canon, axes, options):
    geom, nd = canon.geometry, canon.geometry.ndim
    grouped = options.get("dst_grouped")
    grouped = geom.groups > 1 if grouped is None else grouped
    if geom.groups > 1 and not grouped:
        raise ValueError(f"translate (to openvino): 'groups' = {geom.groups} needs "
                         "GroupConvolutionBackpropData; got dst_grouped=False")
    chosen = _explicit(axes, lambda ax, pb: None if pb == 0 else ax.s - 1)
    kwargs = {"strides": geom.strides, "pads_begin": tuple(c[2] for c in chosen),
              "pads_end": tuple(c[3] for c in chosen), "dilations": geom.dilations}
    if any(c[4] for c in chosen):
        kwargs["output_padding"] = tuple(c[4] for c in chosen)
    g = geom.groups
    w_ops = (("reshape", (g, geom.c_in // g, geom.c_out // g, *geom.kernel)),) if grouped else ()
    name = "group_convolution_backprop_data" if grouped else "convolution_backprop_data"
    x_layout, y_layout = _layouts(nd)
    return Call(function=f"convt.openvino.{name}", convt_function=f"convt.openvino.{name}",
                dialect="numpy", kwargs=kwargs, x_layout=x_layout, y_layout=y_layout,
                pads=tuple(c[:2] for c in chosen), w_ops=w_ops, takes_bias=False)


def onednn(canon, axes, options):
    """Data and filter formats follow the source's where it has NXC / XOI arrays (fewer
    transpositions); the spec's defaults are NXC and XOI."""
    geom, nd = canon.geometry, canon.geometry.ndim
    chosen = _explicit(axes, lambda ax, _: ax.s - 1)
    nxc = (0, *range(2, nd + 2), 1)
    data_format = "NXC" if canon.y_axes == nxc else "NCX"
    filter_format = "IOX" if canon.w_axes[:2] == (0, 1) and not canon.w_grouped else "XOI"
    kwargs = {"strides": geom.strides, "pads_begin": tuple(c[2] for c in chosen),
              "pads_end": tuple(c[3] for c in chosen), "dilations": geom.dilations}
    if any(c[4] for c in chosen):
        kwargs["output_padding"] = tuple(c[4] for c in chosen)
    if geom.groups > 1:
        kwargs["groups"] = geom.groups
    if data_format != "NXC":
        kwargs["data_format"] = data_format
    if filter_format != "XOI":
        kwargs["filter_format"] = filter_format
    layout = nxc if data_format == "NXC" else identity(nd + 2)
    w_ops = (("transpose", (*range(2, nd + 2), 1, 0)),) if filter_format == "XOI" else ()
    return Call(function="convt.onednn.conv_transpose",
                convt_function="convt.onednn.conv_transpose", dialect="numpy", kwargs=kwargs,
                x_layout=layout, y_layout=layout, pads=tuple(c[:2] for c in chosen),
                w_ops=w_ops, takes_bias=True)
