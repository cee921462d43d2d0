"""The AMX-BF16 tiles on a portable C emulation of the AMX instructions, for testing them on
any machine and for the hardware's self-check (convt._backends.direct.micro_amx).

This module is _micro.pyx compiled a second time with CONVT_AMX_EMU defined (setup.py), so
that _amxkernel.h's macro layer runs the emulation (Intel SDM semantics of LDTILECFG,
TILELOADD, TILESTORED, TILEZERO, TILERELEASE and TDPBF16PS, with the hardware's checks of
the tile configuration and the operands' shapes). Its ``micro_conv`` with the bf16 mode bit
BF16_AMX computes what the hardware kernel computes. A fault (what hardware turns into #GP or
#UD, a crash) is recorded and the instruction skipped: ``take_fault`` returns the first one.

``config_error`` checks the configuration the kernel loads, ``check_config`` any 64 bytes,
and ``tile_dpbf16ps`` runs one TDPBF16PS on given tiles (the tests' window on the semantics).
"""
include "_micro.pyx"

from libc.stdint cimport int64_t, uint8_t, uint16_t

cdef extern from "_amxkernel.h" nogil:
    int CONVT_AMX_KC
    int CONVT_AMX_ROWS
    ctypedef struct convt_amx_cfg:
        pass
    void convt_amx_config(convt_amx_cfg* cfg)
    const char* convt_amx_config_error(const void* cfg)
    const char* convt_amxemu_take_fault()
    int64_t convt_amxemu_halves[3]
    void convt_amxemu_loadconfig(const void* cfg)
    void convt_amxemu_release()
    void convt_amxemu_zero(int t)
    void convt_amxemu_load(int t, const void* base, int64_t stride)
    void convt_amxemu_store(int t, void* base, int64_t stride)
    void convt_amxemu_dpbf16ps(int c, int a, int b)

# the kernel's block: rows, and most taps x pairs (rounded up to 16) of its gathered copy
ROWS, KC = CONVT_AMX_ROWS, CONVT_AMX_KC


def take_fault():
    """The first emulated fault since the last call (a str naming the instruction, the tile
    and the exception), or None; clears it."""
    cdef const char* text = convt_amxemu_take_fault()
    return None if text == NULL else text.decode()


def take_halves():
    """(no data, read in place, gathered): how many 16-row halves of A tiles the kernel
    classified so since the last call (per tap, block, group and 32-row block); resets."""
    counts = tuple(int(convt_amxemu_halves[i]) for i in range(3))
    for i in range(3):
        convt_amxemu_halves[i] = 0
    return counts


def config_bytes():
    """The 64-byte tile configuration the kernel loads (palette 1, 8 tiles of 16 x 64 bytes)."""
    cdef convt_amx_cfg cfg
    convt_amx_config(&cfg)
    return bytes((<uint8_t*> &cfg)[:64])


def check_config(const uint8_t[::1] cfg):
    """None if LDTILECFG accepts the 64 bytes ``cfg``, else why it raises #GP."""
    if cfg.shape[0] != 64:
        raise ValueError(f"check_config: a tile configuration is 64 bytes; got {cfg.shape[0]}")
    cdef const char* why = convt_amx_config_error(&cfg[0])
    return None if why == NULL else why.decode()


def config_error():
    """``check_config`` of the configuration the kernel loads (the same C function builds it
    for the hardware kernel): None when valid."""
    return check_config(config_bytes())


def tile_dpbf16ps(const uint8_t[::1] cfg,      # IN  64 bytes for LDTILECFG
                  const uint16_t[:, ::1] a,    # IN  A's rows, bfloat16 bits
                  const uint16_t[:, ::1] b,    # IN  B's rows (pairs), bfloat16 bits
                  float[:, ::1] c,             # IN/OUT C's rows, float32
                  int tc=0, int ta=4, int tb=6):
    """LDTILECFG cfg; TILELOADD tmm``tc`` <- c, tmm``ta`` <- a, tmm``tb`` <- b (each row
    stride its array's); TDPBF16PS tmm``tc``, tmm``ta``, tmm``tb``; TILESTORED c <- tmm``tc``;
    TILERELEASE, on the emulation. Returns ``take_fault()``: None, or the first fault (then
    the instructions after it ran on whatever state it left)."""
    take_fault()
    convt_amxemu_loadconfig(&cfg[0])
    convt_amxemu_load(tc, &c[0, 0], c.strides[0])
    convt_amxemu_load(ta, &a[0, 0], a.strides[0])
    convt_amxemu_load(tb, &b[0, 0], b.strides[0])
    convt_amxemu_dpbf16ps(tc, ta, tb)
    convt_amxemu_store(tc, &c[0, 0], c.strides[0])
    convt_amxemu_release()
    return take_fault()
