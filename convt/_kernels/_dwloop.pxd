# The portable loop of the depthwise variant's channels-first kernel (_depthwise.pyx, which
# cimports them; no AVX2, or the row kernel's strides it does not take): a phase's interior in
# chunks of up to 4 taps, its border output by output, and the phase buffers interleaved
# into y's row. cdef inline in a .pxd, as _tile.pxd, so that the module compiles its own copy.
from libc.stdint cimport int64_t

from ._types cimport real


cdef inline void _chunk(real* d, const real* x, const int64_t* off, const real* wv, int nt,
                        int64_t n, bint init, real b) noexcept nogil:
    # d[q] (= b or d[q]) + sum_t wv[t] * x[off[t] + q], t < nt <= 4, q < n, in tap order.
    cdef int64_t q
    cdef const real* p0 = x + off[0]
    cdef const real* p1
    cdef const real* p2
    cdef const real* p3
    cdef real w0 = wv[0], w1, w2, w3
    if nt == 1:
        if init:
            for q in range(n):
                d[q] = b + w0 * p0[q]
        else:
            for q in range(n):
                d[q] = d[q] + w0 * p0[q]
        return
    p1 = x + off[1]
    w1 = wv[1]
    if nt == 2:
        if init:
            for q in range(n):
                d[q] = b + w0 * p0[q] + w1 * p1[q]
        else:
            for q in range(n):
                d[q] = d[q] + w0 * p0[q] + w1 * p1[q]
        return
    p2 = x + off[2]
    w2 = wv[2]
    if nt == 3:
        if init:
            for q in range(n):
                d[q] = b + w0 * p0[q] + w1 * p1[q] + w2 * p2[q]
        else:
            for q in range(n):
                d[q] = d[q] + w0 * p0[q] + w1 * p1[q] + w2 * p2[q]
        return
    p3 = x + off[3]
    w3 = wv[3]
    if init:
        for q in range(n):
            d[q] = b + w0 * p0[q] + w1 * p1[q] + w2 * p2[q] + w3 * p3[q]
    else:
        for q in range(n):
            d[q] = d[q] + w0 * p0[q] + w1 * p1[q] + w2 * p2[q] + w3 * p3[q]


cdef inline void _border(real* d, const real* x, const int64_t* off, const int64_t* te,
                         const real* wv, int64_t nt, int64_t q0, int64_t q1, int64_t qa,
                         int64_t I2, real b) noexcept nogil:
    # Outputs q0 <= q < q1 of a phase whose taps are not all in range, same order as _chunk.
    cdef int64_t q, t, i
    cdef real acc
    for q in range(q0, q1):
        acc = b
        for t in range(nt):
            i = q + te[t]
            if i >= 0 and i < I2:
                acc = acc + wv[t] * x[off[t] + q]
        d[q - qa] = acc


cdef inline void _interleave(real* yr, const real* buf, const int64_t* phases, int64_t s2,
                      int64_t QB, int64_t qa) noexcept nogil:
    # yr[q*s2 + c] = buf[c*QB + q - qa] for the q of the block in each phase.
    cdef int64_t c, q, n, n1
    cdef real* yo = yr + qa * s2
    cdef const real* b0 = buf
    cdef const real* b1 = buf + QB
    if s2 == 2:
        n = min(phases[0] - qa, QB)
        n1 = max(min(phases[5] - qa, QB), 0)
        for q in range(n1):
            yo[2 * q] = b0[q]
            yo[2 * q + 1] = b1[q]
        for q in range(n1, n):
            yo[2 * q] = b0[q]
        return
    # y in order while every phase has its q (stores one after the other: phase by phase, each
    # a store every s2 values, take most of the task function's time at large strides:
    # docs/performance.md, "Figures moved out of code comments"), then each phase's remaining q
    n1 = QB
    for c in range(s2):
        n1 = min(n1, phases[5 * c] - qa)
    n1 = max(n1, 0)
    for q in range(n1):
        for c in range(s2):
            yo[q * s2 + c] = buf[c * QB + q]
    for c in range(s2):
        n = min(phases[5 * c] - qa, QB)
        for q in range(n1, n):
            yo[q * s2 + c] = buf[c * QB + q]
