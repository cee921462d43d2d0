/* A portable C emulation of the AMX instructions the AMX-BF16 tiles use (_amxkernel.h,
 * which includes this file when CONVT_AMX_EMU is defined: the extension _amxemu). Needs
 * _amxkernel.h's convt_amx_config_error. */
#ifndef CONVT_AMXEMU_H
#define CONVT_AMXEMU_H

#include <stdint.h>
#include <string.h>

/* ---- The emulation: the instructions' documented semantics, in portable C. ----
 * Source: Intel 64 and IA-32 Architectures Software Developer's Manual, vol. 2, the pages
 * LDTILECFG, TILELOADD, TILESTORED, TILEZERO, TILERELEASE and TDPBF16PS ("Operation"), and
 * the exception classes AMX-E1 to AMX-E5 ("Intel AMX Instruction Exception Classes"):
 * - the tile state is per thread (here thread-local), zeroed by LDTILECFG and TILERELEASE;
 * - an instruction on an unconfigured state, on a tile whose rows or colsb are 0, or
 *   (TDPBF16PS) with two equal tile operands, colsb not a multiple of 4, C.colsb != B.colsb,
 *   C.rows != A.rows, A.colsb / 4 != B.rows, or more than 16 columns of C or 16 pairs of K,
 *   is #UD; an invalid configuration is #GP (convt_amx_config_error). Hardware dies there;
 *   the emulation records the first fault (convt_amxemu_take_fault) and skips the
 *   instruction;
 * - TILELOADD reads rows start_row..rows-1, colsb bytes each at base + row * stride, and
 *   zeroes the rest of the tile; TILESTORED writes the same bytes back;
 * - TDPBF16PS, per row m of C and column n: two float32 sums, of the even and of the odd
 *   elements of the pairs, each step an FMA with DAZ and FTZ in round-to-nearest-even
 *   (MXCSR ignored), over k = 0 .. A.colsb/4 - 1; then C[m][n] += (even + odd), both
 *   additions with DAZ, FTZ and RNE. */
#include <math.h>
#include <stdio.h>

typedef struct {
    float data_f32[8][16][16];   /* the tiles' bytes (first: float32-aligned), as ... */
    int configured;
    uint8_t start_row;
    uint16_t colsb[8];
    uint8_t rows[8];
} convt_amxemu_state;
#define CONVT_AMXEMU_ROW(t, r) ((uint8_t*) convt_amxemu.data_f32[t][r])   /* ... bytes */

static __thread convt_amxemu_state convt_amxemu;
static int convt_amxemu_faults;
/* the 16-row halves of A the kernel classified (convt_amx_rows): no data, read in place,
 * gathered: counted, for the tests and docs/performance.md */
static int64_t convt_amxemu_halves[3];
static char convt_amxemu_text[160];

static void convt_amxemu_fault(const char* op, int tile, const char* what)
{
    if (__atomic_fetch_add(&convt_amxemu_faults, 1, __ATOMIC_SEQ_CST) != 0)
        return;
    if (tile < 0)
        snprintf(convt_amxemu_text, sizeof convt_amxemu_text, "%s: %s", op, what);
    else
        snprintf(convt_amxemu_text, sizeof convt_amxemu_text, "%s tmm%d: %s", op, tile, what);
}

/* The first fault since the last call (NULL if none), and the count is reset. Call it
 * outside the parallel region. */
static const char* convt_amxemu_take_fault(void)
{
    int n = __atomic_exchange_n(&convt_amxemu_faults, 0, __ATOMIC_SEQ_CST);
    return n ? convt_amxemu_text : NULL;
}

static int convt_amxemu_valid(const char* op, int t)
{
    if (!convt_amxemu.configured) {
        convt_amxemu_fault(op, t, "#UD, tiles not configured");
        return 0;
    }
    if (t < 0 || t > 7 || convt_amxemu.rows[t] == 0) {
        convt_amxemu_fault(op, t, "#UD, not a configured tile");
        return 0;
    }
    if (convt_amxemu.colsb[t] % 4) {
        convt_amxemu_fault(op, t, "#UD, colsb not a multiple of 4");
        return 0;
    }
    return 1;
}

static void convt_amxemu_loadconfig(const void* cfg)
{
    const uint8_t* b = (const uint8_t*) cfg;
    int n;
    if (convt_amx_config_error(cfg) != NULL) {
        convt_amxemu_fault("ldtilecfg", -1, convt_amx_config_error(cfg));
        return;
    }
    memset(&convt_amxemu, 0, sizeof convt_amxemu);
    if (b[0] == 0)
        return;
    convt_amxemu.configured = 1;
    convt_amxemu.start_row = b[1];
    for (n = 0; n < 8; n++) {
        convt_amxemu.colsb[n] = (uint16_t) (b[16 + 2 * n] | (b[17 + 2 * n] << 8));
        convt_amxemu.rows[n] = b[48 + n];
    }
}

static void convt_amxemu_release(void)
{
    memset(&convt_amxemu, 0, sizeof convt_amxemu);
}

static void convt_amxemu_zero(int t)
{
    if (convt_amxemu_valid("tilezero", t))
        memset(convt_amxemu.data_f32[t], 0, sizeof convt_amxemu.data_f32[t]);
}

static void convt_amxemu_load(int t, const void* base, int64_t stride)
{
    int r, r0 = convt_amxemu.start_row;
    if (!convt_amxemu_valid("tileloadd", t))
        return;
    if (r0 >= convt_amxemu.rows[t]) {
        convt_amxemu_fault("tileloadd", t, "#UD, start_row not below rows");
        return;
    }
    for (r = 0; r < 16; r++) {
        memset(CONVT_AMXEMU_ROW(t, r), 0, 64);
        if (r >= r0 && r < convt_amxemu.rows[t])
            memcpy(CONVT_AMXEMU_ROW(t, r), (const uint8_t*) base + r * stride,
                   convt_amxemu.colsb[t]);
    }
    convt_amxemu.start_row = 0;
}

static void convt_amxemu_store(int t, void* base, int64_t stride)
{
    int r;
    if (!convt_amxemu_valid("tilestored", t))
        return;
    if (convt_amxemu.start_row >= convt_amxemu.rows[t]) {
        convt_amxemu_fault("tilestored", t, "#UD, start_row not below rows");
        return;
    }
    for (r = convt_amxemu.start_row; r < convt_amxemu.rows[t]; r++)
        memcpy((uint8_t*) base + r * stride, CONVT_AMXEMU_ROW(t, r), convt_amxemu.colsb[t]);
    convt_amxemu.start_row = 0;
}

/* float32 with denormals as (signed) zero: DAZ on an input, FTZ on a result */
static inline float convt_amxemu_flush(float v)
{
    return fpclassify(v) == FP_SUBNORMAL ? copysignf(0.f, v) : v;
}

/* make_fp32: the bfloat16 at p as the high half of a float32 */
static inline float convt_amxemu_f32(const uint8_t* p)
{
    uint16_t v;
    uint32_t u;
    float f;
    memcpy(&v, p, 2);
    u = (uint32_t) v << 16;
    memcpy(&f, &u, 4);
    return f;
}

static void convt_amxemu_dpbf16ps(int c, int a, int b)
{
    int m, k, n, nn, kk;
    float even[16], odd[16];
    if (!convt_amxemu_valid("tdpbf16ps", c) || !convt_amxemu_valid("tdpbf16ps", a)
            || !convt_amxemu_valid("tdpbf16ps", b))
        return;
    if (c == a || c == b || a == b) {
        convt_amxemu_fault("tdpbf16ps", c, "#UD, two operands are the same tile");
        return;
    }
    nn = convt_amxemu.colsb[c] / 4;
    kk = convt_amxemu.colsb[a] / 4;
    if (convt_amxemu.colsb[c] != convt_amxemu.colsb[b] || convt_amxemu.rows[c] != convt_amxemu.rows[a]
            || kk != convt_amxemu.rows[b]) {
        convt_amxemu_fault("tdpbf16ps", c, "#UD, tile shapes do not match (C m x n, A m x k, "
                           "B k x n)");
        return;
    }
    if (nn > 16 || kk > 16) {
        convt_amxemu_fault("tdpbf16ps", c, "#UD, more than 16 columns or 16 pairs");
        return;
    }
    for (m = 0; m < convt_amxemu.rows[c]; m++) {
        float* cm = convt_amxemu.data_f32[c][m];
        for (n = 0; n < nn; n++)
            even[n] = odd[n] = 0.f;
        for (k = 0; k < kk; k++) {
            const uint8_t* ar = CONVT_AMXEMU_ROW(a, m) + 4 * k;
            float a0 = convt_amxemu_flush(convt_amxemu_f32(ar));
            float a1 = convt_amxemu_flush(convt_amxemu_f32(ar + 2));
            for (n = 0; n < nn; n++) {
                const uint8_t* br = CONVT_AMXEMU_ROW(b, k) + 4 * n;
                float b0 = convt_amxemu_flush(convt_amxemu_f32(br));
                float b1 = convt_amxemu_flush(convt_amxemu_f32(br + 2));
                even[n] = convt_amxemu_flush(fmaf(a0, b0, even[n]));
                odd[n] = convt_amxemu_flush(fmaf(a1, b1, odd[n]));
            }
        }
        for (n = 0; n < nn; n++) {
            float sum = convt_amxemu_flush(even[n] + odd[n]);
            cm[n] = convt_amxemu_flush(convt_amxemu_flush(cm[n]) + sum);
        }
        memset(CONVT_AMXEMU_ROW(c, m) + 4 * nn, 0, 64 - 4 * nn);
    }
    for (m = convt_amxemu.rows[c]; m < 16; m++)
        memset(CONVT_AMXEMU_ROW(c, m), 0, 64);
    convt_amxemu.start_row = 0;
}

#endif /* CONVT_AMXEMU_H */
