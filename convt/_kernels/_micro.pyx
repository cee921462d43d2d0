"""Direct transposed convolution on register-blocked micro-kernels (the "micro" variant).

Phase decomposition, gather form (DESIGN.md): output o = q*s + c; phase c's taps read input
i = q + e (e per tap and axis). A task owns MB consecutive output positions (rows, flattened
over (n, q0, q1, q2)) of each phase of a set (convt._backends.direct.micro: channels-first all the phases,
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
group's last panel. When a phase has few positions per image (convt._backends.direct.micro), rows run batch
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
stride-2 one, interleaved into contiguous runs: _writeout.h's convt_cf8_f32), the rest one
value per store. One store per value ran at about 3 cycles a value: grouped_g8's 8 MB of y took
1.1-1.7 ms of a 3-4 ms call (2 threads, bench machine).

Threads: an OpenMP prange hands out tasks (dynamic); each thread owns its slice of the tile and
pointer scratch. No BLAS.

The tiles are computed by _tile.pxd and written by _tilewrite.pxd (shared with the Winograd
variant, _wino.pyx); the weights are packed by _pack.pyx.

Assumes: x channels-last contiguous, zero holds C_in zeros, wp packed by pack_micro for the
same phase table, every phase row of (dims) in range, scratch sized as documented at
micro_conv; ystr = element strides (n, o0, o1, o2, channel), the last axis contiguous when
channels-first.
"""
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t, uint16_t, uint64_t

from ._tile cimport (CONVT_BF16_AMX, CONVT_BF16_STREAM, CONVT_MR, CONVT_NR_F32, CONVT_NR_F64,
                     PHASE_COLS, _BF16_TAPS, _MAX_ROWS, _past_run, _row_pos, _run_len,
                     _tile)
from ._tilewrite cimport (_WRITE_ROWS, _cols, _cols16, _write_blocks, _write_blocks16,
                          _write_nxc, _write_nxc16)
from ._tilerows cimport _bias_row, _combine
from ._types cimport real

from . import _cpu
from ._half import level as _half_level

MR = CONVT_MR
NR_F32 = CONVT_NR_F32
NR_F64 = CONVT_NR_F64


cdef int64_t _phase_rows(const int64_t* ph, int64_t r0, int64_t m,
                         const int64_t* d) noexcept nogil:
    # of rows r0..r0+m, how many the phase has (a set's phases may differ in length)
    cdef int64_t rows = d[0] * ph[0] * ph[1] * ph[2]
    return max(<int64_t> 0, min(m, rows - r0))


cdef void _offsets(const int64_t* ph, int64_t r0, int64_t m, const int64_t* d,
                   const int64_t* ystr, int64_t* off) noexcept nogil:
    # off[i]: where row r0 + i of the phase starts in y (its channel 0); by runs along the
    # last axis, as _tile.pxd's _pointers (batch-innermost rows: runs of one)
    cdef int64_t i = 0, j, run, o, step = d[6] * ystr[3]
    cdef int64_t q[4]
    _row_pos(r0, ph, d, q)
    while i < m:
        run = _run_len(ph, d, q, m - i)
        o = (q[0] * ystr[0] + (q[1] * d[4] + ph[3]) * ystr[1]
             + (q[2] * d[5] + ph[4]) * ystr[2] + (q[3] * d[6] + ph[5]) * ystr[3])
        for j in range(run):
            off[i + j] = o + j * step
        i += run
        _past_run(ph, d, q, run)


cdef void _write_ncx(int isa, const real* t, const real* bias, real* y, const int64_t* ph,
                     int64_t nph, int64_t r0, int64_t m, const int64_t* d, int64_t cs,
                     const int64_t* off, uint16_t* y16, int kind, int hisa,
                     int stream) noexcept nogil:
    # Channels-first: the tiles of a set's phases (phase p's at t + p * MB * ldc, its row
    # offsets at off + p * MB) -> y. float32 phases along a last axis of stride 1, and pairs
    # of phases c2 = 0, 1 along one of stride 2 (equal in all else), go out in transposed
    # blocks; the others (float64, other strides, tap-less phases), one value per store in
    # blocks of _WRITE_ROWS rows, every channel of a block while its tile rows are in L1.
    # stream: a 16-bit y's whole aligned lines streamed (_tilewrite.pxd's _write_blocks16).
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
            if y16 != NULL:   # a 16-bit y (micro_conv's y16)
                _write_blocks16(hisa, kind, tp, NULL, bias, y16, mp, d, cs, off + p * MB, 1,
                                stream)
            else:
                _write_blocks(isa, tp, NULL, bias, y, mp, d, cs, off + p * MB, 1)
            p += 1
            continue
        if (real is float and pp[7] and d[6] == 2 and p + 1 < nph and pq[7] and pp[5] == 0
                and pq[5] == 1 and pp[0] == pq[0] and pp[1] == pq[1] and pp[2] == pq[2]
                and pp[3] == pq[3] and pp[4] == pq[4]):
            if y16 != NULL:
                _write_blocks16(hisa, kind, tp, tp + MB * ldc, bias, y16, mp, d, cs,
                                off + p * MB, 2, stream)
            else:
                _write_blocks(isa, tp, tp + MB * ldc, bias, y, mp, d, cs, off + p * MB, 2)
            p += 2
            continue
        i0 = 0
        while i0 < mp:
            for g in range(G):
                if real is float and y16 != NULL:
                    _cols16(hisa, kind, tp + g * gw if pp[7] else NULL, NULL, ldc,
                            bias + g * Mg,
                            y16 + g * Mg * cs, cs, off + p * MB, i0,
                            min(mp, i0 + _WRITE_ROWS), Mg)
                    continue
                _cols(tp + g * gw if pp[7] else NULL, NULL, ldc, bias + g * Mg,
                      y + g * Mg * cs, cs, off + p * MB, i0, min(mp, i0 + _WRITE_ROWS), Mg)
            i0 += _WRITE_ROWS
        p += 1


cdef void _set_task(int isa, const real* x, const real* zero, const real* wp, const real* bias,
                    real* y, const int64_t* ph, int64_t nph, const int64_t* tap_e, int64_t r0,
                    int64_t m, const int64_t* d, const int64_t* ystr, real* t, const real** ptr,
                    int64_t* off, uint16_t* y16, int kind, int hisa,
                    int bf16, int stream) noexcept nogil:
    # Rows r0..r0+m (clipped to each phase's own rows) of the nph phases of a set from ph:
    # their outputs share lines of y. Each phase's tile at t + p * MB * ldc, its row offsets
    # at off + p * MB (the sub-tiles' tap masks after the set's offsets); then the set is
    # written (stream: a 16-bit y's whole aligned lines streamed).
    cdef int64_t MB = d[14], ldc = d[15], p, mp
    cdef const int64_t* pp
    for p in range(nph):
        pp = ph + PHASE_COLS * p
        mp = _phase_rows(pp, r0, m, d)
        _offsets(pp, r0, mp, d, ystr, off + p * MB)
        if pp[7] and mp:
            _tile(isa, x, zero, wp, pp, tap_e, r0, mp, d, t + p * MB * ldc, ptr,
                  <uint64_t*> (off + nph * MB), NULL, NULL, NULL, NULL, 0, NULL, bf16)
    if ystr[4] != 1:
        _write_ncx(isa, t, bias, y, ph, nph, r0, m, d, ystr[4], off, y16, kind, hisa,
                   stream)
        return
    for p in range(nph):
        pp = ph + PHASE_COLS * p
        if real is float and y16 != NULL:
            _write_nxc16(hisa, kind, t + p * MB * ldc if pp[7] else NULL, ldc, bias, y16,
                         _phase_rows(pp, r0, m, d), d, off + p * MB)
            continue
        _write_nxc(isa, t + p * MB * ldc if pp[7] else NULL, ldc, bias, y,
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
               int isa, int num_threads,
               uint16_t[::1] y16=None,        # OUT instead of y (float32 tiles only): a
                                              #     16-bit y (float16 or bfloat16 bits,
                                              #     kind 0 or 1), each value rounded once
               int kind=0,
               int bf16=0,                    # IN  float32 only: 0, or x, zero and wp hold
                                              #     bfloat16 pairs and bf16 the mode bits of
                                              #     _bf16kernel.h (_tile.pxd; its STREAM
                                              #     bit: y16's whole lines streamed)
               int stream=0):                 # IN  y16's whole aligned lines streamed (the
                                              #     STREAM bit for float32 tiles)
    """Compute y (or y16); releases the GIL. See the module docstring."""
    cdef int64_t ntasks = tasks.shape[0], k, tid
    cdef int64_t MB = dims[14], TB = dims[13], ldc = dims[15], SM = dims[16]
    cdef const int64_t* tk
    if bf16 and not bf16 & CONVT_BF16_AMX and (MB > _MAX_ROWS or TB > _BF16_TAPS):
        # _tile.pxd's _rows_outer holds a task's rows and a block's taps in stack tables
        raise ValueError(f"micro_conv: the bfloat16 tiles take at most {_MAX_ROWS} rows a "
                         f"task and {_BF16_TAPS} taps a block; got {MB} and {TB}")
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
    cdef uint16_t* y16p = NULL
    cdef int hisa = _half_level(kind, isa)
    cdef int wstream = stream != 0 or (bf16 & CONVT_BF16_STREAM) != 0
    if y16 is not None:
        if real is float:
            y16p = &y16[0]
        else:
            raise ValueError("micro_conv: a 16-bit y needs float32 tiles")
    with nogil:
        for k in prange(ntasks, schedule="dynamic", num_threads=num_threads):
            tk = tptr + 4 * k
            tid = threadid()
            _set_task(isa, xptr, zptr, wptr, bptr, yptr, pptr + PHASE_COLS * tk[0], tk[1], te,
                      tk[2], tk[3], dm, yst, tl + tid * SM * MB * ldc,
                      <const real**> (pp + tid * pstride), pp + tid * pstride + MB * TB,
                      y16p, kind, hisa, bf16, wstream)


def tile_rows(real[:, ::1] t, const real[:, ::1] a, const real[:, ::1] b, int64_t width,
              int kind, int isa=-1, const real[::1] bias=None, real[:, ::1] y=None):
    """_tilerows.h's sums (the Winograd output transform, _wino.pyx; the write-out of
    _tilewrite.pxd) on the first ``width`` values of each row of t, for tests: kind 0-2
    the output transform in place (t = t + a, (t + a) - b, (t + a) + b); with ``bias`` and
    ``y``, the channels-last write-out y = t + bias instead. Releases the GIL."""
    cdef int64_t m = t.shape[0], ld = t.shape[1], i
    if (a.shape[0] != m or b.shape[0] != m or a.shape[1] != ld or b.shape[1] != ld
            or not 0 <= width <= ld or not 0 <= kind <= 2
            or (bias is not None and (y is None or bias.shape[0] < width
                                      or y.shape[0] != m or y.shape[1] < width))):
        raise ValueError(f"tile_rows: rows of t, a, b (and y) alike, width {width} within them, "
                         f"kind 0-2, a bias of width values; got kind {kind}")
    if isa < 0:
        isa = _cpu.ISA
    if m == 0 or width == 0:
        return
    with nogil:
        if bias is not None:
            for i in range(m):
                _bias_row(isa, &t[i, 0], &bias[0], &y[i, 0], width)
        else:
            _combine(isa, &t[0, 0], &a[0, 0], &b[0, 0], m, width, ld, kind)
