"""convt.onnx.backend under ONNX's own backend test machinery (onnx.backend.test.BackendTest).

Every ConvTranspose node test the installed onnx package ships (test_convtranspose*, 11 in
onnx 1.23) and the PyTorch-exported test_operator_convtranspose model run through the backend,
with each run also checking that convt, not the ONNX reference, computed the ConvTranspose
nodes. BackendTest's constructor normally builds every node test of every operator (about a
minute here); `_convtranspose_tests` hands it only the ConvTranspose ones, so the test set
is the one an unfiltered BackendTest with include("test_convtranspose") selects (checked
once by hand with onnx 1.23.2: the same 12 tests run).
"""
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import onnx.backend.test  # noqa: E402
import onnx.backend.test.runner as runner  # noqa: E402

import convt  # noqa: E402
from convt._onnx.ops import ConvTranspose as _Op  # noqa: E402

from _onnx_helpers import conv_transpose_model  # noqa: E402


class _CheckedRep(convt.onnx.BackendRep):
    """Fails a run whose ConvTranspose nodes did not go through convt's prepared plan."""

    def run(self, inputs, **kwargs):
        out = super().run(inputs, **kwargs)
        nodes = [n for n in self.session.rt_nodes_ if n.op_type == "ConvTranspose"]
        assert nodes and all(isinstance(n, _Op) and n._plan is not None for n in nodes)
        return out


class _CheckedBackend(convt.onnx.Backend):
    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        rep = super().prepare(model, device, **kwargs)
        rep.__class__ = _CheckedRep
        return rep


def _convtranspose_tests(data_dir=runner.load_model_tests.__defaults__[0], kind=None):
    if kind == "node" and not os.path.isdir(os.path.join(data_dir, "node")):
        # onnx 1.23 builds node cases in memory from onnx.backend.test.case.node; older
        # releases (1.17) ship them on disk, like the other kinds.
        import onnx.backend.test.case.node as cases
        import onnx.backend.test.case.node.convtranspose  # noqa: F401  (registers the cases)

        return [c for c in cases._NodeTestCases if c.name.startswith("test_convtranspose")]
    if kind in ("node", "pytorch-operator"):
        return [c for c in _load_model_tests(data_dir, kind) if "convtranspose" in c.name]
    return []


_load_model_tests = runner.load_model_tests
runner.load_model_tests = _convtranspose_tests
try:
    _backend_test = onnx.backend.test.BackendTest(_CheckedBackend, __name__)
finally:
    runner.load_model_tests = _load_model_tests
_backend_test.include("test_convtranspose").include("test_operator_convtranspose")

_ONNX_CASES = {}
for _name, _case in _backend_test.test_cases.items():
    # CPU only: drop the CUDA twins rather than list a dozen skips on every run.
    for _attr in [a for a in vars(_case) if a.endswith("_cuda")]:
        delattr(_case, _attr)
    _ONNX_CASES.update({a: _case for a in vars(_case) if a.startswith("test_")})
    globals()[_name] = _case


def test_backend_test_holds_the_convtranspose_cases():
    assert len(_ONNX_CASES) >= 12, sorted(_ONNX_CASES)
    assert "test_convtranspose_autopad_same_cpu" in _ONNX_CASES
    assert "test_operator_convtranspose_cpu" in _ONNX_CASES
    assert all("convtranspose" in name for name in _ONNX_CASES)


# The backend's own interface -------------------------------------------------------------

def _model():
    w = np.arange(12, dtype=np.float32).reshape(2, 2, 3) / 7
    return conv_transpose_model(w, np.array([0.5, -1], np.float32), x_shape=[1, 2, 4],
                                strides=[2], pads=[1, 0]), w


def test_prepare_run_sequence_dict_and_names():
    model, w = _model()
    rep = convt.onnx.backend.prepare(model)
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 2, 4)
    expected = convt.onnx.conv_transpose(x, w, np.array([0.5, -1], np.float32), strides=[2],
                                         pads=[1, 0], method="reference")
    for out in (rep.run([x]), rep.run(x), rep.run({"X": x})):
        np.testing.assert_allclose(out[0], expected, rtol=1e-6, atol=1e-6)
        assert out.Y.dtype == np.float32 and out.Y.shape == (1, 2, 8)
    assert rep.input_names == ["X"] and rep.output_names == ["Y"]


def test_run_model_and_options_reach_the_operator():
    model, _ = _model()
    x = np.ones((1, 2, 4), np.float32)
    ref = convt.onnx.backend.run_model(model, [x], method="reference")
    rep = convt.onnx.backend.prepare(model, method="direct", workers=1)
    np.testing.assert_allclose(rep.run([x])[0], ref[0], rtol=1e-6, atol=1e-6)
    node = rep.session.rt_nodes_[0]
    assert node.method == "direct" and node._plan.workers == 1


def test_prepare_accepts_serialized_models_and_paths(tmp_path):
    model, _ = _model()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    x = np.ones((1, 2, 4), np.float32)
    a = convt.onnx.backend.prepare(model.SerializeToString()).run([x])[0]
    b = convt.onnx.backend.prepare(path).run([x])[0]
    np.testing.assert_array_equal(a, b)


def test_run_node():
    node = onnx.helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=[2],
                                 auto_pad="SAME_UPPER")
    x, w = np.ones((1, 1, 3), np.float64), np.ones((1, 1, 2), np.float64)
    (y,) = convt.onnx.backend.run_node(node, [x, w], opset_version=10)
    # ConvTranspose-1 (opset 10): SAME keeps the input length.
    assert y.shape == (1, 1, 3) and y.dtype == np.float64
    (y,) = convt.onnx.backend.run_node(node, [x, w])
    assert y.shape == (1, 1, 6)


def test_devices_and_compatibility():
    model, _ = _model()
    assert convt.onnx.backend.supports_device("CPU")
    assert not convt.onnx.backend.supports_device("CUDA")
    assert convt.onnx.backend.is_compatible(model)
    model.graph.node[0].op_type = "NoSuchOp"
    assert not convt.onnx.backend.is_compatible(model)


@pytest.mark.parametrize("call, exc, match", [
    (lambda m: convt.onnx.backend.prepare(m, "CUDA"), ValueError,
     "onnx backend: 'device' must be 'CPU'; got 'CUDA'"),
    (lambda m: convt.onnx.backend.prepare(m, threads=2), TypeError,
     "onnx backend: 'threads' is not an option"),
    (lambda m: convt.onnx.backend.prepare(m).run([]), ValueError,
     r"onnx backend: 'inputs' must be 1 arrays, one per graph input \['X'\]; got '0 arrays'"),
    (lambda m: convt.onnx.backend.prepare(m).run({"x": 1}), ValueError,
     r"onnx backend: 'inputs' must hold every graph input \['X'\]; got \['x'\]"),
])
def test_backend_errors(call, exc, match):
    model, _ = _model()
    with pytest.raises(exc, match=match):
        call(model)
