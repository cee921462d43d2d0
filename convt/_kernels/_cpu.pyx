"""The instruction-set level every compiled kernel runs at, and the machine's FMA peak.

One decision per process, made at import: this CPU's level (CPUID and the register state the
OS enabled, XCR0: _isa.h), capped by the environment variable ``CONVT_ISA`` as oneDNN's
``ONEDNN_MAX_CPU_ISA`` caps oneDNN's. ``ISA`` holds it; the direct backend's variant rule and
every kernel call read it at call time (a test may set it lower for one test). Levels:
0 ``generic`` (portable C), 1 ``avx2`` (AVX2 + FMA), 2 ``avx512`` (AVX-512 F/BW/DQ/VL),
3 ``avx512_amx`` (that plus AMX-TILE and AMX-BF16, the tile state granted by Linux).
``BF16``: whether the bfloat16 dot-product tiles (AVX512-BF16, ``vdpbf16ps``: _bf16kernel.h)
run, a feature on top of level 2 that the cap turns off with the level (``bf16(level)``).

``fma_peak(threads)``: float32 GFLOP/s of a register-only FMA loop at the widest vector the
level has (a few ms, cached per process; never run at import).
"""
import os
import time
import warnings

from cython.parallel cimport prange

cdef extern from "_isa.h" nogil:
    int convt_cpu_isa(int cap)
    int convt_cpu_bf16(int isa)
    int convt_cpu_zmm_halves()

cdef extern from *:
    """
    #include "_isa.h"
    #if CONVT_HAVE_AVX2_PATH
    /* acc = acc * m + a, N independent chains (Zen 4 and Golden Cove: 2 FMA pipes of 4
     * cycles' latency, so at least 8 in flight); fused, no reassociation: nothing folds. */
    #define CONVT_PEAK_BODY(V, SET1, FMA, ADD, N)                                              \\
        V acc[N], m = SET1(0.999999f), a = SET1(1e-7f);                                     \\
        int64_t i; int j;                                                                    \\
        for (j = 0; j < N; j++) acc[j] = SET1((float) j);                                   \\
        for (i = 0; i < iters; i++) {                                                        \\
            _Pragma("GCC unroll 16")                                                         \\
            for (j = 0; j < N; j++) acc[j] = FMA(acc[j], m, a);                             \\
        }                                                                                    \\
        for (j = 1; j < N; j++) acc[0] = ADD(acc[0], acc[j]);
    __attribute__((target("avx2,fma")))
    static float convt_peak_avx2(int64_t iters)
    {
        CONVT_PEAK_BODY(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 12)
        return _mm256_cvtss_f32(acc[0]);
    }
    __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
    static float convt_peak_avx512(int64_t iters)
    {
        CONVT_PEAK_BODY(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16)
        return _mm512_cvtss_f32(acc[0]);
    }
    #define CONVT_PEAK_FLOPS_AVX2 (12 * 8 * 2)
    #define CONVT_PEAK_FLOPS_AVX512 (16 * 16 * 2)
    static float convt_peak(int level, int64_t iters)
    {
        return level >= 2 ? convt_peak_avx512(iters) : convt_peak_avx2(iters);
    }
    static int64_t convt_peak_flops(int level)
    {
        return level >= 2 ? CONVT_PEAK_FLOPS_AVX512 : CONVT_PEAK_FLOPS_AVX2;
    }
    #else
    static float convt_peak(int level, int64_t iters) { (void) level; (void) iters; return 0.f; }
    static int64_t convt_peak_flops(int level) { (void) level; return 0; }
    #endif
    """
    float convt_peak(int level, long long iters) nogil
    long long convt_peak_flops(int level) nogil

NAMES = ("generic", "avx2", "avx512", "avx512_amx")
ENV = "CONVT_ISA"


def cap_from_env(value):
    """The level ``value`` (a ``CONVT_ISA`` setting) names; the highest for None or ``""``.

    Raises
    ------
    ValueError
        For a name not in ``NAMES``: the message names the variable and the value.
    """
    if value is None or not value.strip():
        return len(NAMES) - 1
    name = value.strip().lower()
    if name not in NAMES:
        raise ValueError(f"{ENV}: must be one of {', '.join(NAMES)}; got {value!r}")
    return NAMES.index(name)


def decide(value):
    """The level for a ``CONVT_ISA`` setting ``value`` on this CPU. A bad value warns
    (RuntimeWarning naming the variable and the value) and caps nothing: a typo must not
    stop ``import convt``."""
    try:
        cap = cap_from_env(value)
    except ValueError as exc:
        warnings.warn(f"{exc}; ignored, using this CPU's ISA", RuntimeWarning, stacklevel=2)
        cap = len(NAMES) - 1
    return convt_cpu_isa(cap)


ISA = decide(os.environ.get(ENV))
# This CPU's level for show_config: AMX counts only when the cap let convt ask the OS for the
# tile state (a capped process never asks).
CPU_ISA = ISA if ISA == 3 else convt_cpu_isa(2)


_BF16_CPU = bool(convt_cpu_bf16(CPU_ISA))   # asked once: CPUID traps in some VMs


def bf16(level=None):
    """Whether the AVX512-BF16 tiles run at ``level`` (default ``ISA``, read at call time: a
    test may lower it) on this CPU: never below level 2 (``CONVT_ISA=avx2`` or ``generic``
    turns them off)."""
    return _BF16_CPU and min(ISA if level is None else level, CPU_ISA) >= 2


BF16 = bf16()   # this process's decision at import


def name(level=None):
    """The name of ``level`` (default: the process's ``ISA``)."""
    return NAMES[ISA if level is None else level]


def levels():
    """Every level this process may run, lowest first (what the tests iterate)."""
    return list(range(ISA + 1))


# The highest level each kernel has a body for (the portable C one is level 0).
_KERNEL_MAX = {
    "micro": 2,        # _ukernel.h: 12 x 16 zmm tiles, 6 x 16 ymm
    "winograd": 2,     # the products run the micro-kernel (transforms: AVX2)
    "cfwino": 2,       # _cwkernel.h: 4 x (zmm + ymm) or 4 x 3 ymm sums (needs AVX2: else
                       # the channels-last Winograd runs)
    "upsample": 2,     # _upkernel.h: 4 x 3 zmm or ymm sums (needs AVX2: else another variant)
    "depthwise": 2,    # _dwkernel.h: zmm rows with opmask borders, ymm rows
    "depthwise_row4": 2,   # _dwkernel.h's stride-2 4-tap rows (CONVT_DW_ROW4), zmm or ymm
    "layout": 1,       # _transpose.h: channels-first <-> channels-last in 8 x 8 blocks
    "packing": 1,      # _packkernel.h
    "write-out": 1,    # _writeout.h, float32 y (a 16-bit y's write-out runs at convert16's level)
    "convert16": 2,    # _half.h: float16 / bfloat16 widen and narrow passes, 16 or 8 a step
}


# Whether this CPU runs a zmm operation as two ymm halves through 256-bit load ports (AMD
# Zen 4: _isa.h). There the kernels below, whose zmm loads cross more cache lines than their
# ymm ones, run their AVX2 bodies at level 2: their zmm bodies run slower there
# (docs/performance.md, "AVX-512 bodies of the memory-bound kernels"). The depthwise
# kernel's stride-2 4-tap rows ("depthwise_row4") keep their zmm body, half the instructions
# a row, which measured faster on depthwise_bilinear after a cache eviction
# (docs/performance.md, "the zmm 4-tap rows and a leaner call"). A test sets it False to run
# the zmm bodies.
ZMM_HALVES = bool(convt_cpu_zmm_halves())
_YMM_ON_HALVES = frozenset({"depthwise", "cfwino"})


def kernel_level(kernel, level=None):
    """The level ``kernel`` runs at under ``level`` (default ``ISA``): its highest body at
    most ``level``, AVX2 for the load-bound kernels on a CPU with ``ZMM_HALVES``."""
    level = min(ISA if level is None else level, _KERNEL_MAX[kernel])
    if level == 2 and ZMM_HALVES and kernel in _YMM_ON_HALVES:
        return 1
    return level


def kernel_isas(level=None):
    """{kernel: the name of the level it runs at} for ``level`` (default ``ISA``); the
    bfloat16 tiles ("micro_bf16") say "avx512_bf16", or "off" where bfloat16 storage runs
    the float32 kernels."""
    level = ISA if level is None else level
    table = {k: NAMES[kernel_level(k, level)] for k in _KERNEL_MAX}
    table["micro_bf16"] = "avx512_bf16" if bf16(level) else "off"
    return table


_PEAK = {}
_PEAK_ITERS = 1 << 16   # about 0.4 ms a thread at 16 zmm FMAs a cycle-pair on a 3.7 GHz Zen 4


def fma_peak(threads, level=None, repeats=5):
    """float32 GFLOP/s of ``threads`` threads each running a register-only FMA loop at the
    widest vector of ``level`` (default ``ISA``): the machine's compute peak for that ISA.
    None at level 0 (no FMA path). Measured once per (level, threads) per process, the best
    of ``repeats`` runs of about half a millisecond each."""
    level = ISA if level is None else level
    key = (level, threads)
    if level < 1:
        return None
    if key not in _PEAK:
        _PEAK[key] = _probe(level, threads, repeats)
    return _PEAK[key]


def _probe(int level, int threads, int repeats):
    cdef int t
    cdef long long iters = _PEAK_ITERS
    cdef float sink = 0
    best = float("inf")
    for _ in range(repeats + 1):   # the first run wakes the thread team
        start = time.perf_counter()
        with nogil:
            for t in prange(threads, schedule="static", chunksize=1, num_threads=threads):
                sink += convt_peak(level, iters)
        best = min(best, time.perf_counter() - start)
    if sink == 12345.0:   # keeps the loops' results alive
        print(end="")
    return convt_peak_flops(level) * iters * threads / best / 1e9
