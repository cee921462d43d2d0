"""convt.translate: for random calls of every source convention this convt has, the translation
into every destination computes the source's output through convt's destination front end
(``t(x, w, b)``), and for the spec destinations the emitted code, run with NumPy + convt, too.
The real frameworks run the emitted code in tests/test_translate_frameworks.py."""
from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import convt
from convt._translate import CONVENTIONS

from _translate_cases import ALL, available, draw

SOURCES = [s for s in ALL if available(s)]
NO_GROUPS = {"tensorflow": "tf.nn.conv_transpose", "keras": "keras.ops.conv_transpose",
             "jax": "jax.lax.conv_transpose"}
SPEC = ("onnx", "openvino", "onednn")
SEEDS = range(8)


def _tol(y):
    scale = max(1.0, float(np.abs(y).max()))
    return (1e-12 if y.dtype == np.float64 else 2e-5) * scale * 10


def _inputs(dst, arrays):
    """oneDNN Graph has no float64 (000 "Types"): its destination takes float32 arrays."""
    if dst != "onednn":
        return arrays
    return tuple(None if a is None else a.astype(np.float32) for a in arrays)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dst", CONVENTIONS)
@pytest.mark.parametrize("src", SOURCES)
def test_translation_reproduces_the_source(src, dst, seed):
    rng = np.random.default_rng([seed, CONVENTIONS.index(src), CONVENTIONS.index(dst)])
    case, arrays, y = draw(src, rng)
    kw = dict(case.attrs)
    if dst in NO_GROUPS and y.ndim and _groups(src, case) > 1:
        with pytest.raises(ValueError, match=rf"translate \(to {dst}\): 'groups' cannot be "
                           rf"expressed: {NO_GROUPS[dst]} has no feature groups; got 2"):
            convt.translate(src, dst, case.x_shape, case.w_shape, case.bias_shape, **kw)
        return
    t = convt.translate(src, dst, case.x_shape, case.w_shape, case.bias_shape, **kw)
    assert isinstance(t, convt.Translation) and t.source == src and t.destination == dst
    assert isinstance(t.kwargs, dict) and t.kwargs
    if dst not in SPEC and not available(dst):
        pytest.skip(f"convt.{dst} is not in this convt")
    x, w, b = _inputs(dst, arrays)
    got = t(x, w, b)
    assert got.shape == y.shape
    np.testing.assert_allclose(got, y, rtol=0, atol=_tol(got))
    if dst in SPEC:
        # the code is NumPy + convt: evaluated as printed, it is the same computation
        assert t.code == t.convt_code()
        env = {"np": np, "convt": convt, "x": x, "w": w, "b": b}
        np.testing.assert_array_equal(eval(t.code, env), got)


def _groups(src, case):
    return int(case.attrs.get("group", case.attrs.get("groups", 1))) if src != "openvino" else (
        case.w_shape[0] if case.attrs.get("grouped") else 1)


@pytest.mark.parametrize("seed", range(40))
def test_translation_is_exact_where_the_destination_can_be(seed):
    """torch and jax express any ONNX-11 explicit-pads call with pads >= 0 and
    output_padding < max(stride, dilation) exactly: no crop or pad in the code."""
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 4))
    s = tuple(int(v) for v in rng.integers(1, 4, nd))
    d = tuple(int(v) for v in rng.integers(1, 3, nd))
    pads = tuple(int(v) for v in rng.integers(0, 3, nd))
    op = tuple(int(rng.integers(0, max(a, c))) for a, c in zip(s, d))
    xs, ws = (1, 2, *(4,) * nd), (2, 3, *(3,) * nd)
    for dst in ("torch", "jax", "onnx"):
        t = convt.translate("onnx", dst, xs, ws, strides=s, dilations=d, pads=pads + pads,
                            output_padding=op)
        assert "[" not in t.code.replace("[None]", "") and "pad(" not in t.code, t.code


def test_printed_examples():
    """The examples of docs/translate.md, as printed there."""
    t = convt.translate("onnx", "torch", (1, 16, 32, 32), (16, 8, 4, 4), strides=(2, 2),
                        auto_pad="SAME_UPPER")
    assert t.code == ("torch.nn.functional.conv_transpose2d(x, w, stride=(2, 2), "
                      "padding=(1, 1))")
    assert t.kwargs == {"stride": (2, 2), "padding": (1, 1)}
    t = convt.translate("onnx", "torch", (1, 16, 32, 32), (16, 8, 4, 4), (8,), strides=(2, 2),
                        pads=(1, 2, 2, 1))
    # ONNX pads (1, 2) before, (2, 1) after: torch pads both ends alike, output_padding
    # gives one back at the end of the second axis, a crop removes one from the first
    assert t.code == ("torch.nn.functional.conv_transpose2d(x, w, b, stride=(2, 2), "
                      "padding=(1, 2), output_padding=(0, 1))[:, :, 0:63]")
    t = convt.translate("onnx", "tensorflow", (1, 16, 32, 32), (16, 8, 4, 4), (8,),
                        strides=(2, 2), pads=(1, 1, 1, 1))
    assert t.kwargs == {"output_shape": [1, 64, 64, 8], "strides": [2, 2], "padding": "SAME"}
    t = convt.translate("onnx", "tensorflow", (1, 16, 32, 32), (16, 8, 4, 4), (8,),
                        strides=(2, 2), pads=(2, 1, 0, 1))
    assert t.kwargs == {"output_shape": [1, 64, 64, 8], "strides": [2, 2],
                        "padding": [[0, 0], [2, 0], [1, 1], [0, 0]]}


def test_bias_lands_on_zero_padded_positions():
    # ONNX-11 output_shape 7 for a full output of 4: total padding -3, ceil half first, so
    # one position before the data and two after hold only the bias, which torch cannot
    # produce: zero pad, then + b
    tt = convt.translate("onnx", "torch", (1, 1, 3), (1, 1, 2), (1,), strides=(1,),
                         output_shape=(7,))
    assert tt.code == ("torch.nn.functional.pad(torch.nn.functional.conv_transpose1d(x, w, "
                       "stride=(1,)), (1, 2)) + b.reshape((-1, 1))")
    x, w, b = np.ones((1, 1, 3)), np.ones((1, 1, 2)), np.array([5.0])
    want = [[[5, 6, 7, 7, 6, 5, 5]]]
    np.testing.assert_array_equal(convt.onnx.conv_transpose(x, w, b, output_shape=(7,)), want)
    for dst in ("onnx", "openvino", "onednn"):
        t = convt.translate("onnx", dst, (1, 1, 3), (1, 1, 2), (1,), strides=(1,),
                            output_shape=(7,))
        assert "np.pad(" in t.code and t.code.endswith(" + b.reshape((-1, 1))"), t.code
        np.testing.assert_array_equal(t(*_inputs(dst, (x, w, b))), want)
    if available("torch"):
        np.testing.assert_array_equal(tt(x, w, b), want)


@pytest.mark.parametrize("dst", CONVENTIONS)
def test_a_window_past_the_full_output(dst):
    # ONNX-11, F = 1, output_padding 1, output_shape 1: total padding 1, ceil half first, so
    # the one output position lies after the full output and holds only the bias; the
    # destinations' nearest windows would be empty, so they compute one position and pad
    kw = dict(strides=(1,), dilations=(2,), output_padding=(1,), output_shape=(1,))
    x, w, b = np.full((1, 1, 1), 3.0), np.full((1, 1, 1), 2.0), np.array([5.0])
    y = convt.onnx.conv_transpose(x, w, b, **kw)
    assert y.tolist() == [[[5.0]]]
    if dst in NO_GROUPS or dst == "torch":
        if not available(dst):
            pytest.skip(f"convt.{dst} is not in this convt")
    t = convt.translate("onnx", dst, x.shape, w.shape, b.shape, **kw)
    np.testing.assert_array_equal(t(*_inputs(dst, (x, w, b))), y)


def test_openvino_destination_is_grouped_when_the_call_is():
    t = convt.translate("onnx", "openvino", (1, 4, 5), (4, 3, 3), group=2, strides=(2,))
    assert t.code.startswith("convt.openvino.group_convolution_backprop_data(x, "
                             "w.reshape((2, 2, 3, 3)), ")
    t = convt.translate("onnx", "openvino", (1, 4, 5), (4, 3, 3), strides=(2,),
                        dst_grouped=True)
    assert "group_convolution_backprop_data" in t.code
    with pytest.raises(ValueError, match=r"translate \(to openvino\): 'groups' = 2 needs "
                       r"GroupConvolutionBackpropData; got dst_grouped=False"):
        convt.translate("onnx", "openvino", (1, 4, 5), (4, 3, 3), group=2, dst_grouped=False)


def test_onnx_destination_opset():
    # output_padding 3 at stride 2: ONNX-11 bounds it by max(stride, dilation), ONNX-1 does not
    kw = dict(strides=(2,), dilations=(1,), pads_begin=(0,), pads_end=(0,),
              output_padding=(3,), grouped=False)
    t11 = convt.translate("openvino", "onnx", (1, 1, 4), (1, 1, 3), **kw)
    t1 = convt.translate("openvino", "onnx", (1, 1, 4), (1, 1, 3), dst_opset=1, **kw)
    assert t1.kwargs["output_padding"] == (3,) and "np.pad" not in t1.code
    assert t11.kwargs["output_padding"] == (1,) and "np.pad" in t11.code
    x, w = np.ones((1, 1, 4)), np.ones((1, 1, 3))
    np.testing.assert_array_equal(t1(x, w), t11(x, w))


@pytest.mark.parametrize("kw, match", [
    (dict(src="caffe"), r"translate: 'src' must be one of \('onnx', .*\); got 'caffe'"),
    (dict(dst="mxnet"), r"translate: 'dst' must be one of \('onnx', .*\); got 'mxnet'"),
    (dict(dst_opset=1, dst="torch"),
     r"translate: 'dst_opset' applies to dst='onnx' only \(dst='torch'\); got 1"),
    (dict(dst_grouped=True), r"translate: 'dst_grouped' applies to dst='openvino' only"),
    (dict(strides=(2, 0)), r"onnx \(opset 11\): 'strides' must be positive"),
    (dict(stride=(2, 2)), r"translate: 'stride' is not a keyword of onnx \(one of "
                          r"\('opset', 'auto_pad', .*\)\); got \(2, 2\)"),
    (dict(pads=(1, 1, 1, -1)), r"onnx \(opset 11\): 'pads' must be non-negative"),
    (dict(x_shape=(1, 3, 5, 5)), r"onnx \(opset 11\): 'X' must have 4 channels"),
    (dict(x_shape=(1, 4, 5.0, 5)), r"translate: 'x_shape' must be an array shape"),
    (dict(x_shape=None), r"translate: 'x_shape' must be an array shape.*; got None"),
    # what a call would refuse, refused before the destinations' search (linear in s)
    (dict(strides=(1000, 1000)), r"translate \(from onnx\): 'strides' must have a product "
                                 r"of at most 2\*\*18 = 262144 .*; got \(1000, 1000\)"),
    (dict(output_padding=(2, 2), strides=(2, 2)),
     r"onnx \(opset 11\): 'output_padding' must be less than max\(stride, dilation\)"),
])
def test_refusals(kw, match):
    args = dict(src="onnx", dst="torch", x_shape=(1, 4, 5, 5), w_shape=(4, 2, 3, 3))
    for key in ("src", "dst", "x_shape"):
        if key in kw:
            args[key] = kw.pop(key)
    exc = TypeError if "array shape" in match or "not a keyword" in match else ValueError
    with pytest.raises(exc, match=match):
        convt.translate(args.pop("src"), args.pop("dst"), args.pop("x_shape"),
                        args.pop("w_shape"), **kw)


def test_sources_validate_as_their_front_ends():
    with pytest.raises(ValueError, match=r"openvino: 'bias' does not exist"):
        convt.translate("openvino", "onnx", (1, 2, 3), (2, 2, 3), (2,), strides=(1,),
                        dilations=(1,), pads_begin=(0,), pads_end=(0,))
    with pytest.raises(ValueError, match=r"openvino: 'strides' is required"):
        convt.translate("openvino", "onnx", (1, 2, 3), (2, 2, 3), dilations=(1,))
    with pytest.raises(ValueError, match=r"onednn: 'output_shape' conflicts with auto_pad"):
        convt.translate("onednn", "onnx", (1, 3, 2), (3, 2, 2), strides=(2,), dilations=(1,),
                        auto_pad="same_upper", output_shape=(9,))


def test_cli_prints_the_code_and_kwargs():
    run = subprocess.run(
        [sys.executable, "-m", "convt", "translate", "--from", "onnx", "--to", "torch",
         "x=1,16,32,32 w=16,8,4,4 strides=2,2 auto_pad=SAME_UPPER"],
        capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == ("torch.nn.functional.conv_transpose2d(x, w, "
                                          "stride=(2, 2), padding=(1, 1))")
    assert "kwargs: {'stride': (2, 2), 'padding': (1, 1)}" in run.stdout


def test_cli_values():
    from convt.__main__ import _value

    assert _value("2") == 2 and _value("2,") == (2,) and _value("2,3") == (2, 3)
    assert _value("SAME_UPPER") == "SAME_UPPER" and _value("True") is True
    assert _value("NCHW,OIHW,NCHW") == ("NCHW", "OIHW", "NCHW")
    assert _value("1:2,0:-1") == ((1, 2), (0, -1))


def test_cli_refusal_exits_2():
    run = subprocess.run(
        [sys.executable, "-m", "convt", "translate", "--from", "onnx", "--to", "keras",
         "x=1,4,8 w=4,2,3 group=2"], capture_output=True, text=True)
    assert run.returncode == 2
    assert ("translate (to keras): 'groups' cannot be expressed: keras.ops.conv_transpose has "
            "no feature groups; got 2") in run.stderr


def test_docs_page_prints_what_it_shows():
    """docs/translate.md: each python block followed by an indented block prints exactly
    that (the blocks of the page run in one namespace, as tests/test_docs.py runs them)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                        "translate.md")
    if not os.path.exists(path):
        pytest.skip("docs/ is not next to the tests (installed wheel)")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    ns, shown_any = {}, False
    for block, shown in re.findall(r"^```python\n(.*?)^```\n(\n(?:    [^\n]*\n)+)?", text,
                                   re.S | re.M):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(block, "docs/translate.md", "exec"), ns)
        except ModuleNotFoundError as e:   # a front end the page translates from, not here
            pytest.skip(f"docs/translate.md needs {e.name}, not in this convt")
        if shown:
            shown_any = True
            assert out.getvalue() == textwrap.dedent(shown).lstrip("\n")
    assert shown_any


def test_numpy_integers_in_a_canonical_print_as_ints():
    # a front end may hand over NumPy integers (shapes read from arrays); the code must not
    # say np.int64(...)
    from dataclasses import replace

    from convt._translate import _DESTINATIONS, _plain
    from convt._translate.emit import render
    from convt._translate.window import axes_of

    canon = convt.onnx._canonical((1, 2, 5), (2, 3, 3), strides=(2,), pads=(1, 0))
    g = canon.geometry
    odd = replace(canon, geometry=replace(g, in_shape=(np.int64(5),),
                                          pads_end=(np.int64(0),), batch=np.int64(1)),
                  x_axes=tuple(np.int64(a) for a in canon.x_axes))
    for dst in CONVENTIONS:
        call = _DESTINATIONS[dst](_plain(odd), axes_of(_plain(odd).geometry), {})
        code = render(_plain(odd), (2, 3, 3), call)
        assert "np.int64" not in code and "int64" not in repr(call.kwargs), (dst, code)
