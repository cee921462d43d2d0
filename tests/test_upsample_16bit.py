"""The upsample variant on 16-bit storage (float16, bfloat16): its kernel widens each block of
x as it copies it and rounds each output into the 16-bit y as the tile stores it
(convt/_kernels/_upsample.pyx), with no float32 copy of x and no float32 y for
``guard.deliver`` to round. The bits must be those of the float32 call on the widened
arrays, rounded by astype (NumPy for float16, ml_dtypes for bfloat16): over 1-D to 3-D
layers, groups, odd channel counts and row lengths (partial vectors of both tiles), bias or
not, ``out=`` or not, 1-3 threads, both tile widths (ISA levels 1 and 2), NaN and Inf in x,
and float16 without F16C (its scalar conversions)."""
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import convt
from convt._backends.direct import upsample
from convt._kernels import _cpu, _half

from _helpers import float32_rounded, refuse_narrowing, same_bits

ml_dtypes = pytest.importorskip("ml_dtypes")
BF = ml_dtypes.bfloat16
TESTS = Path(__file__).resolve().parent
PIN = ("upsample", False)

pytestmark = pytest.mark.skipif(_cpu.ISA < 1,
                                reason="the upsample variant runs only with AVX2+FMA")

# name: (x shape, w shape (IOX), group); strides = the kernel
CASES = {
    "1d_odd": ((2, 19, 37), (19, 7, 2), 1),
    "1d_g2": ((1, 34, 16), (34, 5, 2), 2),
    "2d_k2": ((1, 24, 5, 29), (24, 9, 2, 2), 1),
    "2d_k3x2_g3": ((2, 51, 3, 50), (51, 4, 3, 2), 3),
    "2d_wide": ((1, 17, 2, 97), (17, 3, 1, 2), 1),
    "3d_k2": ((1, 20, 3, 2, 23), (20, 6, 2, 2, 2), 1),
    "3d_g4": ((1, 64, 2, 3, 9), (64, 3, 2, 1, 2), 4),
}
DTYPES = {"float16": np.float16, "bfloat16": BF}


def _arrays(name, dt, bias=True, seed=0, bad=False):
    xs, ws, g = CASES[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dt)
    w = rng.standard_normal(ws).astype(dt)
    b = rng.standard_normal(ws[1] * g).astype(dt) if bias else None
    if bad:   # NaN, Inf and -Inf at a few input positions (rows' ends and middles)
        flat = x.reshape(-1)
        for i, v in zip((0, flat.size // 3, flat.size // 2 + 1, flat.size - 1),
                        (np.nan, np.inf, -np.inf, np.nan)):
            flat[i] = v
    return x, w, b, dict(strides=ws[2:], group=g)


def _op(w, b, kw, workers=2):
    op = convt.ConvTranspose(w, b, method="direct", workers=workers, **kw)
    op._plan.pin = PIN
    return op


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_16bit_bits_equal_the_float32_result_rounded(name, dtype, bias, level, monkeypatch):
    if level > _cpu.ISA:
        pytest.skip("this CPU has no AVX-512")
    monkeypatch.setattr(_cpu, "ISA", level)
    x, w, b, kw = _arrays(name, DTYPES[dtype], bias)
    op = _op(w, b, kw)
    assert op._plan.geometry(x.shape).variant == "upsample"
    assert upsample.VARIANT.writes_16bit(op._plan.geometry(x.shape).geom)
    want = float32_rounded(x, w, b, kw, pin=PIN)
    refuse_narrowing(monkeypatch)
    assert same_bits(op(x), want)
    out = np.full(want.shape, 7, want.dtype)
    assert op(x, out=out) is out
    assert same_bits(out, want)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", ["1d_odd", "2d_k3x2_g3", "3d_k2"])
def test_16bit_same_bits_for_any_thread_count(name, dtype, monkeypatch):
    x, w, b, kw = _arrays(name, DTYPES[dtype], seed=1)
    want = float32_rounded(x, w, b, kw, pin=PIN)
    refuse_narrowing(monkeypatch)
    for workers in (1, 2, 3, 1):
        assert same_bits(_op(w, b, kw, workers)(x), want)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", ["1d_odd", "2d_wide", "3d_g4"])
def test_non_finite_inputs_round_as_astype_rounds_them(name, dtype, monkeypatch):
    x, w, b, kw = _arrays(name, DTYPES[dtype], seed=2, bad=True)
    want = float32_rounded(x, w, b, kw, pin=PIN)
    refuse_narrowing(monkeypatch)
    got = _op(w, b, kw)(x)
    assert same_bits(got, want)
    wide = got.astype(np.float32)
    assert np.isnan(wide).any() and np.isinf(wide).any() and np.isfinite(wide).any()


@pytest.mark.parametrize("name", ["1d_odd", "2d_k2", "3d_k2"])
def test_float16_without_f16c_rounds_through_the_scalar_conversions(name, monkeypatch):
    monkeypatch.setattr(_half, "F16C", False)
    assert _half.level(0) == 0
    x, w, b, kw = _arrays(name, np.float16, seed=3, bad=True)
    want = float32_rounded(x, w, b, kw, pin=PIN)
    refuse_narrowing(monkeypatch)
    assert same_bits(_op(w, b, kw)(x), want)


def test_a_16bit_input_into_a_float32_staging_out():
    # a 16-bit out of the other byte order: the plan stages float32 (the kernel still
    # widens x block by block) and deliver swaps
    x, w, b, kw = _arrays("2d_k2", np.float16, seed=4)
    out = np.empty(float32_rounded(x, w, b, kw, pin=PIN).shape, np.dtype(">f2"))
    _op(w, b, kw)(x, out=out)
    assert np.array_equal(out.astype(np.float16).view(np.uint16),
                          float32_rounded(x, w, b, kw, pin=PIN).view(np.uint16))


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_workspace_bytes_is_what_a_call_takes(dtype, level, order, monkeypatch):
    # the kernel's scratch (one thread) is the arena's whole request; a Fortran-ordered x
    # adds its C-contiguous copy in the storage dtype (16-bit x is never widened whole):
    # the first call's peak NumPy allocation into a given out is that, plus a few small
    # arrays (the kernel's dims, the 64-byte layout)
    if level > _cpu.ISA:
        pytest.skip("this CPU has no AVX-512")
    monkeypatch.setattr(_cpu, "ISA", level)
    dt = DTYPES.get(dtype, np.float32)
    rng = np.random.default_rng(6)
    x = np.asarray(rng.standard_normal((2, 64, 16, 32)), dt, order=order)
    op = _op(rng.standard_normal((64, 16, 2, 2)).astype(dt), None, dict(strides=(2, 2)), 1)
    p = op._plan.geometry(x.shape)
    assert p.variant == "upsample"
    est = upsample.VARIANT.workspace_bytes(p.geom, 4, x.itemsize)
    copy = x.size * x.itemsize
    out = np.empty(p.geom.array_shape("output"), dt)
    tracemalloc.start()
    try:
        op(x, out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert op._plan.workspace.nbytes() == est - copy
    if order == "F":
        assert est <= peak <= est + 16384, (est, peak)
    else:
        assert est - copy <= peak <= est - copy + 16384, (est, peak)


_CHILD = """
import json
import numpy as np
import test_upsample_16bit as t
import convt
out = {"variants": {}, "differ": []}
for name in sorted(t.CASES):
    for dtype in sorted(t.DTYPES):
        x, w, b, kw = t._arrays(name, t.DTYPES[dtype], seed=5)
        op = convt.ConvTranspose(w, b, method="direct", workers=2, **kw)
        out["variants"][name + " " + dtype] = op._plan.geometry(x.shape).variant
        if not t.same_bits(op(x), t.float32_rounded(x, w, b, kw, pin=t.PIN)):
            out["differ"].append([name, dtype])
print(json.dumps(out))
"""


def test_unpinned_calls_at_the_avx2_level_run_the_16bit_kernel():
    # where the CPU has AVX512-BF16, micro_bf16 takes bfloat16 layers from the upsample
    # variant; CONVT_ISA=avx2 (a child process) leaves them to it
    env = dict(os.environ, CONVT_ISA="avx2",
               PYTHONPATH=os.pathsep.join([str(TESTS)] + sys.path))
    run = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, check=True, cwd=str(TESTS))
    got = json.loads(run.stdout)
    assert got["differ"] == []
    assert set(got["variants"].values()) == {"upsample"}
