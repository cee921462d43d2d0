"""The dispatcher's decisions over random geometries, one line each: diff two checkouts.

    python docs/scripts/decisions_dump.py [SEED] > before.txt     # one checkout
    CONVT_ROOT=/path/to/other python docs/scripts/decisions_dump.py [SEED] > after.txt

Each line holds every field ``convt.explain`` computes for one of 1500 random 1-3-D layers
(strides, dilations, pads, groups, depthwise, both layouts) in float32 and float64: the
choice, the direct variant and its mode and work, each backend's estimate (7 digits) and the
threads. A refactor of the dispatcher or the registries must leave it unchanged.
"""
import os
import sys

ROOT = os.environ.get("CONVT_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import convt  # noqa: E402

rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
for i in range(1500):
    nd = int(rng.integers(1, 4))
    g = int(rng.choice([1, 1, 1, 2, 4, 8]))
    depthwise = rng.random() < 0.15
    cg = 1 if depthwise else int(rng.choice([1, 2, 3, 4, 8, 16, 21, 32, 64, 128, 256]))
    mg = 1 if depthwise else int(rng.choice([1, 2, 3, 4, 8, 16, 21, 32, 64, 128]))
    if depthwise: g = int(rng.choice([8, 64, 256]))
    k = tuple(int(v) for v in rng.integers(1, 8 if nd < 3 else 4, nd))
    s = tuple(int(v) for v in rng.integers(1, 5, nd))
    d = tuple(int(v) for v in rng.choice([1, 1, 1, 2, 3], nd))
    size = tuple(int(v) for v in rng.integers(1, {1: 4000, 2: 80, 3: 20}[nd], nd))
    n = int(rng.choice([1, 1, 2, 16]))
    fmt = "NCX" if rng.random() < 0.7 else "NXC"
    pads = tuple(int(v) for v in rng.integers(0, 3, 2 * nd))
    pads = tuple(min(p, kk - 1) for p, kk in zip(pads, k + k))
    w = np.zeros((cg * g, mg, *k), np.float32)
    xs = (n, cg * g, *size) if fmt == "NCX" else (n, *size, cg * g)
    for dt in (np.float32, np.float64):
        try:
            e = convt.explain(xs, w.astype(dt), strides=s, dilations=d, pads=pads, group=g, data_format=fmt)
        except Exception as ex:
            print(i, "ERR", type(ex).__name__, str(ex)[:80]); continue
        print(i, np.dtype(dt).name, e.choice, e.direct, {k2: (None if v is None else f"{v:.6e}") for k2, v in e.estimates.items()}, e.threads)
