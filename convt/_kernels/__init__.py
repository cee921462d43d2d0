# Compiled kernels. They trust their inputs: the API layer validates, the plan lays data out.
#
#   convt.conv_transpose / front ends ─► _geometry.resolve ─► _plan.Plan ─┬► _direct.run_direct
#                                                                          │   └► _kernels._direct
#                                                                          └► _phase_gemm.run_gemm
#                                                                              └► _kernels._gemm
#
# _direct.direct_nxc   y[n, o, :] = bias + sum over the taps (k, i) of o's phase, listed in
#                      per-axis tables (only taps that hit real input: no inserted zeros) of
#                      x[n, i, group's C_in] @ w[group, k]. Channels-last, 3 spatial axes
#                      (rank 1-2 padded with unit axes), float32 / float64 via one fused type.
#                      Threads: OpenMP prange over output pixels, each pixel (all of its
#                      channels) written by exactly one thread, summed in a fixed order, so
#                      results are bit-identical for any thread count.
# _gemm.phase_gemm     the same sum for layers with >= 4 channels per group: per output phase,
#                      one GEMM per tap (scipy.linalg.cython_blas) over a zero-haloed
#                      channels-last input, accumulated with beta = 1, then a serial scatter
#                      into y's layout. Threads: BLAS's own (no OpenMP region), GEMMs never
#                      split the summed dimension, so results do not depend on the count.
# _openmp_helpers      whether OpenMP was compiled in, and omp_get_max_threads().
