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
#include <string.h>

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

/* The channels-first write-out of 8 tile rows x 8 channels (float32), with the bias:
 *
 *     tb == NULL: y[j*cs + k]       = ta[k*ldc + j] + bias[j]           (rows contiguous in y)
 *     otherwise:  y[j*cs + 2k]      = ta[k*ldc + j] + bias[j],
 *                 y[j*cs + 2k + 1]  = tb[k*ldc + j] + bias[j]           (two phases interleaved)
 *
 * for j, k < 8: a transpose of the tile block, so each channel's outputs go out in whole
 * vectors (the scalar loop stored one value per indexed store, 3 cycles a value). One
 * rounding per value (the addition), as in the scalar loop: the results are identical. */
static void convt_cf8_f32_generic(const float* ta, const float* tb, int64_t ldc,
                                  const float* bias, float* y, int64_t cs)
{
    int64_t j, k;
    for (j = 0; j < 8; j++)
        for (k = 0; k < 8; k++) {
            if (tb == NULL) {
                y[j * cs + k] = ta[k * ldc + j] + bias[j];
            } else {
                y[j * cs + 2 * k] = ta[k * ldc + j] + bias[j];
                y[j * cs + 2 * k + 1] = tb[k * ldc + j] + bias[j];
            }
        }
}

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

__attribute__((target("avx2")))
static void convt_cf8_f32_avx2(const float* ta, const float* tb, int64_t ldc,
                               const float* bias, float* y, int64_t cs)
{
    __m256 a[8], b[8];
    int j;
    convt_transpose8_f32(ta, ldc, a);
    for (j = 0; j < 8; j++)
        a[j] = _mm256_add_ps(a[j], _mm256_broadcast_ss(bias + j));
    if (tb == NULL) {
        for (j = 0; j < 8; j++)
            _mm256_storeu_ps(y + j * cs, a[j]);
        return;
    }
    convt_transpose8_f32(tb, ldc, b);
    for (j = 0; j < 8; j++) {
        b[j] = _mm256_add_ps(b[j], _mm256_broadcast_ss(bias + j));
        __m256 lo = _mm256_unpacklo_ps(a[j], b[j]), hi = _mm256_unpackhi_ps(a[j], b[j]);
        _mm256_storeu_ps(y + j * cs, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(y + j * cs + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
}
#endif

static inline void convt_cf8_f32(int isa, const float* ta, const float* tb, int64_t ldc,
                                 const float* bias, float* y, int64_t cs)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa == 1) {
        convt_cf8_f32_avx2(ta, tb, ldc, bias, y, cs);
        return;
    }
#endif
    convt_cf8_f32_generic(ta, tb, ldc, bias, y, cs);
}

/* The channels-first write-out of 8 consecutive outputs of a line of y, each a tile row of
 * its own (the Winograd variant's sets: phases and sub-phases interleave along the last
 * axis), 8 channels from channel coff of each row, with the bias:
 *
 *     y[j*cs + k] = rows[k][coff + j] + bias[j]        for j, k < 8
 *
 * as convt_cf8_f32 (one rounding per value: the scalar loop's results). */
#define CONVT_G8_GENERIC(NAME, T)                                                        \
static void NAME(const T* const* rows, int64_t coff, const T* bias, T* y, int64_t cs)    \
{                                                                                        \
    int64_t j, k;                                                                        \
    for (j = 0; j < 8; j++)                                                              \
        for (k = 0; k < 8; k++)                                                          \
            y[j * cs + k] = rows[k][coff + j] + bias[j];                                 \
}
/* ... and its dispatch on the ISA */
#if CONVT_HAVE_AVX2_PATH
#define CONVT_G8_DISPATCH(NAME, T)                                                       \
static inline void NAME(int isa, const T* const* rows, int64_t coff, const T* bias,      \
                        T* y, int64_t cs)                                                \
{                                                                                        \
    if (isa == 1) {                                                                      \
        NAME##_avx2(rows, coff, bias, y, cs);                                            \
        return;                                                                          \
    }                                                                                    \
    NAME##_generic(rows, coff, bias, y, cs);                                             \
}
#else
#define CONVT_G8_DISPATCH(NAME, T)                                                       \
static inline void NAME(int isa, const T* const* rows, int64_t coff, const T* bias,      \
                        T* y, int64_t cs)                                                \
{                                                                                        \
    (void) isa;                                                                          \
    NAME##_generic(rows, coff, bias, y, cs);                                             \
}
#endif

CONVT_G8_GENERIC(convt_g8_f32_generic, float)

#if CONVT_HAVE_AVX2_PATH
__attribute__((target("avx2")))
static void convt_g8_f32_avx2(const float* const* rows, int64_t coff, const float* bias,
                              float* y, int64_t cs)
{
    __m256 c[8];
    int j;
    convt_tr8_f32(_mm256_loadu_ps(rows[0] + coff), _mm256_loadu_ps(rows[1] + coff),
                  _mm256_loadu_ps(rows[2] + coff), _mm256_loadu_ps(rows[3] + coff),
                  _mm256_loadu_ps(rows[4] + coff), _mm256_loadu_ps(rows[5] + coff),
                  _mm256_loadu_ps(rows[6] + coff), _mm256_loadu_ps(rows[7] + coff), c);
    for (j = 0; j < 8; j++)
        _mm256_storeu_ps(y + j * cs, _mm256_add_ps(c[j], _mm256_broadcast_ss(bias + j)));
}
#endif

CONVT_G8_DISPATCH(convt_g8_f32, float)

/* convt_g8_f32 in float64 (the AVX2 body: four 4 x 4 register transposes). */
CONVT_G8_GENERIC(convt_g8_f64_generic, double)

#if CONVT_HAVE_AVX2_PATH
__attribute__((target("avx2")))
static void convt_g8_f64_avx2(const double* const* rows, int64_t coff, const double* bias,
                              double* y, int64_t cs)
{
    __m256d r[4], c[4];
    int bj, bk, k;
    for (bj = 0; bj < 8; bj += 4)          /* channels bj..bj+3 */
        for (bk = 0; bk < 8; bk += 4) {    /* outputs bk..bk+3 */
            for (k = 0; k < 4; k++)
                r[k] = _mm256_loadu_pd(rows[bk + k] + coff + bj);
            convt_tr4_f64(r, c);
            for (k = 0; k < 4; k++)
                _mm256_storeu_pd(y + (bj + k) * cs + bk,
                                 _mm256_add_pd(c[k], _mm256_broadcast_sd(bias + bj + k)));
        }
}
#endif

CONVT_G8_DISPATCH(convt_g8_f64, double)

/* convt_t8_f32's transpose, and 1 when a value of the block has an exponent field of at
 * least (0xff - spare) (NaN, +-Inf, or too large for a signed sum of 2^spare of them:
 * _finite.pxd's _exponent_at_least), else 0. The AVX2 body tests the 8 rows it loaded, in
 * registers: the Winograd variant's transpose of x, tested in a second pass over each block,
 * took 0.128 ms for hifigan_up3's 2 MB, 0.066 without the test (2 threads). */
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
    if (isa == 1)                                                                        \
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
 * transposes. The scalar loops they replace ran hifigan_up3's float64 layout changes (x in,
 * y out) at 38% of its call (perf, 2 threads). */
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

/* An 8 x 8 float32 block transposed: dst[j*ldd + k] = src[k*lds + j], j, k < 8. */
static inline void convt_t8_f32(int isa, const float* src, int64_t lds, float* dst, int64_t ldd)
{
    int64_t j, k;
#if CONVT_HAVE_AVX2_PATH
    if (isa == 1) {
        convt_t8_f32_avx2(src, lds, dst, ldd);
        return;
    }
#endif
    for (j = 0; j < 8; j++)
        for (k = 0; k < 8; k++)
            dst[j * ldd + k] = src[k * lds + j];
}

/* One input channel's taps in the layout of wino_conv's late sums (convt._winograd.wino_taps),
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
    if (isa == 1)
        return convt_taps_f32_avx2(src, Mg, KT, dst, line, ps, spare, stream);
#endif
    return convt_taps_f32_generic(src, Mg, KT, dst, line, ps, spare);
}

/* Two phases of one channel interleaved into a channels-first output row, with the bias:
 *
 *     y[2i] = a[i] + bias,  y[2i + 1] = b[i] + bias,   i < n
 *
 * (the GEMM variant's write-out of stride-2 phase pairs from a channel-major tile; the scalar
 * loop stored one value per strided store). One rounding per value, as the scalar loop. */
#define CONVT_ZIP2_GENERIC                                                               \
    for (; i < n; i++) {                                                                 \
        y[2 * i] = a[i] + bias;                                                          \
        y[2 * i + 1] = b[i] + bias;                                                      \
    }

#if CONVT_HAVE_AVX2_PATH
#define CONVT_ZIP2_AVX2(NAME, T, V, LANES, SET1, LOADU, STOREU, ADD, UNPLO, UNPHI, PERM)  \
__attribute__((target("avx2")))                                                          \
static void NAME(const T* a, const T* b, T bias, T* y, int64_t n)                        \
{                                                                                        \
    int64_t i = 0;                                                                       \
    V bv = SET1(bias);                                                                   \
    for (; i + LANES <= n; i += LANES) {                                                 \
        V va = ADD(LOADU(a + i), bv), vb = ADD(LOADU(b + i), bv);                        \
        V lo = UNPLO(va, vb), hi = UNPHI(va, vb);                                        \
        STOREU(y + 2 * i, PERM(lo, hi, 0x20));                                           \
        STOREU(y + 2 * i + LANES, PERM(lo, hi, 0x31));                                   \
    }                                                                                    \
    CONVT_ZIP2_GENERIC                                                                   \
}
CONVT_ZIP2_AVX2(convt_zip2_f32_avx2, float, __m256, 8, _mm256_set1_ps, _mm256_loadu_ps,
                _mm256_storeu_ps, _mm256_add_ps, _mm256_unpacklo_ps, _mm256_unpackhi_ps,
                _mm256_permute2f128_ps)
CONVT_ZIP2_AVX2(convt_zip2_f64_avx2, double, __m256d, 4, _mm256_set1_pd, _mm256_loadu_pd,
                _mm256_storeu_pd, _mm256_add_pd, _mm256_unpacklo_pd, _mm256_unpackhi_pd,
                _mm256_permute2f128_pd)
#endif

static inline void convt_zip2_f32(int isa, const float* a, const float* b, float bias, float* y,
                                  int64_t n)
{
    int64_t i = 0;
#if CONVT_HAVE_AVX2_PATH
    if (isa == 1) {
        convt_zip2_f32_avx2(a, b, bias, y, n);
        return;
    }
#endif
    CONVT_ZIP2_GENERIC
}

static inline void convt_zip2_f64(int isa, const double* a, const double* b, double bias,
                                  double* y, int64_t n)
{
    int64_t i = 0;
#if CONVT_HAVE_AVX2_PATH
    if (isa == 1) {
        convt_zip2_f64_avx2(a, b, bias, y, n);
        return;
    }
#endif
    CONVT_ZIP2_GENERIC
}

/* The input transforms a Winograd product tap reads (convt/_kernels/_micro.pyx, _wino_build):
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
    if (isa == 1 && CONVT_HAVE_AVX2_PATH) {                                              \
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

/* Kernel taps a Winograd product tap's weight sums at most: 3 per axis (F(2, 3)), 3 axes. */
#define CONVT_WSUM_MAX 27

/* The packed weights of one Winograd product tap (convt/_kernels/_micro.pyx, pack_wino, and
 * wino_conv's late sums): for every line jp < NP (a panel, or a channel), its NR values (one
 * 64-byte line in both dtypes)
 *
 *     dst[jp * us + j] = ((0 + cf[0] * t_0[jp * ls + j]) + cf[1] * t_1[jp * ls + j]) + ...
 *
 * with t_e = tmp + ck[e] * Mgp, over the entries e < CONVT_WSUM_MAX whose cf[e] is not 0, in
 * entry order, each step a fused multiply-add in both bodies (the portable one through fma):
 * identical results. The coefficients are +-1, +-1/2, +-1/4 or +-1/8 (convt._winograd:
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
        if (stream) {   /* dst lines are 64-byte aligned (convt._micro.packing_arrays) */ \
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
    if (isa == 1 && CONVT_HAVE_AVX2_PATH)                                                \
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

#endif /* CONVT_UKERNEL_H */
