"""The FFT backend (``method="fft"``): transposed convolution as a product of spectra.

Per axis (stride s, dilation d, kernel K, extent E = (K-1)*d + 1) the full output is
full[t] = sum_i x[i] wd[t - i*s], wd the kernel zero-inserted by d. Output phase r (t = q*s + r)
is a stride-1 convolution: full[q*s + r] = sum_i x[i] h_r[q - i] with the polyphase component
h_r[q] = wd[q*s + r] (Q = ceil(E/s) taps). So every phase shares the input spectrum at one
length L >= I + Q - 1 (one rfftn of the small input), each phase has its own kernel spectrum,
and the phases interleave into a frame of length N = L*s. This per-phase form was measured
1.0-1.7x faster than the equivalent spectrum tiling of the zero-upsampled input (docs/fft.md).
Stride 1 is the one-phase case: a full linear convolution with the unflipped kernel, cropped.

The kernel spectra (``convt._backends.fft_spectra``: pruned per-axis transforms, small DFT
matrices as GEMMs where the kernel has few taps) are kept by a prepared operator per transform
length, so a new batch size or input shape with the same lengths reuses them; a one-shot call
computes them into its workspace and picks its own tiling, priced with them. Per bin the
channel contraction is a small complex GEMM, Y[p, f, n, m] = sum_c X[f, n, c] W[p, f, c, m],
run for every phase p and bin f by one compiled loop (``convt._kernels._fftmul``, OpenMP over
bins, the kernel spectra in a split real / imaginary layout). Spatial axes lead in every
array, so each transform runs over axes of one array holding every channel, tile and batch
element: ``workers`` has many 1-D transforms to share out (scipy.fft parallelises over those).

Memory: the kernel spectra hold C_in * C_out/G * N^D / 2 complex numbers, (N/K)^D / 2 times
the weights. When they would exceed half of ``FFT_MEMORY_BUDGET`` bytes, the input is cut into
tiles of B samples per axis (overlap-add): a tile's frame has N >= (B-1)*s + E with B*s >= E,
so a tile only spills into its next neighbour along an axis. The batch runs in chunks of batch
elements sized so that the working arrays fit the rest of the budget (at least one element).
The tile length is also chosen for speed by the cost model (the dispatcher's constants, one
model for both): short transforms whose small kernel spectra stay in cache can beat one long
transform, and a one-shot call, which computes its spectra, prefers shorter ones still.
A long 1-D signal may run as overlap-save blocks in cache-sized groups instead
(``convt._backends.fft_blocks.run_save``, ``FftLayout.save``), when the model prices it lower.

Precision: float32 (and float16 / bfloat16, widened) transform in complex64, float64 in
complex128. The error is normwise (relative to the largest |output|; measured in docs/fft.md),
not elementwise: small outputs next to large ones lose relative accuracy.
"""
from __future__ import annotations

import functools
import itertools
import threading
from dataclasses import dataclass
from math import ceil, log2, prod

import numpy as np
import scipy.fft as sfft

from .base import parallel
from .direct.pixel import bias_filled
from .fft_blocks import contract, place2, run_save, save_options
from .fft_spectra import fft_threads, fuses_lead, kernel_spectrum, lead_spectra, spectrum_features

__all__ = ["BACKEND", "FFT_MEMORY_BUDGET", "FFT_OVERLAP_SAVE", "FftLayout", "fft_growth",
           "fft_layout", "plan_fft",
           "run_fft"]

# Bytes the kernel spectrum plus one chunk's working spectra may take (half for the kernel
# spectrum). Module constant: tests shrink it to force the overlap-add path.
FFT_MEMORY_BUDGET = 256 * 2**20
# 1-D overlap-save in cache-sized block groups (``convt._backends.fft_blocks``): None lets the
# cost model choose it against the other tilings, True forces it on every 1-D geometry that
# has an output to compute, False rules it out. Module constant, for tests and measurements.
FFT_OVERLAP_SAVE = None

# The cost model's constants (``convt._dispatch.constants``) that price one unit of each
# ``_features`` entry: transform samples * log2(transform length), per-bin GEMM complex
# multiply-adds, values copied, 1-D transforms started. One model: the tiling below and the
# dispatcher's estimate read the same constants (``FftBackend.constants``).
_COST_UNITS = ("fft_sample_log_s", "fft_cmac_s", "fft_copy_s", "fft_transform_s",
               "fft_group_s")
# Kernel spectra kept per prepared operator, keyed by transform lengths (a new batch size or
# an input shape with the same lengths reuses them); the oldest goes first.
_SPECTRA_KEPT = 4
# Up to this many tiles the tile frames are added straight into y, each at its offset, rather
# than summed into one overlap-add frame first (a zeroed array, a pass per spill): the 9 x 9
# layer's one-shot 2 x 2 tiles, 2-core AMD EPYC, the sum and its placing 0.22 ms, the four
# direct adds ~0.1 ms. More tiles pay ~10 us of Python each.
_PLACE_TILES = 8


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
    cost: float      # estimated seconds per call, spectra excluded (the cost model above)
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


def _features(geom, opts):
    """Per-call work of one (L, B, T) choice per axis, or of one (L, B, T, groups)
    overlap-save choice, in the units of ``_COST_UNITS``."""
    small = [o[0] for o in opts]
    pts = prod(small)
    nbins = pts // small[-1] * (small[-1] // 2 + 1)
    phases = prod(geom.strides)
    passes = geom.batch * prod(o[2] for o in opts)   # tile transforms per channel
    c_in, c_out = geom.c_in, geom.c_out
    logn = log2(max(pts, 2))
    # overlap-add writes every tile frame once more (zeroed sum, added, reshaped);
    # overlap-save writes each block's frame once, and pays per block group
    groups = opts[0][3] if len(opts[0]) > 3 else 0
    frames = 2 if passes > geom.batch and not groups else 1
    return (passes * (c_in + phases * c_out) * pts * logn,
            passes * phases * nbins * c_in * (c_out // geom.groups),
            passes * (c_in * nbins + phases * c_out * (nbins + frames * pts)),
            passes * (c_in + phases * c_out) * sum(pts // n for n in small),
            groups)


def _estimate(geom, opts, csize, rates):
    """(kernel bytes, work bytes per batch element, seconds per call, seconds of the kernel
    spectra) of one choice per axis, at ``rates`` seconds per unit of each feature."""
    small = [o[0] for o in opts]
    nbins = prod(small) // small[-1] * (small[-1] // 2 + 1)
    phases, tiles = prod(geom.strides), prod(o[2] for o in opts)
    kernel = phases * nbins * geom.c_in * (geom.c_out // geom.groups) * csize
    if len(opts[0]) > 3:   # overlap-save: one group's arrays at a time, the whole batch
        tiles = -(-tiles // opts[0][3]) / max(geom.batch, 1)
    work = int(tiles * nbins * csize * (geom.c_in + 2 * phases * geom.c_out))
    call = sum(f * c for f, c in zip(_features(geom, opts), rates))
    fuse = len(opts[0]) < 4   # overlap-save: the whole spectra (``_spectra``)
    spectra = sum(f * c for f, c in zip(spectrum_features(geom, small, fuse), rates))
    return kernel, work, call, spectra


def _rates(constants):
    c = BACKEND.constants if constants is None else constants
    if c is None:
        raise RuntimeError("the FFT backend has no cost constants (convt._dispatch sets "
                           "them at import): this is a bug in convt")
    return tuple(c[k] for k in _COST_UNITS)


def fft_layout(geom, compute_dtype, budget=None, pick=None, one_shot=False, constants=None):
    """The ``FftLayout`` of ``geom``: the cheapest tiling whose kernel spectrum fits half of
    ``budget`` (default ``FFT_MEMORY_BUDGET``), else the one with the smallest spectrum.
    Cheapest per call, or with ``one_shot`` per call plus its kernel spectra (a one-shot
    call computes them, so it prefers shorter transforms), by the cost model's
    ``constants`` (default: the dispatcher's, ``FftBackend.constants``).
    ``pick(options)`` may choose the per-axis (L, B, T) instead (to fit the cost model)."""
    budget = FFT_MEMORY_BUDGET if budget is None else budget
    rates = _rates(constants)
    save = FFT_OVERLAP_SAVE
    if pick is None:
        return _cheapest(geom, np.dtype(compute_dtype), budget, one_shot, rates, save)
    return _layout(geom, np.dtype(compute_dtype), budget, pick, one_shot, rates, save)


# Pure in its arguments (geometries are frozen): a one-shot call on a shape seen before
# skips the tiling search (~0.5 ms on 2-D layers).
@functools.lru_cache(maxsize=256)
def _cheapest(geom, compute_dtype, budget, one_shot, rates, save):
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
            kernel, _, cost, spectra = _estimate(geom, combo, csize, rates)
            over = kernel > budget // 2
            return (over, kernel if over else cost + (spectra if one_shot else 0.0))
        combo = min(itertools.product(*options), key=key)
    kernel, work, cost, spectra = _estimate(geom, combo, csize, rates)
    chunk = int(min(max(geom.batch, 1), max(1, (budget - kernel) // max(work, 1))))
    lo = tuple(r[0] for r in reach)
    return FftLayout(
        lo=lo, used=used, block=tuple(o[1] for o in combo), tiles=tuple(o[2] for o in combo),
        small=tuple(o[0] for o in combo),
        length=tuple(o[0] * s for o, s in zip(combo, geom.strides)),
        offset=tuple(pb - a * s for pb, a, s in zip(geom.pads_begin, lo, geom.strides)),
        chunk=chunk, kernel_bytes=kernel, work_bytes=work, cost=cost, spectra=spectra,
        save=-(-combo[0][2] // combo[0][3]) if len(combo[0]) > 3 else 0)


def fft_growth(geom, lay):
    """A bound on |every value run_fft makes| / (max|x| * max|w|): a tile's input spectrum
    is at most prod(block) * max|x| in modulus, a phase's kernel spectrum prod(Q) * max|w|
    (Q = ceil(E / s) taps per axis), a bin's contraction C_in / G times their product, and
    the inverse transform's sums prod(small) times that before its 1 / prod(small). The
    outputs and the overlap-add's sums (of at most C_in / G * prod(K) products) stay below.
    """
    taps = prod(-(-((k - 1) * d + 1) // s)
                for k, d, s in zip(geom.kernel, geom.dilations, geom.strides))
    return float(prod(lay.small)) * prod(lay.block) * taps * (geom.c_in // geom.groups)


def plan_fft(geom, plan):
    """The backend's ``prepare``: ("fft" or "fft-overlap-add", run_fft, state)."""
    ct = plan.compute_dtype
    lay = fft_layout(geom, ct, one_shot=plan.one_shot)
    live = lay.chunk > 0 and geom.batch > 0 and geom.c_in > 0 and geom.c_out > 0
    spec = _spectra(plan, geom, lay.small, not lay.save) if live else None
    variant = "fft-overlap-save" if lay.save else "fft-overlap-add" if lay.blocked else "fft"
    return variant, run_fft, (lay, spec)


class _Spectra:
    """A prepared operator's kernel spectra by transform lengths (the last few)."""

    def __init__(self):
        self.kept = {}
        self.lock = threading.Lock()

    def get(self, key, make):
        hit = self.kept.get(key)
        if hit is None:
            hit = make()
            with self.lock:
                if key not in self.kept and len(self.kept) >= _SPECTRA_KEPT:
                    self.kept.pop(next(iter(self.kept)), None)
                self.kept[key] = hit
        return hit


def _spectra(plan, geom, small, fuse=True):
    """Kernel spectra at lengths ``small``: computed for the call by a one-shot plan (short
    of axis 0 when ``fuse`` and ``fuses_lead``: every block group of an overlap-save call
    would redo that axis, so it gets them whole), kept by transform lengths (and the
    strides and dilations that shape them) by a prepared one."""
    ct = plan.compute_dtype

    def make(buffer=None, lead=True):
        return kernel_spectrum(plan.w_iox, geom, small, ct, plan.workers, buffer, lead)

    if plan.one_shot:
        def buffer(name, shape, dtype):
            return plan.workspace.buffer(name, prod(shape), dtype).reshape(shape)
        if fuse and fuses_lead(geom, small):
            return lead_spectra(plan.w_iox_compute, geom, small, ct, plan.workers, buffer)
        return make(buffer)
    store = plan.packed("fft-spectra", lambda p: _Spectra())
    return store.get((small, geom.strides, geom.dilations, np.dtype(ct).str), make)


def _tiles(xa, geom, lay, ct):
    """Input as (*B, G, N, *T, C_in/G) in ``ct``: spatial axes first, tiles as batch items."""
    nd, g = geom.ndim, geom.groups
    nxc = geom.data_format == "NXC"
    sp0 = 1 if nxc else 2
    crop = [slice(lo, lo + u) for lo, u in zip(lay.lo, lay.used)]
    x = xa[(slice(None),) * sp0 + tuple(crop)]
    padded = tuple(t * b for t, b in zip(lay.tiles, lay.block))
    if padded != lay.used:
        full = np.zeros(x.shape[:sp0] + padded + x.shape[sp0 + nd:], ct)
        full[(slice(None),) * sp0 + tuple(slice(0, u) for u in lay.used)] = x
        x = full
    split = [v for t, b in zip(lay.tiles, lay.block) for v in (t, b)]
    cg = geom.c_in // g
    if nxc:   # (N, T0, B0, ..., G, Cg)
        x = x.reshape(geom.batch, *split, g, cg)
        perm = (*range(2, 2 * nd + 1, 2), 2 * nd + 1, 0, *range(1, 2 * nd, 2), 2 * nd + 2)
    else:     # (N, G, Cg, T0, B0, ...)
        x = x.reshape(geom.batch, g, cg, *split)
        perm = (*range(4, 2 * nd + 3, 2), 1, 0, *range(3, 2 * nd + 3, 2), 2)
    return np.ascontiguousarray(x.transpose(perm), dtype=ct)


def split_spectrum(spec):
    """Kernel spectra (P, rows, Cg, Mg) complex -> (P, 2, rows, Cg, Mg) real (the real,
    then the imaginary parts: the layout the contraction reads)."""
    return np.ascontiguousarray(np.stack([spec.real, spec.imag], axis=1))


def _inverse(spec, geom, lay, workers):
    """Phase spectra (P, rows, items, Mg) -> tile frames (*N, G, nc, *T, Mg), phases
    interleaved: frame[q*s + r] = phase r's output at q."""
    nd, st = geom.ndim, geom.strides
    spec = spec.reshape(*st, *lay.bins, geom.groups, -1, *lay.tiles, spec.shape[-1])
    threads = fft_threads(spec.size // prod(lay.bins) * prod(lay.small), lay.small, workers)
    z = sfft.irfftn(spec, s=lay.small, axes=tuple(range(nd, 2 * nd)), workers=threads,
                    overwrite_x=True)
    if prod(st) == 1:
        return z.reshape(z.shape[nd:])
    z = z.transpose(*[v for a in range(nd) for v in (nd + a, a)], *range(2 * nd, z.ndim))
    return z.reshape(*lay.length, *z.shape[2 * nd:])


def _overlap_add(z, geom, lay, nc):
    """Tile outputs (*N, G, nc, *T, Mg) summed into one frame (*A, G, nc, Mg)."""
    nd, g, mg = geom.ndim, geom.groups, geom.c_out // geom.groups
    if not lay.blocked:
        return z.reshape(*lay.length, g, nc, mg)
    # T == 1: the whole N is one span; else tile t starts at t*B*s and spills q-1 spans on
    span = [n if t == 1 else b * s
            for n, t, b, s in zip(lay.length, lay.tiles, lay.block, geom.strides)]
    spill = [ceil(n / c) for n, c in zip(lay.length, span)]
    acc = np.zeros([v for t, q, c in zip(lay.tiles, spill, span) for v in (t + q - 1, c)]
                   + [g, nc, mg], z.dtype)
    perm = [v for a in range(nd) for v in (nd + 2 + a, a)] + [nd, nd + 1, 2 * nd + 2]
    for js in itertools.product(*map(range, spill)):
        cut = [slice(j * c, min((j + 1) * c, n)) for j, c, n in zip(js, span, lay.length)]
        src = z[tuple(cut)].transpose(perm)
        dst = [v for j, t, c in zip(js, lay.tiles, cut) for v in
               (slice(j, j + t), slice(0, c.stop - c.start))]
        acc[tuple(dst)] += src
    return acc.reshape(*[(t + q - 1) * c for t, q, c in zip(lay.tiles, spill, span)], g, nc, mg)


def _place(y, acc, geom, lay, n0, offset=None):
    """y[n0:n0+nc] += the output window of ``acc`` (*A, G, nc, Mg), in y's layout; output
    position 0 at ``offset`` in acc (default ``lay.offset``)."""
    nd, g, mg = geom.ndim, geom.groups, geom.c_out // geom.groups
    src, dst = [], []
    for off, o, a in zip(lay.offset if offset is None else offset, geom.out_shape, acc.shape):
        lo, hi = max(off, 0), min(off + o, a)
        src.append(slice(lo, max(hi, lo)))
        dst.append(slice(lo - off, max(hi, lo) - off))
    part = acc[tuple(src)]
    nc = acc.shape[nd + 1]
    if geom.data_format == "NXC":
        view = y.reshape(geom.batch, *geom.out_shape, g, mg)[(slice(n0, n0 + nc), *dst)]
        view += part.transpose(nd + 1, *range(nd), nd, nd + 2)
    else:
        view = y.reshape(geom.batch, g, mg, *geom.out_shape)[(slice(n0, n0 + nc),
                                                               slice(None), slice(None), *dst)]
        view += part.transpose(nd + 1, nd, nd + 2, *range(nd))


def run_fft(xa, state, geom, plan, out=None):
    """y in ``geom``'s layout and the compute dtype (``out`` when given: ``new_output``;
    ``state`` from ``plan_fft``)."""
    lay, wspec = state
    ct = plan.compute_dtype
    y = bias_filled(geom, plan.bias_compute, ct, out)
    if wspec is None or y.size == 0:
        return y
    if lay.save:
        return run_save(xa, wspec, geom, lay, y, ct, plan.workers,
                        lambda y, frame, off: _place(y, frame, geom, lay, 0, (off,)))
    xt = _tiles(xa, geom, lay, ct)
    nd = geom.ndim
    for n0 in range(0, geom.batch, lay.chunk):
        part = xt[(slice(None),) * (nd + 1) + (slice(n0, n0 + lay.chunk),)]
        threads = fft_threads(part.size // prod(lay.block) * prod(lay.small), lay.small,
                              plan.workers)
        spec = sfft.rfftn(part, s=lay.small, axes=tuple(range(nd)), workers=threads)
        z = _inverse(contract(spec, wspec, plan.workers), geom, lay, plan.workers)
        if nd == 2 and geom.data_format != "NXC" and prod(lay.tiles) <= _PLACE_TILES:
            place2(y, z, geom, lay, n0, plan.workers)
        elif lay.blocked and prod(lay.tiles) <= _PLACE_TILES:
            _place_tiles(y, z, geom, lay, n0)
        else:
            _place(y, _overlap_add(z, geom, lay, part.shape[nd + 1]), geom, lay, n0)
    return y


def _place_tiles(y, z, geom, lay, n0):
    """y[n0:n0+nc] += every tile frame of ``z`` (*N, G, nc, *T, Mg) at its own offset, in
    a fixed order (no overlap-add sum first)."""
    nd = geom.ndim
    for ts in itertools.product(*map(range, lay.tiles)):
        off = tuple(o - t * b * s for o, t, b, s in zip(lay.offset, ts, lay.block, geom.strides))
        _place(y, z[(slice(None),) * (nd + 2) + ts], geom, lay, n0, off)


@functools.lru_cache(maxsize=256)
def _layout_seconds(geom, compute_dtype, one_shot, rates):
    """(seconds per call, seconds of the kernel spectra) of the tiling ``fft_layout`` picks
    at ``rates``, or None when no input reaches the output. Cached (the tiling search
    dominates an estimate), so a changed ``FFT_MEMORY_BUDGET`` reaches only geometries not
    seen before."""
    lay = fft_layout(geom, compute_dtype, one_shot=one_shot,
                     constants=dict(zip(_COST_UNITS, rates)))
    if lay.chunk == 0:
        return None
    return lay.cost, lay.spectra


class FftBackend:
    """Products of scipy.fft spectra, per output phase (``convt._backends.base``)."""

    name = "fft"
    label = "FFT"
    # The cost model's constants (a dict with the ``_COST_UNITS`` keys, updated in place on
    # calibration); convt._dispatch.cost sets it to its own.
    constants = None

    def fixed_seconds(self, geom, c):
        """The per-call cost before any work (transform plans, Python)."""
        return c["call_s"] + c["fft_call_s"] + geom.ndim * c["fft_axis_call_s"]

    def estimate(self, geom, compute_dtype, workers, c, one_shot=False):
        """Seconds of a prepared call, or with ``one_shot`` of a one-shot call (its own
        tiling, plus its kernel spectra): ``estimate_parts``' sum."""
        return sum(self.estimate_parts(geom, compute_dtype, workers, c, one_shot))

    def estimate_parts(self, geom, compute_dtype, workers, c, one_shot=False):
        """(seconds of the call's own work, seconds of its kernel spectra and one-shot set-up
        (``fft_one_shot_axis_s`` per spatial axis): 0 for a prepared call, which has them)."""
        ct = np.dtype(compute_dtype)
        parts = _layout_seconds(geom, ct, one_shot, tuple(c[k] for k in _COST_UNITS))
        if parts is None:
            return self.fixed_seconds(geom, c), 0.0
        # fitted at 2 workers: rescaled to ``workers``
        scale = ((c["fft_f64"] if ct == np.float64 else 1.0) * parallel(2, c)
                 / parallel(workers, c))
        setup = scale * parts[1] + geom.ndim * c["fft_one_shot_axis_s"]
        return self.fixed_seconds(geom, c) + scale * parts[0], setup if one_shot else 0.0

    def describe(self, geom, compute_dtype, one_shot=False):
        """The tiling ``fft_layout`` picks, in words (for ``explain``)."""
        lay = fft_layout(geom, np.dtype(compute_dtype), one_shot=one_shot)
        if lay.chunk == 0:
            return "no input reaches the output"
        size = " x ".join(map(str, lay.small))
        if lay.save:
            return (f"overlap-save: {lay.tiles[0]} blocks of {size} in "
                    f"{-(-lay.tiles[0] // lay.save)} groups")
        tiles = " x ".join(map(str, lay.tiles))
        return f"overlap-add: {tiles} tiles of {size}" if lay.blocked else f"one {size}"

    def prepare(self, geom, plan):
        return plan_fft(geom, plan)

    def workspace_bytes(self, geom, compute_dtype):
        ct = np.dtype(compute_dtype)
        lay = fft_layout(geom, ct)
        n_in = geom.batch * geom.c_in * prod(geom.in_shape)
        return n_in * ct.itemsize + lay.kernel_bytes + lay.chunk * lay.work_bytes


BACKEND = FftBackend()
