/* Write-outs of computed tiles into channels-first y, with the bias: a tile holds a row per
 * output position and a column per channel, y a row per channel, so the values go out
 * through register transposes (_transpose.h) in whole vectors of each channel's row.
 *
 * convt_cf8_f32: the micro variant's rows contiguous in y (_tilewrite.pxd), in 8 x 8 blocks;
 * convt_cf8_h16 the same into a 16-bit y, and convt_cf16_h16 in 16 x 16 blocks on AVX-512;
 * convt_t8n: the Winograd variant's staged channels-last y into a 16-bit y (_layout.pyx);
 * convt_g8_*: the Winograd variant's sets, a tile row per output (_wino.pyx); convt_zip2_*:
 * the GEMM variant's stride-2 phase pairs from a channel-major tile (_gemm.pyx). Each value
 * takes one rounding (the bias addition), as in the scalar loops they replace: identical
 * results.
 */
#ifndef CONVT_WRITEOUT_H
#define CONVT_WRITEOUT_H

#include <stdint.h>

#include "_half.h"
#include "_isa.h"
#include "_transpose.h"

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
    if (isa >= 1) {
        convt_cf8_f32_avx2(ta, tb, ldc, bias, y, cs);
        return;
    }
#endif
    convt_cf8_f32_generic(ta, tb, ldc, bias, y, cs);
}

/* convt_cf8_f32 into a 16-bit y (_half.h's kind), each value rounded once to 16 bits as it
 * is stored (the float32 value, then astype's rounding: the same bits as writing float32 and
 * narrowing the array afterwards, without the float32 array). */
static inline void convt_cf8_h16_generic(int kind, const float* ta, const float* tb, int64_t ldc,
                                  const float* bias, uint16_t* y, int64_t cs)
{
    int64_t j, k;
    for (j = 0; j < 8; j++)
        for (k = 0; k < 8; k++) {
            if (tb == NULL) {
                y[j * cs + k] = convt_narrow1(kind, ta[k * ldc + j] + bias[j]);
            } else {
                y[j * cs + 2 * k] = convt_narrow1(kind, ta[k * ldc + j] + bias[j]);
                y[j * cs + 2 * k + 1] = convt_narrow1(kind, tb[k * ldc + j] + bias[j]);
            }
        }
}

#if CONVT_HAVE_AVX2_PATH
/* The AVX2 body rounds the block's 8 (or 16) vectors after one NaN test over all of them
 * and one branch on the kind (a test and a branch per vector of 8 cost grouped_g8's call a
 * sixth of its time); a block holding a NaN takes the portable body, which gives the
 * same sums and NumPy's NaN bits. */
__attribute__((target("avx2,f16c")))
static inline void convt_cf8_h16_avx2(int kind, const float* ta, const float* tb, int64_t ldc,
                                      const float* bias, uint16_t* y, int64_t cs)
{
    __m256 a[8], b[8], r[16];
    int j, n = tb == NULL ? 8 : 16;
    convt_transpose8_f32(ta, ldc, a);
    for (j = 0; j < 8; j++)
        a[j] = _mm256_add_ps(a[j], _mm256_broadcast_ss(bias + j));
    if (tb == NULL) {
        for (j = 0; j < 8; j++)
            r[j] = a[j];
    } else {
        convt_transpose8_f32(tb, ldc, b);
        for (j = 0; j < 8; j++) {
            b[j] = _mm256_add_ps(b[j], _mm256_broadcast_ss(bias + j));
            __m256 lo = _mm256_unpacklo_ps(a[j], b[j]), hi = _mm256_unpackhi_ps(a[j], b[j]);
            r[2 * j] = _mm256_permute2f128_ps(lo, hi, 0x20);
            r[2 * j + 1] = _mm256_permute2f128_ps(lo, hi, 0x31);
        }
    }
    if (convt_any_nan8(r, n)) {
        convt_cf8_h16_generic(kind, ta, tb, ldc, bias, y, cs);
        return;
    }
    /* row j of y: r[j] (one phase), or r[2j] then r[2j + 1] (a pair, 16 outputs) */
    for (j = 0; j < n; j++)
        convt_round8_avx2(kind, r[j], y + (tb == NULL ? j * cs : (j / 2) * cs + (j % 2) * 8));
}
#endif

/* isa: the level for float16 already lowered to 0 without F16C (_half.level) */
static inline void convt_cf8_h16(int isa, int kind, const float* ta, const float* tb,
                                 int64_t ldc, const float* bias, uint16_t* y, int64_t cs)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 1) {
        convt_cf8_h16_avx2(kind, ta, tb, ldc, bias, y, cs);
        return;
    }
#endif
    convt_cf8_h16_generic(kind, ta, tb, ldc, bias, y, cs);
}

/* An 8 x 8 float32 block transposed into 16-bit rows: dst[j*ldd + k] = narrow(src[k*lds + j])
 * (the Winograd variant's channels-last y, staged in float32, rounded into channels-first
 * 16-bit y by _layout.pyx's to_padded_nxc_narrow). The AVX2 body rounds the 8 transposed
 * vectors after one NaN test over all of them, as convt_cf8_h16's; a block holding a NaN takes
 * the portable body. isa: as convt_t8w's (float16 lowered to 0 without F16C). */
static inline void convt_t8n_generic(int kind, const float* src, int64_t lds, uint16_t* dst,
                                     int64_t ldd)
{
    int64_t j, k;
    for (j = 0; j < 8; j++)
        for (k = 0; k < 8; k++)
            dst[j * ldd + k] = convt_narrow1(kind, src[k * lds + j]);
}

#if CONVT_HAVE_AVX2_PATH
__attribute__((target("avx2,f16c")))
static inline void convt_t8n_avx2(int kind, const float* src, int64_t lds, uint16_t* dst,
                                  int64_t ldd)
{
    __m256 c[8];
    int j;
    convt_transpose8_f32(src, lds, c);
    if (convt_any_nan8(c, 8)) {
        convt_t8n_generic(kind, src, lds, dst, ldd);
        return;
    }
    for (j = 0; j < 8; j++)
        convt_round8_avx2(kind, c[j], dst + j * ldd);
}
#endif

static inline void convt_t8n(int isa, int kind, const float* src, int64_t lds, uint16_t* dst,
                             int64_t ldd)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 1) {
        convt_t8n_avx2(kind, src, lds, dst, ldd);
        return;
    }
#endif
    convt_t8n_generic(kind, src, lds, dst, ldd);
}

/* convt_cf8_h16_generic over 16 tile rows x 16 channels, as four 8 x 8 blocks */
static void convt_cf16_h16_generic(int kind, const float* ta, const float* tb, int64_t ldc,
                                   const float* bias, uint16_t* y, int64_t cs)
{
    int k0, j0;
    for (k0 = 0; k0 < 16; k0 += 8)
        for (j0 = 0; j0 < 16; j0 += 8)
            convt_cf8_h16_generic(kind, ta + k0 * ldc + j0,
                                  tb != NULL ? tb + k0 * ldc + j0 : NULL, ldc, bias + j0,
                                  y + j0 * cs + (tb != NULL ? 2 * k0 : k0), cs);
}

#if CONVT_HAVE_AVX2_PATH
/* The 16-bit write-out of 16 tile rows x 16 channels on AVX-512 (convt_cf8_h16's formula
 * and bits, 4 of its blocks at once): each tile row's 16 sums plus the bias vector are
 * rounded in place (bfloat16: round to nearest even in integers, as _half.h's convt_f2bf,
 * float32 subnormals included; float16: vcvtps2ph, as convt_narrow16_avx512), two rows'
 * (or two phases') 16 bits joined into 32-bit slots, then a 32-bit transpose, so that each
 * channel's 16 outputs (32 bytes), or with tb the pair's 32 (one 64-byte store), go out at
 * once: the 8 x 8 AVX2 blocks round vector by vector, at the cost of their transposes, and
 * store each 64-byte line of a pair's y in two halves (docs/performance.md, "bfloat16 tiles:
 * border taps skipped row by row, an AVX-512 write-out" and "float16 grouped_g8: whole lines
 * of y, streamed"). A block holding a NaN takes the portable body (NumPy's NaN bits).
 * vcvtne2ps2bf16 is not used: it flushes float32 subnormals to zero. The rounding:
 * _half.h's CONVT_RNE_BF16_512. */
__attribute__((target(CONVT_AVX512_TARGET)))
static inline __m512i convt_h16_join512(int kind, __m512i lo, __m512i hi)
{
    /* 32-bit slots of (lo's 16 bits, hi's 16 bits), each rounded (no NaN). bfloat16: the
     * low half from lo's rounded high bits, the high half hi's rounded high bits (the low 16
     * bits dropped); float16: vcvtps2ph's rounding (_half.h), widened into the slots */
    if (kind == CONVT_BF16)
        return _mm512_mask_blend_epi16(0xAAAAAAAAu,
                                       _mm512_srli_epi32(CONVT_RNE_BF16_512(lo), 16),
                                       CONVT_RNE_BF16_512(hi));
    __m256i l = _mm512_cvtps_ph(_mm512_castsi512_ps(lo), _MM_FROUND_TO_NEAREST_INT);
    __m256i h = _mm512_cvtps_ph(_mm512_castsi512_ps(hi), _MM_FROUND_TO_NEAREST_INT);
    return _mm512_or_si512(_mm512_cvtepu16_epi32(l),
                           _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

__attribute__((target(CONVT_AVX512_TARGET)))
static inline void convt_tr16_i32(__m512i* r)
{
    /* r[j] = (r[0][j], ..., r[15][j]) for j < 16, in place */
    __m512i t[16];
    int k;
    for (k = 0; k < 16; k += 2) {
        t[k] = _mm512_unpacklo_epi32(r[k], r[k + 1]);
        t[k + 1] = _mm512_unpackhi_epi32(r[k], r[k + 1]);
    }
    for (k = 0; k < 16; k += 4) {
        r[k] = _mm512_unpacklo_epi64(t[k], t[k + 2]);
        r[k + 1] = _mm512_unpackhi_epi64(t[k], t[k + 2]);
        r[k + 2] = _mm512_unpacklo_epi64(t[k + 1], t[k + 3]);
        r[k + 3] = _mm512_unpackhi_epi64(t[k + 1], t[k + 3]);
    }
    /* r[4a + b] holds rows 4a..4a+3 of columns b + 4 * lane (lane = 128-bit lane) */
    for (k = 0; k < 4; k++) {
        t[k] = _mm512_shuffle_i32x4(r[k], r[k + 4], 0x88);
        t[k + 4] = _mm512_shuffle_i32x4(r[k], r[k + 4], 0xdd);
        t[k + 8] = _mm512_shuffle_i32x4(r[k + 8], r[k + 12], 0x88);
        t[k + 12] = _mm512_shuffle_i32x4(r[k + 8], r[k + 12], 0xdd);
    }
    for (k = 0; k < 8; k++) {
        r[k] = _mm512_shuffle_i32x4(t[k], t[k + 8], 0x88);
        r[k + 8] = _mm512_shuffle_i32x4(t[k], t[k + 8], 0xdd);
    }
}

__attribute__((target(CONVT_AVX512_TARGET)))
static void convt_cf16_h16_avx512(int kind, const float* ta, const float* tb, int64_t ldc,
                                  const float* bias, uint16_t* y, int64_t cs, int stream)
{
    /* tb == NULL: y[j*cs + k] = narrow(ta[k*ldc + j] + bias[j]); otherwise y[j*cs + 2k] from
     * ta and y[j*cs + 2k + 1] from tb; j, k < 16. stream: the 64-byte stores of a tb block
     * go past the caches (no read of y's lines for ownership) where y and cs keep them on
     * 64-byte lines; the caller orders them (_isa.h's convt_store_fence) before y is read */
    __m512 bv = _mm512_loadu_ps(bias);
    __m512i a[16], b[16];
    __mmask16 nan = 0;
    int k;
    for (k = 0; k < 16; k++) {
        __m512 v = _mm512_add_ps(_mm512_loadu_ps(ta + k * ldc), bv);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        a[k] = _mm512_castps_si512(v);
        if (tb != NULL) {
            v = _mm512_add_ps(_mm512_loadu_ps(tb + k * ldc), bv);
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            b[k] = _mm512_castps_si512(v);
        }
    }
    if (nan) {
        convt_cf16_h16_generic(kind, ta, tb, ldc, bias, y, cs);
        return;
    }
    if (tb != NULL) {
        /* slot k of channel j: (ta's, tb's) row k */
        for (k = 0; k < 16; k++)
            a[k] = convt_h16_join512(kind, a[k], b[k]);
        convt_tr16_i32(a);
        if (stream && ((((uintptr_t) y) | (uintptr_t) (cs * 2)) & 63) == 0) {
            for (k = 0; k < 16; k++)
                _mm512_stream_si512((void*) (y + k * cs), a[k]);
            return;
        }
        for (k = 0; k < 16; k++)
            _mm512_storeu_si512((void*) (y + k * cs), a[k]);
        return;
    }
    {
        /* slot k of channel j: rows 2k, 2k + 1; channels 0-7 and 8-15 as two 8 x 8 blocks */
        __m256 lo[8], hi[8], c[8];
        for (k = 0; k < 8; k++) {
            __m512i p = convt_h16_join512(kind, a[2 * k], a[2 * k + 1]);
            lo[k] = _mm256_castsi256_ps(_mm512_castsi512_si256(p));
            hi[k] = _mm256_castsi256_ps(_mm512_extracti64x4_epi64(p, 1));
        }
        convt_tr8_f32(lo[0], lo[1], lo[2], lo[3], lo[4], lo[5], lo[6], lo[7], c);
        for (k = 0; k < 8; k++)
            _mm256_storeu_ps((float*) (y + k * cs), c[k]);
        convt_tr8_f32(hi[0], hi[1], hi[2], hi[3], hi[4], hi[5], hi[6], hi[7], c);
        for (k = 0; k < 8; k++)
            _mm256_storeu_ps((float*) (y + (8 + k) * cs), c[k]);
    }
}
#endif

/* The write-out of 16 tile rows x 16 channels into a 16-bit y: AVX-512's at ISA level 2
 * (the only use: _tilewrite.pxd's _write_blocks16; stream: convt_cf16_h16_avx512's),
 * otherwise (and for a block holding a NaN) four portable 8 x 8 blocks. */
static inline void convt_cf16_h16(int isa, int kind, const float* ta, const float* tb,
                                  int64_t ldc, const float* bias, uint16_t* y, int64_t cs,
                                  int stream)
{
#if CONVT_HAVE_AVX2_PATH
    if (isa >= 2) {
        convt_cf16_h16_avx512(kind, ta, tb, ldc, bias, y, cs, stream);
        return;
    }
#endif
    (void) stream;
    convt_cf16_h16_generic(kind, ta, tb, ldc, bias, y, cs);
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
    if (isa >= 1) {                                                                      \
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
    if (isa >= 1) {
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
    if (isa >= 1) {
        convt_zip2_f64_avx2(a, b, bias, y, n);
        return;
    }
#endif
    CONVT_ZIP2_GENERIC
}

#endif /* CONVT_WRITEOUT_H */
