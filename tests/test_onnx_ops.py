"""convt.onnx.ConvTransposeOp inside onnx.reference.ReferenceEvaluator: convt's own cases
(what ONNX's node tests never cover), the opset taken from the model, the prepared operator
kept per node, errors naming the node, and the lazy import.

Oracle: convt's NumPy reference (``method="reference"``) always. The ONNX reference
evaluator's own ConvTranspose is a second oracle only where it follows the spec; where
shared/CONVENTIONS.md records that it does not (odd split with NOTSET / VALID and
output_shape, several channels per group, the bias with group > 1, ConvTranspose-1's SAME
and output_shape rules), the spec is right and only the NumPy reference is used
(``onnx_ok=False`` below); test_onnx_reference_deviates_there shows the deviation.
"""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx.reference import ReferenceEvaluator  # noqa: E402

import convt  # noqa: E402
from conftest import TOL, np_dtype, ml_dtypes  # noqa: E402

from _onnx_helpers import conv_transpose_model  # noqa: E402

# name: (x shape, w shape, group, opset, attributes, onnx reference follows the spec)
CASES = {
    "same_lower_odd_2d": ((1, 3, 5, 5), (3, 2, 3, 3), 1, 11,
                          dict(strides=[2, 2], auto_pad="SAME_LOWER"), True),
    "same_lower_output_padding_dilated_1d": ((2, 2, 4), (2, 3, 3), 1, 11,
                                             dict(strides=[3], dilations=[2],
                                                  output_padding=[1], auto_pad="SAME_LOWER"),
                                             True),
    "output_shape_notset_odd": ((1, 2, 3, 4), (2, 2, 3, 3), 1, 11,
                                dict(strides=[2, 3], output_shape=[6, 10]), False),
    "output_shape_valid_odd": ((1, 2, 3, 4), (2, 2, 3, 3), 1, 11,
                               dict(strides=[2, 3], output_shape=[6, 10], auto_pad="VALID"),
                               False),
    "output_shape_same_upper_odd": ((1, 2, 3, 4), (2, 2, 3, 3), 1, 11,
                                    dict(strides=[2, 3], output_shape=[6, 10],
                                         auto_pad="SAME_UPPER"), True),
    "output_shape_same_lower_odd": ((1, 2, 3, 4), (2, 2, 3, 3), 1, 11,
                                    dict(strides=[2, 3], output_shape=[6, 10],
                                         auto_pad="SAME_LOWER"), True),
    "group_3_in_2_out_per_group_bias": ((2, 6, 4, 4), (6, 2, 3, 3), 2, 11,
                                        dict(strides=[2, 2], pads=[1, 0, 0, 1]), False),
    "depthwise_bias": ((1, 4, 5, 5), (4, 1, 4, 4), 4, 11,
                       dict(strides=[2, 2], pads=[1, 1, 1, 1]), False),
    "opset10_output_shape_same_upper_odd": ((1, 2, 3, 4), (2, 2, 3, 3), 1, 10,
                                            dict(strides=[2, 3], output_shape=[6, 10],
                                                 auto_pad="SAME_UPPER"), False),
    "opset1_same_upper": ((1, 2, 3, 4), (2, 2, 3, 3), 1, 1,
                          dict(strides=[2, 2], auto_pad="SAME_UPPER"), False),
    "opset22_3d_pads_dilations_output_padding": ((1, 2, 3, 4, 3), (2, 3, 2, 3, 2), 1, 22,
                                                 dict(strides=[2, 1, 3], dilations=[1, 2, 1],
                                                      pads=[1, 0, 0, 0, 2, 1],
                                                      output_padding=[1, 0, 2]), True),
}


def _case(name, dtype="float32"):
    xs, ws, group, opset, attrs, onnx_ok = CASES[name]
    rng = np.random.default_rng(7)
    dt = np_dtype(dtype)
    x, w = rng.standard_normal(xs).astype(dt), rng.standard_normal(ws).astype(dt)
    b = rng.standard_normal(ws[1] * group).astype(dt)
    model = conv_transpose_model(w, b, opset=opset, group=group, x_shape=list(xs), **attrs)
    expected = convt.onnx.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                         b.astype(np.float64), opset=opset, group=group,
                                         method="reference", **attrs)
    return model, x, expected, onnx_ok


def _close(y, expected, dtype, backend="direct"):
    assert y.dtype == np_dtype(dtype) and y.shape == expected.shape
    tol = TOL[(backend, dtype)]
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(np.asarray(y, np.float64), expected, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_extra_cases_through_the_backend(name, dtype):
    model, x, expected, onnx_ok = _case(name, dtype)
    y = convt.onnx.backend.prepare(model).run([x])[0]
    _close(y, expected, dtype)
    if onnx_ok and dtype != "float16":   # the ONNX reference rounds float16 per product
        plain = ReferenceEvaluator(model).run(None, {"X": x})[0]
        _close(plain, expected, dtype)


@pytest.mark.skipif(onnx.__version__.split(".")[:2] != ["1", "23"],
                    reason="deviations measured with onnx 1.23")
@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if not c[-1]))
def test_onnx_reference_deviates_there(name):
    # If this fails, the installed onnx fixed its ConvTranspose: flip onnx_ok in CASES.
    model, x, expected, _ = _case(name, "float64")
    try:
        plain = ReferenceEvaluator(model).run(None, {"X": x})[0]
    except ValueError:
        return
    assert plain.shape != expected.shape or not np.allclose(plain, expected)


def _onnx_has_ml_dtypes_bfloat16():
    try:
        onnx.helper.np_dtype_to_tensor_dtype(np_dtype("bfloat16"))
    except (ValueError, KeyError):
        return False
    return True


@pytest.mark.skipif(ml_dtypes is None or not _onnx_has_ml_dtypes_bfloat16(),
                    reason="bfloat16 needs ml_dtypes and an onnx that maps it")
def test_bfloat16_needs_opset_22():
    model, x, expected, _ = _case("opset22_3d_pads_dilations_output_padding", "bfloat16")
    _close(convt.onnx.backend.prepare(model).run([x])[0], expected, "bfloat16")
    model.opset_import[0].version = 21
    with pytest.raises(TypeError, match=r"onnx ConvTranspose node 'up' \(opset 21\): 'W' "):
        convt.onnx.backend.prepare(model).run([x])


@pytest.mark.parametrize("opset, version", [(1, 1), (10, 1), (11, 11), (21, 11), (22, 22)])
def test_operator_version_follows_the_model_opset(opset, version):
    x = np.arange(12, dtype=np.float64).reshape(1, 1, 3, 4)
    w = np.ones((1, 1, 3, 3))
    attrs = dict(strides=[2, 3], output_shape=[6, 10])   # odd totals: the opsets split apart
    model = conv_transpose_model(w, opset=opset, **attrs)
    sess = ReferenceEvaluator(model, new_ops=[convt.onnx.ConvTransposeOp])
    y = sess.run(None, {"X": x})[0]
    assert sess.rt_nodes_[0].version == version
    np.testing.assert_array_equal(y, convt.onnx.conv_transpose(x, w, opset=opset, **attrs))
    other = 11 if version == 1 else 1
    assert not np.array_equal(y, convt.onnx.conv_transpose(x, w, opset=other, **attrs))


def test_control_flow_subgraphs_run_on_convt():
    from onnx import TensorProto, helper, numpy_helper

    w = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    vi = lambda name, shape=None: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    branch = lambda node, out: helper.make_graph([node], out, [], [vi(out)])
    node = helper.make_node("If", ["C"], ["Y"], then_branch=branch(helper.make_node(
        "ConvTranspose", ["X", "W"], ["T"], name="inner", strides=[2], output_shape=[6]), "T"),
        else_branch=branch(helper.make_node("Identity", ["X"], ["E"]), "E"))
    graph = helper.make_graph([node], "g", [vi("X", [1, 1, 3]), helper.make_tensor_value_info(
        "C", TensorProto.BOOL, [])], [vi("Y")], [numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    sess = ReferenceEvaluator(model, new_ops=[convt.onnx.ConvTransposeOp])
    x = np.array([[[1, 2, 3]]], np.float32)
    y = sess.run(None, {"X": x, "C": np.array(True)})[0]
    inner = sess.rt_nodes_[0].then_branch.rt_nodes_[0]
    assert isinstance(inner, convt.onnx.ConvTransposeOp) and inner.version == 1
    np.testing.assert_array_equal(y, convt.onnx.conv_transpose(x, w, opset=10, strides=[2],
                                                               output_shape=[6]))


# The prepared operator, per node ---------------------------------------------------------

def _weights():
    rng = np.random.default_rng(3)
    return (rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
            rng.standard_normal(3).astype(np.float32))


def _expected(x, w, b):
    return convt.onnx.conv_transpose(x, w, b, strides=[2, 2], method="reference")


def test_plan_built_once_for_initializers():
    w, b = _weights()
    sess = ReferenceEvaluator(conv_transpose_model(w, b, strides=[2, 2]),
                              new_ops=[convt.onnx.ConvTransposeOp])
    node = sess.rt_nodes_[0]
    plans = set()
    for n in (5, 7, 5):   # new input shapes reuse the plan (it caches per shape)
        x = np.ones((1, 4, n, n), np.float32)
        _close(sess.run(None, {"X": x})[0], _expected(x, w, b), "float32")
        plans.add(id(node._plan))
    assert len(plans) == 1


def test_initializers_skip_the_bit_comparison(monkeypatch):
    # Initializers are read-only views of immutable bytes: the same objects cannot change.
    w, b = _weights()
    sess = ReferenceEvaluator(conv_transpose_model(w, b, strides=[2, 2]),
                              new_ops=[convt.onnx.ConvTransposeOp])
    x = np.ones((1, 4, 5, 5), np.float32)
    sess.run(None, {"X": x})
    from convt._onnx import ops as _onnx_ops

    assert _onnx_ops._immutable(sess.rt_inits_["W"]) and not _onnx_ops._immutable(w)
    monkeypatch.setattr(_onnx_ops, "_same_bits", None)   # any call would fail
    _close(sess.run(None, {"X": x})[0], _expected(x, w, b), "float32")


@pytest.mark.parametrize("check_weights", [True, False])
def test_new_weight_arrays_are_never_stale(check_weights):
    w, b = _weights()
    op = convt.onnx.ConvTransposeOp.with_options(check_weights=check_weights)
    sess = ReferenceEvaluator(conv_transpose_model(w, b, strides=[2, 2],
                                                   weights_as_inputs=True), new_ops=[op])
    x = np.ones((1, 4, 5, 5), np.float32)
    for w_, b_ in [(w, b), (2 * w, b), (2 * w, b + 1), (2 * w, None)]:
        feeds = {"X": x, "W": w_, "B": b_ if b_ is not None else np.zeros(3, np.float32)}
        _close(sess.run(None, feeds)[0], _expected(x, feeds["W"], feeds["B"]), "float32")


def test_weights_changed_in_place_are_seen():
    # Initializers are read-only arrays; weights fed as inputs can change in place.
    w, b = _weights()
    sess = ReferenceEvaluator(conv_transpose_model(w, b, strides=[2, 2],
                                                   weights_as_inputs=True),
                              new_ops=[convt.onnx.ConvTransposeOp])
    x = np.ones((1, 4, 5, 5), np.float32)
    feeds = {"X": x, "W": w, "B": b}
    sess.run(None, feeds)
    plan = sess.rt_nodes_[0]._plan
    w[0, 0, 0, 0] += 1
    _close(sess.run(None, feeds)[0], _expected(x, w, b), "float32")
    b[1] += 1
    _close(sess.run(None, feeds)[0], _expected(x, w, b), "float32")
    assert sess.rt_nodes_[0]._plan is not plan
    plan = sess.rt_nodes_[0]._plan
    sess.run(None, {"X": x, "W": w.copy(), "B": b.copy()})   # same bits: kept
    assert sess.rt_nodes_[0]._plan is plan


def test_check_weights_false_trusts_identity():
    w, b = _weights()
    op = convt.onnx.ConvTransposeOp.with_options(check_weights=False)
    sess = ReferenceEvaluator(conv_transpose_model(w, b, strides=[2, 2],
                                                   weights_as_inputs=True), new_ops=[op])
    feeds = {"X": np.ones((1, 4, 5, 5), np.float32), "W": w, "B": b}
    sess.run(None, feeds)
    plan = sess.rt_nodes_[0]._plan
    w[0, 0, 0, 0] += 1   # in place: the documented price of check_weights=False
    sess.run(None, feeds)
    assert sess.rt_nodes_[0]._plan is plan
    sess.run(None, dict(feeds, W=w.copy()))
    assert sess.rt_nodes_[0]._plan is not plan


def test_with_options():
    op = convt.onnx.ConvTransposeOp.with_options(method="reference", workers=1)
    assert op.__name__ == "ConvTranspose" and issubclass(op, convt.onnx.ConvTransposeOp)
    w, b = _weights()
    sess = ReferenceEvaluator(conv_transpose_model(w, b, strides=[2, 2]), new_ops=[op])
    x = np.ones((1, 4, 5, 5), np.float32)
    _close(sess.run(None, {"X": x})[0], _expected(x, w, b), "float32", "reference")
    assert sess.rt_nodes_[0]._plan.method == "reference"
    with pytest.raises(ValueError, match="ConvTransposeOp.with_options: 'method' must be one"):
        convt.onnx.ConvTransposeOp.with_options(method="fast")


# Errors name the node and the attribute ----------------------------------------------------

W = np.ones((4, 2, 3, 3), np.float32)
X = np.ones((1, 4, 5, 5), np.float32)
RUN_ERRORS = [
    (dict(pads=[1, -1, 0, 0]), ValueError, r"onnx ConvTranspose node 'up' \(opset 11\): "
     r"'pads' must be non-negative integers \[x1_begin, ..., x1_end, ...\] \(4\); "
     r"got \(1, -1, 0, 0\)"),
    (dict(strides=[2, 2], output_padding=[2, 0]), ValueError, r"node 'up' \(opset 11\): "
     r"'output_padding' must be less than max\(stride, dilation\) per axis \(2, 2\)"),
    (dict(kernel_shape=[3, 2]), ValueError, r"node 'up' \(opset 11\): 'kernel_shape' must "
     r"equal W's spatial shape \(3, 3\); got \(3, 2\)"),
    (dict(group=3), ValueError, r"node 'up' \(opset 11\): 'group' must divide the input "
     "channels C_in = 4; got 3"),
    (dict(output_shape=[1, 2, 9, 9]), ValueError, r"node 'up' \(opset 11\): 'output_shape' "
     r"must be positive integers, spatial dimensions only \(2\)"),
    (dict(auto_pad="SAME_UPPER", pads=[1, 1, 1, 1]), ValueError, r"node 'up' \(opset 11\): "
     "'pads' cannot be used together with auto_pad='SAME_UPPER'"),
]


@pytest.mark.parametrize("attrs, exc, match", RUN_ERRORS)
def test_run_errors_name_the_node(attrs, exc, match):
    sess = ReferenceEvaluator(conv_transpose_model(W, **attrs),
                              new_ops=[convt.onnx.ConvTransposeOp])
    with pytest.raises(exc, match=match):
        sess.run(None, {"X": X})


def test_unnamed_node_is_named_by_its_output():
    model = conv_transpose_model(W, name="", pads=[0, 0, -1, 0])
    sess = ReferenceEvaluator(model, new_ops=[convt.onnx.ConvTransposeOp])
    with pytest.raises(ValueError, match=r"onnx ConvTranspose node with output 'Y' "
                       r"\(opset 11\): 'pads' must be non-negative"):
        sess.run(None, {"X": X})


def test_omitted_optional_bias():
    model = conv_transpose_model(W, strides=[2, 2])
    model.graph.node[0].input.append("")   # B given as the empty name: absent
    sess = ReferenceEvaluator(model, new_ops=[convt.onnx.ConvTransposeOp])
    y = sess.run(None, {"X": X})[0]
    _close(y, convt.onnx.conv_transpose(X, W, strides=[2, 2], method="reference"), "float32")


def test_type_errors_are_not_buried():
    # OpRun.run wraps every TypeError in a generic one; the node's own message comes out.
    sess = ReferenceEvaluator(conv_transpose_model(W, x_dtype=np.float64),
                              new_ops=[convt.onnx.ConvTransposeOp])
    with pytest.raises(TypeError, match=r"node 'up' \(opset 11\): 'X' must have the "
                       r"weights' dtype float32 \(cast it before the call\); got 'float64'"):
        sess.run(None, {"X": X.astype(np.float64)})


@pytest.mark.parametrize("attrs, match", [
    (dict(auto_pad="SAME"), r"onnx ConvTranspose node 'up' \(opset 11\): 'auto_pad' must be "
     r"one of \('NOTSET', 'SAME_UPPER', 'SAME_LOWER', 'VALID'\); got 'SAME'"),
    (dict(alpha=1.0), r"onnx ConvTranspose node 'up' \(opset 11\): 'alpha' is not a "
     "ConvTranspose attribute"),
])
def test_construction_errors_name_the_node(attrs, match):
    with pytest.raises(ValueError, match=match):
        ReferenceEvaluator(conv_transpose_model(W, **attrs),
                           new_ops=[convt.onnx.ConvTransposeOp])


# Lazy import ---------------------------------------------------------------------------------

def _python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=Path(__file__).parents[1])


def test_import_convt_does_not_import_onnx():
    r = _python("import sys, convt; convt.onnx.conv_transpose; "
                "assert 'onnx' not in sys.modules, 'onnx imported'; "
                "convt.onnx.backend; assert 'onnx' in sys.modules")
    assert r.returncode == 0, r.stderr


def test_missing_onnx_is_a_clear_import_error(monkeypatch):
    for name in [m for m in sys.modules if m == "onnx" or m.startswith("onnx.")]:
        monkeypatch.setitem(sys.modules, name, None)   # as an environment without onnx
    monkeypatch.delitem(sys.modules, "convt._onnx.ops", raising=False)
    with pytest.raises(ImportError, match=r"convt.onnx.ConvTransposeOp needs the 'onnx' "
                       r"package: pip install 'convt\[onnx\]'"):
        convt.onnx.ConvTransposeOp
    with pytest.raises(AttributeError, match="module 'convt.onnx' has no attribute 'nothing'"):
        convt.onnx.nothing
