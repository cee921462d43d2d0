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

from ._onnx_ops import ConvTranspose
from ._validate import fail

__all__ = ["Backend", "BackendRep", "prepare", "run_model", "run_node", "supports_device",
           "is_compatible"]

_OPTIONS = ("method", "workers", "check_weights")


class BackendRep(_BackendRep):
    """A model prepared for repeated runs (what `Backend.prepare` returns).

    Parameters
    ----------
    model : onnx.ModelProto
    op : type
        The ConvTranspose operator class (``ConvTransposeOp`` or a ``with_options`` subclass).

    Attributes
    ----------
    session : onnx.reference.ReferenceEvaluator
        The evaluator, with ``op`` plugged in; its ConvTranspose nodes keep their prepared
        operators between runs.
    input_names : list of str
        The graph inputs a run takes, in order (initializers listed as inputs excluded).
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

        Parameters
        ----------
        model : onnx.ModelProto, bytes or path
        device : str, default "CPU"
            Only "CPU".
        method, workers, check_weights
            Keyword options for the ConvTranspose operator
            (``convt.onnx.ConvTransposeOp.with_options``).

        Returns
        -------
        BackendRep

        Raises
        ------
        ValueError
            A device other than CPU.
        TypeError
            An unknown keyword.
        onnx.checker.ValidationError
            A model the ONNX checker rejects.
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

        ``opset_version`` (default: the installed onnx's latest) selects the operator
        version; ``method``, ``workers`` and ``check_weights`` are passed to `prepare`.
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
        """True for "CPU" (optionally "CPU:n"), False otherwise."""
        return str(device).split(":")[0].upper() == "CPU"

    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):
        """Whether every node is a model-local function or an operator ONNX defines (what
        the reference evaluator implements), and the device is the CPU."""
        local = {(f.domain, f.name) for f in model.functions}
        return cls.supports_device(device) and all(
            (n.domain, n.op_type) in local or onnx.defs.has(n.op_type, n.domain)
            for n in model.graph.node)


prepare = Backend.prepare
run_model = Backend.run_model
run_node = Backend.run_node
supports_device = Backend.supports_device
is_compatible = Backend.is_compatible
