"""Direct transposed convolution by Winograd products (the "winograd" variant): wino_conv.

convt._backends.direct.winograd plans it: per phase, along each axis whose phase has two taps one input apart
(y[q] = W_lo x[q + e] + W_hi x[q + e + 1]), outputs q = 2j, 2j + 1 come from three products
(Winograd's F(2, 2), interpolation points 0, 1, infinity), each a GEMM over the channels:
    m0 = (x[u] - x[u+1]) W_lo,  m1 = x[u+1] (W_lo + W_hi),  m2 = (x[u+1] - x[u+2]) (-W_hi)
    y[2j] = m0 + m1,  y[2j+1] = m1 + m2           (u = 2j + e)
3 products for 2 outputs instead of 4 (per axis; 9 for 4 in 2-D). Along an axis of three
taps W0, W1, W2 one input apart, four (F(2, 3), points 0, 1, -1, infinity):
    m0 = (x[u] - x[u+2]) W0,  m1 = (x[u+1] + x[u+2]) (W0 + W1 + W2) / 2,
    m2 = (x[u+1] - x[u+2]) (W0 - W1 + W2) / 2,  m3 = (x[u+1] - x[u+3]) (-W2)
    y[2j] = (m0 + m1) - m2,  y[2j+1] = (m3 + m1) + m2
(16 for 4 in 2-D instead of 36). The weights' sums are made once per plan (_pack.pyx's
pack_wino), or, for one-shot calls with large products (convt._backends.direct.winograd.late_sums), per task,
chunk and panel from the packed taps, in cache (_tile.pxd's late sums). A product is run as a
phase of the micro variant (_tile.pxd's register tiles, blocking and packing as there) whose
taps read the input on a zero-haloed grid with a step of 2 tiles along Winograd axes; a tap
that reads an input transform has it built per task (_wino_build, into the thread's scratch:
contiguous rows, in cache when the kernel reads them). A task's products are then combined
in place, one axis after the other (the "output transform"), and the 2^w sub-tiles (t = 0,
1 per Winograd axis) written out like the micro variant's tiles (channels-last; the caller
transposes channels-first y afterwards). A task may instead run a set of real phases (the
residues of the last axis, equal in tiles and Winograd axes: dims[23]), all its tiles held,
whose outputs then fill runs of each line of channels-first y: written straight to y, 8
consecutive outputs x 8 channels per transposed block (_wino_set_write), or into a 16-bit
y (float16 / bfloat16 of a float32 call) through an 8 x 8 block in L1 whose rows are rounded
as they are stored (_gather_write16: no narrowing pass of y afterwards). Axes without the
two- or three-tap structure, and phases without any, run their taps as they are (one
product summing all of a phase's taps).

wino_ready checks the input before a call (values past its bound run the micro variant);
wino_corners exposes the input transforms to the tests.
"""
import numpy as np
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t, uint16_t, uint64_t

from ._finite cimport _exponent_at_least
from ._packkernel cimport CONVT_WSUM_MAX
from ._tile cimport (CONVT_MR, PHASE_COLS, _MAX_ROWS, _next_pos, _row_pos, _tile,
                     convt_corners_f32, convt_corners_f64)
from ._tilewrite cimport _WRITE_ROWS, _cols, _write_blocks, _write_nxc
from ._tilerows cimport _combine
from ._types cimport real

from . import _cpu
from ._half import level as _half_level

cdef extern from "_writeout.h" nogil:
    void convt_narrow(int isa, int kind, const float* src, uint16_t* dst, int64_t n)
    uint16_t convt_narrow1(int kind, float v)
    void convt_g8_f32(int isa, const float* const* rows, int64_t coff, const float* bias,
                      float* y, int64_t cs)
    void convt_g8_f64(int isa, const double* const* rows, int64_t coff, const double* bias,
                      double* y, int64_t cs)

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
    cdef int64_t npr = rp[10], p, a, stride = 1, sl, dig, R, b, nw = 0, db
    cdef int64_t st[3]
    cdef int64_t rad[3]
    cdef real* ts
    cdef const real* tsrc
    cdef uint64_t* masks = <uint64_t*> (off + MB)
    cdef bint ok
    for p in range(npr):
        _tile(isa, x, zero, wp, prods + PHASE_COLS * (rp[9] + p), toff, r0, m, d,
              t + p * MB * ldc, ptr, masks, tkind, v, ck, cf, rstride, wb)
    # slots count the Winograd axes' digits in C order (the last axis's varies fastest), R
    # digits on an axis of R products (rp[17 + a]): F(2, 2)'s 3, y0 = m0 + m1, y1 = m2 + m1;
    # F(2, 3)'s 4, y0 = (m0 + m1) - m2, y1 = (m3 + m1) + m2 (convt._backends.direct.winograd). Outputs go to
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
                _combine(isa, ts, tsrc, tsrc, m, width, ldc, 0)
            elif dig == 0:
                _combine(isa, ts, t + (sl + stride) * MB * ldc, t + (sl + 2 * stride) * MB * ldc,
                         m, width, ldc, 1)
            else:
                _combine(isa, ts, t + (sl - 2 * stride) * MB * ldc, t + (sl - stride) * MB * ldc,
                         m, width, ldc, 2)
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
            _write_nxc(isa, ts, ldc, bias, y, mv, d, off)
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


cdef void _gather_write16(int isa, const float* const* rows, const int64_t* at, int64_t n,
                          const float* bias, uint16_t* y16, int64_t cs, const int64_t* d,
                          int kind, int hisa) noexcept nogil:
    # _gather_write into 16-bit y: a transposed block of 8 x 8 values with their bias in
    # float32 (convt_g8_f32, in L1), its rows rounded into y16 (convt_narrow at level hisa);
    # the rest one value per store. Each value is the float32 write's, rounded once.
    cdef float blk[64]
    cdef int64_t G = d[7], Mg = d[9], gw = d[10] * d[17], g, mm0 = 0, mm, e, j
    cdef uint16_t* yb
    if n == 8:
        for g in range(G):
            mm0 = 0
            while mm0 + 8 <= Mg:
                convt_g8_f32(isa, rows, g * gw + mm0, bias + g * Mg + mm0, blk, 8)
                yb = y16 + (g * Mg + mm0) * cs + at[0]
                for j in range(8):
                    convt_narrow(hisa, kind, blk + 8 * j, yb + j * cs, 8)
                mm0 += 8
    for e in range(n):
        for g in range(G):
            for mm in range(mm0, Mg):
                y16[(g * Mg + mm) * cs + at[e]] = convt_narrow1(kind, (
                    rows[e][g * gw + mm] + bias[g * Mg + mm] if rows[e] != NULL
                    else bias[g * Mg + mm]))


cdef void _gather_write(int isa, const real* const* rows, const int64_t* at, int64_t n,
                        const real* bias, real* y, int64_t cs, const int64_t* d,
                        uint16_t* y16, int kind, int hisa) noexcept nogil:
    # n <= 8 tile rows to y: 8 rows at consecutive offsets, per block of 8 channels of a
    # group, in one transposed block (convt_g8_f32, convt_g8_f64); the rest one value per
    # store. y16 (float only): into 16-bit y instead (_gather_write16).
    cdef int64_t G = d[7], Mg = d[9], gw = d[10] * d[17], g, mm0 = 0
    if real is float:
        if y16 != NULL:
            _gather_write16(isa, rows, at, n, bias, y16, cs, d, kind, hisa)
            return
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
                          const int64_t* d, const int64_t* ystr, uint16_t* y16, int kind,
                          int hisa) noexcept nogil:
    # Channels-first y written straight from the combined tiles of a set's nph real phases
    # (the residues of the last axis, equal in tiles and Winograd axes: convt._backends.direct.winograd;
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
                            _gather_write(isa, rows, at, n, bias, y, cs, d, y16, kind, hisa)
                            n = 0
                        rows[n] = src
                        at[n] = pos
                        n += 1
                        if n == 8 or src == NULL:
                            _gather_write(isa, rows, at, n, bias, y, cs, d, y16, kind, hisa)
                            n = 0
            _gather_write(isa, rows, at, n, bias, y, cs, d, y16, kind, hisa)
            n = 0


cdef void _wino_task(int isa, const real* x, const real* zero, const real* wp,
                     const real* bias, real* y, const int64_t* rp, int64_t nph,
                     const int64_t* prods, const int64_t* toff, const int64_t* tkind,
                     int64_t r0, int64_t m, const int64_t* d, const int64_t* ystr, real* t,
                     real* v, const real** ptr, int64_t* off, const int64_t* ck,
                     const real* cf, int64_t rstride, real* wb, uint16_t* y16, int kind,
                     int hisa) noexcept nogil:
    # Tile rows r0..r0+m of the nph real phases from rp (a set: d[23]; else nph = 1): each
    # phase's products and output transform, then y written.
    cdef int64_t MB = d[14], ldc = d[15], p, first = 0
    for p in range(nph):
        _wino_phase(isa, x, zero, wp, rp + WINO_COLS * p, prods, toff, tkind, r0, m, d,
                    t + first * MB * ldc, v, ptr, off, ck, cf, rstride, wb)
        first += rp[WINO_COLS * p + 10]
    if d[23]:
        _wino_set_write(isa, t, bias, y, rp, nph, r0, m, d, ystr, y16, kind, hisa)
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
              real[::1] wbuf=None,            # OUT scratch: nthreads * TB * CC * NR values
              uint16_t[::1] y16=None,         # OUT sets: y in 16-bit storage, through ystr
              int ykind=0):                   #     (y then unwritten), of kind ykind
    """Compute y by the Winograd products; releases the GIL. See the section comment.
    With ck (late sums), the products' weights are summed from the taps per task, chunk and
    panel instead of read from pack_wino's products. With y16 (float32 sets), each value
    of y is rounded to nearest even into y16 as it is written (astype's bits)."""
    cdef int64_t ntasks = tasks.shape[0], k, tid
    cdef int64_t MB = dims[14], TB = dims[13], ldc = dims[15], SM = dims[16]
    cdef int64_t tstride = (SM * ldc + TB * dims[11]) * MB
    if MB > _MAX_ROWS:
        raise ValueError(f"wino_conv: at most {_MAX_ROWS} rows a task; got {MB}")
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
    if y16 is not None and (real is not float or not dims[23]
                            or (ntasks and y16.shape[0] == 0)):
        raise ValueError(f"wino_conv: y16 needs float32, sets and values for the tasks to "
                         f"write; got {y16.shape[0]} for {ntasks} tasks")
    cdef const int64_t* tk
    cdef uint16_t* y16p = &y16[0] if y16 is not None and y16.shape[0] else NULL
    cdef int hisa = _half_level(ykind, isa)
    if ntasks == 0:
        return
    cdef const real* xptr = &x[0]
    cdef const real* zeros = &zero[0]
    cdef const real* wptr = &wp[0]
    cdef const real* bptr = &bias[0]
    cdef real* yptr = &y[0] if y16 is None else NULL
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
                       ckp, cfp, rstride, wb + tid * wstride if wb != NULL else NULL,
                       y16p, ykind, hisa)


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
        isa = _cpu.ISA
    if C == 0:
        return
    with nogil:
        if real is float:
            convt_corners_f32(isa, &src[0], &off[0], <int> n, neg, &dst[0], C)
        else:
            convt_corners_f64(isa, &src[0], &off[0], <int> n, neg, &dst[0], C)

