"""Direct transposed convolution on register-blocked micro-kernels (the "micro" variant).

Phase decomposition, gather form (DESIGN.md): output o = q*s + c; phase c's taps read input
i = q + e (e per tap and axis). A task owns MB consecutive output positions (rows, flattened
over (n, q0, q1, q2)) of each phase sharing (c0, c1), one phase after the other (their
outputs interleave along the last axis: a line of y is completed while in cache), and all
output channels; per phase, an MB x (G * NP * NR) tile
(NP panels of NR channels per group, the last padded with zero weights). Per block of taps,
each row's input pixel per tap is looked up once (an "indirection" table: a pointer into the
channels-last x, or to a zero vector when q + e is outside the data), and the micro-kernel
(_ukernel.h) computes MR x NR sub-tiles, its registers holding them across the block's taps
and a chunk of CC input channels. So there is no halo copy, no column buffer, no scatter, and
a tap is never multiplied by an inserted zero; the only wasted work is rows x taps whose input
is outside the data (the phase's border) and the NR padding of each group's last panel.

Blocking: a block of TB taps x CC channels keeps its packed weights (TB*CC*NR values, a panel)
in L1 while the task's MB/MR row sub-tiles stream through it; the tile stays in L2 across the
blocks. Blocks, chunks, groups and panels are visited in a fixed order and each output is
summed by one task: results are bit-identical for any thread count. The tile plus the bias is
then written into y's own layout (element strides): channels-last row by row, channels-first
channel by channel (each channel's stores sweep one region of its plane).

Threads: an OpenMP prange hands out tasks (dynamic); each thread owns its slice of the tile and
pointer scratch. No BLAS.

Assumes: x channels-last contiguous, zero holds C_in zeros, wp packed by pack_micro for the
same phase table, every phase row of (dims) in range, scratch sized as ``tile_values`` and
``pointer_values`` per thread; ystr = element strides (n, o0, o1, o2, channel).
"""
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t

from ._types cimport real

cdef extern from "_ukernel.h" nogil:
    int CONVT_MR
    int CONVT_NR_F32
    int CONVT_NR_F64
    int convt_ukernel_isa()
    void convt_ukernel_f32(int isa, int64_t ntaps, int64_t kc, const float* const* a,
                           int64_t astride, int64_t aoff, const float* b, int64_t bstride,
                           float* c, int64_t ldc, int acc)
    void convt_ukernel_f64(int isa, int64_t ntaps, int64_t kc, const double* const* a,
                           int64_t astride, int64_t aoff, const double* b, int64_t bstride,
                           double* c, int64_t ldc, int acc)

MR = CONVT_MR
NR_F32 = CONVT_NR_F32
NR_F64 = CONVT_NR_F64
# Columns of the phase table (convt._micro writes the same).
cdef enum:
    _WRITE_ROWS = 16  # tile rows per block of the channels-first write-out
    PHASE_COLS = 9   # Q0, Q1, Q2, c0, c1, c2, first tap, taps, packed-weight offset


def isa():
    """The micro-kernel the running CPU gets: 1 AVX2+FMA, 0 portable C."""
    return convt_ukernel_isa()


cdef inline void _ukernel(int isa, int64_t ntaps, int64_t kc, const real** a, int64_t astride,
                          int64_t aoff, const real* b, int64_t bstride, real* c, int64_t ldc,
                          int acc) noexcept nogil:
    if real is float:
        convt_ukernel_f32(isa, ntaps, kc, <const float* const*> a, astride, aoff, b, bstride,
                          c, ldc, acc)
    else:
        convt_ukernel_f64(isa, ntaps, kc, <const double* const*> a, astride, aoff, b,
                          bstride, c, ldc, acc)


cdef inline void _row_pos(int64_t r, const int64_t* ph, int64_t* q) noexcept nogil:
    # row r of a phase -> (n, q0, q1, q2)
    q[3] = r % ph[2]
    q[2] = (r // ph[2]) % ph[1]
    q[1] = (r // (ph[2] * ph[1])) % ph[0]
    q[0] = r // (ph[2] * ph[1] * ph[0])


cdef void _pointers(const real* x, const real* zero, const int64_t* ph, const int64_t* tap_e,
                    int64_t t0, int64_t nt, int64_t r0, int64_t m, int64_t mpad,
                    const int64_t* d, const real** ptr) noexcept nogil:
    # ptr[t * mpad + i]: the input pixel row r0 + i reads for tap t0 + t of the phase, or zero
    cdef int64_t I0 = d[1], I1 = d[2], I2 = d[3], C_in = d[11]
    cdef int64_t i, t, i0, i1, i2
    cdef int64_t q[4]
    cdef const int64_t* e
    for i in range(mpad):
        if i >= m:
            for t in range(nt):
                ptr[t * mpad + i] = zero
            continue
        _row_pos(r0 + i, ph, q)
        for t in range(nt):
            e = tap_e + 3 * (ph[6] + t0 + t)
            i0 = q[1] + e[0]
            i1 = q[2] + e[1]
            i2 = q[3] + e[2]
            if 0 <= i0 < I0 and 0 <= i1 < I1 and 0 <= i2 < I2:
                ptr[t * mpad + i] = x + (((q[0] * I0 + i0) * I1 + i1) * I2 + i2) * C_in
            else:
                ptr[t * mpad + i] = zero


cdef void _write(const real* t, int64_t ldc, const real* bias, real* y, const int64_t* ph,
                 int64_t r0, int64_t m, const int64_t* d, const int64_t* ystr,
                 int64_t* off) noexcept nogil:
    # Tile rows (or only the bias when t is NULL) -> y: channels-last row by row,
    # channels-first channel by channel.
    cdef int64_t G = d[7], Mg = d[9], gw = ldc // d[7]
    cdef int64_t cs = ystr[4], i, g, mm, co, col
    cdef int64_t q[4]
    cdef real* dd
    cdef const real* tr
    cdef real bc
    for i in range(m):
        _row_pos(r0 + i, ph, q)
        off[i] = (q[0] * ystr[0] + (q[1] * d[4] + ph[3]) * ystr[1]
                  + (q[2] * d[5] + ph[4]) * ystr[2] + (q[3] * d[6] + ph[5]) * ystr[3])
    if cs == 1:
        for i in range(m):
            dd = y + off[i]
            if t == NULL:
                for co in range(G * Mg):
                    dd[co] = bias[co]
                continue
            tr = t + i * ldc
            for g in range(G):
                for mm in range(Mg):
                    dd[g * Mg + mm] = tr[g * gw + mm] + bias[g * Mg + mm]
        return
    # blocks of _WRITE_ROWS rows: their tile lines stay in L1 while every channel is written
    cdef int64_t i0 = 0, i1
    while i0 < m:
        i1 = min(m, i0 + _WRITE_ROWS)
        for g in range(G):
            for mm in range(Mg):
                co = g * Mg + mm
                bc = bias[co]
                dd = y + co * cs
                if t == NULL:
                    for i in range(i0, i1):
                        dd[off[i]] = bc
                    continue
                col = g * gw + mm
                for i in range(i0, i1):
                    dd[off[i]] = t[i * ldc + col] + bc
        i0 = i1


cdef void _task(int isa, const real* x, const real* zero, const real* wp, const real* bias,
                real* y, const int64_t* ph, const int64_t* tap_e, int64_t r0, int64_t m,
                const int64_t* d, const int64_t* ystr, real* t, const real** ptr,
                int64_t* off) noexcept nogil:
    # Rows r0..r0+m of the phase ph: blocks of TB taps (pointers looked up once per block),
    # chunks of CC channels, then per group and panel the MR-row sub-tiles.
    cdef int64_t G = d[7], Cg = d[8], NP = d[10], CC = d[12], TB = d[13], ldc = d[15]
    cdef int64_t NR = ldc // (G * NP), T = ph[7]
    cdef int64_t mpad = (m + CONVT_MR - 1) // CONVT_MR * CONVT_MR
    cdef int64_t t0, nt, c0, kc, g, jp, ir
    cdef const real* panel
    cdef bint first = True
    if T == 0:
        _write(NULL, ldc, bias, y, ph, r0, m, d, ystr, off)
        return
    t0 = 0
    while t0 < T:
        nt = min(TB, T - t0)
        _pointers(x, zero, ph, tap_e, t0, nt, r0, m, mpad, d, ptr)
        c0 = 0
        while c0 < Cg:
            kc = min(CC, Cg - c0)
            for g in range(G):
                for jp in range(NP):
                    # packed weights of the phase: [g][jp][tap][c][NR]
                    panel = wp + ph[8] + (((g * NP + jp) * T + t0) * Cg + c0) * NR
                    for ir in range(mpad // CONVT_MR):
                        _ukernel(isa, nt, kc, ptr + ir * CONVT_MR, mpad, g * Cg + c0, panel,
                                 Cg * NR, t + ir * CONVT_MR * ldc + (g * NP + jp) * NR, ldc,
                                 not first)
            first = False
            c0 += kc
        t0 += nt
    _write(t, ldc, bias, y, ph, r0, m, d, ystr, off)


cdef void _set_task(int isa, const real* x, const real* zero, const real* wp, const real* bias,
                    real* y, const int64_t* ph, int64_t nph, const int64_t* tap_e, int64_t r0,
                    int64_t m, const int64_t* d, const int64_t* ystr, real* t, const real** ptr,
                    int64_t* off) noexcept nogil:
    # Rows r0..r0+m (clipped to each phase's own rows) of the nph phases from ph, one after
    # the other: they share (c0, c1), so their outputs interleave on the same lines of y.
    cdef int64_t p, rows
    cdef const int64_t* pp
    for p in range(nph):
        pp = ph + PHASE_COLS * p
        rows = d[0] * pp[0] * pp[1] * pp[2]
        if r0 < rows:
            _task(isa, x, zero, wp, bias, y, pp, tap_e, r0, min(m, rows - r0), d, ystr, t,
                  ptr, off)


def micro_conv(const real[::1] x,             # IN  x channels-last, flat (N, I0, I1, I2, C_in)
               const real[::1] zero,          # IN  C_in zeros (the input of rows off the data)
               const real[::1] wp,            # IN  packed weights (pack_micro)
               const real[::1] bias,          # IN  (C_out,), zeros when there is none
               real[::1] y,                   # OUT addressed through ystr
               const int64_t[:, ::1] phases,  # IN  per phase: Q0..2, c0..2, first tap, taps,
                                              #     packed-weight offset
               const int64_t[::1] tap_e,      # IN  per tap: e per axis (input i = q + e)
               const int64_t[:, ::1] tasks,   # IN  per task: first phase, phases, first
                                              #     row, rows (clipped per phase)
               const int64_t[::1] dims,       # IN  N, I0..2, s0..2, G, Cg, Mg, NP, C_in, CC,
                                              #     TB, MB, ldc
               const int64_t[::1] ystr,       # IN  y element strides (n, o0, o1, o2, channel)
               real[::1] tiles,               # OUT scratch: nthreads * MB * ldc values
               int64_t[::1] pointers,         # OUT scratch: nthreads * (MB * TB + MB) slots
                                              #     of 8 bytes (pointers, then row offsets)
               int isa, int num_threads):
    """Compute y; releases the GIL. See the module docstring."""
    cdef int64_t ntasks = tasks.shape[0], k, tid
    cdef int64_t MB = dims[14], TB = dims[13], ldc = dims[15]
    cdef const int64_t* tk
    if ntasks == 0:
        return
    cdef const real* xptr = &x[0]
    cdef const real* zptr = &zero[0]
    cdef const real* wptr = &wp[0]
    cdef const real* bptr = &bias[0]
    cdef real* yptr = &y[0]
    cdef const int64_t* pptr = &phases[0, 0]
    cdef const int64_t* te = &tap_e[0] if tap_e.shape[0] else NULL
    cdef const int64_t* tptr = &tasks[0, 0]
    cdef const int64_t* dm = &dims[0]
    cdef const int64_t* yst = &ystr[0]
    cdef real* tl = &tiles[0]
    cdef int64_t* pp = &pointers[0]
    cdef int64_t pstride = MB * TB + MB
    with nogil:
        for k in prange(ntasks, schedule="dynamic", num_threads=num_threads):
            tk = tptr + 4 * k
            tid = threadid()
            _set_task(isa, xptr, zptr, wptr, bptr, yptr, pptr + PHASE_COLS * tk[0], tk[1], te,
                      tk[2], tk[3], dm, yst, tl + tid * MB * ldc,
                      <const real**> (pp + tid * pstride), pp + tid * pstride + MB * TB)


cdef enum:
    _PACK_KB = 64    # kernel taps per transposed block in pack_micro


cdef void _pack_channel(const real* src, real* out, real* tmp, const int64_t* kd,
                        const int64_t* ks, int64_t g, int64_t c, int64_t Mg, int64_t KT,
                        int64_t NP, int64_t NR) noexcept nogil:
    # one input channel's (Mg, KT) weights -> its NR-value line in every (tap, panel)
    cdef int64_t Mgp = NP * NR, k0 = 0, kb, k, mm, jp, j
    cdef real* dst
    while k0 < KT:
        kb = min(<int64_t> _PACK_KB, KT - k0)
        for mm in range(Mg):
            for k in range(kb):
                tmp[k * Mgp + mm] = src[mm * KT + k0 + k]
        for k in range(kb):
            if kd[k0 + k] < 0:
                continue
            dst = out + kd[k0 + k] + g * NP * ks[k0 + k] + c * NR
            for jp in range(NP):
                for j in range(NR):
                    dst[jp * ks[k0 + k] + j] = tmp[k * Mgp + jp * NR + j]
        k0 += kb


PACK_KB = _PACK_KB


def pack_micro(const real[:, :, ::1] w,        # IN  IOX weights (C_in, Mg, prod(K))
               real[::1] out,                  # OUT packed, per phase [G][NP][tap][Cg][NR]
               const int64_t[::1] kdst,        # IN  per kernel tap: offset of its (group 0,
                                               #     panel 0, channel 0) line, -1 if unused
               const int64_t[::1] kstride,     # IN  per kernel tap: panel stride (T*Cg*NR)
               real[::1] scratch,              # IN  zeros, num_threads * PACK_KB * Mg padded
                                               #     to NR (the padding stays zero)
               int64_t groups, int64_t NR, int num_threads):
    """Pack the weights for micro_conv; releases the GIL. Per input channel (parallel), its
    (Mg, K) block is transposed in blocks of PACK_KB taps into the thread's (tap, Mg padded
    to NR) slice of the scratch, then each tap's NR-value lines are copied to their panels."""
    cdef int64_t C_in = w.shape[0], Mg = w.shape[1], KT = w.shape[2]
    cdef int64_t Cg = C_in // groups, NP = (Mg + NR - 1) // NR, Mgp = NP * NR
    cdef int64_t ci
    if C_in == 0 or Mg == 0 or KT == 0:
        return
    cdef const real* wptr = &w[0, 0, 0]
    cdef real* optr = &out[0]
    cdef real* tmp = &scratch[0]
    cdef const int64_t* kd = &kdst[0]
    cdef const int64_t* ks = &kstride[0]
    with nogil:
        for ci in prange(C_in, schedule="static", num_threads=num_threads):
            _pack_channel(wptr + ci * Mg * KT, optr, tmp + threadid() * _PACK_KB * Mgp, kd, ks,
                          ci // Cg, ci % Cg, Mg, KT, NP, NR)
