/* The AMX-BF16 tiles of the bfloat16 micro variant (convt._backends.direct.micro_amx): the
 * micro variant's phases and tasks (_micro.pyx, _tile.pxd's _tile_amx), with each block of 32
 * output pixels x 16 or 32 output channels computed by tdpbf16ps on tile registers:
 *
 *     C[i][j] (+)= sum over taps t, pairs p of  a_i[2p] * b[t][p][j][0] + a_i[2p+1] * b[t][p][j][1]
 *
 * C: two 16-row tiles (rows 0-15 and 16-31 of the block) times one or two 16-column tiles of
 * float32 (tmm0-tmm3); A: per tap and 16 pairs of input channels, a 16-row x 64-byte tile of
 * bfloat16 pairs per half (tmm4, tmm5), loaded with tileloadd straight from the channels-last
 * input when the 16 rows' pixels are equally spaced (the row stride is the pixel stride),
 * otherwise from a gathered copy (rows at the edges of the data, or across an output line);
 * B: 16 pair-rows of the packed weights, [Cg2/2][NR][2] as micro_bf16 packs them (tmm6,
 * tmm7 for the second 16 columns when NR = 32). One tile configuration serves every call:
 * palette 1, all eight tiles 16 rows x 64 bytes. Tails: rows past the phase's last point at
 * the zero vector (the caller's tile memory holds whole 32-row blocks); the last chunk's
 * pairs past a multiple of 16 come from the gathered copy, zero-padded, so the weights' rows
 * they meet (the next pairs' lines, or the zeros padding the packed array) add 0 x finite.
 *
 * The kernel is written against a thin macro layer (CONVT_AMX_LOAD, _STORE, _ZERO, _DP,
 * _LOADCONFIG, _RELEASE). Built normally, the layer is the AMX instructions (GCC's
 * <immintrin.h> intrinsics, under a target attribute: the build stays portable), run only at
 * ISA level 3 (_isa.h). Built with CONVT_AMX_EMU defined (the extension _amxemu), the same
 * source runs on a portable C emulation of the instructions that checks every access as the
 * hardware does (below), so the kernel is tested on machines without AMX.
 */
#ifndef CONVT_AMXKERNEL_H
#define CONVT_AMXKERNEL_H

#include <stdint.h>
#include <string.h>

#include "_isa.h"

#define CONVT_AMX_ROWS 32      /* output pixels of a block: two 16-row tiles */
#define CONVT_AMX_KC 256       /* most pairs x taps of a block's gathered copy (taps x pairs
                                  rounded up to 16): convt._backends.direct.micro_amx blocks so */
#define CONVT_AMX_STEPS (CONVT_AMX_KC / 16)

/* The 64-byte tile configuration (Intel SDM vol. 2, LDTILECFG, "Memory Area Layout"). */
typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved0[14];
    uint16_t colsb[16];        /* tiles 0-7, then reserved (bytes 32-47) */
    uint8_t rows[16];          /* tiles 0-7, then reserved (bytes 56-63) */
} convt_amx_cfg;

/* The configuration the kernel loads: palette 1, tiles 0-7 of 16 rows x 64 bytes. */
static inline void convt_amx_config(convt_amx_cfg* cfg)
{
    int n;
    memset(cfg, 0, sizeof *cfg);
    cfg->palette = 1;
    for (n = 0; n < 8; n++) {
        cfg->colsb[n] = 64;
        cfg->rows[n] = 16;
    }
}

/* NULL if LDTILECFG accepts the 64 bytes at cfg, else why it raises #GP (Intel SDM vol. 2,
 * LDTILECFG "Operation"; palette 1: 8 tiles, at most 64 bytes a row and 16 rows). Palette 0
 * (the INIT state) is valid. */
static inline const char* convt_amx_config_error(const void* cfg)
{
    const uint8_t* b = (const uint8_t*) cfg;
    int n, i;
    if (b[0] > 1)
        return "palette_id above the only palette, 1";
    if (b[0] == 0)
        return NULL;
    for (i = 2; i < 16; i++)
        if (b[i])
            return "reserved byte 2-15 nonzero";
    for (i = 32; i < 48; i++)
        if (b[i])
            return "reserved byte 32-47 (colsb of tiles 8-15) nonzero";
    for (i = 56; i < 64; i++)
        if (b[i])
            return "reserved byte 56-63 (rows of tiles 8-15) nonzero";
    for (n = 0; n < 8; n++) {
        unsigned colsb = (unsigned) b[16 + 2 * n] | ((unsigned) b[17 + 2 * n] << 8);
        unsigned rows = b[48 + n];
        if (colsb > 64)
            return "colsb above 64 bytes";
        if (rows > 16)
            return "rows above 16";
        if ((rows == 0) != (colsb == 0))
            return "a tile with rows or colsb zero but not both";
    }
    return NULL;
}

#if defined(CONVT_AMX_EMU)
#include "_amxemu.h"

#define CONVT_AMX_AVAILABLE 1
#define CONVT_AMX_TARGET
#define CONVT_AMX_BARRIER() ((void) 0)
#define CONVT_AMX_LOADCONFIG(cfg) convt_amxemu_loadconfig(cfg)
#define CONVT_AMX_RELEASE() convt_amxemu_release()
#define CONVT_AMX_ZERO(t) convt_amxemu_zero(t)
#define CONVT_AMX_LOAD(t, base, stride) convt_amxemu_load(t, base, stride)
#define CONVT_AMX_STORE(t, base, stride) convt_amxemu_store(t, base, stride)
#define CONVT_AMX_DP(c, a, b) convt_amxemu_dpbf16ps(c, a, b)
#define CONVT_AMX_COUNT(kind) __atomic_fetch_add(&convt_amxemu_halves[kind], 1, __ATOMIC_RELAXED)

#elif CONVT_HAVE_AVX2_PATH && defined(__x86_64__)
/* ---- The instructions. GCC's intrinsics are asm statements that name no memory: the
 * barrier makes the gathered copies and the tile memory visible to them. ---- */
#define CONVT_AMX_AVAILABLE 1
#define CONVT_AMX_TARGET \
    __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl")))
#define CONVT_AMX_BARRIER() __asm__ __volatile__("" ::: "memory")
#define CONVT_AMX_LOADCONFIG(cfg) _tile_loadconfig(cfg)
#define CONVT_AMX_RELEASE() _tile_release()
#define CONVT_AMX_ZERO(t) _tile_zero(t)
#define CONVT_AMX_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define CONVT_AMX_STORE(t, base, stride) _tile_stored(t, base, stride)
#define CONVT_AMX_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#define CONVT_AMX_COUNT(kind) ((void) 0)

#else
#define CONVT_AMX_AVAILABLE 0
#endif

#if CONVT_AMX_AVAILABLE
/* The thread's tile state for a run of blocks (configured here; released by convt_amx_end,
 * at the end of each call of _tile_amx: the OS then need not save 8 KiB of tile data). */
CONVT_AMX_TARGET static void convt_amx_begin(void)
{
    convt_amx_cfg cfg;
    convt_amx_config(&cfg);
    CONVT_AMX_BARRIER();
    CONVT_AMX_LOADCONFIG(&cfg);
}

CONVT_AMX_TARGET static void convt_amx_end(void)
{
    CONVT_AMX_RELEASE();
}

/* One panel: C's 32 x 16 nb block at c (rows ldc floats apart), loaded (acc) or zeroed, plus
 * ns steps, each A's two 16-row halves (a[2s], a[2s + 1], row strides astr in bytes) times
 * the B tile at b + boff[s] (rows bstr bytes apart; the second 16 columns 64 bytes on). */
CONVT_AMX_TARGET static void convt_amx_panel(int nb, int64_t ns, const char* const* a,
                                             const int64_t* astr, const char* b,
                                             const int64_t* boff, int64_t bstr, float* c,
                                             int64_t ldc, int acc)
{
    int64_t s, cs = ldc * (int64_t) sizeof(float);
    CONVT_AMX_BARRIER();
    if (acc) {
        CONVT_AMX_LOAD(0, c, cs);
        CONVT_AMX_LOAD(1, c + 16 * ldc, cs);
        if (nb == 2) {
            CONVT_AMX_LOAD(2, c + 16, cs);
            CONVT_AMX_LOAD(3, c + 16 * ldc + 16, cs);
        }
    } else {
        CONVT_AMX_ZERO(0);
        CONVT_AMX_ZERO(1);
        CONVT_AMX_ZERO(2);
        CONVT_AMX_ZERO(3);
    }
    if (nb == 2) {
        for (s = 0; s < ns; s++) {
            CONVT_AMX_LOAD(4, a[2 * s], astr[2 * s]);
            CONVT_AMX_LOAD(5, a[2 * s + 1], astr[2 * s + 1]);
            CONVT_AMX_LOAD(6, b + boff[s], bstr);
            CONVT_AMX_LOAD(7, b + boff[s] + 64, bstr);
            CONVT_AMX_DP(0, 4, 6);
            CONVT_AMX_DP(1, 5, 6);
            CONVT_AMX_DP(2, 4, 7);
            CONVT_AMX_DP(3, 5, 7);
        }
    } else {
        for (s = 0; s < ns; s++) {
            CONVT_AMX_LOAD(4, a[2 * s], astr[2 * s]);
            CONVT_AMX_LOAD(5, a[2 * s + 1], astr[2 * s + 1]);
            CONVT_AMX_LOAD(6, b + boff[s], bstr);
            CONVT_AMX_DP(0, 4, 6);
            CONVT_AMX_DP(1, 5, 6);
        }
    }
    CONVT_AMX_STORE(0, c, cs);
    CONVT_AMX_STORE(1, c + 16 * ldc, cs);
    if (nb == 2) {
        CONVT_AMX_STORE(2, c + 16, cs);
        CONVT_AMX_STORE(3, c + 16 * ldc + 16, cs);
    }
}
#endif

/* 16 rows' pointers p (into x, or all at zero): 0 if every row reads zero, 1 if the rows'
 * pixels are equally spaced (*stride bytes, >= 0; every row at zero counts, stride 0), else
 * 2 (they are gathered). */
static int convt_amx_rows(const float* const* p, const float* zero, int64_t* stride)
{
    int64_t d;
    int i, nz = 0;
    for (i = 0; i < 16; i++)
        nz += p[i] == zero;
    if (nz == 16) {
        *stride = 0;
        return 0;
    }
    if (nz)
        return 2;
    d = (const char*) p[1] - (const char*) p[0];
    if (d < 0)
        return 2;
    for (i = 2; i < 16; i++)
        if ((const char*) p[i] - (const char*) p[0] != i * d)
            return 2;
    *stride = d;
    return 1;
}

/* 16 rows of pairs [from, kc) of rows p (each at offset aoff, in pair slots) into dst (rows
 * kpad slots apart), zeros up to kpad. */
static void convt_amx_gather(const float* const* p, int64_t aoff, int64_t from, int64_t kc,
                             int64_t kpad, uint32_t* dst)
{
    int i;
    for (i = 0; i < 16; i++) {
        uint32_t* row = dst + i * kpad;
        if (kc > from)
            memcpy(row + from, p[i] + aoff + from, (size_t) (kc - from) * 4);
        if (kpad > kc)
            memset(row + (kc > from ? kc : from), 0, (size_t) (kpad - (kc > from ? kc : from)) * 4);
    }
}

/* One block of _tile_amx: rows 0..mpad-1 (mpad a multiple of 32) of the phase's tile t (rows
 * ldc floats apart, NP panels of NR = 16 or 32 columns per group), taps t0..t0+nt of the
 * phase (row pointers ptr[u * mpad + i], into the channels-last pairs or at zero), pairs
 * c0..c0+kc (kc <= CONVT_AMX_KC) of each of G groups of Cg; wph: the phase's packed weights,
 * [G][NP][tap][Cg][NR] pair slots (T taps), followed by at least 16 * NR slots of finite
 * values (convt._backends.direct.micro_amx pads the array with zeros); first: initialise
 * the tile, else accumulate. Taps no row of a 32-row block reads data for are skipped. */
static void convt_amx_block(const float* const* ptr, const float* zero, int64_t nt,
                            int64_t mpad, int64_t kc, int64_t c0, const float* wph, int64_t T,
                            int64_t t0, int64_t Cg, int64_t G, int64_t NP, int64_t NR,
                            float* t, int64_t ldc, int first)
{
#if CONVT_AMX_AVAILABLE
    uint32_t scratch[2 * 16 * CONVT_AMX_KC] __attribute__((aligned(64)));
    const char* a[2 * CONVT_AMX_STEPS];
    int64_t astr[2 * CONVT_AMX_STEPS], boff[CONVT_AMX_STEPS];
    int64_t kpad = (kc + 15) / 16 * 16, nfull = kc / 16, nk = kpad / 16;
    int64_t tg = CONVT_AMX_KC / kpad, r, g, u0, u, h, k, jp, s, aoff, str[2];
    int nb = NR > 16 ? 2 : 1, kind[2], init;
    for (r = 0; r < mpad; r += CONVT_AMX_ROWS) {
        for (g = 0; g < G; g++) {
            aoff = g * Cg + c0;
            for (u0 = 0; u0 < nt; u0 += tg) {   /* as many taps as the copy holds */
                init = first && u0 == 0;
                s = 0;
                for (u = u0; u < nt && u < u0 + tg; u++) {
                    const float* const* pu = ptr + u * mpad + r;
                    kind[0] = convt_amx_rows(pu, zero, &str[0]);
                    kind[1] = convt_amx_rows(pu + 16, zero, &str[1]);
                    CONVT_AMX_COUNT(kind[0]);
                    CONVT_AMX_COUNT(kind[1]);
                    if (kind[0] == 0 && kind[1] == 0)
                        continue;
                    for (h = 0; h < 2; h++) {
                        uint32_t* sc = scratch + ((u - u0) * 2 + h) * 16 * kpad;
                        if (kind[h] == 2 || nfull < nk)
                            convt_amx_gather(pu + 16 * h, aoff, kind[h] == 2 ? 0 : nfull * 16,
                                             kc, kpad, sc);
                        for (k = 0; k < nk; k++) {
                            int direct = kind[h] != 2 && k < nfull;
                            a[2 * (s + k) + h] = direct
                                ? (const char*) (pu[16 * h] + aoff + 16 * k)
                                : (const char*) (sc + 16 * k);
                            astr[2 * (s + k) + h] = direct ? str[h] : kpad * 4;
                        }
                    }
                    for (k = 0; k < nk; k++)
                        boff[s + k] = (u * Cg + 16 * k) * NR * 4;
                    s += nk;
                }
                if (s == 0 && !init)
                    continue;
                for (jp = 0; jp < NP; jp++)
                    convt_amx_panel(nb, s, a, astr,
                                    (const char*) (wph + ((g * NP + jp) * T + t0) * Cg * NR
                                                   + c0 * NR),
                                    boff, NR * 4, t + r * ldc + (g * NP + jp) * NR, ldc, !init);
            }
        }
    }
#else
    (void) ptr; (void) zero; (void) nt; (void) mpad; (void) kc; (void) c0; (void) wph;
    (void) T; (void) t0; (void) Cg; (void) G; (void) NP; (void) NR; (void) t; (void) ldc;
    (void) first;
#endif
}

#if !CONVT_AMX_AVAILABLE
/* No AMX path on this platform: level 3 never occurs, so these are never called. */
static void convt_amx_begin(void) {}
static void convt_amx_end(void) {}
#endif

#endif /* CONVT_AMXKERNEL_H */
