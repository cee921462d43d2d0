/* Register-blocked micro-kernels of the direct backend's micro and Winograd variants
 * (convt/_kernels/_tile.pxd runs them for _micro.pyx and _wino.pyx).
 *
 * One call computes an MR x NR tile of C (MR output pixels x NR output channels):
 *
 *     C[i][j] (+)= sum over taps t < ntaps, k < kc of  a[t*astride + i][aoff + k] * b[t*bstride + k*NR + j]
 *
 * a: per tap, MR row pointers (input pixels, channels last; a row whose input lies outside the
 * data points at a zero vector), b: the tap's packed weights, kc rows of NR values. The tile
 * stays in registers across all taps and channels (DESIGN.md, "channels-last micro-kernel"):
 * one broadcast input value times one packed weight vector per FMA.
 *
 * Run-time selection (_isa.h): at level 2 (AVX-512) a call computes two adjacent MR-row
 * sub-tiles (_tile.pxd pairs those with the same taps); at level 1 the AVX2+FMA bodies,
 * otherwise plain C that any compiler vectorises for the baseline. All sum in the same order
 * (t, then k); the AVX2 and AVX-512 ones fuse each multiply-add (one rounding): they give the
 * same bits, and differ from the portable one in the last bits, never in the terms summed.
 */
#ifndef CONVT_UKERNEL_H
#define CONVT_UKERNEL_H

#include <stdint.h>

#include "_isa.h"

#define CONVT_MR 6
#define CONVT_NR_F32 16
#define CONVT_NR_F64 8

#define CONVT_GENERIC_BODY(T, NR)                                                        \
    T acc_[CONVT_MR][NR];                                                                \
    int64_t i_, j_, t_, k_;                                                              \
    for (i_ = 0; i_ < CONVT_MR; i_++)                                                    \
        for (j_ = 0; j_ < NR; j_++)                                                      \
            acc_[i_][j_] = acc ? c[i_ * ldc + j_] : (T)0;                                \
    for (t_ = 0; t_ < ntaps; t_++) {                                                     \
        const T* bt_ = b + t_ * bstride;                                                 \
        for (i_ = 0; i_ < CONVT_MR; i_++) {                                              \
            const T* ar_ = a[t_ * astride + i_] + aoff;                                  \
            for (k_ = 0; k_ < kc; k_++) {                                                \
                T av_ = ar_[k_];                                                         \
                for (j_ = 0; j_ < NR; j_++)                                              \
                    acc_[i_][j_] += av_ * bt_[k_ * NR + j_];                             \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    for (i_ = 0; i_ < CONVT_MR; i_++)                                                    \
        for (j_ = 0; j_ < NR; j_++)                                                      \
            c[i_ * ldc + j_] = acc_[i_][j_];

static void convt_ukernel_f32_generic(int64_t ntaps, int64_t kc, const float* const* a,
                                      int64_t astride, int64_t aoff, const float* b,
                                      int64_t bstride, float* c, int64_t ldc, int acc)
{
    CONVT_GENERIC_BODY(float, CONVT_NR_F32)
}

static void convt_ukernel_f64_generic(int64_t ntaps, int64_t kc, const double* const* a,
                                      int64_t astride, int64_t aoff, const double* b,
                                      int64_t bstride, double* c, int64_t ldc, int acc)
{
    CONVT_GENERIC_BODY(double, CONVT_NR_F64)
}

#if CONVT_HAVE_AVX2_PATH
/* One body for both dtypes: 6 rows x 2 vectors (6 x 16 floats or 6 x 8 doubles), i.e. 12
 * accumulators, 2 weight vectors and 1 broadcast (15 of the 16 ymm registers). T: value type,
 * V: vector type; each instance defines CONVT_W (values per vector) and the intrinsics
 * CONVT_LOAD, CONVT_STORE, CONVT_ZERO, CONVT_BCAST and CONVT_FMA around it. */
#define CONVT_AVX2_ROW(r)                                                                \
    x = CONVT_BCAST(a##r + k);                                                           \
    c##r##0 = CONVT_FMA(x, b0, c##r##0);                                                 \
    c##r##1 = CONVT_FMA(x, b1, c##r##1);
#define CONVT_AVX2_LOAD_ROW(r)                                                           \
    c##r##0 = CONVT_LOAD(c + r * ldc); c##r##1 = CONVT_LOAD(c + r * ldc + CONVT_W);
#define CONVT_AVX2_STORE_ROW(r)                                                          \
    CONVT_STORE(c + r * ldc, c##r##0); CONVT_STORE(c + r * ldc + CONVT_W, c##r##1);
#define CONVT_AVX2_BODY(T, V)                                                            \
    V c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, b0, b1, x;             \
    int64_t t, k;                                                                        \
    if (acc) {                                                                           \
        CONVT_AVX2_LOAD_ROW(0) CONVT_AVX2_LOAD_ROW(1) CONVT_AVX2_LOAD_ROW(2)             \
        CONVT_AVX2_LOAD_ROW(3) CONVT_AVX2_LOAD_ROW(4) CONVT_AVX2_LOAD_ROW(5)             \
    } else {                                                                             \
        c00 = c01 = c10 = c11 = c20 = c21 = CONVT_ZERO();                                \
        c30 = c31 = c40 = c41 = c50 = c51 = CONVT_ZERO();                                \
    }                                                                                    \
    for (t = 0; t < ntaps; t++) {                                                        \
        const T* a0 = a[t * astride + 0] + aoff;                                         \
        const T* a1 = a[t * astride + 1] + aoff;                                         \
        const T* a2 = a[t * astride + 2] + aoff;                                         \
        const T* a3 = a[t * astride + 3] + aoff;                                         \
        const T* a4 = a[t * astride + 4] + aoff;                                         \
        const T* a5 = a[t * astride + 5] + aoff;                                         \
        const T* bt = b + t * bstride;                                                   \
        for (k = 0; k < kc; k++) {                                                       \
            b0 = CONVT_LOAD(bt + k * 2 * CONVT_W);                                       \
            b1 = CONVT_LOAD(bt + k * 2 * CONVT_W + CONVT_W);                             \
            CONVT_AVX2_ROW(0) CONVT_AVX2_ROW(1) CONVT_AVX2_ROW(2)                        \
            CONVT_AVX2_ROW(3) CONVT_AVX2_ROW(4) CONVT_AVX2_ROW(5)                        \
        }                                                                                \
    }                                                                                    \
    CONVT_AVX2_STORE_ROW(0) CONVT_AVX2_STORE_ROW(1) CONVT_AVX2_STORE_ROW(2)              \
    CONVT_AVX2_STORE_ROW(3) CONVT_AVX2_STORE_ROW(4) CONVT_AVX2_STORE_ROW(5)

__attribute__((target("avx2,fma")))
static void convt_ukernel_f32_avx2(int64_t ntaps, int64_t kc, const float* const* a,
                                   int64_t astride, int64_t aoff, const float* b,
                                   int64_t bstride, float* c, int64_t ldc, int acc)
{
#define CONVT_W 8
#define CONVT_LOAD _mm256_loadu_ps
#define CONVT_STORE _mm256_storeu_ps
#define CONVT_ZERO _mm256_setzero_ps
#define CONVT_BCAST _mm256_broadcast_ss
#define CONVT_FMA _mm256_fmadd_ps
    CONVT_AVX2_BODY(float, __m256)
#undef CONVT_W
#undef CONVT_LOAD
#undef CONVT_STORE
#undef CONVT_ZERO
#undef CONVT_BCAST
#undef CONVT_FMA
}

__attribute__((target("avx2,fma")))
static void convt_ukernel_f64_avx2(int64_t ntaps, int64_t kc, const double* const* a,
                                   int64_t astride, int64_t aoff, const double* b,
                                   int64_t bstride, double* c, int64_t ldc, int acc)
{
#define CONVT_W 4
#define CONVT_LOAD _mm256_loadu_pd
#define CONVT_STORE _mm256_storeu_pd
#define CONVT_ZERO _mm256_setzero_pd
#define CONVT_BCAST _mm256_broadcast_sd
#define CONVT_FMA _mm256_fmadd_pd
    CONVT_AVX2_BODY(double, __m256d)
#undef CONVT_W
#undef CONVT_LOAD
#undef CONVT_STORE
#undef CONVT_ZERO
#undef CONVT_BCAST
#undef CONVT_FMA
}
#endif

#if CONVT_HAVE_AVX2_PATH
/* AVX-512: 2*MR rows x one zmm (12 x 16 floats or 12 x 8 doubles): two adjacent MR-row
 * sub-tiles at once (rows i < 12 at a[t * astride + i], c + i * ldc), 12 accumulators, a
 * weight vector and a broadcast; the larger tile loads each weight vector once for 12 rows
 * instead of 6. Each output sums the same terms in the same order (t, then k) with one
 * rounding per multiply-add as the AVX2 body: the same bits. */
#define CONVT_Z_ROW(r)                                                                   \
    c##r = CONVT_FMA(CONVT_BCAST(a##r[k]), b0, c##r);
#define CONVT_Z_ROWS(M)                                                                  \
    M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)
#define CONVT_Z_LOAD(r) c##r = CONVT_LOAD(c + r * ldc);
#define CONVT_Z_STORE(r) CONVT_STORE(c + r * ldc, c##r);
#define CONVT_Z_ZERO(r) c##r = CONVT_ZERO();
#define CONVT_Z_PTR(r) const convt_z_t* a##r = a[t * astride + r] + aoff;
#define CONVT_AVX512_BODY(T, V)                                                          \
    typedef T convt_z_t;                                                                 \
    V c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, b0;                              \
    int64_t t, k;                                                                        \
    if (acc) {                                                                           \
        CONVT_Z_ROWS(CONVT_Z_LOAD)                                                       \
    } else {                                                                             \
        CONVT_Z_ROWS(CONVT_Z_ZERO)                                                       \
    }                                                                                    \
    for (t = 0; t < ntaps; t++) {                                                        \
        CONVT_Z_ROWS(CONVT_Z_PTR)                                                        \
        const T* bt = b + t * bstride;                                                   \
        for (k = 0; k < kc; k++) {                                                       \
            b0 = CONVT_LOAD(bt + k * CONVT_W);                                           \
            CONVT_Z_ROWS(CONVT_Z_ROW)                                                    \
        }                                                                                \
    }                                                                                    \
    CONVT_Z_ROWS(CONVT_Z_STORE)

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
static void convt_ukernel_f32_avx512(int64_t ntaps, int64_t kc, const float* const* a,
                                     int64_t astride, int64_t aoff, const float* b,
                                     int64_t bstride, float* c, int64_t ldc, int acc)
{
#define CONVT_W 16
#define CONVT_LOAD _mm512_loadu_ps
#define CONVT_STORE _mm512_storeu_ps
#define CONVT_ZERO _mm512_setzero_ps
#define CONVT_BCAST _mm512_set1_ps
#define CONVT_FMA _mm512_fmadd_ps
    CONVT_AVX512_BODY(float, __m512)
#undef CONVT_W
#undef CONVT_LOAD
#undef CONVT_STORE
#undef CONVT_ZERO
#undef CONVT_BCAST
#undef CONVT_FMA
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
static void convt_ukernel_f64_avx512(int64_t ntaps, int64_t kc, const double* const* a,
                                     int64_t astride, int64_t aoff, const double* b,
                                     int64_t bstride, double* c, int64_t ldc, int acc)
{
#define CONVT_W 8
#define CONVT_LOAD _mm512_loadu_pd
#define CONVT_STORE _mm512_storeu_pd
#define CONVT_ZERO _mm512_setzero_pd
#define CONVT_BCAST _mm512_set1_pd
#define CONVT_FMA _mm512_fmadd_pd
    CONVT_AVX512_BODY(double, __m512d)
#undef CONVT_W
#undef CONVT_LOAD
#undef CONVT_STORE
#undef CONVT_ZERO
#undef CONVT_BCAST
#undef CONVT_FMA
}
#endif

/* Dispatch: isa >= 2 computes 2 * MR rows (two adjacent sub-tiles) on the AVX-512 body;
 * isa 1 MR rows on the AVX2 body; 0 MR rows in portable C. */
static inline void convt_ukernel_f32(int isa, int64_t ntaps, int64_t kc, const float* const* a,
                                     int64_t astride, int64_t aoff, const float* b,
                                     int64_t bstride, float* c, int64_t ldc, int acc)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 2) {
        convt_ukernel_f32_avx512(ntaps, kc, a, astride, aoff, b, bstride, c, ldc, acc);
        return;
    }
    if (isa >= 1) {
        convt_ukernel_f32_avx2(ntaps, kc, a, astride, aoff, b, bstride, c, ldc, acc);
        return;
    }
#endif
    convt_ukernel_f32_generic(ntaps, kc, a, astride, aoff, b, bstride, c, ldc, acc);
}

static inline void convt_ukernel_f64(int isa, int64_t ntaps, int64_t kc, const double* const* a,
                                     int64_t astride, int64_t aoff, const double* b,
                                     int64_t bstride, double* c, int64_t ldc, int acc)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 2) {
        convt_ukernel_f64_avx512(ntaps, kc, a, astride, aoff, b, bstride, c, ldc, acc);
        return;
    }
    if (isa >= 1) {
        convt_ukernel_f64_avx2(ntaps, kc, a, astride, aoff, b, bstride, c, ldc, acc);
        return;
    }
#endif
    convt_ukernel_f64_generic(ntaps, kc, a, astride, aoff, b, bstride, c, ldc, acc);
}

#endif /* CONVT_UKERNEL_H */
