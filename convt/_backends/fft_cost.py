"""The FFT backend's cost model and tiling choice (``convt._backends.fft``).

One model prices the FFT for the dispatcher and picks its tiling: ``_features`` counts a
call's work per unit of ``COST_UNITS`` (the dispatcher's constants,
``convt._dispatch.constants``), ``convt._backends.fft_spectra.spectrum_features`` the work of
a one-shot call's kernel spectra in the same units. ``layout`` tries every per-axis choice of
transform length and tiles (``_axis_options``; 1-D overlap-save blocks,
``convt._backends.fft_blocks.save_options``) and keeps the cheapest whose kernel spectra fit
the memory budget; ``estimate_parts`` prices the call the dispatcher compares (docs/fft.md,
docs/dispatch.md).
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from math import ceil, log2, prod

import numpy as np
import scipy.fft as sfft

from .base import parallel
from .fft_blocks import save_options
from .fft_spectra import fuses_lead, phase_taps, spectrum_features, uses_dft
from .._kernels import _cpu

__all__ = ["COST_UNITS", "FftLayout", "estimate_parts", "fixed_seconds", "layout",
           "layout_seconds", "PLACE_TILES", "places2", "spectra_stream", "unit_rates"]

# The cost model's constants (``convt._dispatch.constants``) that price one unit of each
# ``_features`` entry: transform samples * log2(transform length), per-bin GEMM complex
# multiply-adds, spectra values copied, 1-D transforms started, overlap-save block groups,
# the contraction's item visits and scalar-column steps (``_contraction``); then
# ``_estimate``'s: bytes streamed from memory (the kernel spectra past the cache,
# ``_fused_stream``, ``spectra_stream``, ``_place_lines``), a one-shot call's DFT
# multiply-adds for its kernel spectra (``fft_spectra.spectrum_features``' second entry, at
# the rate they were fitted with before the contraction's own terms), output values placed
# from the frames, and the NumPy-level moves (an overlap-add tiling's frame values per pass,
# ``_tile_frames``; a one-shot call's kernel-spectra copies), and ``place2``'s channel runs
# (``_place_runs``). One model: the tiling below and the dispatcher's estimate read the same
# constants (``FftBackend.constants``).
COST_UNITS = ("fft_sample_log_s", "fft_cmac_s", "fft_copy_s", "fft_transform_s",
              "fft_group_s", "fft_row_s", "fft_lane_s", "fft_read_s", "fft_dft_cmac_s",
              "fft_place_s", "fft_move_s", "fft_place_run_s")
_DFT = COST_UNITS.index("fft_dft_cmac_s")
_MOVE = COST_UNITS.index("fft_move_s")
# Vector bytes of the per-bin contraction's loops at AVX2 and up (``_fftrow.h``:
# fftrow_contract_wide = 0, so 256-bit vectors on AVX-512 machines too).
_CONTRACT_BYTES = 32
# An array larger than this is read from memory on every pass over it: half of the 32 MiB
# L3 of the 2-core AMD EPYC (Zen 4; the rest holds the call's other arrays). A bound at the
# L2s prices spectra the L3 holds as streamed and picks slower tilings (docs/dispatch.md,
# "The FFT's contraction priced as it runs").
_STREAM_BYTES = 16 << 20
# A frame array larger than this is not in a core's cache when ``place2`` gathers from it:
# a Zen 4 core's 1 MiB L2. The 2-D placement (``_fftmul.fft_place2``) reads, per output row
# of a group, each pixel's run of C_out/G frame values; with a few channels a group (depthwise)
# every value costs a 64-byte line (docs/dispatch.md, "FFT and depthwise estimates, tune's
# close calls").
_PLACE_CACHE = 1 << 20
_LINE = 64
# Up to this many tiles a 2-D channels-first call's frames are added straight into y, each
# at its offset (``convt._backends.fft``), rather than summed into one overlap-add frame
# first (a zeroed array, a pass per spill): the direct adds take about half the sum's time,
# but each tile pays a NumPy call (docs/performance.md, "Figures moved out of code comments").
PLACE_TILES = 8


@dataclass(frozen=True)
class FftLayout:
    """How one geometry is transformed; tuples hold one entry per spatial axis."""

    lo: tuple        # first input index that reaches the output window
    used: tuple      # input samples used from lo (0 on some axis: no input reaches)
    block: tuple     # input samples per tile, B
    tiles: tuple     # tiles, T = ceil(used / B)
    small: tuple     # transform length, L >= B + ceil(E/s) - 1
    length: tuple    # a tile's output frame (phases interleaved), N = L * s >= (B-1)*s + E
    offset: tuple    # index of output position 0 in the frame of tile 0's output
    chunk: int       # batch elements per transform pass
    kernel_bytes: int
    work_bytes: int  # working arrays of one batch element
    cost: float      # estimated seconds per call, spectra excluded (``_features``)
    spectra: float   # estimated seconds of computing the kernel spectra (a one-shot call)
    save: int = 0    # overlap-save (1-D): blocks per group (fft_blocks.run_save); 0: not

    @property
    def blocked(self):
        return any(t > 1 for t in self.tiles)

    @property
    def bins(self):
        """Spectrum shape of a tile (rfft on the last axis)."""
        return (*self.small[:-1], self.small[-1] // 2 + 1)


def _reach(geom, a):
    """(lo, hi): the inputs of axis ``a`` that reach the output window (lo > hi if none).

    Input i lands on full-output positions [i*s, i*s + E - 1]; the window is [pb, pb + O - 1].
    Dropping the others shrinks the transforms when pads crop (or output_shape truncates).
    """
    s, e = geom.strides[a], (geom.kernel[a] - 1) * geom.dilations[a] + 1
    pb, o = geom.pads_begin[a], geom.out_shape[a]
    lo = max(0, -((e - 1 - pb) // s))
    hi = min(geom.in_shape[a] - 1, (pb + o - 1) // s)
    return lo, hi


def _axis_options(u, s, e):
    """(L, B, T) candidates of one axis: one tile of all ``u`` inputs, then overlap-add tiles
    of B = L - Q + 1 inputs (Q = ceil(E/s) polyphase taps) with B >= Q, so that B*s >= E and
    a tile's frame spills only into its next neighbour. Besides the smallest such L (the least
    memory), L doubles from 16 (shorter transforms are all per-call overhead), and the L that
    cut ``u`` into 2, 3, 4, 6 or 8 equal tiles (small kernel spectra for a one-shot call)."""
    q = -(-e // s)
    whole = sfft.next_fast_len(u + q - 1, real=True)
    cands = {sfft.next_fast_len(2 * q - 1, real=True)}
    cand = sfft.next_fast_len(max(2 * q - 1, 16), real=True)
    while cand < whole:
        cands.add(cand)
        cand = sfft.next_fast_len(2 * cand, real=True)
    for t in (2, 3, 4, 6, 8):
        if -(-u // t) >= q:
            cands.add(sfft.next_fast_len(-(-u // t) + q - 1, real=True))
    return [(whole, u, 1)] + [(c, c - q + 1, ceil(u / (c - q + 1))) for c in sorted(cands)
                              if c - q + 1 < u]


def _features(geom, opts, itemsize):
    """Per-call work of one (L, B, T) choice per axis, or of one (L, B, T, groups)
    overlap-save choice, in the units of ``COST_UNITS`` but the last two (``_estimate``'s);
    ``itemsize``: bytes of a real value of the compute dtype."""
    small = [o[0] for o in opts]
    pts = prod(small)
    nbins = pts // small[-1] * (small[-1] // 2 + 1)
    phases = prod(geom.strides)
    passes = geom.batch * prod(o[2] for o in opts)   # tile transforms per channel
    c_in, c_out = geom.c_in, geom.c_out
    logn = log2(max(pts, 2))
    # the frames' own copies: fft_place_s (the window placed), _tile_frames (overlap-add);
    # overlap-save pays per block group
    groups = opts[0][3] if len(opts[0]) > 3 else 0
    visits, lanes = _contraction(geom, passes * phases * nbins, itemsize)
    return (passes * (c_in + phases * c_out) * pts * logn,
            passes * phases * nbins * c_in * (c_out // geom.groups),
            passes * (c_in + phases * c_out) * nbins,
            passes * (c_in + phases * c_out) * sum(pts // n for n in small),
            groups, visits, lanes)


def _contraction(geom, bins, itemsize):
    """(item visits, scalar-column steps) of the per-bin contraction over ``bins`` (phase,
    bin, tile and batch element) tuples: ``_fftrow.h``'s fftrow_contract visits each item of
    each group's bin row once (its set-up, the sums' stores and the row's write: what a
    depthwise layer's 1 x 1 products cost), and sums the C_out/G columns in vectors of
    ``_CONTRACT_BYTES`` (AVX2 and up; 16 bytes below), with the columns past the last whole
    vector (C_out/G mod lanes) one at a time, each C_in/G steps of a chain of dependent
    multiply-adds (~8 cycles a step, against a vector's 8-16 columns in the same steps)."""
    cg, mg = geom.c_in // geom.groups, geom.c_out // geom.groups
    lanes = (_CONTRACT_BYTES if _cpu.ISA >= 1 else 16) // itemsize
    visits = bins * geom.groups
    return visits, visits * cg * (mg % lanes)


def _chunk(geom, budget, kernel, work):
    """Batch elements per transform pass: as many as fit the budget next to the kernel
    spectra (at least one)."""
    return int(min(max(geom.batch, 1), max(1, (budget - kernel) // max(work, 1))))


def _streamed(size, reads):
    """Bytes read from memory: ``reads`` passes over an array of ``size`` bytes, when it
    is larger than ``_STREAM_BYTES`` (else it stays in cache between passes: 0)."""
    return reads * size if size > _STREAM_BYTES else 0


def _fused_stream(geom, small, itemsize):
    """Bytes the fused axis-0 DFT of a one-shot call (``fft_contract_dft``) streams: its
    packed kernel (per phase and row of the other axes, C_in/G * C_out/G weights in blocks
    of 16, Q0 // 2 + 1 centred terms, even and odd parts, real and imaginary parts in 2-D
    and 3-D) is read once per pair of axis-0 rows, L0 // 2 + 1 rows (``_fftmul.pyx``)."""
    taps = phase_taps(geom)
    nd = geom.ndim
    rest = [small[a] // 2 + 1 if a == nd - 1 else small[a] for a in range(1, nd)]
    weights = 16 * -(-(geom.c_in // geom.groups) * (geom.c_out // geom.groups) // 16)
    parts = 2 if nd > 1 else 1
    packed = (prod(geom.strides) * prod(rest) * geom.groups * weights * (taps[0] // 2 + 1)
              * 2 * parts * itemsize)
    return _streamed(packed, -(-(small[0] // 2 + 1) // 2))


def places2(geom, tiles):
    """Whether a call's tile frames (``tiles`` per axis) are placed by the compiled
    ``fft_place2`` (``convt._backends.fft``'s tiled path): 2-D channels-first calls of at
    most ``PLACE_TILES`` tiles."""
    return geom.ndim == 2 and geom.data_format != "NXC" and prod(tiles) <= PLACE_TILES


def _tile_frames(geom, opts):
    """Frame values an overlap-add tiling moves, counted per pass over them and priced at
    the rate the single copy unit had before the window's placement was split out
    (``fft_move_s``): one pass where ``place2`` adds the tile frames straight into y
    (2-D channels-first, up to ``PLACE_TILES`` tiles), two where ``_place_tiles`` does (NumPy
    transposing adds, a call per tile), three past ``PLACE_TILES`` tiles (``_overlap_add``'s
    zeroed sum and adds, then the sum placed; the passes' costs: docs/performance.md,
    "Figures moved out of code comments"). 0 for one tile or overlap-save."""
    tiles = prod(o[2] for o in opts)
    if len(opts[0]) > 3 or tiles == 1:
        return 0
    if tiles > PLACE_TILES:
        passes = 3
    else:
        passes = 1 if places2(geom, [o[2] for o in opts]) else 2
    return passes * geom.batch * tiles * prod(geom.strides) * geom.c_out * prod(
        o[0] for o in opts)


def _place_lines(geom, opts, itemsize, chunk):
    """Bytes ``fft_place2`` fetches from frames outside the cache (``_PLACE_CACHE``): per
    output pixel of each batch element, group and tile, the lines of its C_out/G values
    (a 2-D channels-first call of at most ``PLACE_TILES`` tiles; 0 on other paths, or when
    a chunk's frames fit)."""
    tiles = prod(o[2] for o in opts)
    if len(opts[0]) > 3 or not places2(geom, [o[2] for o in opts]):
        return 0
    frames = chunk * geom.c_out * prod(o[0] for o in opts) * prod(geom.strides) * tiles
    if frames * itemsize <= _PLACE_CACHE:
        return 0
    mg = geom.c_out // geom.groups
    lines = -(-mg * itemsize // _LINE)
    return geom.batch * geom.groups * prod(geom.out_shape) * tiles * lines * _LINE


# Per output row of 16 columns (a block of ``fft_place2``: its transposes in and out of the
# thread's 16 x 16 scratch and the tile loop's set-up), the price of this many channel runs.
_PLACE_BLOCK_RUNS = 4


def _covered(geom, a, opt):
    """Output positions of axis ``a`` summed over the tiles whose frame covers them (tiling
    ``opt`` = (L, B, T)): tile t's frame of N = L*s positions starts at t*B*s minus the
    layout's offset (``FftLayout.offset``), clipped to the O outputs."""
    s, o = geom.strides[a], geom.out_shape[a]
    frame, step = opt[0] * s, opt[1] * s
    start = -(geom.pads_begin[a] - _reach(geom, a)[0] * s)
    return sum(max(0, min(o, start + t * step + frame) - max(0, start + t * step))
               for t in range(opt[2]))


def _place_runs(geom, opts):
    """Channel runs of ``fft_place2`` (2-D channels-first, at most ``PLACE_TILES`` tiles; 0
    on the other paths): per output pixel of each batch element and group and per tile
    whose frame covers it (``_covered``), a run of its C_out/G values in blocks of 16 (the
    kernel's inner loop, started for each block), plus ``_PLACE_BLOCK_RUNS`` a row block
    of 16 columns: with few channels a group every value pays the inner loop's start
    (docs/dispatch.md, "Few channels a group in the FFT's placement; tune against the
    sweep"). Its one-thread run on fewer than ``fft_blocks._MIN_PLACE_THREADED`` outputs
    is left unpriced: pricing it lost a seed's geometry on the stored sweeps."""
    if len(opts[0]) > 3 or not places2(geom, [o[2] for o in opts]):
        return 0
    mg = geom.c_out // geom.groups
    o0, o1 = geom.out_shape
    return (geom.batch * geom.groups * -(-mg // 16)
            * (_covered(geom, 0, opts[0]) * _covered(geom, 1, opts[1])
               + o0 * _PLACE_BLOCK_RUNS * -(-o1 // 16)))


def spectra_stream(geom, small, itemsize):
    """Bytes a one-shot call's whole kernel spectra (``fft_spectra.kernel_spectrum``) move
    through memory: each array of the chain larger than ``_STREAM_BYTES`` is written and
    read once (the zero-inserted kernel and its polyphase copy, whose last axis is padded
    to its transform length when scipy.fft transforms it; per axis the transform's output
    and its split or contiguous copy; docs/dispatch.md, "FFT and depthwise estimates,
    tune's close calls")."""
    taps = phase_taps(geom)
    cols = prod(geom.strides) * geom.c_in * (geom.c_out // geom.groups)
    dims = list(taps)
    rows = taps[-1] if uses_dft(taps[-1], small[-1], last=True) else small[-1]
    total = (_streamed(cols * prod(dims) * itemsize, 2)
             + _streamed(cols * prod(dims[:-1]) * rows * itemsize, 2))
    for a in reversed(range(geom.ndim)):
        dims[a] = small[a] // 2 + 1 if a == geom.ndim - 1 else small[a]
        total += 2 * _streamed(cols * prod(dims) * 2 * itemsize, 2)
    return total


def _estimate(geom, opts, csize, rates, budget):
    """(kernel bytes, work bytes per batch element, seconds per call, seconds of the kernel
    spectra) of one choice per axis, at ``rates`` seconds per unit of each feature. The
    contraction reads the kernel spectra once per batch chunk (overlap-save: per block
    group), from memory when they outgrow the cache (``fft_read_s`` per byte)."""
    small = [o[0] for o in opts]
    nbins = prod(small) // small[-1] * (small[-1] // 2 + 1)
    phases, tiles = prod(geom.strides), prod(o[2] for o in opts)
    kernel = phases * nbins * geom.c_in * (geom.c_out // geom.groups) * csize
    save = len(opts[0]) > 3
    if save:   # overlap-save: one group's arrays at a time, the whole batch
        tiles = -(-tiles // opts[0][3]) / max(geom.batch, 1)
    # Kept per batch element (``fft.run_fft``'s workspace): the real input tiles and their
    # spectra (each about nbins complex values a channel), the products, the inverse's real
    # frames and the overlap-add frame (each about nbins a phase and output channel).
    work = int(tiles * nbins * csize * (2 * geom.c_in + 3 * phases * geom.c_out))
    chunk = _chunk(geom, budget, kernel, work)
    reads = opts[0][3] if save else -(-geom.batch // chunk)
    streamed = _streamed(kernel, reads) + _place_lines(geom, opts, csize // 2, chunk)
    placed = geom.batch * geom.c_out * prod(geom.out_shape)
    feats = (*_features(geom, opts, csize // 2), streamed, 0, placed, _tile_frames(geom, opts),
             _place_runs(geom, opts))
    call = sum(f * c for f, c in zip(feats, rates))
    fuse = not save   # overlap-save: the whole spectra (``_spectra``)
    spec = list(spectrum_features(geom, small, fuse)) + [0.0] * (len(rates) - 4)
    spec[1], spec[_DFT] = 0.0, spec[1]    # the DFTs' multiply-adds: fft_dft_cmac_s
    spec[2], spec[_MOVE] = 0.0, spec[2]   # the spectra's NumPy copies: fft_move_s
    read = COST_UNITS.index("fft_read_s")
    if fuse and fuses_lead(geom, small):
        spec[read] = _fused_stream(geom, small, csize // 2)
    else:
        spec[read] = spectra_stream(geom, small, csize // 2)
    spectra = sum(f * c for f, c in zip(spec, rates))
    return kernel, work, call, spectra


def unit_rates(constants):
    """The ``COST_UNITS`` rates of ``constants`` (a dict), as a tuple (a cache key)."""
    if constants is None:
        raise RuntimeError("the FFT backend has no cost constants (convt._dispatch sets "
                           "them at import): this is a bug in convt")
    return tuple(constants[k] for k in COST_UNITS)


def layout(geom, compute_dtype, budget, one_shot, rates, save=None, pick=None):
    """The ``FftLayout`` of ``geom`` (``convt._backends.fft.fft_layout``, which resolves the
    defaults): the cheapest tiling at ``rates`` whose kernel spectra fit half of ``budget``
    bytes, else the one with the smallest spectra; with ``one_shot`` per call plus its
    kernel spectra. ``save``: ``FFT_OVERLAP_SAVE``. ``pick(options)`` may choose the
    per-axis (L, B, T) instead (to fit the cost model)."""
    if pick is None:
        return _cheapest(geom, np.dtype(compute_dtype), budget, one_shot, rates, save,
                         _cpu.ISA)
    return _layout(geom, np.dtype(compute_dtype), budget, pick, one_shot, rates, save)


# Pure in its arguments (geometries are frozen; the ISA level, which sets the contraction's
# vector width, is one): a one-shot call on a shape seen before skips the tiling search
# (docs/performance.md, "Figures moved out of code comments").
@functools.lru_cache(maxsize=256)
def _cheapest(geom, compute_dtype, budget, one_shot, rates, save, isa):
    return _layout(geom, compute_dtype, budget, None, one_shot, rates, save)


def _layout(geom, compute_dtype, budget, pick, one_shot, rates, save=None):
    csize = 2 * np.dtype(compute_dtype).itemsize
    nd = geom.ndim
    reach = [_reach(geom, a) for a in range(nd)]
    used = tuple(max(hi - lo + 1, 0) for lo, hi in reach)
    if min(used) == 0:  # no input reaches the window: every output is the bias
        one = (1,) * nd
        return FftLayout((0,) * nd, used, one, one, one, one, (0,) * nd, 0, 0, 0, 0.0, 0.0)
    ext = [(k - 1) * d + 1 for k, d in zip(geom.kernel, geom.dilations)]
    options = [_axis_options(u, s, e) for u, s, e in zip(used, geom.strides, ext)]
    if nd == 1 and save is not False and pick is None:
        saves = save_options(geom, reach[0][0], used[0], ext[0], options[0], save, csize)
        options = [saves] if save and saves else [options[0] + saves]
    if pick is not None:
        combo = pick(options)
    else:
        def key(combo):
            kernel, _, cost, spectra = _estimate(geom, combo, csize, rates, budget)
            over = kernel > budget // 2
            return (over, kernel if over else cost + (spectra if one_shot else 0.0))
        combo = min(itertools.product(*options), key=key)
    kernel, work, cost, spectra = _estimate(geom, combo, csize, rates, budget)
    chunk = _chunk(geom, budget, kernel, work)
    lo = tuple(r[0] for r in reach)
    return FftLayout(
        lo=lo, used=used, block=tuple(o[1] for o in combo), tiles=tuple(o[2] for o in combo),
        small=tuple(o[0] for o in combo),
        length=tuple(o[0] * s for o, s in zip(combo, geom.strides)),
        offset=tuple(pb - a * s for pb, a, s in zip(geom.pads_begin, lo, geom.strides)),
        chunk=chunk, kernel_bytes=kernel, work_bytes=work, cost=cost, spectra=spectra,
        save=-(-combo[0][2] // combo[0][3]) if len(combo[0]) > 3 else 0)


def layout_seconds(geom, compute_dtype, one_shot, rates, budget, save=None):
    """(seconds per call, seconds of the kernel spectra) of the tiling ``layout`` picks at
    ``rates``, or None when no input reaches the output. Cached (the tiling search
    dominates an estimate)."""
    return _layout_seconds(geom, compute_dtype, one_shot, rates, budget, save, _cpu.ISA)


@functools.lru_cache(maxsize=256)
def _layout_seconds(geom, compute_dtype, one_shot, rates, budget, save, isa):
    lay = layout(geom, compute_dtype, budget, one_shot, rates, save)
    if lay.chunk == 0:
        return None
    return lay.cost, lay.spectra


def fixed_seconds(geom, c):
    """The per-call cost before any work (transform plans, Python)."""
    return c["call_s"] + c["fft_call_s"] + geom.ndim * c["fft_axis_call_s"]


def estimate_parts(geom, compute_dtype, workers, c, one_shot, budget, save=None):
    """(seconds of the call's own work, seconds of its kernel spectra and one-shot set-up
    (``fft_one_shot_axis_s`` per spatial axis): 0 for a prepared call, which has them), at
    the constants ``c``, the memory ``budget`` and ``save`` (``FFT_OVERLAP_SAVE``)."""
    ct = np.dtype(compute_dtype)
    parts = layout_seconds(geom, ct, one_shot, unit_rates(c), budget, save)
    if parts is None:
        return fixed_seconds(geom, c), 0.0
    # fitted at 2 workers: rescaled to ``workers``
    scale = ((c["fft_f64"] if ct == np.float64 else 1.0) * parallel(2, c)
             / parallel(workers, c))
    setup = scale * parts[1] + geom.ndim * c["fft_one_shot_axis_s"]
    return fixed_seconds(geom, c) + scale * parts[0], setup if one_shot else 0.0
