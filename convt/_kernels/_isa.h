/* Run-time instruction-set selection, shared by the kernels' headers.
 *
 * convt is built for the platform baseline (no -march=native: a wheel must run on any CPU of
 * its platform tag), so every AVX2 and AVX-512 body is compiled with a target attribute and
 * called only when the process's ISA level (convt._kernels._cpu.ISA: this CPU's, capped by
 * CONVT_ISA) allows it; the portable C bodies run otherwise. The kernels take the level as an
 * argument, so tests can force any level up to the CPU's. A body written for a level runs at
 * every higher one (the checks are isa >= level).
 *
 * Levels (as oneDNN's ONEDNN_MAX_CPU_ISA): 0 portable C; 1 AVX2 + FMA; 2 AVX-512
 * F/BW/DQ/VL; 3 that plus AMX-TILE and AMX-BF16 with the tile state granted by the OS.
 * AVX512-BF16 (vdpbf16ps: convt_cpu_bf16) is a feature on top of level 2, not a level: Zen 4
 * has it without AMX, and Sapphire Rapids has both.
 */
#ifndef CONVT_ISA_H
#define CONVT_ISA_H

#include <stdint.h>

#define CONVT_ISA_GENERIC 0
#define CONVT_ISA_AVX2 1
#define CONVT_ISA_AVX512 2
#define CONVT_ISA_AVX512_AMX 3

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CONVT_HAVE_AVX2_PATH 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define CONVT_HAVE_AVX2_PATH 0
#endif

#if CONVT_HAVE_AVX2_PATH && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if CONVT_HAVE_AVX2_PATH
/* XCR0: the register state the OS saves on a context switch. CPUID says what the core can do;
 * only the state the OS enabled here may be used (Intel SDM vol. 1, 13.3 and 15.2). */
static inline uint64_t convt_xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t) hi << 32) | lo;
}

#define CONVT_XCR0_YMM 0x6u          /* SSE + AVX state */
#define CONVT_XCR0_ZMM 0xe6u         /* ... + opmask, ZMM_Hi256, Hi16_ZMM */
#define CONVT_XCR0_TILE (3u << 17)   /* XTILECFG + XTILEDATA */

/* Linux >= 5.16 enables the AMX tile data state per process on request: the first tile
 * instruction without it is SIGILL (arch/x86/include/uapi/asm/prctl.h, ARCH_REQ_XCOMP_PERM). */
static int convt_amx_permit(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                   18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return 0;
#endif
}
#endif

/* The highest level, at most cap, that this CPU and its OS support. The AMX tile state is
 * requested from the OS only when cap allows level 3. */
static int convt_cpu_isa(int cap)
{
#if CONVT_HAVE_AVX2_PATH
    unsigned a, b, c, d;
    uint64_t xcr0;
    int level = 0;
    if (cap < 1 || !__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    /* FMA (c bit 12), OSXSAVE (27), AVX (28) */
    if (!((c >> 12) & 1) || !((c >> 27) & 1) || !((c >> 28) & 1))
        return 0;
    xcr0 = convt_xgetbv0();
    if ((xcr0 & CONVT_XCR0_YMM) != CONVT_XCR0_YMM || __get_cpuid_max(0, 0) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (!((b >> 5) & 1))   /* AVX2 */
        return 0;
    level = 1;
    /* AVX512 F (b bit 16), DQ (17), BW (30), VL (31) */
    if (cap < 2 || !((b >> 16) & 1) || !((b >> 17) & 1) || !((b >> 30) & 1) || !((b >> 31) & 1)
            || (xcr0 & CONVT_XCR0_ZMM) != CONVT_XCR0_ZMM)
        return level;
    level = 2;
    /* AMX-BF16 (d bit 22), AMX-TILE (24) */
    if (cap >= 3 && ((d >> 22) & 1) && ((d >> 24) & 1)
            && (xcr0 & CONVT_XCR0_TILE) == CONVT_XCR0_TILE && convt_amx_permit())
        level = 3;
    return level;
#else
    (void) cap;
    return 0;
#endif
}

/* Whether the bfloat16 dot-product kernels (_bf16kernel.h) may run at level isa (this CPU's,
 * capped): AVX512-BF16, CPUID.(EAX=7, ECX=1):EAX bit 5, on top of level 2 (whose check
 * covers the zmm state in XCR0). Off below level 2, so CONVT_ISA=avx2 turns it off. */
static inline int convt_cpu_bf16(int isa)
{
#if CONVT_HAVE_AVX2_PATH
    unsigned a, b, c, d;
    if (isa < 2 || __get_cpuid_max(0, 0) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (a < 1)   /* the highest subleaf of leaf 7 */
        return 0;
    __cpuid_count(7, 1, a, b, c, d);
    return (a >> 5) & 1;
#else
    (void) isa;
    return 0;
#endif
}

/* 1 on a CPU that runs each 512-bit operation as two 256-bit halves through 256-bit load
 * ports: AMD family 19h (Zen 3 has no AVX-512, so Zen 4). There the zmm bodies of the
 * load-bound kernels run slower than their ymm ones (docs/performance.md, "AVX-512
 * bodies of the memory-bound kernels"), and _cpu.pyx caps those kernels at AVX2. Zen 5
 * (family 1Ah) has full-width units. */
static inline int convt_cpu_zmm_halves(void)
{
#if CONVT_HAVE_AVX2_PATH
    unsigned a, b, c, d, family;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return 0;
    /* "AuthenticAMD" in ebx, edx, ecx */
    if (b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u || !__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    family = (a >> 8) & 0xf;
    if (family == 0xf)
        family += (a >> 20) & 0xff;
    return family == 0x19;
#else
    return 0;
#endif
}

/* This CPU's level for the AVX2 kernels' callers that predate the levels: 1 with AVX2 + FMA. */
static inline int convt_ukernel_isa(void)
{
    return convt_cpu_isa(1);
}

/* Orders the calling thread's streamed (non-temporal) stores before its later stores, such
 * as an OpenMP barrier's or the task's end: after it, other threads and the caller read the
 * lines (the packs' and write-outs' streamed stores; _mm_sfence on x86). */
static inline void convt_store_fence(void)
{
#if CONVT_HAVE_AVX2_PATH
    _mm_sfence();
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* A read prefetch into L1 of the lines of rows p + i * stride, i < n, each of `bytes` bytes
 * (a kernel's next inputs, asked for while it computes on the current ones). Reads nothing,
 * changes no value; a no-op where the compiler has no prefetch builtin. */
static inline void convt_prefetch_rows(const void* p, int64_t stride, int64_t n, int64_t bytes)
{
#if defined(__GNUC__)
    const char* c = (const char*) p;
    int64_t i, o;
    for (i = 0; i < n; i++, c += stride) {
        for (o = 0; o < bytes; o += 64)
            __builtin_prefetch(c + o, 0, 3);
        __builtin_prefetch(c + bytes - 1, 0, 3);
    }
#else
    (void) p; (void) stride; (void) n; (void) bytes;
#endif
}

#endif /* CONVT_ISA_H */
