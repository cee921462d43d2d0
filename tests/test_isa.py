"""The run-time ISA level (convt/_kernels/_cpu.pyx, _isa.h): one decision per process, capped
by CONVT_ISA, read by the variant rule and by every kernel call; each level the machine has
runs a representative set of layers in a process of its own, against the reference."""
import json
import os
import subprocess
import sys

import pytest

from convt._kernels import _cpu

from conftest import REPO_ROOT


@pytest.mark.parametrize("value, level", [
    ("generic", 0), ("avx2", 1), ("AVX512", 2), (" avx512_amx ", 3), ("", 3), (None, 3)])
def test_cap_from_env_names_the_levels(value, level):
    assert _cpu.cap_from_env(value) == level


@pytest.mark.parametrize("value", ["avx9", "sse4", "2", "avx-512"])
def test_a_bad_cap_names_the_variable_and_the_value(value):
    with pytest.raises(ValueError, match=rf"CONVT_ISA: must be one of generic, avx2, avx512, "
                                         rf"avx512_amx; got '{value}'"):
        _cpu.cap_from_env(value)
    with pytest.warns(RuntimeWarning, match=rf"CONVT_ISA.*got '{value}'; ignored"):
        assert _cpu.decide(value) == _cpu.decide(None)


def test_the_cap_never_raises_the_level():
    hw = _cpu.decide(None)
    for level, name in enumerate(_cpu.NAMES):
        assert _cpu.decide(name) == min(level, hw)
    assert _cpu.levels() == list(range(_cpu.ISA + 1))
    assert min(_cpu.CPU_ISA, 2) == min(hw, 2) and _cpu.CPU_ISA >= _cpu.ISA


def test_kernel_isas_follow_the_level():
    for level, name in enumerate(_cpu.NAMES):
        table = _cpu.kernel_isas(level)
        assert table["micro"] == table["winograd"] == _cpu.NAMES[min(level, 2)]
        assert table["layout"] == _cpu.NAMES[min(level, 1)]
        bf16 = table.pop("micro_bf16")
        assert set(table.values()) <= set(_cpu.NAMES[:level + 1])
        # AVX512-BF16 sits on top of level 2: off below it whatever the CPU has
        assert bf16 == ("avx512_bf16" if _cpu.bf16(level) else "off")
        assert _cpu.bf16(level) == (level >= 2 and _cpu.bf16(_cpu.CPU_ISA))


def test_kernel_level_caps_the_load_bound_kernels_on_half_width_zmm(monkeypatch):
    """On a CPU that runs zmm operations as two halves (Zen 4) the load-bound kernels keep
    their AVX2 bodies at level 2; elsewhere every kernel runs its highest body."""
    for halves in (False, True):
        monkeypatch.setattr(_cpu, "ZMM_HALVES", halves)
        for kernel, top in _cpu._KERNEL_MAX.items():
            for level in range(len(_cpu.NAMES)):
                want = min(level, top)
                if halves and want == 2 and kernel in _cpu._YMM_ON_HALVES:
                    want = 1
                assert _cpu.kernel_level(kernel, level) == want
                assert _cpu.kernel_isas(level)[kernel] == _cpu.NAMES[want]


@pytest.mark.skipif(_cpu.ISA < 1, reason="no FMA path on this machine")
def test_fma_peak_is_positive_and_cached():
    one = _cpu.fma_peak(1)
    assert one > 1.0 and _cpu.fma_peak(1) == one
    assert _cpu.fma_peak(1, level=0) is None


# A child process: the level CONVT_ISA gave, the variants chosen for a few layers (each a
# kind of kernel: Winograd products, micro tiles, depthwise, upsample, GEMM) and their normwise
# error against the float64 reference, in float32 and float64.
_CHILD = r"""
import hashlib, json
import numpy as np
import convt
from convt._kernels import _cpu
LAYERS = [
    ((2, 64, 6, 6), (64, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    ((1, 24, 7, 9), (24, 40, 3, 3), dict(pads=(1, 1, 1, 1), group=2)),
    ((1, 8, 9, 9), (8, 1, 3, 3), dict(strides=(2, 2), group=8)),
    ((1, 32, 8, 8), (32, 16, 2, 2), dict(strides=(2, 2))),
    ((3, 20, 11), (20, 33, 5), dict(strides=(3,), pads=(2, 1))),
]
rng = np.random.default_rng(0)
out = {"isa": _cpu.ISA, "layers": []}
for xs, ws, kw in LAYERS:
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    b = rng.standard_normal(ws[1] * kw.get("group", 1))
    ref = convt.conv_transpose(x, w, b, method="reference", **kw)
    row = {}
    for dt in ("float32", "float64"):
        op = convt.ConvTranspose(w.astype(dt), b.astype(dt), method="direct", **kw)
        y = op(x.astype(dt))
        row[dt] = float(np.abs(y - ref).max() / np.abs(ref).max())
        row["variant"] = op._plan.geometry(x.shape).variant
        if dt == "float32":
            row["bits"] = hashlib.sha1(y.tobytes()).hexdigest()
    out["layers"].append(row)
print(json.dumps(out))
"""


def _child(value):
    env = dict(os.environ, CONVT_ISA=value, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, check=True, cwd=str(REPO_ROOT))
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def children():
    return {name: _child(name) for name in _cpu.NAMES[:_cpu.ISA + 1]}


@pytest.mark.parametrize("level", range(len(_cpu.NAMES)))
def test_each_level_in_a_process_of_its_own(level, children):
    if level > _cpu.ISA:
        pytest.skip(f"this machine's level is {_cpu.name()}")
    got = children[_cpu.NAMES[level]]
    assert got["isa"] == level
    for row in got["layers"]:
        assert row["float32"] < 1e-5 and row["float64"] < 1e-12, row
    variants = {row["variant"] for row in got["layers"]}
    # the rule and the kernels read the one decision: no AVX2-only variant at level 0
    assert (level == 0) == variants.isdisjoint({"micro", "winograd", "upsample"}), variants


@pytest.mark.skipif(_cpu.ISA < 2, reason="no AVX-512 on this machine")
def test_avx512_tiles_give_the_avx2_bits(children):
    """The 12 x 16 zmm tiles sum each output's terms in the AVX2 6 x 16 tiles' order, one
    rounding per multiply-add: the same bits."""
    a, b = children["avx2"]["layers"], children["avx512"]["layers"]
    assert [r["variant"] for r in a] == [r["variant"] for r in b]
    assert [r["bits"] for r in a] == [r["bits"] for r in b]


def test_show_config_says_the_isa_of_each_kernel(monkeypatch):
    from convt._config import config_dict

    monkeypatch.setenv("CONVT_ISA", "avx2")   # reported as set; the level stays the process's
    cfg = config_dict()
    isa, threads = cfg["isa"], cfg["threading"]["max_threads"]
    assert isa["isa"] == _cpu.name() and isa["CONVT_ISA"] == "avx2"
    assert isa["kernels"] == [f"{k}={v}" for k, v in _cpu.kernel_isas().items()]
    kept = ", ".join(sorted(_cpu._YMM_ON_HALVES))
    assert isa["zmm_halves"] == (f"yes: {kept} kept at avx2" if _cpu.ZMM_HALVES else "no")
    want = [f"{t}t" for t in range(1, threads + 1)] if _cpu.ISA >= 1 else []
    assert [p.split("=")[0] for p in isa["fma_peak_gflops"]] == want
    assert all(p.split("=")[0].endswith("t") and float(p.split("=")[1]) > 0
               for p in isa["fma_peak_gflops"])
