"""The FFT backend's per-bin contraction, overlap-save in cache-sized groups of blocks, and
the compiled placement of 2-D tile frames (``place2``).

``contract``: per phase, bin and group, (items, C_in/G) @ (C_in/G, C_out/G) complex, by the
compiled loop of ``convt._kernels._fftmul`` (a prepared operator's stored kernel spectra, or a
one-shot call's ``Lead``, whose axis-0 DFT the loop finishes row by row).

``run_save``: a long 1-D signal as overlap-save blocks. Per phase r the output is a stride-1
convolution, full[q*s + r] = sum_i x[i] h_r[q - i] (``convt._backends.fft``), Q taps. Block j
covers q in [q0 + j*B, q0 + (j+1)*B): the L = B + Q - 1 inputs x[q0 + j*B - Q + 1 ...]
transformed at L, multiplied, inverted; the circular sums at m >= Q - 1 are the linear ones
(no wrap), so the block's last B values per phase are final. The phases interleave into the
frame positions [(q0 + j*B)*s, (q0 + (j+1)*B)*s), which no other block touches: no
overlap-add sum, and each block group writes its own part of y. Blocks run in groups whose
working arrays fit ``SAVE_CACHE`` bytes (next to the kernel spectra, which every group reads),
transform, contraction and inverse one group at a time, so the spectra stay in cache; the
groups are shared among ``workers`` threads (scipy.fft and the contraction release the GIL),
each group computed by one thread the same way whatever the count: the bits do not depend
on ``workers``.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.fft as sfft
from numpy.lib.stride_tricks import as_strided

from .._kernels._fftmul import fft_contract, fft_contract_dft, fft_contract_packed, fft_place2

try:   # scipy.fft's own transforms, which take an ``out`` array (rfft_into, irfft_into)
    from scipy.fft._pocketfft import pypocketfft as _pfft
except ImportError:   # pragma: no cover - another scipy layout: scipy.fft's arrays, copied
    _pfft = None

__all__ = ["Lead", "SAVE_CACHE", "contract", "irfft_into", "place2", "rfft_into", "run_save",
           "save_groups", "save_options", "thread_pool"]

# Below this many complex multiply-adds per call the per-bin contraction runs on one thread:
# an OpenMP team's start-up costs more than it saves (docs/performance.md, "Figures moved
# out of code comments (2026-11-28, session 10)").
_MIN_THREADED_CMACS = 1 << 18
# Bytes of a block group's working arrays (input and output spectra, output frames): about
# half of a Zen 4 core's 1 MiB L2, so the group's arrays and part of the kernel spectra stay
# there from the transform to the inverse.
SAVE_CACHE = 1 << 19
# Below this many outputs the compiled placement (``place2``) runs on one thread.
_MIN_PLACE_THREADED = 1 << 15

_POOL = [None]
_POOL_LOCK = threading.Lock()


def _forget_pool():
    _POOL[0] = None   # a forked child has none of the parent's threads


os.register_at_fork(after_in_child=_forget_pool)


def thread_pool(threads):
    """A process-wide pool of at least ``threads`` threads (made once: a new pool per call
    costs more than a small call's work: docs/performance.md, "Figures moved out of code
    comments", ``_MIN_THREADED_MACS``)."""
    with _POOL_LOCK:
        if _POOL[0] is None or _POOL[0]._max_workers < threads:
            _POOL[0] = ThreadPoolExecutor(threads, thread_name_prefix="convt-fft")
        return _POOL[0]


@dataclass(frozen=True)
class Lead:
    """A one-shot call's kernel spectra short of axis 0's transform, which the contraction
    applies row by row: ``dft`` (2, L0 // 2 + 1, Q0 // 2 + 1), the cos and sin table of
    ``lead_dft``; ``length`` L0; then either ``partial`` (P, parts, Q0, rows / L0-bins,
    Cg * Mg), a strided view (``fft_contract_dft`` packs it), or ``packed`` (P * ``rows``,
    prow), already in the packed rows ``fft_contract_packed`` reads (``fft_pack_weights``),
    with ``mg`` = C_out/G and ``cplx`` (A split complex; False: real, 1-D)."""

    dft: np.ndarray
    length: int
    partial: np.ndarray = None
    packed: np.ndarray = None
    rows: int = 0
    mg: int = 0
    cplx: bool = True
    phase: np.ndarray = None   # the last axis' lead_dft table (fft_contract_packed)
    groups: int = 1


def rfft_into(x, axes, out, threads):
    """``scipy.fft.rfftn(x, axes=axes, workers=threads)`` written into ``out`` (x already at
    the transform lengths: no padding): the same pocketfft call scipy.fft makes
    (``scipy.fft._pocketfft.basic.r2cn``), with our array for its result, so the call maps no
    new pages (a fresh result pays a page fault per 4 KiB: docs/performance.md, "Figures
    moved out of code comments")."""
    if _pfft is None:   # pragma: no cover
        out[...] = sfft.rfftn(x, axes=axes, workers=threads)
        return out
    return _pfft.r2c(x, tuple(axes), True, 0, out, threads)


def _inverse_norm(dtype, n):
    """pocketfft's backward factor, computed as it does (``norm_fct``: T(1 / (long double)N))."""
    return dtype.type(np.longdouble(1) / np.longdouble(n))


def irfft_into(spec, axes, lengths, out, threads):
    """``scipy.fft.irfftn(spec, s=lengths, axes=axes, workers=threads)`` into ``out``, the
    last of ``axes`` the real one, overwriting ``spec`` (which must hold exactly the bins).
    pocketfft's c2r over several axes runs c2c over the leading ones into a temporary the
    size of ``spec``, then c2r over the last with the 1/N factor applied last (pocketfft_hdronly
    ``c2r``, ``rfftp::copy_and_norm``); here the c2c runs in place and the factor is one
    multiply afterwards: the same operations in the same order, the same bits (pinned by
    tests/test_fft_ws.py), and no temporary."""
    axes = tuple(axes)
    if _pfft is None:   # pragma: no cover
        out[...] = sfft.irfftn(spec, s=lengths, axes=axes, workers=threads)
        return out
    if len(axes) == 1:
        return _pfft.c2r(spec, axes, lengths[-1], False, 2, out, threads)
    _pfft.c2c(spec, axes[:-1], False, 0, spec, threads)
    _pfft.c2r(spec, axes[-1:], lengths[-1], False, 0, out, threads)
    out *= _inverse_norm(out.dtype, int(np.prod(lengths)))
    return out


def _pocketfft_agrees():
    """True when the private pocketfft calls of ``rfft_into`` / ``irfft_into`` take the
    arguments this module passes and give scipy.fft's bits on a small 2-D case in both
    precisions (a scipy whose private module changed falls back to the public functions)."""
    try:
        for dt in (np.float32, np.float64):
            x = np.arange(30, dtype=dt).reshape(6, 5) % 7 - 3
            spec = rfft_into(x, (0, 1), np.empty((6, 3), np.result_type(dt, np.complex64)), 1)
            if not np.array_equal(spec, sfft.rfftn(x)):
                return False
            back = irfft_into(spec.copy(), (0, 1), (6, 5), np.empty((6, 5), dt), 1)
            if not np.array_equal(back, sfft.irfftn(spec, s=(6, 5))):
                return False
    except Exception:   # noqa: BLE001 - any failure of a private API means: do not use it
        return False
    return True


if _pfft is not None and not _pocketfft_agrees():   # pragma: no cover
    _pfft = None


def _empty(shape, dtype):
    return np.empty(shape, dtype)


def contract(spec, wsplit, workers, out=None):
    """Per phase, bin and group (items, Cg) @ (Cg, Mg), complex: the compiled loop over bins
    (``convt._kernels._fftmul``), bins split over ``workers`` OpenMP threads.

    ``spec`` (*bins, G, items..., Cg) is shared by every phase; ``wsplit`` is the kernel
    spectra in the split layout (P, 2, rows, Cg, Mg) of ``kernel_spectrum``, or a one-shot
    call's ``Lead`` (``fft_contract_dft`` finishes each row's spectrum on the way). Returns
    (P, rows, items, Mg) complex, in ``out(shape, dtype)`` when given (a workspace buffer).
    """
    out = _empty if out is None else out
    if isinstance(wsplit, Lead) and wsplit.packed is not None:
        pk, cg, mg = wsplit.packed, spec.shape[-1], wsplit.mg
        rows = wsplit.rows * (wsplit.length if wsplit.cplx else wsplit.dft.shape[1])
        x = spec.reshape(rows, -1, cg)
        out = out((pk.shape[0] // wsplit.rows, rows, x.shape[1], mg), spec.dtype)
        work = out.size * (cg + 2 * wsplit.dft.shape[2])
        fft_contract_packed(x.view(pk.dtype), pk, wsplit.dft, wsplit.phase, out.view(pk.dtype),
                            wsplit.length, wsplit.rows, wsplit.groups, wsplit.cplx,
                            workers if work >= _MIN_THREADED_CMACS else 1)
        return out
    if isinstance(wsplit, Lead):
        a = wsplit.partial
        phases, parts, taps, cg = a.shape[0], a.shape[1], a.shape[2], spec.shape[-1]
        mg = a.shape[4] // cg
        rows = a.shape[3] * (wsplit.length if parts == 2 else wsplit.dft.shape[1])
        x = spec.reshape(rows, -1, cg)
        out = out((phases, rows, x.shape[1], mg), spec.dtype)
        work = out.size * (cg + taps)
        fft_contract_dft(x.view(a.dtype), a, wsplit.dft, out.view(a.dtype), wsplit.length,
                         workers if work >= _MIN_THREADED_CMACS else 1)
        return out
    phases, _, rows, cg, mg = wsplit.shape
    x = spec.reshape(rows, -1, cg)
    out = out((phases, rows, x.shape[1], mg), spec.dtype)
    threads = workers if out.size * cg >= _MIN_THREADED_CMACS else 1
    fft_contract(x.view(wsplit.dtype), wsplit, out.view(wsplit.dtype), threads)
    return out


def save_groups(length, blocks, items, c_in, c_out_phases, csize):
    """Blocks per group of ``blocks`` overlap-save blocks of transform length ``length``:
    as many as keep a group's working arrays within ``SAVE_CACHE`` bytes (at least one),
    evened out over the groups. ``items``: batch elements per block; ``c_out_phases``:
    C_out times the phases; ``csize``: bytes of a complex value."""
    bins = length // 2 + 1
    per_block = items * (bins * csize * (c_in + c_out_phases) + length * csize // 2 * c_out_phases)
    per_group = max(1, min(blocks, SAVE_CACHE // max(per_block, 1)))
    groups = -(-blocks // per_group)
    return -(-blocks // groups)


def save_options(geom, lo, used, e, opts, forced, csize):
    """(L, B, T, groups) overlap-save candidates of a 1-D ``geom`` (``run_save``): T blocks
    of B = L - Q + 1 outputs per phase over the q range the output window needs (inputs from
    ``lo``, ``used`` of them; kernel extent ``e``), at the lengths of ``opts`` (the backend's
    per-axis candidates) that give more than one block (any, when ``forced``), in groups of
    ``save_groups`` blocks (``csize`` bytes per complex value)."""
    s, pb, o = geom.strides[0], geom.pads_begin[0], geom.out_shape[0]
    q = -(-e // s)
    off = pb - lo * s
    q0, q1 = max(0, off // s), min(used + q - 1, -(-(off + o) // s))
    out = []
    for length in sorted({opt[0] for opt in opts}):
        b = length - q + 1
        t = -(-(q1 - q0) // b) if q1 > q0 else 0
        if t > 1 or (forced and t == 1):
            per = save_groups(length, t, geom.batch, geom.c_in, s * geom.c_out, csize)
            out.append((length, b, t, -(-t // per)))
    return out


def _save_input(xa, geom, lay, q0, taps, ct, arena):
    """(T*B + Q - 1, G, N, Cg) in ``ct`` (``arena``'s, its zeros kept from call to call):
    xp[k] = x[lo + q0 - Q + 1 + k], zero outside x, so block j's inputs are xp[j*B : j*B + L]."""
    g, n, cg = geom.groups, geom.batch, geom.c_in // geom.groups
    size = lay.tiles[0] * lay.block[0] + taps - 1
    first = lay.lo[0] + q0 - taps + 1            # input index at xp[0]
    a, b = max(first, lay.lo[0]), min(first + size, lay.lo[0] + lay.used[0])
    xp = arena.get("fft-save-x", (size, g, n, cg), ct,   # zero beyond what is written
                   zero_key=("fft-save-x", a - first, b - first))
    if b > a:
        if geom.data_format == "NXC":     # (N, X, G * Cg)
            part = xa[:, a:b].reshape(n, b - a, g, cg).transpose(1, 2, 0, 3)
        else:                             # (N, G * Cg, X)
            part = xa[:, :, a:b].reshape(n, g, cg, b - a).transpose(3, 1, 0, 2)
        xp[a - first:b - first] = part
    return xp


def run_save(xa, wspec, geom, lay, y, ct, workers, place, arena):
    """Overlap-save of the 1-D ``geom`` per ``lay`` (``lay.save`` blocks per group) into
    ``y`` (bias-filled), in the compute dtype ``ct``; ``place(y, frame, offset)`` adds a
    frame (A, G, N, Mg), output position 0 at ``offset`` in it, to y's output window.
    Working arrays come from ``arena`` (``convt._dispatch.workspace``), one set per thread."""
    s, length, b, blocks = geom.strides[0], lay.small[0], lay.block[0], lay.tiles[0]
    taps = length - b + 1
    q0 = max(0, lay.offset[0] // s)
    xp = _save_input(xa, geom, lay, q0, taps, ct, arena)
    st = xp.strides
    g, n, mg = geom.groups, geom.batch, geom.c_out // geom.groups
    per = lay.save
    cplx = np.result_type(ct, np.complex64)

    def group(j0, slot):
        j1 = min(j0 + per, blocks)
        seg = as_strided(xp[j0 * b:], shape=(length, g, n, j1 - j0, xp.shape[3]),
                         strides=(st[0], st[1], st[2], b * st[0], st[3]), writeable=False)
        spec = rfft_into(seg, (0,), arena.get(f"fft-save-spec{slot}", (length // 2 + 1,)
                                              + seg.shape[1:], cplx), 1)
        out = contract(spec, wspec, 1,
                       lambda shape, dtype: arena.get(f"fft-save-prod{slot}", shape, dtype))
        out = out.reshape(s, length // 2 + 1, g, n, j1 - j0, mg)
        z = irfft_into(out, (1,), (length,),
                       arena.get(f"fft-save-z{slot}", (s, length, g, n, j1 - j0, mg), ct),
                       1)[:, taps - 1:]
        # (P, B, G, N, J, Mg) -> frame (J * B * s, G, N, Mg): position (j, m, r) at j*B*s + m*s + r
        frame = arena.get(f"fft-save-frame{slot}", ((j1 - j0) * b * s, g, n, mg), ct)
        frame.reshape(j1 - j0, b, s, g, n, mg)[...] = z.transpose(4, 1, 0, 2, 3, 5)
        place(y, frame, lay.offset[0] - (q0 + j0 * b) * s)

    starts = list(range(0, blocks, per))
    threads = min(workers, len(starts))
    if threads < 2:
        for j0 in starts:
            group(j0, 0)
        return y
    cuts = [len(starts) * i // threads for i in range(threads + 1)]

    def run(lo, hi, slot):
        for j0 in starts[lo:hi]:
            group(j0, slot)

    pool = thread_pool(threads - 1)
    jobs = [pool.submit(run, lo, hi, slot)
            for slot, (lo, hi) in enumerate(zip(cuts[1:-1], cuts[2:]), 1)]
    run(cuts[0], cuts[1], 0)
    for job in jobs:
        job.result()
    return y


def place2(y, z, geom, lay, n0, workers):
    """y[n0:n0+nc] += the tile frames ``z`` (*N, G, nc, *T, Mg) of a 2-D channels-first
    call (one frame, or a few overlap-add tiles: ``FftLayout`` ``lay``), each at its offset,
    by the compiled ``fft_place2``: the tiles added in the order of the backend's NumPy
    placement (``_place_tiles``), so the bits are the same (its speed against NumPy's
    transposing adds: docs/fft.md, "Kernel spectra packed from the weights, tiles placed
    in C")."""
    nc, mg = z.shape[3], z.shape[-1]
    z = np.ascontiguousarray(z).reshape(*z.shape[:4], *lay.tiles, mg)
    view = y.reshape(geom.batch, geom.groups, mg, *geom.out_shape)[n0:n0 + nc]
    steps = [b * s for b, s in zip(lay.block, geom.strides)]
    threads = workers if view.size >= _MIN_PLACE_THREADED else 1
    fft_place2(z, view, lay.offset[0], steps[0], lay.offset[1], steps[1], threads)
