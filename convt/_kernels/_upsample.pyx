"""Channels-first pure upsampling (the "upsample" variant): K == s on every axis, stride 2 on
the last, no padding.

Every output position then has exactly one tap: y[n, co, i0*s0 + a0, i1*s1 + a1, 2j + b] =
sum over ci of x[n, ci, i0, i1, j] * w[ci, co, a0, a1, b] (per group), one GEMM per input row
whose outputs interleave along the last axis. A task owns a run of input rows (n, i0, i1).
Block by block of at most 3 vectors along j, it copies the block's C_in x 3V inputs into the
thread's scratch (one contiguous run per channel: the tile reads them in order, from L1),
then for each pair of output rows (co, a0, a1) x 2 runs _upkernel.h's tile, which keeps the
block's 4 x 3 vectors of sums in registers over all the group's input channels and stores
them, interleaved and with the bias, straight into y. While a block's tiles run, the lines of
the block the thread copies next are prefetched, a slice of channels per tile (within a
task's run of rows, a thread's next row is r + 1): the copy then finds x in cache instead of
waiting for one line per channel, each in a 4 KiB page of its own. So the x transpose, the
tile buffer and the channels-first write-out of the micro variant are gone, and no BLAS call
packs the operands (unet_up2x2: DESIGN.md's "phase decomposition" with one tap per phase is
one GEMM).

Each output is one tile's sum over the channels in order: bit-identical for any thread count,
and equal to the micro variant's bits (same order, FMA, bias added last).

16-bit storage (float32 compute only): with x16, each block's inputs are widened from the
16-bit x as the task copies them into its scratch (_half.h's convt_widen: x is not read);
with y16, the tile rounds each output (sum plus bias, in float32) into the 16-bit y as it
stores it (_half.h's narrowing), y is not written. So no float32 copy of x or y is made:
the bits are those of the float32 call's result rounded by astype. float16 without F16C
(hisa 0) rounds through the thread's scratch instead, on the scalar conversions.

Assumes: x channels-first contiguous, wp packed by convt._backends.direct.upsample.packed_up, dims and tables
as built there, scratch of nthreads * (C_in + 4) * 3 vectors, the AVX2 + FMA path (isa 1);
vectors of 64 bytes (dims' V) run the AVX-512 tile (isa 2).
"""
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t, uint16_t
from libc.string cimport memcpy, memset

from ._types cimport real

cdef extern from "_isa.h" nogil:
    void convt_prefetch_rows(const void* p, int64_t stride, int64_t n, int64_t nbytes)

cdef extern from "_upkernel.h" nogil:
    void convt_up_tile_f32(const float* xp, const float* w, int64_t kc, int nv, float* y0,
                           float* y1, const float* b, int64_t valid)
    void convt_up_tile_f64(const double* xp, const double* w, int64_t kc, int nv, double* y0,
                           double* y1, const double* b, int64_t valid)
    void convt_up_tile512_f32(const float* xp, const float* w, int64_t kc, int nv, float* y0,
                              float* y1, const float* b, int64_t valid)
    void convt_up_tile512_f64(const double* xp, const double* w, int64_t kc, int nv,
                              double* y0, double* y1, const double* b, int64_t valid)
    void convt_up_tile_f16(const float* xp, const float* w, int64_t kc, int nv, uint16_t* y0,
                           uint16_t* y1, const float* b, int64_t valid)
    void convt_up_tile_bf16(const float* xp, const float* w, int64_t kc, int nv, uint16_t* y0,
                            uint16_t* y1, const float* b, int64_t valid)
    void convt_up_tile512_f16(const float* xp, const float* w, int64_t kc, int nv,
                              uint16_t* y0, uint16_t* y1, const float* b, int64_t valid)
    void convt_up_tile512_bf16(const float* xp, const float* w, int64_t kc, int nv,
                               uint16_t* y0, uint16_t* y1, const float* b, int64_t valid)

cdef extern from "_half.h" nogil:
    void convt_widen(int isa, int kind, const uint16_t* src, float* dst, int64_t n)
    void convt_narrow(int isa, int kind, const float* src, uint16_t* dst, int64_t n)


cdef inline void _tile(const real* xp, const real* w, int64_t kc, int nv, real* y0, real* y1,
                       const real* b, int64_t valid, bint zmm) noexcept nogil:
    # zmm: the layout's vectors are 64 bytes (the AVX-512 body), else 32 (AVX2)
    if real is float:
        if zmm:
            convt_up_tile512_f32(xp, w, kc, nv, y0, y1, b, valid)
        else:
            convt_up_tile_f32(xp, w, kc, nv, y0, y1, b, valid)
    else:
        if zmm:
            convt_up_tile512_f64(xp, w, kc, nv, y0, y1, b, valid)
        else:
            convt_up_tile_f64(xp, w, kc, nv, y0, y1, b, valid)


cdef inline void _tile16(const float* xp, const float* w, int64_t kc, int nv, uint16_t* y0,
                         uint16_t* y1, const float* b, int64_t valid, bint zmm,
                         int kind) noexcept nogil:
    # the float32 tile rounding into a 16-bit y of ``kind`` (0 float16, 1 bfloat16)
    if kind == 1:
        if zmm:
            convt_up_tile512_bf16(xp, w, kc, nv, y0, y1, b, valid)
        else:
            convt_up_tile_bf16(xp, w, kc, nv, y0, y1, b, valid)
    elif zmm:
        convt_up_tile512_f16(xp, w, kc, nv, y0, y1, b, valid)
    else:
        convt_up_tile_f16(xp, w, kc, nv, y0, y1, b, valid)


cdef inline int64_t _xrow(const int64_t* dm, int64_t r) noexcept nogil:
    # the offset in x of input row r = (n, i0, i1), channel 0
    cdef int64_t R0 = dm[1], R1 = dm[2]
    return (r // (R1 * R0)) * dm[10] + ((r // R1) % R0) * dm[12] + (r % R1) * dm[13]


cdef void _row(const real* x, const real* wp, const real* pb, real* y, const int64_t* dm,
               const int64_t* poff, const int64_t* blocks, real* xp,
               int64_t r, int64_t rend, const uint16_t* x16, uint16_t* y16, int kind,
               int hisa) noexcept nogil:
    # x16 / y16 (float only, else NULL): x read from, y written into 16-bit storage of
    # ``kind``, converted at level ``hisa`` (_half.level: 0 for float16 without F16C, whose
    # outputs then go through the scratch past the block's inputs, xp + C * 3 vectors)
    cdef int64_t R0 = dm[1], R1 = dm[2], W = dm[3], C = dm[4], G = dm[5], Cg = dm[6]
    cdef int64_t T = dm[7], V = dm[8], nb = dm[9]
    cdef bint zmm = V * <int64_t> sizeof(real) == 64
    cdef int64_t i1 = r % R1, i0 = (r // R1) % R0, n = r // (R1 * R0)
    cdef int64_t xo = _xrow(dm, r), yo = n * dm[14] + i0 * dm[15] + i1 * dm[16]
    cdef int64_t esize = sizeof(real) if x16 == NULL else 2
    cdef const char* xb = <const char*> (x + xo) if x16 == NULL else <const char*> (x16 + xo)
    cdef real* yr = y + yo
    cdef real* ys = xp + C * 3 * V
    cdef int64_t bi, c, g, t, j0, nv, width, have, k, c0, c1, nj, nhave, nout
    cdef const int64_t* pq
    cdef const char* nx
    cdef real* y1
    for bi in range(nb):
        # the block's inputs: xp[c * nv * V + j], zeros past W
        j0, nv = blocks[2 * bi], blocks[2 * bi + 1]
        width = nv * V
        have = min(width, W - j0)
        for c in range(C):
            if real is float:
                if x16 != NULL:
                    convt_widen(hisa, kind, x16 + xo + c * dm[11] + j0, xp + c * width, have)
                else:
                    memcpy(xp + c * width, x + xo + c * dm[11] + j0, have * sizeof(real))
            else:
                memcpy(xp + c * width, x + xo + c * dm[11] + j0, have * sizeof(real))
            if have < width:
                memset(xp + c * width + have, 0, (width - have) * sizeof(real))
        # the next block's inputs (this row's next block, else, within the task's rows, the
        # next row's first: the block this thread copies next), prefetched channel slice by
        # channel slice over the tiles (their FMAs hide the misses the block's copy otherwise
        # waits for: one line per 4 KiB page of x, which no hardware prefetcher follows)
        nx, nj, nhave = NULL, 0, 0
        if bi + 1 < nb:
            nx, nj = xb, blocks[2 * bi + 2]
            nhave = min(blocks[2 * bi + 3] * V, W - nj)
        elif r + 1 < rend:
            nx, nj = xb + (_xrow(dm, r + 1) - xo) * esize, 0
            nhave = min(blocks[1] * V, W)
        k = 0
        for g in range(G):
            for t in range(g * T, (g + 1) * T):
                if nx != NULL:
                    c0, c1 = k * C // (G * T), (k + 1) * C // (G * T)
                    convt_prefetch_rows(nx + (c0 * dm[11] + nj) * esize, dm[11] * esize,
                                        c1 - c0, nhave * esize)
                k += 1
                pq = poff + 2 * t
                if real is float:
                    if y16 != NULL and hisa > 0:
                        _tile16(xp + g * Cg * width, wp + t * Cg * 4, Cg, <int> nv,
                                y16 + yo + pq[0] + 2 * j0,
                                y16 + yo + pq[1] + 2 * j0 if pq[1] >= 0 else NULL,
                                pb + 2 * t, 2 * (W - j0), zmm, kind)
                        continue
                    if y16 != NULL:   # the float32 rows in scratch, then rounded
                        _tile(xp + g * Cg * width, wp + t * Cg * 4, Cg, <int> nv, ys,
                              ys + 2 * width, pb + 2 * t, 2 * (W - j0), zmm)
                        nout = min(2 * width, 2 * (W - j0))
                        convt_narrow(0, kind, ys, y16 + yo + pq[0] + 2 * j0, nout)
                        if pq[1] >= 0:
                            convt_narrow(0, kind, ys + 2 * width, y16 + yo + pq[1] + 2 * j0,
                                         nout)
                        continue
                y1 = yr + pq[1] + 2 * j0 if pq[1] >= 0 else NULL
                _tile(xp + g * Cg * width, wp + t * Cg * 4, Cg, <int> nv,
                      yr + pq[0] + 2 * j0, y1, pb + 2 * t, 2 * (W - j0), zmm)


def upsample_conv(const real[::1] x,        # IN  (N, C_in, *in) channels-first, contiguous
                  const real[::1] wp,       # IN  packed weights (G * T tiles x Cg x 4)
                  const real[::1] pbias,    # IN  per tile, the bias of its two output rows
                  real[::1] y,              # OUT (N, C_out, *out) channels-first
                  const int64_t[::1] dims,  # IN  N, R0, R1, W, C_in, G, Cg, T, V, NB,
                                            #     x strides (n, c, i0, i1), y offsets of
                                            #     an input row (n, i0, i1)
                  const int64_t[::1] poff,  # IN  per tile, y offsets of its two output rows
                                            #     from the input row's (-1: a padding row)
                  const int64_t[::1] blocks,  # IN per block: first j, vectors
                  real[::1] scratch,        # OUT nthreads * (C_in + 4) * 3 vectors
                  int num_threads,
                  const uint16_t[::1] x16=None,   # IN  x in 16-bit storage (x then unread)
                  uint16_t[::1] y16=None,   # OUT y in 16-bit storage (y then unwritten)
                  int kind=0,               # IN  x16's and y16's kind (_half.KINDS)
                  int hisa=0):              # IN  their conversions' level (_half.level)
    """Compute y; releases the GIL. See the module docstring."""
    cdef int64_t rows = dims[0] * dims[1] * dims[2], r, tid, task, r0, r1
    cdef int64_t per = scratch.shape[0] // max(num_threads, 1)
    cdef int64_t ny = y.shape[0] if y16 is None else y16.shape[0]
    if (x16 is not None or y16 is not None) and real is not float:
        raise ValueError("upsample_conv: 16-bit x or y needs float32 compute")
    if x16 is not None and x16.shape[0] != dims[0] * dims[10]:
        raise ValueError(f"upsample_conv: x16 has {x16.shape[0]} values, not N x C_in x in")
    if per < (dims[4] + 4) * 3 * dims[8]:
        raise ValueError(f"upsample_conv: scratch of {per} values a thread, below (C_in + 4)"
                         " x 3 vectors")
    if rows == 0 or ny == 0:
        return
    # a task: a run of consecutive rows (about four a thread), so that within it the row
    # after r is the one the thread takes next, and the dynamic schedule still evens out
    cdef int64_t run = max(1, rows // (4 * max(num_threads, 1)))
    cdef int64_t tasks = (rows + run - 1) // run
    cdef const real* xptr = &x[0]
    cdef const real* wptr = &wp[0]
    cdef const real* bptr = &pbias[0]
    cdef real* yptr = &y[0]
    cdef const int64_t* dm = &dims[0]
    cdef const int64_t* po = &poff[0]
    cdef const int64_t* bl = &blocks[0]
    cdef real* sp = &scratch[0]
    cdef const uint16_t* x16p = NULL
    cdef uint16_t* y16p = NULL
    if x16 is not None:
        x16p = &x16[0]
    if y16 is not None:
        y16p = &y16[0]
    with nogil:
        for task in prange(tasks, schedule="dynamic", num_threads=num_threads):
            tid = threadid()
            r0 = task * run
            r1 = min(rows, r0 + run)
            for r in range(r0, r1):
                _row(xptr, wptr, bptr, yptr, dm, po, bl, sp + tid * per, r, r1, x16p, y16p,
                     kind, hisa)
