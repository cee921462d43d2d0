"""16-bit storage (float16, bfloat16) to and from float32, in parallel blocks (_half.h).

widen: float16 / bfloat16 bits -> float32, exact; narrow: float32 -> 16-bit bits, rounded to
nearest even. Bit for bit NumPy's and ml_dtypes' astype (NaNs included, _half.h says how),
with F16C and AVX2 when the CPU has them. Blocks of _BLOCK values are independent: an OpenMP
prange over them, each written by one thread. The arrays are passed as uint16 views of the
16-bit data; kind 0 is float16, 1 bfloat16.

Assumes: src and dst of the same length, C-contiguous, not overlapping.
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t, uint16_t, uintptr_t

from . import _cpu

cdef extern from "_half.h" nogil:
    int convt_f16c()
    void convt_widen(int isa, int kind, const uint16_t* src, float* dst, int64_t n)
    void convt_narrow(int isa, int kind, const float* src, uint16_t* dst, int64_t n)
    int convt_taps_h16(int isa, int kind, const uint16_t* src, int64_t Mg, int64_t KT,
                       float* dst, int64_t line, int64_t ps, int spare, int stream)
    void convt_store_fence()   # (_isa.h's, which _half.h includes)

# Values per work item: 64 KiB of float32, written while in L2; below two blocks one thread.
cdef enum:
    _BLOCK = 16384

F16C = bool(convt_f16c())
KINDS = {"float16": 0, "bfloat16": 1}


def level(int kind, int isa=-1):
    """The ISA level the 16-bit conversions of ``kind`` run at, given the kernels' ``isa``
    (-1: _cpu.ISA): the vector bodies of float16 need F16C besides AVX2."""
    if isa < 0:
        isa = _cpu.ISA
    return isa if (kind == 1 or F16C) else 0


cdef void _convert(bint to16, const void* src, void* dst, int64_t n, int kind,
                   int num_threads, int isa) noexcept nogil:
    # widen (to16 False: 16-bit src, float32 dst) or narrow, block by block in parallel
    cdef int64_t nb = (n + _BLOCK - 1) // _BLOCK, b, lo, m
    if nb < 2:
        num_threads = 1
    for b in prange(nb, schedule="static", num_threads=num_threads):
        lo = b * _BLOCK
        m = min(<int64_t> _BLOCK, n - lo)
        if to16:
            convt_narrow(isa, kind, <const float*> src + lo, <uint16_t*> dst + lo, m)
        else:
            convt_widen(isa, kind, <const uint16_t*> src + lo, <float*> dst + lo, m)


def widen(const uint16_t[::1] src,   # IN  16-bit values (a uint16 view)
          float[::1] dst,            # OUT float32, same length
          int kind, int num_threads, int isa=-1):
    """dst[i] = src[i] widened to float32 (exact); releases the GIL."""
    cdef int64_t n = src.shape[0]
    if dst.shape[0] != n:
        raise ValueError(f"widen: dst holds {dst.shape[0]} values, src {n}")
    if n == 0:
        return
    isa = level(kind, isa)
    with nogil:
        _convert(False, &src[0], &dst[0], n, kind, num_threads, isa)


def narrow(const float[::1] src,     # IN  float32
           uint16_t[::1] dst,        # OUT 16-bit values (a uint16 view), same length
           int kind, int num_threads, int isa=-1):
    """dst[i] = src[i] rounded to the 16-bit type, to nearest even; releases the GIL."""
    cdef int64_t n = src.shape[0]
    if dst.shape[0] != n:
        raise ValueError(f"narrow: dst holds {dst.shape[0]} values, src {n}")
    if n == 0:
        return
    isa = level(kind, isa)
    with nogil:
        _convert(True, &src[0], &dst[0], n, kind, num_threads, isa)


def pack_taps16(const uint16_t[:, :, ::1] w,     # IN  16-bit IOX weights (C_in, Mg, KT), bits
                float[::1] out,                  # OUT tap k's lines at k * line, per tap
                                                 #     [G][NP][Cg][16]
                int64_t groups, int64_t line, int num_threads, int isa=-1,
                bint stream=False, int64_t spare_bits=0, int kind=0):
    """_pack.pack_taps (the Winograd late sums' taps) from 16-bit weights, widened as they
    are read: a one-shot 16-bit call packs them without a float32 copy first. The same
    layout, return value (the bound on the widened values) and streaming rule; releases the
    GIL."""
    cdef int64_t C_in = w.shape[0], Mg = w.shape[1], KT = w.shape[2]
    cdef int64_t Cg = C_in // groups, NP = Mg // 16, ci, bad = 0
    if Mg % 16:
        raise ValueError(f"pack_taps16: Mg must be a multiple of 16; got {Mg}")
    if C_in == 0 or Mg == 0 or KT == 0:
        return True
    if line < NP * C_in * 16 or out.shape[0] < (KT - 1) * line + NP * C_in * 16:
        raise ValueError(f"pack_taps16: line {line} and out ({out.shape[0]} values) do not "
                         f"hold {KT} taps of {NP * C_in * 16} values")
    isa = level(kind, isa)
    cdef const uint16_t* wptr = &w[0, 0, 0]
    cdef float* optr = &out[0]
    # streamed stores need 32-byte aligned lines (as pack_taps)
    stream = stream and isa >= 1 and (<uintptr_t> optr) % 32 == 0 and (line * 4) % 32 == 0
    with nogil:
        for ci in prange(C_in, schedule="static", num_threads=num_threads):
            bad += convt_taps_h16(isa, kind, wptr + ci * Mg * KT, Mg, KT,
                                  optr + ((ci // Cg) * NP * Cg + ci % Cg) * 16, line, Cg * 16,
                                  <int> spare_bits, stream)
            if stream:
                convt_store_fence()
    return bad == 0
