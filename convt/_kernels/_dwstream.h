/* The streamed stores of the depthwise row kernels (_dwkernel.h): a row's stream kind, the
 * 16-byte parts of a kind-1 row, the traffic probe (docs/scripts/depthwise_traffic.py's floor)
 * and the fence after a thread's streamed stores. */
#ifndef CONVT_DWSTREAM_H
#define CONVT_DWSTREAM_H

#include <stdint.h>
#include <string.h>

#include "_isa.h"

/* The stream kind of a row whose whole vectors span [p, e) (CONVT_DW_ST: 0 when not
 * streamed), and the whole lines inside. */
static inline int convt_dw_stream_kind(int stream, const void* p, const void* e,
                                       uintptr_t* sl, uintptr_t* sh)
{
    *sl = ((uintptr_t) p + 63) & ~(uintptr_t) 63;
    *sh = (uintptr_t) e & ~(uintptr_t) 63;
    if (!stream || (uintptr_t) p % 16 != 0)
        return 0;
    return (uintptr_t) p % 64 == 0 ? 2 : 1;
}

#if CONVT_HAVE_AVX2_PATH

/* One 16-byte part at p of a kind-1 row: streamed inside [sl, sh), else stored as usual. */
#define CONVT_DW_PART(STREAM128, STORE128, P, V, SL, SH)                                 \
    do {                                                                                 \
        if ((uintptr_t) (P) >= (SL) && (uintptr_t) (P) < (SH))                           \
            STREAM128(P, V);                                                             \
        else                                                                             \
            STORE128(P, V);                                                              \
    } while (0)

/* CONVT_DW_ST's kind-1 stores, per vector type. */
__attribute__((target("avx2,fma")))
static inline void convt_dw_parts_ps256(float* p, __m256 a, uintptr_t sl, uintptr_t sh)
{
    CONVT_DW_PART(_mm_stream_ps, _mm_storeu_ps, p, _mm256_castps256_ps128(a), sl, sh);
    CONVT_DW_PART(_mm_stream_ps, _mm_storeu_ps, p + 4, _mm256_extractf128_ps(a, 1), sl, sh);
}

__attribute__((target("avx2,fma")))
static inline void convt_dw_parts_pd256(double* p, __m256d a, uintptr_t sl, uintptr_t sh)
{
    CONVT_DW_PART(_mm_stream_pd, _mm_storeu_pd, p, _mm256_castpd256_pd128(a), sl, sh);
    CONVT_DW_PART(_mm_stream_pd, _mm_storeu_pd, p + 2, _mm256_extractf128_pd(a, 1), sl, sh);
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")))
static inline void convt_dw_parts_ps512(float* p, __m512 a, uintptr_t sl, uintptr_t sh)
{
    CONVT_DW_PART(_mm_stream_ps, _mm_storeu_ps, p, _mm512_castps512_ps128(a), sl, sh);
    CONVT_DW_PART(_mm_stream_ps, _mm_storeu_ps, p + 4, _mm512_extractf32x4_ps(a, 1), sl, sh);
    CONVT_DW_PART(_mm_stream_ps, _mm_storeu_ps, p + 8, _mm512_extractf32x4_ps(a, 2), sl, sh);
    CONVT_DW_PART(_mm_stream_ps, _mm_storeu_ps, p + 12, _mm512_extractf32x4_ps(a, 3), sl, sh);
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")))
static inline void convt_dw_parts_pd512(double* p, __m512d a, uintptr_t sl, uintptr_t sh)
{
    CONVT_DW_PART(_mm_stream_pd, _mm_storeu_pd, p, _mm512_castpd512_pd128(a), sl, sh);
    CONVT_DW_PART(_mm_stream_pd, _mm_storeu_pd, p + 2, _mm512_extractf64x2_pd(a, 1), sl, sh);
    CONVT_DW_PART(_mm_stream_pd, _mm_storeu_pd, p + 4, _mm512_extractf64x2_pd(a, 2), sl, sh);
    CONVT_DW_PART(_mm_stream_pd, _mm_storeu_pd, p + 6, _mm512_extractf64x2_pd(a, 3), sl, sh);
}

/* NV vectors from q, every phase inside its interior: computed, interleaved, stored. */
#define CONVT_DW_BLOCK(T, V, SET1, LOADU, STOREU, STREAM, FMADD, ZIPLO, ZIPHI, LANES, NV)  \
    do {                                                                                 \
        CONVT_DW_VEC(T, V, SET1, LOADU, FMADD, LANES, NV, a_, 0, q);                     \
        if (s2 == 1) {                                                                   \
            for (i_ = 0; i_ < (NV); i_++)                                                \
                CONVT_DW_ST(STREAM, STOREU, y + q + i_ * LANES, a_[i_]);                 \
        } else {                                                                         \
            CONVT_DW_VEC(T, V, SET1, LOADU, FMADD, LANES, NV, b_, 1, q);                 \
            for (i_ = 0; i_ < (NV); i_++) {                                              \
                CONVT_DW_ZIP(ZIPLO, ZIPHI, a_[i_], b_[i_], l_);                          \
                CONVT_DW_ST(STREAM, STOREU, y + 2 * (q + i_ * LANES), a_[i_]);           \
                CONVT_DW_ST(STREAM, STOREU, y + 2 * (q + i_ * LANES) + LANES, b_[i_]);   \
            }                                                                            \
        }                                                                                \
    } while (0)

/* One vector of phase C at q: every tap on every lane inside the phase's interior, masked
 * taps elsewhere (the same sums); Z = how many of its lanes are stored (q + j < qe[C]). */
#define CONVT_DW_ONE(T, V, SET1, LOADU, FMADD, LANES, MT, MKMASK, MFMA, ACC, C, Z)      \
    do {                                                                                 \
        if (q >= lo[C] && q + LANES <= hi[C] && q + LANES <= qe[C])                      \
            CONVT_DW_VEC(T, V, SET1, LOADU, FMADD, LANES, 1, ACC, C, q);                 \
        else                                                                             \
            CONVT_DW_MVEC(T, V, SET1, LANES, MT, MKMASK, MFMA, ACC[0], C, q);             \
        Z = convt_dw_clamp(qe[C] - q, LANES);                                            \
    } while (0)

/* The kind-1 store of vector A (CONVT_DW_ST) for its type, inside a row kernel. */
#define CONVT_DW_NT16(P, A)                                                              \
    _Generic((A), __m256: convt_dw_parts_ps256, __m256d: convt_dw_parts_pd256,          \
             __m512: convt_dw_parts_ps512, __m512d: convt_dw_parts_pd512)(P, A, sl_, sh_)

__attribute__((target("avx2")))
static void convt_dw_probe_avx2(const float* src, float* dst, int64_t n, int64_t r)
{
    int64_t i, k;
    for (i = 0; i < n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i);
        for (k = 0; k < r; k++)
            _mm256_stream_ps(dst + (i * r + 8 * k), v);
    }
}

#endif /* CONVT_HAVE_AVX2_PATH */

/* The kernel's memory traffic with no arithmetic (docs/scripts/depthwise_traffic.py's floor):
 * each of the n / 8 vectors of 8 values of src (n a multiple of 8) stored r times in a row
 * into dst (8 r values a vector), streamed when dst is 64-byte aligned and the level isa has
 * AVX2 (the caller fences), with ordinary stores else. */
static inline void convt_dw_probe(int isa, const float* src, float* dst, int64_t n, int64_t r)
{
    int64_t i, k;
#if CONVT_HAVE_AVX2_PATH
    if ((uintptr_t) dst % 64 == 0 && isa >= 1) {
        convt_dw_probe_avx2(src, dst, n, r);
        return;
    }
#endif
    for (i = 0; i < n; i += 8)
        for (k = 0; k < r; k++)
            memcpy(dst + (i * r + 8 * k), src + i, 8 * sizeof(float));
}

/* Orders this thread's streamed stores before whatever reads y next (the caller runs it once
 * per thread after its last row). */
static inline void convt_dw_fence(void)
{
#if CONVT_HAVE_AVX2_PATH
    _mm_sfence();
#endif
}

#endif /* CONVT_DWSTREAM_H */
