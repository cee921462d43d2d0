"""Direct transposed convolution for few channels per group (min(Cg, Mg) of 1-3: depthwise),
channels first: depthwise_ncx.

The channel contraction is degenerate, so the op is memory-bound (DESIGN.md): the kernel
reads x and w and writes y once, with a unit-stride innermost loop that gcc -O3 vectorises
(SSE2 baseline) and no table lookup inside it.

depthwise_ncx, channels first. The unit of work is a block of one output row (n, channel,
o0, o1, all o2 = q*s2 + c of the block's q range [qa, qa + QB)); a task is 64 consecutive
units in the order (n, channel, o0, block, o1), with axis 1's rows phase by phase (rows1).
The taps of axes 0 and 1 come from the phase tables (as in convt._kernels._direct); on the
innermost axis each phase c has the taps (k2, e) with input i2 = q + e. Over the q where
every tap of the phase is in range (the interior, planned in Python) output q is
    d[q] = bias + w_0 * x_0[q + e_0] + w_1 * x_1[q + e_1] + ...
taken in chunks of up to 4 taps, each chunk one unit-stride loop over q into a contiguous
phase buffer (the row of y itself when s2 == 1); the border q check each tap's range. The
buffers are then interleaved into y's row. Phases without taps hold the bias. When the CPU has
AVX2 and FMA and s2 is 1 or 2, _dwkernel.h's row kernel runs instead: both phases in one
pass, vectors interleaved straight into y, masked vectors on the borders, one fused
multiply-add per tap; and one call takes a run of rows (rows1[k, 1]: row o1 + s1 after row
o1 with the same taps, one input row further), whose terms are built once. With s2 >= 3 the
row kernel takes the phases one by one (as a stride-1 row) into the phase buffers, which are
then interleaved, with no runs: the portable loop's borders, a scalar loop over every tap of
the phase with a branch per tap, take most of the time of long dilated kernels (1-D, 225-367
taps, strides 3-4), which the row kernel's masked vectors take far faster
(docs/dispatch.md, "The random sweep (issue 38)"). On depthwise_bilinear the row kernel, with
its runs of rows and masked borders, is faster than the portable loop on 1 and on 2 threads
(docs/performance.md, "Figures moved out of code comments"). The two kernels agree to
rounding; each is bit-identical across thread counts.

Channels-last layers with 2-3 channels per group run here on transposed data
(convt._backends.direct.depthwise); with one channel per group, _depthwise_nxc.pyx's kernel runs them.

16-bit storage (float32 compute; convt._backends.direct.depthwise passes x16 / y16): a task
widens the input rows its rows read (per input channel of the group, the rows of axis 0 an
output row's taps reach, whole) into the thread's copy, kept while the next rows read the
same (the thread's next task mostly does), and reads them there; a run of rows (at most
_YBUF values) is computed into the thread's float32 rows, then rounded into the 16-bit y
(_half.h; whole 64-byte lines streamed with stream set, _halfstream.h). The sums are the
float32 call's, so the bits are its result rounded by astype, without a float32 x or y.
The portable loop's helpers are in _dwloop.pxd.

Every output is written by exactly one task and its sum is always taken in the same order
(bias, then input channel, tap of axis 0, axis 1, axis 2), so the result is bit-identical for
any thread count. Per-thread scratch (tap lists, phase buffers) is allocated once per thread.

Assumes (the caller guarantees; the kernel does not check): x, y, w, bias C-contiguous in the
shapes of the `def` signature; tab_a (O_a, 3) rows (k_first, i_first, count) of taps in
range, steps = (kstep0, istep0, kstep1, istep1, kstep2, istep2); phases (s2, 5) rows
(Q, q_lo, q_hi, first tap, number of taps) with Q = ceil((O2 - c) / s2) (0 when c >= O2) and
every tap of the phase in range for q_lo <= q < q_hi; ptaps (.., 2) rows (k2, e); Cg >= 1.
"""
from cython.parallel cimport parallel, prange
from libc.stdint cimport int64_t, uint16_t
from libc.stdlib cimport free, malloc

from ._types cimport real
from ._dwloop cimport _border, _chunk, _interleave

cdef extern from "_dwkernel.h" nogil:
    int CONVT_DW_HAVE_AVX2
    void convt_dw_row_f32(int isa, int row4, float* y, int64_t s2, int64_t qa, const int64_t* qe,
                          const int64_t* lo, const int64_t* hi, const int64_t* nt,
                          const float* x, const int64_t* off, const int64_t* e, const float* w,
                          int64_t I2, float b, int64_t nrows, int64_t xstep, int64_t ystep,
                          int stream)
    void convt_dw_row_f64(int isa, int row4, double* y, int64_t s2, int64_t qa, const int64_t* qe,
                          const int64_t* lo, const int64_t* hi, const int64_t* nt,
                          const double* x, const int64_t* off, const int64_t* e,
                          const double* w, int64_t I2, double b, int64_t nrows, int64_t xstep,
                          int64_t ystep, int stream)
    void convt_dw_fence()
    void convt_dw_probe(int isa, const float* src, float* dst, int64_t n, int64_t r)

cdef extern from "_half.h" nogil:
    void convt_widen(int isa, int kind, const uint16_t* src, float* dst, int64_t n)
    void convt_narrow(int isa, int kind, const float* src, uint16_t* dst, int64_t n)

cdef extern from "_halfstream.h" nogil:
    void convt_narrow_stream(int isa, int kind, const float* src, uint16_t* dst, int64_t n)

from . import _cpu

# Output rows (blocks) per channels-first task: enough to amortise decoding the task index
# and give runs their length (docs/performance.md, "Figures moved out of code comments").
DEF _ROWS_PER_TASK = 64
ROWS_PER_TASK = _ROWS_PER_TASK   # for the cost model (convt._backends.direct.depthwise)
# Float32 values of a thread's rows of a 16-bit y (a run of rows computed there, then rounded
# into y): 16 KiB, half of L1, so they are still there when rounded.
DEF _YBUF = 4096


cdef int64_t _terms(const real* w, const int64_t* arow, int64_t na, const int64_t* ph,
                    const int64_t* pt, int64_t wstride, int64_t* off, int64_t* te,
                    real* wv) noexcept nogil:
    # The taps of one phase over the na (x row, w) offsets of arow, rows first: input offset
    # of output q = 0, innermost-axis shift e, weight. Returns how many.
    cdef int64_t a, t, nt = 0
    cdef const int64_t* tp = pt + 2 * ph[3]
    for a in range(na):
        for t in range(ph[4]):
            te[nt] = tp[2 * t + 1]
            off[nt] = arow[2 * a] + te[nt]
            wv[nt] = w[arow[2 * a + 1] + tp[2 * t] * wstride]
            nt += 1
    return nt


cdef void _phase(real* d, const real* x, const real* w, const int64_t* arow, int64_t na,
                 const int64_t* ph, const int64_t* pt, int64_t qa, int64_t qe, real b,
                 int64_t wstride, int64_t I2, int64_t* off, int64_t* te,
                 real* wv) noexcept nogil:
    # One phase of one row block: d[q - qa] for qa <= q < qe. arow: na (x row, w) offsets.
    cdef int64_t a, t, lo, hi, c
    cdef int64_t nt = _terms(w, arow, na, ph, pt, wstride, off, te, wv)
    if nt == 0:
        for a in range(qe - qa):
            d[a] = b
        return
    lo = ph[1] if ph[1] > qa else qa
    hi = ph[2] if ph[2] < qe else qe
    if lo >= hi:
        _border(d, x, off, te, wv, nt, qa, qe, qa, I2, b)
        return
    _border(d, x, off, te, wv, nt, qa, lo, qa, I2, b)
    _border(d, x, off, te, wv, nt, hi, qe, qa, I2, b)
    for t in range(nt):           # offsets of the interior's first output
        off[t] += lo
    for c in range(0, nt, 4):
        _chunk(d + lo - qa, x, off + c, wv + c, <int>(nt - c if nt - c < 4 else 4), hi - lo,
               c == 0, b)


cdef void _row_avx2(real* yr, const real* x, const real* w, const int64_t* arow, int64_t na,
                    const int64_t* phases, const int64_t* ptaps, int64_t qa, int64_t QB, real b,
                    int64_t wstride, int64_t I2, int64_t s2, int64_t nrows, int64_t ystep,
                    int64_t* off, int64_t* te, real* wv, int isa, int row4,
                    int stream) noexcept nogil:
    # nrows row blocks, s2 = 1 or 2, by _dwkernel.h at level isa (1 AVX2, 2 AVX-512; phases'
    # terms laid out one after the other): row r at yr + r*ystep with every term one input
    # row (I2) further than row r-1's.
    cdef int64_t qe[2]
    cdef int64_t lo[2]
    cdef int64_t hi[2]
    cdef int64_t nt[2]
    cdef int64_t c, first = 0
    for c in range(s2):
        qe[c] = min(qa + QB, phases[5 * c])
        lo[c] = phases[5 * c + 1]
        hi[c] = phases[5 * c + 2]
        nt[c] = _terms(w, arow, na, phases + 5 * c, ptaps, wstride, off + first, te + first,
                       wv + first)
        first += nt[c]
    if real is float:
        convt_dw_row_f32(isa, row4, yr, s2, qa, qe, lo, hi, nt, x, off, te, wv, I2, b, nrows, I2, ystep,
                         stream)
    else:
        convt_dw_row_f64(isa, row4, yr, s2, qa, qe, lo, hi, nt, x, off, te, wv, I2, b, nrows, I2, ystep,
                         stream)


cdef void _row_ncx(int64_t g, int64_t o0, int64_t o1, int64_t m, int64_t qb,
                   int64_t nrows, int64_t ystep, const real* x, int64_t xc0, int64_t xcs,
                   int64_t i0lo, const real* w, const real* bias, real* yr,
                   const int64_t* t0, const int64_t* t1,
                   const int64_t* st, const int64_t* phases, const int64_t* ptaps,
                   const int64_t* dims, int64_t* arow, int64_t* off, int64_t* te, real* wv,
                   real* buf, int stream) noexcept nogil:
    # Block qb of output row (n, g*Mg + m, o0, o1), at yr, and, by the AVX2 kernel, of the
    # nrows - 1 rows after it in its run (each ystep further, its taps one input row
    # further). Input channel g*Cg + ci, row (i0, i1) at x + (xc0 + ci) * xcs + (i0 - i0lo)
    # * I1 * I2 + i1 * I2 (x itself, or a thread's widened copy of the rows a 16-bit x's
    # block reads). dims: N, C_in, G, Cg, Mg, I0, I1, I2, O0, O1, O2, K0, K1, K2, s2, QB, nqb,
    # isa, stream, row4 (CONVT_DW_ROW4's level, 0 off)
    cdef int64_t Cg = dims[3], Mg = dims[4]
    cdef int64_t I1 = dims[6], I2 = dims[7]
    cdef int64_t O2 = dims[10]
    cdef int64_t K0 = dims[11], K1 = dims[12], K2 = dims[13]
    cdef int64_t s2 = dims[14], QB = dims[15]
    cdef int64_t co = g * Mg + m, qa = qb * QB, qe, c, ci, j0, j1, k0, k1, i0, i1, na = 0
    cdef int64_t wstride = Cg * Mg
    cdef real b = bias[co]
    for ci in range(Cg):
        for j0 in range(t0[3 * o0 + 2]):
            k0 = t0[3 * o0] + j0 * st[0]
            i0 = t0[3 * o0 + 1] - j0 * st[1]
            for j1 in range(t1[3 * o1 + 2]):
                k1 = t1[3 * o1] + j1 * st[2]
                i1 = t1[3 * o1 + 1] - j1 * st[3]
                arow[2 * na] = (xc0 + ci) * xcs + (i0 - i0lo) * I1 * I2 + i1 * I2
                arow[2 * na + 1] = ((g * K0 + k0) * K1 + k1) * K2 * wstride + ci * Mg + m
                na += 1
    if dims[17] and s2 <= 2:
        _row_avx2(yr, x, w, arow, na, phases, ptaps, qa, QB, b, wstride, I2, s2, nrows, ystep,
                  off, te, wv, <int> dims[17], <int> dims[19], stream)
        return
    if dims[17]:
        # s2 >= 3: the AVX2 kernel phase by phase (as stride 1) into the phase buffer, then
        # interleaved; no runs (nrows is 1 here)
        for c in range(s2):
            if phases[5 * c] > qa:
                _row_avx2(buf + c * QB - qa, x, w, arow, na, phases + 5 * c, ptaps, qa, QB, b,
                          wstride, I2, 1, 1, 0, off, te, wv, <int> dims[17], 0, 0)
        _interleave(yr, buf, phases, s2, QB, qa)
        return
    if s2 == 1:
        qe = min(qa + QB, O2)
        _phase(yr + qa, x, w, arow, na, phases, ptaps, qa, qe, b, wstride, I2, off, te, wv)
        return
    for c in range(s2):
        qe = min(qa + QB, phases[5 * c])
        if qe > qa:
            _phase(buf + c * QB, x, w, arow, na, phases + 5 * c, ptaps, qa, qe, b,
                   wstride, I2, off, te, wv)
    _interleave(yr, buf, phases, s2, QB, qa)


cdef struct Half16:
    # 16-bit storage of a float32 call (_half.h; NULL pointers: x read, y written as they are)
    const uint16_t* x16     # x (N, C_in, I0, I1, I2): the rows a task reads are widened
    uint16_t* y16           # y (N, C_out, O0, O1, O2): a run's rows rounded into it
    int kind                # 0 float16, 1 bfloat16
    int hisa                # the conversions' level (_half.level)
    int64_t R0              # per channel, the rows of axis 0 a thread's copy holds
    int64_t maxrun          # rows a call computes into the thread's float32 rows
    int stream              # y16's whole lines streamed past the caches (_halfstream.h)


cdef void _task_ncx(int64_t t, int64_t rows_per_task, int64_t nrows, const real* x,
                    const real* w, const real* bias, real* y, const int64_t* t0,
                    const int64_t* t1, const int64_t* rows1, const int64_t* st,
                    const int64_t* phases, const int64_t* ptaps, const int64_t* dims,
                    int64_t* arow, int64_t* off, int64_t* te, real* wv,
                    real* buf, const Half16* h, real* slab, int64_t* key,
                    real* ybuf) noexcept nogil:
    # Rows r of [t * rows_per_task, ...), r = (((((n*G + g)*Mg + m)*O0 + o0)*nqb + qb)*O1 + k,
    # output row o1 = rows1[k, 0] (axis 1's rows phase by phase): decoded once, then stepped
    # (divisions cost as much as a short row's arithmetic). The AVX2 kernel takes a run of
    # rows (rows1[k, 1] set: row o1 + s1 after row o1, same taps one input row further) in
    # one call. 16-bit storage (h): the input rows of (n, group, o0's taps) widened into the
    # thread's slab (kept while key = (n, g, first row, rows) holds: the next rows, and the
    # thread's next task, mostly read the same), and a run of at most maxrun rows computed
    # into ybuf, then rounded into y16.
    cdef int64_t C_in = dims[1], G = dims[2], Cg = dims[3], Mg = dims[4], I0 = dims[5]
    cdef int64_t plane = dims[6] * dims[7], O0 = dims[8], O1 = dims[9], O2 = dims[10]
    cdef int64_t s2 = dims[14], QB = dims[15], nqb = dims[16], s1
    cdef bint runs = dims[17] and s2 <= 2
    cdef int64_t r = t * rows_per_task, end = min(r + rows_per_task, nrows), k = r, cnt
    cdef int64_t o1, qa, yoff, xc0, xcs, i0lo, lo0, rows0, ci, j, nout, pitch = QB * s2
    cdef const real* xb
    cdef int64_t kk = k % O1
    k = k // O1
    cdef int64_t qb = k % nqb
    k = k // nqb
    cdef int64_t o0 = k % O0
    k = k // O0
    cdef int64_t m = k % Mg
    k = k // Mg
    cdef int64_t g = k % G, n = k // G
    while r < end:
        cnt = 1
        s1 = 0
        if runs:
            while (r + cnt < end and kk + cnt < O1 and rows1[2 * (kk + cnt) + 1]
                   and (h.y16 == NULL or cnt < h.maxrun)):
                cnt += 1
            if cnt > 1:
                s1 = rows1[2 * (kk + 1)] - rows1[2 * kk]
        o1 = rows1[2 * kk]
        qa = qb * QB
        yoff = (((n * G + g) * Mg + m) * O0 + o0) * O1 * O2 + o1 * O2
        xb, xc0, xcs, i0lo = x, n * C_in + g * Cg, I0 * plane, 0
        if real is float:
            if h.x16 != NULL:
                rows0 = t0[3 * o0 + 2]
                lo0 = t0[3 * o0 + 1] - (rows0 - 1) * st[1] if rows0 > 0 else 0
                rows0 = (rows0 - 1) * st[1] + 1 if rows0 > 0 else 0
                if rows0 > 0 and (key[0] != n or key[1] != g or key[2] != lo0
                                  or key[3] != rows0):
                    for ci in range(Cg):
                        convt_widen(h.hisa, h.kind,
                                    h.x16 + ((n * C_in + g * Cg + ci) * I0 + lo0) * plane,
                                    slab + ci * h.R0 * plane, rows0 * plane)
                    key[0], key[1], key[2], key[3] = n, g, lo0, rows0
                xb, xc0, xcs, i0lo = slab, 0, h.R0 * plane, lo0
            if h.y16 != NULL:
                _row_ncx(g, o0, o1, m, qb, cnt, pitch, xb, xc0, xcs, i0lo, w, bias,
                         ybuf - qa * s2, t0, t1, st, phases, ptaps, dims, arow, off, te, wv,
                         buf, 0)
                nout = min(O2, (qa + QB) * s2) - qa * s2
                for j in range(cnt):
                    if h.stream:
                        convt_narrow_stream(h.hisa, h.kind, ybuf + j * pitch,
                                            h.y16 + yoff + j * s1 * O2 + qa * s2, nout)
                    else:
                        convt_narrow(h.hisa, h.kind, ybuf + j * pitch,
                                     h.y16 + yoff + j * s1 * O2 + qa * s2, nout)
        if h.y16 == NULL:
            _row_ncx(g, o0, o1, m, qb, cnt, s1 * O2, xb, xc0, xcs, i0lo, w, bias, y + yoff,
                     t0, t1, st, phases, ptaps, dims, arow, off, te, wv, buf, <int> dims[18])
        r += cnt
        kk += cnt
        if kk == O1:
            kk = 0
            qb += 1
            if qb == nqb:
                qb = 0
                o0 += 1
                if o0 == O0:
                    o0 = 0
                    m += 1
                    if m == Mg:
                        m = 0
                        g += 1
                        if g == G:
                            g = 0
                            n += 1


def depthwise_ncx(const real[:, :, :, :, ::1] x,       # IN  (N, C_in, I0, I1, I2)
                  const real[:, :, :, :, :, ::1] w,    # IN  (G, K0, K1, K2, Cg, Mg)
                  const real[::1] bias,                # IN  (C_out,), zeros when there is none
                  real[:, :, :, :, ::1] y,             # OUT (N, C_out, O0, O1, O2)
                  const int64_t[:, ::1] tab0,          # IN  (O0, 3) k_first, i_first, count
                  const int64_t[:, ::1] tab1,          # IN  (O1, 3)
                  const int64_t[:, ::1] rows1,         # IN  (O1, 2) o1, continues a run
                  const int64_t[::1] steps,            # IN  (6,) kstep, istep per axis
                  const int64_t[:, ::1] phases,        # IN  (s2, 5) Q, q_lo, q_hi, first, n
                  const int64_t[:, ::1] ptaps,         # IN  (taps, 2) k2, e (>= 1 row)
                  int64_t qblock,                      # IN  outputs q per task and phase
                  int num_threads,
                  int isa=-1,                          # level (_cpu), -1 _cpu.ISA
                  bint stream=False,                   # y's whole vectors past the caches
                  bint row4=True,                      # stride-2 4-tap rows' own kernel (A/B)
                  const uint16_t[:, :, :, :, ::1] x16=None,  # IN  x in 16-bit storage (x unread)
                  uint16_t[:, :, :, :, ::1] y16=None,  # OUT y in 16-bit storage (y unwritten)
                  int kind=0,                          # IN  their kind (_half.KINDS)
                  int hisa=0):                         # IN  their conversions' level (_half.level)
    """Compute y in place; releases the GIL. See the module docstring for the contract.
    16-bit storage (float32 only): with x16, each task widens the input rows its rows read
    (per channel of the group, the rows of axis 0 its taps reach) into the thread's copy;
    with y16, each run of rows is computed into the thread's float32 rows and rounded into
    y16 (_half.h: astype's bits). x (y) is then any array of the compute dtype."""
    cdef int64_t dims[20]
    cdef int64_t s2 = phases.shape[0], nqb, nrows, ntasks, t, maxa, o0, rows0
    cdef int err[1]
    cdef int* errp = err
    cdef Half16 h
    err[0] = 0
    cdef int64_t xs[5]
    cdef int64_t ys[5]
    for t in range(5):
        xs[t] = x.shape[t] if x16 is None else x16.shape[t]
        ys[t] = y.shape[t] if y16 is None else y16.shape[t]
    if (x16 is not None or y16 is not None) and real is not float:
        raise ValueError("depthwise_ncx: 16-bit x or y needs float32 compute")
    if ys[0] * ys[1] * ys[2] * ys[3] * ys[4] == 0:
        return
    dims[0], dims[1], dims[2] = xs[0], xs[1], w.shape[0]
    dims[3], dims[4] = w.shape[4], w.shape[5]
    dims[5], dims[6], dims[7] = xs[2], xs[3], xs[4]
    dims[8], dims[9], dims[10] = ys[2], ys[3], ys[4]
    dims[11], dims[12], dims[13] = w.shape[1], w.shape[2], w.shape[3]
    nqb = (phases[0, 0] + qblock - 1) // qblock
    dims[14], dims[15], dims[16] = s2, qblock, nqb
    # the row kernel's level (0: the portable loop; 1 AVX2; 2 its AVX-512 body)
    dims[17] = 0
    if CONVT_DW_HAVE_AVX2:
        dims[17] = _cpu.kernel_level("depthwise", None if isa < 0 else isa)
    dims[18] = stream and dims[17] > 0 and y16 is None
    # the stride-2 4-tap rows' own kernel at its own level (_cpu: its zmm body even where the
    # other rows keep their AVX2 one); 0 off
    dims[19] = 0
    if row4 and dims[17]:
        dims[19] = _cpu.kernel_level("depthwise_row4", None if isa < 0 else isa)
    nrows = ys[0] * ys[1] * ys[2] * ys[3] * nqb
    h.x16, h.y16, h.kind, h.hisa, h.R0 = NULL, NULL, kind, hisa, 0
    h.stream = stream and y16 is not None
    h.maxrun = max(1, _YBUF // (qblock * s2))
    if x16 is not None:
        h.x16 = &x16[0, 0, 0, 0, 0]
        for o0 in range(dims[8]):   # the most rows of axis 0 an output row's taps read
            rows0 = tab0[o0, 2]
            h.R0 = max(h.R0, (rows0 - 1) * steps[1] + 1 if rows0 > 0 else 0)
    if y16 is not None:
        h.y16 = &y16[0, 0, 0, 0, 0]
    cdef int64_t nslab = dims[3] * h.R0 * dims[6] * dims[7]
    cdef int64_t nybuf = h.maxrun * qblock * s2 if y16 is not None else 0
    cdef const Half16* hp = &h
    ntasks = (nrows + _ROWS_PER_TASK - 1) // _ROWS_PER_TASK
    maxa = w.shape[4] * w.shape[1] * w.shape[2]
    cdef int64_t maxt = maxa * w.shape[3]
    cdef const real* xp = &x[0, 0, 0, 0, 0]
    cdef const real* wp = &w[0, 0, 0, 0, 0, 0]
    cdef const real* bp = &bias[0]
    cdef real* yp = &y[0, 0, 0, 0, 0]
    cdef const int64_t* t0 = &tab0[0, 0]
    cdef const int64_t* t1 = &tab1[0, 0]
    cdef const int64_t* r1 = &rows1[0, 0]
    cdef const int64_t* st = &steps[0]
    cdef const int64_t* ph = &phases[0, 0]
    cdef const int64_t* pt = &ptaps[0, 0]
    cdef int64_t* arow = NULL
    cdef int64_t* off = NULL
    cdef int64_t* te = NULL
    cdef real* wv = NULL
    cdef real* buf = NULL
    cdef real* slab = NULL
    cdef real* ybuf = NULL
    cdef int64_t* key = NULL
    cdef bint ok = True
    with nogil, parallel(num_threads=num_threads):
        arow = <int64_t*> malloc(2 * maxa * sizeof(int64_t))
        off = <int64_t*> malloc(maxt * sizeof(int64_t))
        te = <int64_t*> malloc(maxt * sizeof(int64_t))
        wv = <real*> malloc(maxt * sizeof(real))
        buf = <real*> malloc(s2 * qblock * sizeof(real))
        slab = <real*> malloc(max(nslab, 1) * sizeof(real))
        ybuf = <real*> malloc(max(nybuf, 1) * sizeof(real))
        key = <int64_t*> malloc(4 * sizeof(int64_t))
        ok = not (arow == NULL or off == NULL or te == NULL or wv == NULL or buf == NULL
                  or slab == NULL or ybuf == NULL or key == NULL)
        if not ok:
            errp[0] = 1
        else:
            key[0] = -1   # no rows widened yet
        for t in prange(ntasks, schedule="static"):
            if ok:   # every thread reaches the loop (OpenMP), one without scratch skips its work
                _task_ncx(t, _ROWS_PER_TASK, nrows, xp, wp, bp, yp, t0, t1, r1, st, ph, pt, dims,
                          arow, off, te, wv, buf, hp, slab, key, ybuf)
        if dims[18] or h.stream:
            convt_dw_fence()
        free(arow)
        free(off)
        free(te)
        free(wv)
        free(buf)
        free(slab)
        free(ybuf)
        free(key)
    if err[0]:
        raise MemoryError("convt: no memory for the depthwise kernel's per-thread scratch")


def traffic_probe(const float[::1] src,   # IN  n values, n a multiple of 8
                  float[::1] dst,         # OUT r n values
                  int num_threads):
    """The depthwise kernel's memory traffic with no arithmetic, for timing it
    (docs/scripts/depthwise_traffic.py's floor): dst, seen as (n / 8, r, 8), gets src, seen
    as (n / 8, 1, 8), r times; src read once and dst written once, its lines streamed past
    the caches when dst is 64-byte aligned (as depthwise_ncx streams a large y), each thread
    a contiguous part as depthwise_ncx's static schedule gives it. Releases the GIL."""
    cdef int64_t n = src.shape[0], r, blocks, bk, lo, hi
    cdef int isa = 0
    if n % 8 or n == 0 or dst.shape[0] % n:
        raise ValueError(f"traffic_probe: src must hold a positive multiple of 8 values and dst "
                         f"a multiple of src's; got {n} and {dst.shape[0]}")
    r = dst.shape[0] // n
    if CONVT_DW_HAVE_AVX2:
        isa = _cpu.kernel_level("depthwise")
    # blocks of 4096 values of src; the static schedule gives each thread a contiguous part
    blocks = (n + 4095) // 4096
    cdef const float* sp = &src[0]
    cdef float* dp = &dst[0]
    with nogil, parallel(num_threads=num_threads):
        for bk in prange(blocks, schedule="static"):
            lo = bk * 4096
            hi = min(lo + 4096, n)
            convt_dw_probe(isa, sp + lo, dp + lo * r, hi - lo, r)
        convt_dw_fence()
