"""Kernel spectra of the FFT backend: per output phase, the spectrum of the polyphase kernel.

The kernel holds Q = ceil(E/s) taps per axis and phase, far fewer than the transform length
L, so its spectrum is computed one axis at a time over the axes' own extents (pruned: no
transform ever runs over the zeros that pad the kernel to L). Along an axis with few taps the
transform is a small DFT matrix (L x Q, or (L/2 + 1) x Q on the real last axis) applied as one
GEMM to every line at once; along an axis with many taps, ``scipy.fft`` with ``n=L``. The
rule (``uses_dft``) and the measurements behind it: docs/fft.md, "Kernel spectra".

``spectrum_features`` counts the work in the units of the backend's cost model, so the
dispatcher prices a one-shot call (which computes its spectra) apart from a prepared one.
"""
from __future__ import annotations

import functools
from math import log2, prod

import numpy as np
import scipy.fft as sfft

from .blas import blas_threads
from .._kernels._fftmul import FFTROW_BLOCK, fft_pack_weights
from .fft_blocks import Lead, rfft_into, thread_pool

# Below this many multiply-adds a DFT GEMM runs on one thread: a shorter GEMM ends before a
# second thread, even from the persistent pool (fft_blocks.thread_pool), pays for itself
# (docs/performance.md, "Figures moved out of code comments").
_MIN_THREADED_MACS = 1 << 25
# Columns of b per GEMM of a large _matmul, whatever the thread count.
_MATMUL_COLUMNS = 4096

# Below this much transform work (samples x log2 of the transform length, per scipy.fft call)
# scipy.fft runs on one thread: starting its worker threads costs more than they save on a
# smaller transform. One bound per rank (1-D, more axes), set from a few 1- against 2-worker
# points (docs/performance.md, "Figures moved out of code comments").
_MIN_THREADED_FFT = (1 << 21, 1 << 21)

# Below this many multiply-adds (packed values x the last axis' taps) ``fft_pack_weights``
# runs on one thread: below it a thread team's start-up eats the gain
# (docs/performance.md, "Figures moved out of code comments").
_MIN_PACK_THREADED = 1 << 20

# fuses_lead's bounds: axis 0 goes into the contraction up to Q0 = this * log2(L0) taps, and
# only with at least _FUSE_MIN_COLUMNS weights a group (C_in/G x C_out/G): the fused DFT runs
# over blocks of 16 of them (_fftrow.h, CONVT_FFTROW_BLOCK), so a depthwise layer's one column
# pays for 16 (docs/fft.md, "Kernel spectra"; the other layers' one-shot calls fused and
# whole: docs/performance.md, "Figures moved out of code comments").
_FUSE_TAPS_LOG = 8
_FUSE_MIN_COLUMNS = 8

__all__ = ["dft_matrix", "fft_threads", "fuses_lead", "kernel_spectrum", "lead_dft",
           "lead_spectra", "packs_lead", "phase_taps", "spectrum_features", "uses_dft"]


def phase_taps(geom):
    """Taps per axis of each output phase's polyphase kernel: Q = ceil(E / s), E = (K - 1) d + 1
    the extent of the dilated kernel (``convt._backends.fft``'s module docstring)."""
    return tuple(-(-((k - 1) * d + 1) // s)
                 for k, d, s in zip(geom.kernel, geom.dilations, geom.strides))


def fft_threads(size, lengths, workers):
    """The ``workers`` a ``scipy.fft`` call over ``size`` samples transformed along axes of
    ``lengths`` gets: all of them for a large transform, one below ``_MIN_THREADED_FFT``
    (threads do not change its result: each 1-D transform is computed by one thread)."""
    work = size * log2(max(prod(lengths), 2))
    return workers if work >= _MIN_THREADED_FFT[len(lengths) > 1] else 1


def uses_dft(taps, length, last=False):
    """True when ``taps`` taps are transformed to ``length`` bins by a DFT matrix (a GEMM of
    ``taps`` complex multiply-adds per bin) rather than by ``scipy.fft``; ``last``: along the
    last (real) axis.

    A GEMM of depth Q against a transform of ~log2(L) passes, but ``scipy.fft`` along a
    strided axis of short lines pays per line, so the GEMM takes up to 4 log2(L) taps (a
    bound whole one-shot calls set lower than the GEMM alone would). The last axis' GEMM is
    real and half as long, and scipy.fft's path there needs a copy into the split layout: up
    to 8 log2(L). The figures: docs/fft.md, "Kernel spectra".
    """
    return taps <= (8 if last else 4) * log2(max(length, 2))


@functools.lru_cache(maxsize=64)
def dft_matrix(length, taps, dtype, half):
    """(bins, taps) DFT matrix e^(-2 pi i f k / L) in the complex dtype of real ``dtype``;
    ``half``: only the bins 0 .. L//2 (a real input's rfft). Built in float64 from f*k mod L
    (exact integers) so every entry is the correctly rounded root of unity; read-only."""
    bins = length // 2 + 1 if half else length
    fk = np.outer(np.arange(bins), np.arange(taps)) % length
    m = np.exp(-2j * np.pi * fk / length).astype(np.result_type(dtype, np.complex64))
    m.flags.writeable = False
    return m


@functools.lru_cache(maxsize=64)
def _real_dft(length, taps, dtype):
    """(2, bins, taps) real: the real and imaginary parts of the half DFT matrix."""
    m = dft_matrix(length, taps, dtype, True)
    out = np.ascontiguousarray(np.stack([m.real, m.imag]), dtype=dtype)
    out.flags.writeable = False
    return out


def _polyphase(w_iox, geom, taps, ct, buffer=None, length=None):
    """Kernel as (P, *Q, G * C_in/G * C_out/G) real in ``ct``: per phase r (of prod(strides))
    the polyphase component h_r[q] = wd[q*s + r] of the zero-inserted (dilated) kernel.

    ``length``: the last Q axis zero-padded to that transform length (the rows past Q
    zero), as ``scipy.fft.rfft(n=length)`` would pad it. ``buffer(name, shape, dtype)``
    gives the arrays (a one-shot call's workspace; default new ones)."""
    buffer = _new if buffer is None else buffer
    g, nd, st = geom.groups, geom.ndim, geom.strides
    c_in, mg = w_iox.shape[:2]
    rows = tuple(taps[:-1]) + ((taps[-1] if length is None else length),)
    out = buffer("fft-poly", (prod(st), *rows, g * (c_in // g) * mg), ct)
    if length is not None:
        out[..., taps[-1]:, :] = 0
    body = out[..., :taps[-1], :]
    if all(v == 1 for v in st + geom.dilations):   # one phase, no zeros: one transposing copy
        wt = w_iox.reshape(c_in * mg, prod(geom.kernel)).T
        np.copyto(body, wt.reshape(1, *taps, -1), casting="unsafe")
        return out
    wd = buffer("fft-poly-z", (*[q * s for q, s in zip(taps, st)], g, c_in // g, mg), ct)
    wd.fill(0)
    wg = w_iox.reshape(g, c_in // g, mg, *geom.kernel)
    wd[tuple(slice(0, (k - 1) * d + 1, d) for k, d in zip(geom.kernel, geom.dilations))] = \
        wg.transpose(*range(3, 3 + nd), 0, 1, 2)
    wd = wd.reshape(*[v for q, s in zip(taps, st) for v in (q, s)], g * (c_in // g) * mg)
    wd = wd.transpose(*range(1, 2 * nd, 2), *range(0, 2 * nd, 2), 2 * nd)
    np.copyto(body, wd.reshape(prod(st), *taps, -1))
    return out


def _new(name, shape, dtype):
    return np.empty(shape, dtype)


@functools.lru_cache(maxsize=64)
def _split_dft(length, taps, dtype):
    """(2L, 2Q) real [[Re F, -Im F], [Im F, Re F]]: applied to the real parts stacked on
    the imaginary parts of Q complex taps, it gives those of the L complex bins."""
    f = dft_matrix(length, taps, dtype, False)
    out = np.ascontiguousarray(np.block([[f.real, -f.imag], [f.imag, f.real]]), dtype=dtype)
    out.flags.writeable = False
    return out


def _split(c, out):
    """Complex (P, ...) -> real (P, 2, ...) in ``out``: real parts, then imaginary parts."""
    np.copyto(out[:, 0], c.real)
    np.copyto(out[:, 1], c.imag)
    return out


def _last_axis(wd, length, ct, workers, buffer, rfft):
    """Real (P, *Q, R) -> split (P, 2, *Q[:-1], L//2 + 1, R) along the last of the Q axes.
    ``rfft``: by ``scipy.fft`` (wd comes zero-padded to ``length``), else by a DFT matrix;
    ``kernel_spectrum`` decides it once (``uses_dft``)."""
    if rfft:
        threads = fft_threads(wd.size, (length,), workers)
        bins = length // 2 + 1
        cplx = np.promote_types(ct, np.complex64)
        spec = buffer("fft-rspec", wd.shape[:-2] + (bins, wd.shape[-1]), cplx)
        rfft_into(wd, (wd.ndim - 2,), spec, threads)
        return _split(spec, buffer("fft-split", (wd.shape[0], 2) + spec.shape[1:], ct))
    q = wd.shape[-2]
    f = _real_dft(length, q, np.dtype(ct))
    bins = f.shape[1]
    parts = _matmul(f.reshape(2 * bins, q), wd, workers,   # (P, ..., 2 * bins, R)
                    buffer("fft-dft-a", wd.shape[:-2] + (2 * bins, wd.shape[-1]), ct))
    parts = parts.reshape(wd.shape[:-2] + (2, bins, wd.shape[-1]))
    return np.moveaxis(parts, -3, 1)   # a view: the next axis' copy, or the contraction, reads it


def _lead_axis(spec, axis, length, workers, buffer, name):
    """Split ``spec`` (P, 2, ...) transformed to ``length`` along ``axis`` (its Q taps;
    ``axis`` counts the axes after P and the split one). With a DFT matrix, one real GEMM
    per phase (``_split_dft``) over every line at once, straight from and into the split
    layout; for the last such axis (``axis`` 0, the largest) with no copy at all."""
    q = spec.shape[2 + axis]
    if not uses_dft(q, length):
        c = spec[:, 0] + 1j * spec[:, 1]
        threads = fft_threads(c.size // q * length, (length,), workers)
        c = sfft.fft(c, n=length, axis=1 + axis, workers=threads, overwrite_x=True)
        return _split(c, buffer(name, (c.shape[0], 2) + c.shape[1:], spec.dtype))
    m = _split_dft(length, q, spec.dtype)
    x = np.ascontiguousarray(np.moveaxis(spec, 1, 1 + axis))     # (P, ..., 2, Q, rest)
    head, tail = x.shape[:1 + axis], x.shape[3 + axis:]
    out = buffer(name, (prod(head), 2 * length, prod(tail)), spec.dtype)
    _matmul(m, x.reshape(prod(head), 2 * q, -1), workers, out)
    out = out.reshape(*head, 2, length, *tail)
    return np.ascontiguousarray(np.moveaxis(out, 1 + axis, 1))


def kernel_spectrum(w_iox, geom, small, ct, workers, buffer=None, lead=True):
    """(P, 2, prod(bins) * G, C_in/G, C_out/G) real, P = prod(strides): per output phase r,
    the real then the imaginary parts of the spectrum at the transform lengths ``small`` of
    the polyphase component h_r[q] = wd[q*s + r] of the kernel (bins: ``small`` with the
    last axis halved, rfft). This split layout is what the compiled contraction reads.

    One axis at a time, last first, each over the Q-long extents of the axes not yet
    transformed; a DFT matrix or ``scipy.fft`` per axis (``uses_dft``). ``buffer(name,
    shape, dtype)`` gives the arrays the DFT GEMMs write (a one-shot call's workspace,
    whose pages are already mapped: fresh ones cost page faults every call); default new
    arrays. The spectra may be such a buffer.

    ``lead=False`` stops before axis 0 (``lead_partial``): (P, parts, Q0, rows / L0-bins,
    C_in/G * C_out/G), transformed along every other axis, for ``fft_contract_dft``, which
    applies axis 0's DFT row by row inside the contraction; parts 2 (split), or 1 in 1-D
    (the real kernel: axis 0 is the rfft axis).
    """
    buffer = _new if buffer is None else buffer
    g, nd = geom.groups, geom.ndim
    c_in, mg = w_iox.shape[:2]
    taps = phase_taps(geom)
    rfft = (lead or nd > 1) and not uses_dft(taps[-1], small[-1], last=True)
    spec = _polyphase(w_iox, geom, taps, ct, buffer, small[-1] if rfft else None)
    if not lead and nd == 1:
        return spec.reshape(prod(geom.strides), 1, taps[0], g, -1)
    spec = _last_axis(spec, small[-1], ct, workers, buffer, rfft)
    for a in reversed(range(nd - 1) if lead else range(1, nd - 1)):
        name = "fft-dft-b" if (nd - 2 - a) % 2 == 0 else "fft-dft-a"   # never its input
        spec = _lead_axis(spec, a, small[a], workers, buffer, name)
    if not lead:   # a strided view in 2-D (fft_contract_dft reads it as it is)
        return spec.reshape(prod(geom.strides), 2, taps[0], -1, (c_in // g) * mg)
    return spec.reshape(prod(geom.strides), 2, -1, c_in // g, mg)


def _taps(geom, a, p):
    """Kernel index of each polyphase tap q of phase ``p``'s axis ``a`` (-1: a zero tap):
    h_r[q] = wd[q*s + r], wd the kernel with d - 1 zeros between taps."""
    s, d, k = geom.strides[a], geom.dilations[a], geom.kernel[a]
    e = np.arange(phase_taps(geom)[a]) * s + p
    return np.where((e % d == 0) & (e // d < k), e // d, -1)


def lead_spectra(w_iox, geom, small, ct, workers, buffer=None):
    """A one-shot call's kernel spectra short of axis 0 (``fuses_lead``), as a ``Lead``:
    in 1-D and 2-D packed straight from the weights by one compiled pass
    (``fft_pack_weights``: the last axis' DFT, the centred sums, the contraction's packed
    rows; no polyphase copy, no GEMM, no pack); in 3-D ``kernel_spectrum(lead=False)``."""
    buffer = _new if buffer is None else buffer
    tables = _pack_tables(geom, small, np.dtype(ct))
    if tables is None:
        partial = kernel_spectrum(w_iox, geom, small, ct, workers, buffer, lead=False)
        return Lead(lead_dft(small[0], phase_taps(geom)[0], ct), small[0], partial=partial)
    dft, taps0, taps1, f, shape = tables
    packed = buffer("fft-packed", shape, ct)
    w = np.ascontiguousarray(w_iox, dtype=ct).reshape(geom.c_in * w_iox.shape[1], -1)
    threads = workers if packed.size * taps1.shape[1] >= _MIN_PACK_THREADED else 1
    fft_pack_weights(w, taps0, taps1, f, packed, geom.groups, geom.ndim == 2, threads)
    return Lead(dft, small[0], packed=packed, rows=f.shape[1] * geom.groups,
                mg=w_iox.shape[1], cplx=geom.ndim == 2, phase=f, groups=geom.groups)


@functools.lru_cache(maxsize=64)
def _pack_tables(geom, small, ct):
    """(axis 0's ``lead_dft``, taps0, taps1, the last axis' half DFT, the packed shape) of
    ``fft_pack_weights`` for ``geom`` at lengths ``small``, or None when it does not apply
    (3-D, or a last axis by scipy.fft): per phase the kernel offsets of axis 0's centred tap
    rows c + t and c - t and of the last axis' taps (-1: a zero tap). Read-only."""
    if not packs_lead(geom, small):
        return None
    nd, taps = geom.ndim, phase_taps(geom)
    terms = taps[0] // 2 + 1
    c, row = terms - 1, prod(geom.kernel[1:])
    phases = list(np.ndindex(*geom.strides))
    taps0 = np.full((len(phases), 2, terms), -1, np.int64)
    taps1 = np.zeros((len(phases), taps[-1] if nd == 2 else 1), np.int64)
    for i, r in enumerate(phases):
        k0 = _taps(geom, 0, r[0])
        for t in range(terms):
            if c + t < taps[0] and k0[c + t] >= 0:
                taps0[i, 0, t] = k0[c + t] * row
            if t > 0 and k0[c - t] >= 0:
                taps0[i, 1, t] = k0[c - t] * row
        if nd == 2:
            taps1[i] = _taps(geom, 1, r[1])
    if nd == 2:
        f = lead_dft(small[1], taps[1], ct)    # the last axis' taps centred too
    else:
        f = np.zeros((2, 1, 1), ct)
    n = (geom.c_in // geom.groups) * (geom.c_out // geom.groups)
    prow = -(-n // FFTROW_BLOCK) * terms * (4 if nd == 2 else 2) * FFTROW_BLOCK
    for a in (taps0, taps1, f):
        a.flags.writeable = False
    return (lead_dft(small[0], taps[0], ct), taps0, taps1, f,
            (len(phases) * f.shape[1] * geom.groups, prow))


def packs_lead(geom, small):
    """True when ``lead_spectra`` packs a fused call's spectra straight from the weights
    (``fft_pack_weights``): 1-D, or 2-D with the last axis by a DFT matrix (``uses_dft``)."""
    return geom.ndim == 1 or (geom.ndim == 2 and uses_dft(phase_taps(geom)[1], small[1],
                                                          last=True))


def fuses_lead(geom, small):
    """True when a one-shot call leaves axis 0's transform of its kernel spectra to the
    contraction (``fft_contract_dft``): when that axis takes a DFT matrix (``uses_dft``) and
    a group has at least ``_FUSE_MIN_COLUMNS`` weights."""
    q = phase_taps(geom)[0]
    columns = (geom.c_in // geom.groups) * (geom.c_out // geom.groups)
    return columns >= _FUSE_MIN_COLUMNS and q <= _FUSE_TAPS_LOG * log2(max(small[0], 2))


@functools.lru_cache(maxsize=64)
def lead_dft(length, taps, dtype):
    """(2, L0 // 2 + 1, Q0 // 2 + 1) real: cos and sin of 2 pi f t / L0 for the rows
    f <= L0 // 2 and the centred tap offsets t (``fft_contract_dft``, whose ``_fftrow.h``
    derives the rest by symmetry). From f*t mod L0 in exact integers, in float64, then
    rounded once to ``dtype``; read-only."""
    ft = np.outer(np.arange(length // 2 + 1), np.arange(taps // 2 + 1)) % length
    ang = 2 * np.pi * ft / length
    out = np.ascontiguousarray(np.stack([np.cos(ang), np.sin(ang)]), dtype=dtype)
    out.flags.writeable = False
    return out


def _matmul(a, b, workers, out):
    """a @ b (b batched, (..., Q, R)) into ``out``, with one BLAS thread. A large product
    runs as one GEMM per block of _MATMUL_COLUMNS columns of b (the last a shorter one), the
    blocks shared by ``workers`` threads: NumPy's own BLAS threads spin between calls and, on
    a machine where another process holds a core, make these GEMMs and the next ``scipy.fft``
    call several times slower (docs/fft.md, "Kernel spectra"). The blocks do not depend on
    ``workers``, so neither do the bits: OpenBLAS rounds a column by where it falls in the
    GEMM's column blocks (a GEMM of 20460 columns gave other float64 bits than the same
    columns in one of 40920)."""
    cols = b.shape[-1]
    if cols <= _MATMUL_COLUMNS or out.size * a.shape[1] < _MIN_THREADED_MACS:
        with blas_threads(1, "numpy"):
            np.matmul(a, b, out=out)
        return out
    cuts = list(range(0, cols, _MATMUL_COLUMNS)) + [cols]
    blocks = list(zip(cuts[:-1], cuts[1:]))
    threads = max(1, min(workers, len(blocks)))
    shares = [blocks[len(blocks) * i // threads:len(blocks) * (i + 1) // threads]
              for i in range(threads)]

    def run(share):
        for lo, hi in share:
            np.matmul(a, b[..., lo:hi], out=out[..., lo:hi])

    with blas_threads(1, "numpy"):
        pool = thread_pool(threads - 1) if threads > 1 else None
        jobs = [pool.submit(run, share) for share in shares[1:]]
        run(shares[0])
        for job in jobs:
            job.result()
    return out


def spectrum_features(geom, small, fuse=True):
    """Work of a one-shot call's kernel spectra at lengths ``small``, in the units of the cost
    model's features (transform samples x log2 length, complex multiply-adds, values
    copied, 1-D transforms started); a GEMM's multiply-adds are counted at half those of the
    per-bin contraction's tiny matrices (a DFT matrix is one well-shaped GEMM). When axis 0
    is left to the contraction (``fuses_lead``), its DFT counts a quarter multiply-add per
    bin, weight and centred tap (``fft_contract_dft``: two real multiply-adds per bin and
    term, in cache: about twice the contraction's rate per multiply-add, docs/fft.md,
    "Kernel spectra");
    ``fuse=False``: the spectra are made whole (an overlap-save call's)."""
    nd = geom.ndim
    taps = phase_taps(geom)
    cols = prod(geom.strides) * geom.c_in * (geom.c_out // geom.groups)
    fused = fuse and fuses_lead(geom, small)
    if fused and packs_lead(geom, small):
        # ``lead_spectra``'s packed pass: per weight, axis 0's Q0 // 2 + 1 centred terms
        # (even and odd) of the last axis' half DFT over its Q1 // 2 + 1 centred taps,
        # written once; no polyphase copy. Its axis-0 DFT stays in the contraction.
        terms, bins = taps[0] // 2 + 1, (small[1] // 2 + 1 if nd == 2 else 1)
        cmacs = cols * terms * bins * (taps[1] // 2 + 1) * 0.25 if nd == 2 else 0.0
        cmacs += cols * bins * small[0] * terms * 0.25    # the fused axis-0 DFT
        return 0.0, cmacs, float(cols * terms * bins * 2), 0.0
    dims = list(taps)
    samples = cmacs = transforms = 0.0
    copies = float(cols * prod(taps))                      # the polyphase kernel
    for a in reversed(range(nd)):
        n = small[a] // 2 + 1 if a == nd - 1 else small[a]
        lines = cols * prod(dims) // dims[a]
        if a == 0 and fused:
            cmacs += lines * n * (taps[0] // 2 + 1) * 0.25
            break
        if uses_dft(taps[a], small[a], last=a == nd - 1):
            cmacs += lines * n * taps[a] * (0.25 if a == nd - 1 else 0.5)
        else:
            samples += lines * small[a] * log2(max(small[a], 2))
            transforms += lines
        dims[a] = n
        copies += cols * prod(dims)
    return samples, cmacs, copies, transforms
