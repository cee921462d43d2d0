# Compiled kernels. They trust their inputs: the API layer validates, the plan lays data out.
#
#   convt.conv_transpose / front ends ─► _geometry.resolve ─► _plan.Plan ─┬► _direct.run_direct
#                                                                          │   └► _kernels._direct
#                                                                          ├► _phase_gemm.run_gemm
#                                                                          │   └► _kernels._gemm
#                                                                          └► _depthwise.run_depthwise
#                                                                              └► _kernels._depthwise
#
# _direct.direct_nxc   y[n, o, :] = bias + sum over the taps (k, i) of o's phase, listed in
#                      per-axis tables (only taps that hit real input: no inserted zeros) of
#                      x[n, i, group's C_in] @ w[group, k]. Channels-last, 3 spatial axes
#                      (rank 1-2 padded with unit axes), float32 / float64 via one fused type.
#                      Threads: OpenMP prange over output pixels, each pixel (all of its
#                      channels) written by exactly one thread, summed in a fixed order, so
#                      results are bit-identical for any thread count.
# _gemm.phase_gemm     the same sum for layers with >= 4 channels per group: per set of
#                      output phases and block of rows, BLAS GEMMs (scipy.linalg.cython_blas)
#                      over a zero-haloed copy of x in its own layout, one per input offset
#                      (phases reading the same offset share it), accumulated with beta = 1
#                      into a tile that is written, plus the bias, straight into y.
#                      Threads: OpenMP prange over the tasks, each GEMM on one BLAS thread;
#                      each output written by one task in a fixed order: bit-identical.
# _layout              blocked, parallel layout changes: NCX -> zero-haloed NXC input grid
#                      (batch-rows mode), IOX -> (K, C_in, C_out) weight packing, and the
#                      merging of the GEMM ops' weights.
# _depthwise.depthwise_ncx / depthwise_nxc
#                      the same sum when min(C_in, C_out) per group is 1-3 (depthwise,
#                      channel multipliers): memory-bound, so x is read and y written once
#                      with a unit-stride vectorised innermost loop. Channels-first: per output
#                      row (n, channel, o0, o1), per phase c of the innermost axis,
#                      d[q] = bias + sum_t w_t * x_t[q + e_t] over the q where every tap is in
#                      range, in chunks of 4 taps, then the phases interleaved into y's row;
#                      borders check each tap. Channels-last (1 channel per group): per output
#                      pixel, the taps' channel rows. Threads: OpenMP prange over blocks of rows
#                      (pixels), each output written by one thread in a fixed order:
#                      bit-identical for any thread count.
# _openmp_helpers      whether OpenMP was compiled in, and omp_get_max_threads().
