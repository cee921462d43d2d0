"""Direct transposed convolution as per-phase GEMMs on BLAS (scipy.linalg.cython_blas).

Phase decomposition (DESIGN.md): output o = q*s + c. For phase c every tap k with
(c + pb - k*d) divisible by s reads input i = q + e, e = (c + pb - k*d) / s, for all q of the
phase at once. With the input padded by a zero halo to a grid (P0, P1, P2), that is ONE
matrix: the pixels of the grid from flat offset xoff(tap). So a block of a phase's rows is
sum over its taps of  T[rows, C_out] (+)= Xp[xoff + r0 + 0..m, :] @ W_tap, a plain GEMM
accumulated in place with beta = 1: no column buffer, no multiply by an inserted zero. Rows
whose grid position is not a real output of the phase (the halo part of each row) are
computed and never read; the planner bounds that waste.

A grid task covers a set of consecutive phases (all of them, or those sharing (c0, c1)) and
runs "ops": one GEMM per group over the run of phases j1..j1+nj-1 whose taps read the same
input offset, their weights side by side (merged per geometry by convt._backends.direct.gemm), so a
K = s upsampling layer is ONE GEMM with N = phases x C_out. Channels-last data: xp is
(N, P0, P1, P2, C_in) and the tile pixel-major; channels-first data: xp is (N, C_in, P0, P1,
P2), tasks stay within one image and the tile is channel-major, so neither layout is ever
transposed. The tile plus the bias is then written into y's own layout (element strides).
Batch-rows mode (small images, large batch, channels-last grid): a task is one output
position q of a phase, its GEMMs have M = N (row stride one image of the grid) and skip the
taps whose input q + e lies in the halo.

Threads: tasks are planned in Python independently of the thread count; an OpenMP prange
hands them out; each thread owns one tile in its slice of the scratch and runs its GEMMs
single-threaded (the caller sets BLAS to one thread, so the two thread pools never compete).
Every output is written by exactly one task, with no scatter pass and no atomics, and summed
in a fixed order (ops, then BLAS's fixed K blocking): bit-identical for any thread count.

Assumes: xp, w (packed (G, K0, K1, K2, Cg, Mg)) and wm (merged) flat and in range of every
op and tap; scratch holds nthreads * tile values; task rows within their set's rows (and one
image when channels-first) or positions (batch mode); y addressed with element strides
ystr = (n, o0, o1, o2, channel); phases no tap reaches are written (bias) by bias tasks.
"""
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t
from scipy.linalg.cython_blas cimport dgemm, sgemm

from ._types cimport real

cdef extern from "_writeout.h" nogil:
    void convt_zip2_f32(int isa, const float* a, const float* b, float bias, float* y,
                        int64_t n)
    void convt_zip2_f64(int isa, const double* a, const double* b, double bias, double* y,
                        int64_t n)

from . import _cpu

# Task kinds (column 3 of the task table; convt._backends.direct.gemm writes the same values).
cdef enum:
    _GRID = 0    # grid rows of a set of consecutive phases (column 0: the set)
    _BIAS = 1    # output rows of one phase that no tap reaches
    _BATCH = 2   # one output position of one phase, all images (batch-rows mode)
    _MAX_SET = 64  # phases per set: the write-outs keep per-phase tables on the stack


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


cdef inline void _write_row(const real* t, const real* bias, real* dst, int64_t count,
                            int64_t step, int64_t C_out, int64_t cs) noexcept nogil:
    # count consecutive tile rows (C_out values each) -> y positions dst + j*step
    cdef int64_t j, co
    cdef real* d
    cdef real bc
    if cs == 1:
        for j in range(count):
            d = dst + j * step
            for co in range(C_out):
                d[co] = t[j * C_out + co] + bias[co]
    else:
        for co in range(C_out):
            d = dst + co * cs
            bc = bias[co]
            for j in range(count):
                d[j * step] = t[j * C_out + co] + bc


cdef inline void _write_bias(const real* bias, real* dst, int64_t count, int64_t step,
                             int64_t C_out, int64_t cs) noexcept nogil:
    cdef int64_t j, co
    for j in range(count):
        for co in range(C_out):
            dst[j * step + co * cs] = bias[co]


cdef inline void _gemm_cf(int m, int n, int k, const real* a, int lda, const real* b,
                          int ldb, real* c, int ldc, real beta) noexcept nogil:
    # Column-major C[m, n] (+)= A[m, k] @ B[k, n]: channels-first input (A's columns are
    # channel planes, lda = one image of the grid), the row-major (k, n) weights read as a
    # transposed column-major operand, and a channel-major tile (C's columns are channels).
    # Only the small weight operand is transposed (BLAS packs it anyway; a transposed input
    # operand slows it: docs/performance.md, "Figures moved out of code comments").
    cdef char nt = b"N"
    cdef char tr = b"T"
    cdef real one = 1
    if real is float:
        sgemm(&nt, &tr, &m, &n, &k, &one, <float*> a, &lda, <float*> b, &ldb, &beta, c, &ldc)
    else:
        dgemm(&nt, &tr, &m, &n, &k, &one, <double*> a, &lda, <double*> b, &ldb, &beta, c,
              &ldc)


cdef void _grid_task(int isa, const real* xp, const real* wm, const real* bias, real* y, real* t,
                     const int64_t* ph, const int64_t* st, const int64_t* ops, int64_t r0,
                     int64_t m, const int64_t* d, const int64_t* ystr,
                     int64_t R) noexcept nogil:
    # Grid rows r0..r0+m of a set of consecutive phases ph[0..nset) (st: first phase, nset,
    # first op, nops). Each op is one GEMM per group over the phases j1..j1+nj-1, which all
    # have a tap reading input offset xoff: their weights sit side by side in wm, so an
    # upsampling layer with K = s (one tap per phase) runs ONE GEMM with N = phases x C_out.
    # Tile column of (phase j, channel g*Mg + m): g*nset*Mg + j*Mg + m. Channels-last data:
    # xp is (N, P0, P1, P2, C_in), the tile pixel-major (row stride nset*C_out). Channels-
    # first data: xp is (N, C_in, P0, P1, P2), a task stays within one image, and the tile
    # is channel-major (column stride R): the GEMM and the write-out then both run without
    # a transpose in either layout.
    # d: N, P0, P1, P2, s0, s1, s2, G, Cg, Mg, C_in, gstride, H0..2, I0..2, batch, cf
    cdef int64_t P0 = d[1], P1 = d[2], P2 = d[3], img = P0 * P1 * P2
    cdef int64_t G = d[7], Cg = d[8], Mg = d[9], C_in = d[10]
    cdef int64_t nset = st[1], C_out = G * Mg, width = nset * Mg
    cdef int64_t k, g, run, nn, col, last
    cdef bint pixel_major = not d[19]
    cdef int64_t n0 = r0 // img
    cdef const int64_t* op
    cdef const real* a
    cdef const real* b
    for k in range(st[3]):
        op = ops + 6 * (st[2] + k)     # xoff, woff, j1, nj, beta, rows in one image
        nn = op[3] * Mg
        # rows past the last output of the op's phases are not needed (and could read
        # past the grid): the last image's, or this task's image's (channels first)
        last = op[5] + (n0 if not pixel_major else d[0] - 1) * img
        run = min(m, last - r0)
        if run <= 0:
            continue
        for g in range(G):
            b = wm + op[1] + g * Cg * nn
            col = g * width + op[2] * Mg
            if pixel_major:
                a = xp + (op[0] + r0) * C_in + g * Cg
                _gemm(<int> run, <int> nn, <int> Cg, a, <int> C_in, b, <int> nn, t + col,
                      <int> (G * width), <real> op[4])
            else:
                a = xp + (n0 * C_in + g * Cg) * img + r0 - n0 * img + op[0]
                _gemm_cf(<int> run, <int> nn, <int> Cg, a, <int> img, b, <int> nn,
                         t + col * R, <int> R, <real> op[4])
    if pixel_major:
        _write_nxc(t, r0, m, bias, ph, nset, y, d, ystr)
    else:
        _write_ncx(isa, t, R, r0, m, bias, ph, nset, y, d, ystr)


cdef inline int64_t _slots(const int64_t* ph, int64_t nset, int64_t r, int64_t r_end,
                           const int64_t* d, const int64_t* ystr, int64_t* run,
                           int64_t* lim, int64_t* off, int64_t* colj,
                           bint* taps) noexcept nogil:
    # Grid row r = ((n*P0 + v0)*P1 + v1)*P2 + v2 starts a run of grid positions along the
    # last axis (returned in run). Per phase j with outputs on it (v < Q, compacted into the
    # first jj slots, jj returned): how many (lim), where in y (off: the element of
    # (n, v0*s0 + c0, v1*s1 + c1, v2*s2 + c2) at channel 0), its tile column (colj), taps.
    cdef int64_t P0 = d[1], P1 = d[2], P2 = d[3]
    cdef int64_t v2 = r % P2, v1 = (r // P2) % P1, v0 = (r // (P2 * P1)) % P0
    cdef int64_t n = r // (P2 * P1 * P0), j, jj = 0
    cdef const int64_t* pj
    run[0] = min(P2 - v2, r_end - r)
    for j in range(nset):
        pj = ph + 8 * j
        if v0 >= pj[0] or v1 >= pj[1] or v2 >= pj[2]:
            continue
        lim[jj] = min(run[0], pj[2] - v2)
        off[jj] = (n * ystr[0] + (v0 * d[4] + pj[3]) * ystr[1] + (v1 * d[5] + pj[4]) * ystr[2]
                   + (v2 * d[6] + pj[5]) * ystr[3])
        colj[jj] = j * d[9]
        taps[jj] = pj[7] != 0
        jj += 1
    return jj


cdef void _write_nxc(const real* t, int64_t r0, int64_t m, const real* bias,
                     const int64_t* ph, int64_t nset, real* y, const int64_t* d,
                     const int64_t* ystr) noexcept nogil:
    # Channels-last y from a pixel-major tile (row stride nset*C_out): per grid position,
    # each phase's C_out values plus the bias, contiguous in both.
    cdef int64_t G = d[7], Mg = d[9], C_out = G * Mg, sx = d[6] * ystr[3]
    cdef int64_t ld = nset * C_out, r = r0, run, jj, i, j, g, mm, co
    cdef int64_t lim[_MAX_SET]
    cdef int64_t off[_MAX_SET]
    cdef int64_t colj[_MAX_SET]
    cdef bint taps[_MAX_SET]
    cdef real* dd
    cdef const real* tr
    cdef const real* tg
    while r < r0 + m:
        jj = _slots(ph, nset, r, r0 + m, d, ystr, &run, lim, off, colj, taps)
        for i in range(run):
            tr = t + (r - r0 + i) * ld
            for j in range(jj):
                if i >= lim[j]:
                    continue
                dd = y + off[j] + i * sx
                if not taps[j]:
                    for co in range(C_out):
                        dd[co] = bias[co]
                    continue
                for g in range(G):
                    tg = tr + g * nset * Mg + colj[j]
                    for mm in range(Mg):
                        dd[g * Mg + mm] = tg[mm] + bias[g * Mg + mm]
        r += run


cdef void _write_ncx(int isa, const real* t, int64_t R, int64_t r0, int64_t m,
                     const real* bias, const int64_t* ph, int64_t nset, real* y,
                     const int64_t* d, const int64_t* ystr) noexcept nogil:
    # Channels-first y from a channel-major tile (column stride R): channel by channel, all
    # of the task's rows, so each channel's writes sweep one region of its plane (the
    # hardware prefetcher follows; going position by position over all channels stalls on
    # store misses, one plane apart each). Per phase, a unit-stride tile read and a
    # stride-s2 write; the s2 phases that interleave on one output line follow each other,
    # so the line is completed while in L1. Stride 2 along a contiguous last axis: the two
    # phases c2 = 0, 1 of a line go out together, interleaved in vectors (convt_zip2).
    cdef int64_t G = d[7], Mg = d[9], cs = ystr[4], sx = d[6] * ystr[3]
    cdef int64_t r, run, jj, i, j, g, mm, co
    cdef bint zip2 = sx == 2 and ystr[3] == 1
    cdef const real* tb
    cdef const real* tc
    cdef int64_t lim[_MAX_SET]
    cdef int64_t off[_MAX_SET]
    cdef int64_t colj[_MAX_SET]
    cdef bint taps[_MAX_SET]
    cdef real* dd
    cdef const real* tg
    cdef real bc
    for g in range(G):
        for mm in range(Mg):
            co = g * Mg + mm
            bc = bias[co]
            r = r0
            while r < r0 + m:
                jj = _slots(ph, nset, r, r0 + m, d, ystr, &run, lim, off, colj, taps)
                tc = t + (g * nset * Mg + mm) * R + r - r0   # + colj[j] * R: phase j's run
                j = 0
                while j < jj:
                    dd = y + co * cs + off[j]
                    tg = tc + colj[j] * R
                    if (zip2 and j + 1 < jj and taps[j] and taps[j + 1]
                            and off[j + 1] == off[j] + 1 and lim[j + 1] == lim[j]):
                        tb = tc + colj[j + 1] * R
                        if real is float:
                            convt_zip2_f32(isa, tg, tb, bc, dd, lim[j])
                        else:
                            convt_zip2_f64(isa, tg, tb, bc, dd, lim[j])
                        j += 2
                        continue
                    if taps[j]:
                        for i in range(lim[j]):
                            dd[i * sx] = tg[i] + bc
                    else:
                        for i in range(lim[j]):
                            dd[i * sx] = bc
                    j += 1
                r += run


cdef void _bias_task(const real* bias, real* y, const int64_t* ph, int64_t r0, int64_t m,
                     const int64_t* d, const int64_t* ystr) noexcept nogil:
    # A phase no tap reaches: rows r0..r0+m of its (N, Q0, Q1) output rows hold the bias.
    cdef int64_t r, q1, q0, n, C_out = d[7] * d[9]
    for r in range(r0, r0 + m):
        q1 = r % ph[1]
        q0 = (r // ph[1]) % ph[0]
        n = r // (ph[1] * ph[0])
        _write_bias(bias, y + (n * ystr[0] + (q0 * d[4] + ph[3]) * ystr[1]
                               + (q1 * d[5] + ph[4]) * ystr[2] + ph[5] * ystr[3]),
                    ph[2], d[6] * ystr[3], C_out, ystr[4])


cdef void _batch_task(const real* xp, const real* w, const real* bias, real* y, real* t,
                      const int64_t* ph, int64_t pos, const int64_t* xoff,
                      const int64_t* woff, const int64_t* tap_e, const int64_t* d,
                      const int64_t* ystr) noexcept nogil:
    # Output position pos = (q0*Q1 + q1)*Q2 + q2 of the phase, all N images at once: GEMMs with
    # M = N over the taps whose input lies inside the data (d[12..14] = H, d[15..17] = I).
    cdef int64_t P0 = d[1], P1 = d[2], P2 = d[3], G = d[7], Cg = d[8], Mg = d[9]
    cdef int64_t N = d[0], C_in = d[10], gstride = d[11], C_out = G * Mg
    cdef int64_t img = P0 * P1 * P2, tp, g, a, e, n, vq
    cdef int64_t qq[3]
    cdef const int64_t* xo = xoff + ph[6]
    cdef const int64_t* wo = woff + ph[6]
    cdef const int64_t* te = tap_e + 3 * ph[6]
    cdef bint first = True, inside
    qq[2] = pos % ph[2]
    qq[1] = (pos // ph[2]) % ph[1]
    qq[0] = pos // (ph[2] * ph[1])
    vq = (qq[0] * P1 + qq[1]) * P2 + qq[2]
    for tp in range(ph[7]):
        inside = True
        for a in range(3):
            e = qq[a] + te[3 * tp + a]          # tap_e holds e + H: data at H <= . < H + I
            if e < d[12 + a] or e >= d[12 + a] + d[15 + a]:
                inside = False
        if not inside:
            continue
        for g in range(G):
            _gemm(<int> N, <int> Mg, <int> Cg, xp + (vq + xo[tp]) * C_in + g * Cg,
                  <int> (img * C_in), w + g * gstride + wo[tp], <int> Mg, t + g * Mg,
                  <int> C_out, 0 if first else 1)
        first = False
    cdef real* dst = y + ((qq[0] * d[4] + ph[3]) * ystr[1] + (qq[1] * d[5] + ph[4]) * ystr[2]
                          + (qq[2] * d[6] + ph[5]) * ystr[3])
    for n in range(N):
        if first:
            _write_bias(bias, dst + n * ystr[0], 1, 0, C_out, ystr[4])
        else:
            _write_row(t + n * C_out, bias, dst + n * ystr[0], 1, 0, C_out, ystr[4])


def phase_gemm(const real[::1] xp,            # IN  padded input, flat (N, P0, P1, P2, C_in)
               const real[::1] w,             # IN  packed weights, flat (G, K0, K1, K2, Cg, Mg)
               const real[::1] wm,            # IN  per op, its phases' taps side by side
               const real[::1] bias,          # IN  (C_out,), zeros when there is none
               real[::1] scratch,             # OUT per-thread tiles, nthreads * tile values
               real[::1] y,                   # OUT output, flat, addressed through ystr
               const int64_t[:, ::1] phases,  # IN  per phase: Q0..2, c0..2, first tap, ntaps
               const int64_t[:, ::1] sets,    # IN  per set: first phase, nset, first op, nops
               const int64_t[:, ::1] ops,     # IN  per op: xoff, woff, j1, nj, beta, rows
               const int64_t[:, ::1] tasks,   # IN  per task: phase or set, first row, rows,
                                              #     kind
               const int64_t[::1] xoff,       # IN  per tap: flat pixel offset in the grid
               const int64_t[::1] woff,       # IN  per tap: offset of W_tap in group 0
               const int64_t[::1] tap_e,      # IN  per tap: e + H per axis (3 values)
               const int64_t[::1] dims,       # IN  N, P0..2, s0..2, G, Cg, Mg, C_in, gstride,
                                              #     H0..2, I0..2, batch_rows, channel-major
               const int64_t[::1] ystr,       # IN  y element strides (n, o0, o1, o2, channel)
               int64_t tile_rows,             # IN  rows of a grid task's tile
               int64_t tile,                  # IN  scratch values per thread
               int num_threads,
               int isa=-1):                   # IN  write-out: level (_cpu), -1 _cpu.ISA
    """Compute y; releases the GIL. See the module docstring."""
    cdef int64_t ntasks = tasks.shape[0], k
    cdef const int64_t* ph
    cdef const int64_t* tk
    if ntasks == 0:
        return
    if isa < 0:
        isa = _cpu.ISA
    cdef const real* xptr = &xp[0]
    cdef const real* wptr = &w[0]
    cdef const real* wmptr = &wm[0]
    cdef const int64_t* sptr_ = &sets[0, 0] if sets.shape[0] else NULL
    cdef const int64_t* optr = &ops[0, 0] if ops.shape[0] else NULL
    cdef const int64_t* stk
    cdef const real* bptr = &bias[0]
    cdef real* sptr = &scratch[0]
    cdef real* yptr = &y[0]
    cdef const int64_t* pptr = &phases[0, 0]
    cdef const int64_t* tptr = &tasks[0, 0]
    cdef const int64_t* xo = &xoff[0] if xoff.shape[0] else NULL
    cdef const int64_t* wo = &woff[0] if woff.shape[0] else NULL
    cdef const int64_t* te = &tap_e[0] if tap_e.shape[0] else NULL
    cdef const int64_t* dm = &dims[0]
    cdef const int64_t* yst = &ystr[0]
    with nogil:
        for k in prange(ntasks, schedule="dynamic", num_threads=num_threads):
            tk = tptr + 4 * k
            ph = pptr + 8 * tk[0]      # (a set index for grid tasks: ph unused there)
            if tk[3] == _BIAS:
                _bias_task(bptr, yptr, ph, tk[1], tk[2], dm, yst)
            elif tk[3] == _BATCH:
                _batch_task(xptr, wptr, bptr, yptr, sptr + threadid() * tile, ph, tk[1],
                            xo, wo, te, dm, yst)
            else:
                stk = sptr_ + 4 * tk[0]
                _grid_task(isa, xptr, wmptr, bptr, yptr, sptr + threadid() * tile,
                           pptr + 8 * stk[0], stk, optr, tk[1], tk[2], dm, yst, tile_rows)
