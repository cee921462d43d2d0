"""Adversarial tests of the 16-bit storage paths and the ISA caps: where the promises of
README.md and docs/precision.md could break, held to an element-by-element oracle.

Oracle: a float16 / bfloat16 result must be a rounding (to its dtype, round to nearest even,
monotone) of some float32 value within ``_SLACK`` x 2^-24 x sum|terms| of the exact sum of
the rounded inputs (the float64 reference, ``method="reference"``); NaN exactly where the
reference has NaN, Inf of the reference's sign where it has Inf. Per element, so a wrong
value next to large ones is caught (the suite's normwise ``assert_close`` would pass it).
The float32 sums of the direct variants stay within 7 x 2^-24 x sum|terms| on these layers
(AMD EPYC Zen 4, 2026-11-27, float32 inputs): ``_SLACK`` = 64 leaves 9x.

Layers: one or more per direct variant and kernel (micro, Winograd F(2, 2) / F(2, 3) / 3-D
/ channels-first, upsample, GEMM, depthwise channels-first and -last, pixel through a
non-finite weight, bfloat16 pair tiles), at channel counts off the 16-wide tile, odd groups,
one channel, one output, strides past the kernel, negative pads (``output_shape`` past the
full length), and a long 1-D row. Values: NaN, +-Inf in x or w, -0.0, subnormal results,
values near the 16-bit maximum, a dynamic range of 2^+-60 (bfloat16) or 2^+-8 (float16).
The same sweep runs in child processes under ``CONVT_ISA=avx2`` and ``generic``.

What this sweep found broken (2026-11-27), fixed or documented since: tests/test_found16.py.
"""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import convt
from convt._backends.direct import micro_amx, winograd
from convt._dispatch import plan as _plan
from convt._kernels import _cpu

from _helpers import same_bits

ml_dtypes = pytest.importorskip("ml_dtypes")
BF = ml_dtypes.bfloat16
TESTS = Path(__file__).resolve().parent
_U32 = 2.0 ** -24
_SLACK = 64

# name: (x shape, NCX order; w shape (IOX); attributes)
LAYERS = {
    "micro": ((2, 32, 7, 6), (32, 48, 3, 3),
              dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1))),
    "micro_1d_long": ((1, 16, 3000), (16, 16, 3), dict(pads=(1, 1))),
    "wino_f22": ((1, 64, 8, 8), (64, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "wino_f23_nxc": ((2, 64, 9, 7), (64, 80, 3, 3), dict(pads=(1, 1, 1, 1), data_format="NXC")),
    "wino_cf": ((1, 128, 50), (128, 64, 4), dict(strides=(2,), pads=(1, 1), group=2)),
    "wino_3d": ((1, 64, 4, 4, 4), (64, 64, 3, 3, 3), dict(pads=(1,) * 6)),
    "upsample": ((1, 16, 6, 5), (16, 16, 2, 2), dict(strides=(2, 2))),
    "gemm_k1": ((2, 20, 9, 9), (20, 30, 1, 1), {}),
    "gemm_pad": ((1, 40, 8, 8), (40, 5, 3, 3), dict(strides=(2, 2))),
    "depthwise": ((2, 12, 9, 9), (12, 1, 4, 4),
                  dict(strides=(2, 2), pads=(1, 1, 1, 1), group=12)),
    "depthwise_nxc": ((1, 6, 9, 8), (6, 1, 3, 3), dict(strides=(2, 2), group=6,
                                                         data_format="NXC")),
    "multiplier3_1d": ((1, 6, 40), (6, 3, 5), dict(strides=(3,), group=6)),
    "grouped_odd": ((1, 30, 5, 5), (30, 21, 3, 3), dict(strides=(2, 2), group=3)),
    "grouped_odd_cg": ((2, 33, 5, 4), (33, 20, 3, 3), dict(strides=(2, 1), group=3,
                                                         data_format="NXC")),
    "3d_nxc": ((1, 7, 3, 4, 3), (7, 17, 2, 3, 2), dict(strides=(2, 1, 2), pads=(1, 0, 0) * 2,
                                                     data_format="NXC")),
    "stride_past_k": ((1, 16, 5, 4), (16, 32, 2, 3), dict(strides=(5, 4), dilations=(2, 1))),
    "one_channel": ((3, 1, 7), (1, 1, 3), {}),
    "one_output": ((1, 16, 1, 1), (16, 16, 1, 1), {}),
    "neg_pads": ((1, 17, 5, 6), (17, 33, 3, 3), dict(strides=(2, 2), output_shape=(14, 16))),
}
MODES = ["normal", "nan_x", "inf_x", "nan_w", "inf_w", "negzero", "subnormal", "big", "range"]
DTYPES = ["float16", "bfloat16"]


def _dt(name):
    return BF if name == "bfloat16" else np.dtype(name).type


def _nxc(kw):
    return kw.get("data_format") == "NXC"


def arrays(name, dtname, mode="normal", seed=0):
    """x (in the layer's data format), w, b, attributes: standard normal rounded to the
    dtype, then ``mode``'s special values."""
    xs, ws, kw = LAYERS[name]
    dt, rng = _dt(dtname), np.random.default_rng(seed)
    x = rng.standard_normal(xs)
    if _nxc(kw):
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    w = rng.standard_normal(ws)
    b = rng.standard_normal(ws[1] * kw.get("group", 1))
    f16 = dtname == "float16"
    if mode == "negzero":   # -0.0 in half of x and in every bias
        x.reshape(-1)[::2] = -0.0
        b[:] = -0.0
    elif mode == "subnormal":   # results in the dtype's subnormal range
        x, b = x * (2.0 ** -20 if f16 else 2.0 ** -130), b * (2.0 ** -20 if f16 else 2.0 ** -130)
    elif mode == "big":   # float16: sums past 65504 (Inf); bfloat16: 2^100
        x = x * (6e4 / 4 if f16 else 2.0 ** 100)
    elif mode == "range":
        x = x * 2.0 ** rng.integers(-8, 8, x.shape) if f16 else x * 2.0 ** rng.integers(
            -60, 60, x.shape)
    with np.errstate(over="ignore"):
        x, w, b = x.astype(dt), w.astype(dt), b.astype(dt)
    at = lambda a: tuple(int(i) for i in rng.integers(0, a.shape))   # noqa: E731
    if mode == "nan_x":
        x[at(x)] = np.nan
    elif mode == "inf_x":
        x[at(x)], x[at(x)] = np.inf, -np.inf
    elif mode == "nan_w":
        w[at(w)] = np.nan
    elif mode == "inf_w":
        w[at(w)] = -np.inf
    return x, w, b, kw


def oracle_violations(y, x, w, b, kw):
    """Mask of the elements of the 16-bit ``y`` that the module's oracle refuses."""
    f64 = lambda a, f=np.asarray: np.asarray(f(np.asarray(a, np.float64)))   # noqa: E731
    with np.errstate(all="ignore"):
        ref = convt.conv_transpose(f64(x), f64(w), f64(b), method="reference", **kw)
        mag = convt.conv_transpose(f64(x, np.abs), f64(w, np.abs), f64(b, np.abs),
                                   method="reference", **kw)
        bound = _SLACK * _U32 * mag
        lo = (ref - bound).astype(np.float32).astype(y.dtype).astype(np.float64)
        hi = (ref + bound).astype(np.float32).astype(y.dtype).astype(np.float64)
        got = y.astype(np.float64)
        bad = ~((got >= lo) & (got <= hi))
    bad = np.where(np.isinf(ref), got != ref, bad)
    return np.where(np.isnan(ref), ~np.isnan(got), bad)


def sweep(names=tuple(LAYERS), dtypes=tuple(DTYPES), modes=tuple(MODES), bits=True):
    """Every violation of the oracle, and (``bits``) of bit-identity across thread counts
    1, 2, 3 and 7, one-shot against prepared, ``out=`` (at 0, 1 and 7 values into a buffer)
    and a Fortran-ordered or strided x, as strings; [] when every promise holds."""
    found = []
    for name in names:
        for dtname in dtypes:
            for mode in modes:
                x, w, b, kw = arrays(name, dtname, mode)
                op = convt.ConvTranspose(w, b, method="direct", workers=1, **kw)
                variant = op._plan.geometry(x.shape).variant
                tag = f"{name} {dtname} {mode} ({variant}, ISA {_cpu.ISA})"
                y = op(x)
                bad = oracle_violations(y, x, w, b, kw)
                if mode == "subnormal" and variant in ("micro_bf16", "micro_amx"):
                    bad[:] = False   # vdpbf16ps / tdpbf16ps flush denormals: documented
                if bad.any():
                    i = tuple(int(v) for v in np.argwhere(bad)[0])
                    found.append(f"{tag}: oracle refuses {int(bad.sum())} values, first {i}: "
                                 f"{float(y[i])!r}")
                if not bits or mode not in ("normal", "nan_x", "inf_w"):
                    continue
                for workers in (2, 3, 7):
                    if not same_bits(convt.ConvTranspose(w, b, method="direct",
                                                         workers=workers, **kw)(x), y):
                        found.append(f"{tag}: workers={workers} gives other bits")
                    if not same_bits(convt.conv_transpose(x, w, b, method="direct",
                                                          workers=workers, **kw), y):
                        found.append(f"{tag}: one-shot workers={workers} gives other bits")
                buf = np.empty(y.size + 8, y.dtype)
                for off in (0, 1, 7):
                    out = buf[off:off + y.size].reshape(y.shape)
                    if op(x, out=out) is not out or not same_bits(out, y):
                        found.append(f"{tag}: out= at offset {off} gives other bits")
                strided = np.repeat(x, 2, axis=-1)[..., ::2]
                for other, what in ((np.asfortranarray(x), "Fortran"), (strided, "strided")):
                    if not same_bits(op(other), y):
                        found.append(f"{tag}: a {what} x gives other bits")
    return found


@pytest.mark.parametrize("dtname", DTYPES)
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_16_bit_results_are_the_float32_sum_rounded_once(name, dtname):
    assert sweep([name], [dtname]) == []


# Exact sums: x and w small integers times 2^e, so every product and partial sum is exact in
# float32 whatever the order (and in the Winograd transforms), and the result must be the
# exact sum rounded once, bit for bit: ties (odd integers past 2048 in float16, past 256 in
# bfloat16), past 65504 (Inf), the float16 subnormals (e = -14: products of 2^-28). Zeros
# compare as values: the sign of an exact zero follows the summation order.
_EXACT_SCALES = {"float16": (0, -14, 4), "bfloat16": (0, -60, 50)}


def exact_violations(names=tuple(LAYERS), dtypes=tuple(DTYPES)):
    found = []
    for name in names:
        for dtname in dtypes:
            for e in _EXACT_SCALES[dtname]:
                x, w, b, kw = arrays(name, dtname)
                rng, dt = np.random.default_rng(7), _dt(dtname)
                x = (rng.integers(-8, 9, x.shape) * 2.0 ** e).astype(dt)
                w = (rng.integers(-8, 9, w.shape) * 2.0 ** e).astype(dt)
                b = ((rng.integers(-50, 51, b.shape) + 0.5) * 2.0 ** (2 * e)).astype(dt)
                exact = convt.conv_transpose(*(a.astype(np.float64) for a in (x, w, b)),
                                             method="reference", **kw)
                with np.errstate(over="ignore"):
                    want = exact.astype(np.float32).astype(dt)
                for workers in (1, 2):
                    op = convt.ConvTranspose(w, b, method="direct", workers=workers, **kw)
                    for y in (op(x), convt.conv_transpose(x, w, b, method="direct",
                                                          workers=workers, **kw)):
                        got = np.where(y == 0, 0, y).astype(dt)
                        if not same_bits(got, np.where(want == 0, 0, want).astype(dt)):
                            found.append(f"{name} {dtname} 2^{e} workers={workers} "
                                         f"({op._plan.geometry(x.shape).variant}, ISA "
                                         f"{_cpu.ISA}): not the exact sum rounded once")
    return found


@pytest.mark.parametrize("dtname", DTYPES)
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_exact_sums_are_rounded_to_nearest_even(name, dtname):
    assert exact_violations([name], [dtname]) == []


def test_the_layers_reach_every_variant():
    # the sweep is worth what it covers: at this process's level, every variant its layers
    # are named for (inf_w: the pixel kernel)
    seen = set()
    for name in LAYERS:
        for dtname in DTYPES:
            for mode in ("normal", "inf_w"):
                x, w, b, kw = arrays(name, dtname, mode)
                seen.add(convt.ConvTranspose(w, b, method="direct", **kw)._plan.geometry(
                    x.shape).variant)
    want = {"gemm", "depthwise", "pixel"}
    if _cpu.ISA >= 1:
        want |= {"micro", "winograd", "upsample"}
    if _cpu.bf16():
        want |= {"micro_bf16"}
    assert want <= seen, want - seen


_CHILD = """
import json
import test_adversarial16 as t
from convt._kernels import _cpu
print(json.dumps({"isa": _cpu.ISA, "bf16": _cpu.bf16(),
                  "found": t.sweep(bits=%r) + t.exact_violations()}))
"""


def _child(cap, code):
    env = dict(os.environ, CONVT_ISA=cap, PYTHONPATH=os.pathsep.join([str(TESTS)] + sys.path))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=str(TESTS))
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("cap", ["avx2", "generic"])
def test_the_promises_hold_under_an_isa_cap(cap):
    got = _child(cap, _CHILD % (cap == "avx2",))
    assert got["isa"] == {"avx2": min(1, _cpu.CPU_ISA), "generic": 0}[cap]
    assert not got["bf16"]
    assert got["found"] == []


@pytest.mark.parametrize("name", ["micro", "wino_f23_nxc", "wino_cf", "grouped_odd",
                                  "stride_past_k", "one_output", "neg_pads", "micro_1d_long"])
def test_emulated_amx_tiles_at_level_3(name, monkeypatch):
    # level 3 on this machine: the AMX tiles run by their C emulation (tests/test_amx.py's
    # level3); odd pair counts (K tails), 32-row blocks past short outputs, negative pads
    monkeypatch.setattr(_cpu, "ISA", 3)
    monkeypatch.setattr(micro_amx, "_EMULATE", True)
    for mode in ("normal", "nan_x", "range"):
        x, w, b, kw = arrays(name, "bfloat16", mode)
        op = convt.ConvTranspose(w, b, method="direct", workers=2, **kw)
        assert op._plan.geometry(x.shape).variant == "micro_amx"
        y = op(x)
        assert not oracle_violations(y, x, w, b, kw).any()
        assert same_bits(convt.conv_transpose(x, w, b, method="direct", workers=3, **kw), y)


@pytest.mark.parametrize("dtname", DTYPES)
@pytest.mark.parametrize("name", ["wino_f22", "wino_f23_nxc", "wino_3d"])
def test_late_sums_of_16_bit_weights(name, dtname, monkeypatch):
    # a one-shot Winograd call that packs its 16-bit taps as they are (pack_taps16) and sums
    # them in the kernel gives the prepared operator's bits, at the AVX2 level (bfloat16
    # runs the Winograd kernels there, not the pair tiles) and this process's
    if _cpu.ISA < 1:
        pytest.skip("the Winograd variant needs the AVX2 level")
    orig = _plan.direct_variant
    monkeypatch.setattr(_plan, "direct_variant",
                        lambda geom, pin=None: orig(geom, pin or ("winograd", False)))
    monkeypatch.setattr(winograd, "_LATE_SUM_BYTES", 0)
    for isa in sorted({1, _cpu.ISA}):
        monkeypatch.setattr(_cpu, "ISA", isa)
        x, w, b, kw = arrays(name, dtname)
        got = []
        for workers in (1, 2, 3):
            one = convt._api._OneShot(w, b, method="direct", workers=workers, **kw)
            planned = one._plan.geometry(x.shape)
            if planned.variant == "winograd":
                assert planned.state[3] is True   # late sums
            got.append(one(x))
            want = convt.ConvTranspose(w, b, method="direct", workers=workers, **kw)(x)
            assert same_bits(got[-1], want)
        assert same_bits(got[0], got[1]) and same_bits(got[0], got[2])
        assert not oracle_violations(got[0], x, w, b, kw).any()


@pytest.mark.parametrize("dtname", DTYPES)
def test_one_operator_from_many_python_threads(dtname):
    # 16-bit calls share the plan's staged float32 result and widened input buffers: four
    # threads calling one operator (and the one-shot function) on three shapes get the
    # serial bits
    x0, w, b, kw = arrays("micro", dtname)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(s).astype(_dt(dtname)) for s in
          [(1, 32, 7, 6), (2, 32, 9, 5), (3, 32, 4, 4)]]
    op = convt.ConvTranspose(w, b, workers=2, **kw)
    want = [op(x) for x in xs]
    errors = []

    def run(t):
        for rep in range(12):
            i = (t + rep) % len(xs)
            y = op(xs[i]) if rep % 2 else convt.conv_transpose(xs[i], w, b, workers=2, **kw)
            if not same_bits(y, want[i]):
                errors.append((t, rep, i))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_empty_batch_and_channels_in_16_bits():
    # batch 0, no output channels, no input channels (the bias everywhere), and out= for each
    for dtname in DTYPES:
        dt = _dt(dtname)
        for xs, ws, b_len in [((0, 32, 5, 5), (32, 48, 3, 3), 48), ((2, 32, 5, 5), (32, 0, 3, 3), 0),
                              ((2, 0, 5, 5), (0, 48, 3, 3), 48)]:
            x, w = np.ones(xs, dt), np.ones(ws, dt)
            b = np.arange(b_len).astype(dt)
            y = convt.conv_transpose(x, w, b, strides=(2, 2))
            assert y.dtype == dt and y.shape == (xs[0], b_len, 11, 11)
            if xs[1] == 0:
                assert same_bits(y, np.broadcast_to(b[:, None, None], y.shape).astype(dt))
            out = np.empty_like(y)
            assert convt.conv_transpose(x, w, b, strides=(2, 2), out=out) is out
            assert same_bits(out, y)
