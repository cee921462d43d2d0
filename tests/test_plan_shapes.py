"""One prepared operator called on inputs of several shapes whose pads differ.

With ``output_shape`` (ONNX ConvTranspose-11, "pads are auto generated" from it: the total
padding is stride * (in - 1) + output_padding + (k - 1) * d + 1 - output_shape), each input
shape has pads of its own, so phases, taps and the packed weights' order move with the
shape. Whatever the operator computed before, each call must give the bits a new operator
gives on that shape, and the reference's values. micro_bf16 kept one pack per operator and
gave a relative error of 1.35 on the second shape (fixed 2026-11-27).
"""
import numpy as np
import pytest

import convt
from convt._kernels import _cpu

from conftest import np_dtype

# (kernel, strides, output_shape, input sizes whose pads differ, C_in, C_out per group, groups)
_LAYERS = {
    "dense_k4_s2": ((4, 4), (2, 2), (20, 20), (9, 10), 64, 48, 1),
    "dense_k3_s2": ((3, 3), (2, 2), (19, 19), (9, 10), 64, 32, 1),
    "one_d_k16_s8": ((16,), (8,), (80,), (9, 10), 64, 32, 1),
    "one_d_k4_s2": ((4,), (2,), (40,), (19, 20), 128, 64, 1),
    "k2_s2": ((2, 2), (2, 2), (16, 16), (7, 8), 64, 64, 1),
    "grouped": ((3, 3), (2, 2), (15, 15), (7, 8), 32, 8, 4),
    "depthwise": ((4, 4), (2, 2), (20, 20), (9, 10), 1, 1, 16),
    "three_d": ((3, 3, 3), (2, 2, 2), (9, 9, 9), (4, 5), 16, 16, 1),
    "small": ((3,), (3,), (14,), (4, 5), 3, 2, 1),
}
_DTYPES = ["float64", "float32", "float16", "bfloat16"]


def _arrays(name, dtype, rng):
    kernel, strides, osz, sizes, c_in, mg, g = _LAYERS[name]
    w = rng.standard_normal((c_in * g, mg, *kernel)).astype(dtype)
    b = rng.standard_normal(mg * g).astype(dtype)
    xs = [rng.standard_normal((2, c_in * g) + (s,) * len(kernel)).astype(dtype)
          for s in sizes]
    return w, b, xs, dict(strides=strides, output_shape=osz, group=g)


@pytest.mark.parametrize("method", ["direct", "fft"])
@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("name", sorted(_LAYERS))
def test_each_shape_gets_a_new_operators_bits(name, dtype, method):
    dt = np_dtype(dtype)
    w, b, xs, kw = _arrays(name, dt, np.random.default_rng(len(name)))
    op = convt.ConvTranspose(w, b, method=method, **kw)
    pads = set()
    for x in xs + xs[::-1]:   # each shape after the other, both ways
        y = op(x)
        pads.add(op._plan.geometry(x.shape).geom.pads_begin)
        fresh = convt.ConvTranspose(w, b, method=method, **kw)(x)
        assert y.shape == fresh.shape
        assert np.array_equal(y.view(np.uint8), fresh.view(np.uint8)), (name, x.shape)
        ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                   b.astype(np.float64), method="reference", **kw)
        err = np.abs(y.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30)
        assert err < {"float64": 1e-12, "float32": 1e-5}.get(dtype, 2e-2), (name, x.shape)
    assert len(pads) == 2   # the shapes really have other pads


@pytest.mark.skipif(not _cpu.bf16(), reason="micro_bf16 needs AVX512-BF16")
def test_the_bfloat16_layers_run_the_pair_tiles():
    """The case that was broken: micro_bf16 planned on each shape of the dense layers."""
    dt = np_dtype("bfloat16")
    for name in ("dense_k4_s2", "dense_k3_s2", "one_d_k16_s8"):
        w, b, xs, kw = _arrays(name, dt, np.random.default_rng(0))
        op = convt.ConvTranspose(w, b, method="direct", **kw)
        assert {op._plan.geometry(x.shape).variant for x in xs} == {"micro_bf16"}
