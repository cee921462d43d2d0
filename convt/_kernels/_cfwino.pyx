"""The Winograd variant on channels-first x as it is: 1-D layers of stride S whose S phases
each have two taps one input apart (2S taps: HiFi-GAN's and MelGAN's up-sampling layers).

Each phase c of such a layer (o = S q + c) has two taps one input apart, W_lo reading
x[q + e_c] and W_hi reading x[q + e_c + 1], and its outputs q = 2j, 2j + 1 come from three
products per tile j (u = 2j + e_c; convt/_kernels/_wino.pyx):

    m0 = (x[u] - x[u+1]) W_lo,  m1 = x[u+1] (W_lo + W_hi),  m2 = (x[u+1] - x[u+2]) (-W_hi)
    y[2j] = m0 + m1,  y[2j+1] = m2 + m1.

The phases' offsets e_c take at most two values, e and e + 1 (convt._backends.direct.cfwino.cf_layout), so
the input transforms of a tile are two sets of three rows, each phase reading one set.

The NXC kernel (wino_conv) reads x channels-last: channels-first x is transposed into its
grid and y staged channels-last, then transposed back (or written in transposed blocks). Here
the tiles j run along the last axis, which is contiguous in channels-first x and y: a task owns
a block of 3 vectors of tiles of one image. It copies each input channel's segment of x
(zeros off the data), splits it into even and odd positions, and builds the two sets of input
transforms as rows of 3 vectors per channel, in the thread's scratch; then per group and block
of four output channels, _cwkernel.h's tile sums each of the 3S products over the group's
channels in registers, and convt_cw_out (S = 2) or convt_cw_outs combines them into the
block's 4 x 2S x 3V outputs per channel and stores them interleaved, with the bias, straight
into y. So there is no transpose of x or y, and the products' tiles never leave L1.

The sums are the NXC kernel's: each product's over the channels in order from zero, one FMA
each; y0 = (m0 + m1) + bias and y1 = (m2 + m1) + bias; the same differences of the same
values. So the two give the same bits (tests/test_cfwino.py), and a dask block the kernel
cannot compute runs the NXC one. Bit-identical for any thread count: every output is summed
by one task.

Each task also tests its part of x (the rows' positions from its block's first input to the
next block's, all of them over the blocks of an image) against wino_ready's bound (spare
bits): the call returns False if a value is past it, and the caller then runs the micro
variant, which overwrites all of y.

16-bit x (x16, float16 needing F16C, or bfloat16) is read as it is: each segment is widened
in registers as it is split into even and odd positions (_cwkernel.h's convt_cw_rows16, in
place as float32 x is read; a 16-bit copy with zeros at the data's ends) and the bound is
tested on the 16-bit bits (_past16), so a 16-bit call makes no widening pass of x, nor a
widened copy of its segments; each task prefetches a segment _AHEAD channels before it
reads it (x is cold from the caches when other layers run between calls; docs/performance.md,
"Channels-first Winograd: 16-bit x widened in its rows, prefetched"). A NaN sends the call to
the micro variant, so F16C's quieting of a signaling NaN never reaches y.

16-bit y (y16) is written as it is too: at S = 2 each row's outputs of a block are rounded in
registers as convt_cw_out16_f32 stores them; for other strides they are combined into a
buffer of the thread's scratch (2 S J float32 values, in L1) and rounded from there into y16's
row (_half.h's convt_narrow). Either way astype's rounding of the float32 value, so a 16-bit
call makes no narrowing pass of y either.

Assumes: x channels-first contiguous (N, C_in, W); wp packed by convt._backends.direct.cfwino.cf_weights,
(G, QD, S, 3, Cg, 4); bias per output channel; the AVX2 + FMA path (isa 1).
"""
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t, uint16_t
from libc.string cimport memcpy, memset

from ._finite cimport _exponent_at_least
from ._types cimport real

from . import _cpu
from ._half import level as _half_level

cdef extern from "_half.h" nogil:
    void convt_narrow(int isa, int kind, const float* src, uint16_t* dst, int64_t n)

cdef extern from "_isa.h" nogil:
    void convt_prefetch_rows(const void* p, int64_t stride, int64_t n, int64_t nbytes)

cdef extern from "_cwkernel.h" nogil:
    void convt_cw_rows16(int kind, const uint16_t* seg, int64_t half, const int64_t* dd,
                         float* st, int64_t CJ, int64_t J, float* ev, float* od)
    void convt_cw_tile_f32(const float* s, int64_t kc, const float* w, float* out)
    void convt_cw_tile_f64(const double* s, int64_t kc, const double* w, double* out)
    void convt_cw_tile512_f32(const float* s, int64_t kc, const float* w, float* out)
    void convt_cw_tile512_f64(const double* s, int64_t kc, const double* w, double* out)
    void convt_cw_out_f32(const float* t, int64_t rs, float bias, float* y, int64_t valid)
    void convt_cw_out_f64(const double* t, int64_t rs, double bias, double* y, int64_t valid)
    void convt_cw_out16_f32(const float* t, int64_t rs, float bias, uint16_t* y16,
                            int64_t valid, int kind)
    void convt_cw_outs_f32(const float* t, int64_t rs, int64_t S, float bias, float* y,
                           int64_t valid, int64_t J)
    void convt_cw_outs_f64(const double* t, int64_t rs, int64_t S, double bias, double* y,
                           int64_t valid, int64_t J)
    void convt_cw_rows_f32(const float* seg, int64_t half, const int64_t* dd, float* st,
                           int64_t CJ, int64_t J, float* ev, float* od)
    void convt_cw_rows_f64(const double* seg, int64_t half, const int64_t* dd, double* st,
                           int64_t CJ, int64_t J, double* ev, double* od)


cdef enum:
    _AHEAD = 6   # channels: a 16-bit segment is prefetched this many channels ahead


cdef inline void _tile(const real* s, int64_t kc, const real* w, real* out,
                       bint zmm) noexcept nogil:
    # zmm: the AVX-512 tile (level 2), else the AVX2 one; the same bits
    if real is float:
        if zmm:
            convt_cw_tile512_f32(s, kc, w, out)
        else:
            convt_cw_tile_f32(s, kc, w, out)
    else:
        if zmm:
            convt_cw_tile512_f64(s, kc, w, out)
        else:
            convt_cw_tile_f64(s, kc, w, out)


cdef int64_t _past16(const uint16_t* v, int64_t n, int64_t spare, int kind) noexcept nogil:
    # _exponent_at_least on v[:n] widened, tested on the 16-bit bits: bfloat16 keeps float32's
    # exponent field (bits 7-14); a finite float16 widens to an exponent of at most 142, below
    # any bound of spare < 113, so only its Inf and NaN (all ones) are past it
    cdef int64_t i
    cdef uint16_t bad = 0, lim = (0xff - <uint16_t> spare) << 7
    if kind == 1:
        for i in range(n):
            bad |= (v[i] & 0x7f80) >= lim
    else:
        for i in range(n):
            bad |= (v[i] & 0x7c00) == 0x7c00
    return bad != 0


cdef int64_t _block(const real* x, const real* wp, const real* bias, real* y,
                    const int64_t* d, real* sp, int64_t task, bint zmm,
                    const uint16_t* x16, int kind, uint16_t* y16, int ykind,
                    int yisa) noexcept nogil:
    # Task = (image n, block bi) of J tiles: its transforms, then its outputs. Returns 1 when
    # a value of its part of x is past the bound. x16 (16-bit x of the given kind, float
    # only; x unread then): the bound tested on its bits, each segment widened as its rows
    # are built. y16 (16-bit y of kind ykind, float only; y unused then): at S = 2 each row's
    # outputs rounded in registers as they are stored (convt_cw_out16_f32, level yisa >= 1),
    # else combined into the scratch's last 2 S J values, then rounded into y16's row
    # (convt_narrow at level yisa).
    cdef int64_t C = d[1], W = d[2], O = d[3], G = d[4], Cg = d[5], Mg = d[6], QD = d[7]
    cdef int64_t J = d[8], NB = d[9], emin = d[10], spare = d[13], L = d[14], S = d[15]
    cdef const int64_t* rset = d + 16     # per phase: its transform rows' set (0 or 1)
    cdef int64_t n = task // NB, bi = task % NB
    cdef int64_t j0 = bi * J, base = 2 * j0 + emin
    cdef int64_t lo = max(0, -base), hi = min(L, W - base)
    cdef int64_t c0 = 0 if bi == 0 else min(W, 2 * j0)
    cdef int64_t c1 = W if bi == NB - 1 else min(W, 2 * j0 + 2 * J)
    cdef int64_t half = L // 2, rs = 4 * J, span = 2 * S * J, c, m, g, qd, r, co, bad = 0
    cdef int64_t valid = min(span, O - span * bi)
    cdef real* seg = sp
    cdef real* ev = seg + L
    cdef real* od = ev + half
    cdef real* st = od + half            # [set][m][channel][J]
    cdef real* tt = st + 6 * C * J       # [phase][m][row][J]
    cdef real* yb = tt + 12 * S * J      # y16: one row's outputs in float32
    cdef const real* xr
    cdef const real* src
    cdef const uint16_t* s16
    if real is float:
        if x16 != NULL and lo == 0 and hi == L:
            for c in range(min(C, _AHEAD)):
                convt_prefetch_rows(x16 + (n * C + c) * W + base, 0, 1, L * sizeof(uint16_t))
    cdef real* yr
    for c in range(C):
        if real is float:
            if x16 != NULL:
                if c + _AHEAD < C and lo == 0 and hi == L:
                    convt_prefetch_rows(x16 + (n * C + c + _AHEAD) * W + base, 0, 1,
                                        L * sizeof(uint16_t))
                if c1 > c0:
                    bad |= _past16(x16 + (n * C + c) * W + c0, c1 - c0, spare, kind)
                if lo == 0 and hi == L:   # in the data: read in place
                    s16 = x16 + (n * C + c) * W + base
                else:                     # a 16-bit copy in seg, zeros (+0) off the data
                    s16 = <uint16_t*> seg
                    if lo > 0:
                        memset(<uint16_t*> seg, 0, min(lo, L) * sizeof(uint16_t))
                    if hi > lo:
                        memcpy(<uint16_t*> seg + lo, x16 + (n * C + c) * W + base + lo,
                               (hi - lo) * sizeof(uint16_t))
                    if hi < L:
                        memset(<uint16_t*> seg + max(hi, lo), 0,
                               (L - max(hi, lo)) * sizeof(uint16_t))
                convt_cw_rows16(kind, s16, half, d + 11, st + c * J, C * J, J, ev, od)
                continue
        xr = x + (n * C + c) * W
        if c1 > c0:
            bad |= _exponent_at_least(xr + c0, c1 - c0, spare)
        if lo == 0 and hi == L:   # the segment lies in the data: read it in place
            src = xr + base
        else:                     # a copy, zeros off the data
            if lo > 0:
                memset(seg, 0, min(lo, L) * sizeof(real))
            if hi > lo:
                memcpy(seg + lo, xr + base + lo, (hi - lo) * sizeof(real))
            if hi < L:
                memset(seg + max(hi, lo), 0, (L - max(hi, lo)) * sizeof(real))
            src = seg
        if real is float:
            convt_cw_rows_f32(<const float*> src, half, d + 11, st + c * J, C * J, J, ev, od)
        else:
            convt_cw_rows_f64(<const double*> src, half, d + 11, st + c * J, C * J, J, ev, od)
    for g in range(G):
        for qd in range(QD):
            for c in range(S):
                for m in range(3):
                    _tile(st + ((rset[c] * 3 + m) * C + g * Cg) * J, Cg,
                          wp + (((g * QD + qd) * S + c) * 3 + m) * Cg * 4,
                          tt + (c * 3 + m) * rs, zmm)
            for r in range(4):
                co = qd * 4 + r
                if co >= Mg:
                    break
                co = g * Mg + co
                yr = y + (n * G * Mg + co) * O + span * bi if y16 == NULL else yb
                if real is float:
                    if y16 != NULL and S == 2 and yisa >= 1:   # rounded in registers
                        convt_cw_out16_f32(tt + r * J, rs, bias[co],
                                           y16 + (n * G * Mg + co) * O + span * bi, valid,
                                           ykind)
                        continue
                if S == 2:
                    if real is float:
                        convt_cw_out_f32(tt + r * J, rs, bias[co], yr, valid)
                    else:
                        convt_cw_out_f64(tt + r * J, rs, bias[co], yr, valid)
                elif real is float:
                    convt_cw_outs_f32(tt + r * J, rs, S, bias[co], yr, valid, J)
                else:
                    convt_cw_outs_f64(tt + r * J, rs, S, bias[co], yr, valid, J)
                if real is float:
                    if y16 != NULL:
                        convt_narrow(yisa, ykind, yb, y16 + (n * G * Mg + co) * O + span * bi,
                                     valid)
    return bad


def cfwino_conv(const real[::1] x,        # IN  (N, C_in, W) channels-first, contiguous
                const real[::1] wp,       # IN  product weights (G, QD, S, 3, Cg, 4)
                const real[::1] bias,     # IN  (C_out,)
                real[::1] y,              # OUT (N, C_out, O) channels-first, contiguous
                                          #     (with y16: unread, any size)
                const int64_t[::1] dims,  # IN  N, C_in, W, O, G, Cg, Mg, QD, J, NB, emin,
                                          #     the two row sets' offsets dd (0 or 1), spare,
                                          #     L, S, then per phase its row set
                real[::1] scratch,        # OUT nthreads * (2 L + 6 C_in J + 12 S J) values,
                                          #     2 S J more each with y16
                int num_threads,
                const uint16_t[::1] x16=None,   # IN  x in 16-bit storage (x then unread)
                int kind=0,               # IN  x16's kind (_half.KINDS; needs F16C for 0)
                uint16_t[::1] y16=None,   # OUT y in 16-bit storage (y then unwritten)
                int ykind=0):             # IN  y16's kind (_half.KINDS)
    """Compute y (or y16: each value rounded to nearest even as it is stored, the bits of
    y's float32 value narrowed by astype); returns False (y then partly written) when a
    value of x is past the Winograd bound (the caller runs the micro variant). Releases the
    GIL. See the module docstring."""
    cdef int64_t tasks = dims[0] * dims[9], task, tid, bad = 0
    cdef bint zmm = _cpu.kernel_level("cfwino") >= 2
    cdef int64_t per = scratch.shape[0] // max(num_threads, 1)
    if tasks == 0 or (y.shape[0] if y16 is None else y16.shape[0]) == 0:
        return True
    cdef const real* xptr = &x[0]
    cdef const uint16_t* x16p = NULL
    if x16 is not None:
        if real is not float or x16.shape[0] != dims[0] * dims[1] * dims[2] or dims[13] >= 113:
            raise ValueError(f"cfwino_conv: x16 needs float32, N C_in W values and spare bits "
                             f"below 113; got {x16.shape[0]} values, spare {dims[13]}")
        x16p = &x16[0]
    cdef uint16_t* y16p = NULL
    cdef int yisa = _half_level(ykind)
    if y16 is not None:
        if real is not float or y16.shape[0] != dims[0] * dims[4] * dims[6] * dims[3] \
                or per < 2 * (dims[14] + 3 * dims[1] * dims[8] + 7 * dims[15] * dims[8]):
            raise ValueError(f"cfwino_conv: y16 needs float32, N C_out O values and "
                             f"scratch of 2 (L + 3 C_in J + 7 S J) values a thread; got "
                             f"{y16.shape[0]} values, {per} a thread")
        y16p = &y16[0]
    cdef const real* wptr = &wp[0]
    cdef const real* bptr = &bias[0]
    cdef real* yptr = &y[0] if y16 is None else NULL
    cdef const int64_t* dm = &dims[0]
    cdef real* sp = &scratch[0]
    with nogil:
        for task in prange(tasks, schedule="dynamic", num_threads=num_threads):
            tid = threadid()
            bad += _block(xptr, wptr, bptr, yptr, dm, sp + tid * per, task, zmm, x16p, kind,
                          y16p, ykind, yisa)
    return bad == 0


def cf_pack(const real[:, :, ::1] w3,      # IN  the IOX filter (C_in, Mg, K)
            real[::1] out,                 # OUT (G, QD, S, 3, Cg, 4)
            const int64_t[::1] taps,       # IN  per phase c < S: W_lo's tap, W_hi's tap
            int64_t groups,
            int64_t spare_bits=0):         # IN  the bound's spare exponent bits
    """The products' weights as cfwino_conv reads them (convt._backends.direct.cfwino.cf_weights): per
    phase W_lo, W_lo + W_hi and -W_hi, rows past Mg zero. Returns whether every one is below
    2^(emax + 1 - spare_bits) in magnitude (0: finite). Releases the GIL."""
    cdef int64_t C = w3.shape[0], Mg = w3.shape[1], K = w3.shape[2]
    cdef int64_t Cg = C // max(groups, 1), S = taps.shape[0] // 2
    cdef int64_t QD = (Mg + 3) // 4, g, qd, r, ci, c, co, at, bad
    cdef real lo, hi
    if out.shape[0] != groups * QD * S * 12 * Cg or taps.shape[0] % 2 or S < 1 \
            or min(taps) < 0 or max(taps) >= K or groups < 1 or C % groups:
        raise ValueError(f"cf_pack: filter (C_in, Mg, K) {(C, Mg, K)}, {groups} groups, "
                         f"two taps below K per phase and 12 Cg QD G values per phase out; "
                         f"got taps {list(taps)}, {out.shape[0]} values")
    if out.shape[0] == 0:
        return True
    with nogil:
        for g in range(groups):
            for qd in range(QD):
                for c in range(S):
                    for ci in range(Cg):
                        at = ((((g * QD + qd) * S + c) * 3) * Cg + ci) * 4
                        for r in range(4):
                            co = qd * 4 + r
                            if co < Mg:
                                lo = w3[g * Cg + ci, co, taps[2 * c]]
                                hi = w3[g * Cg + ci, co, taps[2 * c + 1]]
                                out[at + r] = lo
                                out[at + Cg * 4 + r] = lo + hi
                                out[at + 2 * Cg * 4 + r] = -hi
                            else:
                                out[at + r] = 0
                                out[at + Cg * 4 + r] = 0
                                out[at + 2 * Cg * 4 + r] = 0
        bad = _exponent_at_least(&out[0], out.shape[0], spare_bits)
    return bad == 0
