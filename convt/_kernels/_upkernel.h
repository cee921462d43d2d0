/* The "upsample" variant's tile (convt/_kernels/_upsample.pyx): channels-first (NCX) pure
 * upsampling, every kernel tap one output phase (K == s on each axis, stride 2 on the last).
 *
 * One call computes, for one block of input positions j along the last axis (nv vectors of
 * V values), four weight columns r (two output rows, each the pair b = 0, 1 of one output
 * channel and outer phase):
 *
 *     acc[r][j] = sum over k < kc of  w[k*4 + r] * xp[k*ld + j]          (k in order, FMA)
 *
 * xp: the block's input values, one row of nv*V per input channel (packed by the caller);
 * w: the four columns' weights, 4 per input channel. The two rows of an output row pair are
 * interleaved in registers (y[2j + b]) and stored with their bias: no tile buffer and no
 * channels-first write-out. Each output is summed in the order of the micro variant
 * (convt/_kernels/_ukernel.h with one tap: channel by channel, one rounding per multiply-add,
 * then + bias), so the two give the same bits.
 *
 * AVX2 + FMA (compiled with a target attribute; the plan runs the micro variant on CPUs
 * without it) and AVX-512 bodies, the latter on zmm vectors: the caller packs blocks of the
 * body's vector (V in its dims). 12 accumulators (4 columns x 3 vectors), 3 input vectors
 * and 1 broadcast weight: the 16 ymm registers.
 */
#ifndef CONVT_UPKERNEL_H
#define CONVT_UPKERNEL_H

#include <stdint.h>
#include <string.h>
#include "_half.h"
#include "_transpose.h"

#if CONVT_HAVE_AVX2_PATH

/* One vector v of the four columns: FMA with the broadcast weight wv (NV: the block's vectors,
 * a compile-time constant, so every accumulator is a register of its own). */
#define CONVT_UP_FMA(FMA, NV, A, X, WV)                                                      \
    A##0 = FMA(WV, X##0, A##0);                                                               \
    if (NV > 1) A##1 = FMA(WV, X##1, A##1);                                                   \
    if (NV > 2) A##2 = FMA(WV, X##2, A##2);

/* Vector v's outputs: the two rows' pairs (p0, p1) and (p2, p3), plus their bias, interleaved
 * into 2V values of each output row (of type YT: T, or 16 bits that ST rounds to), stored
 * whole or (the row's last, partial vector) through tmp. */
#define CONVT_UP_STORE(YT, VT, V, ST, ADD, SET1, ZIPLO, ZIPHI, v, A0, A1, A2, A3)             \
    {                                                                                           \
        VT p0 = ADD(A0, SET1(b[0])), p1 = ADD(A1, SET1(b[0]));                                  \
        VT p2 = ADD(A2, SET1(b[1])), p3 = ADD(A3, SET1(b[1]));                                  \
        int64_t n_ = valid - 2 * V * (v);                                                       \
        if (n_ >= 2 * V) {                                                                      \
            ST(y0 + 2 * V * (v), ZIPLO(p0, p1)); ST(y0 + 2 * V * (v) + V, ZIPHI(p0, p1));       \
            if (y1) {                                                                           \
                ST(y1 + 2 * V * (v), ZIPLO(p2, p3)); ST(y1 + 2 * V * (v) + V, ZIPHI(p2, p3));   \
            }                                                                                   \
        } else if (n_ > 0) {                                                                    \
            YT tmp[4 * V];                                                                      \
            ST(tmp, ZIPLO(p0, p1)); ST(tmp + V, ZIPHI(p0, p1));                                 \
            ST(tmp + 2 * V, ZIPLO(p2, p3)); ST(tmp + 3 * V, ZIPHI(p2, p3));                     \
            memcpy(y0 + 2 * V * (v), tmp, (size_t)n_ * sizeof(YT));                             \
            if (y1) memcpy(y1 + 2 * V * (v), tmp + 2 * V, (size_t)n_ * sizeof(YT));             \
        }                                                                                       \
    }

/* The tile for NV vectors (1-3): 4 x NV accumulators, NV input vectors, one weight. */
#define CONVT_UP_TILE_NV(NAME, TARGET, NV, T, YT, VT, V, LD, FMA, BC, ST, ADD, SET1, SET0,   \
                         ZIPLO, ZIPHI)                                                         \
static __attribute__((target(TARGET))) void                                                    \
NAME##_##NV(const T* xp, const T* w, int64_t kc, YT* y0, YT* y1, const T* b, int64_t valid)   \
{                                                                                               \
    VT a0 = SET0(), a1 = SET0(), a2 = SET0(), b0 = SET0(), b1 = SET0(), b2 = SET0();           \
    VT c0 = SET0(), c1 = SET0(), c2 = SET0(), d0 = SET0(), d1 = SET0(), d2 = SET0();           \
    VT x0, x1 = SET0(), x2 = SET0(), wv;                                                        \
    int64_t k;                                                                                  \
    for (k = 0; k < kc; k++) {                                                                  \
        const T* xr = xp + k * (NV * V);                                                        \
        const T* wk = w + 4 * k;                                                                \
        x0 = LD(xr);                                                                            \
        if (NV > 1) x1 = LD(xr + V);                                                            \
        if (NV > 2) x2 = LD(xr + 2 * V);                                                        \
        wv = BC(wk);     CONVT_UP_FMA(FMA, NV, a, x, wv)                                        \
        wv = BC(wk + 1); CONVT_UP_FMA(FMA, NV, b, x, wv)                                        \
        wv = BC(wk + 2); CONVT_UP_FMA(FMA, NV, c, x, wv)                                        \
        wv = BC(wk + 3); CONVT_UP_FMA(FMA, NV, d, x, wv)                                        \
    }                                                                                           \
    CONVT_UP_STORE(YT, VT, V, ST, ADD, SET1, ZIPLO, ZIPHI, 0, a0, b0, c0, d0)                   \
    if (NV > 1) CONVT_UP_STORE(YT, VT, V, ST, ADD, SET1, ZIPLO, ZIPHI, 1, a1, b1, c1, d1)       \
    if (NV > 2) CONVT_UP_STORE(YT, VT, V, ST, ADD, SET1, ZIPLO, ZIPHI, 2, a2, b2, c2, d2)       \
}

/* V values per vector; LD/FMA/BC/ST/ADD/SET1/SET0 are the type's intrinsics; ZIPLO/ZIPHI(a,
 * b): the two halves of a and b interleaved. YT: the type of y (T, or uint16_t: 16-bit
 * storage, ST rounding each vector as it stores it). */
#define CONVT_UP_TILE_Y(NAME, TARGET, T, YT, VT, V, LD, FMA, BC, ST, ADD, SET1, SET0, ZIPLO,  \
                        ZIPHI)                                                                 \
CONVT_UP_TILE_NV(NAME, TARGET, 1, T, YT, VT, V, LD, FMA, BC, ST, ADD, SET1, SET0, ZIPLO, ZIPHI) \
CONVT_UP_TILE_NV(NAME, TARGET, 2, T, YT, VT, V, LD, FMA, BC, ST, ADD, SET1, SET0, ZIPLO, ZIPHI) \
CONVT_UP_TILE_NV(NAME, TARGET, 3, T, YT, VT, V, LD, FMA, BC, ST, ADD, SET1, SET0, ZIPLO, ZIPHI) \
static void NAME(const T* xp, const T* w, int64_t kc, int nv, YT* y0, YT* y1, const T* b,     \
                 int64_t valid)                                                                 \
{                                                                                               \
    if (nv == 3) NAME##_3(xp, w, kc, y0, y1, b, valid);                                         \
    else if (nv == 2) NAME##_2(xp, w, kc, y0, y1, b, valid);                                    \
    else NAME##_1(xp, w, kc, y0, y1, b, valid);                                                 \
}

#define CONVT_UP_TILE(NAME, TARGET, T, VT, V, LD, FMA, BC, ST, ADD, SET1, SET0, ZIPLO, ZIPHI) \
    CONVT_UP_TILE_Y(NAME, TARGET, T, T, VT, V, LD, FMA, BC, ST, ADD, SET1, SET0, ZIPLO, ZIPHI)

CONVT_UP_TILE(convt_up_tile_f32, "avx2,fma", float, __m256, 8, _mm256_loadu_ps,
              _mm256_fmadd_ps, _mm256_broadcast_ss, _mm256_storeu_ps, _mm256_add_ps,
              _mm256_set1_ps, _mm256_setzero_ps, convt_zip_lo_ps, convt_zip_hi_ps)
CONVT_UP_TILE(convt_up_tile_f64, "avx2,fma", double, __m256d, 4, _mm256_loadu_pd,
              _mm256_fmadd_pd, _mm256_broadcast_sd, _mm256_storeu_pd, _mm256_add_pd,
              _mm256_set1_pd, _mm256_setzero_pd, convt_zip_lo_pd, convt_zip_hi_pd)

/* The AVX-512 tile: the same sums on zmm vectors (16 float32, 8 float64), so a block is up
 * to 3 zmm vectors of inputs (the caller's layout: convt._backends.direct.upsample, vector
 * of 64 bytes at level 2). 12 of the 32 zmm registers hold sums. */
#define CONVT_UP_BC512_PS(p) _mm512_set1_ps(*(p))
#define CONVT_UP_BC512_PD(p) _mm512_set1_pd(*(p))
CONVT_UP_TILE(convt_up_tile512_f32, "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma", float,
              __m512, 16, _mm512_loadu_ps, _mm512_fmadd_ps, CONVT_UP_BC512_PS,
              _mm512_storeu_ps, _mm512_add_ps, _mm512_set1_ps, _mm512_setzero_ps,
              convt_zip512_lo_ps, convt_zip512_hi_ps)
CONVT_UP_TILE(convt_up_tile512_f64, "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma", double,
              __m512d, 8, _mm512_loadu_pd, _mm512_fmadd_pd, CONVT_UP_BC512_PD,
              _mm512_storeu_pd, _mm512_add_pd, _mm512_set1_pd, _mm512_setzero_pd,
              convt_zip512_lo_pd, convt_zip512_hi_pd)

/* The float32 tiles writing a 16-bit y (float16 or bfloat16, _half.h): each vector of sums
 * plus bias rounded to nearest even as it is stored (_half.h's narrowing, NaN lanes through its
 * scalar body), so y holds the bits of the float32 result rounded by astype, with no float32
 * array in between. float16 needs F16C (the caller checks: _half.level). */
#define CONVT_UP_ST_F16(p, v) convt_narrow8_avx2(CONVT_F16, v, p)
#define CONVT_UP_ST_BF16(p, v) convt_narrow8_avx2(CONVT_BF16, v, p)
#define CONVT_UP_ST512_F16(p, v) convt_narrow16_avx512(CONVT_F16, v, p)
#define CONVT_UP_ST512_BF16(p, v) convt_narrow16_avx512(CONVT_BF16, v, p)
CONVT_UP_TILE_Y(convt_up_tile_f16, "avx2,fma,f16c", float, uint16_t, __m256, 8,
                _mm256_loadu_ps, _mm256_fmadd_ps, _mm256_broadcast_ss, CONVT_UP_ST_F16,
                _mm256_add_ps, _mm256_set1_ps, _mm256_setzero_ps, convt_zip_lo_ps,
                convt_zip_hi_ps)
CONVT_UP_TILE_Y(convt_up_tile_bf16, "avx2,fma,f16c", float, uint16_t, __m256, 8,
                _mm256_loadu_ps, _mm256_fmadd_ps, _mm256_broadcast_ss, CONVT_UP_ST_BF16,
                _mm256_add_ps, _mm256_set1_ps, _mm256_setzero_ps, convt_zip_lo_ps,
                convt_zip_hi_ps)
CONVT_UP_TILE_Y(convt_up_tile512_f16, "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,f16c", float,
                uint16_t, __m512, 16, _mm512_loadu_ps, _mm512_fmadd_ps, CONVT_UP_BC512_PS,
                CONVT_UP_ST512_F16, _mm512_add_ps, _mm512_set1_ps, _mm512_setzero_ps,
                convt_zip512_lo_ps, convt_zip512_hi_ps)
CONVT_UP_TILE_Y(convt_up_tile512_bf16, "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,f16c", float,
                uint16_t, __m512, 16, _mm512_loadu_ps, _mm512_fmadd_ps, CONVT_UP_BC512_PS,
                CONVT_UP_ST512_BF16, _mm512_add_ps, _mm512_set1_ps, _mm512_setzero_ps,
                convt_zip512_lo_ps, convt_zip512_hi_ps)

#else  /* no AVX2 path on this compiler/platform: the plan never runs this variant */

static void convt_up_tile_f32(const float* xp, const float* w, int64_t kc, int nv, float* y0,
                              float* y1, const float* b, int64_t valid) {}
static void convt_up_tile_f64(const double* xp, const double* w, int64_t kc, int nv,
                              double* y0, double* y1, const double* b, int64_t valid) {}
static void convt_up_tile512_f32(const float* xp, const float* w, int64_t kc, int nv,
                                 float* y0, float* y1, const float* b, int64_t valid) {}
static void convt_up_tile512_f64(const double* xp, const double* w, int64_t kc, int nv,
                                 double* y0, double* y1, const double* b, int64_t valid) {}

#define CONVT_UP_STUB16(NAME)                                                                  \
static void NAME(const float* xp, const float* w, int64_t kc, int nv, uint16_t* y0,           \
                 uint16_t* y1, const float* b, int64_t valid) {}
CONVT_UP_STUB16(convt_up_tile_f16)
CONVT_UP_STUB16(convt_up_tile_bf16)
CONVT_UP_STUB16(convt_up_tile512_f16)
CONVT_UP_STUB16(convt_up_tile512_bf16)

#endif
#endif
