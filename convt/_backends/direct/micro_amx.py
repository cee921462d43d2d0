"""bfloat16 storage on AMX-BF16 tiles (tdpbf16ps), at ISA level 3 ("avx512_amx").

Where the process runs at level 3 (AMX-TILE and AMX-BF16, the tile state granted by Linux:
convt._kernels._cpu; ``CONVT_ISA`` caps it) and the storage dtype is bfloat16, this variant
takes the geometries micro_bf16 would (``MicroBf16.fits``): the same phases, tasks, pair
copy of x and pair-packed weights [phase][G][NP][tap][Cg2/2][NR][2], with each 32-row x NR
block of a tile computed on tile registers (convt/_kernels/_amxkernel.h, through
_tile.pxd's _tile_amx), accumulating in float32 and rounded once by the same write-out.
Its layout (``amx_layout``) differs from micro_bf16's in three places: a task's tile holds
whole 32-row blocks, a block of taps gathers at most 256 pairs x taps (pairs rounded up to
16, the K of a tile), and the packed weights end with 16 lines of zeros (the K tail's tile
reads past the last pair).

The kernel cannot be tested on a CPU without AMX, so two things guard it:
- ``convt._kernels._amxemu`` is the same kernel source on a C emulation of the instructions
  (tests/test_amx.py runs it against the reference);
- at its first use in a process, ``amx_ready`` runs the hardware kernel and the emulated
  one on two fixed small layers and turns AMX off for the process, with a RuntimeWarning
  naming what differed, if they disagree beyond the float32 bound (``self_check``).
"""
from __future__ import annotations

import dataclasses
import functools
import warnings

import numpy as np

from ..._kernels import _amxemu, _cpu
from ..._kernels._bf16 import BF16_AMX, BF16_ON, BF16_WIDE
from ..._kernels._micro import NR_F32, micro_conv
from .base import DirectKind
from .micro import KC, MAX_TB, micro_macs
from .micro_bf16 import (MicroBf16, bf16_layout, bf16_nr, packed_pairs, run_16bit,
                         run_micro_bf16, stream_bit)

__all__ = ["VARIANT", "amx_layout", "amx_mode", "amx_ready", "bf16_kernel", "packed_amx",
           "run_f32", "self_check"]

_ROWS = 32     # rows of a block (_amxkernel.h CONVT_AMX_ROWS)
_K = 16        # pairs of a tile row
# The tiles' multiply-adds per second relative to micro_bf16's (docs/performance.md,
# "AMX-BF16 tiles"): a tdpbf16ps is 16 x 16 x 32 multiply-adds in 16 cycles, 4x a
# vdpbf16ps pipe's 32 a cycle.
_AMX_RATE = 4.0
# The self-check's bound on |hardware - emulation| over the largest emulated output: the
# float32 tiles' normwise bound (tests/test_bf16.py's TOL_F32); the hardware may order its
# float32 additions differently from the SDM's pseudo-code, never by more.
_CHECK_TOL = 1e-5
_CHECK = {}
_EMULATE = False   # tests set it: the runner then calls the emulated kernel


def amx_mode(nr):
    """micro_conv's ``bf16`` mode bits for the AMX tiles of width ``nr``."""
    return BF16_ON | BF16_AMX | (BF16_WIDE if nr > NR_F32 else 0)


def _kernel(emulated):
    return _amxemu.micro_conv if emulated else micro_conv


def amx_ready(geom=None):
    """Whether the AMX tiles run in this process: at ISA level 3 (read at call time), once
    the self-check passed, run at the first call at that level that gives a geometry
    ``geom`` (any: its class makes the check's layers; without one, an unchecked process
    is not ready)."""
    if _cpu.ISA < 3:
        return False
    if _EMULATE:
        return True
    if "ok" not in _CHECK:
        if geom is None:
            return False
        _CHECK["ok"] = self_check(geom)
    return _CHECK["ok"]


def bf16_kernel(geom=None):
    """What runs bfloat16 storage in this process, for ``show_config``: the AMX tiles, the
    AVX512-BF16 tiles, or the float32 kernels on widened values (``geom``: as for
    ``amx_ready``)."""
    if amx_ready(geom):
        return "micro_amx (AMX-BF16 tdpbf16ps" + (", emulated)" if _EMULATE else ")")
    if _cpu.bf16():
        return "micro_bf16 (AVX512-BF16 vdpbf16ps)"
    return "float32 kernels (bfloat16 widened)"


class MicroAmx(MicroBf16):
    """micro_bf16's phases and pair packing on AMX-BF16 tiles of 32 rows x 16 or 32 output
    channels, for bfloat16 storage at ISA level 3. Not in the rule's list: it takes a
    geometry from the dense variants before micro_bf16 does (``takes``)."""

    name = "micro_amx"
    label = "micro_amx (AMX-BF16 tile dot products on bfloat16 pairs)"
    fallback = "micro"

    def takes(self, geom, variant, storage):
        """Whether this variant runs ``geom`` in place of ``variant`` for ``storage``."""
        # the level first (below 3, nothing else is asked), the self-check last (it runs
        # once, on the first bfloat16 layer these tiles suit)
        return _cpu.ISA >= 3 and self.fits(geom, variant, storage) and amx_ready(geom)

    def kind(self, geom, kind):
        cg = geom.c_in // geom.groups
        kp = -(-((cg + 1) // 2) // _K) * _K   # pairs, padded to the tiles' K
        macs = micro_macs(geom, bf16_nr(geom)) * 2 * kp // max(cg, 1)
        return DirectKind(self.name, "", macs, kind.useful)

    def rate(self, geom, kind, c):
        return super().rate(geom, kind, c) * _AMX_RATE

    def tiles(self):
        return amx_layout, packed_amx, _run


@functools.lru_cache(maxsize=64)
def amx_layout(geom):
    """``bf16_layout(geom)`` for the AMX tiles: tasks of whole 32-row blocks (MB rounded up
    to 32, each set's rows split into equal tasks of a multiple of 32 rows: then a tile's
    16-row halves start where a run of 16 positions along an output line, or of 16 images,
    does, and are read in place), taps per block so that taps x pairs rounded up to 16 is at
    most KC (the kernel's gathered copy), and 16 lines of NR slots past the packed weights
    (zeros)."""
    lay = bf16_layout(geom)
    if geom.c_in == 0:
        return lay
    kpad = -(-lay.cc // _K) * _K
    mb = -(-lay.mb // _ROWS) * _ROWS
    tasks = []
    for first, count in dict.fromkeys((int(t[0]), int(t[1])) for t in lay.tasks):
        rows = max(geom.batch * int(np.prod(p[:3])) for p in lay.phases[first:first + count])
        size = -(-rows // -(-rows // mb) // _ROWS) * _ROWS
        tasks += [(first, count, r, size) for r in range(0, rows, size)]
    # the pair pack's tables stay bf16_layout's: the phases, taps and width are the same
    return dataclasses.replace(lay, tb=max(1, min(MAX_TB, KC // kpad)), mb=mb,
                               tasks=np.array(tasks, np.int64).reshape(-1, 4),
                               packed=lay.packed + _K * lay.nr)


def packed_amx(layout, w_iox, groups, workers=1, buffer=None):
    """(packed, finite): ``packed_pairs`` for ``amx_layout``'s tiles, the 16 lines past the
    weights zeroed."""
    out, finite = packed_pairs(layout, w_iox, groups, workers, buffer)
    pad = _K * layout.nr
    if out.size >= pad:
        out[out.size - pad:] = 0
    return out, finite


def run_f32(xa, state, geom, plan, out=None, emulated=None):
    """The float32 result of the AMX tiles for a plan prepared by this variant (``state``),
    in ``out`` when given; ``emulated`` (default: the module's switch, off) runs the
    emulation (convt._kernels._amxemu) instead of the instructions."""
    layout, wp = state
    emulated = _EMULATE if emulated is None else emulated
    with plan.workspace.borrow() as arena:
        return _call(xa, layout, geom, wp, plan.bias_compute, plan.threads(geom), arena, out,
                     _kernel(emulated))


def _call(xa, layout, geom, wp, bias, workers, arena, out, conv):
    # the write-out after the tiles is micro_bf16's: it streams through the same gate
    mode = amx_mode(layout.nr) | (0 if out is None else stream_bit(out))
    y = run_micro_bf16(xa, layout, geom, wp, bias, workers, arena, out, mode=mode,
                       conv=conv)
    if conv is not micro_conv:
        fault = _amxemu.take_fault()
        if fault is not None:
            raise RuntimeError(f"micro_amx: the emulated AMX tiles faulted ({fault}); on "
                               "hardware this would be a crash: this is a bug in convt")
    return y


def _run(xa, state, geom, plan, out=None):
    return run_16bit(run_f32, xa, state, geom, plan, out)


class _Arena:
    # the scratch the tiles ask for (convt._dispatch.workspace.Arena's get, unkept)
    def get(self, name, shape, dtype, zero_key=None):
        return np.zeros(shape, dtype) if zero_key is not None else np.empty(shape, dtype)


# The self-check's layers (every field of a geometry) and seeds: 32-wide tiles with a K tail
# (20 pairs), direct and gathered rows, 2-D stride 2; 16-wide tiles, 2 groups of an odd
# channel count (18 pairs), 1-D dilated, channels-last.
_CHECK_LAYERS = (
    (dict(batch=2, c_in=40, c_out=64, groups=1, in_shape=(5, 19), out_shape=(9, 37),
          kernel=(3, 3), strides=(2, 2), dilations=(1, 1), pads_begin=(1, 1),
          pads_end=(1, 1), data_format="NCX"), 3),
    (dict(batch=1, c_in=70, c_out=32, groups=2, in_shape=(40,), out_shape=(43,),
          kernel=(5,), strides=(1,), dilations=(2,), pads_begin=(2,), pads_end=(3,),
          data_format="NXC"), 5),
)


def self_check(geom, kernel=None):
    """Whether ``kernel`` (default: the hardware's micro_conv, which must only be called at
    ISA level 3) agrees with the emulated AMX tiles on ``_CHECK_LAYERS`` (made as copies of
    the geometry ``geom`` with every field replaced); if not, a RuntimeWarning says what
    differed (or why the configuration is invalid)."""
    why = _amxemu.config_error()
    if why is None:
        layers = [(dataclasses.replace(geom, **fields), seed) for fields, seed in _CHECK_LAYERS]
        why = _compare(layers, micro_conv if kernel is None else kernel)
    if why is None:
        return True
    warnings.warn(f"convt: the AMX-BF16 tiles failed their self-check ({why}); bfloat16 "
                  "storage runs the AVX512-BF16 or float32 kernels in this process",
                  RuntimeWarning, stacklevel=3)
    return False


def _compare(layers, kernel):
    import ml_dtypes   # bfloat16 storage implies it (convt's 16-bit dtypes)

    for geom, seed in layers:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal(geom.array_shape("input")).astype(ml_dtypes.bfloat16)
        w = rng.standard_normal((geom.c_in, geom.c_out // geom.groups, *geom.kernel))
        bias = rng.standard_normal(geom.c_out).astype(np.float32)
        lay = amx_layout(geom)
        wp, _ = packed_amx(lay, w.astype(ml_dtypes.bfloat16), geom.groups)
        ys = [_call(x, lay, geom, wp, bias, 1, _Arena(), None, k)
              for k in (kernel, _amxemu.micro_conv)]
        diff = np.abs(ys[0].astype(np.float64) - ys[1])
        scale = max(1.0, float(np.abs(ys[1]).max()))
        if not np.isfinite(diff).all() or float(diff.max()) > _CHECK_TOL * scale:
            at = np.unravel_index(int(np.nanargmax(np.where(np.isfinite(diff), diff, np.inf))),
                                  diff.shape)
            return (f"on a {geom.ndim}-D layer of {geom.c_in} -> {geom.c_out} channels, output "
                    f"{tuple(int(i) for i in at)} is {ys[0][at]!r}, emulated {ys[1][at]!r}")
    return None


VARIANT = MicroAmx()
