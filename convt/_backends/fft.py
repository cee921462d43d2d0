"""The FFT backend (``method="fft"``): transposed convolution as a product of spectra.

Per axis (stride s, dilation d, kernel K, extent E = (K-1)*d + 1) the full output is
full[t] = sum_i x[i] wd[t - i*s], wd the kernel zero-inserted by d. Output phase r (t = q*s + r)
is a stride-1 convolution: full[q*s + r] = sum_i x[i] h_r[q - i] with the polyphase component
h_r[q] = wd[q*s + r] (Q = ceil(E/s) taps). So every phase shares the input spectrum at one
length L >= I + Q - 1 (one rfftn of the small input), each phase has its own kernel spectrum,
and the phases interleave into a frame of length N = L*s. This per-phase form does the GEMM
work of tiling the spectrum of the zero-upsampled input without materialising the tiled
spectrum or the last axis' full complex spectrum (docs/fft.md, "Algorithm", compares them).
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
complex128. The error is normwise (relative to the largest |output|; docs/fft.md, "Precision"),
not elementwise: small outputs next to large ones lose relative accuracy.
"""
from __future__ import annotations

import itertools
import threading
from math import ceil, prod

import numpy as np

from .direct.pixel import bias_filled
from .fft_blocks import contract, irfft_into, place2, rfft_into, run_save
from .fft_cost import PLACE_TILES as _PLACE_TILES, FftLayout, layout, places2, unit_rates
from .fft_cost import estimate_parts as _cost_parts, fixed_seconds as _fixed_seconds
from .fft_spectra import fft_threads, fuses_lead, kernel_spectrum, lead_spectra, phase_taps

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

# Kernel spectra kept per prepared operator, keyed by transform lengths (a new batch size or
# an input shape with the same lengths reuses them); the oldest goes first.
_SPECTRA_KEPT = 4


def fft_layout(geom, compute_dtype, budget=None, pick=None, one_shot=False, constants=None):
    """The ``FftLayout`` of ``geom``: the cheapest tiling whose kernel spectrum fits half of
    ``budget`` (default ``FFT_MEMORY_BUDGET``), else the one with the smallest spectrum.
    Cheapest per call, or with ``one_shot`` per call plus its kernel spectra (a one-shot
    call computes them, so it prefers shorter transforms), by the cost model's
    ``constants`` (default: the dispatcher's, ``FftBackend.constants``;
    ``convt._backends.fft_cost``). ``pick(options)`` may choose the per-axis (L, B, T)
    instead (to fit the cost model)."""
    budget = FFT_MEMORY_BUDGET if budget is None else budget
    rates = unit_rates(BACKEND.constants if constants is None else constants)
    return layout(geom, compute_dtype, budget, one_shot, rates, FFT_OVERLAP_SAVE, pick)


def fft_growth(geom, lay):
    """A bound on |every value run_fft makes| / (max|x| * max|w|): a tile's input spectrum
    is at most prod(block) * max|x| in modulus, a phase's kernel spectrum prod(Q) * max|w|
    (Q = ceil(E / s) taps per axis), a bin's contraction C_in / G times their product, and
    the inverse transform's sums prod(small) times that before its 1 / prod(small). The
    outputs and the overlap-add's sums (of at most C_in / G * prod(K) products) stay below.
    """
    taps = prod(phase_taps(geom))
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


def _tiles(xa, geom, lay, ct, n0, nc, arena):
    """Batch elements n0 .. n0 + nc of the input as (*L, G, nc, *T, C_in/G) in ``ct``:
    spatial axes first, tiles as batch items, each tile's B samples per axis zero-padded to
    the transform length L (what ``scipy.fft.rfftn(s=L)`` would pad), in ``arena``'s kept
    buffer: only the B-sample corner is written, its zeros stay from call to call."""
    nd, g = geom.ndim, geom.groups
    nxc = geom.data_format == "NXC"
    sp0 = 1 if nxc else 2
    crop = [slice(lo, lo + u) for lo, u in zip(lay.lo, lay.used)]
    x = xa[(slice(n0, n0 + nc),) + (slice(None),) * (sp0 - 1) + tuple(crop)]
    padded = tuple(t * b for t, b in zip(lay.tiles, lay.block))
    if padded != lay.used:
        full = arena.get("fft-pad", x.shape[:sp0] + padded + x.shape[sp0 + nd:], ct,
                         zero_key=("fft-pad", lay.used))   # zero beyond what is written
        full[(slice(None),) * sp0 + tuple(slice(0, u) for u in lay.used)] = x
        x = full
    split = [v for t, b in zip(lay.tiles, lay.block) for v in (t, b)]
    cg = geom.c_in // g
    if nxc:   # (N, T0, B0, ..., G, Cg)
        x = x.reshape(nc, *split, g, cg)
        perm = (*range(2, 2 * nd + 1, 2), 2 * nd + 1, 0, *range(1, 2 * nd, 2), 2 * nd + 2)
    else:     # (N, G, Cg, T0, B0, ...)
        x = x.reshape(nc, g, cg, *split)
        perm = (*range(4, 2 * nd + 3, 2), 1, 0, *range(3, 2 * nd + 3, 2), 2)
    name = "fft-tiles" if nc == lay.chunk else "fft-tiles-last"
    buf = arena.get(name, (*lay.small, g, nc, *lay.tiles, cg), ct, zero_key=(name, lay.block))
    buf[tuple(slice(0, b) for b in lay.block)] = x.transpose(perm)
    return buf


def split_spectrum(spec):
    """Kernel spectra (P, rows, Cg, Mg) complex -> (P, 2, rows, Cg, Mg) real (the real,
    then the imaginary parts: the layout the contraction reads)."""
    return np.ascontiguousarray(np.stack([spec.real, spec.imag], axis=1))


def _inverse(spec, geom, lay, workers, arena):
    """Phase spectra (P, rows, items, Mg) -> tile frames (*N, G, nc, *T, Mg), phases
    interleaved: frame[q*s + r] = phase r's output at q (``arena``'s buffers; ``spec`` is
    overwritten)."""
    nd, st = geom.ndim, geom.strides
    spec = spec.reshape(*st, *lay.bins, geom.groups, -1, *lay.tiles, spec.shape[-1])
    threads = fft_threads(spec.size // prod(lay.bins) * prod(lay.small), lay.small, workers)
    rest = spec.shape[2 * nd:]
    frames = arena.get("fft-frames", (*lay.length, *rest), spec.real.dtype)
    # the inverse writes each phase straight to its interleaved positions (a strided view)
    inter = frames.reshape(*[v for q, s in zip(lay.small, st) for v in (q, s)], *rest)
    view = inter.transpose(*range(1, 2 * nd, 2), *range(0, 2 * nd, 2),
                           *range(2 * nd, inter.ndim))
    irfft_into(spec, range(nd, 2 * nd), lay.small, view, threads)
    return frames


def _overlap_add(z, geom, lay, nc, arena=None):
    """Tile outputs (*N, G, nc, *T, Mg) summed into one frame (*A, G, nc, Mg) (``arena``'s
    buffer, default a new array)."""
    nd, g, mg = geom.ndim, geom.groups, geom.c_out // geom.groups
    if not lay.blocked:
        return z.reshape(*lay.length, g, nc, mg)
    # T == 1: the whole N is one span; else tile t starts at t*B*s and spills q-1 spans on
    span = [n if t == 1 else b * s
            for n, t, b, s in zip(lay.length, lay.tiles, lay.block, geom.strides)]
    spill = [ceil(n / c) for n, c in zip(lay.length, span)]
    shape = [v for t, q, c in zip(lay.tiles, spill, span) for v in (t + q - 1, c)] + [g, nc, mg]
    acc = np.empty(shape, z.dtype) if arena is None else arena.get("fft-acc", shape, z.dtype)
    acc.fill(0)
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
    ``state`` from ``plan_fft``). The working arrays (input tiles, spectra, their products,
    output frames) are the plan's workspace's, kept from call to call (a call that finds it
    busy, another thread inside the same operator, gets its own: ``Workspace.borrow``)."""
    lay, wspec = state
    ct = plan.compute_dtype
    y = bias_filled(geom, plan.bias_compute, ct, out)
    if wspec is None or y.size == 0:
        return y
    with plan.workspace.borrow() as arena:
        if lay.save:
            return run_save(xa, wspec, geom, lay, y, ct, plan.workers,
                            lambda y, frame, off: _place(y, frame, geom, lay, 0, (off,)),
                            arena)
        _run_chunks(xa, wspec, geom, lay, plan, y, arena)
    return y


def _run_chunks(xa, wspec, geom, lay, plan, y, arena):
    """``run_fft``'s tiled path, a chunk of batch elements at a time, into ``y``."""
    ct, nd = plan.compute_dtype, geom.ndim
    cplx = np.result_type(ct, np.complex64)
    for n0 in range(0, geom.batch, lay.chunk):
        nc = min(lay.chunk, geom.batch - n0)
        part = _tiles(xa, geom, lay, ct, n0, nc, arena)
        threads = fft_threads(part.size, lay.small, plan.workers)
        spec = rfft_into(part, range(nd), arena.get("fft-spec", (*lay.bins, *part.shape[nd:]),
                                                     cplx), threads)
        prods = contract(spec, wspec, plan.workers,
                         lambda shape, dtype: arena.get("fft-prod", shape, dtype))
        z = _inverse(prods, geom, lay, plan.workers, arena)
        if places2(geom, lay.tiles):
            place2(y, z, geom, lay, n0, plan.workers)
        elif lay.blocked and prod(lay.tiles) <= _PLACE_TILES:
            _place_tiles(y, z, geom, lay, n0)
        else:
            _place(y, _overlap_add(z, geom, lay, nc, arena), geom, lay, n0)


def _place_tiles(y, z, geom, lay, n0):
    """y[n0:n0+nc] += every tile frame of ``z`` (*N, G, nc, *T, Mg) at its own offset, in
    a fixed order (no overlap-add sum first)."""
    nd = geom.ndim
    for ts in itertools.product(*map(range, lay.tiles)):
        off = tuple(o - t * b * s for o, t, b, s in zip(lay.offset, ts, lay.block, geom.strides))
        _place(y, z[(slice(None),) * (nd + 2) + ts], geom, lay, n0, off)


class FftBackend:
    """Products of scipy.fft spectra, per output phase (``convt._backends.base``)."""

    name = "fft"
    label = "FFT"
    # The cost model's constants (a dict with the ``_COST_UNITS`` keys, updated in place on
    # calibration); convt._dispatch.cost sets it to its own.
    constants = None

    def fixed_seconds(self, geom, c):
        """The per-call cost before any work (transform plans, Python)."""
        return _fixed_seconds(geom, c)

    def estimate(self, geom, compute_dtype, workers, c, one_shot=False):
        """Seconds of a prepared call, or with ``one_shot`` of a one-shot call (its own
        tiling, plus its kernel spectra): ``estimate_parts``' sum."""
        return sum(self.estimate_parts(geom, compute_dtype, workers, c, one_shot))

    def estimate_parts(self, geom, compute_dtype, workers, c, one_shot=False):
        """(seconds of the call's own work, seconds of its kernel spectra and one-shot set-up:
        0 for a prepared call, which has them): ``convt._backends.fft_cost.estimate_parts``
        at the budget and overlap-save setting in force."""
        return _cost_parts(geom, compute_dtype, workers, c, one_shot, FFT_MEMORY_BUDGET,
                           FFT_OVERLAP_SAVE)

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
