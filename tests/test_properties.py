"""Property tests (hypothesis, the deterministic "convt" profile of conftest.py): for random
valid geometries of every front end, the output shape is the spec's formula and every backend
(direct, whichever variant the channel counts pick; fft; reference) agrees with the float64
reference within the tolerance table; and every direct variant, each pinned in turn on the
same random geometries (the Winograd and upsample variants among them), agrees with it too.

The shape formulas are written out here per convention, independently of convt._geometry.geometry:
F = (I-1)*s + (K-1)*d + 1 is the full length, op the output padding.
"""
from collections import Counter

import numpy as np
import pytest

import convt
from convt._backends.direct import winograd as _winograd
from convt._kernels._cpu import ISA
from convt._backends.direct.upsample import up_eligible
from conftest import assert_close

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, note, settings, strategies as st  # noqa: E402

METHODS = ("direct", "fft", "reference")
# 100 examples per front end: about 40 s for the file on the 2-core development machine.
EXAMPLES = settings(max_examples=100)
VARIANTS = Counter()   # direct variants the canonical test reached (checked at the end)
PINNED = Counter()     # geometries the pinned winograd / upsample variants ran themselves


@st.composite
def geometries(draw):
    """NCX input, IOX (grouped) filter and bias; channels per group from 1 (depthwise) to 5
    (GEMM) and 16 (the micro variant's tile width); small spatial sizes (3-D smaller still)."""
    nd = draw(st.integers(1, 3))
    top = 6 if nd < 3 else 3
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg, mg = draw(st.sampled_from([1, 2, 4, 5, 16])), draw(st.sampled_from([1, 2, 4, 5, 16]))
    batch = draw(st.integers(0, 2))
    size = tuple(draw(st.integers(1, top)) for _ in range(nd))
    kern = tuple(draw(st.integers(1, 3 if nd < 3 else 2)) for _ in range(nd))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dil = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, groups * cg, *size))
    w = rng.standard_normal((groups * cg, mg, *kern))
    b = rng.standard_normal(groups * mg)
    full = tuple((i - 1) * s + (k - 1) * d + 1 for i, s, k, d in zip(size, strides, kern, dil))
    return dict(x=x, w=w, b=b, nd=nd, groups=groups, strides=strides, dil=dil, full=full,
                size=size)


def _pads(draw, g, op):
    """Explicit (begin, end) pads that leave at least one output per axis."""
    pb, pe = [], []
    for f, o in zip(g["full"], op):
        room = f + o - 1
        a = draw(st.integers(0, min(2, room)))
        pb.append(a)
        pe.append(draw(st.integers(0, min(2, room - a))))
    return tuple(pb), tuple(pe)


def _explicit(draw, g, op):
    """Drawn explicit pads and the output length they give per axis (full + op - pads)."""
    pb, pe = _pads(draw, g, op)
    return pb, pe, [f + o - a - e for f, o, a, e in zip(g["full"], op, pb, pe)]


def _drawn_output_shape(draw, g, op):
    """An explicit output shape, up to two beyond the unpadded one per axis."""
    return [draw(st.integers(1, f + o + 2)) for f, o in zip(g["full"], op)]


def _unpadded(g, op):
    """The output length per axis without padding: (I-1)*s + (K-1)*d + 1 + op."""
    return [f + o for f, o in zip(g["full"], op)]


def _check_backends(call, expected_shape, dtype, layout=lambda y: y):
    """Each method's output: shape (in the call's layout), dtype, values near the reference."""
    ref = np.asarray(layout(call("reference")), np.float64)
    assert ref.shape[2:] == tuple(expected_shape), (ref.shape, expected_shape)
    for method in METHODS:
        y = layout(call(method))
        assert_close(y, ref, method if method != "reference" else "reference", dtype)


def _nxc(y):
    return np.moveaxis(y, -1, 1)


@EXAMPLES
@given(g=geometries(), data=st.data())
def test_canonical(g, data):
    draw = data.draw
    dtype = draw(st.sampled_from(["float64", "float32"]))
    op = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(g["strides"], g["dil"]))
    mode = draw(st.sampled_from(["explicit", "output_shape", "SAME_UPPER", "SAME_LOWER",
                                 "VALID"]))
    kw = dict(strides=g["strides"], dilations=g["dil"], group=g["groups"], output_padding=op)
    if mode == "explicit":
        pb, pe, expect = _explicit(draw, g, op)
        kw["pads"] = pb + pe
    elif mode == "output_shape":
        expect = _drawn_output_shape(draw, g, op)
        kw["output_shape"] = expect
        kw["auto_pad"] = draw(st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER"]))
    elif mode == "VALID":
        kw["auto_pad"] = "VALID"
        expect = _unpadded(g, op)
    else:
        kw["auto_pad"] = mode
        expect = [i * s for i, s in zip(g["size"], g["strides"])]   # ONNX-11: I * s
    nxc = draw(st.booleans())
    xoi = draw(st.booleans())
    x, w, b = (a.astype(dtype) for a in (g["x"], g["w"], g["b"]))
    if nxc:
        x = np.moveaxis(x, 1, -1)
        kw["data_format"] = "NXC"
    if xoi:
        w = np.moveaxis(w, (0, 1), (-1, -2))
        kw["filter_format"] = "XOI"
    note(f"kw={kw}")
    op_ = convt.ConvTranspose(w, b, method="direct", **kw)
    VARIANTS[op_._plan.geometry(x.shape).variant] += 1
    prepared = op_(x)
    _check_backends(lambda m: convt.conv_transpose(x, w, b, method=m, **kw), expect, dtype,
                    _nxc if nxc else (lambda y: y))
    np.testing.assert_array_equal(prepared, convt.conv_transpose(x, w, b, method="direct",
                                                                 **kw))


@EXAMPLES
@given(g=geometries(), data=st.data())
def test_onnx(g, data):
    draw = data.draw
    opset = draw(st.sampled_from([1, 11]))
    dtype = draw(st.sampled_from(["float64", "float32", "float16"]))
    if opset == 1:   # ConvTranspose-1 states no bound on output_padding
        op = tuple(draw(st.integers(0, 2)) for _ in range(g["nd"]))
    else:
        op = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(g["strides"], g["dil"]))
    mode = draw(st.sampled_from(["explicit", "output_shape", "SAME_UPPER", "SAME_LOWER",
                                 "VALID", "default"]))
    kw = dict(strides=list(g["strides"]), dilations=list(g["dil"]), group=g["groups"],
              output_padding=list(op), opset=opset)
    if draw(st.booleans()):
        kw["kernel_shape"] = list(g["w"].shape[2:])
    if mode == "explicit":
        pb, pe, expect = _explicit(draw, g, op)
        kw["pads"] = list(pb + pe)
    elif mode == "default":
        expect = _unpadded(g, op)
    elif mode == "output_shape":
        expect = _drawn_output_shape(draw, g, op)
        kw["output_shape"] = expect
        kw["auto_pad"] = draw(st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER"]))
    elif mode == "VALID":
        kw["auto_pad"] = "VALID"
        expect = _unpadded(g, op)
    else:
        kw["auto_pad"] = mode
        # ConvTranspose-11: the output is I * s; ConvTranspose-1's text: it matches the input
        expect = [i * s if opset == 11 else i for i, s in zip(g["size"], g["strides"])]
    note(f"kw={kw}")
    x, w, b = (a.astype(dtype) for a in (g["x"], g["w"], g["b"]))
    _check_backends(lambda m: convt.onnx.conv_transpose(x, w, b, method=m, **kw), expect, dtype)


@EXAMPLES
@given(g=geometries(), data=st.data())
def test_openvino(g, data):
    draw = data.draw
    nd, groups = g["nd"], g["groups"]
    dtype = draw(st.sampled_from(["float64", "float32", "float16"]))
    op = tuple(draw(st.integers(0, 3)) for _ in range(nd))   # no upper bound in 003
    mode = draw(st.sampled_from(["explicit", "output_shape", "same_upper", "valid"]))
    kw = dict(strides=list(g["strides"]), dilations=list(g["dil"]), output_padding=list(op))
    os_ = None
    if mode == "explicit":
        pb, pe, expect = _explicit(draw, g, op)
        kw.update(pads_begin=list(pb), pads_end=list(pe))
    elif mode == "output_shape":
        expect = _drawn_output_shape(draw, g, op)
        os_ = np.array(expect, np.int64)
        kw["auto_pad"] = draw(st.sampled_from(["explicit", "same_upper", "same_lower",
                                               "valid"]))
    else:   # 003: any auto_pad but explicit means no padding
        kw["auto_pad"] = mode
        expect = _unpadded(g, op)
    x, w = g["x"].astype(dtype), g["w"].astype(dtype)
    note(f"kw={kw} output_shape={os_}")
    if groups == 1 and draw(st.booleans()):
        fn = lambda m: convt.openvino.convolution_backprop_data(x, w, os_, method=m, **kw)
    else:
        wg = w.reshape(groups, w.shape[0] // groups, *w.shape[1:])
        fn = lambda m: convt.openvino.group_convolution_backprop_data(x, wg, os_, method=m,
                                                                      **kw)
    _check_backends(fn, expect, dtype)


@EXAMPLES
@given(g=geometries(), data=st.data())
def test_onednn(g, data):
    draw = data.draw
    nd = g["nd"]
    dtype = draw(st.sampled_from(["float32", "float16"]))
    op = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    mode = draw(st.sampled_from(["none", "output_shape", "same_upper", "same_lower", "valid"]))
    kw = dict(strides=list(g["strides"]), dilations=list(g["dil"]), groups=g["groups"],
              output_padding=list(op))
    if mode == "none":
        pb, pe, expect = _explicit(draw, g, op)
        kw.update(pads_begin=list(pb), pads_end=list(pe))
    elif mode == "output_shape":
        expect = _drawn_output_shape(draw, g, op)
        kw["output_shape"] = expect
    elif mode == "valid":
        kw["auto_pad"] = "valid"
        expect = _unpadded(g, op)
    else:   # 000: total padding (K-1)*d + 1 - s, so the output is s*I + op
        kw["auto_pad"] = mode
        expect = [i * s + o for i, s, o in zip(g["size"], g["strides"], op)]
    ncx, iox = draw(st.booleans()), draw(st.booleans())
    x, w, b = (a.astype(dtype) for a in (g["x"], g["w"], g["b"]))
    if not ncx:
        x = np.moveaxis(x, 1, -1)
    if not iox:
        w = np.moveaxis(w, (0, 1), (-1, -2))
    kw.update(data_format="NCX" if ncx else "NXC", filter_format="IOX" if iox else "XOI")
    note(f"kw={kw}")
    _check_backends(lambda m: convt.onednn.conv_transpose(x, w, b, method=m, **kw), expect,
                    dtype, (lambda y: y) if ncx else _nxc)


# Every direct variant computes every geometry (convt._dispatch.plan.direct_variant: a pinned variant
# that cannot take a geometry hands it to the one that gives the same sums): each pinned in
# turn on the same random geometries, against the reference. The dispatch rule sends few
# random geometries to winograd or upsample, so this is where their planning meets the
# property test's space (their own files test them on chosen ones).
PINS = [("gemm", False), ("gemm", True), ("pixel", False), ("depthwise", False),
        ("micro", False), ("winograd", False), ("upsample", False)]


@EXAMPLES
@given(g=geometries(), data=st.data())
def test_every_direct_variant_on_random_geometries(g, data):
    draw = data.draw
    dtype = draw(st.sampled_from(["float64", "float32"]))
    kern = g["w"].shape[2:]
    up = kern[-1] == 2 and draw(st.booleans())
    if up:
        # the upsample kernel's shape: K == s on every axis (2 on the last), no padding, and
        # channels-first data (it takes no other)
        g = dict(g, strides=kern, dil=(1,) * g["nd"],
                 full=tuple(i * k for i, k in zip(g["size"], kern)))
        op, pb, pe = (0,) * g["nd"], (0,) * g["nd"], (0,) * g["nd"]
        expect = list(g["full"])
    else:
        op = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(g["strides"], g["dil"]))
        pb, pe, expect = _explicit(draw, g, op)
    kw = dict(strides=g["strides"], dilations=g["dil"], group=g["groups"], output_padding=op,
              pads=pb + pe)
    nxc = not up and draw(st.booleans())
    x, w, b = (a.astype(dtype) for a in (g["x"], g["w"], g["b"]))
    ref = convt.conv_transpose(x, w, b, method="reference", **kw)
    assert ref.shape[2:] == tuple(expect)
    if nxc:
        x = np.moveaxis(x, 1, -1)
        kw["data_format"] = "NXC"
    note(f"kw={kw}")
    for pin in PINS:
        conv = convt.ConvTranspose(w, b, method="direct", **kw)
        conv._plan.pin = pin
        y = conv(x)
        assert_close(_nxc(y) if nxc else y, ref, "direct", dtype)
    geom = conv._plan.geometry(x.shape).geom
    PINNED["winograd"] += _winograd.wino_layout(geom, 16) is not None
    PINNED["upsample"] += up_eligible(geom)


def test_every_direct_variant_was_reached():
    """The channel counts of ``geometries`` reach all three direct variants (only meaningful
    after test_canonical ran in this session)."""
    if not VARIANTS:
        pytest.skip("test_canonical did not run in this session")
    assert {"gemm", "depthwise", "pixel"} <= set(VARIANTS), VARIANTS
    assert ISA < 1 or "micro" in VARIANTS, VARIANTS


def test_pinned_variants_ran_their_own_kernels():
    """Some of ``test_every_direct_variant_on_random_geometries``' geometries have a Winograd
    layout and some fit the upsample kernel, so those kernels ran themselves, not the micro
    variant they hand the others to (only meaningful after that test ran in this session)."""
    if not PINNED:
        pytest.skip("test_every_direct_variant_on_random_geometries did not run")
    assert PINNED["winograd"] >= 5, PINNED
    assert ISA < 1 or PINNED["upsample"] >= 3, PINNED
