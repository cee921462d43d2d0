/* AVX2 + FMA row kernel of the direct backend's depthwise variant (convt/_kernels/_depthwise.pyx),
 * channels first, innermost stride s2 = 1 or 2.
 *
 * One call computes one block of one output row:
 *
 *     y[q*s2 + c] = b + sum over the taps t of phase c that are in range at q of  w[t] * x[off[t] + q]
 *
 * for c < s2 and qa <= q < qe[c]. Phase c's taps are the nt[c] terms after phase c-1's in the
 * flat arrays off / e / w; tap t is in range at q when 0 <= q + e[t] < I2, which holds for every
 * tap of phase c on lo[c] <= q < hi[c]. Where that holds for all phases, vectors of q are taken
 * (two phases interleaved with unpack / permute into whole vectors of y, instead of a second pass
 * through a phase buffer), the last one overlapping the one before when the interior is not a
 * whole number of vectors (its outputs are written twice with the same values: a scalar tail
 * cost as much as the vectors on 64-output rows); the rest is scalar with the range check. Both sum in tap order with
 * one fused multiply-add per tap, so an output is rounded the same whichever path takes its q:
 * results do not depend on how rows are split into blocks or threads. The portable path is the
 * Cython loop (_phase + _interleave), with a multiply and an add per tap: the two agree to
 * rounding, not bit for bit (as the micro-kernels, _ukernel.h).
 *
 * Used only when convt_ukernel_isa() says AVX2 and FMA (run-time selection, portable build). */
#ifndef CONVT_DWKERNEL_H
#define CONVT_DWKERNEL_H

#include <math.h>
#include <stdint.h>

#include "_ukernel.h"

#if CONVT_HAVE_AVX2_PATH

/* The scalar outputs of phase c on [q0, q1), with the range check. */
#define CONVT_DW_SCALAR(T, FMA)                                                          \
    for (q = q0; q < q1; q++) {                                                          \
        T acc_ = b;                                                                      \
        for (t = 0; t < n; t++) {                                                        \
            int64_t i_ = q + e[t];                                                       \
            if (i_ >= 0 && i_ < I2)                                                      \
                acc_ = FMA(w[t], x[off[t] + q], acc_);                                   \
        }                                                                                \
        y[q * s2 + c] = acc_;                                                            \
    }

/* acc = b + sum_t w[t] * x[off[t] + q + j], j < lanes, in tap order. */
#define CONVT_DW_VEC(V, SET1, LOADU, FMADD, ACC, OFF, W, N, Q)                            \
    do {                                                                                 \
        int64_t t_;                                                                      \
        ACC = SET1(b);                                                                   \
        for (t_ = 0; t_ < (N); t_++)                                                     \
            ACC = FMADD(SET1((W)[t_]), LOADU(x + (OFF)[t_] + (Q)), ACC);                 \
    } while (0)

/* The same for the four vectors at q, q + lanes, q + 2 lanes, q + 3 lanes: four independent
 * chains of fused multiply-adds (one chain is bound by the FMA latency). */
#define CONVT_DW_VEC4(T, V, SET1, LOADU, FMADD, LANES, ACC, OFF, W, N, Q)                  \
    do {                                                                                 \
        int64_t t_;                                                                      \
        ACC[0] = ACC[1] = ACC[2] = ACC[3] = SET1(b);                                     \
        for (t_ = 0; t_ < (N); t_++) {                                                   \
            V w_ = SET1((W)[t_]);                                                        \
            const T* p_ = x + (OFF)[t_] + (Q);                                           \
            ACC[0] = FMADD(w_, LOADU(p_), ACC[0]);                                       \
            ACC[1] = FMADD(w_, LOADU(p_ + LANES), ACC[1]);                               \
            ACC[2] = FMADD(w_, LOADU(p_ + 2 * LANES), ACC[2]);                           \
            ACC[3] = FMADD(w_, LOADU(p_ + 3 * LANES), ACC[3]);                           \
        }                                                                                \
    } while (0)

#define CONVT_DW_ROW(NAME, T, V, LANES, SET1, LOADU, STOREU, FMADD, UNPLO, UNPHI, PERM, FMA) \
__attribute__((target("avx2,fma")))                                                      \
static void NAME(T* y, int64_t s2, int64_t qa, const int64_t* qe, const int64_t* lo,     \
                 const int64_t* hi, const int64_t* nt, const T* x, const int64_t* off0,  \
                 const int64_t* e0, const T* w0, int64_t I2, T b)                        \
{                                                                                        \
    int64_t L = qa, H = qe[0], c, q, qv, q0, q1, t, n;                                   \
    const int64_t *off, *e;                                                              \
    const T* w;                                                                          \
    const int64_t* off1 = off0 + nt[0];                                                  \
    const T* w1 = w0 + nt[0];                                                            \
    for (c = 0; c < s2; c++) {                                                           \
        L = lo[c] > L ? lo[c] : L;                                                       \
        H = hi[c] < H ? hi[c] : H;                                                       \
        H = qe[c] < H ? qe[c] : H;                                                       \
    }                                                                                    \
    if (H < L)                                                                           \
        H = L;                                                                           \
    for (c = 0; c < s2; c++) {   /* outside the common interior: scalar */               \
        off = c ? off1 : off0;                                                           \
        e = c ? e0 + nt[0] : e0;                                                         \
        w = c ? w1 : w0;                                                                 \
        n = nt[c];                                                                       \
        q0 = qa;                                                                         \
        q1 = L < qe[c] ? L : qe[c];                                                      \
        CONVT_DW_SCALAR(T, FMA)                                                          \
        q0 = H > qa ? H : qa;                                                            \
        q1 = qe[c];                                                                      \
        CONVT_DW_SCALAR(T, FMA)                                                          \
    }                                                                                    \
    q = L;                                                                               \
    if (s2 == 1) {                                                                       \
        for (; q + 4 * LANES <= H; q += 4 * LANES) {                                     \
            V a_[4];                                                                     \
            CONVT_DW_VEC4(T, V, SET1, LOADU, FMADD, LANES, a_, off0, w0, nt[0], q);         \
            for (c = 0; c < 4; c++)                                                      \
                STOREU(y + q + c * LANES, a_[c]);                                        \
        }                                                                                \
        for (; q < H; q += LANES) {                                                      \
            V a0;                                                                        \
            if (q + LANES > H) {                                                         \
                if (H - L < LANES)                                                       \
                    break;                                                               \
                q = H - LANES;   /* the last vector again, overlapping */                \
            }                                                                            \
            CONVT_DW_VEC(V, SET1, LOADU, FMADD, a0, off0, w0, nt[0], q);                 \
            STOREU(y + q, a0);                                                           \
        }                                                                                \
    } else {                                                                             \
        for (; q + 4 * LANES <= H; q += 4 * LANES) {                                     \
            V a_[4], b_[4], l_, h_;                                                      \
            CONVT_DW_VEC4(T, V, SET1, LOADU, FMADD, LANES, a_, off0, w0, nt[0], q);         \
            CONVT_DW_VEC4(T, V, SET1, LOADU, FMADD, LANES, b_, off1, w1, nt[1], q);         \
            for (c = 0; c < 4; c++) {                                                    \
                l_ = UNPLO(a_[c], b_[c]);                                                \
                h_ = UNPHI(a_[c], b_[c]);                                                \
                STOREU(y + 2 * (q + c * LANES), PERM(l_, h_, 0x20));                     \
                STOREU(y + 2 * (q + c * LANES) + LANES, PERM(l_, h_, 0x31));             \
            }                                                                            \
        }                                                                                \
        for (; q < H; q += LANES) {                                                      \
            V a0, a1, l_, h_;                                                            \
            if (q + LANES > H) {                                                         \
                if (H - L < LANES)                                                       \
                    break;                                                               \
                q = H - LANES;   /* the last vector again, overlapping */                \
            }                                                                            \
            CONVT_DW_VEC(V, SET1, LOADU, FMADD, a0, off0, w0, nt[0], q);                 \
            CONVT_DW_VEC(V, SET1, LOADU, FMADD, a1, off1, w1, nt[1], q);                 \
            l_ = UNPLO(a0, a1);                                                          \
            h_ = UNPHI(a0, a1);                                                          \
            STOREU(y + 2 * q, PERM(l_, h_, 0x20));                                       \
            STOREU(y + 2 * q + LANES, PERM(l_, h_, 0x31));                               \
        }                                                                                \
    }                                                                                    \
    /* an interior shorter than a vector: scalar, same sums (q == H otherwise) */   \
    qv = q;                                                                              \
    for (c = 0; c < s2; c++) {                                                           \
        off = c ? off1 : off0;                                                           \
        e = c ? e0 + nt[0] : e0;                                                         \
        w = c ? w1 : w0;                                                                 \
        n = nt[c];                                                                       \
        q0 = qv;                                                                         \
        q1 = H;                                                                          \
        CONVT_DW_SCALAR(T, FMA)                                                          \
    }                                                                                    \
}

CONVT_DW_ROW(convt_dw_row_f32_avx2, float, __m256, 8, _mm256_set1_ps, _mm256_loadu_ps,
             _mm256_storeu_ps, _mm256_fmadd_ps, _mm256_unpacklo_ps, _mm256_unpackhi_ps,
             _mm256_permute2f128_ps, fmaf)
CONVT_DW_ROW(convt_dw_row_f64_avx2, double, __m256d, 4, _mm256_set1_pd, _mm256_loadu_pd,
             _mm256_storeu_pd, _mm256_fmadd_pd, _mm256_unpacklo_pd, _mm256_unpackhi_pd,
             _mm256_permute2f128_pd, fma)

#endif /* CONVT_HAVE_AVX2_PATH */

/* 1 when this build has the AVX2 row kernels (the caller still checks convt_ukernel_isa()). */
#define CONVT_DW_HAVE_AVX2 CONVT_HAVE_AVX2_PATH

static inline void convt_dw_row_f32(float* y, int64_t s2, int64_t qa, const int64_t* qe,
                                    const int64_t* lo, const int64_t* hi, const int64_t* nt,
                                    const float* x, const int64_t* off, const int64_t* e,
                                    const float* w, int64_t I2, float b)
{
#if CONVT_HAVE_AVX2_PATH
    convt_dw_row_f32_avx2(y, s2, qa, qe, lo, hi, nt, x, off, e, w, I2, b);
#endif
}

static inline void convt_dw_row_f64(double* y, int64_t s2, int64_t qa, const int64_t* qe,
                                    const int64_t* lo, const int64_t* hi, const int64_t* nt,
                                    const double* x, const int64_t* off, const int64_t* e,
                                    const double* w, int64_t I2, double b)
{
#if CONVT_HAVE_AVX2_PATH
    convt_dw_row_f64_avx2(y, s2, qa, qe, lo, hi, nt, x, off, e, w, I2, b);
#endif
}

#endif /* CONVT_DWKERNEL_H */
