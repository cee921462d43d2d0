"""GFLOP/s of convt's prepared operator on the 12 direct-path bench workloads.

    python docs/scripts/direct_rates.py [--workers 2] [--dtype float32] [--reps 15]

Per workload (``../shared/bench/workloads.py``, FLOPs counted as there), the median of
``--reps`` calls of a planned and warmed-up ``convt.ConvTranspose``, in this process only (no
peers, so no other thread pool competes), with the variant the dispatcher runs. For the
issue-3 checks: float32 against numpy sgemm, float64 against dgemm, 1 against 2 threads.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

sys.path.insert(0, os.path.join(_common.ROOT, "..", "shared", "bench"))
import workloads as W  # noqa: E402

import convt  # noqa: E402


def gemm_gflops(dtype, reps=5):
    a = np.random.default_rng(0).standard_normal((2048, 2048)).astype(dtype)
    a @ a
    best = min(_timed(lambda: a @ a) for _ in range(reps))
    return 2 * 2048 ** 3 / best / 1e9


def _timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    dtype = np.dtype(a.dtype)
    print(f"numpy {'s' if dtype == np.float32 else 'd'}gemm 2048^3: "
          f"{gemm_gflops(dtype):.1f} GFLOP/s (numpy's own BLAS threads)")
    for wl in W.WORKLOADS[:12]:
        x, w, b = W.make_inputs(wl, dtype=dtype)
        full = W.full(wl)
        op = convt.ConvTranspose(w, b, workers=a.workers, strides=full["strides"],
                                 pads=full["pads"], dilations=full["dilations"],
                                 group=full["group"], output_padding=full["output_padding"])
        op(x)
        t = float(np.median([_timed(lambda: op(x)) for _ in range(a.reps)]))
        p = op._plan.geometry(x.shape)
        print(f"{wl['name']:20s} {t * 1e3:8.2f} ms {W.flops(wl) / t / 1e9:7.1f} GFLOP/s  "
              f"{p.method}/{p.variant}")


if __name__ == "__main__":
    main()
