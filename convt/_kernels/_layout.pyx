"""Layout changes the kernels need, parallel and cache-blocked.

to_padded_nxc: channels-first x (N, C, I0, I1, I2) -> the interior of a channels-last grid
xp (N, P0, P1, P2, C) at offset (H0, H1, H2); the halo of xp is left untouched. A transpose:
NumPy's strided copy runs it at a fraction of the copy bandwidth, so it is blocked here: per
input row (n, i0, i1), blocks of 16 positions (one 64-byte line of each channel's row, read
whole) x 8 channels, float32 ones as two 8 x 8 register transposes (_transpose.h's
convt_t8_f32, AVX2 when the CPU has it). Those run faster than stores of one value at a
time in either loop order: with the channels inner, the 16 rows of x read in turn all fall
in one L1 set when a plane is a multiple of 4 KiB; with them outer, each value is still a
store of its own (docs/performance.md, "Figures moved out of code comments").

Rows, in blocks of 256 positions (fewer when there are fewer rows than 4 items per thread),
are independent: an OpenMP prange over them, each written by one thread.

to_padded_nxc16: the same from 16-bit x (float16 or bfloat16, as uint16 bits) into a float32
grid, widened in the same pass (_half.h: 8 rows of 8 values widened in registers, then
transposed), so a 16-bit input costs one pass, not a conversion and then the transpose.

to_padded_nxc_narrow: the same transpose from float32 x into a 16-bit xp, each value rounded
to nearest even as it is stored (_writeout.h's convt_t8n: 8 x 8 blocks transposed in
registers, then rounded): the Winograd variant's channels-last y, staged in float32, goes to a
16-bit channels-first result in one pass, not a transpose and then a narrowing pass.

Assumes: x and xp C-contiguous of the same dtype (to_padded_nxc16: x 16-bit, xp float32;
to_padded_nxc_narrow: x float32, xp 16-bit);
H + I <= P per axis.
"""
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t, uint16_t, uint32_t

from ._finite cimport _exponent_at_least
from ._types cimport real

from . import _cpu
from ._half import level as _half_level

cdef extern from "_transpose.h" nogil:
    void convt_t8_f32(int isa, const float* src, int64_t lds, float* dst, int64_t ldd)
    int convt_t8c_f32(int isa, const float* src, int64_t lds, float* dst, int64_t ldd,
                      int spare)
    int convt_t8c_f64(int isa, const double* src, int64_t lds, double* dst, int64_t ldd,
                      int spare)

cdef extern from "_half.h" nogil:
    int convt_t8w(int isa, int kind, const uint16_t* src, int64_t lds, float* dst, int64_t ldd,
                  int spare)
    float convt_widen1(int kind, uint16_t h)
    uint16_t convt_narrow1(int kind, float v)
    uint32_t convt_f32_bits(float v)

cdef extern from "_writeout.h" nogil:
    void convt_t8n(int isa, int kind, const float* src, int64_t lds, uint16_t* dst,
                   int64_t ldd)

cdef int64_t _CBLOCK = 16
cdef enum:
    _T8 = 8  # side of the transposed blocks of _row
# Positions of a row per work item: a 1-D signal (one long row) still splits over the threads,
# and the block's C x 256 output values are written while they are in L2.
cdef enum:
    _I2BLOCK = 256
# Taps per transposed block of merge_iox (whole 16-position lines of each output channel's
# taps for _row's register transposes); Python sizes its scratch with MERGE_TAPS.
cdef enum:
    _MERGE_TAPS = 64
MERGE_TAPS = _MERGE_TAPS


cdef inline int64_t _block(int isa, const real* src, int64_t lds, real* dst, int64_t ldd,
                           int64_t spare) noexcept nogil:
    # one 8 x 8 block of _row: dst[j * ldd + k] = src[k * lds + j], with the exponent test
    # when spare >= 0 (float32 without it: the plain transpose)
    if real is float:
        if spare < 0:
            convt_t8_f32(isa, src, lds, dst, ldd)
            return 0
        return convt_t8c_f32(isa, src, lds, dst, ldd, <int> spare)
    else:
        return convt_t8c_f64(isa, src, lds, dst, ldd, <int> spare)


cdef int64_t _row(int isa, const real* src, real* dst, int64_t C, int64_t I2,
                  int64_t plane, int64_t spare=-1) noexcept nogil:
    # dst[i2 * C + c] = src[c * plane + i2]: per block of 16 positions (one line of each
    # channel's row, read whole) and 8 channels, two 8 x 8 blocks (_block: float32 in register
    # transposes, float64 with AVX2 in four 4 x 4 ones each), the rest one value per store.
    # spare >= 0: returns whether a value has an exponent field of at least all ones minus
    # spare (_exponent_at_least), tested as it is read (blocks in registers), else 0.
    cdef int64_t c0, c, i2, p0, pend, cend, bad = 0
    p0 = 0
    while p0 < I2:
        pend = min(I2, p0 + 2 * _T8)
        c0 = 0
        while c0 < C:
            cend = min(C, c0 + _T8)
            if pend - p0 == 2 * _T8 and cend - c0 == _T8:
                bad |= _block(isa, src + c0 * plane + p0, plane, dst + p0 * C + c0, C, spare)
                bad |= _block(isa, src + c0 * plane + p0 + _T8, plane,
                              dst + (p0 + _T8) * C + c0, C, spare)
            else:
                for c in range(c0, cend):
                    for i2 in range(p0, pend):
                        dst[i2 * C + c] = src[c * plane + i2]
                    if spare >= 0:
                        bad |= _exponent_at_least(src + c * plane + p0, pend - p0, spare)
            c0 = cend
        p0 = pend
    return bad


cdef int64_t _row16(int isa, int kind, const uint16_t* src, float* dst, int64_t C, int64_t I2,
                    int64_t plane, int64_t spare) noexcept nogil:
    # _row from 16-bit src, widened as read (convt_t8w: in registers); spare as in _row
    cdef int64_t c0, c, i2, p0, pend, cend, bad = 0
    cdef uint32_t lim = (0xff - <uint32_t> max(spare, 0)) << 23
    cdef float v
    p0 = 0
    while p0 < I2:
        pend = min(I2, p0 + 2 * _T8)
        c0 = 0
        while c0 < C:
            cend = min(C, c0 + _T8)
            if pend - p0 == 2 * _T8 and cend - c0 == _T8:
                bad |= convt_t8w(isa, kind, src + c0 * plane + p0, plane, dst + p0 * C + c0,
                                 C, <int> spare)
                bad |= convt_t8w(isa, kind, src + c0 * plane + p0 + _T8, plane,
                                 dst + (p0 + _T8) * C + c0, C, <int> spare)
            else:
                for c in range(c0, cend):
                    for i2 in range(p0, pend):
                        v = convt_widen1(kind, src[c * plane + i2])
                        dst[i2 * C + c] = v
                        if spare >= 0:
                            bad |= (convt_f32_bits(v) & 0x7f800000u) >= lim
            c0 = cend
        p0 = pend
    return bad


cdef void _row_narrow(int isa, int kind, const float* src, uint16_t* dst, int64_t C,
                      int64_t I2, int64_t plane) noexcept nogil:
    # _row into 16-bit dst, each value rounded as stored (convt_t8n: in registers)
    cdef int64_t c0, c, i2, p0, pend, cend
    p0 = 0
    while p0 < I2:
        pend = min(I2, p0 + 2 * _T8)
        c0 = 0
        while c0 < C:
            cend = min(C, c0 + _T8)
            if pend - p0 == 2 * _T8 and cend - c0 == _T8:
                convt_t8n(isa, kind, src + c0 * plane + p0, plane, dst + p0 * C + c0, C)
                convt_t8n(isa, kind, src + c0 * plane + p0 + _T8, plane,
                          dst + (p0 + _T8) * C + c0, C)
            else:
                for c in range(c0, cend):
                    for i2 in range(p0, pend):
                        dst[i2 * C + c] = convt_narrow1(kind, src[c * plane + i2])
            c0 = cend
        p0 = pend


cdef inline void _copy(real* dst, const real* src, int64_t n) noexcept nogil:
    cdef int64_t i
    for i in range(n):
        dst[i] = src[i]


cdef inline int64_t _row_block(int64_t I2, int64_t rows, int num_threads) noexcept:
    # positions of a row per work item of the padded transposes: _I2BLOCK, or, with fewer
    # rows than work items for the threads (a 1-D signal), shorter blocks of whole
    # 16-position lines
    cdef int64_t blk = _I2BLOCK
    cdef int64_t want = (4 * num_threads + rows - 1) // rows if rows else 1
    if (I2 + blk - 1) // blk < want:
        blk = ((I2 + want - 1) // want + 2 * _T8 - 1) // (2 * _T8) * 2 * _T8
        blk = max(<int64_t> 2 * _T8, blk)
    return blk


cdef struct _Walk:
    # the work items of the padded transposes: each row (n, i0, i1) of x (N, C, I0, I1, I2)
    # in nb blocks of blk positions, into xp (N, P0, P1, P2, C) at offset (H0, H1, H2)
    int64_t C, I0, I1, I2, P0, P1, P2, H0, H1, H2, plane, blk, nb, items


cdef struct _Item:
    int64_t src, dst, m   # x's offset of the block, xp's, and its positions


cdef _Walk _walk(const Py_ssize_t* xs, const Py_ssize_t* ps, const int64_t[::1] halo,
                 int num_threads):
    # items == 0 when there is nothing to copy (no row, channel or position)
    cdef _Walk g
    cdef int64_t rows = xs[0] * xs[2] * xs[3]
    g.C, g.I0, g.I1, g.I2 = xs[1], xs[2], xs[3], xs[4]
    g.P0, g.P1, g.P2 = ps[1], ps[2], ps[3]
    g.H0, g.H1, g.H2 = halo[0], halo[1], halo[2]
    g.plane = g.I0 * g.I1 * g.I2
    g.blk = _row_block(g.I2, rows, num_threads)
    g.nb = (g.I2 + g.blk - 1) // g.blk
    g.items = rows * g.nb if g.C > 0 else 0
    return g


cdef inline _Item _at(const _Walk* g, int64_t item) noexcept nogil:
    # the block of work item ``item`` (0 <= item < g.items): offsets in values
    cdef _Item it
    cdef int64_t r = item // g.nb, lo = (item % g.nb) * g.blk
    cdef int64_t i1 = r % g.I1, i0 = (r // g.I1) % g.I0, n = r // (g.I1 * g.I0)
    it.m = min(g.blk, g.I2 - lo)
    it.src = n * g.C * g.plane + (i0 * g.I1 + i1) * g.I2 + lo
    it.dst = (((n * g.P0 + i0 + g.H0) * g.P1 + i1 + g.H1) * g.P2 + g.H2 + lo) * g.C
    return it


def to_padded_nxc(const real[:, :, :, :, ::1] x,   # IN  (N, C, I0, I1, I2)
                  real[:, :, :, :, ::1] xp,        # OUT (N, P0, P1, P2, C), interior only
                  const int64_t[::1] halo,         # IN  (H0, H1, H2)
                  int num_threads, int isa=-1,      # isa: level (_cpu), -1 _cpu.ISA
                  int64_t spare_bits=-1):           # >= 0: also wino_ready's test, on x
    """Copy x into xp's interior; releases the GIL. Returns True, or with spare_bits >= 0
    whether every value of x passes _wino.wino_ready's bound for spare_bits, tested as the
    transpose reads it (8 x 8 blocks in registers, the rest right after their copy): the
    Winograd variant needs no separate pass over the grid, nor a parallel region of its
    own, for the test: the two cost more than testing in registers as the transpose reads
    (docs/performance.md, "The direct backend's variants", and "Figures moved out of code
    comments")."""
    cdef _Walk g = _walk(x.shape, xp.shape, halo, num_threads)
    cdef int64_t item, bad = 0
    cdef _Item at
    if g.items == 0:
        return True
    if isa < 0:
        isa = _cpu.ISA
    cdef const real* xs = &x[0, 0, 0, 0, 0]
    cdef real* xd = &xp[0, 0, 0, 0, 0]
    with nogil:
        for item in prange(g.items, schedule="static", num_threads=num_threads):
            at = _at(&g, item)
            bad += _row(isa, xs + at.src, xd + at.dst, g.C, at.m, g.plane, spare_bits)
    return bad == 0


def to_padded_nxc16(const uint16_t[:, :, :, :, ::1] x,  # IN  (N, C, I0, I1, I2), 16-bit bits
                    float[:, :, :, :, ::1] xp,             # OUT (N, P0, P1, P2, C), interior only
                    const int64_t[::1] halo,               # IN  (H0, H1, H2)
                    int num_threads, int isa=-1,           # isa: level (_cpu), -1 _cpu.ISA
                    int64_t spare_bits=-1,                 # as to_padded_nxc's
                    int kind=0):                           # 0 float16, 1 bfloat16
    """to_padded_nxc from 16-bit x (``x.view(np.uint16)``), widened to float32 in the same
    pass; the same return value (the test on the widened values)."""
    cdef _Walk g = _walk(x.shape, xp.shape, halo, num_threads)
    cdef int64_t item, bad = 0
    cdef _Item at
    if g.items == 0:
        return True
    isa = _half_level(kind, isa)
    cdef const uint16_t* xs = &x[0, 0, 0, 0, 0]
    cdef float* xd = &xp[0, 0, 0, 0, 0]
    with nogil:
        for item in prange(g.items, schedule="static", num_threads=num_threads):
            at = _at(&g, item)
            bad += _row16(isa, kind, xs + at.src, xd + at.dst, g.C, at.m, g.plane, spare_bits)
    return bad == 0


def to_padded_nxc_narrow(const float[:, :, :, :, ::1] x,  # IN  (N, C, I0, I1, I2)
                         uint16_t[:, :, :, :, ::1] xp,       # OUT (N, P0, P1, P2, C) 16-bit bits,
                                                             #     interior only
                         const int64_t[::1] halo,            # IN  (H0, H1, H2)
                         int num_threads, int isa=-1,        # isa: level (_cpu), -1 _cpu.ISA
                         int kind=0):                        # 0 float16, 1 bfloat16
    """to_padded_nxc into a 16-bit xp (``xp.view(np.uint16)``), each value rounded to
    nearest even as it is stored (astype's bits); releases the GIL."""
    cdef _Walk g = _walk(x.shape, xp.shape, halo, num_threads)
    cdef int64_t item
    cdef _Item at
    if g.items == 0:
        return
    isa = _half_level(kind, isa)
    cdef const float* xs = &x[0, 0, 0, 0, 0]
    cdef uint16_t* xd = &xp[0, 0, 0, 0, 0]
    with nogil:
        for item in prange(g.items, schedule="static", num_threads=num_threads):
            at = _at(&g, item)
            _row_narrow(isa, kind, xs + at.src, xd + at.dst, g.C, at.m, g.plane)


def iox_to_kio(const real[:, :, ::1] w,     # IN  (C_in, Mg, Kt): IOX weights, taps flat
               real[:, :, ::1] out,         # OUT (Kt, C_in, Mg)
               int num_threads):
    """out[k, c, m] = w[c, m, k] (the weight packing of the GEMM variant; per group its
    (Cg, Mg) tap blocks are then contiguous). Per input channel, 16 output channels at a
    time, so each store of a tap fills one 64-byte line; releases the GIL."""
    cdef int64_t C = w.shape[0], M = w.shape[1], K = w.shape[2], c, m0, m, k, mend
    if C == 0 or M == 0 or K == 0:
        return
    cdef const real* src = &w[0, 0, 0]
    cdef real* dst = &out[0, 0, 0]
    with nogil:
        for c in prange(C, schedule="static", num_threads=num_threads):
            m0 = 0
            while m0 < M:
                mend = min(M, m0 + _CBLOCK)
                for k in range(K):
                    for m in range(m0, mend):
                        dst[(k * C + c) * M + m] = src[(c * M + m) * K + k]
                m0 = mend


def merge_iox(const real[::1] w,             # IN  IOX weights, flat (G*Cg, Mg, Kt)
              real[::1] out,                 # OUT per op and group (Cg, nj*Mg), flat
              const int64_t[::1] dst,        # IN  per tap: its column block's offset in
                                             #     out for row 0, or -1 if no op uses it
              const int64_t[::1] row_step,   # IN  per tap: its op's row length (nj*Mg)
              int64_t Mg, int num_threads,
              real[::1] scratch,             # per thread, _MERGE_TAPS * Mg values
              int isa=-1):                   # level (_cpu), -1 _cpu.ISA
    """The GEMM ops' weights straight from the user's IOX filter: each op's taps side by
    side along the output channels, so one GEMM covers several phases reading the same input
    (convt._backends.direct.gemm). Per input channel (row r of w), its (Mg, Kt) block is transposed
    _MERGE_TAPS taps at a time into the thread's scratch (``_row``: 8 x 8 register transposes
    for float32), then each tap's Mg weights are copied to their place in one run: stores of
    one value at a time run several times slower than a copy (docs/performance.md, "Figures
    moved out of code comments"). Rows are independent, one thread each. Releases the GIL.
    Returns whether every weight is finite (no NaN, no Inf), tested by the transpose as it
    reads them."""
    cdef int64_t Kt = dst.shape[0], rows, r, k0, kend, k, bad = 0
    cdef const real* src
    cdef real* sc
    if Mg == 0 or Kt == 0:
        return True
    rows = w.shape[0] // (Mg * Kt)
    if scratch.shape[0] < max(1, num_threads) * _MERGE_TAPS * Mg:
        raise ValueError(f"merge_iox: scratch holds {scratch.shape[0]} values, "
                         f"needs {max(1, num_threads) * _MERGE_TAPS * Mg}")
    if isa < 0:
        isa = _cpu.ISA
    cdef real* o = &out[0]
    cdef const int64_t* d = &dst[0]
    cdef const int64_t* rs = &row_step[0]
    with nogil:
        for r in prange(rows, schedule="static", num_threads=num_threads):
            sc = &scratch[0] + threadid() * _MERGE_TAPS * Mg
            src = &w[0] + r * Mg * Kt
            k0 = 0
            while k0 < Kt:
                kend = min(Kt, k0 + _MERGE_TAPS)
                # sc[k - k0, m] = src[m, k]; NaN or Inf (spare 0) tested as it is read
                bad += _row(isa, src + k0, sc, Mg, kend - k0, Kt, 0)
                for k in range(k0, kend):
                    if d[k] >= 0:
                        _copy(o + d[k] + r * rs[k], sc + (k - k0) * Mg, Mg)
                k0 = kend
    return bad == 0
