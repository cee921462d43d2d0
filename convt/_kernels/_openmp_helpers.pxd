# The only door to OpenMP for convt's kernels (scikit-learn's _openmp_helpers pattern): without
# -fopenmp, _OPENMP is undefined, the fallbacks below describe a one-thread team, and prange
# compiles to a serial loop, so the package still builds and runs (setup.py warns loudly).
# Cimport these names from here, never from Cython's `openmp` module, which needs <omp.h>.
cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define CONVT_OPENMP_ENABLED 1
    #else
    #define CONVT_OPENMP_ENABLED 0
    #define omp_get_max_threads() 1
    #define omp_get_thread_num() 0
    #define omp_get_num_threads() 1
    #endif
    """
    bint CONVT_OPENMP_ENABLED
    int omp_get_max_threads() noexcept nogil
    int omp_get_thread_num() noexcept nogil
    int omp_get_num_threads() noexcept nogil
