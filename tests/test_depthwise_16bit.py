"""The depthwise variant's channels-first kernel on 16-bit storage (float16, bfloat16): each
task widens the input rows its rows read into the thread's copy, and each run of rows is
computed into the thread's float32 rows, then rounded into the 16-bit y
(convt/_kernels/_depthwise.pyx), with no float32 copy of x and no float32 y for
``guard.deliver`` to round. The bits must be those of the float32 call on the widened arrays,
rounded by astype (NumPy for float16, ml_dtypes for bfloat16): over 1-D to 3-D layers,
depthwise and channel multipliers, strides 1-3, dilations, odd sizes, bias or not, ``out=``
or not, 1-3 threads, every row kernel level (portable loop, AVX2, AVX-512), NaN and Inf in x,
float16 without F16C, streamed rows, long rows in blocks, and a layer whose rows do not fit
the thread's copy (x widened in one pass, y still rounded by the kernel). Channels-last
layers keep the float32 y that ``deliver`` rounds."""
import numpy as np
import pytest

import convt
from convt._backends.direct import depthwise
from convt._kernels import _cpu, _half

from _helpers import float32_rounded, refuse_narrowing, same_bits

ml_dtypes = pytest.importorskip("ml_dtypes")
BF = ml_dtypes.bfloat16
PIN = ("depthwise", False)
DTYPES = {"float16": np.float16, "bfloat16": BF}

# name: (x shape, w shape (IOX), attributes)
CASES = {
    "1d_s2": ((2, 5, 41), (5, 1, 4), dict(strides=(2,), pads=(1, 1), group=5)),
    "1d_s3_m3": ((1, 4, 29), (4, 3, 5), dict(strides=(3,), pads=(2, 1), group=4)),
    "1d_long": ((1, 3, 1500), (3, 1, 4), dict(strides=(2,), pads=(1, 1), group=3)),
    "2d_bilinear": ((1, 6, 13, 17), (6, 1, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1),
                                                       group=6)),
    "2d_s1_d2": ((2, 3, 9, 11), (3, 1, 3, 3), dict(dilations=(2, 2), pads=(2, 2, 2, 2),
                                                   group=3)),
    "2d_cg2_m2": ((1, 6, 7, 10), (6, 2, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1),
                                                    output_padding=(1, 1), group=3)),
    "2d_s3": ((1, 2, 5, 8), (2, 1, 5, 5), dict(strides=(3, 3), pads=(1, 2, 1, 2), group=2)),
    "3d_k4": ((1, 3, 4, 5, 7), (3, 1, 4, 4, 4), dict(strides=(2, 2, 2), pads=(1,) * 6,
                                                     group=3)),
    "3d_m2_s1": ((2, 2, 3, 4, 9), (2, 2, 3, 2, 3), dict(pads=(1, 0, 1, 1, 0, 1), group=2)),
}


def _arrays(name, dt, bias=True, seed=0, bad=False):
    xs, ws, kw = CASES[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dt)
    w = rng.standard_normal(ws).astype(dt)
    b = rng.standard_normal(ws[1] * kw["group"]).astype(dt) if bias else None
    if bad:   # NaN, Inf and -Inf at a few input positions
        flat = x.reshape(-1)
        for i, v in zip((0, flat.size // 3, flat.size // 2 + 1, flat.size - 1),
                        (np.nan, np.inf, -np.inf, np.nan)):
            flat[i] = v
    return x, w, b, kw


def _op(w, b, kw, workers=2):
    op = convt.ConvTranspose(w, b, method="direct", workers=workers, **kw)
    op._plan.pin = PIN
    return op


@pytest.mark.parametrize("level", [0, 1, 2])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_16bit_bits_equal_the_float32_result_rounded(name, dtype, bias, level, monkeypatch):
    if level > _cpu.ISA:
        pytest.skip("this CPU (or CONVT_ISA) has no such level")
    monkeypatch.setattr(_cpu, "ISA", level)
    x, w, b, kw = _arrays(name, DTYPES[dtype], bias)
    op = _op(w, b, kw)
    p = op._plan.geometry(x.shape)
    assert p.variant == "depthwise" and depthwise.VARIANT.writes_16bit(p.geom)
    want = float32_rounded(x, w, b, kw, pin=PIN)
    refuse_narrowing(monkeypatch)
    assert same_bits(op(x), want)
    out = np.full(want.shape, 7, want.dtype)
    assert op(x, out=out) is out
    assert same_bits(out, want)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", ["1d_s3_m3", "1d_long", "2d_bilinear", "3d_k4"])
def test_16bit_same_bits_for_any_thread_count(name, dtype, monkeypatch):
    x, w, b, kw = _arrays(name, DTYPES[dtype], seed=1)
    want = float32_rounded(x, w, b, kw, pin=PIN)
    refuse_narrowing(monkeypatch)
    for workers in (1, 2, 3, 1):
        assert same_bits(_op(w, b, kw, workers)(x), want)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", ["1d_s2", "2d_bilinear", "2d_s3", "3d_m2_s1"])
def test_non_finite_inputs_round_as_astype_rounds_them(name, dtype, monkeypatch):
    x, w, b, kw = _arrays(name, DTYPES[dtype], seed=2, bad=True)
    want = float32_rounded(x, w, b, kw, pin=PIN)
    refuse_narrowing(monkeypatch)
    got = _op(w, b, kw)(x)
    assert same_bits(got, want)
    wide = got.astype(np.float32)
    assert np.isnan(wide).any() and np.isinf(wide).any() and np.isfinite(wide).any()


@pytest.mark.parametrize("name", ["1d_s2", "2d_bilinear", "3d_k4"])
def test_float16_without_f16c_converts_through_the_scalar_bodies(name, monkeypatch):
    monkeypatch.setattr(_half, "F16C", False)
    assert _half.level(0) == 0
    x, w, b, kw = _arrays(name, np.float16, seed=3, bad=True)
    want = float32_rounded(x, w, b, kw, pin=PIN)
    refuse_narrowing(monkeypatch)
    assert same_bits(_op(w, b, kw)(x), want)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", ["1d_long", "2d_bilinear", "3d_k4"])
def test_streamed_rows_and_a_whole_widening_give_the_same_bits(name, dtype, monkeypatch):
    x, w, b, kw = _arrays(name, DTYPES[dtype], seed=4)
    want = float32_rounded(x, w, b, kw, pin=PIN)
    refuse_narrowing(monkeypatch)
    # every 16-bit y streamed (its new array 64-byte aligned, as the large ones are)
    monkeypatch.setattr(depthwise, "_STREAM_BYTES", 64)
    y = _op(w, b, kw)(x)
    assert y.__array_interface__["data"][0] % 64 == 0
    assert same_bits(y, want)
    out = np.empty(want.size + 1, want.dtype)[1:].reshape(want.shape)   # not aligned
    _op(w, b, kw)(x, out=out)
    assert same_bits(out, want)
    # rows too many for the thread's copy: x widened in one pass, y still rounded per run
    monkeypatch.setattr(depthwise, "_SLAB_BYTES", 0)
    assert same_bits(_op(w, b, kw)(x), want)


def test_channels_last_layers_are_rounded_by_deliver():
    x, w, b, kw = _arrays("2d_bilinear", np.float16, seed=5)
    want = float32_rounded(x, w, b, kw, pin=PIN)
    op = convt.ConvTranspose(w, b, method="direct", data_format="NXC", **kw)
    xl = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    p = op._plan.geometry(xl.shape)
    assert p.variant == "depthwise" and not depthwise.VARIANT.writes_16bit(p.geom)
    assert same_bits(np.ascontiguousarray(np.moveaxis(op(xl), -1, 1)), want)
