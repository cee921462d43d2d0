"""Direct transposed convolution as per-phase GEMMs on BLAS (scipy.linalg.cython_blas).

Phase decomposition (DESIGN.md): output o = q*s + c. For phase c every tap k with
(c + pb - k*d) divisible by s reads input i = q + e, e = (c + pb - k*d) / s, for all q of the
phase at once. With the input stored channels-last and padded by a zero halo to a grid
(P0, P1, P2), that is ONE matrix: the pixels of the grid from flat offset xoff(tap), rows of
length C_in. So a phase is sum over its taps of  Yv[M, C_out] (+)= Xp[xoff + 0..M, :] @ W_tap,
a plain GEMM (lda = C_in, ldc = C_out), accumulated in place with beta = 1: no column buffer,
no multiply by an inserted zero. Yv uses the same grid, so rows whose grid position is not a
real output of the phase (the halo part of each row) are computed and never read. The caller
bounds that waste (it falls back to the pixel kernel when the grid is mostly halo).

Threads: the BLAS library's own (set by the caller); this module runs no OpenMP region, so the
two thread pools never spin against each other. The scatter of each phase into y is serial.
A GEMM splits its work over rows and columns only, never over the summed dimension, so every
element is summed in the same order whatever the thread count.

Assumes: xp is the padded input (N, P0, P1, P2, C_in) flattened; w the packed weights
(G, K0, K1, K2, Cg, Mg) flattened; yv holds >= rows(phase) * C_out elements; tap tables index
in range; y is addressed with element strides ystr = (n, o0, o1, o2, channel).
"""
from libc.stdint cimport int64_t
from scipy.linalg.cython_blas cimport dgemm, sgemm

from ._types cimport real

cdef int64_t _MAX_ROWS = 1 << 28   # keep BLAS's 32-bit m and offsets far from overflow


cdef inline void _gemm(int m, int n, int k, const real* a, int lda, const real* b, int ldb,
                       real* c, int ldc, real beta) noexcept nogil:
    # Row-major C[m, n] (+)= A[m, k] @ B[k, n] is column-major C^T = B^T A^T.
    cdef char tr = b"N"
    cdef real one = 1
    if real is float:
        sgemm(&tr, &tr, &n, &m, &k, &one, <float*> b, &ldb, <float*> a, &lda, &beta,
              c, &ldc)
    else:
        dgemm(&tr, &tr, &n, &m, &k, &one, <double*> b, &ldb, <double*> a, &lda, &beta,
              c, &ldc)


cdef void _phase_gemms(const real* xp, const real* w, real* yv, int64_t rows,
                       const int64_t* xoff, const int64_t* woff, int64_t ntaps,
                       int64_t G, int64_t Cg, int64_t Mg, int64_t C_in,
                       int64_t gstride) noexcept nogil:
    cdef int64_t t, g, m, r0 = 0
    cdef int64_t C_out = G * Mg
    while r0 < rows:
        m = min(_MAX_ROWS, rows - r0)
        for t in range(ntaps):
            for g in range(G):
                _gemm(<int> m, <int> Mg, <int> Cg, xp + (xoff[t] + r0) * C_in + g * Cg,
                      <int> C_in, w + g * gstride + woff[t], <int> Mg,
                      yv + r0 * C_out + g * Mg, <int> C_out, 0 if t == 0 else 1)
        r0 += m


cdef void _phase_batch_gemms(const real* xp, const real* w, real* yv, const int64_t* q,
                             const int64_t* P, const int64_t* H, const int64_t* I,
                             const int64_t* xoff, const int64_t* woff, const int64_t* tap_e,
                             int64_t ntaps, int64_t N, int64_t G, int64_t Cg, int64_t Mg,
                             int64_t C_in, int64_t gstride) noexcept nogil:
    # Batch rows: for each output position q of the phase, GEMMs with M = N (row stride one
    # image of the grid), over only the taps whose input q + e lies inside the data, so no
    # multiply-add touches the halo. For small spatial extents, where a grid-wide GEMM would
    # be mostly halo rows.
    cdef int64_t q0, q1, q2, t, g, a, vq, img = P[0] * P[1] * P[2], C_out = G * Mg
    cdef int64_t qq[3]
    cdef bint first, inside
    cdef real* yq
    for q0 in range(q[0]):
        for q1 in range(q[1]):
            for q2 in range(q[2]):
                qq[0], qq[1], qq[2] = q0, q1, q2
                vq = (q0 * P[1] + q1) * P[2] + q2
                yq = yv + vq * C_out
                first = True
                for t in range(ntaps):
                    inside = True
                    for a in range(3):
                        # tap_e holds e + H: the data is at H <= q + e + H < H + I
                        if qq[a] + tap_e[3 * t + a] < H[a] or qq[a] + tap_e[3 * t + a] >= H[a] + I[a]:
                            inside = False
                    if not inside:
                        continue
                    for g in range(G):
                        _gemm(<int> N, <int> Mg, <int> Cg, xp + (vq + xoff[t]) * C_in + g * Cg,
                              <int> (img * C_in), w + g * gstride + woff[t], <int> Mg,
                              yq + g * Mg, <int> (img * C_out), 0 if first else 1)
                    first = False
                if first:   # no tap reaches this position
                    for t in range(N):
                        for a in range(C_out):
                            yq[t * img * C_out + a] = 0


cdef void _scatter(const real* yv, const real* bias, real* y, const int64_t* q,
                   const int64_t* c, const int64_t* s, const int64_t* P, int64_t N,
                   int64_t C_out, const int64_t* ystr, bint from_yv) noexcept nogil:
    # y[n, q*s + c, :] = yv[grid(n, q), :] + bias   (bias alone when the phase has no tap).
    # One grid row (all q2, all channels: Q2 * C_out contiguous values of yv) at a time, so
    # the channels-first case is a blocked transpose: each channel's writes run along o2
    # instead of jumping a whole image per value.
    cdef int64_t n, q0, q1, q2, co, v
    cdef int64_t s2 = s[2] * ystr[3], cs = ystr[4]
    cdef real* dst
    cdef real* d
    cdef const real* src
    cdef real bc
    for n in range(N):
        for q0 in range(q[0]):
            for q1 in range(q[1]):
                dst = y + (n * ystr[0] + (q0 * s[0] + c[0]) * ystr[1]
                           + (q1 * s[1] + c[1]) * ystr[2] + c[2] * ystr[3])
                v = ((n * P[0] + q0) * P[1] + q1) * P[2]
                src = yv + v * C_out
                if cs == 1:                       # channels last
                    for q2 in range(q[2]):
                        d = dst + q2 * s2
                        for co in range(C_out):
                            d[co] = (src[q2 * C_out + co] if from_yv else 0) + bias[co]
                else:                             # channels first
                    for co in range(C_out):
                        d = dst + co * cs
                        bc = bias[co]
                        if from_yv:
                            for q2 in range(q[2]):
                                d[q2 * s2] = src[q2 * C_out + co] + bc
                        else:
                            for q2 in range(q[2]):
                                d[q2 * s2] = bc


def phase_gemm(const real[::1] xp,            # IN  padded input, flat (N, P0, P1, P2, C_in)
               const real[::1] w,             # IN  packed weights, flat (G, K0, K1, K2, Cg, Mg)
               const real[::1] bias,          # IN  (C_out,), zeros when there is none
               real[::1] yv,                  # OUT scratch, >= max rows * C_out
               real[::1] y,                   # OUT output, flat, addressed through ystr
               const int64_t[:, ::1] phases,  # IN  per phase: Q0..2, c0..2, first tap, ntaps
               const int64_t[::1] xoff,       # IN  per tap: flat pixel offset in the grid
               const int64_t[::1] woff,       # IN  per tap: offset of W_tap in group 0
               const int64_t[::1] tap_e,      # IN  per tap: e + H per axis (3 values)
               const int64_t[::1] dims,       # IN  N, P0..2, s0..2, G, Cg, Mg, C_in, gstride,
                                              #     H0..2, I0..2, batch_rows (0 / 1)
               const int64_t[::1] ystr):      # IN  y element strides (n, o0, o1, o2, channel)
    """Compute y; releases the GIL. See the module docstring."""
    cdef int64_t N = dims[0], G = dims[7], Cg = dims[8], Mg = dims[9], C_in = dims[10]
    cdef int64_t gstride = dims[11], C_out = G * Mg, ph, rows, nt
    cdef const int64_t* P = &dims[1]
    cdef const int64_t* s = &dims[4]
    cdef const int64_t* H = &dims[12]
    cdef const int64_t* I = &dims[15]
    cdef bint batch_rows = dims[18]
    cdef const int64_t* row
    if N == 0 or C_out == 0:
        return
    cdef const real* xptr = &xp[0]
    cdef const real* wptr = &w[0]
    cdef const real* bptr = &bias[0]
    cdef real* yvptr = &yv[0]
    cdef real* yptr = &y[0]
    cdef const int64_t* xo = &xoff[0] if xoff.shape[0] else NULL
    cdef const int64_t* wo = &woff[0] if woff.shape[0] else NULL
    cdef const int64_t* te = &tap_e[0] if tap_e.shape[0] else NULL
    cdef const int64_t* yst = &ystr[0]
    with nogil:
        for ph in range(phases.shape[0]):
            row = &phases[ph, 0]
            if row[0] == 0 or row[1] == 0 or row[2] == 0:
                continue
            nt = row[7]
            if nt > 0 and batch_rows:
                _phase_batch_gemms(xptr, wptr, yvptr, row, P, H, I, xo + row[6], wo + row[6],
                                   te + 3 * row[6], nt, N, G, Cg, Mg, C_in, gstride)
            elif nt > 0:
                rows = (((N - 1) * P[0] + row[0] - 1) * P[1] + row[1] - 1) * P[2] + row[2]
                _phase_gemms(xptr, wptr, yvptr, rows, xo + row[6], wo + row[6], nt, G, Cg,
                             Mg, C_in, gstride)
            _scatter(yvptr, bptr, yptr, row, row + 3, s, P, N, C_out, yst, nt > 0)
