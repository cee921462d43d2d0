# Finiteness checks shared by the kernels that read every weight anyway (the micro and
# Winograd packs in _pack.pyx, the GEMM merge in _layout.pyx): checked in that pass, not in a
# separate np.isfinite pass (docs/performance.md, "Figures moved out of code comments").
from libc.stdint cimport int64_t, uint32_t, uint64_t

from ._types cimport real


cdef inline int64_t _exponent_at_least(const real* v, int64_t n, int64_t spare) noexcept nogil:
    # 1 if any of v[:n] has an exponent field of at least all ones minus spare (spare 0: NaN
    # or +-Inf; wino_ready's bound otherwise), else 0: integer operations, which the compiler
    # vectorises (a float comparison reduction it would not, without -ffast-math).
    cdef int64_t i
    cdef uint32_t bad32 = 0, lim32 = (0xffu - <uint32_t> spare) << 23
    cdef uint64_t bad64 = 0, lim64 = (0x7ffu - <uint64_t> spare) << 52
    cdef const uint32_t* u32
    cdef const uint64_t* u64
    if real is float:
        u32 = <const uint32_t*> v
        for i in range(n):
            bad32 |= (u32[i] & 0x7f800000u) >= lim32
        return bad32 != 0
    else:
        u64 = <const uint64_t*> v
        for i in range(n):
            bad64 |= (u64[i] & 0x7ff0000000000000u) >= lim64
        return bad64 != 0


cdef inline int64_t _nonfinite(const real* v, int64_t n) noexcept nogil:
    # 1 if any of v[:n] is NaN or +-Inf, checked in the pass that reads the weights anyway
    return _exponent_at_least(v, n, 0)
