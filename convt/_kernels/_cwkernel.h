/* The channels-first Winograd kernel's tile and write-out (convt/_kernels/_cfwino.pyx):
 * the Winograd variant's F(2, 2) products of a 1-D layer of stride S whose S phases each have
 * two taps one input apart (2S taps), computed on channels-first x as it is.
 *
 * convt_cw_tile computes, for one product and one block of 3 vectors of tiles j, four tile
 * rows r (output channels):
 *
 *     out[r * 3V + j] = sum over k < kc of  w[k*4 + r] * s[k*3V + j]       (k in order, FMA)
 *
 * s: the product's input transform, one row of 3V values per input channel (built by the
 * caller); w: the four rows' product weights, 4 per input channel. The sum starts from zero
 * and adds one fused multiply-add per channel, as the micro kernel's register tile does for a
 * one-tap product (convt/_kernels/_ukernel.h), so a product's sums have its bits. 12
 * accumulators (4 rows x 3 vectors), 3 input vectors and 1 broadcast weight: the 16 ymm
 * registers.
 *
 * convt_cw_out combines one row's six products (two phases c x three products m) into its
 * outputs, y0 = (m0 + m1) + bias, y1 = (m2 + m1) + bias, as the Winograd variant's output
 * transform and write-out do (the same adds in the same order), and stores them where they
 * interleave in y: y[4j + 2t + c] = phase c's y_t of tile j. convt_cw_outs does the same for
 * S phases other than two: y[2S j + S t + c] = phase c's y_t of tile j (8 x 8 float32 or
 * 4 x 4 float64 transposes when S is a multiple of the vector width, 4 x 4 per 128-bit lane
 * for float32 at S = 4, one value per store otherwise). convt_cw_out16_f32 is convt_cw_out_f32
 * into a 16-bit y, each vector rounded in registers as it is stored (a 16-bit call's result
 * with no narrowing pass; other strides round through a buffer, _cfwino.pyx).
 *
 * AVX2 + FMA (target attribute; the plan runs the NXC Winograd kernel on other CPUs), and an
 * AVX-512 tile (convt_cw_tile512_*: level 2, where convt._kernels._cpu.kernel_level allows).
 */
#ifndef CONVT_CWKERNEL_H
#define CONVT_CWKERNEL_H

#include <stdint.h>
#include "_half.h"
#include "_transpose.h"

#if CONVT_HAVE_AVX2_PATH

#define CONVT_CW_TILE(NAME, T, VT, V, LD, FMA, BC, ST, SET0)                                    \
static __attribute__((target("avx2,fma"))) void                                                \
NAME(const T* s, int64_t kc, const T* w, T* out)                                               \
{                                                                                               \
    VT a0 = SET0(), a1 = SET0(), a2 = SET0(), b0 = SET0(), b1 = SET0(), b2 = SET0();           \
    VT c0 = SET0(), c1 = SET0(), c2 = SET0(), d0 = SET0(), d1 = SET0(), d2 = SET0();           \
    VT x0, x1, x2, wv;                                                                          \
    int64_t k;                                                                                  \
    for (k = 0; k < kc; k++) {                                                                  \
        const T* xr = s + k * (3 * V);                                                          \
        const T* wk = w + 4 * k;                                                                \
        x0 = LD(xr); x1 = LD(xr + V); x2 = LD(xr + 2 * V);                                      \
        wv = BC(wk);     a0 = FMA(wv, x0, a0); a1 = FMA(wv, x1, a1); a2 = FMA(wv, x2, a2);      \
        wv = BC(wk + 1); b0 = FMA(wv, x0, b0); b1 = FMA(wv, x1, b1); b2 = FMA(wv, x2, b2);      \
        wv = BC(wk + 2); c0 = FMA(wv, x0, c0); c1 = FMA(wv, x1, c1); c2 = FMA(wv, x2, c2);      \
        wv = BC(wk + 3); d0 = FMA(wv, x0, d0); d1 = FMA(wv, x1, d1); d2 = FMA(wv, x2, d2);      \
    }                                                                                           \
    ST(out, a0); ST(out + V, a1); ST(out + 2 * V, a2);                                          \
    ST(out + 3 * V, b0); ST(out + 4 * V, b1); ST(out + 5 * V, b2);                              \
    ST(out + 6 * V, c0); ST(out + 7 * V, c1); ST(out + 8 * V, c2);                              \
    ST(out + 9 * V, d0); ST(out + 10 * V, d1); ST(out + 11 * V, d2);                            \
}

CONVT_CW_TILE(convt_cw_tile_f32, float, __m256, 8, _mm256_loadu_ps, _mm256_fmadd_ps,
              _mm256_broadcast_ss, _mm256_storeu_ps, _mm256_setzero_ps)
CONVT_CW_TILE(convt_cw_tile_f64, double, __m256d, 4, _mm256_loadu_pd, _mm256_fmadd_pd,
              _mm256_broadcast_sd, _mm256_storeu_pd, _mm256_setzero_pd)

/* The AVX-512 tile: the same 4 rows x 3V tiles (the block and the write-outs unchanged), each
 * row's 3V as one zmm and one ymm vector (16 + 8 float32, 8 + 4 float64): 8 fused
 * multiply-adds a channel in place of 12, every lane the same chain, so the same bits. */
#define CONVT_CW_TILE512(NAME, T, VZ, VY, V, LDZ, LDY, FMAZ, FMAY, BCZ, BCY, STZ, STY, SETZ,   \
                         SETY)                                                                  \
static __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"))) void            \
NAME(const T* s, int64_t kc, const T* w, T* out)                                               \
{                                                                                               \
    VZ a0 = SETZ(), b0 = SETZ(), c0 = SETZ(), d0 = SETZ(), x0;                                  \
    VY a1 = SETY(), b1 = SETY(), c1 = SETY(), d1 = SETY(), x1;                                  \
    int64_t k;                                                                                  \
    for (k = 0; k < kc; k++) {                                                                  \
        const T* xr = s + k * (3 * V);                                                          \
        const T* wk = w + 4 * k;                                                                \
        x0 = LDZ(xr); x1 = LDY(xr + 2 * V);                                                     \
        a0 = FMAZ(BCZ(wk[0]), x0, a0); a1 = FMAY(BCY(wk[0]), x1, a1);                           \
        b0 = FMAZ(BCZ(wk[1]), x0, b0); b1 = FMAY(BCY(wk[1]), x1, b1);                           \
        c0 = FMAZ(BCZ(wk[2]), x0, c0); c1 = FMAY(BCY(wk[2]), x1, c1);                           \
        d0 = FMAZ(BCZ(wk[3]), x0, d0); d1 = FMAY(BCY(wk[3]), x1, d1);                           \
    }                                                                                           \
    STZ(out, a0); STY(out + 2 * V, a1);                                                         \
    STZ(out + 3 * V, b0); STY(out + 5 * V, b1);                                                 \
    STZ(out + 6 * V, c0); STY(out + 8 * V, c1);                                                 \
    STZ(out + 9 * V, d0); STY(out + 11 * V, d1);                                                \
}

CONVT_CW_TILE512(convt_cw_tile512_f32, float, __m512, __m256, 8, _mm512_loadu_ps,
                 _mm256_loadu_ps, _mm512_fmadd_ps, _mm256_fmadd_ps, _mm512_set1_ps,
                 _mm256_set1_ps, _mm512_storeu_ps, _mm256_storeu_ps, _mm512_setzero_ps,
                 _mm256_setzero_ps)
CONVT_CW_TILE512(convt_cw_tile512_f64, double, __m512d, __m256d, 4, _mm512_loadu_pd,
                 _mm256_loadu_pd, _mm512_fmadd_pd, _mm256_fmadd_pd, _mm512_set1_pd,
                 _mm256_set1_pd, _mm512_storeu_pd, _mm256_storeu_pd, _mm512_setzero_pd,
                 _mm256_setzero_pd)

/* One row's outputs of a block: m(c, p) = t + (c * 3 + p) * rs, each 3V tile values; y at the
 * block's first output; valid: outputs of y from there (4 * 3V when the block is whole). */
#define CONVT_CW_SUMS(T, i)                                                                     \
    T s00 = (m[0][i] + m[1][i]) + bias, s01 = (m[3][i] + m[4][i]) + bias;                      \
    T s10 = (m[2][i] + m[1][i]) + bias, s11 = (m[5][i] + m[4][i]) + bias;
/* ... one value per store: a block's last outputs, up to valid (PUT(k, value) stores y[k]) */
#define CONVT_CW_TAIL(T, PUT)                                                                   \
    for (i = 0; 4 * i < valid; i++) {                                                           \
        CONVT_CW_SUMS(T, i)                                                                     \
        PUT(4 * i, s00);                                                                        \
        if (4 * i + 1 < valid) PUT(4 * i + 1, s01);                                             \
        if (4 * i + 2 < valid) PUT(4 * i + 2, s10);                                             \
        if (4 * i + 3 < valid) PUT(4 * i + 3, s11);                                             \
    }
#define CONVT_CW_PUT(k, value) (y[k] = (value))
#define CONVT_CW_PUT16(k, value) (y16[k] = convt_narrow1(kind, (value)))

/* vector v < 3 of the row's tiles: its 32 outputs, in y's order, as o[0..3] */
static inline __attribute__((always_inline, target("avx2"))) void
convt_cw_out8(const float* const* m, int64_t v, __m256 bb, __m256* o)
{
    __m256 m1 = _mm256_loadu_ps(m[1] + 8 * v), m4 = _mm256_loadu_ps(m[4] + 8 * v);
    __m256 A = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(m[0] + 8 * v), m1), bb);
    __m256 B = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(m[3] + 8 * v), m4), bb);
    __m256 C = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(m[2] + 8 * v), m1), bb);
    __m256 D = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(m[5] + 8 * v), m4), bb);
    /* (A B C D) per tile j: 4 x 8 -> 8 runs of 4 */
    __m256 ab0 = _mm256_unpacklo_ps(A, B), ab1 = _mm256_unpackhi_ps(A, B);
    __m256 cd0 = _mm256_unpacklo_ps(C, D), cd1 = _mm256_unpackhi_ps(C, D);
    __m256 r0 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(ab0),
                                                    _mm256_castps_pd(cd0)));
    __m256 r1 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(ab0),
                                                    _mm256_castps_pd(cd0)));
    __m256 r2 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(ab1),
                                                    _mm256_castps_pd(cd1)));
    __m256 r3 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(ab1),
                                                    _mm256_castps_pd(cd1)));
    /* r0: tiles 0 and 4, r1: 1 and 5, r2: 2 and 6, r3: 3 and 7 (one per lane) */
    o[0] = _mm256_permute2f128_ps(r0, r1, 0x20);
    o[1] = _mm256_permute2f128_ps(r2, r3, 0x20);
    o[2] = _mm256_permute2f128_ps(r0, r1, 0x31);
    o[3] = _mm256_permute2f128_ps(r2, r3, 0x31);
}

static __attribute__((target("avx2"))) void
convt_cw_out_f32(const float* t, int64_t rs, float bias, float* y, int64_t valid)
{
    const float* m[6] = {t, t + rs, t + 2 * rs, t + 3 * rs, t + 4 * rs, t + 5 * rs};
    int64_t v, i;
    __m256 o[4];
    if (valid >= 4 * 24) {
        for (v = 0; v < 3; v++) {
            convt_cw_out8(m, v, _mm256_set1_ps(bias), o);
            for (i = 0; i < 4; i++)
                _mm256_storeu_ps(y + 32 * v + 8 * i, o[i]);
        }
        return;
    }
    CONVT_CW_TAIL(float, CONVT_CW_PUT)
}

/* 32 outputs o[0..3] rounded into y16[0..31]: float16 by vcvtps2ph after one NaN test over
 * the four vectors, two to a store; bfloat16, or a NaN among them, by convt_narrow8_avx2 */
static inline __attribute__((always_inline, target("avx2,f16c"))) void
convt_cw_put16(int kind, const __m256* o, uint16_t* y16)
{
    int i;
    if (kind == CONVT_BF16 || convt_any_nan8(o, 4)) {
        for (i = 0; i < 4; i++)
            convt_narrow8_avx2(kind, o[i], y16 + 8 * i);
        return;
    }
    for (i = 0; i < 4; i += 2)
        _mm256_storeu_si256((__m256i*) (y16 + 8 * i), _mm256_set_m128i(
            _mm256_cvtps_ph(o[i + 1], _MM_FROUND_TO_NEAREST_INT),
            _mm256_cvtps_ph(o[i], _MM_FROUND_TO_NEAREST_INT)));
}

/* convt_cw_out_f32 into 16-bit y16 (_half.h's kind), each value rounded in registers as it
 * is stored (convt_cw_put16: the float32 value, then astype's rounding; needs F16C for
 * float16) */
static __attribute__((target("avx2,f16c"))) void
convt_cw_out16_f32(const float* t, int64_t rs, float bias, uint16_t* y16, int64_t valid,
                   int kind)
{
    const float* m[6] = {t, t + rs, t + 2 * rs, t + 3 * rs, t + 4 * rs, t + 5 * rs};
    int64_t v, i;
    __m256 o[4];
    if (valid >= 4 * 24) {
        for (v = 0; v < 3; v++) {
            convt_cw_out8(m, v, _mm256_set1_ps(bias), o);
            convt_cw_put16(kind, o, y16 + 32 * v);
        }
        return;
    }
    CONVT_CW_TAIL(float, CONVT_CW_PUT16)
}

static __attribute__((target("avx2"))) void
convt_cw_out_f64(const double* t, int64_t rs, double bias, double* y, int64_t valid)
{
    const double* m[6] = {t, t + rs, t + 2 * rs, t + 3 * rs, t + 4 * rs, t + 5 * rs};
    int64_t v, i;
    if (valid >= 4 * 12) {
        __m256d bb = _mm256_set1_pd(bias), r[4], c[4];
        for (v = 0; v < 3; v++) {
            __m256d m1 = _mm256_loadu_pd(m[1] + 4 * v), m4 = _mm256_loadu_pd(m[4] + 4 * v);
            r[0] = _mm256_add_pd(_mm256_add_pd(_mm256_loadu_pd(m[0] + 4 * v), m1), bb);
            r[1] = _mm256_add_pd(_mm256_add_pd(_mm256_loadu_pd(m[3] + 4 * v), m4), bb);
            r[2] = _mm256_add_pd(_mm256_add_pd(_mm256_loadu_pd(m[2] + 4 * v), m1), bb);
            r[3] = _mm256_add_pd(_mm256_add_pd(_mm256_loadu_pd(m[5] + 4 * v), m4), bb);
            convt_tr4_f64(r, c);
            _mm256_storeu_pd(y + 16 * v, c[0]);
            _mm256_storeu_pd(y + 16 * v + 4, c[1]);
            _mm256_storeu_pd(y + 16 * v + 8, c[2]);
            _mm256_storeu_pd(y + 16 * v + 12, c[3]);
        }
        return;
    }
    CONVT_CW_TAIL(double, CONVT_CW_PUT)
}

/* One row's outputs of a block for S != 2 phases: m(c, p) = t + (3c + p) * rs, each J tile
 * values; y at the block's first output; valid: outputs of y from there (2S J when the block
 * is whole). Whole groups of V tiles whose outputs are all valid go through V x V transposes
 * (V phases x V tiles -> V tiles x V phases) when V divides S, and through 4 x 4 ones per
 * 128-bit lane for float32 at S = 4; the rest one value at a time, with the same adds. */
#define CONVT_CW_OUTS_TAIL(T)                                                                   \
    for (i = full; i < J && 2 * S * i < valid; i++)                                             \
        for (c = 0; c < S; c++) {                                                               \
            const T* m = t + 3 * c * rs + i;                                                    \
            T m1 = m[rs];                                                                       \
            int64_t o = 2 * S * i + c;                                                          \
            if (o < valid) y[o] = (m[0] + m1) + bias;                                           \
            if (o + S < valid) y[o + S] = (m[2 * rs] + m1) + bias;                              \
        }

/* ... a vector of tiles of one phase: its products at m, m + rs, m + 2 rs -> a[k] (y0) and
 * b[k] (y1), with the bias bb */
#define CONVT_CW_SUMV(VT, LD, ADD, m, k)                                                        \
    {                                                                                           \
        VT m1 = LD((m) + rs);                                                                   \
        a[k] = ADD(ADD(LD(m), m1), bb);                                                         \
        b[k] = ADD(ADD(LD((m) + 2 * rs), m1), bb);                                              \
    }

static __attribute__((target("avx2"))) void
convt_cw_outs_f32(const float* t, int64_t rs, int64_t S, float bias, float* y, int64_t valid,
                  int64_t J)
{
    int64_t full = 0, j0, cb, c, i;
    __m256 bb = _mm256_set1_ps(bias), a[8], b[8], ca[8], cc[8];
    if (S == 4) {
        full = valid / 8 < J ? valid / 8 : J;
        full -= full % 8;
        for (j0 = 0; j0 < full; j0 += 8) {
            for (c = 0; c < 4; c++)
                CONVT_CW_SUMV(__m256, _mm256_loadu_ps, _mm256_add_ps, t + 3 * c * rs + j0, c)
            /* per 128-bit lane, 4 phases x 4 tiles -> 4 tiles x 4 phases: ca[i] holds tiles i
             * and i + 4 of y0, cc[i] of y1; tile j's eight outputs are (y0 phases, y1 phases) */
            __m256 t0 = _mm256_unpacklo_ps(a[0], a[1]), t1 = _mm256_unpackhi_ps(a[0], a[1]);
            __m256 t2 = _mm256_unpacklo_ps(a[2], a[3]), t3 = _mm256_unpackhi_ps(a[2], a[3]);
            ca[0] = _mm256_shuffle_ps(t0, t2, 0x44); ca[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
            ca[2] = _mm256_shuffle_ps(t1, t3, 0x44); ca[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
            t0 = _mm256_unpacklo_ps(b[0], b[1]); t1 = _mm256_unpackhi_ps(b[0], b[1]);
            t2 = _mm256_unpacklo_ps(b[2], b[3]); t3 = _mm256_unpackhi_ps(b[2], b[3]);
            cc[0] = _mm256_shuffle_ps(t0, t2, 0x44); cc[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
            cc[2] = _mm256_shuffle_ps(t1, t3, 0x44); cc[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
            for (i = 0; i < 4; i++) {
                _mm256_storeu_ps(y + 8 * (j0 + i), _mm256_permute2f128_ps(ca[i], cc[i], 0x20));
                _mm256_storeu_ps(y + 8 * (j0 + i + 4),
                                 _mm256_permute2f128_ps(ca[i], cc[i], 0x31));
            }
        }
    }
    if (S % 8 == 0) {
        full = valid / (2 * S) < J ? valid / (2 * S) : J;
        full -= full % 8;
        for (j0 = 0; j0 < full; j0 += 8)
            for (cb = 0; cb < S; cb += 8) {
                for (c = 0; c < 8; c++)
                    CONVT_CW_SUMV(__m256, _mm256_loadu_ps, _mm256_add_ps,
                                  t + 3 * (cb + c) * rs + j0, c)
                convt_tr8_f32(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], ca);
                convt_tr8_f32(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], cc);
                for (i = 0; i < 8; i++) {
                    _mm256_storeu_ps(y + 2 * S * (j0 + i) + cb, ca[i]);
                    _mm256_storeu_ps(y + 2 * S * (j0 + i) + S + cb, cc[i]);
                }
            }
    }
    CONVT_CW_OUTS_TAIL(float)
}

static __attribute__((target("avx2"))) void
convt_cw_outs_f64(const double* t, int64_t rs, int64_t S, double bias, double* y,
                  int64_t valid, int64_t J)
{
    int64_t full = 0, j0, cb, c, i;
    if (S % 4 == 0) {
        full = valid / (2 * S) < J ? valid / (2 * S) : J;
        full -= full % 4;
    }
    __m256d bb = _mm256_set1_pd(bias), a[4], b[4], ca[4], cc[4];
    for (j0 = 0; j0 < full; j0 += 4)
        for (cb = 0; cb < S; cb += 4) {
            for (c = 0; c < 4; c++)
                CONVT_CW_SUMV(__m256d, _mm256_loadu_pd, _mm256_add_pd,
                              t + 3 * (cb + c) * rs + j0, c)
            convt_tr4_f64(a, ca);
            convt_tr4_f64(b, cc);
            for (i = 0; i < 4; i++) {
                _mm256_storeu_pd(y + 2 * S * (j0 + i) + cb, ca[i]);
                _mm256_storeu_pd(y + 2 * S * (j0 + i) + S + cb, cc[i]);
            }
        }
    CONVT_CW_OUTS_TAIL(double)
}

/* One input channel's six transform rows of a block (J tiles each, at st + p * CJ for row
 * p = 3c + m) from its segment seg (L = 2 * half values, zeros off the data): the segment
 * split into even and odd positions (ev, od: half values each; each body splits whole
 * vectors, then this the rest from j, each value through WIDEN), then per row set c = 0, 1
 * (the phases whose tile j reads x[u], x[u+1], x[u+2] at seg[2j + dd[c]]): x[u] - x[u+1],
 * x[u+1], x[u+1] - x[u+2] (convt_corners' differences, the same subtractions). */
#define CONVT_CW_ROWS(T, WIDEN)                                                                 \
    for (; j < half; j++) {                                                                     \
        ev[j] = WIDEN(seg[2 * j]);                                                              \
        od[j] = WIDEN(seg[2 * j + 1]);                                                          \
    }                                                                                           \
    for (c = 0; c < 2; c++) {                                                                   \
        int64_t a = dd[c] >> 1;                                                                 \
        const T* x0 = (dd[c] & 1) ? od + a : ev + a;                                            \
        const T* x1 = (dd[c] & 1) ? ev + a + 1 : od + a;                                        \
        const T* x2 = (dd[c] & 1) ? od + a + 1 : ev + a + 1;                                    \
        T* s0 = st + 3 * c * CJ;                                                                \
        for (j = 0; j < J; j++) {                                                               \
            s0[j] = x0[j] - x1[j];                                                              \
            s0[CJ + j] = x1[j];                                                                 \
            s0[2 * CJ + j] = x1[j] - x2[j];                                                     \
        }                                                                                       \
    }
#define CONVT_CW_AS_IS(v) (v)
#define CONVT_CW_WIDEN1(v) convt_widen1(kind, (v))

static __attribute__((target("avx2"))) void
convt_cw_rows_f32(const float* restrict seg, int64_t half, const int64_t* dd,
                  float* restrict st, int64_t CJ, int64_t J, float* restrict ev,
                  float* restrict od)
{
    int64_t j, c;
    for (j = 0; j + 8 <= half; j += 8) {
        __m256 lo = _mm256_loadu_ps(seg + 2 * j), hi = _mm256_loadu_ps(seg + 2 * j + 8);
        /* (l0 l2 h0 h2 | l4 l6 h4 h6) -> (l0 l2 l4 l6 h0 h2 h4 h6) */
        __m256 e = _mm256_shuffle_ps(lo, hi, 0x88), o = _mm256_shuffle_ps(lo, hi, 0xdd);
        _mm256_storeu_ps(ev + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e),
                                                                        0xd8)));
        _mm256_storeu_ps(od + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o),
                                                                        0xd8)));
    }
    CONVT_CW_ROWS(float, CONVT_CW_AS_IS)
}

static __attribute__((target("avx2"))) void
convt_cw_rows_f64(const double* restrict seg, int64_t half, const int64_t* dd,
                  double* restrict st, int64_t CJ, int64_t J, double* restrict ev,
                  double* restrict od)
{
    int64_t j, c;
    for (j = 0; j + 4 <= half; j += 4) {
        __m256d lo = _mm256_loadu_pd(seg + 2 * j), hi = _mm256_loadu_pd(seg + 2 * j + 4);
        /* (l0 h0 | l2 h2) and (l1 h1 | l3 h3) -> (l0 l2 h0 h2), (l1 l3 h1 h3) */
        _mm256_storeu_pd(ev + j, _mm256_permute4x64_pd(_mm256_unpacklo_pd(lo, hi), 0xd8));
        _mm256_storeu_pd(od + j, _mm256_permute4x64_pd(_mm256_unpackhi_pd(lo, hi), 0xd8));
    }
    CONVT_CW_ROWS(double, CONVT_CW_AS_IS)
}

/* convt_cw_rows_f32 on a 16-bit segment (_half.h's kind: float16 by F16C, bfloat16 by a
 * shift), widened in registers as it is split: each pair of values is one 32-bit lane, so
 * bfloat16's even positions are the lanes shifted left by 16 and its odd ones the lanes' high
 * halves; float16's halves are gathered (evens, then odds) and widened by vcvtph2ps. Exact
 * for every finite value and Inf; a NaN may come out quieted, unlike astype: the caller's
 * bound test sends any x holding one to the micro variant. */
static __attribute__((target("avx2,f16c"))) void
convt_cw_rows16(int kind, const uint16_t* restrict seg, int64_t half, const int64_t* dd,
                float* restrict st, int64_t CJ, int64_t J, float* restrict ev,
                float* restrict od)
{
    int64_t j, c;
    const __m256i gather = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14,
                                            15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11,
                                            14, 15);
    for (j = 0; j + 8 <= half; j += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i*) (seg + 2 * j));
        if (kind == CONVT_BF16) {
            _mm256_storeu_si256((__m256i*) (ev + j), _mm256_slli_epi32(v, 16));
            _mm256_storeu_si256((__m256i*) (od + j),
                                _mm256_and_si256(v, _mm256_set1_epi32((int) 0xffff0000u)));
        } else {
            /* per lane (4 evens | 4 odds), then the quarters as (evens, odds) */
            v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, gather), 0xd8);
            _mm256_storeu_ps(ev + j, _mm256_cvtph_ps(_mm256_castsi256_si128(v)));
            _mm256_storeu_ps(od + j, _mm256_cvtph_ps(_mm256_extracti128_si256(v, 1)));
        }
    }
    CONVT_CW_ROWS(float, CONVT_CW_WIDEN1)
}

#else  /* no AVX2 path on this compiler/platform: the plan never runs this kernel */

static void convt_cw_tile_f32(const float* s, int64_t kc, const float* w, float* out) {}
static void convt_cw_tile_f64(const double* s, int64_t kc, const double* w, double* out) {}
static void convt_cw_out_f32(const float* t, int64_t rs, float bias, float* y,
                             int64_t valid) {}
static void convt_cw_out_f64(const double* t, int64_t rs, double bias, double* y,
                             int64_t valid) {}
static void convt_cw_out16_f32(const float* t, int64_t rs, float bias, uint16_t* y16,
                               int64_t valid, int kind) {}
static void convt_cw_outs_f32(const float* t, int64_t rs, int64_t S, float bias, float* y,
                              int64_t valid, int64_t J) {}
static void convt_cw_outs_f64(const double* t, int64_t rs, int64_t S, double bias, double* y,
                              int64_t valid, int64_t J) {}
static void convt_cw_rows_f32(const float* seg, int64_t half, const int64_t* dd, float* st,
                              int64_t CJ, int64_t J, float* ev, float* od) {}
static void convt_cw_rows_f64(const double* seg, int64_t half, const int64_t* dd, double* st,
                              int64_t CJ, int64_t J, double* ev, double* od) {}

static void convt_cw_rows16(int kind, const uint16_t* seg, int64_t half, const int64_t* dd,
                            float* st, int64_t CJ, int64_t J, float* ev, float* od) {}
#endif
#endif
