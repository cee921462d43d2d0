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
from .._kernels import _cpu

__all__ = ["CONSTANTS", "DEFAULTS", "PEAK_TIED", "REF_PEAK", "set_constants", "on_change",
           "calibration_path", "load_calibration", "save_calibration", "current",
           "peak_scales", "rate_sources"]

# Rates are per thread, float32; ``*_f64`` are float64's slowdowns. Fitted by
# convt._dispatch.calibrate.fit_constants to the dispatch sweep (`python
# docs/scripts/dispatch_sweep.py --runs 2 --rounds 25 --budget 3 --json sweep.json`, then
# `--fit sweep.json`) on the 2-core AMD EPYC, 2026-11-21, 2 workers, numpy 2.4.6, scipy
# 1.17.1, rms log(estimate / measured) 0.40, except where a line says otherwise
# (docs/dispatch.md, "The constants"). The pixel rate and four fft_* rates were refitted on
# 2026-11-26 (same machine) to issue 38's random sweep, seed 1 (`python
# docs/scripts/dispatch_random.py --seed 1 --json s1.json`, then `--fit s1.json --names ...`;
# fft_transform_s and fft_axis_call_s held), checked on seed 2; the four depthwise_* ones,
# five fft_* ones (fft_axis_call_s held) and the two pixel_* ones the same day on seed 12,
# checked on seeds 11 and 13-18, the five gemm_* ones on seed 21, and on seeds 51-53 the
# five gemm_* ones again and the three one-shot terms (docs/dispatch.md, "The
# random sweep (issue 38)"). The MAC rates are this machine's; PEAK_TIED rescales them
# elsewhere.
DEFAULTS = {
    "call_s": 15e-6,               # fixed cost of one call: set by hand from the smallest calls
    # GEMM variant, per BLAS call as the kernel issues it (convt._backends.direct.gemm.
    # gemm_calls): the rate of a large GEMM, its efficiency m / (m + rows_half) x n / (n +
    # channel_half) (m rows, n columns: merged taps x channels), per grid-mode call, per
    # output value written out; fitted on the random sweep's seed 21 (each call timed after
    # a run of itself), checked on seeds 22-24; refitted on seeds 51-53 with the one-shot
    # terms below (docs/dispatch.md, "One-shot set-up and the GEMM's per-call cost (seeds
    # 51-53)"), checked on seeds 31-32 and 61-62
    # gemm_call_s, gemm_write_s and gemm_line_s, per segment the write-out starts
    # (gemm.write_segments), refitted 2026-11-27 on seeds 71-76 with A's size taken against
    # the whole L2 (docs/dispatch.md, "The direct backend's estimates (seeds 71-76, 93-95)"):
    # the write-out's cost per value was mostly a cost per segment; the rate and the halves
    # held (refitted too, they moved pixel and depthwise layers to slower GEMMs)
    "gemm_macs_per_s": 42.8e9,
    "gemm_channel_half": 0.607,
    "gemm_rows_half": 8.67,
    "gemm_call_s": 1.77e-7,
    "gemm_write_s": 1.30e-10,
    "gemm_line_s": 4.28e-9,
    # per value of A a BLAS call packs (M N K above OpenBLAS's small-matrix bound), and the
    # depth (input channels) at which a GEMM runs at half the rate (convt._backends.direct.
    # gemm.Gemm.extra_seconds; docs/dispatch.md, "The GEMM variant's BLAS paths")
    "gemm_stream_s": 0.34e-9,
    "gemm_depth_half": 1.5,
    # register tiles, set by hand (2026-11-21, AVX2 + FMA) from 64-512-channel 3x3 / 4x4
    # layers on 2 workers; the half rate from 16-channel layers on one thread
    # (docs/performance.md, "Figures moved out of code comments (2026-11-28, session 10)")
    "micro_macs_per_s": 57e9,
    "micro_channel_half": 7.0,     # the Winograd and upsample variants' tiles
    # the micro variant's: half the rate at micro_depth_half products summed per tile visit
    # (input channels x taps, convt._backends.direct.micro.tile_depth), and its call's
    # set-up; fitted 2026-11-27 on the random sweep's seeds 71-76 (micro_macs_per_s held;
    # docs/dispatch.md, "The direct backend's estimates")
    "micro_depth_half": 40.5,
    "micro_call_s": 12.9e-6,
    # per entry of the micro variant's pointer tables (an output position of a phase x a
    # tap: convt._backends.direct.micro.table_entries); fitted 2026-11-27 (one thread, 1-D
    # layers of 1-32 input channels, 3-300 taps; docs/dispatch.md, "The micro variant's
    # pointer tables")
    "micro_tap_s": 2.2e-9,
    # gather kernel: its inner loop runs along a group's output channels, c_out / (c_out +
    # half) of its rate per group (refitted on the random sweep's seed 12, below)
    "pixel_macs_per_s": 6.6e9,
    "pixel_channel_half": 16.6,
    # depthwise kernel (convt._backends.direct.depthwise): multiply-adds in vector blocks,
    # per row term set-up, the cost of a multiply-add taken one vector at a time (a chain of
    # dependent masked FMAs over every tap of the phase) relative to a blocked one, and per
    # call of the row kernel (refitted on the random sweep's seed 12, above; again
    # 2026-11-27 on seeds 101-104's depthwise calls, priced 1.12x high: `--names
    # depthwise_macs_per_s depthwise_row_s depthwise_border depthwise_call_s`, docs/dispatch.md
    # "FFT and depthwise estimates"). Since session 6 the multiply-adds are the lanes x taps
    # the row kernel computes (whole vectors; a row of 9 outputs is 2 vectors of 8), the
    # border ones its masked vectors: the rate set to 23 G/s (4 chains of fused multiply-adds,
    # latency-bound: 26 G/s on one thread for long 1-D kernels in cache), the other three
    # refitted on seeds 101-115's depthwise calls (docs/dispatch.md, "Depthwise: lanes")
    "depthwise_macs_per_s": 23.0e9,
    "depthwise_row_s": 1.035e-9,
    "depthwise_border": 4.85,
    "depthwise_call_s": 19.2e-9,
    "bytes_per_s": 16.0e9,         # copies and writes of x and y
    "thread_efficiency": 0.759,    # second and later threads
    "direct_f64": 1.79,
    # FFT backend at 2 workers, per unit of each convt._backends.fft._features entry:
    # transform samples x log2(length), per-bin complex multiply-adds, values copied,
    # 1-D transforms started; refitted 2026-11-27 after the overlap-save / thread-rule merge
    # (which left the FFT priced high; docs/dispatch.md, "After the FFT's overlap-save and
    # thread rule: FFT rates refitted (seeds 71-76)") on the random sweep's seeds 71-72
    # (`--fit s71.json s72.json --names fft_sample_log_s
    # fft_cmac_s fft_copy_s fft_transform_s fft_f64`), checked on seeds 73-74
    "fft_sample_log_s": 2.17e-10,
    "fft_cmac_s": 1.62e-10,        # refitted 2026-11-27 with the contraction's terms, below
    "fft_copy_s": 0.372e-9,       # spectra values only since 2026-11-27: fft_place_s, below
    "fft_transform_s": 1.16e-8,
    "fft_f64": 1.50,
    # FFT backend's fixed cost: per call, per call and spatial axis, and a one-shot call's
    # own per spatial axis (its spectra's set-up, the range check's max |w|). Set
    # 2026-11-27 (same machine, scipy.fft on one thread below
    # convt._backends.fft_spectra._MIN_THREADED_FFT) by hand from 15 small calls of
    # ranks 1-3 (groups 1, 3, 4; best of 60; docs/scripts/fft_fixed.py, docs/fft.md "Fixed
    # cost (2026-11-27)", which has the excess over the priced work by rank): one-shot calls'
    # excess less the direct backend's own one-shot overhead (the plan, common to both)
    "fft_call_s": 46.5e-6,         # refitted 2026-11-27 on the random sweep, below
    "fft_axis_call_s": 5e-6,
    "fft_one_shot_axis_s": 32e-6,
    # per block group of a 1-D overlap-save call (convt._backends.fft_blocks.run_save): set by
    # hand (a group's five Python-level steps), checked by the overlap-save sweep of
    # docs/fft.md (the model's picks there are the faster tiling or within 10% of it, but one)
    "fft_group_s": 30e-6,
    # The per-bin contraction (convt._backends.fft_cost._contraction): per item visit of a
    # group's bin row, per one-at-a-time column step (C_out/G mod the vector lanes, C_in/G
    # steps each); and per byte of kernel spectra streamed from memory (past half of L3: once per batch
    # chunk; the one-shot fused DFT's packed kernel once per pair of rows). Issue 38's FFT
    # misses past 1.5x on seeds 75-76 were calls these terms describe (1 x 1 depthwise
    # products, 2 output channels a group, 100+ MB of spectra for one batch element).
    # Fitted 2026-11-27 with fft_cmac_s and fft_call_s (refitted: the sweep's small
    # prepared FFT calls ran over their price) on the random sweep's
    # seeds 81-83 and the FFT probes 1-2 (`python docs/scripts/dispatch_random.py --fit
    # r81.json r82.json s83.json p1.json p2.json --names fft_cmac_s fft_row_s fft_lane_s
    # fft_read_s fft_call_s`; docs/dispatch.md), checked on seed 84, then 91-92
    "fft_row_s": 1.98e-9,         # refitted with fft_copy_s and fft_place_s, below
    "fft_lane_s": 0.667e-9,
    "fft_read_s": 0.0381e-9,
    # a one-shot call's kernel spectra, per DFT multiply-add as spectrum_features counts
    # them: fft_cmac_s's value before the refit above (the contraction's own terms split out
    # of it lowered fft_cmac_s; the spectra's price stays the one seeds 71-72 fitted)
    "fft_dft_cmac_s": 2.16e-10,
    # per output value placed from the frames (the output window, batch x C_out x outputs;
    # fft_copy_s counted every frame value at the spectra's rate before, and priced calls
    # of few input and many output channels 1.35x high), fitted 2026-11-27 with fft_copy_s
    # and fft_row_s on seeds 101-104 (docs/dispatch.md, "FFT and depthwise estimates")
    "fft_place_s": 0.244e-9,
    # per value moved by the FFT's NumPy-level copies: an overlap-add tiling's frame values
    # per pass over them (convt._backends.fft_cost._tile_frames) and a one-shot call's
    # kernel-spectra copies (polyphase kernel, split layout); fft_copy_s's value before the
    # split above, held (those passes run several times slower a value than the compiled
    # ones; the tiling choices of docs/fft.md were made at this price)
    "fft_move_s": 1.11e-9,
    # per run of fft_place2 (an output pixel's C_out/G values in blocks of 16; 1-4 channels a
    # group place a value several times slower than 16), set 2026-11-27 by hand at 2
    # workers' rate from synthetic frames, 2-core AMD EPYC (Zen 4); docs/dispatch.md, "Few
    # channels a group in the FFT's placement; tune against the sweep"
    "fft_place_run_s": 1.65e-9,
    # One-shot calls beyond a prepared call of the same backend (seeds 51-53, "one-shot minus
    # prepared" of the forced timings): the call's set-up (not priced before; priced for the
    # FFT's one-shot calls too, beside fft_one_shot_axis_s) and the direct weight packing's
    # rate, slower than bytes_per_s (docs/dispatch.md, "One-shot set-up and the GEMM's
    # per-call cost (seeds 51-53)")
    "oneshot_call_s": 48e-6,
    "pack_bytes_per_s": 9.9e9,
    # A one-shot Winograd call with late sums (convt._backends.direct.winograd.pack_seconds):
    # its kernel taps' pack per byte read and written, one thread's rate, and per product
    # value a task sums from them (the rest of one-shot minus prepared); set 2026-11-27
    # (session 6) by hand from dcgan_g1's and hifigan_up1's one-shot calls
    # (docs/performance.md, "One-shot Winograd: the taps one line apart; the IOX weights
    # read directly, measured and not built")
    "wino_taps_bytes_per_s": 21.7e9,
    "wino_late_sum_s": 0.18e-9,
    # The bfloat16 pair pack of a one-shot call (convt._backends.direct.micro_bf16
    # .pack_seconds), per byte of 16-bit weights read and written, one thread's rate; set
    # 2026-11-27 (session 7) by hand from dcgan_g1's and hifigan_up1's packs inside the
    # call, AMD EPYC Zen 4 (docs/performance.md, "bfloat16 one-shot calls: the pair pack")
    "pairs_bytes_per_s": 15.0e9,
}
CONSTANTS = dict(DEFAULTS)
_CACHE_LOCK = renew_after_fork(sys.modules[__name__], "_CACHE_LOCK")
_PROBE_LOCK = renew_after_fork(sys.modules[__name__], "_PROBE_LOCK")
_LISTENERS = []

# Compute-bound rates follow the machine: at first use of the cost model each is rescaled by
# this CPU's one-thread FMA peak (convt._kernels._cpu.fma_peak) over the peak of the machine
# DEFAULTS were fitted on (REF_PEAK), at the ISA level the code behind the rate runs at:
# "kernel" the kernel's own level (ISA capped by CONVT_ISA and by the kernel's widest body,
# _cpu.kernel_isas), "blas" the CPU's own level (BLAS picks its kernels itself, CONVT_ISA
# does not cap it), "clock" the AVX2 level (portable C: scalar and SSE2 code, whose speed
# follows the clock, which the AVX2 peak of 2 FMA pipes x 8 lanes measures on every AVX2
# CPU since Haswell and Zen 2). Memory-bound and library rates stay absolute: bytes_per_s
# follows the memory system, not the FMA units; scipy.fft's pocketfft is compiled for the
# baseline ISA and dominated by cache traffic at the sizes the FFT backend wins; the
# per-row and per-call seconds are branchy set-up code.
PEAK_TIED = {
    "micro_macs_per_s": ("kernel", "micro"),
    "gemm_macs_per_s": ("blas", None),
    "pixel_macs_per_s": ("clock", None),
    "depthwise_macs_per_s": ("kernel", "depthwise"),
}
# One-thread float32 FMA peaks (GFLOP/s) of the machine DEFAULTS were fitted on, per level
# (fma_peak(1, level), best of REF_PEAK_RUNS runs of the probe, 2-core AMD EPYC Zen 4,
# 2026-11-26, under the exclusive lock: docs/dispatch.md, "Rates relative to the machine").
REF_PEAK = {1: 117.4, 2: 117.9}
# A probed peak within this factor of the reference keeps the shipped rate: the probe's own
# spread on the reference machine under load, so decisions here do not move with it.
PEAK_DEAD_BAND = 1.25
# What the peak-tied rates are: "defaults" (shipped, not yet probed), "probe" (rescaled by
# the probe), "set" (set_constants: a calibration file or the caller), per ISA level probed.
_RATES = {"source": "defaults", "isa": None, "scales": {}}

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
    set_constants(consts, _source="set")
    return True


def set_constants(consts, _source="set"):
    """Replace ``CONSTANTS`` and forget every decision made with the old ones (the caches
    that registered with ``on_change``). Constants set so (a calibration, or the caller's)
    are used as they are: the machine probe no longer rescales them."""
    # In place and key by key, never cleared: a thread estimating meanwhile sees old or new
    # values, never a missing one (callers pass the full key set, load_calibration checks it).
    CONSTANTS.update(consts)
    _RATES["source"] = _source
    with _CACHE_LOCK:
        for forget in _LISTENERS:
            forget()


def _probe_level(kind, kernel, cpu):
    """The ISA level whose FMA peak a rate of ``kind`` follows (see PEAK_TIED), or 0."""
    if kind == "blas":
        return min(cpu.CPU_ISA, 2)
    if kind == "clock":
        return 1 if cpu.ISA >= 1 else 0
    return cpu.NAMES.index(cpu.kernel_isas()[kernel])


def peak_scales(cpu=None):
    """{rate name: (scale, level, probed GFLOP/s)} of the peak-tied rates on this machine:
    the probed one-thread peak over REF_PEAK at that level, 1.0 within PEAK_DEAD_BAND, at
    level 0 (no FMA path: no probe) or when the probe fails."""
    cpu = _cpu if cpu is None else cpu
    out = {}
    for name, (kind, kernel) in PEAK_TIED.items():
        level = min(_probe_level(kind, kernel, cpu), 2)
        peak = cpu.fma_peak(1, level) if level >= 1 else None
        scale = 1.0
        if peak and REF_PEAK.get(level):
            ratio = peak / REF_PEAK[level]
            if not 1 / PEAK_DEAD_BAND <= ratio <= PEAK_DEAD_BAND:
                scale = ratio
        out[name] = (scale, level, peak)
    return out


def current():
    """``CONSTANTS``, its peak-tied rates first rescaled to this machine (``peak_scales``)
    when they are still the shipped ones: once per process and ISA level (a test may lower
    ``convt._kernels._cpu.ISA``), never at import. A forked child inherits the result."""
    if _RATES["source"] in ("defaults", "probe") and _RATES["isa"] != _cpu.ISA:
        with _PROBE_LOCK:
            if _RATES["source"] in ("defaults", "probe") and _RATES["isa"] != _cpu.ISA:
                scales = peak_scales(_cpu)
                rates = {k: DEFAULTS[k] * s for k, (s, _, _) in scales.items()}
                changed = any(CONSTANTS[k] != v for k, v in rates.items())
                _RATES.update(isa=_cpu.ISA, scales=scales)
                if changed:
                    set_constants(rates, _source="probe")
                else:
                    _RATES["source"] = "probe"
    return CONSTANTS


def rate_sources():
    """{peak-tied rate: where its value comes from}, for ``explain`` and ``show_config``:
    "probe x<scale> (<level> peak <p>, fitted at <ref> GFLOP/s)" (x1.00: within the dead
    band), "shipped (not probed yet)", or "set (calibration or set_constants)"."""
    out = {}
    for name in PEAK_TIED:
        if _RATES["source"] == "set":
            out[name] = "set (calibration or set_constants)"
        elif _RATES["source"] == "defaults" or name not in _RATES["scales"]:
            out[name] = "shipped (not probed yet)"
        else:
            scale, level, peak = _RATES["scales"][name]
            out[name] = (f"probe x{scale:.2f} ({_cpu.NAMES[level]} peak {peak:.0f}, fitted at "
                         f"{REF_PEAK[level]:.0f} GFLOP/s)" if peak else
                         "shipped (no FMA probe at this ISA level)")
    return out


def on_change(forget):
    """Call ``forget()`` whenever ``set_constants`` replaces the constants."""
    _LISTENERS.append(forget)
    return forget
