"""A minimal ONNX backend: whole models on ``onnx.reference`` with convt's ConvTranspose.

``onnx.backend.base.Backend`` is the interface ONNX's backend test machinery
(``onnx.backend.test.BackendTest``) drives; this one runs a model with
``ReferenceEvaluator(model, new_ops=[ConvTranspose])``: convt computes every ConvTranspose node,
the ONNX reference every other node. Like ``onnxruntime.backend``, the module also exposes
``prepare``, ``run_model``, ``run_node``, ``supports_device`` and ``is_compatible`` as
functions, so ``convt.onnx.backend`` can be used as a module or passed to ``BackendTest``.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx.backend.base import Backend as _Backend
from onnx.backend.base import BackendRep as _BackendRep
from onnx.backend.base import namedtupledict
from onnx.reference import ReferenceEvaluator

from .ops import ConvTranspose
from .._geometry.validate import fail

__all__ = ["Backend", "BackendRep", "prepare", "run_model", "run_node", "supports_device",
           "is_compatible"]

_OPTIONS = ("method", "workers", "check_weights")


class BackendRep(_BackendRep):
    """A model prepared for repeated runs (what `Backend.prepare` returns).

    It holds one ``onnx.reference.ReferenceEvaluator`` for the model, so each ConvTranspose
    node keeps its prepared operator (resolved attributes, packed weights) from run to run.
    `Backend.prepare` also checks the model; this class does not.

    Parameters
    ----------
    model : onnx.ModelProto
        The model to run.
    op : type, optional
        The ConvTranspose operator class (``ConvTransposeOp``, the default, or a
        ``with_options`` subclass).

    Attributes
    ----------
    session : onnx.reference.ReferenceEvaluator
        The evaluator, with ``op`` plugged in; its ConvTranspose nodes keep their prepared
        operators between runs.
    input_names : list of str
        The graph inputs a run takes, in order (initializers listed as inputs excluded).
    output_names : list of str
        The graph outputs, in order.

    Examples
    --------
    >>> import numpy as np, convt
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=[2])
    >>> vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
    >>> w = numpy_helper.from_array(np.ones((1, 1, 2), np.float32), "W")
    >>> graph = helper.make_graph([node], "g", [vi("X"), vi("W")], [vi("Y")], [w])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    >>> rep = convt.onnx.BackendRep(model)
    >>> rep.input_names, rep.output_names    # W is an initializer: not a run's input
    (['X'], ['Y'])
    >>> rep.run(np.ones((1, 1, 3), np.float32)).Y
    array([[[1., 1., 1., 1., 1., 1.]]], dtype=float32)
    """

    def __init__(self, model, op=ConvTranspose):
        self.session = ReferenceEvaluator(model, new_ops=[op])
        inits = {t.name for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in inits]
        self.output_names = list(self.session.output_names)

    def run(self, inputs, **kwargs):
        """Run the model.

        Parameters
        ----------
        inputs : ndarray, sequence of ndarray or dict
            One array per graph input in order (`input_names`), or a name -> array dict.
        **kwargs
            Ignored, as the base class does.

        Returns
        -------
        tuple
            The outputs in graph order; also addressable by output name (``namedtupledict``).

        Raises
        ------
        ValueError
            A sequence of the wrong length, or a dict missing an input.

        Examples
        --------
        >>> import numpy as np, convt
        >>> from onnx import TensorProto, helper
        >>> node = helper.make_node("ConvTranspose", ["X", "W", "B"], ["Y"])
        >>> vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
        >>> graph = helper.make_graph([node], "g", [vi("X", [1, 1, 2]), vi("W", [1, 1, 2]),
        ...                                         vi("B", [1])], [vi("Y", [1, 1, 3])])
        >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
        >>> rep = convt.onnx.backend.prepare(model)
        >>> x, w = np.ones((1, 1, 2), np.float32), np.ones((1, 1, 2), np.float32)
        >>> b = np.full(1, 0.5, np.float32)
        >>> rep.run([x, w, b])[0]
        array([[[1.5, 2.5, 1.5]]], dtype=float32)
        >>> rep.run({"X": x, "W": w, "B": -b}).Y
        array([[[0.5, 1.5, 0.5]]], dtype=float32)
        >>> rep.run([x, w])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        ValueError: onnx backend: 'inputs' must be 3 arrays, one per graph input ...
        """
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise fail("onnx backend", "inputs", f"must hold every graph input "
                           f"{self.input_names}", sorted(inputs))
            feeds = dict(inputs)
        else:
            seq = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            if len(seq) != len(self.input_names):
                raise fail("onnx backend", "inputs", f"must be {len(self.input_names)} arrays, "
                           f"one per graph input {self.input_names}", f"{len(seq)} arrays")
            feeds = dict(zip(self.input_names, seq))
        outputs = self.session.run(None, feeds)
        return namedtupledict("Outputs", self.output_names)(*outputs)


class Backend(_Backend):
    """ONNX backend running models on ``onnx.reference`` with convt's ConvTranspose.

    Every ConvTranspose node (ai.onnx domain) runs on convt, with the semantics of the opset
    the model imports; every other node on the ONNX reference implementation. CPU only.

    Examples
    --------
    >>> import numpy as np, convt
    >>> from onnx import TensorProto, helper
    >>> node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=[2])
    >>> vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
    >>> graph = helper.make_graph([node], "g", [vi("X", [1, 1, 3]), vi("W", [1, 1, 2])],
    ...                           [vi("Y", [1, 1, 6])])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    >>> rep = convt.onnx.backend.prepare(model)
    >>> x, w = np.ones((1, 1, 3), np.float32), np.ones((1, 1, 2), np.float32)
    >>> rep.run([x, w])[0]
    array([[[1., 1., 1., 1., 1., 1.]]], dtype=float32)
    >>> rep.run({"X": x, "W": 2 * w}).Y      # new weights: the node prepares again
    array([[[2., 2., 2., 2., 2., 2.]]], dtype=float32)
    """

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        """Check ``model`` and prepare it for runs.

        The ONNX checker validates the model first; each ConvTranspose node then builds its
        operator on the first run and reuses it while its weights are unchanged.

        Parameters
        ----------
        model : onnx.ModelProto, bytes, str or os.PathLike
            The model, its serialized bytes, or the path of a model file.
        device : str, default "CPU"
            Only "CPU" (or "CPU:n").
        **kwargs
            Options of the ConvTranspose operator: ``method``, ``workers`` and
            ``check_weights``, as for ``convt.onnx.ConvTransposeOp.with_options``.

        Returns
        -------
        BackendRep
            The prepared model; call its ``run``.

        Raises
        ------
        ValueError
            A device other than CPU.
        TypeError
            An unknown keyword.
        onnx.checker.ValidationError
            A model the ONNX checker rejects.

        Examples
        --------
        >>> import numpy as np, convt
        >>> from onnx import TensorProto, helper
        >>> node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=[2])
        >>> vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
        >>> graph = helper.make_graph([node], "g", [vi("X", [1, 1, 3]), vi("W", [1, 1, 2])],
        ...                           [vi("Y", [1, 1, 6])])
        >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
        >>> rep = convt.onnx.Backend.prepare(model.SerializeToString(), method="direct",
        ...                                  workers=1)
        >>> x, w = np.arange(3, dtype=np.float32).reshape(1, 1, 3), np.ones((1, 1, 2), np.float32)
        >>> rep.run([x, w]).Y
        array([[[0., 0., 1., 1., 2., 2.]]], dtype=float32)
        >>> convt.onnx.Backend.prepare(model, threads=1)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        TypeError: onnx backend: 'threads' is not an option (known: method, workers, ...); got 1
        """
        if isinstance(model, (str, bytes, os.PathLike)):
            model = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(model)
        if not cls.supports_device(device):
            raise fail("onnx backend", "device", "must be 'CPU'", device)
        unknown = sorted(set(kwargs) - set(_OPTIONS))
        if unknown:
            raise fail("onnx backend", unknown[0], f"is not an option (known: "
                       f"{', '.join(_OPTIONS)})", kwargs[unknown[0]], exc=TypeError)
        super().prepare(model, device)   # onnx.checker.check_model
        op = ConvTranspose.with_options(**kwargs) if kwargs else ConvTranspose
        return BackendRep(model, op)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        """Run one node on ``inputs`` (one array per non-empty node input).

        The node is checked by the ONNX checker, wrapped in a one-node model whose inputs
        have the arrays' dtypes and shapes, and run as `BackendRep` runs a model.

        Parameters
        ----------
        node : onnx.NodeProto
            The node; ConvTranspose nodes of the ai.onnx domain run on convt, any other on the
            ONNX reference implementation.
        inputs : sequence of ndarray
            One array per non-empty name in ``node.input``, in order.
        device : str, default "CPU"
            Accepted for the interface; the node runs on the CPU whatever it names.
        outputs_info : sequence of (dtype, shape), optional
            Accepted for the interface (ONNX's backend tests pass the expected outputs);
            unused.
        **kwargs
            ``opset_version`` (int, default: the installed onnx's latest opset) selects the
            operator version; ``method``, ``workers`` and ``check_weights`` configure the
            ConvTranspose operator, as for ``convt.onnx.ConvTransposeOp.with_options``.

        Returns
        -------
        tuple of ndarray
            The node's outputs in order; also addressable by output name
            (``namedtupledict``).

        Raises
        ------
        onnx.checker.ValidationError
            A node the ONNX checker rejects at ``opset_version``.
        TypeError
            An unknown keyword, or input types the operator version does not list.
        ValueError
            Attributes convt (and the spec) rejects for these inputs.

        Examples
        --------
        >>> import numpy as np, convt
        >>> from onnx import helper
        >>> node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=[2],
        ...                         output_shape=[5])
        >>> x, w = np.ones((1, 1, 3), np.float32), np.ones((1, 1, 2), np.float32)
        >>> convt.onnx.Backend.run_node(node, [x, w]).Y         # 6 long, 1 cut at the start
        array([[[1., 1., 1., 1., 1.]]], dtype=float32)
        >>> convt.onnx.Backend.run_node(node, [x, w], opset_version=10)[0]   # ConvTranspose-1
        array([[[1., 1., 1., 1., 1.]]], dtype=float32)
        """
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        super().run_node(node, inputs, device, outputs_info, opset_version=opset)
        names = [n for n in node.input if n]
        vis = [onnx.helper.make_tensor_value_info(
            n, onnx.helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype), np.shape(a))
            for n, a in zip(names, inputs)]
        outs = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
                for n in node.output if n]
        graph = onnx.helper.make_graph([node], "run_node", vis, outs)
        model = onnx.helper.make_model(
            graph, opset_imports=[onnx.helper.make_opsetid(node.domain, opset)])
        op = ConvTranspose.with_options(**kwargs) if kwargs else ConvTranspose
        return BackendRep(model, op).run(list(inputs))

    @classmethod
    def supports_device(cls, device):
        """Whether ``device`` is the CPU, the one device this backend runs on.

        Parameters
        ----------
        device : str
            A device name, such as "CPU", "CPU:0" or "CUDA" (case-insensitive).

        Returns
        -------
        bool
            True for "CPU" (optionally "CPU:n"), False otherwise.

        Examples
        --------
        >>> import convt
        >>> convt.onnx.Backend.supports_device("CPU"), convt.onnx.Backend.supports_device("cpu:0")
        (True, True)
        >>> convt.onnx.Backend.supports_device("CUDA")
        False
        """
        return str(device).split(":")[0].upper() == "CPU"

    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):
        """Whether this backend can run ``model`` on ``device``.

        It can when the device is the CPU and every node of the main graph is an operator
        ONNX defines (what the reference evaluator implements) or a function the model
        defines. Operator versions and attributes are not checked.

        Parameters
        ----------
        model : onnx.ModelProto
            The model.
        device : str, default "CPU"
            The device, as for `supports_device`.
        **kwargs
            Accepted for the interface; ignored.

        Returns
        -------
        bool
            True when the model can run here.

        Examples
        --------
        >>> import convt
        >>> from onnx import TensorProto, helper
        >>> vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
        >>> def model_of(op_type, domain=""):
        ...     node = helper.make_node(op_type, ["X", "W"], ["Y"], domain=domain)
        ...     graph = helper.make_graph([node], "g", [vi("X"), vi("W")], [vi("Y")])
        ...     return helper.make_model(graph, opset_imports=[
        ...         helper.make_opsetid("", 22), helper.make_opsetid("my.ops", 1)])
        >>> convt.onnx.Backend.is_compatible(model_of("ConvTranspose"))
        True
        >>> convt.onnx.Backend.is_compatible(model_of("ConvTranspose"), device="CUDA")
        False
        >>> convt.onnx.Backend.is_compatible(model_of("Deconv", domain="my.ops"))
        False
        """
        local = {(f.domain, f.name) for f in model.functions}
        return cls.supports_device(device) and all(
            (n.domain, n.op_type) in local or onnx.defs.has(n.op_type, n.domain)
            for n in model.graph.node)


prepare = Backend.prepare
run_model = Backend.run_model
run_node = Backend.run_node
supports_device = Backend.supports_device
is_compatible = Backend.is_compatible
