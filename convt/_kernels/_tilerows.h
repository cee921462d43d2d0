/* Value-by-value sums over the rows of the micro and Winograd tiles: the Winograd variant's
 * output transform (the products' tiles combined in place: _wino.pyx's _wino_phase) and the
 * channels-last write-out of a tile row plus the bias (_tilewrite.pxd's _write_nxc). Adds and
 * subtracts only, in the same order in every body: identical results. The AVX2 bodies are
 * compiled with their target attribute; the modules' own loops, baseline SSE2, ran 4
 * float32 values a step.
 */
#ifndef CONVT_TILEROWS_H
#define CONVT_TILEROWS_H

#include <stdint.h>

#include "_isa.h"

/* The output transform, in place on m rows of w values, rows ld apart (t, a and b each a
 * product's tile): per value k of a row,
 *
 *     kind 0:  t[k] = t[k] + a[k]               (F(2, 2): y0 = m0 + m1, y1 = m2 + m1)
 *     kind 1:  t[k] = (t[k] + a[k]) - b[k]      (F(2, 3): y0 = (m0 + m1) - m2)
 *     kind 2:  t[k] = (t[k] + a[k]) + b[k]      (F(2, 3): y1 = (m3 + m1) + m2)
 *
 * (b not read by kind 0).
 * convt_bias_row: y[k] = t[k] + bias[k], k < n (one group's channels of a tile row). */
#define CONVT_TILEROWS_BODIES(SUFFIX, ATTR, T, LANES, LOADU, STOREU, ADD, SUB)            \
ATTR static void convt_combine_##SUFFIX(T* t, const T* a, const T* b, int64_t m,         \
                                        int64_t w, int64_t ld, int kind)                 \
{                                                                                        \
    int64_t i, k;                                                                        \
    for (i = 0; i < m; i++) {                                                            \
        T* tr = t + i * ld;                                                              \
        const T* ar = a + i * ld;                                                        \
        const T* br = b + i * ld;                                                        \
        k = 0;                                                                           \
        if (kind == 0)                                                                   \
            for (; k + LANES <= w; k += LANES)                                           \
                STOREU(tr + k, ADD(LOADU(tr + k), LOADU(ar + k)));                       \
        else if (kind == 1)                                                              \
            for (; k + LANES <= w; k += LANES)                                           \
                STOREU(tr + k, SUB(ADD(LOADU(tr + k), LOADU(ar + k)), LOADU(br + k)));   \
        else                                                                             \
            for (; k + LANES <= w; k += LANES)                                           \
                STOREU(tr + k, ADD(ADD(LOADU(tr + k), LOADU(ar + k)), LOADU(br + k)));   \
        for (; k < w; k++) {                                                             \
            T s_ = tr[k] + ar[k];                                                        \
            tr[k] = kind == 1 ? s_ - br[k] : kind == 2 ? s_ + br[k] : s_;                \
        }                                                                                \
    }                                                                                    \
}                                                                                        \
ATTR static void convt_bias_row_##SUFFIX(const T* t, const T* bias, T* y, int64_t n)    \
{                                                                                        \
    int64_t k = 0;                                                                       \
    for (; k + LANES <= n; k += LANES)                                                   \
        STOREU(y + k, ADD(LOADU(t + k), LOADU(bias + k)));                               \
    for (; k < n; k++)                                                                   \
        y[k] = t[k] + bias[k];                                                           \
}

#define CONVT_SCALAR_LOAD(p) (*(p))
#define CONVT_SCALAR_STORE(p, v) (*(p) = (v))
#define CONVT_SCALAR_ADD(x, y) ((x) + (y))
#define CONVT_SCALAR_SUB(x, y) ((x) - (y))
CONVT_TILEROWS_BODIES(f32_generic, , float, 1, CONVT_SCALAR_LOAD, CONVT_SCALAR_STORE,
                      CONVT_SCALAR_ADD, CONVT_SCALAR_SUB)
CONVT_TILEROWS_BODIES(f64_generic, , double, 1, CONVT_SCALAR_LOAD, CONVT_SCALAR_STORE,
                      CONVT_SCALAR_ADD, CONVT_SCALAR_SUB)
#if CONVT_HAVE_AVX2_PATH
CONVT_TILEROWS_BODIES(f32_avx2, __attribute__((target("avx2"))), float, 8, _mm256_loadu_ps,
                      _mm256_storeu_ps, _mm256_add_ps, _mm256_sub_ps)
CONVT_TILEROWS_BODIES(f64_avx2, __attribute__((target("avx2"))), double, 4, _mm256_loadu_pd,
                      _mm256_storeu_pd, _mm256_add_pd, _mm256_sub_pd)
#define CONVT_TILEROWS_AVX2(isa) ((isa) >= 1)
#else
#define convt_combine_f32_avx2 convt_combine_f32_generic
#define convt_combine_f64_avx2 convt_combine_f64_generic
#define convt_bias_row_f32_avx2 convt_bias_row_f32_generic
#define convt_bias_row_f64_avx2 convt_bias_row_f64_generic
#define CONVT_TILEROWS_AVX2(isa) 0
#endif

/* isa: the calling kernel's level (_cpu): the AVX2 bodies from 1, else the portable ones. */
#define CONVT_TILEROWS(SUFFIX, T)                                                        \
static inline void convt_combine_##SUFFIX(int isa, T* t, const T* a, const T* b,        \
                                          int64_t m, int64_t w, int64_t ld, int kind)    \
{                                                                                        \
    if (CONVT_TILEROWS_AVX2(isa))                                                        \
        convt_combine_##SUFFIX##_avx2(t, a, b, m, w, ld, kind);                          \
    else                                                                                 \
        convt_combine_##SUFFIX##_generic(t, a, b, m, w, ld, kind);                       \
}                                                                                        \
static inline void convt_bias_row_##SUFFIX(int isa, const T* t, const T* bias, T* y,    \
                                           int64_t n)                                    \
{                                                                                        \
    if (CONVT_TILEROWS_AVX2(isa))                                                        \
        convt_bias_row_##SUFFIX##_avx2(t, bias, y, n);                                   \
    else                                                                                 \
        convt_bias_row_##SUFFIX##_generic(t, bias, y, n);                                \
}
CONVT_TILEROWS(f32, float)
CONVT_TILEROWS(f64, double)

#endif /* CONVT_TILEROWS_H */
