"""16-bit x on the Winograd variant's channels-first kernel (convt._kernels._cfwino), which
widens each block's input segments in registers as it builds their rows (no widening pass of
x, no widened copy; _cwkernel.h's convt_cw_rows16) and tests the
Winograd bound on the 16-bit bits: the result is bit for bit the float32 call on x widened,
rounded once by astype, for 1 and 2 threads, with NaN (signaling too), Inf and values past
the Winograd bound (bfloat16: the micro variant then) anywhere, block edges included, several
blocks a row, strides 2-8 and outputs cropped past the data."""
import numpy as np
import pytest

import convt
from convt._backends.direct import cfwino
from convt._kernels import _cpu

from conftest import np_dtype

pytestmark = pytest.mark.skipif(_cpu.ISA < 1, reason="the kernel needs AVX2 + FMA")

# (C_in, C_out, W, stride, pads): tiles per block 24, so W 48 is one block, 100 several,
# 301 odd; pads_end past the kernel crops the last block's outputs
LAYERS = [(8, 8, 48, 2, (1, 1)), (16, 12, 100, 2, (1, 1)), (8, 4, 301, 2, (1, 3)),
          (4, 8, 97, 4, (2, 2)), (6, 5, 50, 8, (4, 4)), (3, 16, 7, 2, (1, 1))]


def _bits(a):
    return a.view(np.uint16)


@pytest.mark.parametrize("special", [None, "nan", "snan", "inf", "big", "edges"])
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("layer", LAYERS, ids=[f"l{i}" for i in range(len(LAYERS))])
def test_16_bit_x_gives_the_float32_result_rounded(layer, name, special, monkeypatch):
    c_in, c_out, width, s, pads = layer
    dt = np_dtype(name)
    rng = np.random.default_rng(width * s + c_in)
    x = rng.standard_normal((2, c_in, width)).astype(dt)
    w = rng.standard_normal((c_in, c_out, 2 * s)).astype(dt)
    b = rng.standard_normal(c_out).astype(dt)
    flat = x.reshape(-1)
    if special == "nan":
        flat[int(rng.integers(flat.size))] = np.nan
    elif special == "snan":   # a signaling NaN (F16C would quiet it): the micro variant runs
        bits = 0x7d01 if name == "float16" else 0x7f81
        flat.view(np.uint16)[int(rng.integers(flat.size))] = bits
    elif special == "inf":
        flat[int(rng.integers(flat.size))] = -np.inf
    elif special == "big":
        flat[int(rng.integers(flat.size))] = 6e4 if name == "float16" else 3e38
    elif special == "edges":   # the first and last values of every channel row, and 48's
        x[:, :, 0] = 6e4 if name == "float16" else 1e38
        x[:, :, -1] = -x[:, :, 0]
        x[:, :, 47 % width] = np.inf
    kw = dict(strides=(s,), pads=pads)
    seen = []
    monkeypatch.setattr(cfwino, "as_compute", lambda xa, *a, **k: seen.append(xa.dtype) or
                        np.ascontiguousarray(xa, dtype=np.float32))
    ys = []
    for workers in (1, 2):
        op16 = convt.ConvTranspose(w, b, method="direct", workers=workers, **kw)
        op32 = convt.ConvTranspose(w.astype(np.float32), b.astype(np.float32),
                                   method="direct", workers=workers, **kw)
        op16._plan.pin = op32._plan.pin = ("winograd", None)   # as convt.dask pins it
        assert op16._plan.geometry(x.shape).variant == "winograd"
        assert cfwino.cf_layout(op16._plan.geometry(x.shape).geom, 4) is not None
        with np.errstate(invalid="ignore", over="ignore"):
            want = op32(x.astype(np.float32)).astype(dt)
            y = op16(x)
        assert y.dtype == dt and y.shape == want.shape
        np.testing.assert_array_equal(_bits(y), _bits(want))
        ys.append(_bits(y))
    np.testing.assert_array_equal(ys[0], ys[1])
    assert np.dtype(dt) not in seen   # no widening pass: the kernel widened x


def _random_finite_bits(rng, shape, name):
    # every sign, exponent and mantissa bit at random: subnormals, -0 and values at every
    # even and odd position of a segment, none a NaN or Inf (bfloat16's exponents kept well
    # below the Winograd bound, whose values would send the call to the micro variant)
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    if name == "float16":
        bits[(bits & 0x7c00) == 0x7c00] &= 0xbfff
    else:
        e = (bits >> 7) & 0xff
        bits = np.where(e > 0x8f, bits & ~np.uint16(0x7f80) | np.uint16(0x8f << 7), bits)
    return bits.astype(np.uint16)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("layer", [(40, 8, 200, 2, (1, 1)), (13, 6, 151, 4, (2, 2)),
                                   (7, 3, 53, 2, (1, 3))], ids=["c40", "s4", "c7"])
def test_every_16_bit_pattern_widens_exactly(layer, name, monkeypatch):
    # the segments widened in registers (even and odd positions gathered) and their scalar
    # tails give float32 x's bits: segments read in place (c40 and s4; c7's two blocks are
    # both copies) and at both ends, channels past the prefetch distance (the prefetch itself
    # changes no value), 1 and 2 threads; the kernel's result (no micro fallback)
    c_in, c_out, width, s, pads = layer
    dt = np_dtype(name)
    rng = np.random.default_rng(c_in * width)
    x = _random_finite_bits(rng, (2, c_in, width), name).view(dt)
    w = (rng.standard_normal((c_in, c_out, 2 * s)) / 4).astype(dt)
    b = rng.standard_normal(c_out).astype(dt)
    monkeypatch.setattr(cfwino._micro, "run_instead", lambda *a, **k: pytest.fail("fallback"))
    ys = []
    for workers in (1, 2):
        op16 = convt.ConvTranspose(w, b, method="direct", workers=workers, strides=(s,),
                                   pads=pads)
        op32 = convt.ConvTranspose(w.astype(np.float32), b.astype(np.float32),
                                   method="direct", workers=workers, strides=(s,), pads=pads)
        op16._plan.pin = op32._plan.pin = ("winograd", None)
        assert cfwino.cf_layout(op16._plan.geometry(x.shape).geom, 4) is not None
        with np.errstate(over="ignore"):
            want = op32(x.astype(np.float32)).astype(dt)
        y = op16(x)
        np.testing.assert_array_equal(_bits(y), _bits(want))
        ys.append(_bits(y))
    np.testing.assert_array_equal(ys[0], ys[1])
