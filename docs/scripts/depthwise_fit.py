"""Refit the depthwise variant's cost-model constants on depthwise layers.

    python docs/scripts/depthwise_fit.py

Times 22 depthwise layers (1-D to 3-D, strides 1-4, kernels 3-255, channel multipliers 1-3,
both layouts) and 12 layers with few channels on one side only (1-3 in or out, up to 128 on
the other) on the depthwise kernel (pinned) on 1 and 2 workers, float32, then fits the four
``depthwise_*`` constants (the others held at their current values) with
``convt._dispatch.calibrate.fit_constants`` (least squares on log(estimate / measured)).
Prints the constants and each layer's estimate / measured before and after. The values in
``convt._dispatch.cost.DEFAULTS`` come from the random sweep's seed 12 since 2026-11-26
(``dispatch_random.py --fit``, docs/dispatch.md); this script checks them on hand-picked
layers.
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401  (puts this checkout's convt first)

import convt  # noqa: E402
from convt._dispatch import cost as _cost
from convt._dispatch import tune as _tune
from convt._dispatch.calibrate import fit_constants  # noqa: E402

P1, P2 = (1, 1, 1, 1), (1,) * 6
LAYERS = [  # (x shape, w shape, keywords)
    ((1, 256, 64, 64), (256, 1, 4, 4), dict(strides=(2, 2), pads=P1)),
    ((1, 64, 112, 112), (64, 1, 3, 3), dict(pads=P1)),
    ((1, 128, 56, 56), (128, 1, 3, 3), dict(strides=(2, 2), pads=P1, output_padding=(1, 1))),
    ((2, 64, 32, 32), (64, 2, 4, 4), dict(strides=(2, 2), pads=P1)),
    ((4, 16, 20000), (16, 1, 8), dict(strides=(4,), pads=(2, 2))),
    ((1, 32, 16, 16, 16), (32, 1, 4, 4, 4), dict(strides=(2, 2, 2), pads=P2)),
    ((1, 32, 24, 24, 24), (32, 1, 3, 3, 3), dict(pads=P2)),
    ((1, 32, 64, 64), (32, 1, 7, 7), dict(pads=(3, 3, 3, 3))),
    ((8, 32, 16, 16), (32, 1, 3, 3), dict(strides=(3, 3))),
    ((1, 3, 128, 128), (3, 1, 5, 5), dict(strides=(2, 2), pads=(2, 2, 2, 2))),
    ((1, 96, 20, 20), (96, 3, 3, 3), dict(group=32)),
    ((2, 8, 3000), (8, 1, 3), {}),
    ((1, 64, 8, 8), (64, 1, 4, 4), dict(strides=(4, 4))),
    ((1, 16, 32, 32), (16, 1, 4, 4), dict(strides=(2, 2), pads=P1, data_format="NXC")),
    ((1, 256, 32, 32), (256, 1, 4, 4), dict(strides=(2, 2), pads=P1, data_format="NXC")),
    ((1, 64, 40, 40), (64, 1, 3, 3), dict(pads=P1, data_format="NXC")),
    ((4, 8, 16000), (8, 1, 255), {}),
    ((4, 8, 16000), (8, 1, 63), {}),
    ((1, 16, 128, 128), (16, 1, 15, 15), {}),
    ((1, 16, 128, 128), (16, 1, 31, 31), {}),
    ((1, 16, 128, 128), (16, 1, 9, 9), {}),
    ((1, 16, 32, 32, 32), (16, 1, 7, 7, 7), {}),
    # few channels per group on one side only (group 1): rows summed over C_in
    ((16, 64, 32, 32), (64, 3, 4, 4), dict(group=1, strides=(2, 2), pads=P1)),
    ((16, 64, 32, 32), (64, 3, 4, 4), dict(group=1, strides=(2, 2), pads=P1,
                                           data_format="NXC")),
    ((4, 128, 16, 16), (128, 3, 4, 4), dict(group=1, strides=(2, 2), pads=P1)),
    ((1, 64, 128, 128), (64, 1, 2, 2), dict(group=1, strides=(2, 2))),
    ((4, 3, 64, 64), (3, 16, 9, 9), dict(group=1)),
    ((4, 3, 64, 64), (3, 64, 4, 4), dict(group=1, strides=(2, 2), pads=P1)),
    ((1, 1, 128, 128), (1, 64, 3, 3), dict(group=1, pads=P1)),
    ((2, 2, 64, 64), (2, 32, 5, 5), dict(group=1, pads=(2, 2, 2, 2))),
    ((1, 32, 8192), (32, 1, 16), dict(group=1, strides=(8,), pads=(4, 4))),
    ((1, 16, 32, 32, 32), (16, 1, 2, 2, 2), dict(group=1, strides=(2, 2, 2))),
    ((1, 3, 24, 24, 24), (3, 16, 3, 3, 3), dict(group=1, pads=P2)),
    ((4, 4, 128, 128), (4, 2, 3, 3), dict(group=1, pads=P1)),
]
NAMES = ["depthwise_macs_per_s", "depthwise_row_s", "depthwise_border", "depthwise_call_s"]


def samples():
    rng = np.random.default_rng(0)
    out = []
    for xs, ws, kw in LAYERS:
        kw = dict(dict(group=xs[1]), **kw)
        x = rng.standard_normal(xs).astype(np.float32)
        if kw.get("data_format") == "NXC":
            x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
        w = rng.standard_normal(ws).astype(np.float32)
        for workers in (1, 2):
            op = convt.ConvTranspose(w, method="direct", workers=workers, **kw)
            op._plan.pin = ("depthwise", False)    # where the rule picks a dense variant too
            t = _tune.time_candidates({"direct": lambda: op(x)})["direct"]
            out.append((op.geometry(x.shape), np.dtype(np.float32), workers, "depthwise", t))
    return out


def log_errors(data, consts):
    return np.array([math.log(_cost.seconds(g, ct, wk, m, consts) / t)
                     for g, ct, wk, m, t in data])


def main():
    data = samples()
    start = dict(_cost.CONSTANTS)
    fitted = fit_constants(data, start, names=NAMES)
    r0, r1 = log_errors(data, start), log_errors(data, fitted)
    for label, consts, r in (("current", start, r0), ("fitted", fitted, r1)):
        values = ", ".join(f"{n} {consts[n]:.3g}" for n in NAMES)
        print(f"{label}: {values}; rms log(estimate / measured) {np.sqrt(np.mean(r ** 2)):.2f}")
    for (g, _, wk, _, t), a, b in zip(data, r0, r1):
        print(f"{str(g.in_shape):16s} k{str(g.kernel):12s} s{str(g.strides):10s} "
              f"{g.data_format} w{wk} {t * 1e3:8.3f} ms  estimate / measured "
              f"{math.exp(a):5.2f} -> {math.exp(b):5.2f}")


if __name__ == "__main__":
    main()
