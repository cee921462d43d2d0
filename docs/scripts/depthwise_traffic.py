"""depthwise_bilinear's prepared call against the time to move its data once.

    python docs/scripts/depthwise_traffic.py [--rounds 5] [--calls 40]

The issue-3 target: the depthwise layer within 2x of its memory-traffic time, reading x and
w once and writing y once at the machine's copy bandwidth. The copy bandwidth is a numpy copy
of 16 MiB into another 16 MiB (``np.copyto``, one thread, bytes read plus bytes written over
its time); the floor is (x + w + y bytes) at that rate. Each round alternates ``--calls``
copies and prepared calls (2 threads, float32), so every call starts with x and y out of
cache, as the copy evicts them, and a slow spell of the machine falls on both. Prints per
round the copy rate, the floor, the call's best and median and the ratios best / floor (best
copy) and median / floor (median copy). README ("Performance") and docs/performance.md quote
a run.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (puts this checkout's convt first)

import convt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=40)
    a = ap.parse_args()
    shapes = _common.WORKLOADS["depthwise_bilinear"]
    x, w, b = _common.make_inputs(shapes)
    op = convt.ConvTranspose(w, b, **_common.attrs(shapes), workers=2)
    y = op(x)
    moved = x.nbytes + w.nbytes + y.nbytes
    src = np.ones(16 << 20, np.uint8)
    dst = np.empty_like(src)
    print(f"convt {convt.__version__}; x {x.nbytes / 1e6:.1f} MB + w + y {y.nbytes / 1e6:.1f} MB "
          f"= {moved / 1e6:.1f} MB; {a.rounds} rounds of {a.calls} copies and calls")
    for r in range(a.rounds):
        copies, calls = [], []
        for _ in range(a.calls):
            t = time.perf_counter()
            np.copyto(dst, src)
            copies.append(time.perf_counter() - t)
            t = time.perf_counter()
            op(x)
            calls.append(time.perf_counter() - t)
        best_rate = 2 * src.nbytes / min(copies)
        median_rate = 2 * src.nbytes / float(np.median(copies))
        floor = moved / best_rate
        print(f"round {r}: copy {median_rate / 1e9:.1f} (median) / {best_rate / 1e9:.1f} (best) "
              f"GB/s, floor {floor * 1e3:.3f} ms; call best {min(calls) * 1e3:.3f}, median "
              f"{np.median(calls) * 1e3:.3f} ms; best / floor {min(calls) / floor:.2f}, "
              f"median / floor {np.median(calls) / (moved / median_rate):.2f}")


if __name__ == "__main__":
    main()
