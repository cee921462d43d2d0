"""depthwise_bilinear's prepared call against the time to move its data once.

    python docs/scripts/depthwise_traffic.py [--rounds 5] [--calls 40] [--no-stream]

The issue-37 target: the depthwise layer within 1.5x of its memory-traffic time, reading x
and w once and writing y once. Two floors, both timed on this machine in this process:

- **probe** (the target's floor): ``convt._kernels._depthwise.traffic_probe``, the kernel's
  traffic with no arithmetic: x read once and y's bytes written once on the call's 2 threads,
  each thread a contiguous part (as the kernel's static schedule), y's lines streamed past
  the caches (a store that misses otherwise reads the line first: 16.8 MB more).
- **copy** (the floor this script used before 2026-11-27, kept for comparison): (x + w + y)
  bytes at the rate of a 16 MiB ``np.copyto`` on one thread, bytes read plus written over its
  time. It is lenient: one thread moves less than two, and glibc copies that large with
  streamed stores too.

Each round alternates ``--calls`` times: evict the caches (a read of 64 MiB, twice the L3, so
that no dirty line is left to write back inside a timing), time the probe, evict, time the
prepared call (2 threads, float32), time the copy. So the probe and the call both start with
x and y out of cache, and a slow spell of the machine falls on all three. Prints per round the
medians and bests, and call / probe and call / copy floor (best over best, median over
median). ``--no-stream``: the call with ordinary stores (the kernel before streamed stores,
for an A/B in one process). README ("Performance") and docs/performance.md quote a run.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (puts this checkout's convt first)

import convt  # noqa: E402
from convt._backends.direct import depthwise as _dw  # noqa: E402
from convt._kernels._depthwise import traffic_probe  # noqa: E402


def aligned(n):
    """n float32 values, the first 64-byte aligned (the call's y is: the streamed stores)."""
    raw = np.empty(n + 16, np.float32)
    at = (-raw.ctypes.data % 64) // 4
    return raw[at:at + n]


def ratio(a, b):
    return f"{a / b:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--no-stream", action="store_true",
                    help="the call with ordinary stores (as before streamed stores)")
    a = ap.parse_args()
    if a.no_stream:
        _dw._STREAM_BYTES = 1 << 62
    shapes = _common.WORKLOADS["depthwise_bilinear"]
    x, w, b = _common.make_inputs(shapes)
    op = convt.ConvTranspose(w, b, **_common.attrs(shapes), workers=2)
    y = op(x)
    moved = x.nbytes + w.nbytes + y.nbytes
    xs = np.ascontiguousarray(x).reshape(-1)
    dst = aligned(y.size)
    big = np.ones(64 << 20, np.uint8)
    src = np.ones(16 << 20, np.uint8)
    cdst = np.empty_like(src)
    print(f"convt {convt.__version__}; x {x.nbytes / 1e6:.1f} MB + w + y {y.nbytes / 1e6:.1f} MB "
          f"= {moved / 1e6:.1f} MB; {a.rounds} rounds of {a.calls} probes, calls and copies"
          f"{'; ordinary stores' if a.no_stream else ''}")

    def call():
        op(x)   # (the result dropped at once, as a benchmark loop does)

    for r in range(a.rounds):
        probes, calls, copies = [], [], []
        for _ in range(a.calls):
            big.max()
            probes.append(_common.timed(lambda: traffic_probe(xs, dst, 2)))
            big.max()
            calls.append(_common.timed(call))
            copies.append(_common.timed(lambda: np.copyto(cdst, src)))
        pb, pm = min(probes), float(np.median(probes))
        cb, cm = min(calls), float(np.median(calls))
        rate_b, rate_m = 2 * src.nbytes / min(copies), 2 * src.nbytes / float(np.median(copies))
        fb, fm = moved / rate_b, moved / rate_m
        print(f"round {r}: probe {pm * 1e3:.3f} / {pb * 1e3:.3f} ms ({moved / pb / 1e9:.1f} GB/s "
              f"best); call {cm * 1e3:.3f} / {cb * 1e3:.3f} ms (median / best); call / probe "
              f"{ratio(cm, pm)} (median) {ratio(cb, pb)} (best); copy {rate_m / 1e9:.1f} / "
              f"{rate_b / 1e9:.1f} GB/s, floor {fb * 1e3:.3f} ms, call / copy floor "
              f"{ratio(cm, fm)} (median) {ratio(cb, fb)} (best)")


if __name__ == "__main__":
    main()
