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
    /* OpenMP 5.0's omp_pause_resource_all (omp.h of GCC >= 9 and of LLVM), made a weak
       reference: GCC 12 still reports _OPENMP 201511, so the version macro cannot tell whether
       the runtime loaded at run time has it; one that lacks it leaves the address null and
       convt_release_threads() reports that it could not. */
    #if defined(_OPENMP) && (defined(__GNUC__) || defined(__clang__))
    #pragma weak omp_pause_resource_all
    static int convt_release_threads(void) {
        if (!&omp_pause_resource_all) return -2;
        return omp_pause_resource_all(omp_pause_soft);
    }
    #else
    static int convt_release_threads(void) { return -2; }
    #endif
    """
    bint CONVT_OPENMP_ENABLED
    int omp_get_max_threads() noexcept nogil
    int omp_get_thread_num() noexcept nogil
    int omp_get_num_threads() noexcept nogil
    int convt_release_threads() noexcept nogil
