"""docs/examples/onnx_dcgan.py runs (at a small width) and its two evaluators agree."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from conftest import needs_source_tree

pytest.importorskip("onnx")
pytestmark = needs_source_tree  # docs/examples/ is not in a wheel

SCRIPT = Path(__file__).parents[1] / "docs" / "examples" / "onnx_dcgan.py"


def _load():
    spec = importlib.util.spec_from_file_location("onnx_dcgan", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dcgan_example_runs_and_agrees(capsys):
    example = _load()
    result = example.main(["--ngf", "2", "--nz", "8", "--batch", "2", "--repeat", "1"])
    out = capsys.readouterr().out
    assert result["ok"] and result["shape"] == (2, 3, 64, 64), out
    assert "ReferenceEvaluator + convt" in out and "agree" in out


def test_dcgan_example_model_is_the_generator():
    import onnx

    model = _load().build_generator(nz=8, ngf=2)
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert ops == ["ConvTranspose", "BatchNormalization", "Relu"] * 4 + ["ConvTranspose", "Tanh"]
    widths = [numpy_w.dims[1] for numpy_w in model.graph.initializer if numpy_w.name[0] == "w"]
    assert widths == [16, 8, 4, 2, 3]
    assert np.all([len(n.input) == 2 for n in model.graph.node if n.op_type == "ConvTranspose"])
