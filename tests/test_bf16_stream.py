"""The bfloat16 tiles' streamed write-out (_writeout.h's convt_cf16_h16_avx512 with the
STREAM mode bit, storage.streams16) and the 64-byte aligned outputs it needs
(convt._backends.direct.storage.aligned_empty, Plan.__call__'s 16-bit result): streamed
stores give the plain stores' bits, on a y of 1 MiB or more whose lines the write-out fills
whole, and only there."""
import numpy as np
import pytest

import convt
from convt._backends.direct import micro_bf16, storage
from convt._backends.direct.storage import aligned_empty
from convt._kernels import _cpu

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


def _address(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("shape", [(0,), (1,), (3, 5), (16, 64, 32, 32), (7, 1, 9)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, BF16, np.float32, np.float64])
@pytest.mark.parametrize("align", [16, 64, 4096])
def test_aligned_empty_starts_on_the_boundary(shape, dtype, align):
    a = aligned_empty(shape, dtype, align)
    assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous
    assert a.flags.writeable and (a.size == 0 or _address(a) % align == 0)
    a[...] = 1   # the whole view is usable
    assert (a == 1).all()


def _case(rng, n=16):
    # dcgan_g3's layer with n images: phase pairs along a stride-2 last axis, 64-byte lines
    # of y (32 bfloat16 outputs) filled whole by the 16 x 16 blocks; n * 128 KiB of y
    x = rng.standard_normal((n, 16, 16, 16)).astype(BF16)
    w = (rng.standard_normal((16, 64, 4, 4)) * 0.3).astype(BF16)
    b = rng.standard_normal(64).astype(BF16)
    op = convt.ConvTranspose(w, b, method="direct", strides=(2, 2), pads=(1, 1, 1, 1))
    return op, x


def _runs(op, x, out, stream, threads=2):
    plan = op._plan
    geom = plan.geometry(x.shape).geom
    name, _, (lay, wp) = micro_bf16.VARIANT.prepare(geom, plan, None)
    assert name == "micro_bf16"
    mode = micro_bf16.bf16_mode(lay.nr, _cpu.bf16())
    mode |= micro_bf16.BF16_STREAM if stream else 0
    with plan.workspace.borrow() as arena:
        return micro_bf16.run_micro_bf16(x, lay, geom, wp, plan.bias_compute, threads, arena,
                                         out, mode=mode)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_streamed_stores_give_the_plain_bits(threads, rng):
    """Streamed (aligned y, STREAM bit), plain (the bit off) and unaligned (the bit on, y 16
    bytes off a line: plain stores) write-outs give the float32 tiles' sums rounded once,
    as the call does, at any thread count and ISA level (the bit is ignored below AVX-512
    and by the portable body)."""
    op, x = _case(rng)
    # the float32 tiles' sums (float32 write-out) rounded once to bfloat16 by ml_dtypes
    want = _runs(op, x, None, False, threads).astype(BF16).view(np.uint16)
    shape = want.shape
    got = {}
    for kind, stream in [("streamed", True), ("plain", False), ("unaligned", True)]:
        out = aligned_empty(shape, BF16)
        if kind == "unaligned":
            raw = aligned_empty((want.size + 8,), BF16)
            out = raw[8:].reshape(shape)
            assert _address(out) % 64 == 16
        out[...] = np.float32(7.0)   # stale values: every output must be written
        # the gate the call applies, and 64-byte channel rows: the lines filled whole
        assert storage.streams16(out) == (kind != "unaligned")
        assert out.strides[1] % 64 == 0
        got[kind] = _runs(op, x, out, stream, threads)
        assert got[kind] is out
    if _cpu.bf16():   # the call runs these tiles
        np.testing.assert_array_equal(op(x).view(np.uint16), want)
    for kind, y in got.items():
        np.testing.assert_array_equal(y.view(np.uint16), want, err_msg=kind)


def test_the_call_streams_only_large_aligned_16bit_outputs(rng):
    """A prepared bfloat16 call allocates its result on a 64-byte line; the write-out streams
    a 16-bit y of 1 MiB or more on a 64-byte line, never a float32 one, a smaller one or one
    off a line."""
    op, x = _case(rng)
    y = op(x)
    assert y.dtype == BF16 and y.nbytes >= storage.STREAM16_BYTES
    if _cpu.bf16():   # these tiles run the call (else the float32 kernels, rounded after)
        assert _address(y) % 64 == 0 and storage.streams16(y)
    assert not storage.streams16(aligned_empty(y.shape, np.float32))
    small = aligned_empty((storage.STREAM16_BYTES // 2 - 1,), BF16)
    assert not storage.streams16(small)
    off = aligned_empty((y.size + 1,), BF16)[1:]
    assert off.nbytes >= storage.STREAM16_BYTES and not storage.streams16(off)
    op_small, xs = _case(rng, n=2)   # 256 KiB of y: plain stores
    ys = op_small(xs)
    assert not storage.streams16(ys)
    if _cpu.bf16():
        assert ys.flags.owndata   # below _STREAM_BYTES: a plain np.empty (new_output16)
        np.testing.assert_array_equal(
            ys.view(np.uint16), _runs(op_small, xs, None, False).astype(BF16).view(np.uint16))
