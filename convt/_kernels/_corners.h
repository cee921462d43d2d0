/* The Winograd variant's input transforms (F(2, 2)'s and F(2, 3)'s differences and sums of
 * input pixels), built per task into cache by _tile.pxd's _wino_build.
 */
#ifndef CONVT_CORNERS_H
#define CONVT_CORNERS_H

#include <stdint.h>

#include "_isa.h"

/* The input transforms a Winograd product tap reads (_tile.pxd, _wino_build):
 * the signed sum of n = 2, 4 or 8 corners of a pixel, in corner order,
 *
 *     dst[c] = src[off[0] + c] -+ src[off[1] + c] -+ ... ,
 *     corner j subtracted when popcount(j & neg) is odd
 *
 * (bit b of j: a step along the b-th axis transformed; bit b of neg: that axis subtracts,
 * a difference, else adds, a sum). Adds and subtracts only, in the same order in both
 * bodies: identical results (x + (-y) is x - y in IEEE arithmetic, signed zeros included). */
#define CONVT_CORNER_SIGN(j, neg) (__builtin_popcount((unsigned) ((j) & (neg))) & 1)
#define CONVT_CORNERS_GENERIC(T)                                                         \
    for (; c < C; c++) {                                                                 \
        T acc = src[off[0] + c];                                                         \
        for (j = 1; j < n; j++)                                                          \
            acc = CONVT_CORNER_SIGN(j, neg) ? acc - src[off[j] + c]                      \
                                            : acc + src[off[j] + c];                     \
        dst[c] = acc;                                                                    \
    }

#if CONVT_HAVE_AVX2_PATH
/* 2 and 4 corners unrolled: differences along every axis (F(2, 2)'s) with subtractions,
 * other signs by flipping the sign bit of the corners that subtract (XOR with -0.0), then
 * adding; 8 corners in a loop. */
#define CONVT_CORNERS_AVX2(NAME, T, V, LANES, LOADU, STOREU, ADD, SUB, XOR, SET1)          \
__attribute__((target("avx2")))                                                          \
static void NAME(const T* src, const int64_t* off, int n, int neg, T* dst, int64_t C)   \
{                                                                                        \
    int64_t c = 0;                                                                       \
    int j;                                                                               \
    const T* s0 = src + off[0];                                                          \
    const T* s1 = src + off[1];                                                          \
    if (n == 2 && (neg & 1)) {    /* a - b */                                            \
        for (; c + LANES <= C; c += LANES)                                               \
            STOREU(dst + c, SUB(LOADU(s0 + c), LOADU(s1 + c)));                          \
    } else if (n == 4 && (neg & 3) == 3) {   /* ((a - b) - c) + d, the loop's order */   \
        const T* s2 = src + off[2];                                                      \
        const T* s3 = src + off[3];                                                      \
        for (; c + LANES <= C; c += LANES)                                               \
            STOREU(dst + c, ADD(SUB(SUB(LOADU(s0 + c), LOADU(s1 + c)), LOADU(s2 + c)),   \
                                LOADU(s3 + c)));                                         \
    } else if (n == 2 || n == 4) {                                                       \
        const T* s2 = src + off[n == 4 ? 2 : 0];                                         \
        const T* s3 = src + off[n == 4 ? 3 : 0];                                         \
        V m1 = SET1(CONVT_CORNER_SIGN(1, neg) ? (T) -0.0 : (T) 0.0);                     \
        V m2 = SET1(CONVT_CORNER_SIGN(2, neg) ? (T) -0.0 : (T) 0.0);                     \
        V m3 = SET1(CONVT_CORNER_SIGN(3, neg) ? (T) -0.0 : (T) 0.0);                     \
        if (n == 2)                                                                      \
            for (; c + LANES <= C; c += LANES)                                           \
                STOREU(dst + c, ADD(LOADU(s0 + c), XOR(LOADU(s1 + c), m1)));             \
        else                                                                             \
            for (; c + LANES <= C; c += LANES)                                           \
                STOREU(dst + c, ADD(ADD(ADD(LOADU(s0 + c), XOR(LOADU(s1 + c), m1)),      \
                                        XOR(LOADU(s2 + c), m2)), XOR(LOADU(s3 + c), m3)));\
    } else {                                                                             \
        for (; c + LANES <= C; c += LANES) {                                             \
            V acc = LOADU(src + off[0] + c);                                             \
            for (j = 1; j < n; j++)                                                      \
                acc = CONVT_CORNER_SIGN(j, neg) ? SUB(acc, LOADU(src + off[j] + c))      \
                                                : ADD(acc, LOADU(src + off[j] + c));     \
            STOREU(dst + c, acc);                                                        \
        }                                                                                \
    }                                                                                    \
    CONVT_CORNERS_GENERIC(T)                                                             \
}
CONVT_CORNERS_AVX2(convt_corners_f32_avx2, float, __m256, 8, _mm256_loadu_ps,
                   _mm256_storeu_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_xor_ps,
                   _mm256_set1_ps)
CONVT_CORNERS_AVX2(convt_corners_f64_avx2, double, __m256d, 4, _mm256_loadu_pd,
                   _mm256_storeu_pd, _mm256_add_pd, _mm256_sub_pd, _mm256_xor_pd,
                   _mm256_set1_pd)
#endif

#define CONVT_CORNERS(NAME, T, AVX2)                                                     \
static inline void NAME(int isa, const T* src, const int64_t* off, int n, int neg,     \
                        T* dst, int64_t C)                                               \
{                                                                                        \
    int64_t c = 0;                                                                       \
    int j;                                                                               \
    if (isa >= 1 && CONVT_HAVE_AVX2_PATH) {                                              \
        AVX2(src, off, n, neg, dst, C);                                                  \
        return;                                                                          \
    }                                                                                    \
    CONVT_CORNERS_GENERIC(T)                                                             \
}
#if CONVT_HAVE_AVX2_PATH
CONVT_CORNERS(convt_corners_f32, float, convt_corners_f32_avx2)
CONVT_CORNERS(convt_corners_f64, double, convt_corners_f64_avx2)
#else
CONVT_CORNERS(convt_corners_f32, float, (void))
CONVT_CORNERS(convt_corners_f64, double, (void))
#endif

#endif /* CONVT_CORNERS_H */
