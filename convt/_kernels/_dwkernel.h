/* AVX2 + FMA row kernel of the direct backend's depthwise variant (convt/_kernels/_depthwise.pyx),
 * channels first, innermost stride s2 = 1 or 2 (larger strides call it phase by phase, as
 * s2 = 1 rows of the phase buffer).
 *
 * One call computes one block of nrows output rows, row r at y + r*ystep reading x + r*xstep
 * (rows whose taps are the first row's, one input row further per row: convt._backends.direct.depthwise's
 * row runs):
 *
 *     y[q*s2 + c] = b + sum over the taps t of phase c in range at q of  w[t] * x[off[t] + q]
 *
 * for c < s2 and qa <= q < qe[c]. Phase c's taps are the nt[c] terms after phase c-1's in the
 * flat arrays off / e / w; tap t is in range at q when 0 <= q + e[t] < I2, which holds for every
 * tap of phase c on lo[c] <= q < hi[c]. The row is taken in vectors of q from qa: blocks of
 * four, then two, vectors where every phase's interior holds them (NV independent chains of
 * fused multiply-adds, every tap on every lane), then single vectors, each phase's either so
 * or, outside its interior, masked: each tap on the lanes where it is in range (masked load,
 * fused multiply-add, blend back the other lanes, so a tap out of range adds nothing there, not
 * even 0 * w). Lanes at or past qe[c] are not stored. Two phases are interleaved with unpack /
 * permute into whole vectors of y. Every output is one chain of fused multiply-adds in tap
 * order whichever kind of vector takes it, so results do not depend on how rows are split into
 * blocks, runs or threads. The portable path is the Cython loop (_phase + _interleave), with a
 * multiply and an add per tap: the two agree to rounding, not bit for bit (as the
 * micro-kernels, _ukernel.h).
 *
 * The masked vectors replace a scalar loop on the borders (4 of 128 outputs a row on
 * depthwise_bilinear took a quarter of the kernel's time so: one latency-bound chain per
 * output). Tried and dropped: the masked vectors of a run taken column by column with their
 * masks computed once (slower: one dependent chain after another), and masked stores
 * (vmaskmovps is slow here): the few partial vectors at a row's end are stored lane by lane.
 * The masks are worked out on a run's first row and kept for the others (faster or level
 * against working them out per row, same bits). Also tried and dropped, as slower or no
 * faster: blocks of 4 vectors whose border vectors are masked, in place of the single-vector
 * steps at a row's ends; one loop over both phases' taps in the interior blocks; prefetching
 * the next row's y for writing; and reading a run's rows from zero-padded copies in 32 KiB of
 * per-thread scratch so that no vector is masked (the copy costs what the masked vectors
 * did). Figures: docs/performance.md, "Figures moved out of code comments".
 *
 * With stream set (outputs of 8 MiB or more, convt._backends.direct.depthwise), a row whose
 * first vector is 16-byte aligned stores its whole vectors with vmovntps (in 16-byte parts
 * unless 64-byte aligned: a large out= from numpy is 16-byte aligned): y is written once
 * and is larger than L2, so reading its lines for ownership first only doubles its traffic
 * (docs/performance.md, "depthwise: streamed stores, an honest traffic floor"). The caller
 * fences once per thread.
 *
 * Used only when the caller's level (convt._kernels._cpu.kernel_level) says AVX2 and FMA
 * (run-time selection, portable build). The AVX-512 body (level 2) is the same row on zmm
 * vectors, its border taps through opmask registers (a zero-masking load and a merge-masked
 * fused multiply-add: the blend's values), so the same bits; on Zen 4, whose two 256-bit load
 * ports give a zmm load no more bytes, it is slower than the ymm rows, and _cpu
 * keeps the AVX2 body there (docs/performance.md, "AVX-512 bodies of the memory-bound
 * kernels"). CONVT_DW_ROW4 has a level of its own (_cpu's "depthwise_row4", the caller's
 * row4), which stays at its zmm body there: a 64-output phase row is one block of 4 zmm
 * vectors, half the instructions of the ymm one, and depthwise_bilinear's calls after a
 * cache eviction are faster so (docs/performance.md, "depthwise_bilinear against its
 * memory traffic: the zmm 4-tap rows and a leaner call"). */
#ifndef CONVT_DWKERNEL_H
#define CONVT_DWKERNEL_H

#include <stdint.h>

#include "_transpose.h"
#include "_dwstream.h"

#if CONVT_HAVE_AVX2_PATH

/* Lane masks: loadu(convt_dw_m32 + 8 - z) has lanes j < z set (0 <= z <= 8); 64-bit likewise. */
static const int32_t convt_dw_m32[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
static const int64_t convt_dw_m64[8] = {-1, -1, -1, -1, 0, 0, 0, 0};

static inline int64_t convt_dw_clamp(int64_t v, int64_t lanes)
{
    return v < 0 ? 0 : (v > lanes ? lanes : v);
}

/* acc[i] = b + sum_t w[c][t] * x[off[c][t] + q + i*lanes + j], j < lanes, i < NV, every tap in
 * range (tap order; NV independent chains: one chain is bound by the FMA latency). */
#define CONVT_DW_VEC(T, V, SET1, LOADU, FMADD, LANES, NV, ACC, C, Q)                     \
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

/* Masked taps whose lane masks a run keeps from its first row (the rows of a run share their
 * taps' e, so every row takes the same masks in the same order); a row with more takes the
 * rest as it goes. */
#define CONVT_DW_NMASK 64

/* The same for one vector at q, tap t on the lanes j with 0 <= q + j + e[c][t] < I2 only (the
 * lanes of mask m_: all, some or none), worked out on the run's first row (r == 0) and kept in
 * mk_, entry k_ (the row's k_-th tap taken here). Every tap takes the masked load, fused
 * multiply-add and blend, whatever its mask: a branch on the kind of mask (skip, plain or
 * masked) costs more than it saves, in a loop over rows and on whole layers, with the same
 * bits (docs/performance.md, "Figures moved out of code comments"). */
#define CONVT_DW_MVEC(T, V, SET1, LANES, MT, MKMASK, MFMA, ACC, C, Q)                   \
    do {                                                                                 \
        int64_t t_, s_;                                                                  \
        MT m_;                                                                           \
        ACC = SET1(b);                                                                   \
        for (t_ = 0; t_ < nt[C]; t_++, k_++) {                                           \
            const T* p_ = x + off[C][t_] + (Q);                                          \
            if (r == 0 || k_ >= CONVT_DW_NMASK) {                                        \
                s_ = (Q) + e[C][t_];              /* input index of lane 0 */            \
                m_ = MKMASK(convt_dw_clamp(-s_, LANES), convt_dw_clamp(I2 - s_, LANES)); \
                if (k_ < CONVT_DW_NMASK)                                                 \
                    mk_[k_] = m_;                                                        \
            } else {                                                                     \
                m_ = mk_[k_];                                                            \
            }                                                                            \
            ACC = MFMA(ACC, SET1(w[C][t_]), p_, m_);                                     \
        }                                                                                \
    } while (0)

/* Phases 0 and 1 interleaved: y[2q + 2j + c] from a[c] lane j, j < LANES (two vectors). */
#define CONVT_DW_ZIP(ZIPLO, ZIPHI, A0, A1, LO)                                           \
    do {                                                                                 \
        LO = ZIPLO(A0, A1);                                                              \
        A1 = ZIPHI(A0, A1);                                                              \
        A0 = LO;                                                                         \
    } while (0)

/* A whole vector of y stored: streamed past the caches when the caller asks for it (st_,
 * CONVT_DW_ROW), else an ordinary store. The row kernels come in two kinds (KIND): 2 streams
 * a row whose vectors are 64-byte aligned, one store a vector; 1 a row 16-byte aligned only,
 * as numpy allocates a large out=: 16-byte parts (CONVT_DW_NT16), streamed inside the row's
 * whole lines [sl_, sh_), where the write-combining buffers join them into lines, stored as
 * usual in its first and last lines, which the rows beside it share; its bodies stream
 * 64-byte aligned rows that way too, and take the runs whose rows' kinds differ. Kind 1 is
 * its own function: its tests in kind 2's loop slow the aligned rows (docs/performance.md,
 * "depthwise: a streamed y that numpy allocated, and the traffic floor again"). */
#define CONVT_DW_ST(STREAM, STOREU, P, A)                                                \
    do {                                                                                 \
        if (st_)                                                                         \
            STREAM(P, A);                                                                \
        else                                                                             \
            STOREU(P, A);                                                                \
    } while (0)

#define CONVT_DW_ROW(NAME, TARGET, T, V, LANES, SET1, LOADU, STOREU, STREAM, FMADD, ZIPLO, \
                     ZIPHI, MT, MKMASK, MFMA, KIND)                                            \
__attribute__((target(TARGET)))                                                          \
static void NAME(T* y, int64_t s2, int64_t qa, const int64_t* qe, const int64_t* lo,     \
                 const int64_t* hi, const int64_t* nt, const T* x, const int64_t* off0,  \
                 const int64_t* e0, const T* w0, int64_t I2, T b, int64_t nrows,         \
                 int64_t xstep, int64_t ystep, int stream)                               \
{                                                                                        \
    int64_t L = qa, H = qe[0], c, q, r, i_, z0, z1;                                      \
    int st_;   /* this row's whole vectors streamed (CONVT_DW_ST) */                     \
    uintptr_t sl_, sh_;                                                                  \
    const int64_t* off[2] = {off0, off0 + nt[0]};   /* phase c's terms */                \
    const int64_t* e[2] = {e0, e0 + nt[0]};                                              \
    const T* w[2] = {w0, w0 + nt[0]};                                                    \
    T tmp_[2 * LANES];                                                                   \
    V a_[4], b_[4], l_;                                                                  \
    MT mk_[CONVT_DW_NMASK];   /* the run's border masks (CONVT_DW_MVEC) */               \
    int64_t k_;                                                                          \
    for (c = 0; c < s2; c++) {   /* [L, H): every phase's interior, below every qe */    \
        L = lo[c] > L ? lo[c] : L;                                                       \
        H = hi[c] < H ? hi[c] : H;                                                       \
        H = qe[c] < H ? qe[c] : H;                                                       \
    }                                                                                    \
    b_[0] = SET1(b);   /* (phase 1's vector; unread when s2 == 1) */                     \
    for (r = 0; r < nrows; r++, y += ystep, x += xstep) {                                \
        k_ = 0;                                                                          \
        st_ = convt_dw_stream_kind(stream, y + s2 * qa, y + s2 * qe[0], &sl_, &sh_) >= KIND; \
        for (q = qa; q < qe[0]; ) {                                                      \
            if (q >= L && q + 4 * LANES <= H) {                                          \
                CONVT_DW_BLOCK(T, V, SET1, LOADU, STOREU, STREAM, FMADD, ZIPLO, ZIPHI, LANES, 4); \
                q += 4 * LANES;                                                          \
                continue;                                                                \
            }                                                                            \
            if (q >= L && q + 2 * LANES <= H) {                                          \
                CONVT_DW_BLOCK(T, V, SET1, LOADU, STOREU, STREAM, FMADD, ZIPLO, ZIPHI, LANES, 2); \
                q += 2 * LANES;                                                          \
                continue;                                                                \
            }                                                                            \
            CONVT_DW_ONE(T, V, SET1, LOADU, FMADD, LANES, MT, MKMASK, MFMA, a_, 0, z0);   \
            z1 = 0;                                                                      \
            if (s2 == 2) {                                                               \
                CONVT_DW_ONE(T, V, SET1, LOADU, FMADD, LANES, MT, MKMASK, MFMA, b_, 1, z1);   \
                CONVT_DW_ZIP(ZIPLO, ZIPHI, a_[0], b_[0], l_);                            \
            }                                                                            \
            if (z0 == LANES && z1 == (s2 == 2 ? LANES : 0)) {                            \
                CONVT_DW_ST(STREAM, STOREU, y + s2 * q, a_[0]);                          \
                if (s2 == 2)                                                             \
                    CONVT_DW_ST(STREAM, STOREU, y + 2 * q + LANES, b_[0]);               \
            } else {   /* lanes j of phase c stored when q + j < qe[c], one by one */    \
                STOREU(tmp_, a_[0]);                                                     \
                STOREU(tmp_ + LANES, b_[0]);                                             \
                for (i_ = 0; i_ < LANES; i_++) {                                         \
                    if (i_ < z0)                                                         \
                        y[s2 * (q + i_)] = tmp_[s2 * i_];                                \
                    if (i_ < z1)                                                         \
                        y[2 * (q + i_) + 1] = tmp_[2 * i_ + 1];                          \
                }                                                                        \
            }                                                                            \
            q += LANES;                                                                  \
        }                                                                                \
    }                                                                                    \
}

/* Stride 2 with 4 taps in each phase (a 4 x 4 stride-2 kernel's rows with both tap rows in
 * the data: depthwise_bilinear's), rows of nrows as CONVT_DW_ROW: blocks of 4 vectors of both
 * phases from qa while vectors 1 and 2 of a block are inside the common interior and every
 * vector is stored whole; returns where the blocks end (the caller's generic row takes the
 * rest). The 8 weights stay broadcast in registers for the call and the 8 tap pointers for
 * a row, the loops fully unrolled: the generic row reloads them for every block and tap, and
 * takes a row's border vectors one at a time, each one dependent chain. Here vector 0 of the
 * first block and vector 3 of the last take masked taps (masks worked out once per call: they
 * depend on q, e and I2 only; all lanes where a tap is in range), in the block's independent
 * chains. The same sums in the same order as CONVT_DW_ROW, so the same bits. */
#define CONVT_DW_ROW4(NAME, TARGET, T, V, LANES, SET1, LOADU, STOREU, STREAM, FMADD, ZIPLO, \
                      ZIPHI, MT, MKMASK, MFMA, KIND)                                           \
__attribute__((target(TARGET)))                                                          \
static int64_t NAME(T* y, int64_t qa, const int64_t* qe, const int64_t* lo,               \
                    const int64_t* hi, const T* x, const int64_t* off, const int64_t* e,  \
                    const T* w, int64_t I2, T b, int64_t nrows, int64_t xstep,            \
                    int64_t ystep, int stream)                                            \
{                                                                                        \
    int64_t L = qa, H = qe[0], E = qe[0], nb = 0, qt, q, r, k, c, t, i_, s_;             \
    int st_, hb, tb;                                                                     \
    uintptr_t sl_, sh_;                                                                  \
    V w0[4], w1[4], a_[4], b_[4], l_, bv = SET1(b);                                      \
    MT m0[8], m3[8];   /* [4c + t]: lanes of vector 0 of the first block, 3 of the last */ \
    const T* p0[4];                                                                      \
    const T* p1[4];                                                                      \
    for (c = 0; c < 2; c++) {                                                            \
        L = lo[c] > L ? lo[c] : L;                                                       \
        H = hi[c] < H ? hi[c] : H;                                                       \
        H = qe[c] < H ? qe[c] : H;                                                       \
        E = qe[c] < E ? qe[c] : E;                                                       \
    }                                                                                    \
    while (qa + (nb + 1) * 4 * LANES <= E && qa + LANES >= L                             \
           && qa + nb * 4 * LANES + 3 * LANES <= H)                                      \
        nb++;                                                                            \
    if (nb == 0)                                                                         \
        return qa;                                                                       \
    qt = qa + (nb - 1) * 4 * LANES;                                                      \
    hb = qa < L;                                                                         \
    tb = qt + 4 * LANES > H;                                                             \
    for (t = 0; t < 8; t++) {                                                            \
        s_ = qa + e[t];                                                                  \
        m0[t] = MKMASK(convt_dw_clamp(-s_, LANES), convt_dw_clamp(I2 - s_, LANES));      \
        s_ = qt + 3 * LANES + e[t];                                                      \
        m3[t] = MKMASK(convt_dw_clamp(-s_, LANES), convt_dw_clamp(I2 - s_, LANES));      \
    }                                                                                    \
    for (t = 0; t < 4; t++) {                                                            \
        w0[t] = SET1(w[t]);                                                              \
        w1[t] = SET1(w[4 + t]);                                                          \
    }                                                                                    \
    for (r = 0; r < nrows; r++, y += ystep, x += xstep) {                                \
        st_ = convt_dw_stream_kind(stream, y + 2 * qa, y + 2 * (qa + nb * 4 * LANES),    \
                                   &sl_, &sh_) >= KIND;                                \
        for (t = 0; t < 4; t++) {                                                        \
            p0[t] = x + off[t];                                                          \
            p1[t] = x + off[4 + t];                                                      \
        }                                                                                \
        for (k = 0, q = qa; k < nb; k++, q += 4 * LANES) {                               \
            for (i_ = 0; i_ < 4; i_++)                                                   \
                a_[i_] = b_[i_] = bv;                                                    \
            if ((k == 0 && hb) || (k == nb - 1 && tb)) {                                 \
                /* vector 0 of the first block, 3 of the last, masked (a select here runs \
                 * faster than a block body per case: docs/performance.md, "depthwise:   \
                 * a row kernel of its own for stride 2 with 4 taps a phase") */         \
                for (t = 0; t < 4; t++) {                                                \
                    const T* u0 = p0[t] + q;                                             \
                    const T* u1 = p1[t] + q;                                             \
                    a_[0] = k == 0 ? MFMA(a_[0], w0[t], u0, m0[t])                       \
                                   : FMADD(w0[t], LOADU(u0), a_[0]);                     \
                    b_[0] = k == 0 ? MFMA(b_[0], w1[t], u1, m0[4 + t])                   \
                                   : FMADD(w1[t], LOADU(u1), b_[0]);                     \
                    for (i_ = 1; i_ < 3; i_++) {                                         \
                        a_[i_] = FMADD(w0[t], LOADU(u0 + i_ * LANES), a_[i_]);           \
                        b_[i_] = FMADD(w1[t], LOADU(u1 + i_ * LANES), b_[i_]);           \
                    }                                                                    \
                    a_[3] = k == nb - 1 ? MFMA(a_[3], w0[t], u0 + 3 * LANES, m3[t])      \
                                        : FMADD(w0[t], LOADU(u0 + 3 * LANES), a_[3]);    \
                    b_[3] = k == nb - 1 ? MFMA(b_[3], w1[t], u1 + 3 * LANES, m3[4 + t])  \
                                        : FMADD(w1[t], LOADU(u1 + 3 * LANES), b_[3]);    \
                }                                                                        \
            } else {                                                                     \
                for (t = 0; t < 4; t++)                                                  \
                    for (i_ = 0; i_ < 4; i_++) {                                         \
                        a_[i_] = FMADD(w0[t], LOADU(p0[t] + q + i_ * LANES), a_[i_]);    \
                        b_[i_] = FMADD(w1[t], LOADU(p1[t] + q + i_ * LANES), b_[i_]);    \
                    }                                                                    \
            }                                                                            \
            for (i_ = 0; i_ < 4; i_++) {                                                 \
                CONVT_DW_ZIP(ZIPLO, ZIPHI, a_[i_], b_[i_], l_);                          \
                CONVT_DW_ST(STREAM, STOREU, y + 2 * (q + i_ * LANES), a_[i_]);           \
                CONVT_DW_ST(STREAM, STOREU, y + 2 * (q + i_ * LANES) + LANES, b_[i_]);   \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    return qa + nb * 4 * LANES;                                                          \
}

/* Both kinds of a row kernel from one argument list (ROW: CONVT_DW_ROW or CONVT_DW_ROW4):
 * NAME##ISA streams a 64-byte aligned row's whole vectors with STREAM (KIND 2), and
 * NAME##_nt16##ISA a 16-byte aligned row's parts (CONVT_DW_NT16, KIND 1). */
#define CONVT_DW_KINDS(ROW, NAME, ISA, TARGET, T, V, LANES, SET1, LOADU, STOREU, STREAM,   \
                       FMADD, ZIPLO, ZIPHI, MT, MKMASK, MFMA)                            \
    ROW(NAME##ISA, TARGET, T, V, LANES, SET1, LOADU, STOREU, STREAM, FMADD, ZIPLO, ZIPHI, \
        MT, MKMASK, MFMA, 2)                                                             \
    ROW(NAME##_nt16##ISA, TARGET, T, V, LANES, SET1, LOADU, STOREU, CONVT_DW_NT16, FMADD, \
        ZIPLO, ZIPHI, MT, MKMASK, MFMA, 1)

/* Both row kernels of one dtype (SFX: f32 or f64) from one argument list, each in both
 * kinds: convt_dw_row_SFX (CONVT_DW_ROW) and convt_dw_row4_SFX (CONVT_DW_ROW4, stride 2 with
 * 4 taps a phase). */
#define CONVT_DW_ROWS(SFX, ISA, TARGET, T, V, LANES, SET1, LOADU, STOREU, STREAM, FMADD,     \
                      ZIPLO, ZIPHI, MT, MKMASK, MFMA)                                     \
    CONVT_DW_KINDS(CONVT_DW_ROW, convt_dw_row_##SFX, ISA, TARGET, T, V, LANES, SET1, LOADU, \
                   STOREU, STREAM, FMADD, ZIPLO, ZIPHI, MT, MKMASK, MFMA)                 \
    CONVT_DW_KINDS(CONVT_DW_ROW4, convt_dw_row4_##SFX, ISA, TARGET, T, V, LANES, SET1,     \
                   LOADU, STOREU, STREAM, FMADD, ZIPLO, ZIPHI, MT, MKMASK, MFMA)

/* AVX2: lane masks from the tables, masked load, fused multiply-add, blend back. */
#define CONVT_DW_MASK32(z) _mm256_loadu_si256((const __m256i*)(convt_dw_m32 + 8 - (z)))
#define CONVT_DW_MASK64(z) _mm256_loadu_si256((const __m256i*)(convt_dw_m64 + 4 - (z)))
#define CONVT_DW_MK32(lo, hi) _mm256_andnot_si256(CONVT_DW_MASK32(lo), CONVT_DW_MASK32(hi))
#define CONVT_DW_MK64(lo, hi) _mm256_andnot_si256(CONVT_DW_MASK64(lo), CONVT_DW_MASK64(hi))
#define CONVT_DW_MFMA32(acc, wv, p, m)                                                   \
    _mm256_blendv_ps(acc, _mm256_fmadd_ps(wv, _mm256_maskload_ps(p, m), acc),            \
                     _mm256_castsi256_ps(m))
#define CONVT_DW_MFMA64(acc, wv, p, m)                                                   \
    _mm256_blendv_pd(acc, _mm256_fmadd_pd(wv, _mm256_maskload_pd(p, m), acc),            \
                     _mm256_castsi256_pd(m))

CONVT_DW_ROWS(f32, _avx2, "avx2,fma", float, __m256, 8, _mm256_set1_ps, _mm256_loadu_ps,
              _mm256_storeu_ps, _mm256_stream_ps, _mm256_fmadd_ps, convt_zip_lo_ps,
              convt_zip_hi_ps, __m256i, CONVT_DW_MK32, CONVT_DW_MFMA32)
CONVT_DW_ROWS(f64, _avx2, "avx2,fma", double, __m256d, 4, _mm256_set1_pd, _mm256_loadu_pd,
              _mm256_storeu_pd, _mm256_stream_pd, _mm256_fmadd_pd, convt_zip_lo_pd,
              convt_zip_hi_pd, __m256i, CONVT_DW_MK64, CONVT_DW_MFMA64)

/* AVX-512: the same row with zmm vectors (16 float32, 8 float64) and opmask registers: lanes
 * [lo, hi) as a bit mask, a zero-masking load and a merge-masked fused multiply-add (lanes
 * outside the mask keep acc: the blend's values, the same bits). */
#define CONVT_DW_MK512(lo, hi) ((((uint32_t) 1 << (hi)) - 1) & ~(((uint32_t) 1 << (lo)) - 1))
#define CONVT_DW_MFMA512_32(acc, wv, p, m)                                               \
    _mm512_mask3_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, p), acc, m)
#define CONVT_DW_MFMA512_64(acc, wv, p, m)                                               \
    _mm512_mask3_fmadd_pd(wv, _mm512_maskz_loadu_pd(m, p), acc, m)

CONVT_DW_ROWS(f32, _avx512, "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma", float, __m512, 16,
              _mm512_set1_ps, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_stream_ps,
              _mm512_fmadd_ps, convt_zip512_lo_ps, convt_zip512_hi_ps, __mmask16,
              (__mmask16) CONVT_DW_MK512, CONVT_DW_MFMA512_32)
CONVT_DW_ROWS(f64, _avx512, "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma", double, __m512d, 8,
              _mm512_set1_pd, _mm512_loadu_pd, _mm512_storeu_pd, _mm512_stream_pd,
              _mm512_fmadd_pd, convt_zip512_lo_pd, convt_zip512_hi_pd, __mmask8,
              (__mmask8) CONVT_DW_MK512, CONVT_DW_MFMA512_64)

#endif /* CONVT_HAVE_AVX2_PATH */

/* 1 when this build has the AVX2 row kernels (the caller still checks convt_ukernel_isa()). */
#define CONVT_DW_HAVE_AVX2 CONVT_HAVE_AVX2_PATH

/* The row kernel at level isa (2: the AVX-512 body, 1: the AVX2 one), for either dtype. */
#if CONVT_HAVE_AVX2_PATH
#define CONVT_DW_PICK(NAME, ...)                                                         \
    do {                                                                                 \
        if (isa >= 2)                                                                    \
            NAME##_avx512(__VA_ARGS__);                                                  \
        else                                                                             \
            NAME##_avx2(__VA_ARGS__);                                                    \
    } while (0)
#else
#define CONVT_DW_PICK(NAME, ...) (void) isa
#endif

#if CONVT_HAVE_AVX2_PATH
#define CONVT_DW_PICK4(NAME, ...) (row4 >= 2 ? NAME##_avx512(__VA_ARGS__) : NAME##_avx2(__VA_ARGS__))
#else
#define CONVT_DW_PICK4(NAME, y, qa, ...) (qa)
#endif

/* Stride 2 with 4 taps a phase: CONVT_DW_ROW4 takes what its blocks hold at level row4 (its
 * own: _cpu's "depthwise_row4"; 0: off, the tests' A/B), the generic row the rest at isa. */
#define CONVT_DW_DISPATCH(NAME, NAME4, T)                                                \
static inline void NAME(int isa, int row4, T* y, int64_t s2, int64_t qa, const int64_t* qe, \
                        const int64_t* lo, const int64_t* hi, const int64_t* nt,         \
                        const T* x, const int64_t* off, const int64_t* e, const T* w,    \
                        int64_t I2, T b, int64_t nrows, int64_t xstep, int64_t ystep,    \
                        int stream)                                                      \
{                                                                                        \
    uintptr_t sl, sh;                                                                    \
    int k16 = convt_dw_stream_kind(stream, y + s2 * qa, y + s2 * qa, &sl, &sh);          \
    /* kind-1 bodies stream both kinds: for a first row of kind 1, and for rows whose    \
     * kinds differ (a pitch off whole lines) */                                         \
    int nt16 = k16 == 1 || (k16 == 2 && nrows > 1 && (ystep * (int64_t) sizeof(T)) % 64 != 0); \
    if (row4 >= 1 && s2 == 2 && nt[0] == 4 && nt[1] == 4) {                             \
        if (nt16)                                                                        \
            qa = CONVT_DW_PICK4(NAME4##_nt16, y, qa, qe, lo, hi, x, off, e, w, I2, b, nrows, \
                                xstep, ystep, stream);                                   \
        else                                                                             \
            qa = CONVT_DW_PICK4(NAME4, y, qa, qe, lo, hi, x, off, e, w, I2, b, nrows,    \
                                xstep, ystep, stream);                                   \
        if (qa >= qe[0])                                                                 \
            return;                                                                      \
    }                                                                                    \
    if (nt16)                                                                            \
        CONVT_DW_PICK(NAME##_nt16, y, s2, qa, qe, lo, hi, nt, x, off, e, w, I2, b, nrows, \
                      xstep, ystep, stream);                                             \
    else                                                                                 \
        CONVT_DW_PICK(NAME, y, s2, qa, qe, lo, hi, nt, x, off, e, w, I2, b, nrows, xstep, \
                      ystep, stream);                                                    \
}
CONVT_DW_DISPATCH(convt_dw_row_f32, convt_dw_row4_f32, float)
CONVT_DW_DISPATCH(convt_dw_row_f64, convt_dw_row4_f64, double)


#endif /* CONVT_DWKERNEL_H */
