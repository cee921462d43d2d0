/* Weight packing for the micro and Winograd variants (_pack.pyx): the kernel taps transposed
 * into the lines of wino_conv's late sums (convt_taps_f32), the Winograd products' weights as
 * sums of kernel taps (convt_wsum: pack_wino, and the late sums in _tile.pxd, which must give
 * the same bits), and the bfloat16 tiles' channel pairs (convt_pairs).
 */
#ifndef CONVT_PACKKERNEL_H
#define CONVT_PACKKERNEL_H

#include <stdint.h>
#include <string.h>

#include "_isa.h"
#include "_transpose.h"
#include "_ukernel.h"

/* One input channel's taps in the layout of wino_conv's late sums (convt._backends.direct.winograd.wino_taps),
 * float32, for Mg % 16 == 0: tap k of output channel m, src[m * KT + k], to
 *
 *     dst[k * line + (m / 16) * ps + m % 16]
 *
 * (tap k's line of panel m / 16 for this channel). Returns 1 when a value's exponent field is
 * at least (0xff - spare) (NaN, +-Inf, or too large for a sum of 2^spare of them), else 0.
 * The AVX2 body transposes 8 x 8 blocks and stores each line's two halves one after the
 * other (two blocks of 8 output channels), past the caches when stream (the caller fences),
 * so every 64-byte line is written whole; the exponents are tested on the transposed
 * vectors; the taps past the last 8 (KT % 8 of them) one value per store. The pack through
 * pack_wino (a transpose to a scratch row, one-term sums, then a separate 4-wide test) was
 * slower (docs/performance.md, "Figures moved out of code comments (2026-11-28, session 10)"). */
static int convt_taps_f32_generic(const float* src, int64_t Mg, int64_t KT, float* dst,
                                  int64_t line, int64_t ps, int spare)
{
    int64_t m, k;
    uint32_t bad = 0, lim = (0xffu - (uint32_t) spare) << 23, u;
    for (m = 0; m < Mg; m++)
        for (k = 0; k < KT; k++) {
            float v = src[m * KT + k];
            memcpy(&u, &v, sizeof u);
            bad |= (u & 0x7f800000u) >= lim;
            dst[k * line + (m / 16) * ps + m % 16] = v;
        }
    return bad != 0;
}

#if CONVT_HAVE_AVX2_PATH
__attribute__((target("avx2")))
static int convt_taps_f32_avx2(const float* src, int64_t Mg, int64_t KT, int64_t k0,
                               float* dst, int64_t line, int64_t ps, int spare, int stream)
{
    __m256 c[8], e[8];
    __m256i expo = _mm256_set1_epi32(0x7f800000), below = _mm256_set1_epi32(
        (int) (((0xffu - (uint32_t) spare) << 23) - 1)), bad = _mm256_setzero_si256();
    int64_t m, k, j, K8 = KT - (KT - k0) % 8;
    uint32_t tail = 0, lim = (0xffu - (uint32_t) spare) << 23, u;
    for (m = 0; m < Mg; m += 16) {
        for (k = K8; k < KT; k++)
            for (j = 0; j < 16; j++) {
                float v = src[(m + j) * KT + k];
                memcpy(&u, &v, sizeof u);
                tail |= (u & 0x7f800000u) >= lim;
                dst[k * line + (m / 16) * ps + j] = v;
            }
        for (k = k0; k < K8; k += 8) {
            float* d = dst + k * line + (m / 16) * ps;
            convt_transpose8_f32(src + m * KT + k, KT, c);
            convt_transpose8_f32(src + (m + 8) * KT + k, KT, e);
            for (j = 0; j < 8; j++) {
                if (stream) {
                    _mm256_stream_ps(d + j * line, c[j]);
                    _mm256_stream_ps(d + j * line + 8, e[j]);
                } else {
                    _mm256_storeu_ps(d + j * line, c[j]);
                    _mm256_storeu_ps(d + j * line + 8, e[j]);
                }
                bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(
                    _mm256_and_si256(_mm256_castps_si256(c[j]), expo), below));
                bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(
                    _mm256_and_si256(_mm256_castps_si256(e[j]), expo), below));
            }
        }
    }
    return tail || !_mm256_testz_si256(bad, bad);
}
#endif

#if CONVT_HAVE_AVX2_PATH
#define CONVT_PACK512 "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"

/* r[i] = row i (16 values) -> c[j] = column j: 16 x 16 float32 in registers (unpacks within
 * 128-bit lanes, then two rounds of lane shuffles). */
__attribute__((target(CONVT_PACK512)))
static inline void convt_tr16_f32(const __m512* r, __m512* c)
{
    __m512 t[16], u[16];
    int i, j;
    for (i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);      /* (a0 b0 a1 b1) per lane */
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);  /* (a2 b2 a3 b3) */
    }
    for (i = 0; i < 16; i += 4) {   /* u[i + j]: columns j, 4 + j, 8 + j, 12 + j of rows i..i+3 */
        __m512d p0 = _mm512_castps_pd(t[i]), p1 = _mm512_castps_pd(t[i + 1]);
        __m512d p2 = _mm512_castps_pd(t[i + 2]), p3 = _mm512_castps_pd(t[i + 3]);
        u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(p0, p2));
        u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(p0, p2));
        u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(p1, p3));
        u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(p1, p3));
    }
    for (j = 0; j < 4; j++) {
        __m512 a = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);   /* columns j, 8 + j */
        __m512 b = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);   /* columns 4 + j, 12 + j */
        __m512 e = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
        __m512 f = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
        c[j] = _mm512_shuffle_f32x4(a, e, 0x88);
        c[8 + j] = _mm512_shuffle_f32x4(a, e, 0xdd);
        c[4 + j] = _mm512_shuffle_f32x4(b, f, 0x88);
        c[12 + j] = _mm512_shuffle_f32x4(b, f, 0xdd);
    }
}

/* One 64-byte line, past the caches when stream: one store where the line is 64-byte
 * aligned, else two (the callers guarantee 32 bytes for a streamed pack). */
__attribute__((target(CONVT_PACK512)))
static inline void convt_line512_ps(float* d, __m512 v, int stream)
{
    if (!stream)
        _mm512_storeu_ps(d, v);
    else if (((uintptr_t) d & 63) == 0)
        _mm512_stream_ps(d, v);
    else {
        _mm256_stream_ps(d, _mm512_castps512_ps256(v));
        _mm256_stream_ps(d + 8, _mm512_extractf32x8_ps(v, 1));
    }
}

/* The AVX-512 body: 16 output channels x 16 taps a block, one 16 x 16 transpose in
 * registers and one whole 64-byte store per tap line; the taps past the last 16 go to the
 * AVX2 body. The exponents are tested on the rows as loaded. A pure move: the same bits.
 * Stored through the caches it is faster than the AVX2 body (two 32-byte stores a line);
 * streamed, both run alike (docs/performance.md, "One-shot calls: the AVX-512 tap pack
 * (2026-11-27, session 4, helper H3)"). */
__attribute__((target(CONVT_PACK512)))
static int convt_taps_f32_avx512(const float* src, int64_t Mg, int64_t KT, float* dst,
                                 int64_t line, int64_t ps, int spare, int stream)
{
    __m512 r[16], c[16];
    __m512i expo = _mm512_set1_epi32(0x7f800000), below = _mm512_set1_epi32(
        (int) (((0xffu - (uint32_t) spare) << 23) - 1));
    __mmask16 bad = 0;
    int64_t m, k, j, K16 = KT - KT % 16;
    for (m = 0; m < Mg; m += 16)
        for (k = 0; k < K16; k += 16) {
            float* d = dst + k * line + (m / 16) * ps;
            for (j = 0; j < 16; j++) {
                r[j] = _mm512_loadu_ps(src + (m + j) * KT + k);
                bad |= _mm512_cmpgt_epi32_mask(
                    _mm512_and_si512(_mm512_castps_si512(r[j]), expo), below);
            }
            convt_tr16_f32(r, c);
            for (j = 0; j < 16; j++)
                convt_line512_ps(d + j * line, c[j], stream);
        }
    return (bad != 0) | (K16 < KT ? convt_taps_f32_avx2(src, Mg, KT, K16, dst, line, ps,
                                                         spare, stream) : 0);
}
#endif

static inline int convt_taps_f32(int isa, const float* src, int64_t Mg, int64_t KT, float* dst,
                                 int64_t line, int64_t ps, int spare, int stream)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa >= CONVT_ISA_AVX512)
        return convt_taps_f32_avx512(src, Mg, KT, dst, line, ps, spare, stream);
    if (isa >= 1)
        return convt_taps_f32_avx2(src, Mg, KT, 0, dst, line, ps, spare, stream);
#endif
    return convt_taps_f32_generic(src, Mg, KT, dst, line, ps, spare);
}

/* Kernel taps a Winograd product tap's weight sums at most: 3 per axis (F(2, 3)), 3 axes. */
#define CONVT_WSUM_MAX 27

/* The packed weights of one Winograd product tap (_pack.pyx, pack_wino, and
 * wino_conv's late sums): for every line jp < NP (a panel, or a channel), its NR values (one
 * 64-byte line in both dtypes)
 *
 *     dst[jp * us + j] = ((0 + cf[0] * t_0[jp * ls + j]) + cf[1] * t_1[jp * ls + j]) + ...
 *
 * with t_e = tmp + ck[e] * Mgp, over the entries e < CONVT_WSUM_MAX whose cf[e] is not 0, in
 * entry order, each step a fused multiply-add in both bodies (the portable one through fma):
 * identical results. The coefficients are +-1, +-1/2, +-1/4 or +-1/8 (convt._backends.direct.winograd:
 * F(2, 2)'s and F(2, 3)'s weight transforms), so a product is exact unless it is subnormal,
 * where an unfused body would round it once more. Returns 1 when a sum is NaN or +-Inf,
 * else 0. stream (AVX2 only): store each line past the caches (no read of the line before
 * it is written; the caller then runs convt_store_fence before the lines are read): packs
 * of several MB do not stay in cache until the kernel reads them anyway, so streaming them
 * saves the lines' reads (docs/performance.md, "Figures moved out of code comments
 * (2026-11-28, session 10)"). */
#define CONVT_WSUM_TERMS(T)                                                              \
    const T* t[CONVT_WSUM_MAX];                                                          \
    T f[CONVT_WSUM_MAX];                                                                 \
    int n = 0, e;                                                                        \
    int64_t jp;                                                                          \
    for (e = 0; e < CONVT_WSUM_MAX; e++)                                                 \
        if (cf[e] != 0) {                                                                \
            t[n] = tmp + ck[e] * Mgp;                                                    \
            f[n++] = cf[e];                                                              \
        }

#define CONVT_WSUM_GENERIC(NAME, T, NR, FMA)                                             \
static int NAME(const T* tmp, int64_t Mgp, const int64_t* ck, const T* cf, T* dst,      \
                int64_t us, int64_t NP, int64_t ls)                                      \
{                                                                                        \
    CONVT_WSUM_TERMS(T)                                                                  \
    int j, bad = 0;                                                                      \
    T line[NR];                                                                          \
    for (jp = 0; jp < NP; jp++) {                                                        \
        for (j = 0; j < NR; j++)                                                         \
            line[j] = 0;                                                                 \
        for (e = 0; e < n; e++)                                                          \
            for (j = 0; j < NR; j++)                                                     \
                line[j] = FMA(f[e], t[e][jp * ls + j], line[j]);                         \
        for (j = 0; j < NR; j++) {                                                       \
            dst[jp * us + j] = line[j];                                                  \
            bad |= !(line[j] - line[j] == 0);   /* NaN or +-Inf */                       \
        }                                                                                \
    }                                                                                    \
    return bad;                                                                          \
}
CONVT_WSUM_GENERIC(convt_wsum_f32_generic, float, CONVT_NR_F32, __builtin_fmaf)
CONVT_WSUM_GENERIC(convt_wsum_f64_generic, double, CONVT_NR_F64, __builtin_fma)

#if CONVT_HAVE_AVX2_PATH
/* NR = 2 vectors; v - v is 0 for a finite v and NaN otherwise (the unordered compare). */
#define CONVT_WSUM_AVX2(NAME, T, V, LANES, SET1, ZERO, LOADU, STOREU, STREAM, FMA, SUB,   \
                        CMP, OR, MOVEMASK)                                               \
__attribute__((target("avx2,fma")))                                                      \
static int NAME(const T* tmp, int64_t Mgp, const int64_t* ck, const T* cf, T* dst,      \
                int64_t us, int64_t NP, int64_t ls, int stream)                          \
{                                                                                        \
    CONVT_WSUM_TERMS(T)                                                                  \
    V fv[CONVT_WSUM_MAX], a0, a1, z = ZERO(), bad = ZERO();                              \
    for (e = 0; e < n; e++)                                                              \
        fv[e] = SET1(f[e]);                                                              \
    for (jp = 0; jp < NP; jp++) {                                                        \
        a0 = ZERO();                                                                     \
        a1 = ZERO();                                                                     \
        for (e = 0; e < n; e++) {                                                        \
            a0 = FMA(fv[e], LOADU(t[e] + jp * ls), a0);                                  \
            a1 = FMA(fv[e], LOADU(t[e] + jp * ls + LANES), a1);                          \
        }                                                                                \
        if (stream) {   /* dst lines are 64-byte aligned (convt._backends.direct.micro.packing_arrays) */ \
            STREAM(dst + jp * us, a0);                                                   \
            STREAM(dst + jp * us + LANES, a1);                                           \
        } else {                                                                         \
            STOREU(dst + jp * us, a0);                                                   \
            STOREU(dst + jp * us + LANES, a1);                                           \
        }                                                                                \
        bad = OR(bad, OR(CMP(SUB(a0, a0), z, _CMP_UNORD_Q),                              \
                         CMP(SUB(a1, a1), z, _CMP_UNORD_Q)));                            \
    }                                                                                    \
    return MOVEMASK(bad) != 0;                                                           \
}
CONVT_WSUM_AVX2(convt_wsum_f32_avx2, float, __m256, 8, _mm256_set1_ps, _mm256_setzero_ps,
                _mm256_loadu_ps, _mm256_storeu_ps, _mm256_stream_ps, _mm256_fmadd_ps,
                _mm256_sub_ps, _mm256_cmp_ps, _mm256_or_ps, _mm256_movemask_ps)
CONVT_WSUM_AVX2(convt_wsum_f64_avx2, double, __m256d, 4, _mm256_set1_pd, _mm256_setzero_pd,
                _mm256_loadu_pd, _mm256_storeu_pd, _mm256_stream_pd, _mm256_fmadd_pd,
                _mm256_sub_pd, _mm256_cmp_pd, _mm256_or_pd, _mm256_movemask_pd)
#endif

#define CONVT_WSUM(NAME, T, GENERIC, AVX2)                                               \
static inline int NAME(int isa, const T* tmp, int64_t Mgp, const int64_t* ck,           \
                       const T* cf, T* dst, int64_t us, int64_t NP, int64_t ls,          \
                       int stream)                                                       \
{                                                                                        \
    if (isa >= 1 && CONVT_HAVE_AVX2_PATH)                                                \
        return AVX2(tmp, Mgp, ck, cf, dst, us, NP, ls, stream);                          \
    return GENERIC(tmp, Mgp, ck, cf, dst, us, NP, ls);                                   \
}
#if CONVT_HAVE_AVX2_PATH
CONVT_WSUM(convt_wsum_f32, float, convt_wsum_f32_generic, convt_wsum_f32_avx2)
CONVT_WSUM(convt_wsum_f64, double, convt_wsum_f64_generic, convt_wsum_f64_avx2)
#else
CONVT_WSUM(convt_wsum_f32, float, convt_wsum_f32_generic, (int))
CONVT_WSUM(convt_wsum_f64, double, convt_wsum_f64_generic, (int))
#endif

/* The bfloat16 weights (the bits, IOX (C_in, Mg, KT) at w) in the bfloat16 tiles' layout
 * (convt._backends.direct.micro_bf16.packed_pairs): tap k of output channel m of input
 * channels c = 2p, 2p + 1 of group g, w[((g Cg + c) Mg + m) KT + k], go to the two halves of
 * 32-bit slot
 *
 *     kd[k] + (g * NP + m / NR) * ks[k] + p * NR + m % NR      (out as uint16: 2 * slot + 0, 1)
 *
 * for each tap with kd[k] >= 0 (kd, ks: micro.pack_tables' per tap offset and panel stride,
 * in slots). One call packs pairs p0..p1 of group g into panel jp (output channels jp NR to
 * (jp + 1) NR, those below Mg). A pair whose second channel is past Cg (odd Cg) gets zeros in
 * its second halves, as the caller's zero-filled padding holds. Returns 1 when a weight of a
 * packed tap is NaN or +-Inf (exponent all ones), else 0. The AVX2 body (NR % 16 == 0) takes
 * 16 output channels x 8 taps a step, as two 8 x 8 blocks: the two channels' rows interleaved
 * into 8 vectors of 8 slots (one per output channel), then transposed; each tap's 16 slots,
 * one 64-byte line, are stored by two 32-byte stores. Rows past Mg are zeros in a block, and
 * land only in padding slots (m >= Mg, in the panel's own line). Within a call the pairs run
 * outermost, then the blocks of 8 taps, then the panel's steps of 16 channels, so each tap's
 * lines are written in address order, NR slots a pair (docs/performance.md, "bfloat16
 * one-shot calls: the pair pack"). Both bodies give the same bits. */
static int convt_pairs_generic(const uint16_t* w, uint16_t* out, const int64_t* kd,
                               const int64_t* ks, int64_t g, int64_t Cg, int64_t jp,
                               int64_t p0, int64_t p1, int64_t Mg, int64_t KT, int64_t NP,
                               int64_t NR)
{
    int64_t k, m, p, slot, m1 = (jp + 1) * NR < Mg ? (jp + 1) * NR : Mg;
    int bad = 0;
    for (p = p0; p < p1; p++) {
        const uint16_t* s0 = w + (g * Cg + 2 * p) * Mg * KT;
        const uint16_t* s1 = 2 * p + 1 < Cg ? s0 + Mg * KT : NULL;
        for (k = 0; k < KT; k++) {
            if (kd[k] < 0)
                continue;
            for (m = jp * NR; m < m1; m++) {
                uint16_t a = s0[m * KT + k], b = s1 != NULL ? s1[m * KT + k] : 0;
                slot = kd[k] + (g * NP + m / NR) * ks[k] + p * NR + m % NR;
                bad |= (a & 0x7f80) == 0x7f80 || (b & 0x7f80) == 0x7f80;
                out[2 * slot] = a;
                out[2 * slot + 1] = b;
            }
        }
    }
    return bad;
}

#if CONVT_HAVE_AVX2_PATH
/* Rows m0..m0+8 (those below Mg; zeros past it) of the pair's taps k0..k0+kb, interleaved
 * (a 32-bit slot per pair) and transposed: c[k] holds tap k0 + k's 8 slots for k < kb (c[kb..8)
 * hold whatever followed: the next row's taps, or zeros, never stored). A row whose 8 values
 * from k0 lie inside the (Mg, KT) block is loaded whole even when kb < 8: short kernels (2 x 2,
 * 4, 3 x 3's ninth tap) gathered value by value were slow (unet_up2x2's 2 x 2 weights). */
__attribute__((target("avx2")))
static inline void convt_pairs_block(const uint16_t* s0, const uint16_t* s1, int64_t KT,
                                     int64_t m0, int64_t mb, int64_t k0, int64_t kb, __m256* c)
{
    __m256 r[8];
    int64_t i, k;
    for (i = 0; i < 8; i++) {
        __m128i a = _mm_setzero_si128(), b = _mm_setzero_si128();
        if (i < mb && (kb == 8 || (m0 + i) * KT + k0 + 8 <= (m0 + mb) * KT)) {
            a = _mm_loadu_si128((const __m128i*) (s0 + (m0 + i) * KT + k0));
            if (s1 != NULL)
                b = _mm_loadu_si128((const __m128i*) (s1 + (m0 + i) * KT + k0));
        } else if (i < mb) {
            uint16_t ta[8] = {0}, tb[8] = {0};
            for (k = 0; k < kb; k++) {
                ta[k] = s0[(m0 + i) * KT + k0 + k];
                tb[k] = s1 != NULL ? s1[(m0 + i) * KT + k0 + k] : 0;
            }
            a = _mm_loadu_si128((const __m128i*) ta);
            b = _mm_loadu_si128((const __m128i*) tb);
        }
        r[i] = _mm256_castsi256_ps(_mm256_set_m128i(_mm_unpackhi_epi16(a, b),
                                                    _mm_unpacklo_epi16(a, b)));
    }
    convt_tr8_f32(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], c);
}

/* 16 output channels a step (NR % 16 == 0): each tap's 16 slots, one 64-byte line, stored
 * by two stores in a row, past the caches when stream (the caller fences): the 32-byte
 * stores of one block at a time (8 channels) left half lines open and the pack stalled on
 * its stores (docs/performance.md, "Figures moved out of code comments"). */
__attribute__((target("avx2")))
static int convt_pairs_avx2(const uint16_t* w, uint16_t* out, const int64_t* kd,
                            const int64_t* ks, int64_t g, int64_t Cg, int64_t jp, int64_t p0,
                            int64_t p1, int64_t Mg, int64_t KT, int64_t NP, int64_t NR,
                            int stream)
{
    __m256 c[8], e[8];
    __m256i expo = _mm256_set1_epi16(0x7f80), bad = _mm256_setzero_si256();
    int64_t m0, k0, k, kb, p, slot, m1 = (jp + 1) * NR < Mg ? (jp + 1) * NR : Mg;
    for (p = p0; p < p1; p++) {
        const uint16_t* s0 = w + (g * Cg + 2 * p) * Mg * KT;
        const uint16_t* s1 = 2 * p + 1 < Cg ? s0 + Mg * KT : NULL;
        for (k0 = 0; k0 < KT; k0 += 8) {
            kb = KT - k0 < 8 ? KT - k0 : 8;
            for (m0 = jp * NR; m0 < m1; m0 += 16) {
                convt_pairs_block(s0, s1, KT, m0, Mg - m0, k0, kb, c);
                convt_pairs_block(s0, s1, KT, m0 + 8, Mg - m0 - 8, k0, kb, e);
                for (k = 0; k < kb; k++) {
                    __m256i u = _mm256_castps_si256(c[k]), v = _mm256_castps_si256(e[k]);
                    __m256i* d;
                    if (kd[k0 + k] < 0)
                        continue;
                    slot = kd[k0 + k] + (g * NP + jp) * ks[k0 + k] + p * NR + m0 % NR;
                    d = (__m256i*) (out + 2 * slot);
                    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi16(_mm256_and_si256(u, expo),
                                                                  expo));
                    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi16(_mm256_and_si256(v, expo),
                                                                  expo));
                    if (stream) {
                        _mm256_stream_si256(d, u);
                        _mm256_stream_si256(d + 1, v);
                    } else {
                        _mm256_storeu_si256(d, u);
                        _mm256_storeu_si256(d + 1, v);
                    }
                }
            }
        }
    }
    return !_mm256_testz_si256(bad, bad);
}
#endif

static inline int convt_pairs(int isa, const uint16_t* w, uint16_t* out, const int64_t* kd,
                              const int64_t* ks, int64_t g, int64_t Cg, int64_t jp,
                              int64_t p0, int64_t p1, int64_t Mg, int64_t KT, int64_t NP,
                              int64_t NR, int stream)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 1 && NR % 16 == 0)
        return convt_pairs_avx2(w, out, kd, ks, g, Cg, jp, p0, p1, Mg, KT, NP, NR, stream);
#endif
    return convt_pairs_generic(w, out, kd, ks, g, Cg, jp, p0, p1, Mg, KT, NP, NR);
}


#endif /* CONVT_PACKKERNEL_H */
