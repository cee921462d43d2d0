"""convt against the peers its users would otherwise pick, on the 14 workloads of the harness.

Peers: PyTorch (``torch.nn.functional.conv_transpose{1,2,3}d``, oneDNN inside), ONNX Runtime
(CPU provider) and OpenVINO (CPU plugin), each given ``OMP_NUM_THREADS`` threads (the asv
matrix's) and its weights bound once in ``setup``, like a prepared ``convt.ConvTranspose``
(``method="auto"``, the default). float32. The callables are adapted from the team's harness
(``../shared/bench/peers.py``). A peer that is not installed is skipped; none of them is a
project dependency (install them into the benchmarking environment: see README.md).
"""
import numpy as np

import convt

from .common import THREADS, WORKLOADS, attrs, make_inputs

IMPLS = ["convt", "torch", "onnxruntime", "openvino"]


def _import(module, impl):
    try:
        return __import__(module)
    except ImportError:
        raise NotImplementedError(f"{impl} needs {module}, which is not installed")


def make_convt(shapes, x, w, b):
    op = convt.ConvTranspose(w, b, **attrs(shapes))
    return lambda: op(x)


def make_torch(shapes, x, w, b):
    torch = _import("torch", "torch")
    import torch.nn.functional as F
    torch.set_num_threads(THREADS)
    a, d = attrs(shapes), x.ndim - 2
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[d]
    # torch pads symmetrically only: pad by the smaller side, crop the rest from the output.
    pb, pe = a["pads"][:d], a["pads"][d:]
    pad = tuple(min(p, q) for p, q in zip(pb, pe))
    crop = [(p - m, q - m) for p, q, m in zip(pb, pe, pad)]
    tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)

    def run():
        with torch.no_grad():
            y = fn(tx, tw, tb, stride=a["strides"], padding=pad,
                   output_padding=a["output_padding"], groups=a["group"], dilation=a["dilations"])
        window = tuple(slice(cb, n - ce) for (cb, ce), n in zip(crop, y.shape[2:]))
        return y[(slice(None), slice(None)) + window].numpy()
    return run


def onnx_model(shapes, x, w, b, impl, opset=17):
    """A one-node ONNX model, ConvTranspose with W and B as initializers, as bytes."""
    _import("onnx", impl)
    from onnx import TensorProto, helper, numpy_helper
    a = attrs(shapes)
    node = helper.make_node("ConvTranspose", ["X", "W", "B"], ["Y"], strides=list(a["strides"]),
                            pads=list(a["pads"]), dilations=list(a["dilations"]),
                            group=a["group"], output_padding=list(a["output_padding"]))
    graph = helper.make_graph(
        [node], "convtranspose", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8   # readable by older runtimes than the installed onnx writes for
    return model.SerializeToString()


def make_onnxruntime(shapes, x, w, b):
    ort = _import("onnxruntime", "onnxruntime")
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = THREADS, 1
    sess = ort.InferenceSession(onnx_model(shapes, x, w, b, "onnxruntime"), so,
                                providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, {"X": x})[0]


def make_openvino(shapes, x, w, b):
    ov = _import("openvino", "openvino")
    core = ov.Core()
    model = core.read_model(onnx_model(shapes, x, w, b, "openvino"), b"")
    compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": THREADS,
                                                 "INFERENCE_PRECISION_HINT": "f32"})
    req = compiled.create_infer_request()

    def run():
        req.infer({0: x})
        return req.get_output_tensor(0).data.copy()   # the others return fresh arrays too
    return run


MAKERS = {"convt": make_convt, "torch": make_torch, "onnxruntime": make_onnxruntime,
          "openvino": make_openvino}


class Peers:
    number = 1
    repeat = (3, 10, 4.0)
    timeout = 120
    params = [list(WORKLOADS), IMPLS]
    param_names = ["workload", "impl"]

    def setup(self, workload, impl):
        shapes = WORKLOADS[workload]
        x, w, b = make_inputs(shapes)
        self.run = MAKERS[impl](shapes, x, w, b)
        y = np.asarray(self.run())   # also the warm-up call
        if impl != "convt":
            # Same layer or no comparison: normwise error against convt, as compare.py checks.
            ref = convt.conv_transpose(x, w, b, **attrs(shapes))
            assert y.shape == ref.shape, f"{impl} output shape {y.shape} != {ref.shape}"
            err = float(np.abs(y - ref).max() / np.abs(ref).max())
            assert err < 1e-4, f"{impl} differs from convt: max normwise error {err:.2e}"

    def time_prepared(self, workload, impl):
        self.run()
