"""Weight packing for the micro and Winograd variants.

pack_micro: IOX weights -> the micro variant's panels, per phase [G][NP][tap][Cg][NR] (NR
output channels a line, read by _micro.pyx's micro_conv); pack_wino: the Winograd products'
weights, each a signed sum of kernel taps (wino_conv); pack_taps: the float32 taps in the
lines wino_conv's late sums read (convt._backends.direct.winograd.wino_taps); pack_pairs:
bfloat16 weights as the bfloat16 tiles' channel pairs (convt._backends.direct.micro_bf16).
An OpenMP prange over the input channels (pairs of them for pack_pairs): each channel's (Mg,
K) block is transposed (float32 and the pairs in register blocks) and each line stored
once. Each returns whether the weights are finite (or small enough for the
Winograd sums), checked while they are read.
"""
import numpy as np
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t, uint16_t, uintptr_t

from ._finite cimport _exponent_at_least, _nonfinite
from ._packkernel cimport (CONVT_WSUM_MAX, _wsum, convt_pairs, convt_store_fence,
                           convt_taps_f32)
from ._types cimport real

from . import _cpu

cdef extern from "_transpose.h" nogil:
    void convt_t8_f32(int isa, const float* src, int64_t lds, float* dst, int64_t ldd)

WSUM_MAX = CONVT_WSUM_MAX   # kernel taps a product tap's weights sum at most (ck, cf columns)

cdef enum:
    _PACK_KB = 64    # kernel taps per transposed block in pack_micro


cdef void _transpose_taps(int isa, const real* src, real* tmp, int64_t Mg, int64_t KT,
                          int64_t k0, int64_t kb, int64_t Mgp) noexcept nogil:
    # taps k0..k0+kb of one input channel's (Mg, KT) weights -> tmp rows (kb, Mgp)
    cdef int64_t mm, k, m8 = 0, k8 = 0
    if real is float:   # 8 x 8 register transposes (the scalar loop was 2/3 of the pack)
        m8 = Mg - Mg % 8
        k8 = kb - kb % 8
        for mm in range(0, m8, 8):
            for k in range(0, k8, 8):
                convt_t8_f32(isa, src + mm * KT + k0 + k, KT, tmp + k * Mgp + mm, Mgp)
    for mm in range(Mg):
        for k in range(k8 if mm < m8 else 0, kb):
            tmp[k * Mgp + mm] = src[mm * KT + k0 + k]


cdef void _pack_channel(int isa, const real* src, real* out, real* tmp, const int64_t* kd,
                        const int64_t* ks, int64_t g, int64_t c, int64_t Mg, int64_t KT,
                        int64_t NP, int64_t NR) noexcept nogil:
    # one input channel's (Mg, KT) weights -> its NR-value line in every (tap, panel)
    cdef int64_t Mgp = NP * NR, k0 = 0, kb, k, jp, j
    cdef real* dst
    while k0 < KT:
        kb = min(<int64_t> _PACK_KB, KT - k0)
        _transpose_taps(isa, src, tmp, Mg, KT, k0, kb, Mgp)
        for k in range(kb):
            if kd[k0 + k] < 0:
                continue
            dst = out + kd[k0 + k] + g * NP * ks[k0 + k] + c * NR
            for jp in range(NP):
                for j in range(NR):
                    dst[jp * ks[k0 + k] + j] = tmp[k * Mgp + jp * NR + j]
        k0 += kb


PACK_KB = _PACK_KB


def pack_micro(const real[:, :, ::1] w,        # IN  IOX weights (C_in, Mg, prod(K))
               real[::1] out,                  # OUT packed, per phase [G][NP][tap][Cg][NR]
               const int64_t[::1] kdst,        # IN  per kernel tap: offset of its (group 0,
                                               #     panel 0, channel 0) line, -1 if unused
               const int64_t[::1] kstride,     # IN  per kernel tap: panel stride (T*Cg*NR)
               real[::1] scratch,              # IN  zeros, num_threads * PACK_KB * Mg padded
                                               #     to NR (the padding stays zero)
               int64_t groups, int64_t NR, int num_threads, int isa=-1):
    """Pack the weights for micro_conv; releases the GIL. Per input channel (parallel), its
    (Mg, K) block is transposed in blocks of PACK_KB taps into the thread's (tap, Mg padded
    to NR) slice of the scratch, then each tap's NR-value lines are copied to their panels.
    Returns whether every weight is finite (no NaN, no Inf), checked while they are read."""
    cdef int64_t C_in = w.shape[0], Mg = w.shape[1], KT = w.shape[2]
    cdef int64_t Cg = C_in // groups, NP = (Mg + NR - 1) // NR, Mgp = NP * NR
    cdef int64_t ci, bad = 0
    if C_in == 0 or Mg == 0 or KT == 0:
        return True
    if isa < 0:
        isa = _cpu.ISA
    cdef const real* wptr = &w[0, 0, 0]
    cdef real* optr = &out[0]
    cdef real* tmp = &scratch[0]
    cdef const int64_t* kd = &kdst[0]
    cdef const int64_t* ks = &kstride[0]
    with nogil:
        for ci in prange(C_in, schedule="static", num_threads=num_threads):
            _pack_channel(isa, wptr + ci * Mg * KT, optr, tmp + threadid() * _PACK_KB * Mgp, kd,
                          ks, ci // Cg, ci % Cg, Mg, KT, NP, NR)
            bad += _nonfinite(wptr + ci * Mg * KT, Mg * KT)
    return bad == 0


def pack_taps(const float[:, :, ::1] w,        # IN  IOX weights (C_in, Mg, KT), Mg % 16 == 0
               float[::1] out,                 # OUT tap k's lines at k * line, per tap
                                               #     [G][NP][Cg][16]
               int64_t groups, int64_t line, int num_threads, int isa=-1,
               bint stream=False, int64_t spare_bits=0):
    """The float32 taps for wino_conv's late sums (convt._backends.direct.winograd.wino_taps), as pack_wino
    with one single-tap product per tap makes them, by register transposes straight into
    their lines (convt_taps_f32: 16 x 16 blocks at the AVX-512 level, 8 x 8 at AVX2, the same
    bits); releases the GIL. Returns whether every weight is below
    2^(emax + 1 - spare_bits) in magnitude. stream: store past the caches, when out and line
    keep every line 32-byte aligned (otherwise stored normally)."""
    cdef int64_t C_in = w.shape[0], Mg = w.shape[1], KT = w.shape[2]
    cdef int64_t Cg = C_in // groups, NP = Mg // 16, ci, bad = 0
    if Mg % 16:
        raise ValueError(f"pack_taps: Mg must be a multiple of 16; got {Mg}")
    if C_in == 0 or Mg == 0 or KT == 0:
        return True
    if line < NP * C_in * 16 or out.shape[0] < (KT - 1) * line + NP * C_in * 16:
        raise ValueError(f"pack_taps: line {line} and out ({out.shape[0]} values) do not hold "
                         f"{KT} taps of {NP * C_in * 16} values")
    if isa < 0:
        isa = _cpu.ISA
    cdef const float* wptr = &w[0, 0, 0]
    cdef float* optr = &out[0]
    # streamed stores need 32-byte aligned lines: tap k's lines start at k * line, each
    # channel's 16 values at a multiple of 16 (a hint, so any other out is stored normally)
    stream = stream and _aligned32(optr, sizeof(float), &line, 1)
    with nogil:
        for ci in prange(C_in, schedule="static", num_threads=num_threads):
            bad += convt_taps_f32(isa, wptr + ci * Mg * KT, Mg, KT,
                                  optr + ((ci // Cg) * NP * Cg + ci % Cg) * 16, line, Cg * 16,
                                  <int> spare_bits, stream)
            if stream:
                convt_store_fence()
    return bad == 0


# Packed pairs of at least this many bytes are stored past the caches: a one-shot call packs
# them right after its kernel read other data, and reads them back from memory. Streamed,
# the one-shot calls of 4 MiB and more run faster; in a loop of packs alone, cached stores
# win (docs/performance.md, "bfloat16 one-shot calls: the pair pack", and "Figures moved
# out of code comments (2026-11-28, session 10)").
_STREAM_PAIRS_BYTES = 4 << 20
# pack_pairs' tasks: a panel of one group for a run of pairs, whose lines of each tap are
# written in address order; 64 pairs a run (8 KiB of one tap's lines), and runs split further
# so that each thread gets 4 tasks when groups x panels are few (dilated_s1: 1 x 2)
cdef int64_t _PAIRS_RUN = 64
cdef int64_t _TASKS_PER_THREAD = 4


def pack_pairs(const uint16_t[:, :, ::1] w,   # IN  bfloat16 bits, IOX (C_in, Mg, KT)
               uint16_t[::1] out,              # OUT the packed pairs (2 a slot); its padding
                                               #     (odd Cg, Mg % NR) must hold zeros
               const int64_t[::1] kdst,        # IN  per kernel tap: slot of its (group 0,
                                               #     panel 0, pair 0) line, -1 if unused
               const int64_t[::1] kstride,     # IN  per kernel tap: panel stride in slots
               int64_t groups, int64_t NR, int num_threads, int isa=-1, stream=None):
    """The bfloat16 tiles' weights (convt._backends.direct.micro_bf16.packed_pairs): per
    phase [G][NP][tap][Cg2 / 2][NR][2], every slot of a used tap written (a pair's missing
    channel, for odd Cg, and output channels past Mg as zeros); releases the GIL. Per run of
    pairs of input channels and panel of output channels (parallel tasks), in 8 x 8 blocks of
    output channels and taps (convt_pairs).
    Returns whether every weight of a used tap is finite. The same bits at every ISA level
    and thread count (tests/test_pack_pairs.py: against a NumPy loop). stream: store past
    the caches (None: when out takes _STREAM_PAIRS_BYTES or more), when out, kdst, kstride
    and NR keep every line 32-byte aligned (otherwise stored normally)."""
    cdef int64_t C_in = w.shape[0], Mg = w.shape[1], KT = w.shape[2]
    cdef int64_t Cg = C_in // groups if groups > 0 else 0
    cdef int64_t P = (Cg + 1) // 2, NP = (Mg + NR - 1) // NR if NR > 0 else 0
    cdef int64_t item, g, hi = 0, bad = 0
    if groups < 1 or NR < 1 or C_in % groups:
        raise ValueError(f"pack_pairs: groups ({groups}) must divide C_in ({C_in}) and NR "
                         f"({NR}) be positive")
    if kdst.shape[0] < KT or kstride.shape[0] < KT:
        raise ValueError(f"pack_pairs: kdst and kstride need one value per tap ({KT}); got "
                         f"{kdst.shape[0]} and {kstride.shape[0]}")
    if C_in == 0 or Mg == 0 or KT == 0:
        return True
    for item in range(KT):   # the highest slot written, within out
        if kdst[item] >= 0:
            hi = max(hi, kdst[item] + (groups * NP - 1) * kstride[item] + (P - 1) * NR + NR)
    if 2 * hi > out.shape[0]:
        raise ValueError(f"pack_pairs: out ({out.shape[0]} values) is too short for the "
                         f"slots kdst and kstride address ({hi})")
    if isa < 0:
        isa = _cpu.ISA
    cdef const uint16_t* wp = &w[0, 0, 0]
    cdef uint16_t* op = &out[0]
    cdef const int64_t* kd = &kdst[0]
    cdef const int64_t* ks = &kstride[0]
    # streamed stores need 32-byte aligned lines: every 16 slots start at kdst[k] + (g * NP
    # + jp) * kstride[k] + p * NR + a multiple of 16 (a hint, so any other layout is stored
    # normally)
    if stream is None:
        stream = out.shape[0] * 2 >= _STREAM_PAIRS_BYTES
    cdef bint st = stream and _aligned32(op, 4, &NR, 1)
    for item in range(KT):
        if kdst[item] >= 0:
            st = st and _aligned32(op, 4, &kd[item], 1) and _aligned32(op, 4, &ks[item], 1)
    # tasks of (group, panel, run of pairs): runs of at most _PAIRS_RUN pairs, and at least
    # _TASKS_PER_THREAD tasks a thread where the pairs allow
    cdef int64_t runs = max((P + _PAIRS_RUN - 1) // _PAIRS_RUN,
                            (_TASKS_PER_THREAD * num_threads + groups * NP - 1) // (groups * NP))
    runs = max(1, min(runs, P))
    cdef int64_t run = (P + runs - 1) // runs, p0, jp
    runs = (P + run - 1) // run
    with nogil:
        for item in prange(groups * NP * runs, schedule="static", num_threads=num_threads):
            g = item // (NP * runs)
            jp = item // runs % NP
            p0 = item % runs * run
            bad += convt_pairs(isa, wp, op, kd, ks, g, Cg, jp, p0, min(P, p0 + run), Mg, KT,
                               NP, NR, st)
            if st:
                convt_store_fence()
    return bad == 0


cdef bint _aligned32(const void* base, size_t itemsize, const int64_t* offsets,
                     int64_t n) noexcept nogil:
    # whether base and base + k * itemsize for each of the n offsets k are 32-byte aligned
    # (_mm256_stream_ps / _pd fault on any other address)
    cdef int64_t i
    if (<uintptr_t> base) % 32:
        return False
    for i in range(n):
        if (offsets[i] * <int64_t> itemsize) % 32:
            return False
    return True


cdef int64_t _pack_wino_channel(int isa, const real* src, real* out, real* tmp,
                                const int64_t* ck, const real* cf, const int64_t* ud,
                                const int64_t* us, int64_t U, int64_t g, int64_t c, int64_t Mg,
                                int64_t KT, int64_t NP, int64_t NR, int stream) noexcept nogil:
    # one input channel: its taps transposed (KT <= PACK_KB), then per product tap u the sum
    # of cf[u, e] * tap ck[u, e] over its WSUM_MAX entries (cf = 0: unused), in entry order,
    # straight into its NR-value line of every panel (convt_wsum: the sums in registers, one
    # 64-byte store per line, several times faster than a row buffer summed in C then
    # copied; stream: past the caches); returns 1 when a sum is not finite
    cdef int64_t Mgp = NP * NR, u, bad = 0
    cdef real* dst
    _transpose_taps(isa, src, tmp, Mg, KT, 0, KT, Mgp)
    for u in range(U):
        dst = out + ud[u] + g * NP * us[u] + c * NR
        bad |= _wsum(isa, tmp, Mgp, ck + CONVT_WSUM_MAX * u, cf + CONVT_WSUM_MAX * u, dst,
                     us[u], NP, NR, stream)
    if stream:
        convt_store_fence()
    return bad


def pack_wino(const real[:, :, ::1] w,         # IN  IOX weights (C_in, Mg, prod(K)), K <= PACK_KB
              real[::1] out,                   # OUT packed, per product [G][NP][tap][Cg][NR]
              const int64_t[:, ::1] ck,        # IN  per product tap, WSUM_MAX kernel taps ...
              const real[:, ::1] cf,           # IN  ... and their coefficients (0: unused)
              const int64_t[::1] udst,         # IN  per product tap: offset of its (group 0,
                                               #     panel 0, channel 0) line
              const int64_t[::1] ustride,      # IN  per product tap: panel stride
              real[::1] scratch,               # IN  zeros, num_threads * PACK_KB * Mg padded
                                               #     to NR (the padding stays zero)
              int64_t groups, int64_t NR, int num_threads, int isa=-1, bint stream=False,
              int64_t spare_bits=0):
    """Pack the Winograd products' weights for wino_conv (each product tap's weights are a
    signed sum of kernel taps, summed here in the compute dtype); releases the GIL. Returns
    whether every weight and every sum is finite; with spare_bits, also whether every weight
    is below 2^(emax + 1 - spare_bits) in magnitude (so that a signed sum of 2^spare_bits of
    them is finite: convt._backends.direct.winograd.wino_taps, whose sums wino_conv makes). stream: store
    the packed lines past the caches (convt_wsum; for packs too large to stay there,
    convt._backends.direct.winograd), when out, NR, udst and ustride keep every line 32-byte aligned
    (otherwise stored normally)."""
    cdef int64_t C_in = w.shape[0], Mg = w.shape[1], KT = w.shape[2], U = ck.shape[0]
    cdef int64_t Cg = C_in // groups, NP = (Mg + NR - 1) // NR, Mgp = NP * NR
    cdef int64_t ci, bad = 0
    if (ck.shape[1] != CONVT_WSUM_MAX or cf.shape[1] != CONVT_WSUM_MAX
            or cf.shape[0] != U or udst.shape[0] < U or ustride.shape[0] < U
            or (U and (np.min(ck) < 0 or np.max(ck) >= KT))):
        raise ValueError(f"pack_wino: ck and cf need {CONVT_WSUM_MAX} entries per product tap "
                         f"(kernel taps below {KT}) and udst, ustride one per product tap")
    if C_in == 0 or Mg == 0 or KT == 0 or U == 0:
        return True
    if isa < 0:
        isa = _cpu.ISA
    cdef const real* wptr = &w[0, 0, 0]
    cdef real* optr = &out[0]
    cdef real* tmp = &scratch[0]
    cdef const int64_t* kp = &ck[0, 0]
    cdef const real* fp = &cf[0, 0]
    cdef const int64_t* ud = &udst[0]
    cdef const int64_t* us = &ustride[0]
    # streamed stores need 32-byte aligned lines: every line starts at udst[u] + (g * NP + jp)
    # * ustride[u] + c * NR (a hint, so any other layout is stored normally)
    stream = stream and (_aligned32(optr, sizeof(real), &NR, 1)
                         and _aligned32(optr, sizeof(real), ud, U)
                         and _aligned32(optr, sizeof(real), us, U))
    with nogil:
        for ci in prange(C_in, schedule="static", num_threads=num_threads):
            bad += _pack_wino_channel(isa, wptr + ci * Mg * KT, optr,
                                      tmp + threadid() * _PACK_KB * Mgp, kp, fp, ud, us,
                                      U, ci // Cg, ci % Cg, Mg, KT, NP, NR, stream)
            bad += _exponent_at_least(wptr + ci * Mg * KT, Mg * KT, spare_bits)
    return bad == 0
