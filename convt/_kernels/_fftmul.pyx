"""The FFT backend's per-bin channel contraction: fft_contract, and fft_contract_dft, which
also finishes the kernel spectra on the way (a one-shot call's, never stored).

Per phase p, bin row r (a frequency bin of one group) and item i (a batch element of one
tile), Y[p, r, i, :] = sum_c X[r, i, c] W[p, r, c, :], complex. The matrices are tiny (C_in/G
x C_out/G per bin, thousands of bins), where NumPy's batched matmul pays per bin; here one
loop nest runs them all. W comes in a split layout (P, 2, R, Cg, Mg): the real parts, then the
imaginary parts, so the innermost loop over output channels reads two unit-stride streams
that gcc -O3 vectorises; X and Y stay interleaved complex (scipy.fft's layout), and a
row of Y is summed in per-thread scratch and written once.

fft_contract_dft takes the kernel spectra transformed along every axis but the first (A,
split layout, Q0 taps left on axis 0) and the first axis' DFT matrix: per bin row it makes the
row's kernel spectrum in per-thread scratch (Q0 complex multiply-adds per weight, in cache)
and contracts it at once, so a one-shot call's full spectra (MBs, written then read back)
never exist. Axis 0 complex (2-D, 3-D): rows f and L0 - f share the products of the real
and imaginary parts (F[L0 - f] = conj F[f]), so one pass over A makes both (half the work).
Axis 0 real (1-D: it is also the rfft axis): A is the real kernel, and only L0/2 + 1 rows.

The loops themselves are C (``_fftrow.h``), compiled once per ISA level of ``_isa.h`` and
picked by the ``isa`` argument (default ``convt._kernels._cpu.ISA``).

Threads: OpenMP prange over bin rows (fft_contract_dft: pairs of mirrored rows), each row
(every phase and item of it) computed by one thread in a fixed order, so results are
bit-identical for any thread count.
"""
from cython.parallel cimport parallel, prange
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from ._types cimport real
from . import _cpu


cdef extern from "_fftrow.h" nogil:
    enum: CONVT_FFTROW_BLOCK
    void fftrow_contract_f(int isa, const float* x, const float* wr, const float* wi,
                           float* y, int64_t items, int64_t cg, int64_t mg, int64_t xs,
                           float* acc)
    void fftrow_contract_d(int isa, const double* x, const double* wr, const double* wi,
                           double* y, int64_t items, int64_t cg, int64_t mg, int64_t xs,
                           double* acc)
    void fftrow_dft_f(int isa, const float* a, const float* fr, const float* fi, float* s,
                      int64_t taps, int64_t nb, int cplx)
    void fftrow_dft_d(int isa, const double* a, const double* fr, const double* fi,
                      double* s, int64_t taps, int64_t nb, int cplx)


cdef inline void _row(int isa, const real* x, const real* wr, const real* wi, real* y,
                      int64_t items, int64_t cg, int64_t mg, real* acc) noexcept nogil:
    """Every item of one bin row: y[i] = x[i] @ (wr + i wi); x, y interleaved complex."""
    if real is float:
        fftrow_contract_f(isa, x, wr, wi, y, items, cg, mg, 2 * cg, acc)
    else:
        fftrow_contract_d(isa, x, wr, wi, y, items, cg, mg, 2 * cg, acc)


cdef inline void _dft_row(int isa, const real* a, const real* fr, const real* fi, real* s,
                          int64_t taps, int64_t nb, bint cplx) noexcept nogil:
    """Kernel spectrum of one row (and, ``cplx``, of its mirror) from its packed lines of A
    (``_pack``: ``nb`` blocks of every tap), into s[0:n], s[n:2n] (real, imaginary parts of
    row f) and, ``cplx``, s[2n:4n] (row L0 - f), n = nb * CONVT_FFTROW_BLOCK. fr, fi: the
    DFT matrix row F[f, :]."""
    if real is float:
        fftrow_dft_f(isa, a, fr, fi, s, taps, nb, cplx)
    else:
        fftrow_dft_d(isa, a, fr, fi, s, taps, nb, cplx)


cdef void _pack(const real* a, real* out, int64_t taps, int64_t parts, int64_t ks,
                int64_t aim, int64_t n, int64_t nb) noexcept nogil:
    """One row of A (taps lines ``ks`` apart, imaginary parts ``aim`` after the real ones,
    ``n`` weights) as ``nb`` blocks of (taps, parts, CONVT_FFTROW_BLOCK), zero padded."""
    cdef int64_t b, k, q, j, m = CONVT_FFTROW_BLOCK
    cdef real* o
    for b in range(nb):
        for k in range(taps):
            for q in range(parts):
                o = out + ((b * taps + k) * parts + q) * m
                for j in range(m):
                    o[j] = a[k * ks + q * aim + b * m + j] if b * m + j < n else 0


def fft_contract(const real[:, :, ::1] x,            # IN  (R, items, 2 * Cg) interleaved
                 const real[:, :, :, :, ::1] w,      # IN  (P, 2, R, Cg, Mg) split
                 real[:, :, :, ::1] y,               # OUT (P, R, items, 2 * Mg) interleaved
                 int num_threads, int isa=-1):
    """y[p, r, i] = x[r, i] @ w[p, r] in complex arithmetic (shapes above; trusted);
    ``isa``: the level of the loops (-1: ``_cpu.ISA``)."""
    cdef int64_t rows = x.shape[0], items = x.shape[1], cg = w.shape[3], mg = w.shape[4]
    cdef int64_t phases = w.shape[0], r, p
    cdef int64_t wrow = cg * mg, yrow = items * 2 * mg, xrow = items * 2 * cg
    cdef int64_t ws = 2 * rows * wrow, ys = rows * yrow, wim = rows * wrow
    cdef const real* xp = &x[0, 0, 0] if x.size else NULL
    cdef const real* wp = &w[0, 0, 0, 0, 0] if w.size else NULL
    cdef real* yp = &y[0, 0, 0, 0] if y.size else NULL
    cdef real* acc = NULL
    cdef int level = _cpu.ISA if isa < 0 else isa
    cdef int err[1]
    cdef int* errp = err
    err[0] = 0
    if rows == 0 or items == 0 or mg == 0 or phases == 0:
        return
    if cg == 0:
        y[...] = 0
        return
    with nogil, parallel(num_threads=num_threads):
        acc = <real*> malloc(2 * mg * sizeof(real))
        if acc == NULL:
            errp[0] = 1
        else:
            for r in prange(rows, schedule="static"):
                for p in range(phases):
                    _row(level, xp + r * xrow, wp + p * ws + r * wrow,
                         wp + p * ws + wim + r * wrow, yp + p * ys + r * yrow, items, cg, mg,
                         acc)
        free(acc)
    if err[0]:
        raise MemoryError("convt: no memory for the FFT contraction's per-thread scratch")


def fft_contract_dft(const real[:, :, ::1] x,            # IN  (R, items, 2 * Cg) interleaved
                     const real[:, :, :, :, :] a,        # IN  (P, parts, Q0, RR, Cg * Mg), strided
                     const real[:, :, ::1] f,            # IN  (2, L0 // 2 + 1, Q0)
                     real[:, :, :, ::1] y,               # OUT (P, R, items, 2 * Mg) interleaved
                     int64_t length, int num_threads, int isa=-1):
    """y[p, r] = x[r] @ W[p, r], W[p, f0 * RR + rr] = sum_k F[f0, k] A[p, :, k, rr]: the
    kernel spectra's last transform, along axis 0 (length L0 = ``length``), fused into the
    contraction. ``parts`` 2: A is split complex and R = L0 * RR rows; 1: A is real (1-D)
    and R = (L0 // 2 + 1) * RR. F: the DFT matrix rows 0 .. L0 // 2, real then imaginary
    parts. Shapes trusted; Mg = y.shape[3] // 2, Cg = x.shape[2] // 2; ``isa`` as
    ``fft_contract``'s."""
    cdef int64_t rows = x.shape[0], items = x.shape[1], cg = x.shape[2] // 2
    cdef int64_t mg = y.shape[3] // 2, phases = a.shape[0], taps = a.shape[2]
    cdef int64_t rr_n = a.shape[3], n = a.shape[4], half = f.shape[1]
    cdef bint cplx = a.shape[1] == 2
    cdef int64_t aps = a.strides[0] // sizeof(real), aim = a.strides[1] // sizeof(real)
    cdef int64_t ks = a.strides[2] // sizeof(real), rs = a.strides[3] // sizeof(real)
    cdef int64_t yrow = items * 2 * mg, ys = rows * yrow, xrow = items * 2 * cg
    cdef int64_t u, p, f0, rr, r0, r1
    cdef int64_t nb = (n + CONVT_FFTROW_BLOCK - 1) // CONVT_FFTROW_BLOCK
    cdef int64_t prow = nb * taps * a.shape[1] * CONVT_FFTROW_BLOCK   # a packed row
    cdef int64_t nn = nb * CONVT_FFTROW_BLOCK
    cdef const real* xp = &x[0, 0, 0] if x.size else NULL
    cdef const real* ap = &a[0, 0, 0, 0, 0] if a.size else NULL
    cdef const real* fp = &f[0, 0, 0] if f.size else NULL
    cdef real* yp = &y[0, 0, 0, 0] if y.size else NULL
    cdef real* acc = NULL
    cdef real* packed = NULL
    cdef real* s
    cdef int level = _cpu.ISA if isa < 0 else isa
    cdef int err[1]
    cdef int* errp = err
    err[0] = 0
    if rows == 0 or items == 0 or mg == 0 or phases == 0:
        return
    if cg == 0 or taps == 0:
        y[...] = 0
        return
    if n > 1 and a.strides[4] != sizeof(real):
        raise RuntimeError("fft_contract_dft: the weights of A must be contiguous: "
                           "this is a bug in convt")
    packed = <real*> malloc(phases * rr_n * prow * sizeof(real))
    if packed == NULL:
        raise MemoryError("convt: no memory for the FFT contraction's packed kernel spectra")
    with nogil, parallel(num_threads=num_threads):
        for u in prange(phases * rr_n, schedule="static"):
            p = u // rr_n
            _pack(ap + p * aps + (u - p * rr_n) * rs, packed + u * prow, taps, a.shape[1], ks,
                  aim, n, nb)
    with nogil, parallel(num_threads=num_threads):
        acc = <real*> malloc((2 * mg + 4 * nn) * sizeof(real))
        if acc == NULL:
            errp[0] = 1
        else:
            for u in prange(half * rr_n, schedule="static"):
                s = acc + 2 * mg
                rr = u // half    # consecutive units share rr: its packed row stays in cache
                f0 = u - rr * half
                r0 = f0 * rr_n + rr
                r1 = (length - f0) * rr_n + rr    # the mirror row, when there is one
                for p in range(phases):
                    _dft_row(level, packed + (p * rr_n + rr) * prow, fp + f0 * taps,
                             fp + (half + f0) * taps, s, taps, nb, cplx)
                    _row(level, xp + r0 * xrow, s, s + nn, yp + p * ys + r0 * yrow, items,
                         cg, mg, acc)
                    if cplx and f0 > 0 and 2 * f0 != length:
                        _row(level, xp + r1 * xrow, s + 2 * nn, s + 3 * nn,
                             yp + p * ys + r1 * yrow, items, cg, mg, acc)
        free(acc)
    free(packed)
    if err[0]:
        raise MemoryError("convt: no memory for the FFT contraction's per-thread scratch")
