/* Run-time instruction-set selection, shared by the kernels' headers.
 *
 * convt is built for the platform baseline (no -march=native: a wheel must run on any CPU of
 * its platform tag), so every AVX2 body is compiled with a target attribute and called only
 * when the running CPU has AVX2 and FMA (convt_ukernel_isa() == 1); the portable C bodies run
 * otherwise. The kernels take the ISA as an argument, so tests can force the portable path.
 */
#ifndef CONVT_ISA_H
#define CONVT_ISA_H

#include <stdint.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CONVT_HAVE_AVX2_PATH 1
#include <immintrin.h>
#else
#define CONVT_HAVE_AVX2_PATH 0
#endif

/* 0: portable C; 1: AVX2 + FMA. */
static inline int convt_ukernel_isa(void)
{
#if CONVT_HAVE_AVX2_PATH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
#endif
    return 0;
}

#endif /* CONVT_ISA_H */
