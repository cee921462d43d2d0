"""``python -m convt info`` | ``python -m convt demo``."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _demo(args):
    import convt

    rng = np.random.default_rng(0)
    # A DCGAN generator layer (shared/bench/workloads.py "dcgan_g3"): 128 -> 64 channels,
    # 4x4 kernel, stride 2, pads 1: 16x16 -> 32x32, batch 16.
    x = rng.standard_normal((16, 128, 16, 16), dtype=np.float32)
    w = rng.standard_normal((128, 64, 4, 4), dtype=np.float32)
    b = rng.standard_normal(64, dtype=np.float32)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1), workers=args.workers)
    op = convt.ConvTranspose(w, b, **kw)
    y = op(x)
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        op(x)
        times.append(time.perf_counter() - t)
    best = min(times)
    macs = op.geometry(x.shape).macs
    ref = convt.conv_transpose(x[:1], w, b, method="reference", **kw)
    err = float(np.abs(y[:1] - ref).max() / np.abs(ref).max())
    print("convt demo: DCGAN generator layer, float32")
    print(f"  input {x.shape} -> output {y.shape}")
    print(f"  method: {op.method_for(x.shape)}, workers: {op.workers}")
    print(f"  time: {best * 1e3:.2f} ms (best of {args.repeat}), "
          f"{2 * macs / best / 1e9:.1f} GFLOP/s")
    print(f"  max relative difference vs the NumPy reference (first image): {err:.1e}")
    return 0 if err < 1e-4 else 1


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m convt", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="build and runtime configuration")
    d = sub.add_parser("demo", help="run a real layer, print the method, shape and time")
    d.add_argument("--workers", type=int, default=None)
    d.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    if args.cmd == "info":
        import convt

        convt.show_config()
        return 0
    return _demo(args)


if __name__ == "__main__":
    sys.exit(main())
