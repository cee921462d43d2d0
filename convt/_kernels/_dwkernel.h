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
 * cost as much as the vectors on 64-output rows); the rest is scalar with the range check.
 * Both sum in tap order with one fused multiply-add per tap, so an output is rounded the same
 * whichever path takes its q: results do not depend on how rows are split into blocks or
 * threads. The portable path is the
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
#define CONVT_DW_SCALAR(T, FMA, Q0, Q1)                                                  \
    for (q = (Q0); q < (Q1); q++) {                                                      \
        T acc_ = b;                                                                      \
        for (t = 0; t < nt[c]; t++) {                                                    \
            int64_t i_ = q + e[c][t];                                                    \
            if (i_ >= 0 && i_ < I2)                                                      \
                acc_ = FMA(w[c][t], x[off[c][t] + q], acc_);                             \
        }                                                                                \
        y[q * s2 + c] = acc_;                                                            \
    }

/* acc[i] = b + sum_t w[c][t] * x[off[c][t] + q + i*lanes + j], j < lanes, i < NV, in tap
 * order: NV independent chains of fused multiply-adds (one chain is bound by the FMA
 * latency). */
#define CONVT_DW_VEC(T, V, SET1, LOADU, FMADD, LANES, NV, ACC, C, Q)                      \
    do {                                                                                 \
        int64_t t_, i_;                                                                  \
        for (i_ = 0; i_ < (NV); i_++)                                                    \
            ACC[i_] = SET1(b);                                                           \
        for (t_ = 0; t_ < nt[C]; t_++) {                                                 \
            V w_ = SET1(w[C][t_]);                                                       \
            const T* p_ = x + off[C][t_] + (Q);                                          \
            for (i_ = 0; i_ < (NV); i_++)                                                \
                ACC[i_] = FMADD(w_, LOADU(p_ + i_ * LANES), ACC[i_]);                    \
        }                                                                                \
    } while (0)

/* NV vectors of outputs from q: phase 0's alone (s2 == 1), or phases 0 and 1 interleaved. */
#define CONVT_DW_STORE(T, V, SET1, LOADU, STOREU, FMADD, UNPLO, UNPHI, PERM, LANES, NV)   \
    do {                                                                                 \
        V a_[NV], b_[NV], l_, h_;                                                        \
        int64_t i_;                                                                      \
        CONVT_DW_VEC(T, V, SET1, LOADU, FMADD, LANES, NV, a_, 0, q);                     \
        if (s2 == 1) {                                                                   \
            for (i_ = 0; i_ < (NV); i_++)                                                \
                STOREU(y + q + i_ * LANES, a_[i_]);                                      \
            break;                                                                       \
        }                                                                                \
        CONVT_DW_VEC(T, V, SET1, LOADU, FMADD, LANES, NV, b_, 1, q);                     \
        for (i_ = 0; i_ < (NV); i_++) {                                                  \
            l_ = UNPLO(a_[i_], b_[i_]);                                                  \
            h_ = UNPHI(a_[i_], b_[i_]);                                                  \
            STOREU(y + 2 * (q + i_ * LANES), PERM(l_, h_, 0x20));                        \
            STOREU(y + 2 * (q + i_ * LANES) + LANES, PERM(l_, h_, 0x31));                \
        }                                                                                \
    } while (0)

#define CONVT_DW_ROW(NAME, T, V, LANES, SET1, LOADU, STOREU, FMADD, UNPLO, UNPHI, PERM, FMA) \
__attribute__((target("avx2,fma")))                                                      \
static void NAME(T* y, int64_t s2, int64_t qa, const int64_t* qe, const int64_t* lo,     \
                 const int64_t* hi, const int64_t* nt, const T* x, const int64_t* off0,  \
                 const int64_t* e0, const T* w0, int64_t I2, T b)                        \
{                                                                                        \
    int64_t L = qa, H = qe[0], c, q, qv, t;                                              \
    const int64_t* off[2] = {off0, off0 + nt[0]};   /* phase c's terms */               \
    const int64_t* e[2] = {e0, e0 + nt[0]};                                              \
    const T* w[2] = {w0, w0 + nt[0]};                                                    \
    for (c = 0; c < s2; c++) {                                                           \
        L = lo[c] > L ? lo[c] : L;                                                       \
        H = hi[c] < H ? hi[c] : H;                                                       \
        H = qe[c] < H ? qe[c] : H;                                                       \
    }                                                                                    \
    if (H < L)                                                                           \
        H = L;                                                                           \
    for (c = 0; c < s2; c++) {   /* outside the common interior: scalar */               \
        CONVT_DW_SCALAR(T, FMA, qa, L < qe[c] ? L : qe[c])                               \
        CONVT_DW_SCALAR(T, FMA, H > qa ? H : qa, qe[c])                                  \
    }                                                                                    \
    for (q = L; q + 4 * LANES <= H; q += 4 * LANES)                                      \
        CONVT_DW_STORE(T, V, SET1, LOADU, STOREU, FMADD, UNPLO, UNPHI, PERM, LANES, 4);  \
    for (; q < H; q += LANES) {                                                          \
        if (q + LANES > H) {                                                             \
            if (H - L < LANES)                                                           \
                break;                                                                   \
            q = H - LANES;   /* the last vector again, overlapping */                    \
        }                                                                                \
        CONVT_DW_STORE(T, V, SET1, LOADU, STOREU, FMADD, UNPLO, UNPHI, PERM, LANES, 1);  \
    }                                                                                    \
    /* an interior shorter than a vector: scalar, same sums (q == H otherwise) */        \
    qv = q;                                                                              \
    for (c = 0; c < s2; c++)                                                             \
        CONVT_DW_SCALAR(T, FMA, qv, H)                                                   \
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
