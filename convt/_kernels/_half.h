/* 16-bit storage <-> float32 compute, converted where the kernels read and write.
 *
 * float16 (IEEE binary16) and bfloat16 are storage types: the kernels compute in float32
 * (docs/precision.md), so inputs are widened on the way in (exact, both types) and results
 * rounded once on the way out, to nearest even. The results must be the bits NumPy's and
 * ml_dtypes' astype give, which this header reproduces lane by lane, NaNs included:
 *
 * - float16 -> float32: exact; NaN keeps its payload and its signaling bit (NumPy's
 *   npy_halfbits_to_floatbits, numpy/_core/src/npymath/halffloat.cpp). F16C's vcvtph2ps
 *   quiets a signaling NaN, so lanes holding a NaN take the scalar body.
 * - float32 -> float16: round to nearest even, overflow to Inf, subnormals rounded (vcvtps2ph
 *   with _MM_FROUND_TO_NEAREST_INT gives these); a NaN keeps its sign and the top ten payload
 *   bits, made 0x7c01 when they are all zero, its quiet bit not forced (NumPy's
 *   npy_floatbits_to_halfbits): lanes holding a NaN take the scalar body.
 * - bfloat16 -> float32: the 16 bits shifted left (exact, NaN payload kept: ml_dtypes).
 * - float32 -> bfloat16: round to nearest even on the top 16 bits; a NaN becomes the quiet
 *   NaN 0x7fc0 with its sign (ml_dtypes' float -> bfloat16, the Eigen rounding it derives
 *   from: eigen/Eigen/src/Core/arch/Default/BFloat16.h, float_to_bfloat16_rtne). Not
 *   AVX512-BF16's vcvtneps2bf16, which flushes float32 subnormals to zero.
 *
 * kind: 0 float16, 1 bfloat16. isa: the process's level (_isa.h); the vector bodies need F16C
 * besides AVX2 (convt_f16c: every AVX2 CPU shipped has it, but it is its own CPUID bit).
 */
#ifndef CONVT_HALF_H
#define CONVT_HALF_H

#include <stdint.h>
#include <string.h>

#include "_isa.h"
#include "_transpose.h"

#define CONVT_F16 0
#define CONVT_BF16 1

static inline uint32_t convt_f32_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static inline float convt_bits_f32(uint32_t u)
{
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* float16 bits -> float32, exact (NaN payload and signaling bit kept) */
static inline float convt_h2f(uint16_t h)
{
    uint32_t sgn = (uint32_t) (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return convt_bits_f32(sgn | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0)
            return convt_bits_f32(sgn);
        /* subnormal m * 2^-24: normalised, one exponent step per shift */
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        return convt_bits_f32(sgn | (e << 23) | ((m & 0x3ffu) << 13));
    }
    return convt_bits_f32(sgn | ((e + 112) << 23) | (m << 13));
}

/* float32 -> float16 bits, round to nearest even (NumPy's rounding and NaN rule) */
static inline uint16_t convt_f2h(float v)
{
    uint32_t f = convt_f32_bits(v), sgn = (f >> 16) & 0x8000u, a = f & 0x7fffffffu;
    uint32_t e = a >> 23, sig, q, rem, half;
    int shift;
    if (a > 0x7f800000u) {   /* NaN */
        q = 0x7c00u + ((a & 0x7fffffu) >> 13);
        return (uint16_t) (sgn | (q == 0x7c00u ? 0x7c01u : q));
    }
    if (a >= 0x47800000u)    /* Inf, or past float16's range before rounding */
        return (uint16_t) (sgn | 0x7c00u);
    if (e >= 113) {          /* a normal float16, or 65520 and up rounding to Inf */
        q = (a - (112u << 23)) >> 13;
        rem = a & 0x1fffu;
        q += rem > 0x1000u || (rem == 0x1000u && (q & 1u));
        return (uint16_t) (sgn | q);
    }
    if (e < 102)             /* below half the smallest subnormal (float32 subnormals too) */
        return (uint16_t) sgn;
    /* a float16 subnormal (or the smallest normal, by a carry): sig * 2^(e - 150) in units
     * of 2^-24 is sig >> (126 - e), rounded to nearest even */
    sig = 0x800000u | (a & 0x7fffffu);
    shift = 126 - (int) e;
    q = sig >> shift;
    rem = sig & ((1u << shift) - 1u);
    half = 1u << (shift - 1);
    q += rem > half || (rem == half && (q & 1u));
    return (uint16_t) (sgn | q);
}

static inline float convt_bf2f(uint16_t b)
{
    return convt_bits_f32((uint32_t) b << 16);
}

/* float32 -> bfloat16 bits, round to nearest even; NaN -> quiet 0x7fc0 with its sign */
static inline uint16_t convt_f2bf(float v)
{
    uint32_t u = convt_f32_bits(v);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t) (((u >> 16) & 0x8000u) | 0x7fc0u);
    return (uint16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float convt_widen1(int kind, uint16_t h)
{
    return kind == CONVT_BF16 ? convt_bf2f(h) : convt_h2f(h);
}

static inline uint16_t convt_narrow1(int kind, float v)
{
    return kind == CONVT_BF16 ? convt_f2bf(v) : convt_f2h(v);
}

/* 1 when this CPU has F16C (CPUID.1:ECX bit 29), which the vector float16 bodies use */
static inline int convt_f16c(void)
{
#if CONVT_HAVE_AVX2_PATH
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    return (c >> 29) & 1;
#else
    return 0;
#endif
}

#if CONVT_HAVE_AVX2_PATH
/* 8 halves -> 8 floats. NaN lanes (rare) through the scalar body, which keeps a float16
 * NaN's signaling bit as NumPy does. */
__attribute__((target("avx2,f16c")))
static inline __m256 convt_widen8_avx2(int kind, const uint16_t* src)
{
    __m128i h = _mm_loadu_si128((const __m128i*) src);
    if (kind == CONVT_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    /* a float16 NaN: (h & 0x7fff) > 0x7c00, a signed 16-bit compare of non-negatives */
    if (_mm_movemask_epi8(_mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)),
                                          _mm_set1_epi16(0x7c00)))) {
        float t[8];
        int j;
        for (j = 0; j < 8; j++)
            t[j] = convt_h2f(src[j]);
        return _mm256_loadu_ps(t);
    }
    return _mm256_cvtph_ps(h);
}

/* Whether any lane of v[0..n-1] is a NaN (one test before rounding a block of vectors with
 * convt_round8_avx2; a block holding one takes the scalar body, which quiets it as astype) */
__attribute__((target("avx2")))
static inline int convt_any_nan8(const __m256* v, int n)
{
    __m256 nan = _mm256_setzero_ps();
    int j;
    for (j = 0; j < n; j++)
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[j], v[j], _CMP_UNORD_Q));
    return !_mm256_testz_ps(nan, nan);
}

/* 8 floats, none a NaN, -> 8 halves at dst, rounded to nearest even */
__attribute__((target("avx2,f16c")))
static inline void convt_round8_avx2(int kind, __m256 v, uint16_t* dst)
{
    if (kind == CONVT_BF16) {
        __m256i u = _mm256_castps_si256(v);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(
            _mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)),
            _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))), 16);
        r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i*) dst, _mm256_castsi256_si128(r));
        return;
    }
    _mm_storeu_si128((__m128i*) dst, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* 8 floats -> 8 halves at dst, rounded to nearest even (NaN lanes: the scalar body) */
__attribute__((target("avx2,f16c")))
static inline void convt_narrow8_avx2(int kind, __m256 v, uint16_t* dst)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    if (!_mm256_testz_si256(nan, nan)) {
        float t[8];
        int j;
        _mm256_storeu_ps(t, v);
        for (j = 0; j < 8; j++)
            dst[j] = convt_narrow1(kind, t[j]);
        return;
    }
    convt_round8_avx2(kind, v, dst);
}

/* convt_t8c_f32 (_transpose.h) from 16-bit rows: dst[j*ldd + k] = widen(src[k*lds + j]),
 * with the exponent test (spare >= 0) on the widened values. */
__attribute__((target("avx2,f16c")))
static inline int convt_t8w_avx2(int kind, const uint16_t* src, int64_t lds, float* dst,
                                 int64_t ldd, int spare)
{
    __m256 r[8], c[8];
    __m256i top = _mm256_setzero_si256(), expo = _mm256_set1_epi32(0x7f800000);
    int j;
    for (j = 0; j < 8; j++) {
        r[j] = convt_widen8_avx2(kind, src + j * lds);
        top = _mm256_max_epi32(top, _mm256_and_si256(_mm256_castps_si256(r[j]), expo));
    }
    convt_tr8_f32(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], c);
    for (j = 0; j < 8; j++)
        _mm256_storeu_ps(dst + j * ldd, c[j]);
    if (spare < 0)
        return 0;
    return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(
        top, _mm256_set1_epi32((int) (((0xffu - (uint32_t) spare) << 23) - 1))))) != 0;
}
#endif

static inline int convt_t8w_generic(int kind, const uint16_t* src, int64_t lds, float* dst,
                             int64_t ldd, int spare)
{
    int64_t j, k;
    uint32_t bad = 0, lim = (0xffu - (uint32_t) spare) << 23;
    float v;
    for (j = 0; j < 8; j++)
        for (k = 0; k < 8; k++) {
            v = convt_widen1(kind, src[k * lds + j]);
            dst[j * ldd + k] = v;
            bad |= spare >= 0 && (convt_f32_bits(v) & 0x7f800000u) >= lim;
        }
    return bad != 0;
}

/* isa: the level for float16 already lowered to 0 without F16C (the callers' convt_f16c) */
static inline int convt_t8w(int isa, int kind, const uint16_t* src, int64_t lds, float* dst,
                            int64_t ldd, int spare)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 1)
        return convt_t8w_avx2(kind, src, lds, dst, ldd, spare);
#endif
    return convt_t8w_generic(kind, src, lds, dst, ldd, spare);
}

#if CONVT_HAVE_AVX2_PATH
__attribute__((target("avx2,f16c")))
static inline void convt_widen_avx2(int kind, const uint16_t* src, float* dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, convt_widen8_avx2(kind, src + i));
    for (; i < n; i++)
        dst[i] = convt_widen1(kind, src[i]);
}

__attribute__((target("avx2,f16c")))
static inline void convt_narrow_avx2(int kind, const float* src, uint16_t* dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        convt_narrow8_avx2(kind, _mm256_loadu_ps(src + i), dst + i);
    for (; i < n; i++)
        dst[i] = convt_narrow1(kind, src[i]);
}

/* The AVX-512 bodies: 16 values a step (narrowing float16 by vcvtps2ph zmm; bfloat16 by the
 * same shifts and round-to-nearest-even add as the AVX2 body, vpmovdw for the pack, exact as
 * the values are below 2^16 once shifted), NaN lanes through the scalar bodies; the tail by
 * the AVX2 body. The same bits: NumPy's and ml_dtypes' astype (tests/test_half.py, every
 * level). Widening float16 stays on the AVX2 body (vcvtph2ps ymm): with zmm it was no
 * faster on Zen 4, where the other conversions gain a little (docs/performance.md,
 * "AVX-512 bodies of the memory-bound kernels (2026-11-27, session 3, helper H2)"). */
#define CONVT_AVX512_TARGET "avx512f,avx512dq,avx512bw,avx512vl,avx2,f16c"

__attribute__((target(CONVT_AVX512_TARGET)))
static inline __m512 convt_widen16_bf16_avx512(const uint16_t* src)
{
    __m256i h = _mm256_loadu_si256((const __m256i*) src);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* float32 bits u rounded to nearest even at bit 16 (convt_f2bf's rule, 16 lanes): the
 * bfloat16 in the high 16 bits, for finite u (NaN kept apart by the callers) */
#define CONVT_RNE_BF16_512(u)                                                            \
    _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),                     \
                     _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)))

__attribute__((target(CONVT_AVX512_TARGET)))
static inline void convt_narrow16_avx512(int kind, __m512 v, uint16_t* dst)
{
    __m512i u = _mm512_castps_si512(v);
    if (_mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                _mm512_set1_epi32(0x7f800000))) {
        float t[16];
        int j;
        _mm512_storeu_ps(t, v);
        for (j = 0; j < 16; j++)
            dst[j] = convt_narrow1(kind, t[j]);
        return;
    }
    if (kind == CONVT_BF16) {
        __m512i r = _mm512_srli_epi32(CONVT_RNE_BF16_512(u), 16);
        _mm256_storeu_si256((__m256i*) dst, _mm512_cvtepi32_epi16(r));
        return;
    }
    _mm256_storeu_si256((__m256i*) dst, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

__attribute__((target(CONVT_AVX512_TARGET)))
static inline void convt_widen_avx512(int kind, const uint16_t* src, float* dst, int64_t n)
{
    int64_t i = 0;
    if (kind == CONVT_BF16)
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i, convt_widen16_bf16_avx512(src + i));
    convt_widen_avx2(kind, src + i, dst + i, n - i);
}

__attribute__((target(CONVT_AVX512_TARGET)))
static inline void convt_narrow_avx512(int kind, const float* src, uint16_t* dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        convt_narrow16_avx512(kind, _mm512_loadu_ps(src + i), dst + i);
    convt_narrow_avx2(kind, src + i, dst + i, n - i);
}
#endif

/* dst[i] = widen(src[i]), i < n */
static inline void convt_widen(int isa, int kind, const uint16_t* src, float* dst, int64_t n)
{
    int64_t i;
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 2) {
        convt_widen_avx512(kind, src, dst, n);
        return;
    }
    if (isa >= 1) {
        convt_widen_avx2(kind, src, dst, n);
        return;
    }
#endif
    for (i = 0; i < n; i++)
        dst[i] = convt_widen1(kind, src[i]);
}

/* dst[i] = narrow(src[i]), i < n */
static inline void convt_narrow(int isa, int kind, const float* src, uint16_t* dst, int64_t n)
{
    int64_t i;
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 2) {
        convt_narrow_avx512(kind, src, dst, n);
        return;
    }
    if (isa >= 1) {
        convt_narrow_avx2(kind, src, dst, n);
        return;
    }
#endif
    for (i = 0; i < n; i++)
        dst[i] = convt_narrow1(kind, src[i]);
}

/* The Winograd late sums' taps (_packkernel.h's convt_taps_f32) from 16-bit weights, widened
 * as they are read: one input channel's taps, tap k of output channel m (src[m * KT + k]) to
 * dst[k * line + (m / 16) * ps + m % 16], Mg % 16 == 0. Returns 1 when a widened value's
 * exponent field is at least (0xff - spare), else 0. The AVX2 body widens 8 rows of 8 taps
 * in registers and transposes them (convt_taps_f32's blocks and stores: both halves of each
 * 64-byte line, streamed past the caches when stream; the caller fences). */
static inline int convt_taps_h16_generic(int kind, const uint16_t* src, int64_t Mg, int64_t KT,
                                  float* dst, int64_t line, int64_t ps, int spare)
{
    int64_t m, k;
    uint32_t bad = 0, lim = (0xffu - (uint32_t) spare) << 23;
    for (m = 0; m < Mg; m++)
        for (k = 0; k < KT; k++) {
            float v = convt_widen1(kind, src[m * KT + k]);
            bad |= (convt_f32_bits(v) & 0x7f800000u) >= lim;
            dst[k * line + (m / 16) * ps + m % 16] = v;
        }
    return bad != 0;
}

#if CONVT_HAVE_AVX2_PATH
__attribute__((target("avx2,f16c")))
static inline void convt_wtr8_avx2(int kind, const uint16_t* src, int64_t lds, __m256* c)
{
    /* c[j] = (widen(src[0*lds + j]), ..., widen(src[7*lds + j])) for j < 8 */
    __m256 r[8];
    int j;
    for (j = 0; j < 8; j++)
        r[j] = convt_widen8_avx2(kind, src + j * lds);
    convt_tr8_f32(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], c);
}

__attribute__((target("avx2,f16c")))
static inline int convt_taps_h16_avx2(int kind, const uint16_t* src, int64_t Mg, int64_t KT,
                               float* dst, int64_t line, int64_t ps, int spare, int stream)
{
    __m256 c[8], e[8];
    __m256i expo = _mm256_set1_epi32(0x7f800000), below = _mm256_set1_epi32(
        (int) (((0xffu - (uint32_t) spare) << 23) - 1)), bad = _mm256_setzero_si256();
    int64_t m, k, j, K8 = KT - KT % 8;
    uint32_t tail = 0, lim = (0xffu - (uint32_t) spare) << 23;
    for (m = 0; m < Mg; m += 16) {
        for (k = K8; k < KT; k++)
            for (j = 0; j < 16; j++) {
                float v = convt_widen1(kind, src[(m + j) * KT + k]);
                tail |= (convt_f32_bits(v) & 0x7f800000u) >= lim;
                dst[k * line + (m / 16) * ps + j] = v;
            }
        for (k = 0; k < K8; k += 8) {
            float* d = dst + k * line + (m / 16) * ps;
            convt_wtr8_avx2(kind, src + m * KT + k, KT, c);
            convt_wtr8_avx2(kind, src + (m + 8) * KT + k, KT, e);
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

static inline int convt_taps_h16(int isa, int kind, const uint16_t* src, int64_t Mg,
                                 int64_t KT, float* dst, int64_t line, int64_t ps, int spare,
                                 int stream)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 1)
        return convt_taps_h16_avx2(kind, src, Mg, KT, dst, line, ps, spare, stream);
#endif
    (void) stream;
    return convt_taps_h16_generic(kind, src, Mg, KT, dst, line, ps, spare);
}


/* dst[i] = narrow(src[i] + bias[i]), i < n: a channels-last tile row written with its bias
 * (one float32 rounding of the addition, then one to 16 bits: the float32 write-out's value,
 * rounded as astype rounds it) */
#if CONVT_HAVE_AVX2_PATH
__attribute__((target("avx2,f16c")))
static inline void convt_narrow_bias_avx2(int kind, const float* src, const float* bias,
                                          uint16_t* dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        convt_narrow8_avx2(kind, _mm256_add_ps(_mm256_loadu_ps(src + i),
                                               _mm256_loadu_ps(bias + i)), dst + i);
    for (; i < n; i++)
        dst[i] = convt_narrow1(kind, src[i] + bias[i]);
}
#endif

static inline void convt_narrow_bias(int isa, int kind, const float* src, const float* bias,
                                     uint16_t* dst, int64_t n)
{
    int64_t i;
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 1) {
        convt_narrow_bias_avx2(kind, src, bias, dst, n);
        return;
    }
#endif
    for (i = 0; i < n; i++)
        dst[i] = convt_narrow1(kind, src[i] + bias[i]);
}

#endif /* CONVT_HALF_H */
