"""The FFT backend's per-bin channel contraction: fft_contract.

Per phase p, bin row r (a frequency bin of one group) and item i (a batch element of one
tile), Y[p, r, i, :] = sum_c X[r, i, c] W[p, r, c, :], complex. The matrices are tiny (C_in/G
x C_out/G per bin, thousands of bins), where NumPy's batched matmul pays per bin; here one
loop nest runs them all. W comes in a split layout (P, 2, R, Cg, Mg): the real parts, then the
imaginary parts, so the innermost loop over output channels reads two unit-stride streams
that gcc -O3 vectorises; X and Y stay interleaved complex (scipy.fft's layout), and a
row of Y is summed in per-thread scratch and written once.

Threads: OpenMP prange over bin rows, each row (every phase and item of it) computed by one
thread in a fixed order, so results are bit-identical for any thread count.
"""
from cython.parallel cimport parallel, prange
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from ._types cimport real


cdef void _row(const real* x, const real* w, real* y, int64_t items, int64_t cg,
               int64_t mg, int64_t phases, int64_t xs, int64_t ws, int64_t wim,
               int64_t ys, real* acc) noexcept nogil:
    """Every phase and item of one bin row; ``xs``, ``ws``, ``ys``: strides between items
    (x), phases (w) and phases (y), in reals; ``wim``: offset of w's imaginary parts."""
    cdef int64_t p, i, c, m
    cdef real xr, xi
    cdef const real* wr
    cdef const real* wi
    cdef real* ar = acc
    cdef real* ai = acc + mg
    cdef real* yo
    for p in range(phases):
        for i in range(items):
            for m in range(mg):
                ar[m] = 0
                ai[m] = 0
            for c in range(cg):
                xr = x[i * xs + 2 * c]
                xi = x[i * xs + 2 * c + 1]
                wr = w + p * ws + c * mg
                wi = wr + wim
                for m in range(mg):
                    ar[m] = ar[m] + (xr * wr[m] - xi * wi[m])
                    ai[m] = ai[m] + (xr * wi[m] + xi * wr[m])
            yo = y + p * ys + i * 2 * mg
            for m in range(mg):
                yo[2 * m] = ar[m]
                yo[2 * m + 1] = ai[m]


def fft_contract(const real[:, :, ::1] x,            # IN  (R, items, 2 * Cg) interleaved
                 const real[:, :, :, :, ::1] w,      # IN  (P, 2, R, Cg, Mg) split
                 real[:, :, :, ::1] y,               # OUT (P, R, items, 2 * Mg) interleaved
                 int num_threads):
    """y[p, r, i] = x[r, i] @ w[p, r] in complex arithmetic (shapes above; trusted)."""
    cdef int64_t rows = x.shape[0], items = x.shape[1], cg = w.shape[3], mg = w.shape[4]
    cdef int64_t phases = w.shape[0], r
    cdef int64_t wrow = cg * mg, yrow = items * 2 * mg
    cdef int64_t ws = 2 * rows * wrow, ys = rows * yrow
    cdef const real* xp = &x[0, 0, 0] if x.size else NULL
    cdef const real* wp = &w[0, 0, 0, 0, 0] if w.size else NULL
    cdef real* yp = &y[0, 0, 0, 0] if y.size else NULL
    cdef real* acc = NULL
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
                _row(xp + r * items * 2 * cg, wp + r * wrow, yp + r * yrow, items, cg, mg,
                     phases, 2 * cg, ws, rows * wrow, ys, acc)
        free(acc)
    if err[0]:
        raise MemoryError("convt: no memory for the FFT contraction's per-thread scratch")
