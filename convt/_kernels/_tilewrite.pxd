# Tiles of the micro and Winograd variants (_micro.pyx, _wino.pyx) written into y with the
# bias: channels-last row by row, channels-first in 8 x 8 transposed blocks along runs of rows
# contiguous in y (_writeout.h's convt_cf8_f32; a 16-bit y at ISA level 2 in 16 x 16 blocks,
# convt_cf16_h16), the rest one value per store. cdef inline in
# a .pxd, as _tile.pxd, so that each module compiles its own copy.
from libc.stdint cimport int64_t, uint16_t

from ._tilerows cimport _bias_row
from ._types cimport real

cdef extern from "_writeout.h" nogil:
    void convt_cf8_f32(int isa, const float* ta, const float* tb, int64_t ldc,
                       const float* bias, float* y, int64_t cs)
    void convt_cf8_h16(int isa, int kind, const float* ta, const float* tb, int64_t ldc,
                       const float* bias, uint16_t* y, int64_t cs)
    void convt_cf16_h16(int isa, int kind, const float* ta, const float* tb, int64_t ldc,
                        const float* bias, uint16_t* y, int64_t cs, int stream)
    void convt_store_fence()   # (_isa.h's, which _writeout.h includes)
    void convt_narrow_bias(int isa, int kind, const float* src, const float* bias,
                           uint16_t* dst, int64_t n)
    void convt_narrow(int isa, int kind, const float* src, uint16_t* dst, int64_t n)
    uint16_t convt_narrow1(int kind, float v)

cdef enum:
    _WRITE_ROWS = 16  # tile rows per block of the scalar channels-first write-out


cdef inline void _write_nxc(int isa, const real* t, int64_t ldc, const real* bias, real* y,
                            int64_t m, const int64_t* d, const int64_t* off) noexcept nogil:
    # Channels-last: tile rows (or only the bias when t is NULL) -> y, row by row, each
    # group's channels plus their bias by _tilerows.h's convt_bias_row (isa: the caller's
    # level).
    cdef int64_t G = d[7], Mg = d[9], gw = d[10] * d[17], i, g, co
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
            _bias_row(isa, tr + g * gw, bias + g * Mg, dd + g * Mg, Mg)


cdef inline void _cols(const real* ta, const real* tb, int64_t ldc, const real* bias, real* y,
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


cdef inline void _write_blocks(int isa, const real* ta, const real* tb, const real* bias,
                               real* y, int64_t mp, const int64_t* d, int64_t cs,
                               const int64_t* op, int64_t step) noexcept nogil:
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


# The same write-outs into a 16-bit y (float16 or bfloat16, _half.h's kind; float32 tiles):
# each value is the float32 write-out's, rounded once to 16 bits as it is stored, so a 16-bit
# call writes its result directly (no float32 array, no separate rounding pass). hisa: the
# level for the 16-bit stores (_half.level: 0 for float16 without F16C).

cdef inline void _write_nxc16(int hisa, int kind, const float* t, int64_t ldc,
                              const float* bias, uint16_t* y, int64_t m, const int64_t* d,
                              const int64_t* off) noexcept nogil:
    cdef int64_t G = d[7], Mg = d[9], gw = d[10] * d[17], i, g
    for i in range(m):
        if t == NULL:
            convt_narrow(hisa, kind, bias, y + off[i], G * Mg)
            continue
        for g in range(G):
            convt_narrow_bias(hisa, kind, t + i * ldc + g * gw, bias + g * Mg,
                              y + off[i] + g * Mg, Mg)


cdef inline void _cols16(int hisa, int kind, const float* ta, const float* tb, int64_t ldc,
                         const float* bias, uint16_t* y, int64_t cs, const int64_t* op,
                         int64_t i0, int64_t i1, int64_t nch) noexcept nogil:
    # _cols into a 16-bit y: per channel, up to _WRITE_ROWS rows (and their pair) summed
    # with the bias into a small buffer, rounded there in vectors, then stored one by one
    # (rounding value by value in portable C took a fifth of grouped_g8's call)
    cdef float v[2 * _WRITE_ROWS]
    cdef uint16_t h[2 * _WRITE_ROWS]
    cdef int64_t j, i, c, e, n
    cdef float bc
    for j in range(nch):
        bc = bias[j]
        c = i0
        while c < i1:
            e = min(i1, c + _WRITE_ROWS)
            n = 0
            for i in range(c, e):
                v[n] = (ta[i * ldc + j] + bc) if ta != NULL else bc
                n += 1
                if tb != NULL:
                    v[n] = tb[i * ldc + j] + bc
                    n += 1
            convt_narrow(hisa, kind, v, h, n)
            n = 0
            for i in range(c, e):
                y[j * cs + op[i]] = h[n]
                n += 1
                if tb != NULL:
                    y[j * cs + op[i] + 1] = h[n]
                    n += 1
            c = e


cdef inline void _part16(int hisa, int kind, const float* ta, const float* tb, int64_t ldc,
                         const float* bias, uint16_t* y, int64_t cs, int64_t n) noexcept nogil:
    # convt_cf8_h16 over n < 8 tile rows (the end of a run of rows contiguous in y): the rows
    # staged in an 8 x 8 block (zeros after them), written into a staging y, then n (pairs: 2n)
    # values a channel copied out. The same sum and rounding per value as _cols16, whose
    # narrowing call and 16-bit stores a channel cost a 16-bit grouped_g8 up to a tenth of a call.
    cdef float sa[64]
    cdef float sb[64]
    cdef uint16_t h[128]
    cdef int64_t i, j, w = 2 * n if tb != NULL else n
    for i in range(8):
        for j in range(8):
            sa[i * 8 + j] = ta[i * ldc + j] if i < n else 0
            if tb != NULL:
                sb[i * 8 + j] = tb[i * ldc + j] if i < n else 0
    convt_cf8_h16(hisa, kind, sa, sb if tb != NULL else NULL, 8, bias, h, 16)
    for j in range(8):
        for i in range(w):
            y[j * cs + i] = h[j * 16 + i]


cdef inline void _write_blocks16(int hisa, int kind, const float* ta, const float* tb,
                                 const float* bias, uint16_t* y, int64_t mp, const int64_t* d,
                                 int64_t cs, const int64_t* op, int64_t step,
                                 int stream=0) noexcept nogil:
    # _write_blocks into a 16-bit y; at ISA level 2 in blocks of 16 channels x 16 rows where
    # they fit (_writeout.h's convt_cf16_h16: the same bits; with a pair of phases each
    # channel's 32 outputs fill a 64-byte line of y at once, where 8 x 8 blocks stored it in
    # two halves; stream: those whole aligned lines streamed, ordered by convt_store_fence
    # before the return)
    cdef int64_t G = d[7], Mg = d[9], ldc = d[15], gw = d[10] * d[17]
    cdef int64_t g, mm0, co, i, j, k, h, nc
    cdef const float* a
    cdef const float* b
    for g in range(G):
        mm0 = 0
        while True:
            a = ta + g * gw + mm0
            b = tb + g * gw + mm0 if tb != NULL else NULL
            co = g * Mg + mm0
            if mm0 + 8 > Mg:
                _cols16(hisa, kind, a, b, ldc, bias + co, y + co * cs, cs, op, 0, mp,
                        Mg - mm0)
                break
            nc = 16 if hisa >= 2 and mm0 + 16 <= Mg else 8
            i = 0
            while i < mp:
                j = i + 1
                while j < mp and op[j] - op[j - 1] == step:
                    j += 1
                k = i
                while nc == 16 and k + 16 <= j:
                    convt_cf16_h16(hisa, kind, a + k * ldc, b + k * ldc if b != NULL else NULL,
                                   ldc, bias + co, y + co * cs + op[k], cs, stream)
                    k += 16
                while k + 8 <= j:
                    for h in range(0, nc, 8):
                        convt_cf8_h16(hisa, kind, a + k * ldc + h,
                                      b + k * ldc + h if b != NULL else NULL, ldc,
                                      bias + co + h, y + (co + h) * cs + op[k], cs)
                    k += 8
                if k < j:
                    for h in range(0, nc, 8):
                        _part16(hisa, kind, a + k * ldc + h,
                                b + k * ldc + h if b != NULL else NULL, ldc, bias + co + h,
                                y + (co + h) * cs + op[k], cs, j - k)
                i = j
            mm0 += nc
    if stream:
        convt_store_fence()
