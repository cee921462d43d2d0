"""The bfloat16 input of the micro variant's dot-product tiles (_bf16kernel.h): x, stored as
bfloat16 (read here as its 16-bit patterns), copied channels-last with each group's
channels padded to an even count with zeros, so that every pair of channels the tiles
multiply at once is one aligned 32-bit slot of a group. No conversion: the copy moves half
the bytes of the float32 path's.

to_pairs_nxc: channels-first (N, C, S) or channels-last (N, S, C) -> (N, S, G * Cg2), Cg2 =
Cg rounded up to even. Channels-first, per block of _SBLOCK positions of one image (an
OpenMP prange over the blocks, each written by one thread), channel by channel: a run of
positions read whole, stored one value per Cg2 * G slots (the block's output, G * Cg2 *
_SBLOCK values, stays in L1 and L2 while it fills).

Assumes: x and xp contiguous, xp of N * S * G * Cg2 values.
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t, uint16_t

cdef extern from "_bf16kernel.h":
    int CONVT_BF16_ON
    int CONVT_BF16_HW
    int CONVT_BF16_WIDE

# the mode bits of the bfloat16 tiles (micro_conv's bf16): on; vdpbf16ps; 32 output channels
BF16_ON, BF16_HW, BF16_WIDE = CONVT_BF16_ON, CONVT_BF16_HW, CONVT_BF16_WIDE

cdef enum:
    _SBLOCK = 32     # positions per work item: 32 x 512 channels x 2 bytes = 32 KiB of xp


cdef void _block_ncx(const uint16_t* x, uint16_t* xp, int64_t S, int64_t s0, int64_t m,
                     int64_t G, int64_t Cg, int64_t Cg2) noexcept nogil:
    # positions s0..s0+m of one image: x (C, S) -> xp rows (S, G * Cg2)
    cdef int64_t C2 = G * Cg2, g, c, s
    cdef const uint16_t* src
    cdef uint16_t* dst
    for g in range(G):
        for c in range(Cg):
            src = x + (g * Cg + c) * S + s0
            dst = xp + s0 * C2 + g * Cg2 + c
            for s in range(m):
                dst[s * C2] = src[s]
        if Cg2 != Cg:
            dst = xp + s0 * C2 + g * Cg2 + Cg
            for s in range(m):
                dst[s * C2] = 0


cdef void _block_nxc(const uint16_t* x, uint16_t* xp, int64_t s0, int64_t m, int64_t G,
                     int64_t Cg, int64_t Cg2) noexcept nogil:
    # positions s0..s0+m of one image: x (S, G * Cg) -> xp rows (S, G * Cg2)
    cdef int64_t g, c, s
    cdef const uint16_t* src
    cdef uint16_t* dst
    for s in range(s0, s0 + m):
        for g in range(G):
            src = x + (s * G + g) * Cg
            dst = xp + (s * G + g) * Cg2
            for c in range(Cg):
                dst[c] = src[c]
            if Cg2 != Cg:
                dst[Cg] = 0


def to_pairs_nxc(const uint16_t[::1] x,   # IN  bfloat16 bits, (N, C, S) or (N, S, C)
                 uint16_t[::1] xp,        # OUT (N, S, G * Cg2)
                 int64_t N, int64_t S, int64_t groups, int64_t Cg, bint channels_first,
                 int num_threads):
    """Copy x into xp, channels-last with each group's Cg channels padded to Cg2 (even);
    releases the GIL. See the module docstring."""
    cdef int64_t Cg2 = Cg + Cg % 2, C = groups * Cg, C2 = groups * Cg2
    cdef int64_t nb = (S + _SBLOCK - 1) // _SBLOCK, item, n, s0, m
    if N == 0 or S == 0 or C == 0:
        return
    if x.shape[0] < N * S * C or xp.shape[0] < N * S * C2:
        raise ValueError(f"to_pairs_nxc: x ({x.shape[0]}) or xp ({xp.shape[0]} values) is "
                         f"too short for N {N}, S {S}, {groups} groups of {Cg} channels")
    cdef const uint16_t* xs = &x[0]
    cdef uint16_t* xd = &xp[0]
    with nogil:
        for item in prange(N * nb, schedule="static", num_threads=num_threads):
            n = item // nb
            s0 = (item % nb) * _SBLOCK
            m = min(<int64_t> _SBLOCK, S - s0)
            if channels_first:
                _block_ncx(xs + n * C * S, xd + n * S * C2, S, s0, m, groups, Cg, Cg2)
            else:
                _block_nxc(xs + n * S * C, xd + n * S * C2, s0, m, groups, Cg, Cg2)
