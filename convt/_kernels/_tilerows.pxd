# Declarations of _tilerows.h (sums over tile rows) for _tilewrite.pxd's channels-last
# write-out, _wino.pyx's output transform and _micro.pyx's test hook, and their fused-type
# dispatch.
from libc.stdint cimport int64_t

from ._types cimport real

cdef extern from "_tilerows.h" nogil:
    void convt_combine_f32(int isa, float* t, const float* a, const float* b, int64_t m,
                           int64_t w, int64_t ld, int kind)
    void convt_combine_f64(int isa, double* t, const double* a, const double* b, int64_t m,
                           int64_t w, int64_t ld, int kind)
    void convt_bias_row_f32(int isa, const float* t, const float* bias, float* y, int64_t n)
    void convt_bias_row_f64(int isa, const double* t, const double* bias, double* y,
                            int64_t n)


cdef inline void _combine(int isa, real* t, const real* a, const real* b, int64_t m,
                          int64_t w, int64_t ld, int kind) noexcept nogil:
    if real is float:
        convt_combine_f32(isa, t, a, b, m, w, ld, kind)
    else:
        convt_combine_f64(isa, t, a, b, m, w, ld, kind)


cdef inline void _bias_row(int isa, const real* t, const real* bias, real* y,
                           int64_t n) noexcept nogil:
    if real is float:
        convt_bias_row_f32(isa, t, bias, y, n)
    else:
        convt_bias_row_f64(isa, t, bias, y, n)
