"""A 16-bit result of the Winograd variant rounded as its kernels store it (no narrowing pass).

The channels-first kernel (convt._kernels._cfwino) rounds each row of a block from the
thread's scratch into the float16 / bfloat16 row; the NXC kernel's channels-first y is
rounded by its sets as they write it (8 x 8 blocks through L1), or, staged channels-last in
float32, by its transpose (``_layout.to_padded_nxc_narrow``). Each way the result must be the
bits of the float32 call rounded by astype, for any thread count, with ``out=`` or without,
and when a value past the Winograd bound sends the call to the micro variant. The plan's
``deliver`` (the narrowing pass) is made to fail, so a case that still takes it fails;
channels-last data, which the kernel still writes in float32, is checked to take it.
bfloat16 runs these kernels only below the BF16 level (micro_bf16 above it): it is checked
in a child process with CONVT_ISA=avx2, float16 there too.
"""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import convt
from convt._backends.direct import micro, winograd
from convt._backends.direct import registry as direct
from convt._backends.direct.cfwino import CfLayout
from convt._backends.direct.winograd_layout import wino_alignment
from convt._dispatch import plan as plan_mod
from convt._kernels import _cpu, _layout

from _helpers import float32_rounded, refuse_narrowing, same_bits
from conftest import np_dtype

pytestmark = pytest.mark.skipif(_cpu.ISA < 1, reason="the Winograd variant needs AVX2 + FMA")
TESTS = Path(__file__).resolve().parent

# name: (x shape, w shape (IOX), attributes, path: "cf" channels-first kernel, "sets" and
# "staged" the NXC kernel's channels-first write-outs)
CASES = {
    "cf_s2": ((1, 64, 203), (64, 64, 4), dict(strides=(2,), pads=(1, 1)), "cf"),
    "cf_s2_odd": ((2, 67, 61), (67, 65, 4), dict(strides=(2,), pads=(1, 2)), "cf"),
    "cf_s4_g2": ((1, 130, 45), (130, 66, 8), dict(strides=(4,), pads=(2, 2), group=2), "cf"),
    "cf_s8": ((1, 64, 37), (64, 72, 16), dict(strides=(8,), pads=(4, 4)), "cf"),
    "sets_1d": ((2, 64, 29), (64, 67, 3), dict(pads=(1, 1)), "sets"),
    "sets_1d_s2": ((1, 64, 40), (64, 200, 6), dict(strides=(2,), pads=(2, 2)), "sets"),
    "sets_2d": ((2, 64, 8, 7), (64, 80, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)), "sets"),
    "sets_2d_d2": ((1, 64, 13, 11), (64, 64, 3, 3), dict(dilations=(2, 2), pads=(2, 2, 2, 2)),
                   "sets"),
    "staged_1d": ((1, 512, 20), (512, 256, 16), dict(strides=(8,), pads=(4, 4)), "staged"),
    "staged_2d": ((4, 128, 4, 4), (128, 256, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)),
                  "staged"),
    "staged_2d_g2": ((1, 130, 12, 10), (130, 65, 3, 3),
                     dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1), group=2),
                     "staged"),
    "staged_3d": ((1, 65, 5, 6, 7), (65, 67, 4, 4, 4), dict(strides=(2, 2, 2), pads=(1,) * 6),
                  "staged"),
}


# x and w scaled so that some results overflow: float16's past 65504 (Inf), bfloat16's
# float32 sums past float32's range (Inf, and NaN where the combine adds Inf and -Inf)
HUGE = {"float16": 300.0, "bfloat16": 1e19}


def _arrays(name, dt, bias=True, seed=0, scale=1.0):
    xs, ws, kw, _ = CASES[name]
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(xs) * scale).astype(dt)
    w = (rng.standard_normal(ws) * scale / np.sqrt(ws[0])).astype(dt)
    b = rng.standard_normal(ws[1] * kw.get("group", 1)).astype(dt) if bias else None
    return x, w, b, kw


def _path(op, shape):
    p = op._plan.geometry(shape)
    if p.variant != "winograd":
        return p.variant
    if isinstance(p.state[0], CfLayout):
        return "cf"
    return "sets" if p.state[0].sets else "staged"


@pytest.fixture
def no_narrowing_pass(monkeypatch):
    refuse_narrowing(monkeypatch)


def check_case(name, dtname, workers, bias, given_out, huge=False):
    """Bits of the 16-bit call against the float32 call rounded; returns the path taken."""
    dt = np_dtype(dtname)
    x, w, b, kw = _arrays(name, dt, bias, scale=HUGE[dtname] if huge else 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        want = float32_rounded(x, w, b, kw, workers)
    if huge:
        assert not np.isfinite(want.astype(np.float32)).all()
    op = convt.ConvTranspose(w, b, workers=workers, **kw)
    out = np.full(want.shape, np.nan, dt) if given_out else None
    got = op(x, out=out)
    assert got is out or out is None
    assert same_bits(got, want), f"{name} {dtname} workers {workers}"
    return _path(op, x.shape)


@pytest.mark.parametrize("given_out", [False, True], ids=["new", "out"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_float16_is_the_float32_result_rounded_as_stored(name, workers, bias, given_out,
                                                          no_narrowing_pass):
    assert check_case(name, "float16", workers, bias, given_out) == CASES[name][3]


@pytest.mark.parametrize("name", sorted(CASES))
def test_results_past_the_16_bit_range_keep_astype_bits(name, no_narrowing_pass):
    assert check_case(name, "float16", 2, True, False, huge=True) == CASES[name][3]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_variant_says_it_rounds_into_the_out(name):
    # channels-first data: the Winograd variant (not a fallback) says it rounds; the same
    # layer channels-last does not (its y takes the narrowing pass)
    x, w, b, kw = _arrays(name, np.float16)
    p = convt.ConvTranspose(w, b, **kw)._plan.geometry(x.shape)
    if p.variant != "winograd":
        pytest.skip(f"{p.variant} runs it at this ISA level")
    assert direct.BY_NAME["winograd"].writes_16bit(p.geom)
    assert not direct.BY_NAME["winograd"].writes_16bit(dataclasses.replace(p.geom, data_format="NXC"))


FALLBACK = ["cf_s2", "cf_s4_g2", "sets_2d", "staged_2d", "staged_3d"]


def check_fallback(name, dtname):
    """A value past the Winograd bound in x (float16's finite values are all within it: Inf
    there; bfloat16 a huge finite one): the micro variant computes, into the 16-bit out, the
    float32 call's result rounded. Returns the dtypes of the outs it was handed (None when
    the plan does not run the Winograd variant)."""
    dt = np_dtype(dtname)
    x, w, b, kw = _arrays(name, dt)
    x.reshape(-1)[x.size // 3] = np.inf if dtname == "float16" else 3e38
    want = float32_rounded(x, w, b, kw, 2)
    op = convt.ConvTranspose(w, b, workers=2, **kw)
    if op._plan.geometry(x.shape).variant != "winograd":
        return None
    ran, real = [], micro.run_instead
    micro.run_instead = lambda *a: ran.append(str(a[-1].dtype)) or real(*a)
    try:
        got = op(x)
    finally:
        micro.run_instead = real
    assert same_bits(got, want), (name, dtname)
    assert np.nanmax(np.abs(got.astype(np.float32))) > (6e4 if dtname == "float16" else 1e36)
    return ran


@pytest.mark.parametrize("dtname", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", FALLBACK)
def test_a_value_past_the_bound_runs_the_micro_variant_into_the_out(name, dtname,
                                                                     no_narrowing_pass):
    ran = check_fallback(name, dtname)
    if ran is None:
        pytest.skip("bfloat16 runs micro_bf16 at this ISA level (checked in the child)")
    assert ran == [dtname]   # the micro variant wrote the 16-bit out itself


@pytest.mark.parametrize("name", ["cf_s2", "cf_s8", "staged_2d"])
def test_a_pinned_plan_gives_the_same_bits(name, no_narrowing_pass):
    # a dask block's plan (pinned, with the whole array's alignment) runs the NXC kernel,
    # also on a geometry the channels-first kernel runs unpinned
    x, w, b, kw = _arrays(name, np.float16)
    op = convt.ConvTranspose(w, b, workers=2, **kw)
    geom = op._plan.geometry(x.shape).geom
    pinned = op._plan.with_spec(op._plan.spec, ("winograd", wino_alignment(geom, (0,) *
                                                                           geom.ndim)))
    p = pinned.geometry(x.shape)
    assert p.variant == "winograd" and not isinstance(p.state[0], CfLayout)
    assert same_bits(pinned(x), float32_rounded(x, w, b, kw, 2))


def test_channels_last_data_still_rounds_in_a_pass_of_its_own(monkeypatch):
    x = np.random.default_rng(3).standard_normal((1, 64, 20, 20)).astype(np.float16)
    w = (np.random.default_rng(4).standard_normal((64, 64, 3, 3)) / 8).astype(np.float16)
    kw = dict(dilations=(2, 2), pads=(2, 2, 2, 2))
    op = convt.ConvTranspose(w, workers=2, data_format="NXC", **kw)
    xl = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    p = op._plan.geometry(xl.shape)
    assert p.variant == "winograd" and not direct.BY_NAME["winograd"].writes_16bit(p.geom)
    passes = []
    real = plan_mod.deliver
    monkeypatch.setattr(plan_mod, "deliver", lambda *a: passes.append(1) or real(*a))
    got = op(xl)
    assert passes == [1]
    want = np.moveaxis(float32_rounded(x, w, None, kw, 2), 1, -1)
    assert same_bits(got, np.ascontiguousarray(want))
    # a runner handed a 16-bit out there anyway returns a float32 result for the plan to round
    out = np.zeros(p.geom.array_shape("output"), np.float16)
    y = p.runner(xl, p.state, p.geom, op._plan, out)
    assert y.dtype == np.float32 and not out.any()
    assert same_bits(y.astype(np.float16), got)


@pytest.mark.parametrize("kind", [0, 1], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(2, 40, 1, 1, 24), (1, 16, 1, 1, 16), (3, 7, 1, 1, 9)])
def test_the_narrowing_transpose_gives_astype_bits(shape, kind):
    # whole 16 x 8 blocks, and the edges one value per store; NaN (with a payload), Inf,
    # values rounding to Inf, subnormals and ties
    dt = np_dtype("float16" if kind == 0 else "bfloat16")
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    flat = x.reshape(-1)
    flat[:6] = [np.inf, -0.0, 65520.0, 1e-7, 1.0 + 2**-11, 3e38]
    flat.view(np.uint32)[7] = 0x7fc12345
    with np.errstate(over="ignore"):
        want = np.moveaxis(x.reshape(shape[0], shape[1], -1), 1, 2).astype(dt)
    got = np.zeros(want.shape, dt)
    for isa in sorted({0, _cpu.ISA}):
        for workers in (1, 2):
            got[...] = 0
            _layout.to_padded_nxc_narrow(x, got.reshape(shape[0], 1, 1, shape[4], shape[1])
                                         .view(np.uint16), np.zeros(3, np.int64), workers,
                                         isa, kind)
            assert same_bits(got, want), (isa, workers)


_CHILD = """
import json
import test_winograd_16bit_out as t
from _helpers import strict_deliver
from convt._kernels import _cpu
t.plan_mod.deliver = strict_deliver(t.plan_mod.deliver)
out = {"isa": _cpu.ISA, "bf16": _cpu.BF16, "paths": {}, "fallback": {}}
for dtname in ("float16", "bfloat16"):
    for name in sorted(t.CASES):
        for workers in (1, 2):
            out["paths"][name + " " + dtname] = t.check_case(name, dtname, workers,
                                                             workers == 1, workers == 2)
        t.check_case(name, dtname, 2, True, False, huge=True)
    for name in t.FALLBACK:
        out["fallback"][name + " " + dtname] = t.check_fallback(name, dtname)
print(json.dumps(out))
"""


@pytest.mark.parametrize("cap", ["avx2"])
def test_bfloat16_below_the_bf16_level_is_rounded_as_stored(cap):
    # the child imports the convt this process runs (sys.path) and this test module
    env = dict(os.environ, CONVT_ISA=cap, PYTHONPATH=os.pathsep.join([str(TESTS)] + sys.path))
    run = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, cwd=str(TESTS))
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout)
    assert got["isa"] == 1 and not got["bf16"]
    assert got["paths"] == {f"{n} {d}": CASES[n][3] for n in CASES
                            for d in ("float16", "bfloat16")}
    assert got["fallback"] == {f"{n} {d}": [d] for n in FALLBACK
                               for d in ("float16", "bfloat16")}


@pytest.mark.parametrize("name", ["cf_s4_g2", "sets_2d", "staged_2d_g2", "dcgan_g1"])
def test_one_shot_calls_round_as_stored(name, no_narrowing_pass, monkeypatch):
    # one-shot plans too; dcgan_g1's products take 8 MB or more, so its one-shot call sums
    # them in the kernel (winograd.late_sums) before the staged transpose rounds y
    if name == "dcgan_g1":
        rng = np.random.default_rng(7)
        x = rng.standard_normal((16, 512, 4, 4)).astype(np.float16)
        w = (rng.standard_normal((512, 256, 4, 4)) / 45).astype(np.float16)
        b, kw = None, dict(strides=(2, 2), pads=(1, 1, 1, 1))
    else:
        x, w, b, kw = _arrays(name, np.float16)
    late = []
    real = winograd.run_wino
    monkeypatch.setattr(winograd, "run_wino", lambda *a, **k: late.append(a[8]) or real(*a, **k))
    got = convt.conv_transpose(x, w, b, workers=2, **kw)
    assert late == ([True] if name == "dcgan_g1" else [False] if "cf" not in name else [])
    assert same_bits(got, float32_rounded(x, w, b, kw, 2))
