"""``convt.calibrate()``: measure this machine and refit the cost model's constants."""
from __future__ import annotations

import math
import time

import numpy as np

from . import cost as _cost
from . import tune as _tune

__all__ = ["calibrate", "fit_constants"]

# Small layers, each exercising a few constants (a few ms per call on 2 cores): x shape,
# w shape, attributes, the methods timed. The fit sees them all at once.
_PROBES = (
    ((1, 64, 32, 32), (64, 64, 3, 3), {}, ("direct", "fft")),            # micro (or GEMM)
    ((1, 64, 32, 32), (64, 64, 2, 2), dict(strides=(2, 2)), ("direct",)),  # GEMM, thick
    ((1, 8, 64, 64), (8, 8, 3, 3), {}, ("direct",)),                     # GEMM, thin
    ((1, 64, 64, 64), (64, 1, 4, 4), dict(strides=(2, 2), pads=(1,) * 4, group=64),
     ("direct",)),                                                       # depthwise
    ((1, 16, 20), (16, 16, 5), dict(strides=(3,), output_shape=(900,)), ("direct",)),  # pixel
    ((1, 16, 256, 256), (16, 16, 1, 1), {}, ("direct",)),               # memory-bound
    ((1, 16, 64, 64), (16, 16, 15, 15), {}, ("direct", "fft")),          # FFT, 2-D
    ((4, 8, 8000), (8, 8, 63), {}, ("direct", "fft")),                   # FFT, 1-D
    ((1, 1, 64), (1, 1, 3), {}, ("direct", "fft")),                      # fixed costs
)
_F64_PROBES = (0, 6)       # also timed in float64
_FIXED = ("call_s", "gemm_stream_s", "gemm_depth_half")  # measured directly, not fitted
_PRIOR = 0.5          # pull towards the current constants (fit_constants)
# Physical limits of the dimensionless constants (a loaded machine can push a fit past them:
# a second thread never slows a kernel down in the model, float64 is never faster).
_BOUNDS = {"thread_efficiency": (0.3, 1.0), "direct_f64": (1.0, 3.0), "fft_f64": (1.0, 3.0),
           "gemm_channel_half": (0.5, 64.0), "gemm_rows_half": (1.0, 512.0), "micro_channel_half": (0.5, 64.0),
           "depthwise_border": (1.0, 30.0)}


def _samples(make_op, workers, dtype, probes, timer):
    rng = np.random.default_rng(0)
    out = []
    for xs, ws, kw, methods in probes:
        x = rng.standard_normal(xs).astype(dtype)
        w = rng.standard_normal(ws).astype(dtype)
        ops = {m: make_op(w, method=m, workers=workers, **kw) for m in methods}
        runs = {m: (lambda op=op: op(x)) for m, op in ops.items()}
        best = timer(runs)
        geom = next(iter(ops.values())).geometry(x.shape)
        out += [(geom, np.dtype(dtype), workers, m, t) for m, t in best.items()]
    return out


def fit_constants(samples, start=None, prior=0.0, names=None):
    """Constants (dict) fitted to ``samples`` [(geom, compute dtype, workers, method,
    seconds)]: least squares on log(estimate / measured), robust (soft L1) loss. ``prior``
    > 0 adds prior x log(constant / start) per constant, so that constants the samples do
    not determine stay near ``start`` (calibrate's few probes cannot pin all of them).
    ``names``: the constants to fit (default all but the fixed ones); the rest keep their
    ``start`` values."""
    from scipy.optimize import least_squares

    start = dict(_cost.DEFAULTS if start is None else start)
    if names is None:
        names = [k for k in start if k not in _FIXED]

    log0 = np.log([start[k] for k in names])

    def resid(logv):
        c = dict(start, **dict(zip(names, np.exp(logv))))
        res = list(prior * (logv - log0)) if prior else []
        for geom, ct, workers, m, t in samples:
            res.append(math.log(_cost.seconds(geom, ct, workers, m, c) / t))
        return res

    lo = [_BOUNDS.get(k, (start[k] / 30, 0))[0] for k in names]
    hi = [_BOUNDS.get(k, (0, start[k] * 30))[1] for k in names]
    x0 = np.clip(log0, np.log(lo) + 1e-9, np.log(hi) - 1e-9)
    # x_scale="jac": the constants' logs move the residuals by 1e-4 to 1e-2 each; unscaled,
    # the trust region crawled (tests/test_dispatch.py's recovery fit: 75,600 residual
    # evaluations, 280 s, against 183 and 6 s scaled, the same constants recovered)
    fit = least_squares(resid, x0, loss="soft_l1", bounds=(np.log(lo), np.log(hi)),
                        x_scale="jac")
    return dict(start, **{k: float(v) for k, v in zip(names, np.exp(fit.x))})


def calibrate(make_op, workers=None, save=False, path=None):
    """``convt.calibrate``'s work (see it): ``make_op(w, method=, workers=, **attributes)``
    builds the operators it times (the front end's ``ConvTranspose``)."""
    from .plan import resolve_workers

    n = resolve_workers("calibrate", workers)
    timer = _tune.time_candidates
    samples = _samples(make_op, n, np.float32, _PROBES, timer)
    samples += _samples(make_op, n, np.float64, [_PROBES[i] for i in _F64_PROBES], timer)
    if n > 1:
        samples += _samples(make_op, 1, np.float32, _PROBES[:1], timer)
    tiny = [s for s in samples if s[0].macs < 1000]
    fixed = {"call_s": min(t for g, ct, w, m, t in tiny if m == "direct")}
    consts = fit_constants(samples, dict(_cost.CONSTANTS, **fixed), prior=_PRIOR)
    _cost.set_constants(consts)
    if save:
        stamp = dict(_tune.stamp(), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        _cost.save_calibration(consts, stamp, path)
    return consts
