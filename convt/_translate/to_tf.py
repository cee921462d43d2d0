"""TensorFlow and Keras as destinations: ``tf.nn.conv_transpose`` and
``keras.ops.conv_transpose``. Both take channels-last data and a (*K, C_out, C_in) filter, and
neither has groups or a bias argument.

tf.nn.conv_transpose is the gradient of a forward convolution whose input has the requested
``output_shape`` (tensorflow/python/ops/nn_ops.py ``conv_transpose`` -> ``conv2d_transpose_v2``
etc. -> Conv2DBackpropInput / Conv3DBackpropInputV2); the kernels accept an output length os
when the forward convolution of os gives back I (tensorflow/core/framework/kernel_shape_util.cc
``GetWindowedOutputSizeVerbose``):
- "VALID": os in [F, F + s - 1]; the window starts at 0: pb_d = 0, pe_d = F - os.
- "SAME": ceil(os / s) = I; the forward padding max(F - os, 0) is split with the smaller half
  first: pb_d = max(F - os, 0) // 2, pe_d = F - os - pb_d.
- explicit [[0, 0], [before, after], ..., [0, 0]] (2-D only: conv1d_transpose and
  conv3d_transpose take strings): os + before + after in [F, F + s - 1]; pb_d = before.
TensorFlow's CPU kernels run NHWC only, and take dilations > 1 only in float32 and without
explicit padding (measured with TF 2.21, 1-D to 3-D): with dilation the translation uses
"SAME" / "VALID" and a crop, and notes that float64 needs a GPU.

Keras 3 computes os itself (keras/src/backend/common/backend_utils.py
``_get_output_shape_given_tf_padding``, called by keras/src/backend/tensorflow/nn.py
``conv_transpose``) and hands it to tf.nn.conv_transpose with the same padding string:
- "valid": os = F + op, op = max(E, s) - E when output_padding is None;
- "same": os = I * s when output_padding is None, else (I-1)*s + E % 2 + op.
output_padding is one tuple for every axis or None, and TF bounds the resulting os as above.
"""
from __future__ import annotations

from .emit import Call
from .window import cost, pick

__all__ = ["tensorflow", "keras"]


def _refuse_groups(conv, function, geom):
    if geom.groups > 1:
        raise ValueError(f"translate (to {conv}): 'groups' cannot be expressed: {function} has "
                         f"no feature groups; got {geom.groups}")


def _tf_same(ax, os_):
    pb_d = max(ax.full - os_, 0) // 2
    return pb_d, ax.full - os_ - pb_d


def _tf_candidates(ax, mode):
    """(pb_d, pe_d, os, (before, after)) TF accepts for one axis in ``mode``."""
    f, s = ax.full, ax.s
    if mode == "VALID":
        return [(0, f - os_, os_, None) for os_ in range(f, f + s)]
    if mode == "SAME":
        return [(*_tf_same(ax, os_), os_, None) for os_ in range((ax.i - 1) * s + 1, ax.i * s + 1)]
    before = max(ax.pb, 0)
    after = max(ax.pe, 0)
    return [(before, f - before - os_, os_, (before, after))
            for os_ in range(f - before - after, f - before - after + s)]


def _best_mode(axes, modes, candidates):
    """The (mode, per-axis choice) with the fewest elements cropped or padded; earlier modes win
    ties. None when no mode covers every axis."""
    best = None
    for mode in modes:
        chosen = [pick(ax, candidates(ax, mode)) for ax in axes]
        if any(c is None for c in chosen):
            continue
        total = sum(cost(ax, c[0], c[1]) for ax, c in zip(axes, chosen))
        if best is None or total < best[0]:
            best = (total, mode, chosen)
    return best


def _channels_last(nd):
    return (0, *range(2, nd + 2), 1)


_DILATION_NOTE = ("TensorFlow's CPU kernels (TF 2.21) take dilations > 1 in float32 only (its "
                  "oneDNN path, with padding 'SAME' or 'VALID'): in float64 this runs on a GPU")


def _notes(geom):
    return (_DILATION_NOTE,) if any(d > 1 for d in geom.dilations) else ()


def tensorflow(canon, axes, options):
    geom, nd = canon.geometry, canon.geometry.ndim
    _refuse_groups("tensorflow", "tf.nn.conv_transpose", geom)
    dilated = any(d > 1 for d in geom.dilations)
    # explicit pads reach every window SAME and VALID do; prefer the strings when they are as
    # close (more readable), and avoid explicit pads with dilation (CPU kernels refuse them)
    modes = ("VALID", "SAME") + (("EXPLICIT",) if nd == 2 and not dilated else ())
    _, mode, chosen = _best_mode(axes, modes, _tf_candidates)
    layout = _channels_last(nd)
    padding = mode if mode != "EXPLICIT" else [[0, 0], *([*c[3]] for c in chosen), [0, 0]]
    kwargs = {"output_shape": [geom.batch, *(c[2] for c in chosen), geom.c_out],
              "strides": list(geom.strides), "padding": padding}
    if dilated:
        kwargs["dilations"] = list(geom.dilations)
    return Call(function="tf.nn.conv_transpose", convt_function="convt.tensorflow.conv_transpose",
                dialect="tensorflow", kwargs=kwargs, x_layout=layout, y_layout=layout,
                pads=tuple(c[:2] for c in chosen),
                w_ops=(("transpose", (*range(2, nd + 2), 1, 0)),),
                notes=_notes(geom))


def _keras_candidates(ax, mode):
    """(pb_d, pe_d, output_padding) Keras + TF accept for one axis in ``mode``."""
    padding, given = mode
    f, s, e, i = ax.full, ax.s, ax.e, ax.i
    if padding == "valid":
        ops = range(s) if given else [max(e, s) - e]
        return [(0, -op, op) for op in ops]
    if not given:
        return [(*_tf_same(ax, i * s), None)]
    out = []
    for op in range(s):
        os_ = (i - 1) * s + e % 2 + op
        if (i - 1) * s + 1 <= os_ <= i * s:
            out.append((*_tf_same(ax, os_), op))
    return out


def keras(canon, axes, options):
    geom, nd = canon.geometry, canon.geometry.ndim
    _refuse_groups("keras", "keras.ops.conv_transpose", geom)
    modes = (("valid", False), ("same", False), ("valid", True), ("same", True))
    _, (padding, given), chosen = _best_mode(axes, modes, _keras_candidates)
    kwargs = {"strides": geom.strides, "padding": padding}
    if given:
        kwargs["output_padding"] = tuple(c[2] for c in chosen)
    if any(d > 1 for d in geom.dilations):
        kwargs["dilation_rate"] = geom.dilations
    layout = _channels_last(nd)
    return Call(function="keras.ops.conv_transpose", convt_function="convt.keras.conv_transpose",
                dialect="keras", kwargs=kwargs, x_layout=layout, y_layout=layout,
                pads=tuple(c[:2] for c in chosen),
                w_ops=(("transpose", (*range(2, nd + 2), 1, 0)),),
                notes=_notes(geom))
