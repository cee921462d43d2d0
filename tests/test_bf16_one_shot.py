"""bfloat16 one-shot calls (``convt.conv_transpose``) against prepared operators: the same bits.

A one-shot call packs its weights into the calling thread's one-shot workspace with the pair
pack's tasks (``_pack.pack_pairs``: a panel of a group for a run of pairs) and the layout's
tables (``micro_bf16.PairLayout``); a prepared operator packs once into its own array.
Both run the same tiles, so every result must have the same bits, over ranks 1-3, groups,
strides, dilations, odd channel counts on both sides, kernels shorter and longer than the
pack's 8-tap blocks, non-finite weights (the pixel kernel for both), any thread count and
every ISA level (CONVT_ISA caps it, in a child process). Values are also held to the float64
reference.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import convt
from convt._backends.direct import micro_bf16
from convt._kernels import _cpu

from _helpers import same_bits
from conftest import assert_close

ml_dtypes = pytest.importorskip("ml_dtypes")
BF = ml_dtypes.bfloat16
TESTS = Path(__file__).resolve().parent

# name: (x shape, w shape (IOX), attributes)
CASES = {
    "1d_k16_s8": ((1, 34, 20), (34, 48, 16), dict(strides=(8,), pads=(4, 4))),
    "1d_k4_odd": ((2, 7, 33), (7, 9, 4), dict(strides=(2,), pads=(1, 1))),
    "1d_k1": ((1, 70, 9), (70, 40, 1), {}),
    "1d_g3_d2": ((2, 21, 17), (21, 11, 3), dict(dilations=(2,), pads=(2, 2), group=3)),
    "2d_k2_s2": ((1, 16, 8, 8), (16, 8, 2, 2), dict(strides=(2, 2))),
    "2d_k3_op": ((1, 13, 9, 7), (13, 17, 3, 3),
                 dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1))),
    "2d_k4_s2": ((2, 130, 4, 4), (130, 33, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "2d_g8": ((2, 48, 6, 6), (48, 8, 3, 3),
              dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1), group=8)),
    "2d_g2_odd": ((1, 10, 5, 6), (10, 21, 5, 3), dict(strides=(3, 1), pads=(2, 1, 0, 1),
                                                      group=2)),
    "2d_d2": ((1, 12, 10, 10), (12, 12, 3, 3), dict(dilations=(2, 2), pads=(2, 2, 2, 2))),
    "3d_k3": ((1, 6, 4, 5, 3), (6, 9, 3, 3, 3), dict(strides=(2, 1, 2), pads=(1,) * 6)),
    "3d_g2_k2": ((2, 8, 3, 3, 3), (8, 16, 2, 2, 2), dict(strides=(2, 2, 2), group=2)),
}


def _arrays(name, seed=0, bad=None):
    xs, ws, kw = CASES[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(BF)
    w = rng.standard_normal(ws).astype(BF)
    b = rng.standard_normal(ws[1] * kw.get("group", 1)).astype(BF)
    if bad is not None:   # one non-finite weight, somewhere inside the filter
        w.reshape(-1)[w.size // 3] = bad
    return x, w, b, kw


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_one_shot_gives_the_prepared_bits(name, workers):
    x, w, b, kw = _arrays(name)
    op = convt.ConvTranspose(w, b, workers=workers, **kw)
    want = op(x)
    got = convt.conv_transpose(x, w, b, workers=workers, **kw)
    assert got.dtype == BF and got.shape == want.shape
    assert same_bits(got, want)
    again = convt.conv_transpose(x, w, b, workers=workers, **kw)   # the kept workspace
    assert same_bits(again, want)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               b.astype(np.float64), method="reference", **kw)
    assert_close(got, ref, "direct", BF)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cases_run_the_pair_tiles_where_the_cpu_has_them(name):
    # the parity above covers the pair pack only while the cases run micro_bf16
    x, w, b, kw = _arrays(name)
    variant = convt.ConvTranspose(w, b, **kw)._plan.geometry(x.shape).variant
    if not _cpu.bf16():
        pytest.skip("no AVX512-BF16 here: the float32 tiles run")
    assert variant == micro_bf16.VARIANT.name


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("name", ["1d_k16_s8", "2d_k3_op", "2d_g8", "3d_k3"])
def test_a_non_finite_weight_gives_the_prepared_bits(name, bad):
    # the pack reports it, and both calls run the pixel kernel, which propagates it to the
    # outputs its tap touches only
    x, w, b, kw = _arrays(name, bad=bad)
    op = convt.ConvTranspose(w, b, workers=2, **kw)
    want = op(x)
    got = convt.conv_transpose(x, w, b, workers=2, **kw)
    assert same_bits(got, want)
    assert not np.isfinite(got.astype(np.float32)).all()
    assert np.isfinite(got.astype(np.float32)).any()
    if _cpu.bf16():
        assert op._plan.geometry(x.shape).variant == "pixel"


_CHILD = """
import json
import numpy as np
import test_bf16_one_shot as t
import convt
from convt._kernels import _cpu
out = {"isa": _cpu.ISA, "bf16": _cpu.BF16, "differ": [], "variants": {}}
for name in sorted(t.CASES):
    x, w, b, kw = t._arrays(name, seed=1)
    for workers in (1, 2):
        op = convt.ConvTranspose(w, b, workers=workers, **kw)
        want = op(x)
        got = convt.conv_transpose(x, w, b, workers=workers, **kw)
        if not t.same_bits(got, want):
            out["differ"].append([name, workers])
    out["variants"][name] = op._plan.geometry(x.shape).variant
print(json.dumps(out))
"""


@pytest.mark.parametrize("cap", ["avx512", "avx2", "generic"])
def test_one_shot_gives_the_prepared_bits_at_every_isa_level(cap):
    # the child imports the convt this process runs (sys.path) and this test module
    env = dict(os.environ, CONVT_ISA=cap, PYTHONPATH=os.pathsep.join([str(TESTS)] + sys.path))
    run = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, check=True, cwd=str(TESTS))
    got = json.loads(run.stdout)
    assert got["differ"] == []
    if cap != "avx512":
        assert not got["bf16"]
        assert "micro_bf16" not in got["variants"].values()
