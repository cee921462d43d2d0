"""convt.translate: one convention's ConvTranspose call written in another's terms.

The source side is each front end's ``_canonical`` (its public function's keywords, validated
as that function validates them, resolved to a ``convt._geometry.canonical.Canonical``). The
destination side, one module per family (to_spec: ONNX / OpenVINO / oneDNN, to_torch, to_tf:
TensorFlow / Keras, to_jax), states the call that produces a window covering the source's output
(convt._translate.window); convt._translate.emit writes it out with the crop or zero pad, the
bias and the layout changes.

Layer: front-end level. It imports the front ends and convt._geometry; only convt's facade and
convt.__main__ import it.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, replace

from .._geometry.limits import check_range
from .._geometry.validate import bad_type, choice, fail, shape_tuple
from . import to_jax, to_spec, to_tf, to_torch
from .emit import render
from .window import axes_of

__all__ = ["translate", "Translation", "CONVENTIONS"]

CONVENTIONS = ("onnx", "openvino", "onednn", "torch", "tensorflow", "keras", "jax")

_DESTINATIONS = {"onnx": to_spec.onnx, "openvino": to_spec.openvino, "onednn": to_spec.onednn,
                 "torch": to_torch.build, "tensorflow": to_tf.tensorflow, "keras": to_tf.keras,
                 "jax": to_jax.build}
# destination options, popped from the keywords before the source sees them
_OPTIONS = {"dst_opset": "onnx", "dst_grouped": "openvino"}


def _source(name):
    """The ``_canonical`` of front end convt.<name>."""
    try:
        module = importlib.import_module(f"convt.{name}")
    except ModuleNotFoundError as e:   # a build without this front end
        if e.name != f"convt.{name}":
            raise
        raise ModuleNotFoundError(f"translate: src={name!r} needs convt.{name}, which this "
                                  "convt does not have", name=e.name) from None
    return module._canonical


@dataclass(frozen=True)
class Translation:
    """One source call written for a destination convention; `translate` makes it.

    Each parameter is kept as the (read-only) attribute of the same name; ``str()`` is the code.

    Parameters
    ----------
    source, destination : str
        The two conventions.
    canonical : Canonical
        What the source call computes, by shapes alone (convt._geometry.canonical).
    kwargs : dict
        The destination function's keyword arguments.
    code : str
        A Python expression in ``x``, ``w`` and ``b`` (the source's arrays, as the destination
        framework's tensors) computing the source's output with the destination framework.
        Its module names are ``torch``, ``tf`` (tensorflow), ``keras``, ``jax``, ``np``
        (numpy) and ``convt``. It mentions ``b`` only when the source call has a bias.
    notes : tuple of str, optional
        Caveats of the destination's runtimes (e.g. a CPU kernel that refuses the call).

    Examples
    --------
    >>> import numpy as np, convt
    >>> t = convt.translate("onnx", "openvino", (1, 2, 4), (2, 3, 3), (3,), strides=(2,),
    ...                     pads=(1, 1))
    >>> print(t)
    convt.openvino.convolution_backprop_data(x, w, strides=(2,), pads_begin=(1,), pads_end=(1,), dilations=(1,)) + b.reshape((-1, 1))
    >>> x, w, b = np.ones((1, 2, 4)), np.ones((2, 3, 3)), np.arange(3.0)
    >>> t(x, w, b)[0, :, :4]
    array([[2., 4., 2., 4.],
           [3., 5., 3., 5.],
           [4., 6., 4., 6.]])
    """

    source: str
    destination: str
    canonical: object
    kwargs: dict
    code: str
    notes: tuple = ()

    def __str__(self):
        return self.code

    def convt_code(self, bias=None):
        """The code with NumPy for the framework's tensor operations and convt's front end for
        the destination function: what calling the translation evaluates.

        Parameters
        ----------
        bias : bool, optional
            Write the bias in (default: when the source call has one).

        Returns
        -------
        str
            An expression in ``x``, ``w`` (and ``b``) using ``np`` and ``convt``.

        Examples
        --------
        >>> import convt
        >>> t = convt.translate("onnx", "tensorflow", (1, 2, 4, 4), (2, 3, 3, 3),
        ...                     strides=(2, 2))
        >>> print(t.convt_code())  # doctest: +NORMALIZE_WHITESPACE
        convt.tensorflow.conv_transpose(x.transpose((0, 2, 3, 1)), w.transpose((2, 3, 1, 0)),
            output_shape=[1, 9, 9, 3], strides=[2, 2], padding='VALID').transpose((0, 3, 1, 2))
        """
        has_bias = self.canonical.has_bias if bias is None else bias
        return render(replace(self.canonical, has_bias=has_bias), self._w_shape, self._call,
                      "numpy")

    def __call__(self, x, w, b=None):
        """Compute the source's output through convt's own destination front end.

        Parameters
        ----------
        x, w : ndarray
            The source call's input and filter, in the source's layouts.
        b : ndarray, optional
            The source's bias; None for none.

        Returns
        -------
        ndarray
            The source call's output, in the source's layout.

        Examples
        --------
        >>> import numpy as np, convt
        >>> t = convt.translate("onnx", "onednn", (1, 1, 3), (1, 1, 2), strides=(2,))
        >>> t(np.ones((1, 1, 3), np.float32), np.ones((1, 1, 2), np.float32))
        array([[[1., 1., 1., 1., 1., 1.]]], dtype=float32)
        """
        import numpy as np

        import convt

        importlib.import_module(self._call.convt_function.rsplit(".", 1)[0])
        return eval(self.convt_code(b is not None),   # noqa: S307 -- our own expression
                    {"np": np, "convt": convt, "x": x, "w": w, "b": b})


def _translation(src, dst, canon, call, w_shape):
    t = Translation(source=src, destination=dst, canonical=canon, kwargs=dict(call.kwargs),
                    code=render(canon, w_shape, call), notes=call.notes)
    object.__setattr__(t, "_call", call)          # what convt_code renders again
    object.__setattr__(t, "_w_shape", w_shape)
    return t


def _plain(canon):
    """``canon`` with Python ints throughout (a NumPy integer would print as np.int64(...) in
    the code)."""
    g = canon.geometry
    ints = {f: (tuple(int(v) for v in getattr(g, f)) if isinstance(getattr(g, f), tuple)
                else int(getattr(g, f)))
            for f in ("batch", "c_in", "c_out", "groups", "in_shape", "out_shape", "kernel",
                      "strides", "dilations", "pads_begin", "pads_end")}
    axes = {f: tuple(int(a) for a in getattr(canon, f))
            for f in ("x_axes", "w_axes", "y_axes", "w_flip")}
    return replace(canon, geometry=replace(g, **ints), **axes)


def translate(src, dst, x_shape, w_shape, bias_shape=None, **src_attrs):
    """Write one convention's transposed convolution in another convention's terms.

    Parameters
    ----------
    src, dst : {"onnx", "openvino", "onednn", "torch", "tensorflow", "keras", "jax"}
        The source and the destination convention.
    x_shape, w_shape : tuple of int
        Shapes of the source's input and filter (``input`` / ``weight``, ``X`` / ``W``, ...),
        in the source's layouts.
    bias_shape : tuple of int, optional
        Shape of the source's bias; None for a call without one.
    **src_attrs
        The source function's keywords, validated as it validates them: e.g. ``opset``,
        ``strides``, ``pads``, ``auto_pad`` for "onnx"; ``stride``, ``padding``,
        ``output_padding``, ``groups``, ``dilation`` for "torch"; ``grouped=True`` for
        OpenVINO's GroupConvolutionBackpropData. Two keywords configure the destination:
        ``dst_opset`` (the ONNX opset written, default 11) and ``dst_grouped`` (OpenVINO: the
        grouped op; default: when the call has groups > 1).

    Returns
    -------
    Translation
        ``.kwargs``, ``.code`` (an expression for the destination framework), and calling it,
        ``t(x, w, b)``, computes the source's output through convt's own destination front end.

    Raises
    ------
    ValueError
        An unknown convention, a source call its front end refuses, or an attribute the
        destination cannot express at all (groups in Keras, tf.nn and jax).
    TypeError
        A keyword the source's function does not take, or one of the wrong type.

    Examples
    --------
    >>> import convt
    >>> t = convt.translate("onnx", "torch", (1, 16, 32, 32), (16, 8, 4, 4), strides=(2, 2),
    ...                     auto_pad="SAME_UPPER")
    >>> print(t.code)
    torch.nn.functional.conv_transpose2d(x, w, stride=(2, 2), padding=(1, 1))
    >>> t = convt.translate("onnx", "onednn", (1, 16, 32, 32), (16, 8, 4, 4), (8,),
    ...                     strides=(2, 2), pads=(1, 2, 1, 0))
    >>> print(t.code)
    convt.onednn.conv_transpose(x, w, b, strides=(2, 2), pads_begin=(1, 2), pads_end=(1, 0), dilations=(1, 1), data_format='NCX', filter_format='IOX')
    """
    src = choice("translate", "src", src, CONVENTIONS)
    dst = choice("translate", "dst", dst, CONVENTIONS)
    options = {}
    for key, owner in _OPTIONS.items():
        if key in src_attrs:
            if dst != owner:
                raise fail("translate", key, f"applies to dst={owner!r} only (dst={dst!r})",
                           src_attrs[key])
            options[key] = src_attrs.pop(key)
    source = _source(src)
    known = tuple(inspect.signature(source).parameters)[3:]
    for key, value in src_attrs.items():
        if key not in known:
            raise bad_type("translate", key, f"is not a keyword of {src} (one of {known})",
                           value)
    x_shape = shape_tuple("translate", "x_shape", x_shape)
    w_shape = shape_tuple("translate", "w_shape", w_shape)
    if bias_shape is not None:
        bias_shape = shape_tuple("translate", "bias_shape", bias_shape)
    canon = _plain(source(x_shape, w_shape, bias_shape, **src_attrs))
    # what a call of the source would refuse (strides past the phases every backend plans,
    # frames past 64-bit indexing): the destinations' output-length search is linear in s
    check_range(f"translate (from {src})", canon.geometry, "x_shape")
    if "dst_opset" in options:
        from ..onnx import operator_version

        options["dst_opset"] = operator_version("translate", options["dst_opset"])
    call = _DESTINATIONS[dst](canon, axes_of(canon.geometry), options)
    return _translation(src, dst, canon, call, tuple(int(n) for n in w_shape))
