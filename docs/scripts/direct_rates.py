"""GFLOP/s of convt's prepared operator on the 12 direct-path bench workloads.

    python docs/scripts/direct_rates.py [--workers 2] [--dtype float32] [--reps 15]
    python docs/scripts/direct_rates.py --scaling [--reps 15] [--blocks 3]

Per workload (``../shared/bench/workloads.py``, FLOPs counted as there), the median of
``--reps`` calls of a planned and warmed-up ``convt.ConvTranspose``, in this process only (no
peers, so no other thread pool competes), with the variant the dispatcher runs. For the
issue-3 checks: float32 against numpy sgemm, float64 against dgemm, 1 against 2 threads.
``--scaling``: the dense layers only, a 1-worker and a ``--workers`` operator taking turns
call by call (so a slow spell of the machine falls on both), best and median of each; with
``--blocks R``, each operator in one-second blocks of calls of its own instead (as a program
using one of them runs: the taking-turns order holds both operators' packed weights, which
for dcgan_g1 no longer fit L3 together), R rounds taking turns block by block, best of all
calls and the per-round ratio of medians.
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
    best = min(_common.timed(lambda: a @ a) for _ in range(reps))
    return 2 * 2048 ** 3 / best / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--scaling", action="store_true",
                    help="time 1 against --workers workers on the dense layers")
    ap.add_argument("--blocks", type=int, default=0,
                    help="with --scaling: rounds of one-second blocks per operator")
    a = ap.parse_args()
    dtype = np.dtype(a.dtype)
    if a.scaling:
        return scaling(a.workers, dtype, a.reps, a.blocks)
    print(f"numpy {'s' if dtype == np.float32 else 'd'}gemm 2048^3: "
          f"{gemm_gflops(dtype):.1f} GFLOP/s (numpy's own BLAS threads)")
    for wl in W.WORKLOADS[:12]:
        x, w, b = W.make_inputs(wl, dtype=dtype)
        op = _operator(wl, w, b, a.workers)
        op(x)
        t = float(np.median([_common.timed(lambda: op(x)) for _ in range(a.reps)]))
        p = op._plan.geometry(x.shape)
        print(f"{wl['name']:20s} {t * 1e3:8.2f} ms {W.flops(wl) / t / 1e9:7.1f} GFLOP/s  "
              f"{p.method}/{p.variant}")


def _operator(wl, w, b, workers):
    full = W.full(wl)
    return convt.ConvTranspose(w, b, workers=workers, strides=full["strides"],
                               pads=full["pads"], dilations=full["dilations"],
                               group=full["group"], output_padding=full["output_padding"])


DENSE = ("dcgan_g1", "dcgan_g3", "unet_up2x2", "unet_up3x3_op", "hifigan_up1", "hifigan_up3",
         "dilated_s1")


def _dense_pairs(workers, dtype):
    """(workload, x, {1: operator, workers: operator}) for each dense layer."""
    for wl in W.WORKLOADS:
        if wl["name"] in DENSE:
            x, w, b = W.make_inputs(wl, dtype=dtype)
            yield wl, x, {n: _operator(wl, w, b, n) for n in (1, workers)}


def scaling(workers, dtype, reps, blocks=0):
    if blocks:
        return scaling_blocks(workers, dtype, blocks)
    print(f"1 against {workers} workers, {dtype}, calls taking turns, {reps} each")
    for wl, x, ops in _dense_pairs(workers, dtype):
        times = {n: [] for n in ops}
        for op in ops.values():
            op(x)
        for _ in range(reps):
            for n, op in ops.items():
                times[n].append(_common.timed(lambda: op(x)))
        one, many = (np.array(times[n]) for n in (1, workers))
        print(f"{wl['name']:20s} 1: {one.min() * 1e3:7.2f} ms  {workers}: "
              f"{many.min() * 1e3:7.2f} ms  best {one.min() / many.min():.2f}x  "
              f"median {np.median(one) / np.median(many):.2f}x")


def scaling_blocks(workers, dtype, rounds, seconds=1.0):
    print(f"1 against {workers} workers, {dtype}, {rounds} rounds of {seconds:g} s blocks")
    for wl, x, ops in _dense_pairs(workers, dtype):
        best = {n: np.inf for n in ops}
        medians = {n: [] for n in ops}
        for _ in range(rounds):
            for n, op in ops.items():
                op(x)
                times, start = [], time.perf_counter()
                while time.perf_counter() - start < seconds:
                    times.append(_common.timed(lambda: op(x)))
                best[n] = min(best[n], min(times))
                medians[n].append(float(np.median(times)))
        per_round = " ".join(f"{a / m:.2f}" for a, m in zip(medians[1], medians[workers]))
        print(f"{wl['name']:20s} 1: {best[1] * 1e3:7.2f} ms  {workers}: "
              f"{best[workers] * 1e3:7.2f} ms  best {best[1] / best[workers]:.2f}x  "
              f"medians per round {per_round}")


if __name__ == "__main__":
    main()
