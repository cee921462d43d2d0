/* A 16-bit run rounded from float32 with its whole 64-byte lines streamed past the caches:
 * _half.h's narrowing for outputs larger than the caches, where a plainly stored line is first
 * read for ownership (twice the traffic). The depthwise kernel's 16-bit rows use it
 * (convt/_kernels/_depthwise.pyx); _half.h itself stays as it is (its bodies do the rounding).
 *
 * convt_narrow_stream(isa, kind, src, dst, n): dst[i] = narrow(src[i]), i < n, the bits of
 * _half.h's convt_narrow. Each whole line's 32 values are narrowed by _half.h's vector bodies
 * into a line on the stack, then streamed in the vectors they were stored in (so every load is
 * forwarded from one store); the partial lines at either end are stored plainly. The caller
 * fences (_isa.h's convt_store_fence) before other threads read dst.
 */
#ifndef CONVT_HALFSTREAM_H
#define CONVT_HALFSTREAM_H

#include <stdint.h>

#include "_half.h"
#include "_isa.h"

#if CONVT_HAVE_AVX2_PATH
/* lines whole 64-byte lines: src[32 i + j] narrowed to dst[32 i + j] (dst 64-byte aligned) */
__attribute__((target(CONVT_AVX512_TARGET)))
static void convt_narrow_lines_stream_avx512(int kind, const float* src, uint16_t* dst,
                                             int64_t lines)
{
    uint16_t line[32] __attribute__((aligned(64)));
    int64_t i;
    for (i = 0; i < lines; i++, src += 32, dst += 32) {
        convt_narrow16_avx512(kind, _mm512_loadu_ps(src), line);
        convt_narrow16_avx512(kind, _mm512_loadu_ps(src + 16), line + 16);
        _mm256_stream_si256((__m256i*) dst, _mm256_load_si256((const __m256i*) line));
        _mm256_stream_si256((__m256i*) (dst + 16),
                            _mm256_load_si256((const __m256i*) (line + 16)));
    }
}

__attribute__((target("avx2,f16c")))
static void convt_narrow_lines_stream_avx2(int kind, const float* src, uint16_t* dst,
                                           int64_t lines)
{
    uint16_t line[32] __attribute__((aligned(64)));
    int64_t i;
    int j;
    for (i = 0; i < lines; i++, src += 32, dst += 32) {
        for (j = 0; j < 32; j += 8)
            convt_narrow8_avx2(kind, _mm256_loadu_ps(src + j), line + j);
        for (j = 0; j < 32; j += 8)
            _mm_stream_si128((__m128i*) (dst + j), _mm_load_si128((const __m128i*) (line + j)));
    }
}
#endif

/* isa: the level for float16 already lowered to 0 without F16C (_half.level) */
static inline void convt_narrow_stream(int isa, int kind, const float* src, uint16_t* dst,
                                       int64_t n)
{
#if CONVT_HAVE_AVX2_PATH
    uintptr_t a = (uintptr_t) dst;
    if (isa >= 1 && (a & 1) == 0) {
        int64_t i = (int64_t) (((64 - (a & 63)) & 63) / 2), lines;
        i = i < n ? i : n;
        lines = (n - i) / 32;
        convt_narrow(isa, kind, src, dst, i);
        if (isa >= 2)
            convt_narrow_lines_stream_avx512(kind, src + i, dst + i, lines);
        else
            convt_narrow_lines_stream_avx2(kind, src + i, dst + i, lines);
        i += 32 * lines;
        convt_narrow(isa, kind, src + i, dst + i, n - i);
        return;
    }
#endif
    convt_narrow(isa, kind, src, dst, n);
}

#endif /* CONVT_HALFSTREAM_H */
