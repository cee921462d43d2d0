"""Direct transposed convolution on register-blocked micro-kernels (the "micro" variant).

Phase decomposition, gather form (DESIGN.md): output o = q*s + c; phase c's taps read input
i = q + e (e per tap and axis). A task owns MB consecutive output positions (rows, flattened
over (n, q0, q1, q2)) of each phase of a set (convt._micro: channels-first all the phases,
channels-last those sharing (c0, c1), while their weights stay in L2), one phase after the
other, and all output channels; per phase, an MB x (G * NP * NR) tile (NP panels of NR
channels per group, the last padded with zero weights; rows ldc >= G * NP * NR apart, an odd
number of 64-byte lines). The set's tiles are held until all are computed, then written
together (their outputs interleave in y: lines of y are completed while in cache). Per block
of taps,
each row's input pixel per tap is looked up once (an "indirection" table: a pointer into the
channels-last x, or to a zero vector when q + e is outside the data), and the micro-kernel
(_ukernel.h) computes MR x NR sub-tiles, its registers holding them across the block's taps
and a chunk of CC input channels. So there is no halo copy, no column buffer, no scatter, and
a tap is never multiplied by an inserted zero. A sub-tile runs only the taps that read data
for at least one of its MR rows, so the wasted work is the taps off the data of border rows
that share a sub-tile with rows where those taps read data, and the NR padding of each
group's last panel. When a phase has few positions per image (convt._micro), rows run batch
innermost, so a sub-tile's rows are the same position of MR images and share their border taps:
dcgan_g1 (16 images of 4 x 4 positions per phase, 1.31x the useful multiply-adds with every
tap) ran 1.19x faster (2 threads) and 1.20x (1 thread) than in (n, q0, q1, q2) order.

Blocking: a block of TB taps x CC channels keeps its packed weights (TB*CC*NR values, a panel)
in L1 while the task's MB/MR row sub-tiles stream through it; the tile stays in L2 across the
blocks. Blocks, chunks, groups and panels are visited in a fixed order and each output is
summed by one task: results are bit-identical for any thread count. The tiles plus the bias
are then written into y's own layout (element strides): channels-last row by row;
channels-first per block of 8 channels, in 8 x 8 register transposes along runs of rows
contiguous in y (float32 phases of a stride-1 last axis, and pairs of phases c2 = 0, 1 of a
stride-2 one, interleaved into contiguous runs: _writeout.h's convt_cf8_f32), the rest one value
per store. One store per value ran at about 3 cycles a value: grouped_g8's 8 MB of y took
1.1-1.7 ms of a 3-4 ms call (2 threads, bench machine).

Threads: an OpenMP prange hands out tasks (dynamic); each thread owns its slice of the tile and
pointer scratch. No BLAS.

Assumes: x channels-last contiguous, zero holds C_in zeros, wp packed by pack_micro for the
same phase table, every phase row of (dims) in range, scratch sized as documented at
micro_conv; ystr = element strides (n, o0, o1, o2, channel), the last axis contiguous when
channels-first.
"""
import numpy as np
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t, uint64_t, uintptr_t

from ._finite cimport _exponent_at_least, _nonfinite
from ._types cimport real

cdef extern from *:
    """
    #define convt_ctz64(v) ((int64_t) __builtin_ctzll(v))
    """
    int64_t convt_ctz64(uint64_t v) nogil

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

cdef extern from "_transpose.h" nogil:
    void convt_t8_f32(int isa, const float* src, int64_t lds, float* dst, int64_t ldd)

cdef extern from "_writeout.h" nogil:
    void convt_cf8_f32(int isa, const float* ta, const float* tb, int64_t ldc,
                       const float* bias, float* y, int64_t cs)
    void convt_g8_f32(int isa, const float* const* rows, int64_t coff, const float* bias,
                      float* y, int64_t cs)
    void convt_g8_f64(int isa, const double* const* rows, int64_t coff, const double* bias,
                      double* y, int64_t cs)

cdef extern from "_corners.h" nogil:
    void convt_corners_f32(int isa, const float* src, const int64_t* off, int n, int neg,
                           float* dst, int64_t C)
    void convt_corners_f64(int isa, const double* src, const int64_t* off, int n, int neg,
                           double* dst, int64_t C)

cdef extern from "_packkernel.h" nogil:
    int CONVT_WSUM_MAX
    int convt_wsum_f32(int isa, const float* tmp, int64_t Mgp, const int64_t* ck,
                       const float* cf, float* dst, int64_t us, int64_t NP, int64_t ls,
                       int stream)
    int convt_wsum_f64(int isa, const double* tmp, int64_t Mgp, const int64_t* ck,
                       const double* cf, double* dst, int64_t us, int64_t NP, int64_t ls,
                       int stream)
    void convt_store_fence()
    int convt_taps_f32(int isa, const float* src, int64_t Mg, int64_t KT, float* dst,
                       int64_t line, int64_t ps, int spare, int stream)

MR = CONVT_MR
WSUM_MAX = CONVT_WSUM_MAX   # kernel taps a product tap's weights sum at most (ck, cf columns)
NR_F32 = CONVT_NR_F32
NR_F64 = CONVT_NR_F64
# Columns of the phase table (convt._micro writes the same).
cdef enum:
    _WRITE_ROWS = 16  # tile rows per block of the scalar channels-first write-out
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


cdef inline int _wsum(int isa, const real* tmp, int64_t Mgp, const int64_t* ck,
                      const real* cf, real* dst, int64_t us, int64_t NP, int64_t ls,
                      int stream=0) noexcept nogil:
    if real is float:
        return convt_wsum_f32(isa, tmp, Mgp, ck, cf, dst, us, NP, ls, stream)
    else:
        return convt_wsum_f64(isa, tmp, Mgp, ck, cf, dst, us, NP, ls, stream)


cdef inline void _row_pos(int64_t r, const int64_t* ph, const int64_t* d,
                          int64_t* q) noexcept nogil:
    # row r of a phase -> (n, q0, q1, q2); rows run over (n, q0, q1, q2), or with d[18]
    # (batch innermost) over (q0, q1, q2, n)
    if d[18]:
        q[0] = r % d[0]
        r = r // d[0]
    q[3] = r % ph[2]
    q[2] = (r // ph[2]) % ph[1]
    q[1] = (r // (ph[2] * ph[1])) % ph[0]
    if not d[18]:
        q[0] = r // (ph[2] * ph[1] * ph[0])


cdef inline void _next_pos(const int64_t* ph, const int64_t* d, int64_t* q) noexcept nogil:
    # (n, q0, q1, q2) of the next row (no division: rows are walked in order)
    if d[18]:
        q[0] += 1
        if q[0] < d[0]:
            return
        q[0] = 0
    q[3] += 1
    if q[3] == ph[2]:
        q[3] = 0
        q[2] += 1
        if q[2] == ph[1]:
            q[2] = 0
            q[1] += 1
            if q[1] == ph[0]:
                q[1] = 0
                q[0] += 1


cdef void _pointers(const real* x, const real* zero, const int64_t* ph, const int64_t* tap_e,
                    int64_t t0, int64_t nt, int64_t r0, int64_t m, int64_t mpad,
                    const int64_t* d, const real** ptr) noexcept nogil:
    # ptr[t * mpad + i]: the input pixel row r0 + i reads for tap t0 + t of the phase, or zero
    cdef int64_t I0 = d[1], I1 = d[2], I2 = d[3], C_in = d[11]
    cdef int64_t i, t, i0, i1, i2
    cdef int64_t q[4]
    cdef const int64_t* e
    _row_pos(r0, ph, d, q)
    for i in range(mpad):
        if i >= m:
            for t in range(nt):
                ptr[t * mpad + i] = zero
            continue
        if i:
            _next_pos(ph, d, q)
        for t in range(nt):
            e = tap_e + 3 * (ph[6] + t0 + t)
            i0 = q[1] + e[0]
            i1 = q[2] + e[1]
            i2 = q[3] + e[2]
            if 0 <= i0 < I0 and 0 <= i1 < I1 and 0 <= i2 < I2:
                ptr[t * mpad + i] = x + (((q[0] * I0 + i0) * I1 + i1) * I2 + i2) * C_in
            else:
                ptr[t * mpad + i] = zero


cdef enum:
    _WINO_ROWS = 192   # most rows of a Winograd task (convt._micro._MAX_MB): _wino_build's stack


cdef void _wino_build(int isa, const real* x, const real* zero, const int64_t* ph,
                      const int64_t* toff, const int64_t* tkind, int64_t t0, int64_t nt,
                      int64_t r0, int64_t m, int64_t mpad, const int64_t* d, real* v,
                      const real** ptr) noexcept nogil:
    # As _pointers, for a Winograd product (wino_conv): row r0 + i is the tile (n, j0, j1,
    # j2) and its tap t reads the pixel x + toff[tap] + n * d[22] + sum of m_a * j_a * d[19 + a]
    # (steps m_a in ph[3:6]) of the zero-haloed grid. A tap of kind 0 reads it in place; one
    # of another kind reads its input transform, built here into v (row t * mpad + i, C_in
    # values): the signed sum of the pixel's corners along the kind's axes (_corners.h's
    # convt_corners), 2 bits per axis a at bit 2a: 1 x[u] - x[u+1], 2 x[u] - x[u+2], 3 x[u] +
    # x[u+1] (convt._winograd's PLAIN, DIFF, DIFF2, SUM). The planner keeps every read inside
    # the grid. The rows' pixels first, then tap by tap (a tap's corners made once for all its
    # rows).
    cdef int64_t C = d[11], i, t, tap, kind, a, j, n, at, code
    cdef int neg
    cdef int64_t q[4]
    cdef int64_t off[8]
    cdef int64_t base[_WINO_ROWS]
    cdef real* dst
    _row_pos(r0, ph, d, q)
    for i in range(m):
        if i:
            _next_pos(ph, d, q)
        base[i] = (q[0] * d[22] + ph[3] * q[1] * d[19] + ph[4] * q[2] * d[20]
                   + ph[5] * q[3] * d[21])
    for t in range(nt):
        tap = ph[6] + t0 + t
        kind = tkind[tap]
        at = toff[tap]
        for i in range(m, mpad):
            ptr[t * mpad + i] = zero
        if kind == 0:
            for i in range(m):
                ptr[t * mpad + i] = x + at + base[i]
            continue
        # corner j's offset: bit b of j steps along the kind's b-th axis (two steps for a
        # difference two apart); bit b of neg: that axis subtracts
        off[0] = 0
        n = 1
        neg = 0
        for a in range(3):
            code = kind >> (2 * a) & 3
            if code:
                for j in range(n):
                    off[n + j] = off[j] + (2 if code == 2 else 1) * d[19 + a]
                if code != 3:
                    neg |= <int> n
                n *= 2
        for i in range(m):
            dst = v + (t * mpad + i) * C
            if real is float:
                convt_corners_f32(isa, x + at + base[i], off, <int> n, neg, dst, C)
            else:
                convt_corners_f64(isa, x + at + base[i], off, <int> n, neg, dst, C)
            ptr[t * mpad + i] = dst


cdef int64_t _phase_rows(const int64_t* ph, int64_t r0, int64_t m,
                         const int64_t* d) noexcept nogil:
    # of rows r0..r0+m, how many the phase has (a set's phases may differ in length)
    cdef int64_t rows = d[0] * ph[0] * ph[1] * ph[2]
    return max(<int64_t> 0, min(m, rows - r0))


cdef void _offsets(const int64_t* ph, int64_t r0, int64_t m, const int64_t* d,
                   const int64_t* ystr, int64_t* off) noexcept nogil:
    # off[i]: where row r0 + i of the phase starts in y (its channel 0)
    cdef int64_t i
    cdef int64_t q[4]
    _row_pos(r0, ph, d, q)
    for i in range(m):
        if i:
            _next_pos(ph, d, q)
        off[i] = (q[0] * ystr[0] + (q[1] * d[4] + ph[3]) * ystr[1]
                  + (q[2] * d[5] + ph[4]) * ystr[2] + (q[3] * d[6] + ph[5]) * ystr[3])


cdef void _write_nxc(const real* t, int64_t ldc, const real* bias, real* y, int64_t m,
                     const int64_t* d, const int64_t* off) noexcept nogil:
    # Channels-last: tile rows (or only the bias when t is NULL) -> y, row by row.
    cdef int64_t G = d[7], Mg = d[9], gw = d[10] * d[17], i, g, mm, co
    cdef real* dd
    cdef const real* tr
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


cdef void _cols(const real* ta, const real* tb, int64_t ldc, const real* bias, real* y,
                int64_t cs, const int64_t* op, int64_t i0, int64_t i1,
                int64_t nch) noexcept nogil:
    # Channels-first, one value per store: channel j < nch of rows i0..i1 of the tile ta
    # (NULL: a tap-less phase, only the bias) to y[j * cs + op[i]], and when tb is given, its
    # rows to the next position (the pair of phases of _write_blocks).
    cdef int64_t j, i
    cdef real bc
    for j in range(nch):
        bc = bias[j]
        for i in range(i0, i1):
            y[j * cs + op[i]] = (ta[i * ldc + j] + bc) if ta != NULL else bc
            if tb != NULL:
                y[j * cs + op[i] + 1] = tb[i * ldc + j] + bc


cdef void _write_blocks(int isa, const real* ta, const real* tb, const real* bias, real* y,
                        int64_t mp, const int64_t* d, int64_t cs, const int64_t* op,
                        int64_t step) noexcept nogil:
    # Channels-first write-out of one phase's tile ta (step 1: its rows are contiguous in y
    # along runs of the last axis), or of a pair (ta, tb) of phases c2 = 0, 1 of stride 2
    # (step 2: the two interleave into contiguous runs). Per block of 8 channels (8 streams
    # of y), the runs of rows are written in 8 x 8 transposed blocks (convt_cf8_f32), their
    # remainders and the channels past the last block of 8 one value at a time.
    cdef int64_t G = d[7], Mg = d[9], ldc = d[15], gw = d[10] * d[17]
    cdef int64_t g, mm0, co, i, j, k
    cdef const real* a
    cdef const real* b
    for g in range(G):
        mm0 = 0
        while True:
            # the tiles' columns of channels mm0.. of group g
            a = ta + g * gw + mm0
            b = tb + g * gw + mm0 if tb != NULL else NULL
            co = g * Mg + mm0
            if mm0 + 8 > Mg:
                _cols(a, b, ldc, bias + co, y + co * cs, cs, op, 0, mp, Mg - mm0)
                break
            i = 0
            while i < mp:
                j = i + 1
                while j < mp and op[j] - op[j - 1] == step:
                    j += 1
                k = i
                while k + 8 <= j:
                    if real is float:
                        convt_cf8_f32(isa, a + k * ldc, b + k * ldc if b != NULL else NULL,
                                      ldc, bias + co, y + co * cs + op[k], cs)
                    k += 8
                _cols(a, b, ldc, bias + co, y + co * cs, cs, op, k, j, 8)
                i = j
            mm0 += 8


cdef void _write_ncx(int isa, const real* t, const real* bias, real* y, const int64_t* ph,
                     int64_t nph, int64_t r0, int64_t m, const int64_t* d, int64_t cs,
                     const int64_t* off) noexcept nogil:
    # Channels-first: the tiles of a set's phases (phase p's at t + p * MB * ldc, its row
    # offsets at off + p * MB) -> y. float32 phases along a last axis of stride 1, and pairs
    # of phases c2 = 0, 1 along one of stride 2 (equal in all else), go out in transposed
    # blocks; the others (float64, other strides, tap-less phases), one value per store in
    # blocks of _WRITE_ROWS rows, every channel of a block while its tile rows are in L1.
    cdef int64_t MB = d[14], ldc = d[15], G = d[7], Mg = d[9], gw = d[10] * d[17]
    cdef int64_t p = 0, mp, i0, g
    cdef const int64_t* pp
    cdef const int64_t* pq
    cdef const real* tp
    while p < nph:
        pp = ph + PHASE_COLS * p
        pq = pp + PHASE_COLS
        mp = _phase_rows(pp, r0, m, d)
        tp = t + p * MB * ldc
        if real is float and pp[7] and d[6] == 1:
            _write_blocks(isa, tp, NULL, bias, y, mp, d, cs, off + p * MB, 1)
            p += 1
            continue
        if (real is float and pp[7] and d[6] == 2 and p + 1 < nph and pq[7] and pp[5] == 0
                and pq[5] == 1 and pp[0] == pq[0] and pp[1] == pq[1] and pp[2] == pq[2]
                and pp[3] == pq[3] and pp[4] == pq[4]):
            _write_blocks(isa, tp, tp + MB * ldc, bias, y, mp, d, cs, off + p * MB, 2)
            p += 2
            continue
        i0 = 0
        while i0 < mp:
            for g in range(G):
                _cols(tp + g * gw if pp[7] else NULL, NULL, ldc, bias + g * Mg,
                      y + g * Mg * cs, cs, off + p * MB, i0, min(mp, i0 + _WRITE_ROWS), Mg)
            i0 += _WRITE_ROWS
        p += 1


cdef void _tap_masks(const real* zero, const real** ptr, int64_t nt, int64_t mpad,
                     uint64_t* masks) noexcept nogil:
    # masks[ir]: bit k set when tap k of the block reads data for a row of sub-tile ir
    cdef int64_t ir, k, i
    cdef uint64_t mask
    for ir in range(mpad // CONVT_MR):
        mask = 0
        for k in range(nt):
            for i in range(CONVT_MR):
                if ptr[k * mpad + ir * CONVT_MR + i] != zero:
                    mask |= (<uint64_t> 1) << k
                    break
        masks[ir] = mask


cdef void _masked_ukernel(int isa, uint64_t mask, int64_t nt, int64_t kc, const real** a,
                          int64_t astride, int64_t aoff, const real* b, int64_t bstride,
                          real* c, int64_t ldc, bint first) noexcept nogil:
    # One sub-tile over the taps of a block set in mask (runs of consecutive taps, one kernel
    # call each); first: the tile's first block and chunk (initialise, not accumulate).
    cdef uint64_t full = ((<uint64_t> 1) << nt) - 1 if nt < 64 else ~(<uint64_t> 0)
    cdef int64_t ts, run
    cdef int acc = not first
    if mask == full:
        _ukernel(isa, nt, kc, a, astride, aoff, b, bstride, c, ldc, acc)
        return
    if mask == 0 and first:   # no data at all: the sub-tile is zeros
        _ukernel(isa, 0, kc, a, astride, aoff, b, bstride, c, ldc, 0)
    while mask:
        ts = convt_ctz64(mask)
        run = convt_ctz64(~(mask >> ts))
        _ukernel(isa, run, kc, a + ts * astride, astride, aoff, b + ts * bstride, bstride, c,
                 ldc, acc)
        acc = 1
        mask &= ~((((<uint64_t> 1) << run) - 1) << ts)


cdef void _tile(int isa, const real* x, const real* zero, const real* wp, const int64_t* ph,
                const int64_t* tap_e, int64_t r0, int64_t m, const int64_t* d, real* t,
                const real** ptr, uint64_t* masks, const int64_t* tkind=NULL,
                real* v=NULL, const int64_t* ck=NULL, const real* cf=NULL,
                int64_t rstride=0, real* wb=NULL) noexcept nogil:
    # The tile of rows r0..r0+m of the phase ph (which has taps): blocks of TB taps (pointers
    # looked up once per block), chunks of CC channels, then per group and panel the MR-row
    # sub-tiles. A sub-tile runs only the taps that read data for at least one of its rows
    # (masks: a bit per tap of the block), in runs of consecutive taps: the taps of a phase's
    # border rows that fall off the data are skipped when the sub-tile's rows share them.
    # ck != NULL (wino_conv's late sums): wp holds the kernel taps, tap k's lines at
    # wp + k * rstride laid out [G][NP][Cg][NR] (convt._winograd.wino_taps), and each block's
    # panel of product weights is summed here (convt_wsum, as pack_wino sums them: the same
    # bits) into wb, once per chunk, group and panel, for all the panel's sub-tiles.
    cdef int64_t G = d[7], Cg = d[8], NP = d[10], CC = d[12], TB = d[13], ldc = d[15]
    cdef int64_t NR = d[17], T = ph[7]
    cdef int64_t mpad = (m + CONVT_MR - 1) // CONVT_MR * CONVT_MR
    cdef int64_t t0, nt, c0, kc, g, jp, ir, u, bstride
    cdef const real* panel
    cdef bint first = True
    t0 = 0
    while t0 < T:
        nt = min(TB, T - t0)
        if tkind != NULL:   # a Winograd product (wino_conv): tap_e holds flat offsets
            _wino_build(isa, x, zero, ph, tap_e, tkind, t0, nt, r0, m, mpad, d, v, ptr)
        else:
            _pointers(x, zero, ph, tap_e, t0, nt, r0, m, mpad, d, ptr)
        _tap_masks(zero, ptr, nt, mpad, masks)
        c0 = 0
        while c0 < Cg:
            kc = min(CC, Cg - c0)
            # between a panel's taps: the panel's [tap][c][NR] (wb: kc channels of each)
            bstride = kc * NR if ck != NULL else Cg * NR
            for g in range(G):
                for jp in range(NP):
                    if ck != NULL:
                        for u in range(nt):
                            _wsum(isa, wp + ((g * NP + jp) * Cg + c0) * NR, rstride,
                                  ck + CONVT_WSUM_MAX * (ph[6] + t0 + u),
                                  cf + CONVT_WSUM_MAX * (ph[6] + t0 + u),
                                  wb + u * bstride, NR, kc, NR)
                        panel = wb
                    else:   # packed weights of the phase: [g][jp][tap][c][NR]
                        panel = wp + ph[8] + (((g * NP + jp) * T + t0) * Cg + c0) * NR
                    for ir in range(mpad // CONVT_MR):
                        _masked_ukernel(isa, masks[ir], nt, kc, ptr + ir * CONVT_MR, mpad,
                                        g * Cg + c0, panel, bstride,
                                        t + ir * CONVT_MR * ldc + (g * NP + jp) * NR, ldc,
                                        first)
            first = False
            c0 += kc
        t0 += nt


cdef void _set_task(int isa, const real* x, const real* zero, const real* wp, const real* bias,
                    real* y, const int64_t* ph, int64_t nph, const int64_t* tap_e, int64_t r0,
                    int64_t m, const int64_t* d, const int64_t* ystr, real* t, const real** ptr,
                    int64_t* off) noexcept nogil:
    # Rows r0..r0+m (clipped to each phase's own rows) of the nph phases of a set from ph:
    # their outputs share lines of y. Each phase's tile at t + p * MB * ldc, its row offsets
    # at off + p * MB (the sub-tiles' tap masks after the set's offsets); then the set is
    # written.
    cdef int64_t MB = d[14], ldc = d[15], p, mp
    cdef const int64_t* pp
    for p in range(nph):
        pp = ph + PHASE_COLS * p
        mp = _phase_rows(pp, r0, m, d)
        _offsets(pp, r0, mp, d, ystr, off + p * MB)
        if pp[7] and mp:
            _tile(isa, x, zero, wp, pp, tap_e, r0, mp, d, t + p * MB * ldc, ptr,
                  <uint64_t*> (off + nph * MB))
    if ystr[4] != 1:
        _write_ncx(isa, t, bias, y, ph, nph, r0, m, d, ystr[4], off)
        return
    for p in range(nph):
        pp = ph + PHASE_COLS * p
        _write_nxc(t + p * MB * ldc if pp[7] else NULL, ldc, bias, y,
                   _phase_rows(pp, r0, m, d), d, off + p * MB)


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
                                              #     TB, MB, ldc (tile row stride), SM (most
                                              #     phases per task), NR, BI (rows run batch
                                              #     innermost)
               const int64_t[::1] ystr,       # IN  y element strides (n, o0, o1, o2, channel)
               real[::1] tiles,               # OUT scratch: nthreads * SM * MB * ldc values
               int64_t[::1] pointers,         # OUT scratch: nthreads * (MB * (TB + SM) + MB /
                                              #     MR) slots of 8 bytes (pointers, row
                                              #     offsets, then per sub-tile a tap mask)
               int isa, int num_threads):
    """Compute y; releases the GIL. See the module docstring."""
    cdef int64_t ntasks = tasks.shape[0], k, tid
    cdef int64_t MB = dims[14], TB = dims[13], ldc = dims[15], SM = dims[16]
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
    cdef int64_t pstride = MB * (TB + SM) + MB // CONVT_MR
    with nogil:
        for k in prange(ntasks, schedule="dynamic", num_threads=num_threads):
            tk = tptr + 4 * k
            tid = threadid()
            _set_task(isa, xptr, zptr, wptr, bptr, yptr, pptr + PHASE_COLS * tk[0], tk[1], te,
                      tk[2], tk[3], dm, yst, tl + tid * SM * MB * ldc,
                      <const real**> (pp + tid * pstride), pp + tid * pstride + MB * TB)


# ------------------------------------------------------------------ Winograd variant
#
# convt._winograd plans it: per phase, along each axis whose phase has two taps one input apart
# (y[q] = W_lo x[q + e] + W_hi x[q + e + 1]), outputs q = 2j, 2j + 1 come from three products
# (Winograd's F(2, 2), interpolation points 0, 1, infinity), each a GEMM over the channels:
#     m0 = (x[u] - x[u+1]) W_lo,  m1 = x[u+1] (W_lo + W_hi),  m2 = (x[u+1] - x[u+2]) (-W_hi)
#     y[2j] = m0 + m1,  y[2j+1] = m1 + m2           (u = 2j + e)
# 3 products for 2 outputs instead of 4 (per axis; 9 for 4 in 2-D). Along an axis of three
# taps W0, W1, W2 one input apart, four (F(2, 3), points 0, 1, -1, infinity):
#     m0 = (x[u] - x[u+2]) W0,  m1 = (x[u+1] + x[u+2]) (W0 + W1 + W2) / 2,
#     m2 = (x[u+1] - x[u+2]) (W0 - W1 + W2) / 2,  m3 = (x[u+1] - x[u+3]) (-W2)
#     y[2j] = (m0 + m1) - m2,  y[2j+1] = (m3 + m1) + m2
# (16 for 4 in 2-D instead of 36). The weights' sums are made once per plan (pack_wino), or,
# for one-shot calls with large products (convt._winograd.late_sums), per task, chunk and
# panel from the packed taps, in cache (_tile's late sums). A product is run as a
# phase of the micro variant (register tiles, blocking and packing as there) whose taps read
# the input on a zero-haloed grid with a step of 2 tiles along Winograd axes; a tap that
# reads an input transform has it built per task (_wino_build, into the thread's scratch:
# contiguous rows, in cache when the kernel reads them). A task's products are then combined
# in place, one axis after the other (the "output transform"), and the 2^w sub-tiles (t = 0,
# 1 per Winograd axis) written out like the micro variant's tiles (channels-last; the caller
# transposes channels-first y afterwards). A task may instead run a set of real phases (the
# residues of the last axis, equal in tiles and Winograd axes: dims[23]), all its tiles held,
# whose outputs then fill runs of each line of channels-first y: written straight to y, 8
# consecutive outputs x 8 channels per transposed block (_wino_set_write). Axes without the
# two- or three-tap structure, and phases without any, run their taps as they are (one
# product summing all of a phase's taps).

cdef enum:
    WINO_COLS = 20   # J0..2 (tiles), c0..2, m0..2 (2: Winograd axis), first product,
                     # products, Q0..2 (outputs), pi0..2 (tile j covers q = 2j - pi, 2j + 1
                     # - pi: 1 when a dask block's tiles keep the whole array's pairs),
                     # R0..2 (products per axis: 3 F(2, 2), 4 F(2, 3), 1 elsewhere)
    _SET_MAX = 16    # most real phases of a task (a set: the residues of the last axis)
SET_MAX = _SET_MAX


cdef int64_t _wino_slot(const int64_t* rp, const int64_t* tt) noexcept nogil:
    # the product slot that holds sub-phase tt (t = 0, 1 per Winograd axis) of the real phase
    # rp once combined: its digits, in C order of the Winograd axes, are 0 or R - 1
    cdef int64_t a, slot = 0, stride = 1
    for a in range(2, -1, -1):
        if rp[6 + a] == 2:
            slot += (rp[17 + a] - 1) * tt[a] * stride
            stride *= rp[17 + a]
    return slot


cdef void _wino_phase(int isa, const real* x, const real* zero, const real* wp,
                      const int64_t* rp, const int64_t* prods, const int64_t* toff,
                      const int64_t* tkind, int64_t r0, int64_t m, const int64_t* d, real* t,
                      real* v, const real** ptr, int64_t* off, const int64_t* ck,
                      const real* cf, int64_t rstride, real* wb) noexcept nogil:
    # Tile rows r0..r0+m of the real phase rp: its products' tiles (the i-th at
    # t + i * MB * ldc), then the output transform, in place.
    cdef int64_t MB = d[14], ldc = d[15], width = d[7] * d[10] * d[17]
    cdef int64_t npr = rp[10], p, a, stride = 1, sl, dig, i, k, R, b, nw = 0, db
    cdef int64_t st[3]
    cdef int64_t rad[3]
    cdef real* ts
    cdef const real* tsrc
    cdef const real* tsrc2
    cdef uint64_t* masks = <uint64_t*> (off + MB)
    cdef bint ok
    for p in range(npr):
        _tile(isa, x, zero, wp, prods + PHASE_COLS * (rp[9] + p), toff, r0, m, d,
              t + p * MB * ldc, ptr, masks, tkind, v, ck, cf, rstride, wb)
    # slots count the Winograd axes' digits in C order (the last axis's varies fastest), R
    # digits on an axis of R products (rp[17 + a]): F(2, 2)'s 3, y0 = m0 + m1, y1 = m2 + m1;
    # F(2, 3)'s 4, y0 = (m0 + m1) - m2, y1 = (m3 + m1) + m2 (convt._winograd). Outputs go to
    # the axis's first and last digit (_wino_slot); slots with another digit on an axis
    # already combined are dead.
    for a in range(2, -1, -1):
        if rp[6 + a] != 2:
            continue
        R = rp[17 + a]
        for sl in range(npr):
            dig = (sl // stride) % R
            if dig != 0 and dig != R - 1:
                continue
            ok = True
            for b in range(nw):
                db = (sl // st[b]) % rad[b]
                ok = ok and (db == 0 or db == rad[b] - 1)
            if not ok:
                continue
            ts = t + sl * MB * ldc
            if R == 3:
                tsrc = t + (sl + stride if dig == 0 else sl - stride) * MB * ldc
                for i in range(m):
                    for k in range(width):
                        ts[i * ldc + k] += tsrc[i * ldc + k]
            elif dig == 0:
                tsrc = t + (sl + stride) * MB * ldc
                tsrc2 = t + (sl + 2 * stride) * MB * ldc
                for i in range(m):
                    for k in range(i * ldc, i * ldc + width):
                        ts[k] = (ts[k] + tsrc[k]) - tsrc2[k]
            else:
                tsrc = t + (sl - 2 * stride) * MB * ldc
                tsrc2 = t + (sl - stride) * MB * ldc
                for i in range(m):
                    for k in range(i * ldc, i * ldc + width):
                        ts[k] = (ts[k] + tsrc[k]) + tsrc2[k]
        st[nw] = stride
        rad[nw] = R
        nw += 1
        stride *= R


cdef inline int64_t _out_pos(const int64_t* rp, const int64_t* q, const int64_t* tt,
                             const int64_t* d, const int64_t* ystr) noexcept nogil:
    # where sub-phase tt of tile q = (n, j0, j1, j2) of the real phase rp starts in y (its
    # channel 0), or -1 when it is not an output (past Q: an odd Q's last tile)
    cdef int64_t a, k, pos = q[0] * ystr[0]
    for a in range(3):
        k = rp[6 + a] * q[1 + a] + tt[a] - rp[14 + a]
        if k < 0 or k >= rp[11 + a]:
            return -1
        pos += (k * d[4 + a] + rp[3 + a]) * ystr[1 + a]
    return pos


cdef void _wino_write(int isa, real* t, const real* bias, real* y, const int64_t* rp,
                      int64_t r0, int64_t m, const int64_t* d, const int64_t* ystr,
                      int64_t* off) noexcept nogil:
    # The combined tiles of the real phase rp (at t) -> y, each sub-phase's rows that are
    # outputs (an odd Q leaves the last tile's t = 1 out) moved up to be contiguous, with
    # their offsets in y: channels-last row by row, channels-first (the caller's staging
    # otherwise) in transposed blocks or one value per store.
    cdef int64_t MB = d[14], ldc = d[15], width = d[7] * d[10] * d[17], G = d[7], Mg = d[9]
    cdef int64_t gw = d[10] * d[17], a, k, sub, r, mv, i, i0, g, pos, nw = 0
    cdef int64_t ax[3]
    cdef int64_t tt[3]
    cdef int64_t q[4]
    cdef real* ts
    for a in range(2, -1, -1):
        if rp[6 + a] == 2:
            ax[nw] = a
            nw += 1
    for sub in range(1 << nw):
        tt[0] = tt[1] = tt[2] = 0
        for r in range(nw):
            tt[ax[r]] = (sub >> r) & 1
        ts = t + _wino_slot(rp, tt) * MB * ldc if rp[10] else NULL
        mv = 0
        _row_pos(r0, rp, d, q)
        for i in range(m):
            if i:
                _next_pos(rp, d, q)
            pos = _out_pos(rp, q, tt, d, ystr)
            if pos < 0:
                continue
            off[mv] = pos
            if ts != NULL and mv != i:
                for k in range(width):
                    ts[mv * ldc + k] = ts[i * ldc + k]
            mv += 1
        if ystr[4] == 1:
            _write_nxc(ts, ldc, bias, y, mv, d, off)
        elif real is float and ts != NULL and rp[8] * d[6] == 1:
            _write_blocks(isa, ts, NULL, bias, y, mv, d, ystr[4], off, 1)
        else:
            i0 = 0
            while i0 < mv:
                for g in range(G):
                    _cols(ts + g * gw if ts != NULL else NULL, NULL, ldc, bias + g * Mg,
                          y + g * Mg * ystr[4], ystr[4], off, i0, min(mv, i0 + _WRITE_ROWS),
                          Mg)
                i0 += _WRITE_ROWS


cdef void _gather_rows(const real* const* rows, const int64_t* at, int64_t n,
                       const real* bias, real* y, int64_t cs, int64_t c0, int64_t c1,
                       const int64_t* d) noexcept nogil:
    # Channels c0..c1 of each group (one value per store) of n tile rows to y at their
    # offsets at[e]; rows[e] NULL: a tap-less phase's output, only the bias.
    cdef int64_t G = d[7], Mg = d[9], gw = d[10] * d[17], e, g, mm
    for e in range(n):
        for g in range(G):
            for mm in range(c0, c1):
                y[(g * Mg + mm) * cs + at[e]] = (
                    rows[e][g * gw + mm] + bias[g * Mg + mm] if rows[e] != NULL
                    else bias[g * Mg + mm])


cdef void _gather_write(int isa, const real* const* rows, const int64_t* at, int64_t n,
                        const real* bias, real* y, int64_t cs, const int64_t* d) noexcept nogil:
    # n <= 8 tile rows to y: 8 rows at consecutive offsets, per block of 8 channels of a
    # group, in one transposed block (convt_g8_f32, convt_g8_f64); the rest one value per
    # store
    cdef int64_t G = d[7], Mg = d[9], gw = d[10] * d[17], g, mm0 = 0
    if n == 8:
        for g in range(G):
            mm0 = 0
            while mm0 + 8 <= Mg:
                if real is float:
                    convt_g8_f32(isa, rows, g * gw + mm0, bias + g * Mg + mm0,
                                 y + (g * Mg + mm0) * cs + at[0], cs)
                else:
                    convt_g8_f64(isa, rows, g * gw + mm0, bias + g * Mg + mm0,
                                 y + (g * Mg + mm0) * cs + at[0], cs)
                mm0 += 8
    _gather_rows(rows, at, n, bias, y, cs, mm0, Mg, d)


cdef void _wino_set_write(int isa, const real* t, const real* bias, real* y,
                          const int64_t* rp, int64_t nph, int64_t r0, int64_t m,
                          const int64_t* d, const int64_t* ystr) noexcept nogil:
    # Channels-first y written straight from the combined tiles of a set's nph real phases
    # (the residues of the last axis, equal in tiles and Winograd axes: convt._winograd;
    # phase p's products from t + (products before p) * MB * ldc): per sub-phase of the other
    # axes, along each line of y, a tile's outputs (its sub-phases along the last axis, each
    # phase's in turn) are consecutive, so 8 of them go out per 8 channels in one transposed
    # block; runs broken by the data's edges, one value per store.
    cdef int64_t MB = d[14], ldc = d[15], cs = ystr[4], p, first = 0, u, i, pos
    cdef int64_t n = 0, tt0, tt1
    cdef const int64_t* pp
    cdef const real* tp[_SET_MAX]
    cdef const real* rows[8]
    cdef const real* src
    cdef int64_t at[8]
    cdef int64_t tt[3]
    cdef int64_t q[4]
    for p in range(nph):
        tp[p] = t + first * MB * ldc if rp[WINO_COLS * p + 10] else NULL
        first += rp[WINO_COLS * p + 10]
    for tt0 in range(rp[6]):
        for tt1 in range(rp[7]):
            _row_pos(r0, rp, d, q)
            for i in range(m):
                if i:
                    _next_pos(rp, d, q)
                for u in range(rp[8]):
                    tt[0] = tt0
                    tt[1] = tt1
                    tt[2] = u
                    for p in range(nph):
                        pp = rp + WINO_COLS * p
                        pos = _out_pos(pp, q, tt, d, ystr)
                        if pos < 0:
                            continue
                        src = (tp[p] + _wino_slot(pp, tt) * MB * ldc + i * ldc
                               if tp[p] != NULL else NULL)
                        if n and (pos != at[n - 1] + 1 or src == NULL):
                            _gather_write(isa, rows, at, n, bias, y, cs, d)
                            n = 0
                        rows[n] = src
                        at[n] = pos
                        n += 1
                        if n == 8 or src == NULL:
                            _gather_write(isa, rows, at, n, bias, y, cs, d)
                            n = 0
            _gather_write(isa, rows, at, n, bias, y, cs, d)
            n = 0


cdef void _wino_task(int isa, const real* x, const real* zero, const real* wp,
                     const real* bias, real* y, const int64_t* rp, int64_t nph,
                     const int64_t* prods, const int64_t* toff, const int64_t* tkind,
                     int64_t r0, int64_t m, const int64_t* d, const int64_t* ystr, real* t,
                     real* v, const real** ptr, int64_t* off, const int64_t* ck,
                     const real* cf, int64_t rstride, real* wb) noexcept nogil:
    # Tile rows r0..r0+m of the nph real phases from rp (a set: d[23]; else nph = 1): each
    # phase's products and output transform, then y written.
    cdef int64_t MB = d[14], ldc = d[15], p, first = 0
    for p in range(nph):
        _wino_phase(isa, x, zero, wp, rp + WINO_COLS * p, prods, toff, tkind, r0, m, d,
                    t + first * MB * ldc, v, ptr, off, ck, cf, rstride, wb)
        first += rp[WINO_COLS * p + 10]
    if d[23]:
        _wino_set_write(isa, t, bias, y, rp, nph, r0, m, d, ystr)
    else:
        _wino_write(isa, t, bias, y, rp, r0, m, d, ystr, off)


def wino_conv(const real[::1] x,              # IN  x channels-last on its zero-haloed grid
              const real[::1] zero,           # IN  C_in zeros (rows past a task's last)
              const real[::1] wp,             # IN  packed product weights (pack_wino), or
                                              #     with ck: the kernel taps (wino_taps)
              const real[::1] bias,           # IN  (C_out,), zeros when there is none
              real[::1] y,                    # OUT addressed through ystr
              const int64_t[:, ::1] real_ph,  # IN  per real phase, WINO_COLS columns
              const int64_t[:, ::1] prods,    # IN  per product, as micro_conv's phases with
                                              #     the steps m0..2 in place of c0..2
              const int64_t[::1] toff,        # IN  per product tap: flat offset into x
              const int64_t[::1] tkind,       # IN  per product tap: its input transform,
                                              #     2 bits per axis (_wino_build)
              const int64_t[:, ::1] tasks,    # IN  per task: first real phase, first tile
                                              #     row, rows, real phases (a set's: dims[23])
              const int64_t[::1] dims,        # IN  micro_conv's dims (I0..2 unused, BI = 0,
                                              #     SM = most products of a task), then x's
                                              #     strides per axis and per image, then 1:
                                              #     sets (channels-first y written from them)
              const int64_t[::1] ystr,        # IN  y element strides (n, o0, o1, o2, channel)
              real[::1] tiles,                # OUT scratch: nthreads * (SM * ldc + TB * C_in)
                                              #     * MB values
              int64_t[::1] pointers,          # OUT scratch: nthreads * (MB * (TB + 1) + MB /
                                              #     MR) slots of 8 bytes
              int isa, int num_threads,
              const int64_t[:, ::1] ck=None,  # IN  late sums: pack_wino's ck and cf; wp holds
              const real[:, ::1] cf=None,     #     tap k's lines at k * rstride
              int64_t rstride=0,
              real[::1] wbuf=None):           # OUT scratch: nthreads * TB * CC * NR values
    """Compute y by the Winograd products; releases the GIL. See the section comment.
    With ck (late sums), the products' weights are summed from the taps per task, chunk and
    panel instead of read from pack_wino's products."""
    cdef int64_t ntasks = tasks.shape[0], k, tid
    cdef int64_t MB = dims[14], TB = dims[13], ldc = dims[15], SM = dims[16]
    cdef int64_t tstride = (SM * ldc + TB * dims[11]) * MB
    if MB > _WINO_ROWS:
        raise ValueError(f"wino_conv: at most {_WINO_ROWS} rows a task; got {MB}")
    if real_ph.shape[1] != WINO_COLS:
        raise ValueError(f"wino_conv: real_ph needs {WINO_COLS} columns; got {real_ph.shape[1]}")
    if dims.shape[0] != 24 or tasks.shape[1] != 4:
        raise ValueError(f"wino_conv: dims needs 24 values, tasks 4 columns; got "
                         f"{dims.shape[0]} and {tasks.shape[1]}")
    if dims[23] and (ystr[3] != 1 or ystr[4] == 1):
        raise ValueError("wino_conv: sets write channels-first y, its last axis contiguous; "
                         f"got element strides {tuple(ystr)}")
    for k in range(ntasks):   # a task's phases: in the table, one unless in sets, at most
        if (tasks[k, 3] < 1 or tasks[k, 0] < 0 or tasks[k, 0] + tasks[k, 3] > real_ph.shape[0]
                or tasks[k, 3] > (_SET_MAX if dims[23] else 1)):
            raise ValueError(f"wino_conv: task {k} runs real phases {tasks[k, 0]} to "
                             f"{tasks[k, 0] + tasks[k, 3] - 1} of {real_ph.shape[0]}"
                             + (f" (sets of at most {_SET_MAX})" if dims[23] else ""))
    for k in range(real_ph.shape[0]):   # a phase's products: one per digit of its radices
        if real_ph[k, 10] and real_ph[k, 10] != real_ph[k, 17] * real_ph[k, 18] * real_ph[k, 19]:
            raise ValueError(f"wino_conv: real phase {k} has {real_ph[k, 10]} products, not "
                             "the product of its radices")
    cdef const int64_t* tk
    if ntasks == 0:
        return
    cdef const real* xptr = &x[0]
    cdef const real* zeros = &zero[0]
    cdef const real* wptr = &wp[0]
    cdef const real* bptr = &bias[0]
    cdef real* yptr = &y[0]
    cdef const int64_t* rptr = &real_ph[0, 0]
    cdef const int64_t* pr = &prods[0, 0] if prods.shape[0] else NULL
    cdef const int64_t* to = &toff[0] if toff.shape[0] else NULL
    cdef const int64_t* tkd = &tkind[0] if tkind.shape[0] else NULL
    cdef const int64_t* tptr = &tasks[0, 0]
    cdef const int64_t* dm = &dims[0]
    cdef const int64_t* yst = &ystr[0]
    cdef real* tl = &tiles[0]
    cdef int64_t* pp = &pointers[0]
    cdef int64_t pstride = MB * (TB + 1) + MB // CONVT_MR
    cdef const int64_t* ckp = NULL
    cdef const real* cfp = NULL
    cdef real* wb = NULL
    cdef int64_t wstride = TB * dims[12] * dims[17]
    if ck is not None:
        if cf is None or wbuf is None or wbuf.shape[0] < num_threads * wstride:
            raise ValueError("wino_conv: late sums need cf and a wbuf of nthreads * TB * CC * NR")
        if (ck.shape[0] != cf.shape[0] or ck.shape[0] < toff.shape[0]
                or ck.shape[1] != CONVT_WSUM_MAX or cf.shape[1] != CONVT_WSUM_MAX
                or rstride < dims[10] * dims[11] * dims[17]
                or wp.shape[0] < (np.max(ck, initial=-1) + 1) * rstride):
            raise ValueError(f"wino_conv: ck, cf ({CONVT_WSUM_MAX} entries per product tap) "
                             "and rstride do not fit the taps in wp")
        if ck.shape[0]:   # else no product has taps, and nothing reads wp
            ckp = &ck[0, 0]
            cfp = &cf[0, 0]
            wb = &wbuf[0]
    with nogil:
        for k in prange(ntasks, schedule="dynamic", num_threads=num_threads):
            tk = tptr + 4 * k
            tid = threadid()
            _wino_task(isa, xptr, zeros, wptr, bptr, yptr, rptr + WINO_COLS * tk[0], tk[3], pr,
                       to, tkd, tk[1], tk[2], dm, yst, tl + tid * tstride,
                       tl + tid * tstride + SM * MB * ldc,
                       <const real**> (pp + tid * pstride), pp + tid * pstride + MB * TB,
                       ckp, cfp, rstride, wb + tid * wstride if wb != NULL else NULL)


def wino_ready(const real[::1] x, int64_t spare_bits, int num_threads):
    """Whether every value of x is below 2^(emax + 1 - spare_bits) in magnitude (finite, and
    a signed sum of 2^spare_bits of them cannot overflow): the Winograd products of values
    past that would not propagate NaN, Inf or overflow as the taps do, so the caller runs
    the micro variant then. Releases the GIL."""
    cdef int64_t n = x.shape[0], i, blk = 1 << 16, bad = 0
    if n == 0:
        return True
    cdef const real* xp = &x[0]
    with nogil:
        for i in prange((n + blk - 1) // blk, schedule="static", num_threads=num_threads):
            bad += _exponent_at_least(xp + i * blk, min(blk, n - i * blk), spare_bits)
    return bad == 0


def wino_corners(const real[::1] src, const int64_t[::1] off, real[::1] dst, int isa=-1,
                 int neg=-1):
    """dst[c] = the signed sum of src[off[j] + c] over the n = 2, 4 or 8 corners j, corner j
    subtracted when the bit count of j & neg is odd (neg = -1: every axis subtracts), in
    corner order: the input transforms a Winograd product tap reads (_wino_build's
    convt_corners), for tests. Releases the GIL."""
    cdef int64_t n = off.shape[0], C = dst.shape[0], j
    if (n not in (2, 4, 8) or min(off) < 0 or C > src.shape[0]
            or max(off) > src.shape[0] - C):
        raise ValueError(f"wino_corners: 2, 4 or 8 corners within src ({src.shape[0]} values) "
                         f"for {C} values each; got offsets {list(off)}")
    if isa < 0:
        isa = convt_ukernel_isa()
    if C == 0:
        return
    with nogil:
        if real is float:
            convt_corners_f32(isa, &src[0], &off[0], <int> n, neg, &dst[0], C)
        else:
            convt_corners_f64(isa, &src[0], &off[0], <int> n, neg, &dst[0], C)


cdef enum:
    _PACK_KB = 64    # kernel taps per transposed block in pack_micro


cdef void _transpose_taps(int isa, const real* src, real* tmp, int64_t Mg, int64_t KT,
                          int64_t k0, int64_t kb, int64_t Mgp) noexcept nogil:
    # taps k0..k0+kb of one input channel's (Mg, KT) weights -> tmp rows (kb, Mgp)
    cdef int64_t mm, k, m8 = 0, k8 = 0
    if real is float:   # 8 x 8 register transposes (the scalar loop was 2/3 of the pack)
        m8 = Mg - Mg % 8
        k8 = kb - kb % 8
        for mm in range(0, m8, 8):
            for k in range(0, k8, 8):
                convt_t8_f32(isa, src + mm * KT + k0 + k, KT, tmp + k * Mgp + mm, Mgp)
    for mm in range(Mg):
        for k in range(k8 if mm < m8 else 0, kb):
            tmp[k * Mgp + mm] = src[mm * KT + k0 + k]


cdef void _pack_channel(int isa, const real* src, real* out, real* tmp, const int64_t* kd,
                        const int64_t* ks, int64_t g, int64_t c, int64_t Mg, int64_t KT,
                        int64_t NP, int64_t NR) noexcept nogil:
    # one input channel's (Mg, KT) weights -> its NR-value line in every (tap, panel)
    cdef int64_t Mgp = NP * NR, k0 = 0, kb, k, jp, j
    cdef real* dst
    while k0 < KT:
        kb = min(<int64_t> _PACK_KB, KT - k0)
        _transpose_taps(isa, src, tmp, Mg, KT, k0, kb, Mgp)
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
               int64_t groups, int64_t NR, int num_threads, int isa=-1):
    """Pack the weights for micro_conv; releases the GIL. Per input channel (parallel), its
    (Mg, K) block is transposed in blocks of PACK_KB taps into the thread's (tap, Mg padded
    to NR) slice of the scratch, then each tap's NR-value lines are copied to their panels.
    Returns whether every weight is finite (no NaN, no Inf), checked while they are read."""
    cdef int64_t C_in = w.shape[0], Mg = w.shape[1], KT = w.shape[2]
    cdef int64_t Cg = C_in // groups, NP = (Mg + NR - 1) // NR, Mgp = NP * NR
    cdef int64_t ci, bad = 0
    if C_in == 0 or Mg == 0 or KT == 0:
        return True
    if isa < 0:
        isa = convt_ukernel_isa()
    cdef const real* wptr = &w[0, 0, 0]
    cdef real* optr = &out[0]
    cdef real* tmp = &scratch[0]
    cdef const int64_t* kd = &kdst[0]
    cdef const int64_t* ks = &kstride[0]
    with nogil:
        for ci in prange(C_in, schedule="static", num_threads=num_threads):
            _pack_channel(isa, wptr + ci * Mg * KT, optr, tmp + threadid() * _PACK_KB * Mgp, kd,
                          ks, ci // Cg, ci % Cg, Mg, KT, NP, NR)
            bad += _nonfinite(wptr + ci * Mg * KT, Mg * KT)
    return bad == 0


def pack_taps(const float[:, :, ::1] w,        # IN  IOX weights (C_in, Mg, KT), Mg % 16 == 0
               float[::1] out,                 # OUT tap k's lines at k * line, per tap
                                               #     [G][NP][Cg][16]
               int64_t groups, int64_t line, int num_threads, int isa=-1,
               bint stream=False, int64_t spare_bits=0):
    """The float32 taps for wino_conv's late sums (convt._winograd.wino_taps), as pack_wino
    with one single-tap product per tap makes them, by 8 x 8 transposes straight into their
    lines (convt_taps_f32); releases the GIL. Returns whether every weight is below
    2^(emax + 1 - spare_bits) in magnitude. stream: store past the caches, when out and line
    keep every line 32-byte aligned (otherwise stored normally)."""
    cdef int64_t C_in = w.shape[0], Mg = w.shape[1], KT = w.shape[2]
    cdef int64_t Cg = C_in // groups, NP = Mg // 16, ci, bad = 0
    if Mg % 16:
        raise ValueError(f"pack_taps: Mg must be a multiple of 16; got {Mg}")
    if C_in == 0 or Mg == 0 or KT == 0:
        return True
    if line < NP * C_in * 16 or out.shape[0] < (KT - 1) * line + NP * C_in * 16:
        raise ValueError(f"pack_taps: line {line} and out ({out.shape[0]} values) do not hold "
                         f"{KT} taps of {NP * C_in * 16} values")
    if isa < 0:
        isa = convt_ukernel_isa()
    cdef const float* wptr = &w[0, 0, 0]
    cdef float* optr = &out[0]
    # streamed stores need 32-byte aligned lines: tap k's lines start at k * line, each
    # channel's 16 values at a multiple of 16 (a hint, so any other out is stored normally)
    stream = stream and _aligned32(optr, sizeof(float), &line, 1)
    with nogil:
        for ci in prange(C_in, schedule="static", num_threads=num_threads):
            bad += convt_taps_f32(isa, wptr + ci * Mg * KT, Mg, KT,
                                  optr + ((ci // Cg) * NP * Cg + ci % Cg) * 16, line, Cg * 16,
                                  <int> spare_bits, stream)
            if stream:
                convt_store_fence()
    return bad == 0


cdef bint _aligned32(const void* base, size_t itemsize, const int64_t* offsets,
                     int64_t n) noexcept nogil:
    # whether base and base + k * itemsize for each of the n offsets k are 32-byte aligned
    # (_mm256_stream_ps / _pd fault on any other address)
    cdef int64_t i
    if (<uintptr_t> base) % 32:
        return False
    for i in range(n):
        if (offsets[i] * <int64_t> itemsize) % 32:
            return False
    return True


cdef int64_t _pack_wino_channel(int isa, const real* src, real* out, real* tmp,
                                const int64_t* ck, const real* cf, const int64_t* ud,
                                const int64_t* us, int64_t U, int64_t g, int64_t c, int64_t Mg,
                                int64_t KT, int64_t NP, int64_t NR, int stream) noexcept nogil:
    # one input channel: its taps transposed (KT <= PACK_KB), then per product tap u the sum
    # of cf[u, e] * tap ck[u, e] over its WSUM_MAX entries (cf = 0: unused), in entry order,
    # straight into its NR-value line of every panel (convt_wsum: the sums in registers, one
    # 64-byte store per line; a row buffer summed in C then copied took 7.7 ms for dcgan_g1's
    # 18.9 MB on one thread; stream: past the caches); returns 1 when a sum is not finite
    cdef int64_t Mgp = NP * NR, u, bad = 0
    cdef real* dst
    _transpose_taps(isa, src, tmp, Mg, KT, 0, KT, Mgp)
    for u in range(U):
        dst = out + ud[u] + g * NP * us[u] + c * NR
        bad |= _wsum(isa, tmp, Mgp, ck + CONVT_WSUM_MAX * u, cf + CONVT_WSUM_MAX * u, dst,
                     us[u], NP, NR, stream)
    if stream:
        convt_store_fence()
    return bad


def pack_wino(const real[:, :, ::1] w,         # IN  IOX weights (C_in, Mg, prod(K)), K <= PACK_KB
              real[::1] out,                   # OUT packed, per product [G][NP][tap][Cg][NR]
              const int64_t[:, ::1] ck,        # IN  per product tap, WSUM_MAX kernel taps ...
              const real[:, ::1] cf,           # IN  ... and their coefficients (0: unused)
              const int64_t[::1] udst,         # IN  per product tap: offset of its (group 0,
                                               #     panel 0, channel 0) line
              const int64_t[::1] ustride,      # IN  per product tap: panel stride
              real[::1] scratch,               # IN  zeros, num_threads * PACK_KB * Mg padded
                                               #     to NR (the padding stays zero)
              int64_t groups, int64_t NR, int num_threads, int isa=-1, bint stream=False,
              int64_t spare_bits=0):
    """Pack the Winograd products' weights for wino_conv (each product tap's weights are a
    signed sum of kernel taps, summed here in the compute dtype); releases the GIL. Returns
    whether every weight and every sum is finite; with spare_bits, also whether every weight
    is below 2^(emax + 1 - spare_bits) in magnitude (so that a signed sum of 2^spare_bits of
    them is finite: convt._winograd.wino_taps, whose sums wino_conv makes). stream: store
    the packed lines past the caches (convt_wsum; for packs too large to stay there,
    convt._winograd), when out, NR, udst and ustride keep every line 32-byte aligned
    (otherwise stored normally)."""
    cdef int64_t C_in = w.shape[0], Mg = w.shape[1], KT = w.shape[2], U = ck.shape[0]
    cdef int64_t Cg = C_in // groups, NP = (Mg + NR - 1) // NR, Mgp = NP * NR
    cdef int64_t ci, bad = 0
    if (ck.shape[1] != CONVT_WSUM_MAX or cf.shape[1] != CONVT_WSUM_MAX
            or cf.shape[0] != U or udst.shape[0] < U or ustride.shape[0] < U
            or (U and (np.min(ck) < 0 or np.max(ck) >= KT))):
        raise ValueError(f"pack_wino: ck and cf need {CONVT_WSUM_MAX} entries per product tap "
                         f"(kernel taps below {KT}) and udst, ustride one per product tap")
    if C_in == 0 or Mg == 0 or KT == 0 or U == 0:
        return True
    if isa < 0:
        isa = convt_ukernel_isa()
    cdef const real* wptr = &w[0, 0, 0]
    cdef real* optr = &out[0]
    cdef real* tmp = &scratch[0]
    cdef const int64_t* kp = &ck[0, 0]
    cdef const real* fp = &cf[0, 0]
    cdef const int64_t* ud = &udst[0]
    cdef const int64_t* us = &ustride[0]
    # streamed stores need 32-byte aligned lines: every line starts at udst[u] + (g * NP + jp)
    # * ustride[u] + c * NR (a hint, so any other layout is stored normally)
    stream = stream and (_aligned32(optr, sizeof(real), &NR, 1)
                         and _aligned32(optr, sizeof(real), ud, U)
                         and _aligned32(optr, sizeof(real), us, U))
    with nogil:
        for ci in prange(C_in, schedule="static", num_threads=num_threads):
            bad += _pack_wino_channel(isa, wptr + ci * Mg * KT, optr,
                                      tmp + threadid() * _PACK_KB * Mgp, kp, fp, ud, us,
                                      U, ci // Cg, ci % Cg, Mg, KT, NP, NR, stream)
            bad += _exponent_at_least(wptr + ci * Mg * KT, Mg * KT, spare_bits)
    return bad == 0
