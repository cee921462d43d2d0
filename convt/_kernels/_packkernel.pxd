# Declarations of _packkernel.h (weight packing) for _pack.pyx and the late sums of _tile.pxd,
# and the fused-type dispatch of its product-weight sums.
from libc.stdint cimport int64_t, uint16_t

from ._types cimport real

cdef extern from "_packkernel.h" nogil:
    int CONVT_WSUM_MAX
    int convt_wsum_f32(int isa, const float* tmp, int64_t Mgp, const int64_t* ck,
                       const float* cf, float* dst, int64_t us, int64_t NP, int64_t ls,
                       int stream)
    int convt_wsum_f64(int isa, const double* tmp, int64_t Mgp, const int64_t* ck,
                       const double* cf, double* dst, int64_t us, int64_t NP, int64_t ls,
                       int stream)
    void convt_store_fence()   # (_isa.h's, which _packkernel.h includes)
    int convt_taps_f32(int isa, const float* src, int64_t Mg, int64_t KT, float* dst,
                       int64_t line, int64_t ps, int spare, int stream)
    int convt_pairs(int isa, const uint16_t* w, uint16_t* out, const int64_t* kd,
                    const int64_t* ks, int64_t g, int64_t Cg, int64_t jp, int64_t p0,
                    int64_t p1, int64_t Mg, int64_t KT, int64_t NP, int64_t NR, int stream)


cdef inline int _wsum(int isa, const real* tmp, int64_t Mgp, const int64_t* ck,
                      const real* cf, real* dst, int64_t us, int64_t NP, int64_t ls,
                      int stream=0) noexcept nogil:
    if real is float:
        return convt_wsum_f32(isa, tmp, Mgp, ck, cf, dst, us, NP, ls, stream)
    else:
        return convt_wsum_f64(isa, tmp, Mgp, ck, cf, dst, us, NP, ls, stream)
