"""Random geometries for the dispatcher's sweeps (issue 38's space), drawn from a seed.

Ranks 1-3, kernels 1-511 (long ones in 1-D only: 63 per axis in 2-D, 15 in 3-D), strides 1-4,
dilations 1-3, channels 1-256, dense, grouped and depthwise, batch 1-4, float32 and float64,
the input shrunk until one call of either backend is affordable (well under a second on 2
cores). Each case is dict(x=NCX shape, w=IOX shape, attrs=ONNX-11 keywords, dtype=, kind=).
Used by ``docs/scripts/dispatch_random.py`` (the full sweep) and ``bench_dispatch.py``
(``RandomRegret``). No convt import: the same seed draws the same cases for every version.
"""
import math

import numpy as np

__all__ = ["cases", "draw_case"]

MAX_KERNEL = {1: 511, 2: 63, 3: 15}        # per axis; prod(K) stays affordable
MAX_INPUT = {1: 16384, 2: 160, 3: 40}      # per axis
MAX_MACS = 1e8                              # useful multiply-adds of one call
MAX_OUTPUT = 3e6                            # output values x channels, for the FFT's arrays
MAX_CONTRACT = 2e8                          # batch x channel pairs x output values (FFT)


def _log_int(rng, lo, hi):
    """An integer log-uniform in [lo, hi]."""
    return int(min(hi, max(lo, round(math.exp(rng.uniform(math.log(lo), math.log(hi + 0.5)))))))


def _per_axis(rng, d, draw):
    """One value for every axis (mostly), or one per axis."""
    if rng.random() < 0.7:
        return (draw(),) * d
    return tuple(draw() for _ in range(d))


def draw_case(rng):
    """One random geometry: dict(x=, w=, attrs=, dtype=), not yet checked for cost."""
    d = int(rng.choice([1, 2, 3], p=[0.4, 0.4, 0.2]))
    kind = rng.choice(["dense", "grouped", "depthwise"], p=[0.6, 0.2, 0.2])
    if kind == "depthwise":
        g = c_in = _log_int(rng, 1, 256)
        c_out = g * int(rng.choice([1, 1, 1, 2]))
    else:
        g = 1 if kind == "dense" else int(rng.choice([2, 4, 8, 16]))
        c_in = g * max(1, _log_int(rng, 1, 256) // g)
        c_out = g * max(1, _log_int(rng, 1, 256) // g)
    kernel = _per_axis(rng, d, lambda: _log_int(rng, 1, MAX_KERNEL[d]))
    strides = _per_axis(rng, d, lambda: int(rng.choice([1, 1, 2, 2, 3, 4])))
    dil = _per_axis(rng, d, lambda: int(rng.choice([1, 1, 1, 2, 3])))
    size = _per_axis(rng, d, lambda: _log_int(rng, 1, MAX_INPUT[d]))
    pads = tuple(int(rng.integers(0, (k - 1) * dl // 2 + 1)) for k, dl in zip(kernel, dil)) * 2
    return dict(x=[int(rng.integers(1, 5)), c_in, *size], w=[c_in, c_out // g, *kernel],
                attrs=dict(strides=strides, dilations=dil, pads=pads, group=g),
                dtype=str(rng.choice(["float32", "float64"], p=[0.65, 0.35])), kind=str(kind))


def _fit_size(case):
    """Shrink the input (largest axis first) until one call is affordable; None if even a
    one-sample input is not."""
    x, w, a = case["x"], case["w"], case["attrs"]
    while True:
        out = [(i - 1) * s + (k - 1) * dl + 1 for i, s, k, dl
               in zip(x[2:], a["strides"], w[2:], a["dilations"])]
        macs = x[0] * w[0] * w[1] * math.prod(x[2:]) * math.prod(w[2:])
        values = x[0] * (w[0] + w[1] * a["group"]) * math.prod(out)
        pairs = x[0] * w[0] * w[1] * math.prod(out)
        if macs <= MAX_MACS and values <= MAX_OUTPUT and pairs <= MAX_CONTRACT:
            return case
        if max(x[2:]) == 1:
            return None
        j = 2 + int(np.argmax(x[2:]))
        x[j] = max(1, x[j] * 2 // 3)


def cases(seed, n):
    """``n`` affordable geometries drawn from ``seed`` (numpy's default_rng: the same list
    for the same seed on every machine and convt version)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        case = _fit_size(draw_case(rng))
        if case is not None:
            out.append(case)
    return out
