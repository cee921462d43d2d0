"""Layers with few channels on one side: each direct variant forced, against the one "auto" runs.

    python docs/scripts/thin_variants.py [--reps 9] [--workers 2]

Per layer (fewer than 4 channels per group in or out; float32), prepared operators pinned to
the depthwise kernel, the GEMM variant (grid mode) and the micro variant are timed in
interleaved rounds (best of ``--reps``), next to each one's cost-model estimate; the last
columns name the variant ``convt._dispatch.cost.direct_kind`` picks and its regret (its time over
the fastest variant's). docs/dispatch.md ("Few channels on one side") quotes a run.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401  (puts this checkout's convt first)

import convt  # noqa: E402
from convt._backends.direct import registry as _direct  # noqa: E402
from convt._dispatch import cost as _cost  # noqa: E402

P1 = (1, 1, 1, 1)
LAYERS = {  # name: (x shape NCX, w shape IOX, keywords)
    "64->3 k4 s2 (DCGAN out)": ((16, 64, 32, 32), (64, 3, 4, 4), dict(strides=(2, 2), pads=P1)),
    "64->3 k4 s2 NXC": ((16, 64, 32, 32), (64, 3, 4, 4),
                        dict(strides=(2, 2), pads=P1, data_format="NXC")),
    "128->3 k4 s2": ((16, 128, 32, 32), (128, 3, 4, 4), dict(strides=(2, 2), pads=P1)),
    "64->1 k2 s2": ((1, 64, 128, 128), (64, 1, 2, 2), dict(strides=(2, 2))),
    "3->16 k9": ((4, 3, 64, 64), (3, 16, 9, 9), {}),
    "3->64 k4 s2": ((4, 3, 64, 64), (3, 64, 4, 4), dict(strides=(2, 2), pads=P1)),
    "1->64 k3": ((1, 1, 128, 128), (1, 64, 3, 3), dict(pads=P1)),
    "2->32 k5": ((2, 2, 64, 64), (2, 32, 5, 5), dict(pads=(2, 2, 2, 2))),
    "1-D 32->1 k16 s8": ((1, 32, 8192), (32, 1, 16), dict(strides=(8,), pads=(4, 4))),
    "1-D 1->32 k7": ((4, 1, 8000), (1, 32, 7), {}),
    "3-D 16->1 k2 s2": ((1, 16, 32, 32, 32), (16, 1, 2, 2, 2), dict(strides=(2, 2, 2))),
    "3-D 3->16 k3": ((1, 3, 24, 24, 24), (3, 16, 3, 3, 3), dict(pads=(1,) * 6)),
    "3->3 k4 s2": ((8, 3, 64, 64), (3, 3, 4, 4), dict(strides=(2, 2), pads=P1)),
    "4->2 k3": ((4, 4, 128, 128), (4, 2, 3, 3), dict(pads=P1)),
}
VARIANTS = ("depthwise", "gemm", "micro")


def _kinds(geom):
    axes = _direct.axes(geom)
    gemm, exact = _direct.gemm_counts(geom, axes)
    return {"depthwise": _direct.depthwise.depthwise_kind(geom, axes, exact),
            "gemm": _direct.DirectKind("gemm", "grid", gemm, exact),
            "micro": _direct.DirectKind("micro", "", _direct.micro.micro_macs(geom, per_axis=axes),
                                        exact)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'layer':24s} " + " ".join(f"{v:>17s}" for v in VARIANTS)
          + "   (ms measured / estimated)  auto       regret")
    for name, (xs, ws, kw) in LAYERS.items():
        x = rng.standard_normal(xs).astype(np.float32)
        if kw.get("data_format") == "NXC":
            x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
        w = rng.standard_normal(ws).astype(np.float32)
        ops = {}
        for v in VARIANTS:
            ops[v] = convt.ConvTranspose(w, method="direct", workers=args.workers, **kw)
            ops[v]._plan.pin = (v, False)
            ops[v](x)
        geom = ops["gemm"].geometry(x.shape)
        threads = _cost.direct_threads(geom, args.workers)
        est = {v: _direct.seconds(geom, k, False, threads, _cost.CONSTANTS)
               for v, k in _kinds(geom).items()}
        best = {v: np.inf for v in VARIANTS}
        for _ in range(args.reps):
            for v, op in ops.items():
                t = time.perf_counter()
                op(x)
                best[v] = min(best[v], time.perf_counter() - t)
        auto = _cost.direct_kind(geom).variant
        regret = best[auto] / min(best.values()) if auto in best else float("nan")
        cells = " ".join(f"{1e3 * best[v]:7.2f} / {1e3 * est[v]:7.2f}" for v in VARIANTS)
        print(f"{name:24s} {cells}   {auto:10s} {regret:5.2f}", flush=True)


if __name__ == "__main__":
    main()
