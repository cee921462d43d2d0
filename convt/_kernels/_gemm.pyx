"""Direct transposed convolution as per-phase GEMMs on BLAS (scipy.linalg.cython_blas).

Phase decomposition (DESIGN.md): output o = q*s + c. For phase c every tap k with
(c + pb - k*d) divisible by s reads input i = q + e, e = (c + pb - k*d) / s, for all q of the
phase at once. With the input stored channels-last and padded by a zero halo to a grid
(P0, P1, P2), that is ONE matrix: the pixels of the grid from flat offset xoff(tap), rows of
length C_in. So a block of a phase's rows is sum over its taps of
    T[m, C_out] (+)= Xp[xoff + r0 + 0..m, :] @ W_tap,
a plain GEMM (lda = C_in, ldc = C_out) accumulated in place with beta = 1: no column buffer,
no multiply by an inserted zero. Rows whose grid position is not a real output of the phase
(the halo part of each row) are computed and never read; the planner bounds that waste.
Batch-rows mode (small images, large batch): a task is one output position q of a phase, its
GEMMs have M = N (row stride one image of the grid) and skip the taps whose input q + e lies in
the halo, so no multiply-add touches a zero.

Tasks: (phase, first row, rows) blocks, planned in Python independently of the thread count.
An OpenMP prange hands them out; each thread owns a tile T of at most max_rows * C_out values
in its slice of the scratch, runs its GEMMs single-threaded (the caller sets BLAS to one
thread, so the two thread pools never compete), and writes T + bias into y's own layout
(channels first or last, through element strides): every output is written by exactly one
task, with no scatter pass and no atomics. The sum of each output is taken in a fixed order
(taps, then BLAS's fixed K blocking), so results are bit-identical for any thread count.

Assumes: xp the padded input (N, P0, P1, P2, C_in) flattened; w the packed weights
(G, K0, K1, K2, Cg, Mg) flattened; scratch holds nthreads * tile elements; task rows within
their phase's rows (grid mode) or positions (batch mode); tap tables in range; y addressed
with element strides ystr = (n, o0, o1, o2, channel); phases with no task hold only the bias,
written by their own tasks (ntaps = 0).
"""
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t
from scipy.linalg.cython_blas cimport dgemm, sgemm

from ._types cimport real

# Task kinds (column 3 of the task table; convt._phase_gemm writes the same values).
cdef enum:
    _GRID = 0    # grid rows of the s2 phases sharing (c0, c1), first of them in column 0
    _BIAS = 1    # output rows of one phase that no tap reaches
    _BATCH = 2   # one output position of one phase, all images (batch-rows mode)
    _MAX_SET = 64  # phases per set handled by the interleaving channels-first write-out


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


cdef inline void _gemm_cm(int m, int n, int k, const real* a, int lda, const real* b,
                          int ldb, real* c, int ldc, real beta) noexcept nogil:
    # Channel-major tile: C[n, m] (row-major, ldc) (+)= (A[m, k] @ B[k, n])^T, i.e. the
    # column-major m x n product of two row-major operands, both read transposed.
    cdef char tr = b"T"
    cdef real one = 1
    if real is float:
        sgemm(&tr, &tr, &m, &n, &k, &one, <float*> a, &lda, <float*> b, &ldb, &beta,
              c, &ldc)
    else:
        dgemm(&tr, &tr, &m, &n, &k, &one, <double*> a, &lda, <double*> b, &ldb, &beta,
              c, &ldc)


cdef void _grid_task(const real* xp, const real* w, const real* bias, real* y, real* t,
                     const int64_t* ph, int64_t nset, int64_t r0, int64_t m,
                     const int64_t* xoff, const int64_t* woff, const int64_t* d,
                     const int64_t* ystr, int64_t R) noexcept nogil:
    # Grid rows r0..r0+m of the nset phases ph[0..nset) that differ only in their last-axis
    # residue c2 (all of them: nset = s2), so the write-out fills whole output lines.
    # Tile slot j holds phase j: pixel-major (R x C_out) for a channels-last y, channel-major
    # (C_out x R) for a channels-first y, so that the write-out never transposes: a
    # transposing write into channel planes (often 2^k bytes apart, one cache set) measured
    # 2x slower than the whole GEMM on U-Net layers.
    # d: N, P0, P1, P2, s0, s1, s2, G, Cg, Mg, C_in, gstride
    cdef int64_t N = d[0], P0 = d[1], P1 = d[2], P2 = d[3], s2 = d[6]
    cdef int64_t G = d[7], Cg = d[8], Mg = d[9], C_in = d[10], gstride = d[11]
    cdef int64_t C_out = G * Mg, slot = R * C_out
    cdef int64_t j, tp, g, mj, r, r_end = r0 + m, v2, v1, v0, n, run, q2max = 0
    cdef bint last = not d[19]    # pixel-major tile (d[19] = 1: channel-major)
    cdef const int64_t* pj
    cdef const real* a
    cdef const real* b
    for j in range(nset):
        pj = ph + 8 * j
        q2max = max(q2max, pj[2])
        if pj[7] == 0 or pj[2] == 0:
            continue
        # this phase's own last grid row: reads past it could leave the grid
        mj = min(m, (((N - 1) * P0 + pj[0] - 1) * P1 + pj[1] - 1) * P2 + pj[2] - r0)
        if mj <= 0:
            continue
        for tp in range(pj[7]):
            for g in range(G):
                a = xp + (xoff[pj[6] + tp] + r0) * C_in + g * Cg
                b = w + g * gstride + woff[pj[6] + tp]
                if last:
                    _gemm(<int> mj, <int> Mg, <int> Cg, a, <int> C_in, b, <int> Mg,
                          t + j * slot + g * Mg, <int> C_out, 0 if tp == 0 else 1)
                else:
                    _gemm_cm(<int> mj, <int> Mg, <int> Cg, a, <int> C_in, b, <int> Mg,
                             t + j * slot + g * Mg * R, <int> R, 0 if tp == 0 else 1)
    # Grid row r = ((n*P0 + v0)*P1 + v1)*P2 + v2 is output q = v of a phase when v < Q.
    r = r0
    while r < r_end:
        v2 = r % P2
        v1 = (r // P2) % P1
        v0 = (r // (P2 * P1)) % P0
        n = r // (P2 * P1 * P0)
        run = min(P2 - v2, r_end - r)
        if v0 < ph[0] and v1 < ph[1] and v2 < q2max:
            run = min(run, q2max - v2)
            _write_lines(t, r - r0, R, bias, ph, nset, last,
                         y + (n * ystr[0] + (v0 * d[4] + ph[3]) * ystr[1]
                              + (v1 * d[5] + ph[4]) * ystr[2]), v2, run, s2, C_out, ystr)
        r += run


cdef inline void _write_lines(const real* t, int64_t row, int64_t R, const real* bias,
                              const int64_t* ph, int64_t nset, bint pixel_major,
                              real* dst, int64_t v2,
                              int64_t run, int64_t s2, int64_t C_out,
                              const int64_t* ystr) noexcept nogil:
    # Outputs o2 = (v2 + i)*s2 + c2 of the phases j (c2 = ph[8j + 5]) for i < run, where
    # v2 + i < Q2 of phase j: tile row `row + i` of slot j plus the bias (the bias alone for
    # a phase without taps). Both loops run along memory in y and in the tile.
    cdef int64_t i, j, co, cs = ystr[4], st = ystr[3], slot = R * C_out
    cdef const int64_t* pj
    cdef real* dd
    cdef const real* tj
    cdef real bc
    if cs == 1:
        for i in range(run):
            for j in range(nset):
                pj = ph + 8 * j
                if v2 + i >= pj[2]:
                    continue
                dd = dst + ((v2 + i) * s2 + pj[5]) * st
                tj = t + j * slot + (row + i) * C_out
                if pj[7]:
                    for co in range(C_out):
                        dd[co] = tj[co] + bias[co]
                else:
                    for co in range(C_out):
                        dd[co] = bias[co]
        return
    # channels first: per channel, the run's outputs in memory order (all phases of one
    # position, then the next), so each line of y is completed by consecutive stores. The
    # phase rows are copied to the stack first: no table reads in the store loop.
    cdef int64_t lim[_MAX_SET]
    cdef int64_t off[_MAX_SET]
    cdef bint taps[_MAX_SET]
    cdef int64_t k, cb, ce
    cdef real* dc
    cdef const real* tc
    if pixel_major:
        # channels first from a pixel-major tile: a blocked transpose, 8 channels (8 output
        # streams, within any L1's associativity) at a time, stores in memory order
        cb = 0
        while cb < C_out:
            ce = min(C_out, cb + 8)
            for i in range(run):
                for j in range(nset):
                    pj = ph + 8 * j
                    if v2 + i >= pj[2]:
                        continue
                    dd = dst + ((v2 + i) * s2 + pj[5]) * st
                    tj = t + j * slot + (row + i) * C_out
                    if pj[7]:
                        for co in range(cb, ce):
                            dd[co * cs] = tj[co] + bias[co]
                    else:
                        for co in range(cb, ce):
                            dd[co * cs] = bias[co]
            cb = ce
        return
    if nset > _MAX_SET:
        for co in range(C_out):
            for j in range(nset):
                _write_one_phase(t + j * slot + co * R + row, bias[co], ph + 8 * j,
                                 dst + co * cs, v2, run, s2 * st, st)
        return
    for j in range(nset):
        lim[j] = min(run, ph[8 * j + 2] - v2)
        off[j] = ph[8 * j + 5] * st
        taps[j] = ph[8 * j + 7] != 0
    for co in range(C_out):
        bc = bias[co]
        dc = dst + co * cs + v2 * s2 * st
        tc = t + co * R + row
        for i in range(run):
            dd = dc + i * s2 * st
            for j in range(nset):
                if i < lim[j]:
                    dd[off[j]] = tc[j * slot + i] + bc if taps[j] else bc


cdef inline void _write_one_phase(const real* t, real bc, const int64_t* pj, real* dst,
                                  int64_t v2, int64_t run, int64_t step,
                                  int64_t st) noexcept nogil:
    cdef int64_t i, cnt = min(run, pj[2] - v2)
    cdef real* dd = dst + (v2 * (step // st) + pj[5]) * st
    for i in range(cnt):
        dd[i * step] = t[i] + bc if pj[7] else bc


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
               const real[::1] bias,          # IN  (C_out,), zeros when there is none
               real[::1] scratch,             # OUT per-thread tiles, nthreads * tile values
               real[::1] y,                   # OUT output, flat, addressed through ystr
               const int64_t[:, ::1] phases,  # IN  per phase: Q0..2, c0..2, first tap, ntaps
               const int64_t[:, ::1] tasks,   # IN  per task: phase, first row, rows, kind
               const int64_t[::1] xoff,       # IN  per tap: flat pixel offset in the grid
               const int64_t[::1] woff,       # IN  per tap: offset of W_tap in group 0
               const int64_t[::1] tap_e,      # IN  per tap: e + H per axis (3 values)
               const int64_t[::1] dims,       # IN  N, P0..2, s0..2, G, Cg, Mg, C_in, gstride,
                                              #     H0..2, I0..2, batch_rows (0 / 1)
               const int64_t[::1] ystr,       # IN  y element strides (n, o0, o1, o2, channel)
               int64_t tile_rows,             # IN  rows of one phase's slot in a tile
               int64_t tile,                  # IN  scratch values per thread
               int num_threads):
    """Compute y; releases the GIL. See the module docstring."""
    cdef int64_t ntasks = tasks.shape[0], k
    cdef const int64_t* ph
    cdef const int64_t* tk
    if ntasks == 0:
        return
    cdef const real* xptr = &xp[0]
    cdef const real* wptr = &w[0]
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
            ph = pptr + 8 * tk[0]
            if tk[3] == _BIAS:
                _bias_task(bptr, yptr, ph, tk[1], tk[2], dm, yst)
            elif tk[3] == _BATCH:
                _batch_task(xptr, wptr, bptr, yptr, sptr + threadid() * tile, ph, tk[1],
                            xo, wo, te, dm, yst)
            else:
                _grid_task(xptr, wptr, bptr, yptr, sptr + threadid() * tile, ph, dm[6],
                           tk[1], tk[2], xo, wo, dm, yst, tile_rows)
