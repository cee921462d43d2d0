"""convt's ConvTranspose as an ``onnx.reference`` operator (needs the ``onnx`` package).

``onnx.reference.ReferenceEvaluator(model, new_ops=[ConvTranspose])`` runs a whole model with
every ConvTranspose node of the ai.onnx domain computed by convt. The evaluator looks new
operators up by ``(op_domain, class name)``, so the class must be named ``ConvTranspose``;
``convt.onnx.ConvTransposeOp`` is the public name of this class.

Per node: the attributes come from the node (the evaluator fills the schema's defaults), the
operator version from the opset the model imports for the node's domain (1-10:
ConvTranspose-1, 11-21: -11, 22+: -22, as ``convt.onnx.conv_transpose(opset=...)``), and a
``Plan`` (what ``convt.ConvTranspose`` wraps: resolved attributes, packed weights, per-shape
geometry) is built on the first run and reused while W and B hold the same bits.
"""
from __future__ import annotations

import numpy as np
from onnx.reference.op_run import OpRun

from .._geometry.frontend import intake
from .._dispatch.plan import METHODS, Plan
from .._geometry.validate import choice, fail
from ..onnx import AUTO_PADS, TYPES, onnx_spec, operator_version

__all__ = ["ConvTranspose"]

_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "output_padding",
               "output_shape", "pads", "strides")


class _NodeTypeError(TypeError):
    """A TypeError about the node's tensors; ``OpRun.run`` would bury it in a generic one."""


class ConvTranspose(OpRun):
    """ONNX ``ConvTranspose`` computed by convt, for ``onnx.reference.ReferenceEvaluator``.

    Pass the class (public name ``convt.onnx.ConvTransposeOp``) in ``new_ops``; the evaluator
    creates one instance per ConvTranspose node. Configure it with `with_options`.

    Parameters
    ----------
    onnx_node : onnx.NodeProto
        The node (the evaluator passes it).
    run_params : dict
        The evaluator's run parameters; ``run_params["opsets"]`` gives the model's opset for
        the node's domain, which selects ConvTranspose-1 (opsets 1-10), -11 (11-21) or -22.
    schema : onnx.defs.OpSchema, optional
        The operator's schema (the evaluator passes it; default: ConvTranspose's).

    Attributes
    ----------
    method : {"auto", "direct", "fft", "reference", "tune"}
        Backend, as for `convt.ConvTranspose` (class attribute, default "auto").
    workers : int or None
        Threads, as in ``scipy.fft`` (class attribute, default None: OpenMP's default).
    check_weights : bool
        True (the default): the prepared operator is reused only while W and B are
        bit-identical to the arrays it was built from: free for the same read-only views of
        immutable bytes (the evaluator's initializers), otherwise a comparison of ``W.size``
        values per run (far less than the convolution's ``W.size`` multiply-adds per input
        position). False: reused while W and B are the same objects, so arrays changed in
        place give stale results.

    Raises
    ------
    ValueError
        On construction, an unknown attribute or auto_pad value; on the first run, an
        attribute convt (and the spec) rejects for these tensors. Messages name the node, e.g.
        ``onnx ConvTranspose node 'up1' (opset 11): 'pads' must be ...; got ...``.
    TypeError
        Input types the operator version does not list, or X and W of different dtypes.

    Notes
    -----
    Where ``onnx.reference``'s own ConvTranspose deviates from the spec (the odd split with
    NOTSET / VALID and output_shape, several channels per group, the bias with group > 1,
    opset-1 SAME), this operator follows the spec, as every convt front end does
    (docs/conventions.md). The output has X's dtype.

    Examples
    --------
    >>> import numpy as np, convt
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> from onnx.reference import ReferenceEvaluator
    >>> w = np.ones((1, 2, 3, 3), np.float32)
    >>> node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], name="up",
    ...                         strides=[2, 2], output_shape=[6, 6])
    >>> graph = helper.make_graph(
    ...     [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)],
    ...     [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    ...     [numpy_helper.from_array(w, "W")])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    >>> sess = ReferenceEvaluator(model, new_ops=[convt.onnx.ConvTransposeOp])
    >>> x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    >>> y = sess.run(None, {"X": x})[0]
    >>> y.shape
    (1, 2, 6, 6)
    >>> bool((y == convt.onnx.conv_transpose(x, w, strides=[2, 2], output_shape=[6, 6])).all())
    True
    """

    op_domain = ""
    method = "auto"
    workers = None
    check_weights = True

    def __init__(self, onnx_node, run_params, schema=None):
        super().__init__(onnx_node, run_params, schema)
        self.opset = int(run_params["opsets"][onnx_node.domain])
        self.version = operator_version("onnx", self.opset)
        # Exporters often leave names empty: then the node's first output identifies it.
        label = (repr(onnx_node.name) if onnx_node.name
                 else f"with output {onnx_node.output[0]!r}")
        self.convention = f"onnx {onnx_node.op_type} node {label} (opset {self.opset})"
        unknown = sorted(self.attributes_names_ - set(_ATTRIBUTES))
        if unknown:
            raise fail(self.convention, unknown[0], "is not a ConvTranspose attribute (known: "
                       f"{', '.join(_ATTRIBUTES)})", getattr(self, unknown[0]))
        auto_pad = getattr(self, "auto_pad", "NOTSET")
        if isinstance(auto_pad, str):   # a wrong type is reported by the first run
            choice(self.convention, "auto_pad", auto_pad, AUTO_PADS)
        self._plan = None
        self._sources = (None, None)

    @classmethod
    def with_options(cls, *, method="auto", workers=None, check_weights=True):
        """A subclass (still named ``ConvTranspose``) with these options.

        The options become class attributes of the subclass (see the class's Attributes);
        the class itself is left unchanged.

        Parameters
        ----------
        method : {"auto", "direct", "fft", "reference", "tune"}, default "auto"
            Backend, as for `convt.ConvTranspose`.
        workers : int, optional
            Threads, as in ``scipy.fft`` (None: OpenMP's default).
        check_weights : bool, default True
            Whether a node's prepared operator is reused only while W and B hold the bits it
            was built from (False: while they are the same objects).

        Returns
        -------
        type
            Pass it in ``new_ops`` instead of the class itself.

        Raises
        ------
        ValueError
            An unknown ``method``.

        Examples
        --------
        >>> import convt
        >>> op = convt.onnx.ConvTransposeOp.with_options(method="direct", workers=1)
        >>> op.__name__, op.method, op.workers
        ('ConvTranspose', 'direct', 1)
        """
        method = choice("ConvTransposeOp.with_options", "method", method, METHODS)
        return type("ConvTranspose", (cls,), {"method": method, "workers": workers,
                                              "check_weights": bool(check_weights),
                                              "__module__": cls.__module__,
                                              "__doc__": cls.__doc__})

    def run(self, *args, **kwargs):
        """Compute the node's output; the evaluator calls it once per node and session run.

        ``onnx.reference``'s ``OpRun.run`` turns every TypeError of the computation into a
        generic one about the argument types; this override raises convt's TypeError
        instead, whose message names the node, the tensor and the rule it breaks.

        Parameters
        ----------
        *args : ndarray
            The node's inputs in order: X of shape (N, C_in, *spatial), W of shape
            (C_in, C_out / group, *kernel) and optionally B of shape (C_out,).
        **kwargs
            Passed on to ``onnx.reference.op_run.OpRun.run`` (the evaluator's
            ``linked_attributes``, ``context`` and ``bindings``).

        Returns
        -------
        tuple of ndarray
            ``(Y,)``: Y of shape (N, C_out, *out_spatial), with X's dtype.

        Raises
        ------
        TypeError
            A tensor type the operator version does not list, or X and W of different
            dtypes.
        ValueError
            An attribute convt (and the spec) rejects for these tensors.

        Examples
        --------
        >>> import numpy as np, convt
        >>> from onnx import TensorProto, helper, numpy_helper
        >>> from onnx.reference import ReferenceEvaluator
        >>> node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], name="up", strides=[2])
        >>> vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
        >>> w = numpy_helper.from_array(np.ones((1, 1, 2), np.float32), "W")
        >>> graph = helper.make_graph([node], "g", [vi("X")], [vi("Y")], [w])
        >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
        >>> sess = ReferenceEvaluator(model, new_ops=[convt.onnx.ConvTransposeOp])
        >>> sess.run(None, {"X": np.ones((1, 1, 3), np.float32)})[0]
        array([[[1., 1., 1., 1., 1., 1.]]], dtype=float32)
        >>> sess.run(None, {"X": np.ones((1, 1, 3), np.int32)})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        TypeError: onnx ConvTranspose node 'up' (opset 11): 'X' must have a floating dtype ...
        """
        try:
            return super().run(*args, **kwargs)
        except TypeError as e:
            if isinstance(e.__cause__, _NodeTypeError):
                raise TypeError(str(e.__cause__)) from e.__cause__.__cause__
            raise

    def _run(self, X, W, B=None, auto_pad="NOTSET", dilations=None, group=1,
             kernel_shape=None, output_padding=None, output_shape=None, pads=None,
             strides=None):
        attrs = dict(auto_pad=auto_pad, dilations=dilations, group=group,
                     kernel_shape=kernel_shape, output_padding=output_padding,
                     output_shape=output_shape, pads=pads, strides=strides)
        try:
            plan = self._prepared(W, B, attrs)
            return (plan(X),)
        except TypeError as e:
            raise _NodeTypeError(str(e)) from e

    def _prepared(self, W, B, attrs):
        """The plan for these weights: the cached one while W and B are unchanged."""
        plan = self._plan
        if plan is not None and self._unchanged(W, B, plan):
            return plan
        # Each run with new weights repacks them; the evaluator's initializers are the same
        # arrays on every run, so a model's weights are packed once.
        conv, allowed = self.convention, TYPES[self.version]
        _, w_iox, ba, dt, _, _ = intake(conv, None, W, B, allowed=allowed)
        spec = onnx_spec(conv, self.version, w_iox, ba, **attrs)
        self._plan = Plan(spec, w_iox, ba, dt, allowed=allowed, method=self.method,
                          workers=self.workers)
        self._sources = (W, B)
        return self._plan

    def _unchanged(self, W, B, plan):
        same = W is self._sources[0] and B is self._sources[1]
        if not self.check_weights or (same and _immutable(W) and _immutable(B)):
            return same
        return _same_bits(W, plan.w_iox) and _same_bits(B, plan.bias)


def _immutable(a):
    """``a`` views a ``bytes`` object (or is None): nothing can change its values. The
    evaluator's initializers are such views (``numpy_helper.to_array``, onnx 1.23)."""
    if a is None:
        return True
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, bytes)


def _same_bits(a, kept):
    """``a`` holds exactly the bits of ``kept`` (a plan's own C-ordered copy)."""
    if a is None or kept is None:
        return a is None and kept is None
    if not isinstance(a, np.ndarray) or a.dtype != kept.dtype or a.shape != kept.shape:
        return False
    # Unsigned views compare bits: NaN payloads and -0.0 count, as they do in the result.
    bits = np.dtype(f"u{kept.dtype.itemsize}")
    return bool(np.array_equal(np.ascontiguousarray(a).view(bits), kept.view(bits)))
