"""The cost model's constants: the defaults, the running values and the calibration file.

``convt.calibrate()`` refits them on the running machine and can save them to
``calibration_path()``, which ``import convt`` loads when present; ``set_constants`` replaces
them and tells every cache of decisions made with the old ones (``on_change``).
"""
from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
from .threads import renew_after_fork

__all__ = ["CONSTANTS", "DEFAULTS", "set_constants", "on_change", "calibration_path",
           "load_calibration", "save_calibration"]

# Rates are per thread, float32; ``*_f64`` are float64's slowdowns. Fitted by
# convt._dispatch.calibrate.fit_constants to the dispatch sweep (`python
# docs/scripts/dispatch_sweep.py --runs 2 --rounds 25 --budget 3 --json sweep.json`, then
# `--fit sweep.json`) on the 2-core AMD EPYC, 2026-11-21, 2 workers, numpy 2.4.6, scipy
# 1.17.1, rms log(estimate / measured) 0.40, except where a line says otherwise
# (docs/dispatch.md, "The constants"). The pixel rate, depthwise_lane_s and four fft_* rates
# were refitted on 2026-11-26 (same machine) to issue 38's random sweep, seed 1 (`python
# docs/scripts/dispatch_random.py --seed 1 --json s1.json`, then `--fit s1.json --names ...`;
# fft_transform_s and fft_axis_call_s held), checked on seed 2 (docs/dispatch.md, "The
# random sweep (issue 38)").
DEFAULTS = {
    "call_s": 15e-6,               # fixed cost of one call: set by hand from the smallest calls
    "gemm_macs_per_s": 23.8e9,     # GEMM variant, thick channels
    "gemm_channel_half": 0.776,    # GEMM efficiency c / (c + half) per channel dimension
    # register tiles, set by hand (2026-11-21, AVX2 + FMA): 64-512-channel 3x3 / 4x4 layers
    # at 188-208 GFLOP/s on 2 workers; the half rate from 16-channel layers on one thread
    "micro_macs_per_s": 57e9,
    "micro_channel_half": 7.0,
    "pixel_macs_per_s": 2.78e9,    # gather kernel
    # depthwise kernel: taps in the data, per row term set-up, and per row term and output
    # of its phase block (first fitted by docs/scripts/depthwise_fit.py, 2026-11-21; refitted
    # with the block term on the random sweep, above)
    "depthwise_macs_per_s": 25.1e9,
    "depthwise_row_s": 3.52e-9,
    "depthwise_lane_s": 5.86e-10,
    "bytes_per_s": 16.0e9,         # copies and writes of x and y
    "thread_efficiency": 0.759,    # second and later threads
    "direct_f64": 1.79,
    # FFT backend at 2 workers, per unit of each convt._backends.fft._features entry:
    # transform samples x log2(length), per-bin complex multiply-adds, values copied,
    # 1-D transforms started
    "fft_sample_log_s": 2.25e-10,
    "fft_cmac_s": 2.40e-10,
    "fft_copy_s": 2.15e-9,
    "fft_transform_s": 5.67e-12,
    "fft_f64": 1.65,
    "fft_axis_call_s": 72e-6,       # FFT backend's fixed cost per call and spatial axis
}
CONSTANTS = dict(DEFAULTS)
_CACHE_LOCK = renew_after_fork(sys.modules[__name__], "_CACHE_LOCK")
_LISTENERS = []

_FORMAT = 1


def calibration_path():
    """Where ``calibrate(save=True)`` writes the fitted constants: ``$CONVT_CALIBRATION``
    if set, else ``cost_model.json`` in convt's cache directory (``convt._dispatch.tune.cache_dir``)."""
    env = os.environ.get("CONVT_CALIBRATION")
    if env:
        return env
    from .tune import cache_dir

    return os.path.join(cache_dir(), "cost_model.json")


def save_calibration(constants, stamp, path=None):
    """Write ``constants`` (with ``stamp``: CPU, version, date) atomically to ``path``."""
    from .tune import atomic_write_json

    path = path or calibration_path()
    atomic_write_json(path, {"format": _FORMAT, **stamp, "constants": constants})
    return path


def load_calibration(path=None, stamp=None):
    """Replace ``CONSTANTS`` by the file's (when present and valid): True if loaded.

    A missing file is silent; an unreadable, malformed or foreign (other CPU) file warns
    and leaves the defaults in place: a stale calibration must never break ``import convt``.
    """
    path = path or calibration_path()
    if not os.path.exists(path):
        return False
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        consts = data["constants"]
        if data.get("format") != _FORMAT or set(consts) != set(DEFAULTS):
            raise ValueError("unknown format or constants")
        consts = {k: float(v) for k, v in consts.items()}
        if not all(np.isfinite(v) and v > 0 for v in consts.values()):
            raise ValueError("constants must be positive and finite")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        warnings.warn(f"convt: ignoring the cost-model calibration {path!r}: {e}",
                      RuntimeWarning, stacklevel=2)
        return False
    if stamp is not None and data.get("cpu") != stamp["cpu"]:
        warnings.warn(f"convt: ignoring the cost-model calibration {path!r}: measured on "
                      f"{data.get('cpu')!r}, this is {stamp['cpu']!r}", RuntimeWarning,
                      stacklevel=2)
        return False
    set_constants(consts)
    return True


def set_constants(consts):
    """Replace ``CONSTANTS`` and forget every decision made with the old ones (the caches
    that registered with ``on_change``)."""
    # In place and key by key, never cleared: a thread estimating meanwhile sees old or new
    # values, never a missing one (callers pass the full key set, load_calibration checks it).
    CONSTANTS.update(consts)
    with _CACHE_LOCK:
        for forget in _LISTENERS:
            forget()


def on_change(forget):
    """Call ``forget()`` whenever ``set_constants`` replaces the constants."""
    _LISTENERS.append(forget)
    return forget
