"""Each convention's padding rule, as (pb, pe, L) tables derived by hand from the specs.

1-D, I input length, K kernel, s stride, d dilation, op output_padding. F = (I-1)*s + (K-1)*d + 1.
Canonical pe already includes op (pe = pads_end - op), L = F - pb - pe. Every row is checked
twice: the resolved geometry, and the public front end's values against the reference at (pb, pe).
"""
import numpy as np
import pytest

import convt
from convt._geometry.geometry import OpSpec, resolve
from convt.onednn import onednn_rule
from convt.onnx import onnx_rule
from convt.openvino import openvino_rule

from _helpers import reference_at

# I=3, K=3, s=2, d=1 -> F=7 unless the row says otherwise.
ONNX = [
    # (opset, attrs, (I, K, s, d), (pb, pe, L))
    (11, dict(pads=[1, 2], output_padding=[1]), (3, 3, 2, 1), (1, 1, 5)),
    (11, dict(auto_pad="VALID", output_padding=[1]), (3, 3, 2, 1), (0, -1, 8)),
    # SAME: L = I*s; T = F + op - I*s = 1; SAME_UPPER puts the odd element at the end.
    (11, dict(auto_pad="SAME_UPPER"), (3, 3, 2, 1), (0, 1, 6)),
    (11, dict(auto_pad="SAME_LOWER"), (3, 3, 2, 1), (1, 0, 6)),
    (11, dict(auto_pad="SAME_UPPER", output_padding=[1]), (3, 3, 2, 1), (1, 0, 6)),
    # E < s: T = F - I*s = 4 - 6 = -2; the spec still asks for I*s (ORT would give F).
    (11, dict(auto_pad="SAME_UPPER"), (2, 1, 3, 1), (-1, -1, 6)),
    # output_shape: opset 11 gives SAME_UPPER the floor half first, everything else the ceil.
    (11, dict(output_shape=[6]), (3, 3, 2, 1), (1, 0, 6)),
    (11, dict(output_shape=[6], auto_pad="SAME_UPPER"), (3, 3, 2, 1), (0, 1, 6)),
    (11, dict(output_shape=[6], auto_pad="SAME_LOWER"), (3, 3, 2, 1), (1, 0, 6)),
    (11, dict(output_shape=[6], auto_pad="VALID"), (3, 3, 2, 1), (1, 0, 6)),
    (11, dict(output_shape=[6], output_padding=[1]), (3, 3, 2, 1), (1, 0, 6)),
    (11, dict(output_shape=[6], pads=[3, 3]), (3, 3, 2, 1), (1, 0, 6)),   # pads ignored
    (11, dict(output_shape=[4]), (3, 3, 2, 1), (2, 1, 4)),                # smaller than F
    (11, dict(output_shape=[4], auto_pad="SAME_UPPER"), (3, 3, 2, 1), (1, 2, 4)),
    # larger than F: T = -3, floor division: ce(-3) = -1, fl(-3) = -2
    (11, dict(output_shape=[10]), (3, 3, 2, 1), (-1, -2, 10)),
    (11, dict(output_shape=[10], auto_pad="SAME_UPPER"), (3, 3, 2, 1), (-2, -1, 10)),
    (11, dict(output_shape=[8]), (3, 3, 2, 1), (0, -1, 8)),               # T = -1: spec example
    (22, dict(output_shape=[6]), (3, 3, 2, 1), (1, 0, 6)),
    (11, dict(dilations=[2], pads=[1, 1], output_padding=[1]), (3, 2, 1, 2), (1, 0, 4)),
    # opset 1: the reverse split with output_shape
    (1, dict(output_shape=[6]), (3, 3, 2, 1), (0, 1, 6)),
    (1, dict(output_shape=[6], auto_pad="SAME_UPPER"), (3, 3, 2, 1), (1, 0, 6)),
    (1, dict(output_shape=[6], auto_pad="SAME_LOWER"), (3, 3, 2, 1), (0, 1, 6)),
    (1, dict(output_shape=[10]), (3, 3, 2, 1), (-2, -1, 10)),
    # opset 1 SAME without output_shape: "the output spatial size match the input" (I=4, F=9,
    # T=5), extra at the end for SAME_UPPER, at the beginning for SAME_LOWER.
    (1, dict(auto_pad="SAME_UPPER"), (4, 3, 2, 1), (2, 3, 4)),
    (1, dict(auto_pad="SAME_LOWER"), (4, 3, 2, 1), (3, 2, 4)),
    (1, dict(output_padding=[3]), (3, 3, 2, 1), (0, -3, 10)),             # no op bound in -1
]

OPENVINO = [
    (dict(pads_begin=[1], pads_end=[1]), (3, 3, 2, 1), (1, 1, 5)),
    (dict(pads_begin=[1], pads_end=[1], auto_pad="same_upper"), (3, 3, 2, 1), (0, 0, 7)),
    (dict(auto_pad="valid", output_padding=[1]), (3, 3, 2, 1), (0, -1, 8)),
    (dict(auto_pad="same_lower", output_padding=[1]), (3, 3, 2, 1), (0, -1, 8)),
    # output_shape: auto_pad != same_upper -> floor half first (the reverse of ONNX-11)
    (dict(output_shape=[6], pads_begin=[2], pads_end=[2]), (3, 3, 2, 1), (0, 1, 6)),
    (dict(output_shape=[6], auto_pad="same_upper"), (3, 3, 2, 1), (1, 0, 6)),
    (dict(output_shape=[6], auto_pad="same_lower"), (3, 3, 2, 1), (0, 1, 6)),
    (dict(output_shape=[6], auto_pad="valid"), (3, 3, 2, 1), (0, 1, 6)),
    (dict(output_shape=[10]), (3, 3, 2, 1), (-2, -1, 10)),
    (dict(output_shape=[10], auto_pad="same_upper"), (3, 3, 2, 1), (-1, -2, 10)),
    (dict(pads_begin=[0], pads_end=[0], output_padding=[3]), (3, 3, 2, 1), (0, -3, 10)),
    (dict(pads_begin=[1], pads_end=[0], output_padding=[2]), (3, 3, 2, 1), (1, -2, 8)),
]

ONEDNN = [
    (dict(pads_begin=[1], pads_end=[1], output_padding=[1]), (3, 3, 2, 1), (1, 0, 6)),
    # SAME: T = E - s = 1, the length is s*I + op
    (dict(auto_pad="same_upper"), (3, 3, 2, 1), (0, 1, 6)),
    (dict(auto_pad="same_lower"), (3, 3, 2, 1), (1, 0, 6)),
    (dict(auto_pad="same_upper", output_padding=[1]), (3, 3, 2, 1), (0, 0, 7)),
    (dict(auto_pad="same_upper"), (2, 1, 3, 1), (-1, -1, 6)),            # E < s: T = -2
    (dict(auto_pad="same_upper", output_shape=[6]), (3, 3, 2, 1), (0, 1, 6)),
    (dict(auto_pad="valid", output_padding=[1]), (3, 3, 2, 1), (0, -1, 8)),
    (dict(auto_pad="valid", output_shape=[7]), (3, 3, 2, 1), (0, 0, 7)),
    (dict(output_shape=[6]), (3, 3, 2, 1), (1, 0, 6)),                   # none: ceil first
    (dict(output_shape=[6], pads_begin=[3], pads_end=[3]), (3, 3, 2, 1), (1, 0, 6)),
    (dict(output_shape=[10]), (3, 3, 2, 1), (-1, -2, 10)),
    (dict(pads_begin=[0], pads_end=[0], output_padding=[4]), (3, 3, 2, 1), (0, -4, 11)),
]


def _resolve(rule, geom):
    i_len, k, s, d = geom
    spec = OpSpec(convention="test", strides=(s,), dilations=(d,), kernel=(k,), groups=1,
                  c_in=2, c_out=3, rule=rule)
    g = resolve(spec, (1, 2, i_len))
    return g.pads_begin[0], g.pads_end[0], g.out_shape[0]


def _arrays(geom, rng, dtype=np.float64):
    i_len, k, _, _ = geom
    x = rng.standard_normal((2, 2, i_len)).astype(dtype)
    w = rng.standard_normal((2, 3, k)).astype(dtype)
    b = rng.standard_normal(3).astype(dtype)
    return x, w, b


@pytest.mark.parametrize("opset, attrs, geom, want", ONNX, ids=lambda v: str(v))
def test_onnx_rule(opset, attrs, geom, want, rng):
    _, _, s, d = geom
    attrs = dict(attrs)
    strides, dilations = [s], attrs.pop("dilations", [d])
    rule = onnx_rule("onnx", 1 if opset == 1 else 11, 1, (s,), tuple(dilations),
                     auto_pad=attrs.get("auto_pad", "NOTSET"), pads=attrs.get("pads"),
                     output_padding=attrs.get("output_padding"),
                     output_shape=attrs.get("output_shape"))
    assert _resolve(rule, (geom[0], geom[1], s, dilations[0])) == want
    x, w, b = _arrays(geom, rng)
    y = convt.onnx.conv_transpose(x, w, b, opset=opset, strides=strides, dilations=dilations,
                                  **attrs)
    pb, pe, _ = want
    np.testing.assert_allclose(y, reference_at(x, w, b, strides, dilations, [pb], [pe]),
                               rtol=1e-12, atol=1e-12)
    if opset == 11:  # the canonical API is ONNX-11
        y2 = convt.conv_transpose(x, w, b, strides=strides, dilations=dilations, **attrs)
        np.testing.assert_array_equal(y, y2)


@pytest.mark.parametrize("attrs, geom, want", OPENVINO, ids=lambda v: str(v))
def test_openvino_rule(attrs, geom, want, rng):
    _, _, s, d = geom
    attrs = dict(attrs)
    rule = openvino_rule("openvino", 1, auto_pad=attrs.get("auto_pad", "explicit"),
                         pads_begin=attrs.get("pads_begin"), pads_end=attrs.get("pads_end"),
                         output_padding=attrs.get("output_padding"),
                         output_shape=attrs.get("output_shape"))
    assert _resolve(rule, geom) == want
    x, w, _ = _arrays(geom, rng)
    os_ = attrs.pop("output_shape", None)
    if os_ is not None:
        os_ = np.array(os_, np.int64)  # the op's third input is an integer tensor
    y = convt.openvino.convolution_backprop_data(x, w, os_, strides=[s], dilations=[d], **attrs)
    pb, pe, _ = want
    np.testing.assert_allclose(y, reference_at(x, w, None, [s], [d], [pb], [pe]),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attrs, geom, want", ONEDNN, ids=lambda v: str(v))
def test_onednn_rule(attrs, geom, want, rng):
    _, _, s, d = geom
    rule = onednn_rule("onednn", 1, auto_pad=attrs.get("auto_pad", "none"),
                       pads_begin=attrs.get("pads_begin"), pads_end=attrs.get("pads_end"),
                       output_padding=attrs.get("output_padding"),
                       output_shape=attrs.get("output_shape"))
    assert _resolve(rule, geom) == want
    x, w, b = _arrays(geom, rng, np.float32)
    kw = dict(pads_begin=[0], pads_end=[0], **attrs) if "pads_begin" not in attrs else attrs
    y = convt.onednn.conv_transpose(x, w, b, strides=[s], dilations=[d], data_format="NCX",
                                    filter_format="IOX", **kw)
    pb, pe, _ = want
    ref = reference_at(x, w, b, [s], [d], [pb], [pe])
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_opset_odd_split_is_reversed(rng):
    """The same node under opset 1 and 11 crops the full result one position apart."""
    x = rng.standard_normal((1, 2, 5, 4))
    w = rng.standard_normal((2, 2, 3, 3))
    kw = dict(strides=[2, 2], output_shape=[10, 8])   # F = (11, 9): T = (1, 1)
    y1 = convt.onnx.conv_transpose(x, w, opset=1, **kw)
    y11 = convt.onnx.conv_transpose(x, w, opset=11, **kw)
    full = reference_at(x, w, None, [2, 2], [1, 1], [0, 0], [0, 0])
    np.testing.assert_allclose(y1, full[..., :10, :8], rtol=1e-12)
    np.testing.assert_allclose(y11, full[..., 1:, 1:], rtol=1e-12)


@pytest.mark.parametrize("opset", [1, 5, 10, 11, 13, 17, 21, 22, 23])
def test_model_opset_maps_to_operator_version(opset):
    from convt.onnx import operator_version

    assert operator_version("onnx", opset) == (1 if opset < 11 else 11 if opset < 22 else 22)


def test_multi_axis_rules_are_per_axis(rng):
    """Axes resolve independently: a 3-D SAME_LOWER with different strides per axis."""
    x = rng.standard_normal((1, 2, 3, 4, 2))
    w = rng.standard_normal((2, 1, 3, 2, 4))
    op = convt.ConvTranspose(w, strides=(2, 3, 1), auto_pad="SAME_LOWER")
    g = op.geometry(x.shape)
    # F = (7, 11, 5); L = I*s = (6, 12, 2); T = (1, -1, 3); SAME_LOWER: pb = ce(T)
    assert g.out_shape == (6, 12, 2)
    assert g.pads_begin == (1, 0, 2) and g.pads_end == (0, -1, 1)
    np.testing.assert_allclose(op(x), reference_at(x, w, None, (2, 3, 1), (1, 1, 1),
                                                   g.pads_begin, g.pads_end), rtol=1e-12)


# The total-padding splits TensorFlow's front end states (geometry.split_total): "none" puts
# all of T at the end (VALID), "floor_clamped" never begins negative (SAME), "given" takes
# pads_begin (explicit pairs). I=3, K=3, s=2, d=1: F = 7; T = F - output_shape.
TOTAL_SPLITS = [
    (dict(begin="none"), 6, (0, 1, 6)),
    (dict(begin="none"), 8, (0, -1, 8)),                 # zeros appended
    (dict(begin="floor_clamped"), 5, (1, 1, 5)),
    (dict(begin="floor_clamped"), 6, (0, 1, 6)),
    (dict(begin="floor_clamped"), 9, (0, -2, 9)),        # "floor" would begin at -1
    (dict(begin="floor"), 9, (-1, -1, 9)),
    (dict(begin="given", pads_begin=(2,)), 4, (2, 1, 4)),
    (dict(begin="given", pads_begin=(0,)), 8, (0, -1, 8)),
]


@pytest.mark.parametrize("split, length, want", TOTAL_SPLITS, ids=lambda v: str(v))
def test_total_splits(split, length, want):
    from convt._geometry.geometry import TOTAL_FROM_OUTPUT_SHAPE, PadRule

    rule = PadRule(kind="total", output_padding=(0,), total=TOTAL_FROM_OUTPUT_SHAPE,
                   output_shape=(length,), **split)
    assert _resolve(rule, (3, 3, 2, 1)) == want
