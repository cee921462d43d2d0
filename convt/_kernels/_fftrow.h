/* Inner loops of the FFT backend's per-bin contraction (_fftmul.pyx), one body compiled for
 * each ISA level of _isa.h: the portable build is SSE2 only, and these loops (unit-stride
 * streams over output channels) run several times faster in 256- or 512-bit vectors with FMA.
 * GCC vectorises the plain C bodies under each target attribute; a body's result depends on
 * the level (FMA contraction), never on the thread count.
 *
 * fftrow_contract: one bin row's items, y[i] = x[i] @ W (complex, W split: wr, wi, (Cg, Mg)).
 * fftrow_dft: one row's kernel spectrum W = sum_k F[f, k] A[k] (and, cplx, its mirror
 * row's, conj(F[f, k]) A[k]) from taps lines of A; see _fftmul.pyx.
 * fftrow_packw: A's packed rows straight from BLOCK weights (fft_pack_weights): their taps
 * gathered into the centred sums S_t = h[c + t] + h[c - t], D_t = h[c + t] - h[c - t] per
 * last-axis tap, then (cplx, 2-D) the last axis' half DFT of each, E_t = sum_q F[f1, q] S_t[q]
 * and O_t likewise, into the rows of every last-axis bin f1; no polyphase kernel, spectra
 * array or pack pass in between. */
#ifndef CONVT_FFTROW_H
#define CONVT_FFTROW_H

#include <stdint.h>
#include "_isa.h"

/* fftrow_dft reads A packed by _fftmul.pyx: per row rr, blocks of this many weights, each
 * block holding every term's E and O (real then imaginary parts): one contiguous stream per
 * row. With A's natural layout the taps' lines lie a multiple of 4 KiB apart when
 * C_in/G * C_out/G is a multiple of 1024, and their loads would collide in L1 sets.
 *
 * The taps are centred (c = (Q - 1) / 2, Q made odd with a zero tap): with theta = 2 pi f / L0,
 * sum_k e^(-i theta k) A[k] = e^(-i theta c) (U - i V), U = sum_t cos(theta t) E_t,
 * V = sum_t sin(theta t) O_t, E_t = A[c + t] + A[c - t], O_t = A[c + t] - A[c - t] (E_0 = A[c],
 * O_0 = 0): real coefficients, half the multiply-adds of the plain sum, and row L0 - f is
 * e^(+i theta c) (U + i V) from the same sums. The phase goes on the row's input instead
 * (C_in/G values, not C_in/G * C_out/G). Two rows f (a, b) share every load. The eight output
 * rows lie n reals apart in s, n a block more than the weights (not a multiple of 4 KiB: a
 * load after a store 4 KiB apart stalls). Both effects: docs/fft.md, "Kernel spectra". */
#define CONVT_FFTROW_BLOCK 16

/* Loads and stores of GCC vector types at any alignment (vmovups). */
#define CONVT_FFTROW_LD(V, p) ({ V v_; __builtin_memcpy(&v_, (p), sizeof v_); v_; })
#define CONVT_FFTROW_ST(p, v) do { __typeof__(v) w_ = (v); __builtin_memcpy((p), &w_, sizeof w_); } while (0)

/* T the real type, SUF the name suffix, ATTR the target attribute, VB the vector bytes. The
 * loops keep their sums in vector registers over the reduction (c, or the taps k) and store
 * each once: written as plain loops, GCC keeps them in memory (a load and a store per FMA). */
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
ATTR static void fftrow_dft_##SUF(const T *restrict a, const T *restrict ca,                  \
        const T *restrict sa, const T *restrict cb, const T *restrict sb, T *restrict s,      \
        int64_t terms, int64_t nb, int64_t n, int cplx)                                       \
{                                                                                             \
    typedef convt_v_##SUF V;                                                                  \
    enum { NV = CONVT_FFTROW_BLOCK * sizeof(T) / VB, B = CONVT_FFTROW_BLOCK };                \
    const int64_t ln = VB / sizeof(T);                                                        \
    const int64_t step = (cplx ? 4 : 2) * B;    /* one term: E (re, im), O (re, im) */       \
    for (int64_t b = 0; b < nb; b++) {                                                        \
        const T *restrict ab = a + b * terms * step;                                          \
        const int64_t j = b * B;                                                              \
        for (int v = 0; v < NV; v++) {                                                        \
            const int64_t o = v * ln;                                                         \
            if (cplx) {                                                                       \
                V ura = {0}, uia = {0}, vra = {0}, via = {0};                                 \
                V urb = {0}, uib = {0}, vrb = {0}, vib = {0};                                 \
                for (int64_t t = 0; t < terms; t++) {                                         \
                    const T *restrict e = ab + t * step + o;                                  \
                    const V er = CONVT_FFTROW_LD(V, e), ei = CONVT_FFTROW_LD(V, e + B);      \
                    const V or_ = CONVT_FFTROW_LD(V, e + 2 * B);                             \
                    const V oi = CONVT_FFTROW_LD(V, e + 3 * B);                              \
                    ura += ca[t] * er; uia += ca[t] * ei; vra += sa[t] * or_; via += sa[t] * oi; \
                    urb += cb[t] * er; uib += cb[t] * ei; vrb += sb[t] * or_; vib += sb[t] * oi; \
                }                                                                             \
                /* rows f and L0 - f of both (a, b), before the phase: U -+ i V */          \
                CONVT_FFTROW_ST(s + j + o, ura + via);                                        \
                CONVT_FFTROW_ST(s + n + j + o, uia - vra);                                    \
                CONVT_FFTROW_ST(s + 2 * n + j + o, ura - via);                                \
                CONVT_FFTROW_ST(s + 3 * n + j + o, uia + vra);                                \
                CONVT_FFTROW_ST(s + 4 * n + j + o, urb + vib);                                \
                CONVT_FFTROW_ST(s + 5 * n + j + o, uib - vrb);                                \
                CONVT_FFTROW_ST(s + 6 * n + j + o, urb - vib);                                \
                CONVT_FFTROW_ST(s + 7 * n + j + o, uib + vrb);                                \
            } else {                                                                          \
                V ua = {0}, va = {0}, ub = {0}, vb = {0};                                     \
                for (int64_t t = 0; t < terms; t++) {                                         \
                    const T *restrict e = ab + t * step + o;                                  \
                    const V er = CONVT_FFTROW_LD(V, e), or_ = CONVT_FFTROW_LD(V, e + B);     \
                    ua += ca[t] * er; va += sa[t] * or_;                                      \
                    ub += cb[t] * er; vb += sb[t] * or_;                                      \
                }                                                                             \
                CONVT_FFTROW_ST(s + j + o, ua);                                               \
                CONVT_FFTROW_ST(s + n + j + o, -va);                                          \
                CONVT_FFTROW_ST(s + 4 * n + j + o, ub);                                       \
                CONVT_FFTROW_ST(s + 5 * n + j + o, -vb);                                      \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
}                                                                                             \
ATTR static void fftrow_packw_##SUF(const T *restrict w, int64_t ws, int64_t nw,              \
        const int64_t *restrict hi, const int64_t *restrict lo, const int64_t *restrict i1,   \
        int64_t taps1, int64_t terms, const T *restrict fr, const T *restrict fi,             \
        int64_t bins, int cplx, T *restrict sd, T *restrict out, int64_t ostride)             \
{                                                                                             \
    typedef convt_v_##SUF V;                                                                  \
    enum { NV = CONVT_FFTROW_BLOCK * sizeof(T) / VB, B = CONVT_FFTROW_BLOCK };                \
    const int64_t ln = VB / sizeof(T);                                                        \
    T *restrict ss = sd, *restrict dd = sd + terms * taps1 * B;                               \
    /* S and D of each term and last-axis tap, weights innermost: a weight's taps are read   \
     * in order (contiguous), written 16 apart */                                             \
    for (int64_t j = 0; j < B; j++) {                                                         \
        const T *restrict wj = w + j * ws;                                                    \
        for (int64_t t = 0; t < terms; t++) {                                                 \
            const int64_t h = j < nw ? hi[t] : -1, l = j < nw && t > 0 ? lo[t] : -1;          \
            T *restrict so = ss + t * taps1 * B + j, *restrict dout = dd + t * taps1 * B + j; \
            for (int64_t q = 0; q < taps1; q++) {                                             \
                const int64_t k = i1[q];                                                      \
                const T a = h >= 0 && k >= 0 ? wj[h + k] : 0;                                 \
                const T b = l >= 0 && k >= 0 ? wj[l + k] : 0;                                 \
                so[q * B] = a + b;                                                            \
                dout[q * B] = t > 0 ? a - b : 0;                                              \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    if (!cplx) {    /* 1-D: A is the real kernel, E then O per term */                        \
        for (int64_t t = 0; t < terms; t++)                                                   \
            for (int64_t j = 0; j < B; j++) {                                                 \
                out[t * 2 * B + j] = ss[t * B + j];                                           \
                out[t * 2 * B + B + j] = dd[t * B + j];                                       \
            }                                                                                 \
        return;                                                                               \
    }                                                                                         \
    /* the last axis' taps centred too (c1 = terms1 - 1): P_u = X[c1 + u] + X[c1 - u],       \
     * M_u = X[c1 + u] - X[c1 - u] of X = S, D; sum_q e^(-i th q) X[q] = e^(-i th c1) (U - i V), \
     * U = sum_u cos(th u) P_u, V = sum_u sin(th u) M_u: the rows get U - i V, and the         \
     * contraction turns their input by e^(-i th c1) too (_fftmul.pyx) */                    \
    const int64_t terms1 = taps1 / 2 + 1, c1 = terms1 - 1;                                   \
    T *restrict pm = sd + 2 * terms * taps1 * B;    /* (terms, terms1, SP SM DP DM, B) */     \
    for (int64_t t = 0; t < terms; t++)                                                       \
        for (int64_t u = 0; u < terms1; u++) {                                                \
            const T *restrict sh = ss + (t * taps1 + c1 + u) * B;                             \
            const T *restrict sl = ss + (t * taps1 + c1 - u) * B;                             \
            const T *restrict dh = dd + (t * taps1 + c1 + u) * B;                             \
            const T *restrict dl = dd + (t * taps1 + c1 - u) * B;                             \
            const int in = c1 + u < taps1;                                                    \
            T *restrict q4 = pm + (t * terms1 + u) * 4 * B;                                   \
            for (int64_t j = 0; j < B; j++) {                                                 \
                const T a = in ? sh[j] : 0, b = in ? dh[j] : 0;                               \
                q4[j] = u ? a + sl[j] : a;                                                    \
                q4[B + j] = u ? a - sl[j] : 0;                                                \
                q4[2 * B + j] = u ? b + dl[j] : b;                                            \
                q4[3 * B + j] = u ? b - dl[j] : 0;                                            \
            }                                                                                 \
        }                                                                                     \
    for (int64_t f = 0; f < bins; f++) {                                                      \
        const T *restrict cr = fr + f * terms1, *restrict ci = fi + f * terms1;               \
        T *restrict o = out + f * ostride;                                                    \
        for (int64_t t = 0; t < terms; t++)                                                   \
            for (int v = 0; v < NV; v++) {                                                    \
                V er = {0}, ei = {0}, or_ = {0}, oi = {0};                                    \
                const T *restrict p0 = pm + t * terms1 * 4 * B + v * ln;                      \
                for (int64_t u = 0; u < terms1; u++) {                                        \
                    const T *restrict q4 = p0 + u * 4 * B;                                    \
                    er += cr[u] * CONVT_FFTROW_LD(V, q4);                                     \
                    ei -= ci[u] * CONVT_FFTROW_LD(V, q4 + B);                                 \
                    or_ += cr[u] * CONVT_FFTROW_LD(V, q4 + 2 * B);                            \
                    oi -= ci[u] * CONVT_FFTROW_LD(V, q4 + 3 * B);                             \
                }                                                                             \
                T *restrict ot = o + t * 4 * B + v * ln;                                      \
                CONVT_FFTROW_ST(ot, er); CONVT_FFTROW_ST(ot + B, ei);                         \
                CONVT_FFTROW_ST(ot + 2 * B, or_); CONVT_FFTROW_ST(ot + 3 * B, oi);            \
            }                                                                                 \
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

/* The contraction's rows are short (C_out/G outputs): 512-bit vectors leave most of them to
 * the scalar tail, slower than 256-bit ones (docs/performance.md, "Figures moved out of code
 * comments"); the DFT's packed blocks are full vectors. */
enum { fftrow_contract_wide = 0, fftrow_dft_wide = 1, fftrow_packw_wide = 1 };

static inline void fftrow_contract_f(int isa, const float *x, const float *wr, const float *wi,
        float *y, int64_t items, int64_t cg, int64_t mg, int64_t xs, float *acc)
{ CONVT_FFTROW_PICK(f, fftrow_contract, (x, wr, wi, y, items, cg, mg, xs, acc)); }
static inline void fftrow_contract_d(int isa, const double *x, const double *wr,
        const double *wi, double *y, int64_t items, int64_t cg, int64_t mg, int64_t xs,
        double *acc)
{ CONVT_FFTROW_PICK(d, fftrow_contract, (x, wr, wi, y, items, cg, mg, xs, acc)); }
static inline void fftrow_dft_f(int isa, const float *a, const float *ca, const float *sa,
        const float *cb, const float *sb, float *s, int64_t terms, int64_t nb, int64_t n,
        int cplx)
{ CONVT_FFTROW_PICK(f, fftrow_dft, (a, ca, sa, cb, sb, s, terms, nb, n, cplx)); }
static inline void fftrow_dft_d(int isa, const double *a, const double *ca, const double *sa,
        const double *cb, const double *sb, double *s, int64_t terms, int64_t nb, int64_t n,
        int cplx)
{ CONVT_FFTROW_PICK(d, fftrow_dft, (a, ca, sa, cb, sb, s, terms, nb, n, cplx)); }

static inline void fftrow_packw_f(int isa, const float *w, int64_t ws, int64_t nw,
        const int64_t *hi, const int64_t *lo, const int64_t *i1, int64_t taps1, int64_t terms,
        const float *fr, const float *fi, int64_t bins, int cplx, float *sd, float *out,
        int64_t ostride)
{ CONVT_FFTROW_PICK(f, fftrow_packw, (w, ws, nw, hi, lo, i1, taps1, terms, fr, fi, bins, cplx,
                                      sd, out, ostride)); }
static inline void fftrow_packw_d(int isa, const double *w, int64_t ws, int64_t nw,
        const int64_t *hi, const int64_t *lo, const int64_t *i1, int64_t taps1, int64_t terms,
        const double *fr, const double *fi, int64_t bins, int cplx, double *sd, double *out,
        int64_t ostride)
{ CONVT_FFTROW_PICK(d, fftrow_packw, (w, ws, nw, hi, lo, i1, taps1, terms, fr, fi, bins, cplx,
                                      sd, out, ostride)); }

#endif /* CONVT_FFTROW_H */
