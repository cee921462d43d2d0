/* Register transposes and zips, and the 8 x 8 block transposes built on them.
 *
 * convt_tr8_f32 / convt_tr4_f64 (8 x 8 float32, 4 x 4 float64 in registers) and the zips that
 * interleave two vectors are the building blocks of the tile write-outs (_writeout.h,
 * _cwkernel.h) and of the depthwise and upsample kernels' stride-2 outputs (_dwkernel.h,
 * _upkernel.h). convt_t8_f32 and convt_t8c_f32 / _f64 transpose an 8 x 8 block from memory to
 * memory, the latter testing the exponents on the way: the layout changes (_layout.pyx) and
 * the weight packing (_pack.pyx). Pure moves: the portable bodies give the same values.
 */
#ifndef CONVT_TRANSPOSE_H
#define CONVT_TRANSPOSE_H

#include <stdint.h>
#include <string.h>

#include "_isa.h"

#if CONVT_HAVE_AVX2_PATH
__attribute__((target("avx2")))
static inline void convt_tr8_f32(__m256 r0, __m256 r1, __m256 r2, __m256 r3, __m256 r4,
                                 __m256 r5, __m256 r6, __m256 r7, __m256* c)
{
    /* c[j] = (r0[j], ..., r7[j]) for j < 8 */
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    c[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    c[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    c[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    c[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    c[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    c[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    c[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    c[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* Interleave two vectors (the upsample tile's and the depthwise row kernel's stride-2
 * outputs): (a0 a1 a2 a3 | a4 a5 a6 a7), (b0 ...) -> (a0 b0 a1 b1 a2 b2 a3 b3)
 * and (a4 b4 ... a7 b7) in float32; (a0 a1 | a2 a3), (b0 ...) -> (a0 b0 a1 b1), (a2 b2 a3 b3)
 * in float64. */
#define CONVT_ZIP(NAME, VT, UNLO, UNHI, PERM, HALF)                                        \
static inline __attribute__((always_inline, target("avx2,fma"))) VT NAME(VT a, VT b)            \
{                                                                                               \
    return PERM(UNLO(a, b), UNHI(a, b), HALF);                                                  \
}
CONVT_ZIP(convt_zip_lo_ps, __m256, _mm256_unpacklo_ps, _mm256_unpackhi_ps,
             _mm256_permute2f128_ps, 0x20)
CONVT_ZIP(convt_zip_hi_ps, __m256, _mm256_unpacklo_ps, _mm256_unpackhi_ps,
             _mm256_permute2f128_ps, 0x31)
CONVT_ZIP(convt_zip_lo_pd, __m256d, _mm256_unpacklo_pd, _mm256_unpackhi_pd,
             _mm256_permute2f128_pd, 0x20)
CONVT_ZIP(convt_zip_hi_pd, __m256d, _mm256_unpacklo_pd, _mm256_unpackhi_pd,
             _mm256_permute2f128_pd, 0x31)

/* The same for zmm vectors (the AVX-512 bodies of the depthwise and upsample kernels):
 * (a0 .. a15), (b0 .. b15) -> (a0 b0 .. a7 b7) and (a8 b8 .. a15 b15) in float32, (a0 b0 ..
 * a3 b3) and (a4 b4 .. a7 b7) in float64; one two-source permute each. */
#define CONVT_ZIP512(NAME, VT, IT, PERM, SETI, ...)                                         \
static inline __attribute__((always_inline, target("avx512f"))) VT NAME(VT a, VT b)       \
{                                                                                           \
    return PERM(a, SETI(__VA_ARGS__), b);                                                   \
}
CONVT_ZIP512(convt_zip512_lo_ps, __m512, __m512i, _mm512_permutex2var_ps, _mm512_setr_epi32,
             0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)
CONVT_ZIP512(convt_zip512_hi_ps, __m512, __m512i, _mm512_permutex2var_ps, _mm512_setr_epi32,
             8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)
CONVT_ZIP512(convt_zip512_lo_pd, __m512d, __m512i, _mm512_permutex2var_pd, _mm512_setr_epi64,
             0, 8, 1, 9, 2, 10, 3, 11)
CONVT_ZIP512(convt_zip512_hi_pd, __m512d, __m512i, _mm512_permutex2var_pd, _mm512_setr_epi64,
             4, 12, 5, 13, 6, 14, 7, 15)

/* c[j] = (r[0][j], ..., r[3][j]) for j < 4: a 4 x 4 float64 block (the float64 write-outs'
 * and layout changes' unit) */
__attribute__((target("avx2")))
static inline void convt_tr4_f64(const __m256d* r, __m256d* c)
{
    __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
    __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
    c[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    c[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    c[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    c[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

__attribute__((target("avx2")))
static inline void convt_transpose8_f32(const float* t, int64_t ldt, __m256* c)
{
    /* c[j] = (t[0*ldt + j], ..., t[7*ldt + j]) for j < 8 */
    convt_tr8_f32(_mm256_loadu_ps(t), _mm256_loadu_ps(t + ldt), _mm256_loadu_ps(t + 2 * ldt),
                  _mm256_loadu_ps(t + 3 * ldt), _mm256_loadu_ps(t + 4 * ldt),
                  _mm256_loadu_ps(t + 5 * ldt), _mm256_loadu_ps(t + 6 * ldt),
                  _mm256_loadu_ps(t + 7 * ldt), c);
}

__attribute__((target("avx2")))
static void convt_t8_f32_avx2(const float* src, int64_t lds, float* dst, int64_t ldd)
{
    __m256 c[8];
    int j;
    convt_transpose8_f32(src, lds, c);
    for (j = 0; j < 8; j++)
        _mm256_storeu_ps(dst + j * ldd, c[j]);
}
#endif

/* An 8 x 8 float32 block transposed: dst[j*ldd + k] = src[k*lds + j], j, k < 8. */
static inline void convt_t8_f32(int isa, const float* src, int64_t lds, float* dst, int64_t ldd)
{
    int64_t j, k;
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 1) {
        convt_t8_f32_avx2(src, lds, dst, ldd);
        return;
    }
#endif
    for (j = 0; j < 8; j++)
        for (k = 0; k < 8; k++)
            dst[j * ldd + k] = src[k * lds + j];
}

/* convt_t8_f32's transpose, and 1 when a value of the block has an exponent field of at
 * least (0xff - spare) (NaN, +-Inf, or too large for a signed sum of 2^spare of them:
 * _finite.pxd's _exponent_at_least), else 0. The AVX2 body tests the 8 rows it loaded, in
 * registers: a second pass over each block for the test about doubles the transpose's time
 * (docs/performance.md, "Figures moved out of code comments"). */
#define CONVT_T8C_GENERIC(NAME, T, U, EXP_ONES, MANT_BITS)                               \
static int NAME(const T* src, int64_t lds, T* dst, int64_t ldd, int spare)               \
{                                                                                        \
    int64_t j, k;                                                                        \
    U bad = 0, lim = ((U) EXP_ONES - (U) spare) << MANT_BITS, u;                         \
    for (j = 0; j < 8; j++)                                                              \
        for (k = 0; k < 8; k++) {                                                        \
            dst[j * ldd + k] = src[k * lds + j];                                         \
            memcpy(&u, src + k * lds + j, sizeof u);                                     \
            bad |= spare >= 0 && (u & ((U) EXP_ONES << MANT_BITS)) >= lim;               \
        }                                                                                \
    return bad != 0;                                                                     \
}
CONVT_T8C_GENERIC(convt_t8c_f32_generic, float, uint32_t, 0xff, 23)

#if CONVT_HAVE_AVX2_PATH
__attribute__((target("avx2")))
static int convt_t8c_f32_avx2(const float* src, int64_t lds, float* dst, int64_t ldd, int spare)
{
    __m256 r[8], c[8];
    __m256i top = _mm256_setzero_si256(), expo = _mm256_set1_epi32(0x7f800000);
    int j;
    for (j = 0; j < 8; j++) {
        r[j] = _mm256_loadu_ps(src + j * lds);
        top = _mm256_max_epi32(top, _mm256_and_si256(_mm256_castps_si256(r[j]), expo));
    }
    convt_tr8_f32(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], c);
    for (j = 0; j < 8; j++)
        _mm256_storeu_ps(dst + j * ldd, c[j]);
    /* exponent fields as non-negative int32: a signed compare against lim - 1 */
    return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(
        top, _mm256_set1_epi32((int) (((0xffu - (uint32_t) spare) << 23) - 1))))) != 0;
}
#endif

/* ... and the dispatch on the ISA, for either dtype */
#if CONVT_HAVE_AVX2_PATH
#define CONVT_T8C_DISPATCH(NAME, T)                                                      \
static inline int NAME(int isa, const T* src, int64_t lds, T* dst, int64_t ldd, int spare) \
{                                                                                        \
    if (isa >= 1)                                                                        \
        return NAME##_avx2(src, lds, dst, ldd, spare);                                   \
    return NAME##_generic(src, lds, dst, ldd, spare);                                    \
}
#else
#define CONVT_T8C_DISPATCH(NAME, T)                                                      \
static inline int NAME(int isa, const T* src, int64_t lds, T* dst, int64_t ldd, int spare) \
{                                                                                        \
    (void) isa;                                                                          \
    return NAME##_generic(src, lds, dst, ldd, spare);                                    \
}
#endif

CONVT_T8C_DISPATCH(convt_t8c_f32, float)

/* The float64 transposes of 8 x 8 blocks, as convt_t8_f32 and convt_t8c_f32 (the exponent
 * bound on the 11-bit field: 0x7ff - spare); the AVX2 body as four 4 x 4 register
 * transposes: scalar loops make float64 layout changes a large share of a call
 * (docs/performance.md, "The direct backend's variants"). */
CONVT_T8C_GENERIC(convt_t8c_f64_generic, double, uint64_t, 0x7ff, 52)

#if CONVT_HAVE_AVX2_PATH
__attribute__((target("avx2")))
static int convt_t8c_f64_avx2(const double* src, int64_t lds, double* dst, int64_t ldd,
                              int spare)
{
    __m256d r[4], c[4];
    __m256i bad = _mm256_setzero_si256(), expo = _mm256_set1_epi64x(0x7ff0000000000000ll);
    __m256i lim = _mm256_set1_epi64x((long long) (((0x7ffull - (uint64_t) spare) << 52) - 1));
    int bi, bj, j;
    for (bi = 0; bi < 8; bi += 4)          /* source rows bi..bi+3 */
        for (bj = 0; bj < 8; bj += 4) {    /* source columns bj..bj+3 */
            for (j = 0; j < 4; j++) {
                r[j] = _mm256_loadu_pd(src + (bi + j) * lds + bj);
                if (spare >= 0)
                    bad = _mm256_or_si256(bad, _mm256_cmpgt_epi64(
                        _mm256_and_si256(_mm256_castpd_si256(r[j]), expo), lim));
            }
            convt_tr4_f64(r, c);
            for (j = 0; j < 4; j++)
                _mm256_storeu_pd(dst + (bj + j) * ldd + bi, c[j]);
        }
    return !_mm256_testz_si256(bad, bad);
}
#endif

/* spare < 0: the transpose alone (returns 0) */
CONVT_T8C_DISPATCH(convt_t8c_f64, double)

#endif /* CONVT_TRANSPOSE_H */
