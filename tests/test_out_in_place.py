"""``out=`` is written by the kernels themselves: every backend and direct variant whose result
is in the layout and dtype of ``out`` computes straight into it (no result array, no copy), and
the values are the bits of a call without ``out``. Float16 results are computed in float32 and
converted into ``out`` once, as without it."""
import numpy as np
import pytest

import convt
from convt._dispatch import plan as _plan
from convt._kernels import _cpu

RNG = np.random.default_rng(7)

# (pin, w shape IOX, keywords, x spatial): each direct variant on a layer it runs
VARIANTS = [
    (("micro", False), (8, 6, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1)), (7, 6)),
    (("winograd", False), (16, 16, 3, 3), dict(pads=(1, 1, 1, 1)), (9, 8)),
    (("gemm", False), (8, 6, 3, 3), dict(strides=(2, 2), pads=(1, 1, 0, 1)), (5, 7)),
    (("gemm", True), (8, 6, 2, 2), dict(strides=(2, 2)), (4, 5)),
    (("pixel", False), (4, 3, 3, 3), dict(strides=(2, 1), dilations=(1, 2)), (5, 6)),
    (("depthwise", False), (8, 1, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=8),
     (6, 7)),
    (("upsample", False), (16, 8, 2, 2), dict(strides=(2, 2)), (5, 11)),
]


def _no_copy(monkeypatch):
    def copied(*args):
        raise AssertionError("the result was copied into out")
    monkeypatch.setattr(_plan, "deliver", copied)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("pin, w_shape, kw, spatial", VARIANTS, ids=[v[0][0] + ("-rows" if v[0][1]
                                                                       else "") for v in VARIANTS])
def test_each_direct_variant_writes_out_itself(monkeypatch, pin, w_shape, kw, spatial,
                                               data_format, dtype):
    if pin[0] == "upsample" and _cpu.ISA < 1:
        pytest.skip("the upsample kernel needs AVX2 + FMA")
    w = RNG.standard_normal(w_shape).astype(dtype)
    g = kw.get("group", 1)
    b = RNG.standard_normal(w_shape[1] * g).astype(dtype)
    x = RNG.standard_normal((2, w_shape[0], *spatial)).astype(dtype)
    if data_format == "NXC":
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    op = convt.ConvTranspose(w, b, method="direct", data_format=data_format, **kw)
    op._plan.pin = pin
    want = op(x)
    ran = "micro" if pin[0] == "upsample" and data_format == "NXC" else pin[0]
    assert op._plan.geometry(x.shape).variant == ran
    out = np.full(want.shape, np.nan, dtype)
    if pin[0] == "pixel" and data_format == "NCX":   # its kernel writes channels-last
        got = op(x, out=out)
    else:
        with monkeypatch.context() as m:
            _no_copy(m)
            got = op(x, out=out)
    assert got is out
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("method", ["fft", "direct"])
def test_one_shot_and_fft_write_out_themselves(monkeypatch, method):
    w = RNG.standard_normal((4, 3, 9, 9)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    x = RNG.standard_normal((2, 4, 12, 11)).astype(np.float32)
    want = convt.conv_transpose(x, w, b, pads=(2, 1, 3, 0), method=method)
    out = np.full(want.shape, np.nan, np.float32)
    _no_copy(monkeypatch)
    assert convt.conv_transpose(x, w, b, pads=(2, 1, 3, 0), method=method, out=out) is out
    np.testing.assert_array_equal(out, want)


def test_a_nan_input_on_the_winograd_variant_writes_out_through_the_micro_variant(monkeypatch):
    """The Winograd variant leaves out untouched when its input is not finite and the micro
    variant, which runs the call instead, writes it."""
    w = RNG.standard_normal((16, 16, 3, 3)).astype(np.float32)
    x = RNG.standard_normal((1, 16, 8, 8)).astype(np.float32)
    x[0, 3, 2, 5] = np.nan
    op = convt.ConvTranspose(w, pads=(1, 1, 1, 1), method="direct")
    op._plan.pin = ("winograd", False)
    want = op(x)
    out = np.full(want.shape, -1.0, np.float32)
    _no_copy(monkeypatch)
    assert op(x, out=out) is out
    np.testing.assert_array_equal(out, want)   # NaN at the same places
    assert np.isnan(out).any() and not np.isnan(out).all()


def test_no_input_channels_and_an_empty_output_fill_out():
    w = np.ones((0, 3, 2, 2), np.float32)
    b = np.arange(3, dtype=np.float32)
    out = np.full((1, 3, 6, 6), np.nan, np.float32)
    y = convt.conv_transpose(np.ones((1, 0, 3, 3), np.float32), w, b, strides=(2, 2), out=out)
    assert y is out
    np.testing.assert_array_equal(out, np.broadcast_to(b[:, None, None], out.shape))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_half_precision_is_converted_into_out_once(name):
    dt = np.float16 if name == "float16" else pytest.importorskip("ml_dtypes").bfloat16
    w = RNG.standard_normal((4, 3, 3, 3)).astype(dt)
    x = RNG.standard_normal((1, 4, 6, 6)).astype(dt)
    want = convt.conv_transpose(x, w, strides=(2, 2))
    out = np.full(want.shape, np.nan, dt)
    assert convt.conv_transpose(x, w, strides=(2, 2), out=out) is out
    assert want.dtype == dt
    np.testing.assert_array_equal(out.astype(np.float32), want.astype(np.float32))
