"""The cost model behind ``method="auto"``: estimated seconds of each backend on a geometry.

A pure function of (canonical geometry, compute dtype, threads); the layout is part of the
geometry. It needs no layouts or spectra: the direct backend's multiply-adds (with the GEMM
variant's halo rows) are counted per axis in O(sum of strides x kernel) time, and the FFT
estimate is ``convt._backends.fft.fft_cost`` (its own fitted model of transforms and per-bin GEMMs)
times a machine factor. ``direct_kind`` is also the direct backend's variant rule
(``convt._dispatch.plan.direct_variant`` builds the layout of the kind it names), so the estimate
prices the code that will run; the one exception is an operator whose weights hold NaN or Inf,
which runs the pixel kernel instead of GEMMs (docs/reliability.md).

The constants are in ``CONSTANTS``; ``convt.calibrate()`` refits them on the running machine
and can save them to ``calibration_path()``, which is loaded (if present) on import.
"""
from __future__ import annotations

import functools
import json
import os
import threading
import warnings
from math import prod
from typing import NamedTuple

import numpy as np

from .._backends.direct.micro import ISA as MICRO_ISA
from .._kernels._micro import NR_F32 as MICRO_NR_F32
from .._backends.direct.upsample import up_eligible, up_macs
from .._backends.direct.gemm import _MAX_SET, _MIN_TILE_ROWS, _TILE_VALUES, _axis_phases, grid_shape
from .._backends.direct.cfwino import cf_layout
from .._backends.direct.winograd import wino_layout

__all__ = ["CONSTANTS", "DEFAULTS", "Estimate", "DirectKind", "direct_kind", "direct_threads",
           "estimate", "seconds", "set_constants", "calibration_path", "load_calibration", "save_calibration"]

# Fitted by convt._dispatch.calibrate.fit_constants (least squares on log time, soft L1) to the
# dispatch sweep's forced-backend timings (83 geometries x 2 backends, two runs) on a quiet
# machine: `python docs/scripts/dispatch_sweep.py --runs 2 --rounds 25 --budget 3 --json
# sweep.json`, then `python docs/scripts/dispatch_sweep.py --fit sweep.json`; 2-core AMD EPYC
# development machine, 2026-11-21 15:45 UTC (load average 0.1), 2 workers, numpy 2.4.6,
# scipy 1.17.1. log(estimate / measured): rms 0.40. Two are not from that fit: call_s is set
# by hand from the smallest calls measured, and pixel_macs_per_s keeps the value of an earlier
# fit (a loaded machine, load average 6-11), because the sweep has too few pixel-kernel
# layers to pin it (the quiet fit put it 30x lower). Rates are per thread, float32;
# ``*_f64`` are float64's slowdowns. `convt.calibrate()` refits them on the running machine.
DEFAULTS = {
    "call_s": 15e-6,               # fixed cost of one call (Python, output allocation)
    "gemm_macs_per_s": 23.8e9,     # GEMM variant, thick channels
    "gemm_channel_half": 0.776,     # GEMM efficiency c / (c + half) per channel dimension
    # micro variant, set by hand (2026-11-21, float32, AVX2+FMA): 57e9 = channels-last calls
    # of 64-512-channel 3x3 / 4x4 layers at 188-208 GFLOP/s on 2 workers; the half-rate
    # input-channel count from 16-channel stride-1 layers on one thread (33-43e9, 2-D K = 9
    # and 1-D K = 63 of docs/scripts/crossover.py): efficiency c_in / (c_in + 7) per group
    "micro_macs_per_s": 57e9,
    "micro_channel_half": 7.0,
    "pixel_macs_per_s": 0.68e9,    # generic gather kernel
    # depthwise variant: taps in the data, and per row term (depthwise_kind: output row x
    # input channel of the group x tap row in the data x innermost taps) loop set-up.
    # Refitted when the row terms started counting input channels (2026-11-21) by
    # docs/scripts/depthwise_fit.py on 22 depthwise layers and 12 with few channels on one
    # side, x 1 and 2 workers: rms log(estimate / measured) 0.58 with the earlier 26.2e9 /
    # 2.11e-9, 0.53 with these (0.61 for the earlier values on the 22 alone, before)
    "depthwise_macs_per_s": 25.1e9,
    "depthwise_row_s": 3.52e-9,
    "bytes_per_s": 16.0e9,          # copies and writes of x and y
    "thread_efficiency": 0.759,      # second and later threads
    "direct_f64": 1.79,
    # FFT backend at 2 workers, per unit of each convt._backends.fft._features entry of the tiling
    # fft_layout picks: transform samples x log2(length), per-bin GEMM complex multiply-adds,
    # values copied, 1-D transforms started.
    "fft_sample_log_s": 2.01e-10,
    "fft_cmac_s": 3.83e-10,
    "fft_copy_s": 1.56e-9,
    "fft_transform_s": 5.67e-12,
    "fft_f64": 2.04,
    "fft_axis_call_s": 72e-6,      # FFT backend's fixed cost per call and spatial axis
}
CONSTANTS = dict(DEFAULTS)
_CACHE_LOCK = threading.Lock()

# Variant rule (formerly in convt._dispatch.plan). The GEMM variant's grid mode pays for its halo rows;
# above _GRID_WASTE_OK GEMM multiply-adds per useful one (small images, large negative pads),
# batch-rows mode (M = batch, no halo work) runs when the batch is large enough to make a GEMM,
# and the pixel kernel otherwise. Channels-first grid mode reads x and writes y in place (no
# transposes), which batch-rows mode cannot: there it may pay up to _MAX_GEMM_WASTE (dcgan_g3,
# NCX, halo waste 1.27: grid 8.8 ms vs batch rows 13.6 ms, 2 threads).
_GRID_WASTE_OK = 1.25
_MAX_GEMM_WASTE = 1.5
_MIN_BATCH_ROWS = 8
# Below this many input or output channels per group, the depthwise kernel (memory-bound,
# DESIGN.md) is a candidate, priced against the dense variant (direct_kind); it was faster
# than the pixel kernel for every few-channel layer tried (2-core EPYC, float32, 4x4 stride
# 2: 3-15x in NCX), so it always runs where the dense variant would be the pixel kernel.
_MIN_GEMM_CHANNELS = 4
# ... and only when the other side has at least this many and the thin side at least 2:
# GEMMs with a few channels on both sides, or one channel on a side, run far below the GEMM
# model's rate (measured, 2 workers, float32, GEMM variant / depthwise kernel: 8 and 64
# channels depthwise 0.108 / 0.055 and 1.27 / 0.21 ms; 3 -> 3 channels 0.26-0.42 /
# 0.21-0.34; 2 -> 2 per group 3.7 / 1.3; 16 -> 1 3-D 2x2x2 stride 2 0.39-0.91 / 0.31-0.45;
# 64 -> 1 2x2 stride 2 0.58-0.91 / 0.44-0.89; 1 -> 64 3x3 1.6-2.5 / 0.35-0.55).
_THICK_SIDE = 16
_PIXEL_MARGIN = 1.5
# Below both (about 100 us of one thread's work, compute- or memory-bound), the direct kernels
# run serially: a 4.6k-MAC call measured 22 us on one thread, 127 us on two.
_PARALLEL_MIN_MACS = 1 << 22
_PARALLEL_MIN_OUTPUTS = 1 << 18


class DirectKind(NamedTuple):
    """How the direct backend runs a geometry: ``variant`` "depthwise", "micro", "winograd",
    "gemm" or "pixel";
    ``mode`` "grid" or "batch-rows" (gemm), "channels-first" (winograd: convt._backends.direct.cfwino's
    kernel), else ""; multiply-adds it performs and useful ones;
    ``rows``: the depthwise kernel's row terms (``depthwise_kind``), 0 for the others."""
    variant: str
    mode: str
    macs: int
    useful: int
    rows: int = 0


class Estimate(NamedTuple):
    """Estimated seconds per backend (None: not estimated) and what the direct one runs."""
    seconds: dict
    direct: DirectKind
    threads: int
    note: str


def _axis_sums(s, d, k_len, i_len, pb, o_len):
    """Per axis: grid length P, taps T and sum of q*taps over phases with outputs, the taps'
    in-data positions (mirrors convt._backends.direct.gemm.gemm_layout, without its tap lists) and the
    most taps of any phase."""
    phases = _axis_phases(s, d, k_len, pb, o_len)
    es = [(e, q) for q, taps in phases if q for _, e in taps]
    h = max(0, -min((e for e, _ in es), default=0))
    grid = max(h + i_len, max((q + e + h for e, q in es), default=0))
    taps = sum(len(t) for q, t in phases if q)
    qtaps = sum(q * len(t) for q, t in phases if q)
    inside = sum(max(0, min(q, i_len - e) - max(0, -e)) for q, t in phases for _, e in t)
    most = max(len(t) for _, t in phases)
    return grid, taps, qtaps, inside, most


def _axes(geom):
    """``_axis_sums`` of each axis of ``geom``, padded in front to 3 axes."""
    nd = geom.ndim
    pad = (1,) * (3 - nd)
    return [_axis_sums(*a) for a in zip(pad + geom.strides, pad + geom.dilations,
                                        pad + geom.kernel, pad + geom.in_shape,
                                        (0,) * (3 - nd) + geom.pads_begin,
                                        pad + geom.out_shape)]


def gemm_counts(geom, axes=None):
    """(grid-mode GEMM multiply-adds, multiply-adds of taps inside the data): the
    ``gemm_macs`` and ``exact_macs`` of ``gemm_layout(geom)``, computed per axis (``axes``:
    ``_axes(geom)`` when the caller has it)."""
    axes = _axes(geom) if axes is None else axes
    n, g = geom.batch, geom.groups
    per_group = (geom.c_in // g) * (geom.c_out // g) * g
    (p0, t0, s0, i0, _), (p1, t1, s1, i1, _), (p2, t2, s2, i2, _) = axes
    # sum over phase combos of rows(q) * taps, rows(q) = (n-1)P + (q0-1)P1P2 + (q1-1)P2 + q2
    rows_taps = ((n - 1) * p0 * p1 * p2 * t0 * t1 * t2 + (s0 - t0) * p1 * p2 * t1 * t2
                 + t0 * (s1 - t1) * p2 * t2 + t0 * t1 * s2)
    gemm = max(0, rows_taps) * per_group if n else 0
    return gemm, n * i0 * i1 * i2 * per_group


# Geometries are frozen and the rule is pure (given CONSTANTS; ``set_constants`` clears the
# cache): one-shot calls on a shape seen before skip the per-axis counts (~20 us of the
# one-shot overhead budget).
@functools.lru_cache(maxsize=256)
def direct_kind(geom):
    """The direct backend's variant for ``geom`` (a ``DirectKind``)."""
    cg, mg = geom.c_in // geom.groups, geom.c_out // geom.groups
    axes = _axes(geom)
    gemm, exact = gemm_counts(geom, axes)
    if min(cg, mg) >= _MIN_GEMM_CHANNELS:
        return _dense_kind(geom, axes, gemm, exact)
    # Fewer than _MIN_GEMM_CHANNELS on one side: the depthwise kernel, unless the model prices
    # the dense variant below it. The depthwise kernel sums one output row over every input
    # channel of its group and tap row, so the row terms grow with C_in / G: measured (2
    # workers, float32, NCX) 64 -> 3 channels, 4x4 stride 2 (DCGAN's last layer) depthwise
    # 4.46 ms, GEMM variant 1.43; 3 -> 16, 9x9 stride 1, depthwise 4.70, micro 2.92; 1 -> 64,
    # 3x3, depthwise 0.49, GEMM 1.60 (docs/dispatch.md, "Few channels on one side").
    depthwise = depthwise_kind(geom, axes, exact)
    if min(cg, mg) < 2 or max(cg, mg) < _THICK_SIDE:
        return depthwise
    dense = _dense_kind(geom, axes, gemm, exact)
    if dense.variant == "pixel":
        return depthwise
    return dense if _rule_seconds(geom, dense) < _rule_seconds(geom, depthwise) else depthwise


def _rule_seconds(geom, kind):
    """What the variant rule compares: the estimate of ``kind`` on one thread, float32."""
    return _direct_seconds(geom, kind, False, 1, CONSTANTS)


def depthwise_kind(geom, axes=None, exact=None):
    """The ``DirectKind`` of the depthwise kernel on ``geom`` (whichever variant runs it).
    Its row terms: per output row (axes 0, 1) and input channel of its group, each tap row in
    the data (``_axis_sums``' ``inside``), times the innermost axis's taps (set up per row,
    convt._kernels._depthwise._row_ncx)."""
    axes = _axes(geom) if axes is None else axes
    if exact is None:
        exact = gemm_counts(geom, axes)[1]
    (_, _, _, in0, _), (_, _, _, in1, _) = axes[:2]
    rows = geom.batch * geom.c_out * (geom.c_in // geom.groups) * in0 * in1 * geom.kernel[-1]
    return DirectKind("depthwise", "", exact, exact, rows)


def _dense_kind(geom, axes, gemm, exact):
    """The variant for ``geom`` among upsample, micro, Winograd, GEMM and pixel (thick
    channels)."""
    useful = max(exact, 1)
    if _UP_CHANNELS[0] <= geom.c_in // geom.groups <= _UP_CHANNELS[1] and up_eligible(geom):
        return DirectKind("upsample", "", up_macs(geom), exact)
    ok = _MAX_GEMM_WASTE if geom.data_format == "NCX" else _GRID_WASTE_OK
    micro = _micro_kind(geom, axes, gemm <= ok * useful, exact)
    if micro is not None:
        return _wino_kind(geom, micro)
    if not gemm_fits(geom):
        return DirectKind("pixel", "", exact, exact)
    if gemm <= ok * useful:
        return DirectKind("gemm", "grid", gemm, exact)
    if geom.batch >= _MIN_BATCH_ROWS:
        return DirectKind("gemm", "batch-rows", exact, exact)
    grid = DirectKind("gemm", "grid", gemm, exact)
    if gemm <= _MAX_GEMM_WASTE * useful:
        return grid
    # Mostly halo, small batch: grid-mode GEMMs on the halo when the model prices them
    # _PIXEL_MARGIN x below the pixel kernel (no wasted work, ~30x slower per multiply-add).
    # Measured (2 workers, float32): grid 1.1-7.5x faster on six stride-1 layers with waste
    # 1.6-3.7 (e.g. 3-D 8 channels K=5: 15 vs 39 ms); near a tie, tiny layers with 4-10x
    # waste ran 1.1-1.35x faster on the pixel kernel (e.g. 8 channels 10 -> 200: 42 vs 57 us).
    pixel = DirectKind("pixel", "", exact, exact)
    return grid if _PIXEL_MARGIN * _rule_seconds(geom, grid) <= _rule_seconds(geom, pixel) \
        else pixel


# The micro variant (register-blocked kernel, convt._backends.direct.micro) runs when the CPU has its AVX2+FMA
# kernel, unless: the 16-wide register tile pads a group's output channels by over
# _MICRO_PAD_OK (fcn32s_k64, 21 -> 32 channels: 17.1 ms against grid-mode GEMMs' 11.9); every
# phase has at most one tap and grid mode is acceptable (pure upsampling, K <= s: grid mode
# runs ONE GEMM over all phases, the micro variant one pass per phase; unet_up2x2 9.4 vs 7.8
# ms, vnet3d_up 6.6 vs 4.7); or the taps whose input lies off the data (computed on zeros)
# exceed _MAX_GEMM_WASTE of the work. Measured on the bench layers, 2 workers, float32, NCX:
# 1.01-1.52x faster than the GEMM variant on dcgan_g1/g3, unet_up3x3_op, hifigan_up1/up3,
# unet3d_k3 and dilated_s1; grouped_g8 0.94x.
_MICRO_PAD_OK = 1.25


# The upsample variant (convt._backends.direct.upsample: channels-first, K = s, stride 2 on the last axis, no
# padding; one tap per output, stored interleaved from registers) runs instead of the others
# with 16 to 512 input channels per group. Measured against grid mode's one GEMM (2 workers,
# NCX, in-process A/B, 3 x 16 calls taking turns; gemm / upsample): float32 unet_up2x2
# 1.18-1.21, vnet3d_up 1.31-1.35, 128 -> 64 at 64 x 64 1.22-1.35, 512 -> 256 at 32 x 32
# 1.08-1.16, 16 -> 8 at 128 x 128 1.72-1.85; float64 1.01-1.21 on the same layers. At 1024
# input channels (16 x 16) the input block (C_in x 2 vectors) and a tile's weights no longer
# fit L1: float32 still 1.23-1.27, float64 0.65-0.75.
_UP_CHANNELS = (16, 512)


def micro_macs(geom, nr=MICRO_NR_F32, axes=None):
    """Multiply-adds of the micro variant at tile width ``nr`` (phase output positions x
    taps x input channels x output channels padded to ``nr``, per group): the ``macs`` of
    ``convt._backends.direct.micro.micro_layout(geom, nr)``, computed per axis."""
    axes = _axes(geom) if axes is None else axes
    g = geom.groups
    mgp = -(-(geom.c_out // g) // nr) * nr
    return geom.batch * prod(a[2] for a in axes) * g * (geom.c_in // g) * mgp


def _micro_kind(geom, axes, grid_ok, exact):
    if MICRO_ISA != 1:
        return None
    mg = geom.c_out // geom.groups
    one_tap = all(a[4] <= 1 for a in axes)
    if -(-mg // MICRO_NR_F32) * MICRO_NR_F32 > _MICRO_PAD_OK * mg or (one_tap and grid_ok):
        return None
    macs = micro_macs(geom, axes=axes)
    if macs > _MAX_GEMM_WASTE * _MICRO_PAD_OK * max(exact, 1):
        return None
    return DirectKind("micro", "", macs, exact)


# The Winograd variant (convt._backends.direct.winograd) runs instead of the micro variant when its products
# cut the multiply-adds to _WINO_GAIN or less of the micro variant's and both channel counts
# per group are at least _WINO_MIN_CHANNELS: each product builds its differences (C_in values
# a row) and each output is combined from 2^w products (C_out values), work that only a thick
# contraction hides. Measured against the micro variant (2 workers, float32, NCX, in-process
# A/B, 5 rounds): dcgan_g1 1.06x, dcgan_g3 1.23x, unet_up3x3_op 1.09x, hifigan_up1 1.18x,
# hifigan_up3 1.09x (64-512 channels); grouped_g8 (32 per group) 0.80x, unet3d_k3 (32 -> 16)
# 0.61x.
_WINO_GAIN = 0.8
_WINO_MIN_CHANNELS = 64


def _useful_padded(geom, useful, nr):
    """The micro variant's multiply-adds without the taps it skips (off the data): the useful
    ones with the output channels padded to ``nr``."""
    mg = geom.c_out // geom.groups
    return useful * (-(-mg // nr) * nr) // max(mg, 1)


def _wino_kind(geom, micro):
    if min(geom.c_in, geom.c_out) < _WINO_MIN_CHANNELS * geom.groups:
        return micro
    layout = wino_layout(geom, MICRO_NR_F32)
    if layout is None or layout.macs > _WINO_GAIN * _useful_padded(geom, micro.useful,
                                                                   MICRO_NR_F32):
        return micro
    # 1-D channels-first layers of stride S and 2S taps run the channels-first kernel (its
    # rules as for float32, convt._backends.direct.cfwino): no transposes of x and y
    mode = "channels-first" if cf_layout(geom, 4) is not None else ""
    return DirectKind("winograd", mode, layout.macs, micro.useful)


# Grid pixels (halo included) per input + output pixel beyond which the GEMM variant is not
# used (gemm_fits); the 14 bench workloads (shared/bench) have 0.0-0.85.
_MAX_GRID_GROWTH = 8


def gemm_fits(geom):
    """The GEMM variant's zero-haloed input grid stays within _MAX_GRID_GROWTH times the data
    (a large dilation with heavy cropping can make the halo, not the data, the size of it: a
    4x4 input at dilation 3000 needed an 8.6 GiB grid in batch-rows mode), and every size and
    leading dimension it passes to BLAS fits BLAS's 32-bit int (the largest: one image of
    the grid, all channels, in batch-rows mode)."""
    img = prod(grid_shape(geom)[2])
    data = prod(geom.in_shape) + prod(geom.out_shape)
    # a tile has at most _TILE_VALUES values or _MIN_TILE_ROWS rows of a set's columns
    blas = max(img * geom.c_in, geom.batch, _MIN_TILE_ROWS * _MAX_SET * geom.c_out,
               _TILE_VALUES)
    return img <= _MAX_GRID_GROWTH * data and blas < 2**31


def direct_threads(geom, workers):
    """Threads the direct kernels use: ``workers``, or one for work too small for a team."""
    small = (geom.macs < _PARALLEL_MIN_MACS
             and prod(geom.array_shape("output")) < _PARALLEL_MIN_OUTPUTS)
    return 1 if small else workers


def _parallel(threads, c):
    return 1 + (threads - 1) * c["thread_efficiency"]


def _direct_seconds(geom, kind, f64, threads, c):
    itemsize = 8 if f64 else 4
    moved = itemsize * (prod(geom.array_shape("input")) + prod(geom.array_shape("output")))
    if kind.variant == "gemm":
        cg, mg = geom.c_in // geom.groups, geom.c_out // geom.groups
        h = c["gemm_channel_half"]
        rate = c["gemm_macs_per_s"] * cg / (cg + h) * mg / (mg + h)
    elif kind.variant in ("micro", "winograd", "upsample"):
        cg = geom.c_in // geom.groups
        rate = c["micro_macs_per_s"] * cg / (cg + c["micro_channel_half"])
        # x is made channels-last first (the upsample variant reads channels-first x as it is)
        if geom.data_format == "NCX" and kind.variant != "upsample" \
                and kind.mode != "channels-first":
            moved += itemsize * prod(geom.array_shape("input"))
            if kind.variant == "winograd":   # and y is written channels-last, then transposed
                moved += 2 * itemsize * prod(geom.array_shape("output"))
    else:
        rate = c[f"{kind.variant}_macs_per_s"]
    if f64:
        rate /= c["direct_f64"]
    work = kind.macs / rate + moved / c["bytes_per_s"]
    if kind.variant == "depthwise":
        work += kind.rows * c["depthwise_row_s"]
    return c["call_s"] + work / _parallel(threads, c)


_FFT_UNITS = ("fft_sample_log_s", "fft_cmac_s", "fft_copy_s", "fft_transform_s")


@functools.lru_cache(maxsize=256)
def _fft_features(geom, compute_dtype):
    """The FFT backend's work (``convt._backends.fft._features``) for the tiling it would pick, or None
    when no input reaches the output. Cached (the tiling search dominates an estimate), so a
    changed ``convt._backends.fft.FFT_MEMORY_BUDGET`` reaches only geometries not seen before."""
    from .._backends.fft import _features, fft_layout

    lay = fft_layout(geom, compute_dtype)
    if lay.chunk == 0:
        return None
    return _features(geom, list(zip(lay.small, lay.block, lay.tiles)))


def _fft_seconds(geom, compute_dtype, f64, workers, c):
    feats = _fft_features(geom, np.dtype(compute_dtype))
    if feats is None:
        return _fft_fixed(geom, c)
    t = sum(f * c[k] for f, k in zip(feats, _FFT_UNITS))
    # fitted at 2 workers: rescale to ``workers``
    scale = (c["fft_f64"] if f64 else 1.0) * _parallel(2, c) / _parallel(workers, c)
    return _fft_fixed(geom, c) + scale * t


def _fft_fixed(geom, c):
    """The FFT backend's per-call cost before any work (transform plans, Python)."""
    return c["call_s"] + geom.ndim * c["fft_axis_call_s"]


def seconds(geom, compute_dtype, workers, method, constants=None):
    """Estimated seconds of ``method`` ("direct" or "fft") on ``geom``, always computed
    (`estimate` skips hopeless FFTs); for fitting the constants. "depthwise" prices the
    depthwise kernel even where the direct backend would run another variant."""
    c = CONSTANTS if constants is None else constants
    f64 = np.dtype(compute_dtype) == np.float64
    if method == "fft":
        return _fft_seconds(geom, compute_dtype, f64, workers, c)
    kind = depthwise_kind(geom) if method == "depthwise" else direct_kind(geom)
    return _direct_seconds(geom, kind, f64, direct_threads(geom, workers), c)


def estimate(geom, compute_dtype, workers, constants=None):
    """Estimated seconds of each eligible backend ("direct", "fft") on ``geom``.

    ``compute_dtype`` is float32 or float64 (16-bit types compute in float32); ``workers``
    is the plan's thread count. The FFT is not estimated (None) when the direct estimate is
    below the FFT's fixed cost alone or when no output position has an input.
    """
    c = CONSTANTS if constants is None else constants
    f64 = np.dtype(compute_dtype) == np.float64
    kind = direct_kind(geom)
    threads = direct_threads(geom, workers)
    seconds = {"direct": _direct_seconds(geom, kind, f64, threads, c), "fft": None}
    if seconds["direct"] < _fft_fixed(geom, c):
        note = (f"direct estimate below the FFT's fixed cost ({_fft_fixed(geom, c) * 1e6:.0f} "
                "us): FFT not estimated")
    elif kind.useful == 0 or geom.batch == 0:
        note = "no input reaches the output: FFT not estimated"
    else:
        seconds["fft"] = _fft_seconds(geom, compute_dtype, f64, workers, c)
        note = ""
    return Estimate(seconds, kind, threads, note)


# ----------------------------------------------------------------- calibration file

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
    """Replace ``CONSTANTS`` (and forget variant choices made with the old ones)."""
    # In place and key by key, never cleared: a thread estimating meanwhile sees old or new
    # values, never a missing one (callers pass the full key set, load_calibration checks it).
    CONSTANTS.update(consts)
    from .plan import direct_variant, forget_decisions

    with _CACHE_LOCK:
        direct_kind.cache_clear()
        direct_variant.cache_clear()
        forget_decisions()
