/* Weight packing for the micro and Winograd variants (_pack.pyx): the kernel taps transposed
 * into the lines of wino_conv's late sums (convt_taps_f32), and the Winograd products'
 * weights as sums of kernel taps (convt_wsum: pack_wino, and the late sums in _tile.pxd,
 * which must give the same bits).
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
 * pack_wino (a transpose to a scratch row, one-term sums, then a separate 4-wide test) took
 * 0.9-1.0 ms of dcgan_g1's 8.4 MB on 2 threads. */
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
static int convt_taps_f32_avx2(const float* src, int64_t Mg, int64_t KT, float* dst,
                               int64_t line, int64_t ps, int spare, int stream)
{
    __m256 c[8], e[8];
    __m256i expo = _mm256_set1_epi32(0x7f800000), below = _mm256_set1_epi32(
        (int) (((0xffu - (uint32_t) spare) << 23) - 1)), bad = _mm256_setzero_si256();
    int64_t m, k, j, K8 = KT - KT % 8;
    uint32_t tail = 0, lim = (0xffu - (uint32_t) spare) << 23, u;
    for (m = 0; m < Mg; m += 16) {
        for (k = K8; k < KT; k++)
            for (j = 0; j < 16; j++) {
                float v = src[(m + j) * KT + k];
                memcpy(&u, &v, sizeof u);
                tail |= (u & 0x7f800000u) >= lim;
                dst[k * line + (m / 16) * ps + j] = v;
            }
        for (k = 0; k < K8; k += 8) {
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

static inline int convt_taps_f32(int isa, const float* src, int64_t Mg, int64_t KT, float* dst,
                                 int64_t line, int64_t ps, int spare, int stream)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 1)
        return convt_taps_f32_avx2(src, Mg, KT, dst, line, ps, spare, stream);
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
 * of several MB do not stay in cache until the kernel reads them anyway, and dcgan_g1's
 * 18.9 MB took 1.47-1.56 -> 1.29-1.37 ms this way (2 threads). */
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

/* Orders this thread's streamed stores (convt_wsum's stream) before its later stores, such
 * as the OpenMP barrier's: after it, every thread reads the lines. */
static inline void convt_store_fence(void)
{
#if CONVT_HAVE_AVX2_PATH
    _mm_sfence();
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

#endif /* CONVT_PACKKERNEL_H */
