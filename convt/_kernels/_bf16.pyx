"""The bfloat16 input of the micro variant's dot-product tiles (_bf16kernel.h): x, stored as
bfloat16 (read here as its 16-bit patterns), copied channels-last with each group's
channels padded to an even count with zeros, so that every pair of channels the tiles
multiply at once is one aligned 32-bit slot of a group. No conversion: the copy moves half
the bytes of the float32 path's.

to_pairs_nxc: channels-first (N, C, S) or channels-last (N, S, C) -> (N, S, G * Cg2), Cg2 =
Cg rounded up to even. Channels-first, per block of 32 to 256 positions of one image (an
OpenMP prange over the blocks, each written by one thread), 8 positions x 16 channels at a
time in registers: two channel rows zipped into pairs, then an 8 x 8 transpose of the 32-bit
pairs (one value per store is far slower; the figures are in docs/performance.md).

Assumes: x and xp contiguous, xp of N * S * G * Cg2 values.
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t, uint16_t

from . import _cpu

cdef extern from *:
    """
    #include "_isa.h"
    #include "_transpose.h"
    #if CONVT_HAVE_AVX2_PATH
    /* 8 positions x 16 channels (8 pairs) of channels-first bfloat16: row c at src + c * S
     * -> position j's 16 values at dst + j * ldd: each two channel rows zipped into 8 pair
     * slots, then an 8 x 8 transpose of the 32-bit slots (_transpose.h's convt_tr8_f32) */
    __attribute__((target("avx2")))
    static void convt_pairs8_avx2(const uint16_t* src, int64_t S, uint16_t* dst, int64_t ldd)
    {
        __m256 r[8], c[8];
        int q;
        for (q = 0; q < 8; q++) {
            __m128i a = _mm_loadu_si128((const __m128i*) (src + 2 * q * S));
            __m128i b = _mm_loadu_si128((const __m128i*) (src + (2 * q + 1) * S));
            r[q] = _mm256_castsi256_ps(_mm256_set_m128i(_mm_unpackhi_epi16(a, b),
                                                        _mm_unpacklo_epi16(a, b)));
        }
        convt_tr8_f32(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], c);
        for (q = 0; q < 8; q++)
            _mm256_storeu_ps((float*) (dst + q * ldd), c[q]);
    }
    /* 32 positions (a 64-byte line of each of the 16 channel rows, each read once: rows a
     * multiple of 4 KiB apart share one L1 set of 8 ways, and hifigan_up3's 8 KiB rows,
     * read 16 bytes at a time by convt_pairs8_avx2, were fetched again for every 8
     * positions) as four blocks of 8 */
    __attribute__((target("avx512f,avx512bw,avx2")))
    static void convt_pairs32_avx512(const uint16_t* src, int64_t S, uint16_t* dst,
                                     int64_t ldd)
    {
        __m512i row[16];
        __m256 r[8], c[8];
        int q, k;
        for (q = 0; q < 16; q++)
            row[q] = _mm512_loadu_si512(src + q * S);
        for (k = 0; k < 4; k++) {
            for (q = 0; q < 8; q++) {
                __m128i a = _mm512_extracti32x4_epi32(row[2 * q], 0), b;
                switch (k) {   /* the lane index must be a constant */
                case 1: a = _mm512_extracti32x4_epi32(row[2 * q], 1);
                        b = _mm512_extracti32x4_epi32(row[2 * q + 1], 1); break;
                case 2: a = _mm512_extracti32x4_epi32(row[2 * q], 2);
                        b = _mm512_extracti32x4_epi32(row[2 * q + 1], 2); break;
                case 3: a = _mm512_extracti32x4_epi32(row[2 * q], 3);
                        b = _mm512_extracti32x4_epi32(row[2 * q + 1], 3); break;
                default: b = _mm512_extracti32x4_epi32(row[2 * q + 1], 0);
                }
                r[q] = _mm256_castsi256_ps(_mm256_set_m128i(_mm_unpackhi_epi16(a, b),
                                                            _mm_unpacklo_epi16(a, b)));
            }
            convt_tr8_f32(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], c);
            for (q = 0; q < 8; q++)
                _mm256_storeu_ps((float*) (dst + (8 * k + q) * ldd), c[q]);
        }
    }
    #endif
    /* positions done (32, 8 or 0: the caller copies the rest one value at a time) */
    static int convt_pairs8(int isa, const uint16_t* src, int64_t S, uint16_t* dst, int64_t ldd,
                            int64_t m)
    {
    #if CONVT_HAVE_AVX2_PATH
        if (isa >= 2 && m >= 32) {
            convt_pairs32_avx512(src, S, dst, ldd);
            return 32;
        }
        if (isa >= 1 && m >= 8) {
            convt_pairs8_avx2(src, S, dst, ldd);
            return 8;
        }
    #endif
        (void) isa; (void) src; (void) S; (void) dst; (void) ldd; (void) m;
        return 0;
    }
    """
    int convt_pairs8(int isa, const uint16_t* src, int64_t S, uint16_t* dst, int64_t ldd,
                     int64_t m) nogil

cdef extern from "_bf16kernel.h":
    int CONVT_BF16_ON
    int CONVT_BF16_HW
    int CONVT_BF16_WIDE
    int CONVT_BF16_AMX
    int CONVT_BF16_STREAM

# the mode bits of the bfloat16 tiles (micro_conv's bf16): on; vdpbf16ps; 32 output channels;
# the AMX tiles (_amxkernel.h); a 16-bit y's whole aligned lines streamed (_writeout.h)
BF16_ON, BF16_HW, BF16_WIDE = CONVT_BF16_ON, CONVT_BF16_HW, CONVT_BF16_WIDE
BF16_AMX, BF16_STREAM = CONVT_BF16_AMX, CONVT_BF16_STREAM

cdef enum:
    _SBLOCK = 32     # positions per work item: 32 x 512 channels x 2 bytes = 32 KiB of xp,
    _SBLOCK_MAX = 256  # doubled up to this while every thread keeps 8 items: each channel row
                       # then streams 256 positions: longer streams help the copy when x is
                       # cold after the previous call's tiles (docs/performance.md, "Figures
                       # moved out of code comments (2026-11-28, session 10)")


cdef void _block_ncx(int isa, const uint16_t* x, uint16_t* xp, int64_t S, int64_t s0,
                     int64_t m, int64_t G, int64_t Cg, int64_t Cg2) noexcept nogil:
    # positions s0..s0+m of one image: x (C, S) -> xp rows (S, G * Cg2); blocks of 8
    # positions x 16 channels of a group in registers (convt_pairs8), the rest one value per
    # store
    cdef int64_t C2 = G * Cg2, g, c, c16, s, s8, done
    cdef const uint16_t* src
    cdef uint16_t* dst
    for g in range(G):
        c16 = 0
        while c16 + 16 <= Cg:
            s8 = 0
            while True:
                done = convt_pairs8(isa, x + (g * Cg + c16) * S + s0 + s8, S,
                                    xp + (s0 + s8) * C2 + g * Cg2 + c16, C2, m - s8)
                if done == 0:
                    break
                s8 += done
            for c in range(c16, c16 + 16):
                for s in range(s8, m):
                    xp[(s0 + s) * C2 + g * Cg2 + c] = x[(g * Cg + c) * S + s0 + s]
            c16 += 16
        for c in range(c16, Cg):
            src = x + (g * Cg + c) * S + s0
            dst = xp + s0 * C2 + g * Cg2 + c
            for s in range(m):
                dst[s * C2] = src[s]
        if Cg2 != Cg:
            dst = xp + s0 * C2 + g * Cg2 + Cg
            for s in range(m):
                dst[s * C2] = 0


cdef void _block_nxc(const uint16_t* x, uint16_t* xp, int64_t s0, int64_t m, int64_t G,
                     int64_t Cg, int64_t Cg2) noexcept nogil:
    # positions s0..s0+m of one image: x (S, G * Cg) -> xp rows (S, G * Cg2)
    cdef int64_t g, c, s
    cdef const uint16_t* src
    cdef uint16_t* dst
    for s in range(s0, s0 + m):
        for g in range(G):
            src = x + (s * G + g) * Cg
            dst = xp + (s * G + g) * Cg2
            for c in range(Cg):
                dst[c] = src[c]
            if Cg2 != Cg:
                dst[Cg] = 0


def to_pairs_nxc(const uint16_t[::1] x,   # IN  bfloat16 bits, (N, C, S) or (N, S, C)
                 uint16_t[::1] xp,        # OUT (N, S, G * Cg2)
                 int64_t N, int64_t S, int64_t groups, int64_t Cg, bint channels_first,
                 int num_threads, int isa=-1, int64_t sblock=0):
    """Copy x into xp, channels-last with each group's Cg channels padded to Cg2 (even);
    releases the GIL. See the module docstring. ``sblock``: positions per work item (0: from
    32 doubled up to 256 while every thread keeps 8 items)."""
    cdef int64_t Cg2 = Cg + Cg % 2, C = groups * Cg, C2 = groups * Cg2
    cdef int64_t nb, item, n, s0, m
    if sblock <= 0:
        sblock = _SBLOCK
        while (sblock < _SBLOCK_MAX
               and N * ((S + 2 * sblock - 1) // (2 * sblock)) >= 8 * num_threads):
            sblock *= 2
    nb = (S + sblock - 1) // sblock
    if N == 0 or S == 0 or C == 0:
        return
    if x.shape[0] < N * S * C or xp.shape[0] < N * S * C2:
        raise ValueError(f"to_pairs_nxc: x ({x.shape[0]}) or xp ({xp.shape[0]} values) is "
                         f"too short for N {N}, S {S}, {groups} groups of {Cg} channels")
    if isa < 0:
        isa = _cpu.ISA
    cdef const uint16_t* xs = &x[0]
    cdef uint16_t* xd = &xp[0]
    with nogil:
        for item in prange(N * nb, schedule="static", num_threads=num_threads):
            n = item // nb
            s0 = (item % nb) * sblock
            m = min(sblock, S - s0)
            if channels_first:
                _block_ncx(isa, xs + n * C * S, xd + n * S * C2, S, s0, m, groups, Cg, Cg2)
            else:
                _block_nxc(xs + n * S * C, xd + n * S * C2, s0, m, groups, Cg, Cg2)

