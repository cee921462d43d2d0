/* Register-blocked micro-kernels of the direct backend's "micro" variant (convt/_kernels/_micro.pyx).
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
 * Portable build, run-time selection: the AVX2+FMA bodies are compiled with a target attribute
 * (the rest of convt is built for the platform baseline, no -march=native) and used only when
 * the running CPU has both (convt_ukernel_isa); otherwise plain C that any compiler vectorises
 * for the baseline. Both sum in the same order (t, then k); the AVX2 one fuses each
 * multiply-add (one rounding), so the two differ in the last bits, never in the terms summed.
 */
#ifndef CONVT_UKERNEL_H
#define CONVT_UKERNEL_H

#include <stdint.h>

#define CONVT_MR 6
#define CONVT_NR_F32 16
#define CONVT_NR_F64 8

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CONVT_HAVE_AVX2_PATH 1
#include <immintrin.h>
#else
#define CONVT_HAVE_AVX2_PATH 0
#endif

/* 0: portable C; 1: AVX2 + FMA. */
static int convt_ukernel_isa(void)
{
#if CONVT_HAVE_AVX2_PATH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
#endif
    return 0;
}

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
/* 6 x 16 floats: 12 accumulators, 2 weight vectors, 1 broadcast (15 of 16 ymm registers). */
#define CONVT_ROW_F32(r)                                                                 \
    x = _mm256_broadcast_ss(a##r + k);                                                   \
    c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);                                           \
    c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);

__attribute__((target("avx2,fma")))
static void convt_ukernel_f32_avx2(int64_t ntaps, int64_t kc, const float* const* a,
                                   int64_t astride, int64_t aoff, const float* b,
                                   int64_t bstride, float* c, int64_t ldc, int acc)
{
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, b0, b1, x;
    int64_t t, k;
    if (acc) {
        c00 = _mm256_loadu_ps(c + 0 * ldc); c01 = _mm256_loadu_ps(c + 0 * ldc + 8);
        c10 = _mm256_loadu_ps(c + 1 * ldc); c11 = _mm256_loadu_ps(c + 1 * ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc); c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc); c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
        c40 = _mm256_loadu_ps(c + 4 * ldc); c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
        c50 = _mm256_loadu_ps(c + 5 * ldc); c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = _mm256_setzero_ps();
        c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    }
    for (t = 0; t < ntaps; t++) {
        const float* a0 = a[t * astride + 0] + aoff;
        const float* a1 = a[t * astride + 1] + aoff;
        const float* a2 = a[t * astride + 2] + aoff;
        const float* a3 = a[t * astride + 3] + aoff;
        const float* a4 = a[t * astride + 4] + aoff;
        const float* a5 = a[t * astride + 5] + aoff;
        const float* bt = b + t * bstride;
        for (k = 0; k < kc; k++) {
            b0 = _mm256_loadu_ps(bt + k * 16);
            b1 = _mm256_loadu_ps(bt + k * 16 + 8);
            CONVT_ROW_F32(0) CONVT_ROW_F32(1) CONVT_ROW_F32(2)
            CONVT_ROW_F32(3) CONVT_ROW_F32(4) CONVT_ROW_F32(5)
        }
    }
    _mm256_storeu_ps(c + 0 * ldc, c00); _mm256_storeu_ps(c + 0 * ldc + 8, c01);
    _mm256_storeu_ps(c + 1 * ldc, c10); _mm256_storeu_ps(c + 1 * ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20); _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30); _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    _mm256_storeu_ps(c + 4 * ldc, c40); _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    _mm256_storeu_ps(c + 5 * ldc, c50); _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

/* 6 x 8 doubles: the same register budget. */
#define CONVT_ROW_F64(r)                                                                 \
    x = _mm256_broadcast_sd(a##r + k);                                                   \
    c##r##0 = _mm256_fmadd_pd(x, b0, c##r##0);                                           \
    c##r##1 = _mm256_fmadd_pd(x, b1, c##r##1);

__attribute__((target("avx2,fma")))
static void convt_ukernel_f64_avx2(int64_t ntaps, int64_t kc, const double* const* a,
                                   int64_t astride, int64_t aoff, const double* b,
                                   int64_t bstride, double* c, int64_t ldc, int acc)
{
    __m256d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, b0, b1, x;
    int64_t t, k;
    if (acc) {
        c00 = _mm256_loadu_pd(c + 0 * ldc); c01 = _mm256_loadu_pd(c + 0 * ldc + 4);
        c10 = _mm256_loadu_pd(c + 1 * ldc); c11 = _mm256_loadu_pd(c + 1 * ldc + 4);
        c20 = _mm256_loadu_pd(c + 2 * ldc); c21 = _mm256_loadu_pd(c + 2 * ldc + 4);
        c30 = _mm256_loadu_pd(c + 3 * ldc); c31 = _mm256_loadu_pd(c + 3 * ldc + 4);
        c40 = _mm256_loadu_pd(c + 4 * ldc); c41 = _mm256_loadu_pd(c + 4 * ldc + 4);
        c50 = _mm256_loadu_pd(c + 5 * ldc); c51 = _mm256_loadu_pd(c + 5 * ldc + 4);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = _mm256_setzero_pd();
        c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_pd();
    }
    for (t = 0; t < ntaps; t++) {
        const double* a0 = a[t * astride + 0] + aoff;
        const double* a1 = a[t * astride + 1] + aoff;
        const double* a2 = a[t * astride + 2] + aoff;
        const double* a3 = a[t * astride + 3] + aoff;
        const double* a4 = a[t * astride + 4] + aoff;
        const double* a5 = a[t * astride + 5] + aoff;
        const double* bt = b + t * bstride;
        for (k = 0; k < kc; k++) {
            b0 = _mm256_loadu_pd(bt + k * 8);
            b1 = _mm256_loadu_pd(bt + k * 8 + 4);
            CONVT_ROW_F64(0) CONVT_ROW_F64(1) CONVT_ROW_F64(2)
            CONVT_ROW_F64(3) CONVT_ROW_F64(4) CONVT_ROW_F64(5)
        }
    }
    _mm256_storeu_pd(c + 0 * ldc, c00); _mm256_storeu_pd(c + 0 * ldc + 4, c01);
    _mm256_storeu_pd(c + 1 * ldc, c10); _mm256_storeu_pd(c + 1 * ldc + 4, c11);
    _mm256_storeu_pd(c + 2 * ldc, c20); _mm256_storeu_pd(c + 2 * ldc + 4, c21);
    _mm256_storeu_pd(c + 3 * ldc, c30); _mm256_storeu_pd(c + 3 * ldc + 4, c31);
    _mm256_storeu_pd(c + 4 * ldc, c40); _mm256_storeu_pd(c + 4 * ldc + 4, c41);
    _mm256_storeu_pd(c + 5 * ldc, c50); _mm256_storeu_pd(c + 5 * ldc + 4, c51);
}
#endif

static inline void convt_ukernel_f32(int isa, int64_t ntaps, int64_t kc, const float* const* a,
                                     int64_t astride, int64_t aoff, const float* b,
                                     int64_t bstride, float* c, int64_t ldc, int acc)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa == 1) {
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
    if (isa == 1) {
        convt_ukernel_f64_avx2(ntaps, kc, a, astride, aoff, b, bstride, c, ldc, acc);
        return;
    }
#endif
    convt_ukernel_f64_generic(ntaps, kc, a, astride, aoff, b, bstride, c, ldc, acc);
}

#endif /* CONVT_UKERNEL_H */
