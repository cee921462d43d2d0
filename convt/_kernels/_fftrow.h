/* Inner loops of the FFT backend's per-bin contraction (_fftmul.pyx), one body compiled for
 * each ISA level of _isa.h: the portable build is SSE2 only, and these loops (unit-stride
 * streams over output channels) run about 2-4x faster in 256- or 512-bit vectors with FMA.
 * GCC vectorises the plain C bodies under each target attribute; a body's result depends on
 * the level (FMA contraction), never on the thread count.
 *
 * fftrow_contract: one bin row's items, y[i] = x[i] @ W (complex, W split: wr, wi, (Cg, Mg)).
 * fftrow_dft: one row's kernel spectrum W = sum_k F[f, k] A[k] (and, cplx, its mirror
 * row's, conj(F[f, k]) A[k]) from taps lines of A; see _fftmul.pyx. */
#ifndef CONVT_FFTROW_H
#define CONVT_FFTROW_H

#include <stdint.h>
#include "_isa.h"

/* fftrow_dft reads A packed by _fftmul.pyx: per row rr, blocks of this many weights, each
 * block holding every tap's real then imaginary parts (one contiguous stream per row: with
 * A's natural layout the taps' lines lie a multiple of 4 KiB apart when C_in/G * C_out/G is
 * a multiple of 1024, and their loads collided in the L1 sets, 4x slower). */
#define CONVT_FFTROW_BLOCK 16

/* Loads and stores of GCC vector types at any alignment (vmovups). */
#define CONVT_FFTROW_LD(V, p) ({ V v_; __builtin_memcpy(&v_, (p), sizeof v_); v_; })
#define CONVT_FFTROW_ST(p, v) do { __typeof__(v) w_ = (v); __builtin_memcpy((p), &w_, sizeof w_); } while (0)

/* T the real type, SUF the name suffix, ATTR the target attribute, VB the vector bytes. The
 * loops keep their sums in vector registers over the reduction (c, or the taps k) and store
 * each once: written as plain loops, GCC kept them in memory (a load and a store per FMA). */
#define CONVT_FFTROW_BODIES(T, SUF, ATTR, VB)                                                 \
typedef T convt_v_##SUF __attribute__((vector_size(VB)));                                    \
ATTR static void fftrow_contract_##SUF(const T *restrict x, const T *restrict wr,            \
        const T *restrict wi, T *restrict y, int64_t items, int64_t cg, int64_t mg,          \
        int64_t xs, T *restrict acc)                                                         \
{                                                                                             \
    typedef convt_v_##SUF V;                                                                  \
    const int64_t ln = VB / sizeof(T);                                                        \
    T *restrict ar = acc, *restrict ai = acc + mg;                                            \
    for (int64_t i = 0; i < items; i++) {                                                     \
        const T *restrict xi_ = x + i * xs;                                                   \
        int64_t m = 0;                                                                        \
        for (; m + 2 * ln <= mg; m += 2 * ln) {                                               \
            V r0 = {0}, i0 = {0}, r1 = {0}, i1 = {0};                                         \
            for (int64_t c = 0; c < cg; c++) {                                                \
                const T xr = xi_[2 * c], xm = xi_[2 * c + 1];                                 \
                const V a0 = CONVT_FFTROW_LD(V, wr + c * mg + m);                            \
                const V b0 = CONVT_FFTROW_LD(V, wi + c * mg + m);                            \
                const V a1 = CONVT_FFTROW_LD(V, wr + c * mg + m + ln);                       \
                const V b1 = CONVT_FFTROW_LD(V, wi + c * mg + m + ln);                       \
                r0 += xr * a0; r0 -= xm * b0; i0 += xr * b0; i0 += xm * a0;                   \
                r1 += xr * a1; r1 -= xm * b1; i1 += xr * b1; i1 += xm * a1;                   \
            }                                                                                 \
            CONVT_FFTROW_ST(ar + m, r0); CONVT_FFTROW_ST(ai + m, i0);                         \
            CONVT_FFTROW_ST(ar + m + ln, r1); CONVT_FFTROW_ST(ai + m + ln, i1);               \
        }                                                                                     \
        for (; m + ln <= mg; m += ln) {                                                       \
            V r0 = {0}, i0 = {0};                                                             \
            for (int64_t c = 0; c < cg; c++) {                                                \
                const T xr = xi_[2 * c], xm = xi_[2 * c + 1];                                 \
                const V a0 = CONVT_FFTROW_LD(V, wr + c * mg + m);                            \
                const V b0 = CONVT_FFTROW_LD(V, wi + c * mg + m);                            \
                r0 += xr * a0; r0 -= xm * b0; i0 += xr * b0; i0 += xm * a0;                   \
            }                                                                                 \
            CONVT_FFTROW_ST(ar + m, r0); CONVT_FFTROW_ST(ai + m, i0);                         \
        }                                                                                     \
        for (; m < mg; m++) {                                                                 \
            T r0 = 0, i0 = 0;                                                                 \
            for (int64_t c = 0; c < cg; c++) {                                                \
                const T xr = xi_[2 * c], xm = xi_[2 * c + 1];                                 \
                r0 += xr * wr[c * mg + m]; r0 -= xm * wi[c * mg + m];                         \
                i0 += xr * wi[c * mg + m]; i0 += xm * wr[c * mg + m];                         \
            }                                                                                 \
            ar[m] = r0; ai[m] = i0;                                                           \
        }                                                                                     \
        T *restrict yo = y + i * 2 * mg;                                                      \
        for (int64_t q = 0; q < mg; q++) { yo[2 * q] = ar[q]; yo[2 * q + 1] = ai[q]; }        \
    }                                                                                         \
}                                                                                             \
ATTR static void fftrow_dft_##SUF(const T *restrict a, const T *restrict fr,                  \
        const T *restrict fi, T *restrict s, int64_t taps, int64_t nb, int cplx)            \
{                                                                                             \
    typedef convt_v_##SUF V;                                                                  \
    enum { NV = CONVT_FFTROW_BLOCK * sizeof(T) / VB };                                        \
    const int64_t ln = VB / sizeof(T), n = nb * CONVT_FFTROW_BLOCK;                           \
    const int64_t step = (cplx ? 2 : 1) * CONVT_FFTROW_BLOCK;                                 \
    T *restrict s0 = s, *restrict s1 = s + n, *restrict s2 = s + 2 * n,                     \
      *restrict s3 = s + 3 * n;                                                               \
    for (int64_t b = 0; b < nb; b++) {                                                        \
        const T *restrict ab = a + b * taps * step;                                           \
        const int64_t j = b * CONVT_FFTROW_BLOCK;                                             \
        V p[NV], q[NV], r[NV], t[NV];                                                         \
        for (int v = 0; v < NV; v++) { p[v] = (V){0}; q[v] = (V){0}; r[v] = (V){0}; t[v] = (V){0}; } \
        if (cplx) {                                                                           \
            /* P = sum c Re A, Q = sum d Im A, R = sum c Im A, S = sum d Re A; then          \
             * F[f] A = (P - Q) + i (R + S), conj(F[f]) A = (P + Q) + i (R - S) */          \
            for (int64_t k = 0; k < taps; k++) {                                              \
                const T c = fr[k], d = fi[k];                                                 \
                for (int v = 0; v < NV; v++) {                                                \
                    const V re = CONVT_FFTROW_LD(V, ab + k * step + v * ln);                 \
                    const V im = CONVT_FFTROW_LD(V, ab + k * step + CONVT_FFTROW_BLOCK + v * ln); \
                    p[v] += c * re; q[v] += d * im; r[v] += c * im; t[v] += d * re;           \
                }                                                                             \
            }                                                                                 \
            for (int v = 0; v < NV; v++) {                                                    \
                CONVT_FFTROW_ST(s0 + j + v * ln, p[v] - q[v]);                                \
                CONVT_FFTROW_ST(s1 + j + v * ln, r[v] + t[v]);                                \
                CONVT_FFTROW_ST(s2 + j + v * ln, p[v] + q[v]);                                \
                CONVT_FFTROW_ST(s3 + j + v * ln, r[v] - t[v]);                                \
            }                                                                                 \
        } else {                                                                              \
            for (int64_t k = 0; k < taps; k++) {                                              \
                const T c = fr[k], d = fi[k];                                                 \
                for (int v = 0; v < NV; v++) {                                                \
                    const V re = CONVT_FFTROW_LD(V, ab + k * step + v * ln);                 \
                    p[v] += c * re; q[v] += d * re;                                           \
                }                                                                             \
            }                                                                                 \
            for (int v = 0; v < NV; v++) {                                                    \
                CONVT_FFTROW_ST(s0 + j + v * ln, p[v]);                                       \
                CONVT_FFTROW_ST(s1 + j + v * ln, q[v]);                                       \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
}

CONVT_FFTROW_BODIES(float, f_c, , 16)
CONVT_FFTROW_BODIES(double, d_c, , 16)
#if CONVT_HAVE_AVX2_PATH
#define CONVT_FFTROW_AVX2 __attribute__((target("avx2,fma")))
#define CONVT_FFTROW_AVX512 \
    __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,prefer-vector-width=512")))
CONVT_FFTROW_BODIES(float, f_avx2, CONVT_FFTROW_AVX2, 32)
CONVT_FFTROW_BODIES(double, d_avx2, CONVT_FFTROW_AVX2, 32)
CONVT_FFTROW_BODIES(float, f_avx512, CONVT_FFTROW_AVX512, 64)
CONVT_FFTROW_BODIES(double, d_avx512, CONVT_FFTROW_AVX512, 64)
#define CONVT_FFTROW_PICK(SUF_T, NAME, ARGS) do {                                             \
        if (isa >= CONVT_ISA_AVX512 && NAME##_wide) NAME##_##SUF_T##_avx512 ARGS;             \
        else if (isa >= CONVT_ISA_AVX2) NAME##_##SUF_T##_avx2 ARGS;                           \
        else NAME##_##SUF_T##_c ARGS; } while (0)
#else
#define CONVT_FFTROW_PICK(SUF_T, NAME, ARGS) do { (void) isa; NAME##_##SUF_T##_c ARGS; } while (0)
#endif

/* The contraction's rows are short (C_out/G outputs): 512-bit vectors left most of them to
 * the scalar tail, measured 1.8x slower than 256-bit on Zen 4; the DFT's packed blocks are
 * full vectors. */
enum { fftrow_contract_wide = 0, fftrow_dft_wide = 1 };

static inline void fftrow_contract_f(int isa, const float *x, const float *wr, const float *wi,
        float *y, int64_t items, int64_t cg, int64_t mg, int64_t xs, float *acc)
{ CONVT_FFTROW_PICK(f, fftrow_contract, (x, wr, wi, y, items, cg, mg, xs, acc)); }
static inline void fftrow_contract_d(int isa, const double *x, const double *wr,
        const double *wi, double *y, int64_t items, int64_t cg, int64_t mg, int64_t xs,
        double *acc)
{ CONVT_FFTROW_PICK(d, fftrow_contract, (x, wr, wi, y, items, cg, mg, xs, acc)); }
static inline void fftrow_dft_f(int isa, const float *a, const float *fr, const float *fi,
        float *s, int64_t taps, int64_t nb, int cplx)
{ CONVT_FFTROW_PICK(f, fftrow_dft, (a, fr, fi, s, taps, nb, cplx)); }
static inline void fftrow_dft_d(int isa, const double *a, const double *fr, const double *fi,
        double *s, int64_t taps, int64_t nb, int cplx)
{ CONVT_FFTROW_PICK(d, fftrow_dft, (a, fr, fi, s, taps, nb, cplx)); }

#endif /* CONVT_FFTROW_H */
