/* The bfloat16 register tiles of the micro variant (convt._backends.direct.micro_bf16): the
 * float32 tiles of _ukernel.h with pairs of input channels multiplied in one dot-product
 * step, AVX512-BF16's vdpbf16ps. One call computes a tile of 1 to 2*MR rows x 16 (or 32)
 * columns of float32 C (rows: output pixels, any rows of the task's tile through row
 * pointers, the rows that read data for the same taps: _tile.pxd's _rows_outer; columns:
 * output channels):
 *
 *     C[i][j] (+)= sum over taps t < ntaps, pairs p < kp of
 *                  a_i[2p] * b[t][p][j][0] + a_i[2p + 1] * b[t][p][j][1]
 *
 * a: per tap, the rows' pointers into the channels-last bfloat16 input, in units of channel
 * PAIRS (each 32-bit slot holds channels 2p and 2p + 1; the pointer tables are built as for
 * float32 rows of kp slots: _tile.pxd), so a row's pair is one 32-bit broadcast; b: the tap's
 * packed weights, kp lines of NR pairs (one or two 64-byte zmm: [p][j][2] bfloat16, as
 * oneDNN's "VNNI" bf16 weight layout, e.g. OIhw8i16o2i). Odd channel counts are padded to even with
 * zeros on both sides (convt._backends.direct.micro_bf16).
 *
 * Rounding: a bfloat16 has 8 significant bits, so a product of two is exact in float32 (16
 * bits); vdpbf16ps adds the pair's two products to the accumulator one after the other, odd
 * element first, each addition rounded to nearest even (Intel SDM, VDPBF16PS: "srcdest +=
 * a.bf16[2j+1] * b.bf16[2j+1]; srcdest += a.bf16[2j] * b.bf16[2j]"): each step is one
 * rounding, like an FMA. It treats denormal inputs as zero and flushes denormal results
 * (DAZ, FTZ, whatever MXCSR says): docs/precision.md. The portable body below sums the same
 * terms in the same order with the same roundings, so the two agree bit for bit unless a
 * denormal is involved.
 */
#ifndef CONVT_BF16KERNEL_H
#define CONVT_BF16KERNEL_H

#include <stdint.h>
#include <string.h>

#include "_isa.h"

#define CONVT_BF16_MR 6
/* mode bits (convt._backends.direct.micro_bf16 sets them): on; vdpbf16ps (else portable C);
 * NR = 32 (else 16); the AMX tiles of _amxkernel.h instead (_tile.pxd's _tile_amx:
 * convt._backends.direct.micro_amx, at ISA level 3 or in the emulating build); the 16-bit
 * write-out may stream (non-temporal stores, _writeout.h's convt_cf16_h16) the 64-byte
 * aligned lines it writes whole */
#define CONVT_BF16_ON 1
#define CONVT_BF16_HW 2
#define CONVT_BF16_WIDE 4
#define CONVT_BF16_AMX 8
#define CONVT_BF16_STREAM 16

static inline float convt_bf16_to_f32(uint16_t v)
{
    uint32_t u = (uint32_t) v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* rows: 1 to 2 * CONVT_BF16_MR; nr = 16 or 32; row i of C at cr[i] + coff. */
static void convt_ukernel_bf16_generic(int rows, int nr, int64_t ntaps, int64_t kp,
                                       const float* const* a, int64_t astride, int64_t aoff,
                                       const float* b, int64_t bstride, float* const* cr,
                                       int64_t coff, int acc)
{
    float s[2 * CONVT_BF16_MR][32];
    int64_t i, j, t, p;
    for (i = 0; i < rows; i++)
        for (j = 0; j < nr; j++)
            s[i][j] = acc ? cr[i][coff + j] : 0.f;
    for (t = 0; t < ntaps; t++) {
        const uint16_t* bt = (const uint16_t*) (b + t * bstride);
        for (i = 0; i < rows; i++) {
            const uint16_t* ar = (const uint16_t*) (a[t * astride + i] + aoff);
            for (p = 0; p < kp; p++) {
                float x0 = convt_bf16_to_f32(ar[2 * p]), x1 = convt_bf16_to_f32(ar[2 * p + 1]);
                for (j = 0; j < nr; j++) {
                    /* the products are exact: each line rounds once (the addition) */
                    s[i][j] += x1 * convt_bf16_to_f32(bt[(p * nr + j) * 2 + 1]);
                    s[i][j] += x0 * convt_bf16_to_f32(bt[(p * nr + j) * 2]);
                }
            }
        }
    }
    for (i = 0; i < rows; i++)
        for (j = 0; j < nr; j++)
            cr[i][coff + j] = s[i][j];
}

#if CONVT_HAVE_AVX2_PATH
/* Per row one zmm accumulator (NR 16) or two (NR 32), per pair one or two weight vectors and
 * a broadcast pair per row. At 2 * MR rows x 32: 24 accumulators, and per pair 2 weight
 * loads and 12 broadcast loads for 24 vdpbf16ps (64 multiply-adds each), against 13 loads
 * for 12 at 16 wide (oneDNN's bf16 convolutions block output channels by 2-4 zmm likewise,
 * jit_avx512_core_bf16_conv_kernel's ur_w x nb_oc_blocking). */
static inline int32_t convt_bf16_pair(const float* p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

#define CONVT_BF_DPB(acc, x, w) acc = _mm512_dpbf16_ps(acc, x, w);
#define CONVT_BF_BCAST(r) (__m512bh) _mm512_set1_epi32(convt_bf16_pair(a##r + p))
#define CONVT_BF_DECL(r) __m512 c##r; const float* a##r;
#define CONVT_BF_DECL2(r) __m512 c##r, d##r; const float* a##r;
#define CONVT_BF_LOAD(r) c##r = _mm512_loadu_ps(cr[r] + coff);
#define CONVT_BF_LOAD2(r) CONVT_BF_LOAD(r) d##r = _mm512_loadu_ps(cr[r] + coff + 16);
#define CONVT_BF_ZERO(r) c##r = _mm512_setzero_ps();
#define CONVT_BF_ZERO2(r) CONVT_BF_ZERO(r) d##r = _mm512_setzero_ps();
#define CONVT_BF_STORE(r) _mm512_storeu_ps(cr[r] + coff, c##r);
#define CONVT_BF_STORE2(r) CONVT_BF_STORE(r) _mm512_storeu_ps(cr[r] + coff + 16, d##r);
#define CONVT_BF_PTR(r) a##r = a[t * astride + r] + aoff;
#define CONVT_BF_ROW(r) CONVT_BF_DPB(c##r, CONVT_BF_BCAST(r), w0)
#define CONVT_BF_ROW2(r) { __m512bh x_ = CONVT_BF_BCAST(r);                              \
    CONVT_BF_DPB(c##r, x_, w0) CONVT_BF_DPB(d##r, x_, w1) }
/* the first n rows: CONVT_BF_ROWS##n(M) */
#define CONVT_BF_ROWS1(M) M(0)
#define CONVT_BF_ROWS2(M) CONVT_BF_ROWS1(M) M(1)
#define CONVT_BF_ROWS3(M) CONVT_BF_ROWS2(M) M(2)
#define CONVT_BF_ROWS4(M) CONVT_BF_ROWS3(M) M(3)
#define CONVT_BF_ROWS5(M) CONVT_BF_ROWS4(M) M(4)
#define CONVT_BF_ROWS6(M) CONVT_BF_ROWS5(M) M(5)
#define CONVT_BF_ROWS7(M) CONVT_BF_ROWS6(M) M(6)
#define CONVT_BF_ROWS8(M) CONVT_BF_ROWS7(M) M(7)
#define CONVT_BF_ROWS9(M) CONVT_BF_ROWS8(M) M(8)
#define CONVT_BF_ROWS10(M) CONVT_BF_ROWS9(M) M(9)
#define CONVT_BF_ROWS11(M) CONVT_BF_ROWS10(M) M(10)
#define CONVT_BF_ROWS12(M) CONVT_BF_ROWS11(M) M(11)
/* W: zmm per row, 1 (NR 16) or 2 (NR 32), with the row macros for it */
#define CONVT_BF_BODY(ROWS, W, DECL, LOAD, ZERO, STORE, ROW)                             \
    ROWS(DECL)                                                                           \
    int64_t t, p;                                                                        \
    if (acc) {                                                                           \
        ROWS(LOAD)                                                                       \
    } else {                                                                             \
        ROWS(ZERO)                                                                       \
    }                                                                                    \
    for (t = 0; t < ntaps; t++) {                                                        \
        const float* bt = b + t * bstride;                                               \
        ROWS(CONVT_BF_PTR)                                                               \
        for (p = 0; p < kp; p++) {                                                       \
            __m512bh w0 = (__m512bh) _mm512_loadu_si512(bt + p * 16 * W);                 \
            __m512bh w1 = (__m512bh) _mm512_loadu_si512(bt + p * 16 * W + 16 * (W - 1));  \
            (void) w1;                                                                   \
            ROWS(ROW)                                                                    \
        }                                                                                \
    }                                                                                    \
    ROWS(STORE)

#define CONVT_BF_ARGS                                                                    \
    int64_t ntaps, int64_t kp, const float* const* a, int64_t astride, int64_t aoff,     \
    const float* b, int64_t bstride, float* const* cr, int64_t coff, int acc
#define CONVT_BF_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

/* convt_ukernel_bf16_<n>x16 and _<n>x32: n rows of one or two zmm */
#define CONVT_BF_KERNELS(n)                                                              \
CONVT_BF_TARGET static void convt_ukernel_bf16_##n##x16(CONVT_BF_ARGS)                   \
{                                                                                        \
    CONVT_BF_BODY(CONVT_BF_ROWS##n, 1, CONVT_BF_DECL, CONVT_BF_LOAD, CONVT_BF_ZERO,      \
                  CONVT_BF_STORE, CONVT_BF_ROW)                                          \
}                                                                                        \
CONVT_BF_TARGET static void convt_ukernel_bf16_##n##x32(CONVT_BF_ARGS)                   \
{                                                                                        \
    CONVT_BF_BODY(CONVT_BF_ROWS##n, 2, CONVT_BF_DECL2, CONVT_BF_LOAD2, CONVT_BF_ZERO2,   \
                  CONVT_BF_STORE2, CONVT_BF_ROW2)                                        \
}
CONVT_BF_KERNELS(1) CONVT_BF_KERNELS(2) CONVT_BF_KERNELS(3) CONVT_BF_KERNELS(4)
CONVT_BF_KERNELS(5) CONVT_BF_KERNELS(6) CONVT_BF_KERNELS(7) CONVT_BF_KERNELS(8)
CONVT_BF_KERNELS(9) CONVT_BF_KERNELS(10) CONVT_BF_KERNELS(11) CONVT_BF_KERNELS(12)

typedef void (*convt_bf16_kernel_t)(CONVT_BF_ARGS);
/* [rows - 1][wide] */
static const convt_bf16_kernel_t convt_bf16_kernels[2 * CONVT_BF16_MR][2] = {
    {convt_ukernel_bf16_1x16, convt_ukernel_bf16_1x32},
    {convt_ukernel_bf16_2x16, convt_ukernel_bf16_2x32},
    {convt_ukernel_bf16_3x16, convt_ukernel_bf16_3x32},
    {convt_ukernel_bf16_4x16, convt_ukernel_bf16_4x32},
    {convt_ukernel_bf16_5x16, convt_ukernel_bf16_5x32},
    {convt_ukernel_bf16_6x16, convt_ukernel_bf16_6x32},
    {convt_ukernel_bf16_7x16, convt_ukernel_bf16_7x32},
    {convt_ukernel_bf16_8x16, convt_ukernel_bf16_8x32},
    {convt_ukernel_bf16_9x16, convt_ukernel_bf16_9x32},
    {convt_ukernel_bf16_10x16, convt_ukernel_bf16_10x32},
    {convt_ukernel_bf16_11x16, convt_ukernel_bf16_11x32},
    {convt_ukernel_bf16_12x16, convt_ukernel_bf16_12x32},
};
#endif

/* Dispatch on the mode bits (CONVT_BF16_*): the vdpbf16ps bodies when CONVT_BF16_HW (the
 * caller's convt._kernels._cpu.bf16()), otherwise the portable one; rows: 1 to
 * 2 * CONVT_BF16_MR, row i of C at cr[i] + coff (the rows a tile's border taps leave in
 * one group: _tile.pxd's _rows_outer). */
static inline void convt_ukernel_bf16_rows(int mode, int rows, int64_t ntaps, int64_t kp,
                                           const float* const* a, int64_t astride,
                                           int64_t aoff, const float* b, int64_t bstride,
                                           float* const* cr, int64_t coff, int acc)
{
    int wide = (mode & CONVT_BF16_WIDE) != 0;
#if CONVT_HAVE_AVX2_PATH
    if (mode & CONVT_BF16_HW) {
        convt_bf16_kernels[rows - 1][wide](ntaps, kp, a, astride, aoff, b, bstride, cr, coff,
                                           acc);
        return;
    }
#endif
    convt_ukernel_bf16_generic(rows, wide ? 32 : 16, ntaps, kp, a, astride, aoff, b, bstride,
                               cr, coff, acc);
}

#endif /* CONVT_BF16KERNEL_H */
