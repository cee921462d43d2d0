# Compiled kernels. They trust their inputs: the API layer validates, the plan lays data out.
#
#   convt.conv_transpose / front ends ─► _geometry.resolve ─► _plan.Plan ─┬► _direct.run_direct
#                                                                          │   └► _kernels._direct
#                                                                          ├► _phase_gemm.run_gemm
#                                                                          │   └► _kernels._gemm
#                                                                          ├► _depthwise.run_depthwise
#                                                                          │   └► _kernels._depthwise,
#                                                                          │      _depthwise_nxc
#                                                                          ├► _micro.run_micro
#                                                                          │   └► _kernels._micro
#                                                                          ├► _winograd.run_wino
#                                                                          │   └► _kernels._wino
#                                                                          ├► _cfwino.run_cf
#                                                                          │   └► _kernels._cfwino
#                                                                          └► _upsample.run_up
#                                                                              └► _kernels._upsample
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
# _depthwise.depthwise_ncx
#                      the same sum when min(C_in, C_out) per group is 1-3 (depthwise,
#                      channel multipliers): memory-bound, so x is read and y written once
#                      with a unit-stride vectorised innermost loop. Channels-first: per output
#                      row (n, channel, o0, o1), per phase c of the innermost axis,
#                      d[q] = bias + sum_t w_t * x_t[q + e_t] over the q where every tap is in
#                      range, in chunks of 4 taps, then the phases interleaved into y's row;
#                      borders check each tap (AVX2 / AVX-512: _dwkernel.h's rows). Threads: OpenMP
#                      prange over blocks of rows, each output written by one thread in a
#                      fixed order: bit-identical for any thread count.
# _depthwise_nxc.depthwise_nxc
#                      the same, channels-last with 1 channel per group: per output pixel, the
#                      taps' channel rows.
# _micro.micro_conv    the direct sum on register tiles (the "micro" variant): per task, rows
#                      of a set of phases x all output channels, MR x NR sub-tiles held in
#                      registers across blocks of taps and channels (_ukernel.h), inputs read
#                      through per-row pointers (no halo copy), then written into y.
#                      With bf16 (the "micro_bf16" variant, AVX512-BF16), x and the weights
#                      hold pairs of bfloat16 channels per 32-bit slot and the tiles multiply a
#                      pair per vdpbf16ps (_bf16kernel.h), accumulating in float32. With the
#                      AMX bit ("micro_amx", ISA level 3), blocks of 32 rows x 16 or 32
#                      channels run on AMX tiles (tdpbf16ps: _amxkernel.h, _tile.pxd).
# _amxemu              _micro again, built with the AMX instructions emulated in C (Intel
#                      SDM semantics and checks): the AMX tiles' tests and self-check.
# _bf16                bfloat16 storage: to_pairs_nxc (x channels-last, groups padded to even
#                      channel counts; the weights' pairs: _pack.pack_pairs); the result is
#                      rounded to bfloat16 by the micro write-outs (_half.h).
# _wino.wino_conv      the "winograd" variant: F(2, 2) / F(2, 3) products along axes of two or
#                      three adjacent taps, each run as a micro phase on transformed inputs,
#                      then combined (output transform) and written; wino_ready checks x.
# _cfwino.cfwino_conv  Winograd F(2, 2) for 1-D channels-first layers of stride S (2S taps),
#                      on x as it is (_cwkernel.h); cf_pack packs its weights.
# _upsample            pure upsampling (K == s, stride 2 last), channels-first, one register
#                      tile per pair of output rows (_upkernel.h).
# _pack                weight packing: pack_micro (micro panels), pack_wino (Winograd
#                      products' weights as sums of taps), pack_taps (taps for late sums),
#                      pack_pairs (bfloat16 weights as micro_bf16's pairs, 8 x 8 blocks).
# _half               16-bit storage: widen (float16 / bfloat16 -> float32) and narrow (float32
#                      -> 16-bit, round to nearest even), parallel blocks, the bits of NumPy's
#                      and ml_dtypes' astype; pack_taps16 (the late sums' taps from 16-bit
#                      weights). _layout.to_padded_nxc16 widens as it transposes,
#                      to_padded_nxc_narrow rounds as it transposes (Winograd's staged y).
# _fftmul.fft_contract the FFT backend's per-bin channel contraction (split real / imaginary
#                      kernel spectra, OpenMP over bins: bit-identical for any thread count);
#                      fft_contract_dft, a one-shot call's: each row's kernel spectrum made in
#                      scratch from axis 0's taps first (loops per ISA level in _fftrow.h);
#                      fft_pack_weights packs those taps straight from the weights (1-D, 2-D).
# _openmp_helpers      whether OpenMP was compiled in, omp_get_max_threads(), release_threads().
# _cpu                 the ISA level every kernel runs at (CONVT_ISA caps it), the FMA peak.
#
# Shared by several modules (cimported: cdef inline, so each module compiles its own copy):
# _tile.pxd            the micro and Winograd variants' tile loop: row pointers, input
#                      transforms, tap masks, micro-kernel calls.
# _tilewrite.pxd       their tiles written into y (channels-last rows, channels-first blocks).
# _packkernel.pxd      _packkernel.h's declarations and the product-weight sums' dispatch.
# _tilerows.pxd        _tilerows.h's declarations and their dtype dispatch.
# _finite.pxd          finiteness and exponent-bound checks.  _types.pxd: the fused dtype.
# _dwloop.pxd          the depthwise kernel's portable loop (chunks, borders, interleave).
# Headers (AVX2 bodies selected at run time, portable C otherwise):
# _isa.h               CPU detection: the ISA level (CPUID + XCR0; AMX tile permission).
# _amxkernel.h         the AMX-BF16 tile blocks, on a macro layer: the instructions, or their C
#                      emulation (_amxemu.h: Intel SDM semantics and checks).
# _ukernel.h           the MR x NR micro-kernels (6 x 16 float32, 6 x 8 float64; AVX-512: 12 rows).
# _transpose.h         register transposes and zips; 8 x 8 block transposes.
# _writeout.h          tile write-outs with the bias into channels-first y.
# _corners.h           the Winograd input transforms (signed sums of corners).
# _tilerows.h          sums over tile rows: the Winograd output transform, channels-last
#                      write-out rows plus the bias (_micro.tile_rows exposes them to tests).
# _packkernel.h        tap transposes for late sums, product-weight sums, store fence.
# _half.h              16-bit <-> float32 conversions (F16C + AVX2, AVX-512; NaN bits as NumPy
#                      keeps them).  _halfstream.h: its narrowing with whole lines streamed.
# _dwkernel.h, _cwkernel.h, _upkernel.h   the depthwise, channels-first Winograd and upsample
#                      kernels' AVX2 and AVX-512 bodies (_cpu.kernel_level picks one).

import os as _os

# How long libgomp's idle threads spin before they sleep, set before libgomp loads (it reads its
# environment once, when loaded: the first kernel import below is that moment in most
# processes). libgomp's default, 300,000 spins (about 7 ms on an AMD EPYC Zen 4), keeps a core
# busy after every call and slows whatever runs next beside it. 10,000 spins (about 0.25 ms)
# still cover the gaps inside a call and between back-to-back calls (docs/threads.md, "Idle
# threads and the neighbours", has the measurements). The user's own
# OMP_WAIT_POLICY or GOMP_SPINCOUNT wins; the variable is removed again once libgomp has read it,
# so other libraries and child processes see the environment the user set.
SPIN_COUNT = 10000


def _libgomp_loaded():
    try:
        with open("/proc/self/maps") as maps:
            return any("libgomp" in line for line in maps)
    except OSError:
        return False


def _load_openmp():
    """Load the OpenMP runtime with convt's spin count; returns how the wait policy was set."""
    user = [k for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in _os.environ]
    if user:
        return "user: " + ", ".join(f"{k}={_os.environ[k]}" for k in user)
    if _libgomp_loaded():
        return "the OpenMP runtime's own (it was loaded before convt)"
    _os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    try:
        from ._openmp_helpers import openmp_enabled  # loads libgomp, which reads the variable
    except ImportError:  # an unbuilt tree
        return "unknown (kernels not built)"
    finally:
        del _os.environ["GOMP_SPINCOUNT"]
    if not openmp_enabled():
        return "none (built without OpenMP)"
    return f"GOMP_SPINCOUNT={SPIN_COUNT} (set by convt)"


WAIT_POLICY = _load_openmp()
