"""In-process A/B of ISA levels: one prepared operator per workload, its calls alternating
``convt._kernels._cpu.ISA`` levels call by call.

    python docs/scripts/isa_ab.py --only depthwise_bilinear,unet_up2x2 [--levels 1,2]
        [--calls 15] [--dtype float32] [--workers 2] [--zmm-everywhere] [--kernel cfwino]

Every level runs the same plan (variant and packed weights: the plan is made once, at the
process's level, and only the kernels read the level at call time), so the ratio is the
kernels' bodies alone. Prints per workload the variant, the median time of ``--calls`` calls
at each level (ms) and each level's median over the first level's. docs/performance.md ("AVX-512
bodies of the memory-bound kernels") quotes runs of it, taken under the exclusive CPU lock.
``--zmm-everywhere`` runs the zmm bodies that a CPU with half-width zmm units (Zen 4) skips.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (puts this checkout's convt first)

import convt  # noqa: E402
from convt._kernels import _cpu  # noqa: E402


def _set_level(lv, kernel):
    # the process's level, or (kernel given) that kernel's highest body only
    if kernel is None:
        _cpu.ISA = lv
    else:
        _cpu._KERNEL_MAX[kernel] = lv


def ab(name, levels, calls, dtype, workers, kernel=None):
    """{level: median seconds} of ``name``'s prepared call, levels alternating call by call."""
    shapes = _common.WORKLOADS[name]
    x, w, b = _common.make_inputs(shapes)
    x, w, b = (a.astype(dtype) for a in (x, w, b))
    op = convt.ConvTranspose(w, b, **_common.attrs(shapes), workers=workers)
    times = {lv: [] for lv in levels}
    saved = _cpu.ISA, dict(_cpu._KERNEL_MAX)
    try:
        for lv in levels:       # warm every level's code and the workspace
            _set_level(lv, kernel)
            op(x)
        for _ in range(calls):
            for lv in levels:
                _set_level(lv, kernel)
                t = time.perf_counter()
                op(x)
                times[lv].append(time.perf_counter() - t)
    finally:
        _cpu.ISA = saved[0]
        _cpu._KERNEL_MAX.update(saved[1])
    return op._plan.geometry(x.shape).variant, {lv: float(np.median(v)) for lv, v in
                                                 times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", required=True, help="comma-separated workload names")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--zmm-everywhere", action="store_true",
                    help="run every kernel's zmm body at level 2, also the ones this CPU "
                         "caps at AVX2 (convt._kernels._cpu.ZMM_HALVES)")
    ap.add_argument("--kernel", choices=sorted(_cpu._KERNEL_MAX),
                    help="alternate this kernel's level only (its highest body), every other "
                         "kernel at the process's level")
    a = ap.parse_args()
    if a.zmm_everywhere:
        _cpu.ZMM_HALVES = False
    levels = [int(v) for v in a.levels.split(",")]
    if max(levels) > _cpu.ISA:
        ap.error(f"this process's level is {_cpu.name()} ({_cpu.ISA})")
    names = [_cpu.NAMES[lv] for lv in levels]
    print(f"convt {convt.__version__}, {a.dtype}, {a.workers} workers, median of {a.calls} "
          f"alternating calls; ms: {' / '.join(names)}; ratio to {names[0]}")
    for name in a.only.split(","):
        variant, med = ab(name, levels, a.calls, a.dtype, a.workers, a.kernel)
        ms = " / ".join(f"{med[lv] * 1e3:.3f}" for lv in levels)
        ratios = " ".join(f"{med[lv] / med[levels[0]]:.3f}" for lv in levels[1:])
        print(f"{name:20s} {variant:10s} {ms}  {ratios}")


if __name__ == "__main__":
    main()
