"""How convt and its neighbours slow each other down: a call timed right after another library's.

    python docs/scripts/neighbours.py [--pairs 60] [--pause 0.25] [--json FILE]

Two calls take turns on the same cores:

- ``sgemm``: NumPy's float32 matrix product, 768 x 768 (its BLAS runs its own threads);
- ``convt``: a prepared convt call on the peer harness's dcgan_g3 layer (16 x 128 x 16 x 16,
  4 x 4 kernel, stride 2, float32, every core).

A pair is "predecessor, then the timed call", started after ``--pause`` seconds of idle so that
nothing spins from the pair before (OpenBLAS's threads spin for up to ~2^28 cycles after a call,
libgomp's for its spin count). The four pairs (sgemm after sgemm, sgemm after convt, convt after
convt, convt after sgemm) run ``--pairs`` times each in a shuffled order. Prints the median
(and the 25th / 75th percentiles) of each timed call in ms and the ratio
``median after the other / median after itself`` per call: 1.00 means the neighbour leaves the
cores as it found them. docs/threads.md quotes runs.
"""
import argparse
import importlib.util
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (puts this checkout's convt first)

import convt  # noqa: E402

# The measurement is the asv benchmark's (asv_bench/benchmarks/bench_threads.py), with more pairs.
_spec = importlib.util.spec_from_file_location(
    "_bench_threads", os.path.join(_common.ROOT, "asv_bench", "benchmarks", "bench_threads.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def summarize(times):
    rows = {}
    for (pred, timed), ts in sorted(times.items()):
        q = np.percentile(np.array(ts) * 1e3, [25, 50, 75])
        rows[f"{timed} after {pred}"] = {"p25": q[0], "median": q[1], "p75": q[2]}
    return rows, bench.ratios(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=60)
    ap.add_argument("--pause", type=float, default=0.25)
    ap.add_argument("--json", help="also write the medians and ratios to this file")
    args = ap.parse_args(argv)
    rows, ratios = summarize(bench.measure(args.pairs, args.pause))
    cfg = convt._config.config_dict()
    print(f"# {cfg['machine']['cpu']}, {os.cpu_count()} cores; "
          f"libgomp wait policy: {cfg['threading'].get('wait_policy', 'libgomp default')}")
    print(f"{'timed call':<22} {'p25':>8} {'median':>8} {'p75':>8}   (ms)")
    for name, r in rows.items():
        print(f"{name:<22} {r['p25']:8.2f} {r['median']:8.2f} {r['p75']:8.2f}")
    for timed, ratio in ratios.items():
        print(f"{timed} after the other / after itself: {ratio:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "ratios": ratios, "machine": cfg["machine"]}, f, indent=1)


if __name__ == "__main__":
    main()
