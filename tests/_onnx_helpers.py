"""One-node ConvTranspose models built with onnx.helper, for the tests of convt.onnx's
evaluator op and backend (callers importorskip onnx first)."""
import numpy as np
from onnx import helper, numpy_helper


def conv_transpose_model(w, b=None, *, opset=11, x_shape=None, x_dtype=None, name="up",
                         weights_as_inputs=False, **attrs):
    """Model Y = ConvTranspose(X, W[, B]) with W and B as initializers (or graph inputs)."""
    et = helper.np_dtype_to_tensor_dtype(np.dtype(x_dtype or w.dtype))
    node = helper.make_node("ConvTranspose", ["X", "W"] + (["B"] if b is not None else []),
                            ["Y"], name=name, **attrs)
    x_shape = [None] * w.ndim if x_shape is None else x_shape   # the checker wants a rank
    tensors = [("W", w)] + ([("B", b)] if b is not None else [])
    inputs = [helper.make_tensor_value_info("X", et, x_shape)]
    if weights_as_inputs:
        inputs += [helper.make_tensor_value_info(n, et, a.shape) for n, a in tensors]
        inits = []
    else:
        inits = [numpy_helper.from_array(a, n) for n, a in tensors]
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("Y", et, [None] * w.ndim)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
