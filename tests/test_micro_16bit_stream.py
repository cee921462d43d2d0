"""The micro variant's float32 tiles written into a large 16-bit channels-first y: at ISA
level 2 in 16 x 16 blocks (_writeout.h's convt_cf16_h16_avx512, float16 and bfloat16; a pair
of stride-2 phases fills a channel's 64-byte line at once), whole aligned lines streamed past
the caches when y takes storage.STREAM16_BYTES or more on a 64-byte line (micro_conv's
``stream``). The promise: the float32 call's result rounded once by astype, bit for bit,
streamed or not, into the call's own y or an ``out`` at any offset, with one and two threads,
group widths that are not a multiple of 16 (a block of 8 and channels one at a time after
the blocks of 16), runs of rows cut by the tasks and lines of y off 64 bytes.
"""
import numpy as np
import pytest

from convt._backends.direct import micro, storage
from convt._kernels import _cpu

from _helpers import micro_ops
from conftest import DTYPES, np_dtype

HALF = [d for d in DTYPES if d in ("float16", "bfloat16")]
MICRO_LEVELS = [lv for lv in _cpu.levels() if lv >= 1]

# (x NCX, w IOX, keywords), y of 1.3-1.5 MiB in 16 bits: Mg 24 (16 + 8), 20 (16 +
# 4 one at a time), 17, 32; output lines of 64 (two 64-byte lines a channel row), 46 and 62
# (rows off 64 bytes), stride 2 (pairs of phases) and 1 (one phase)
_CASES = [
    ((2, 64, 32, 32), (64, 24, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=4,
                                           output_padding=(1, 1))),
    ((6, 48, 23, 23), (48, 20, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=3,
                                           output_padding=(1, 1))),
    ((5, 34, 31, 31), (34, 17, 3, 3), dict(strides=(2, 2), pads=(1, 1, 0, 0), group=2)),
    ((3, 64, 64, 64), (64, 32, 3, 3), dict(pads=(1, 1, 1, 1), group=2)),
]


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint16)


def _inputs(case, name, rng):
    xs, wg, kw = _CASES[case]
    dt = np_dtype(name)
    x = rng.standard_normal(xs).astype(dt)
    w = rng.standard_normal(wg).astype(dt)
    b = rng.standard_normal(wg[1] * kw.get("group", 1)).astype(dt)
    return x, w, b, kw, dt


def _spy(monkeypatch, force=None):
    """Record micro_conv's ``stream`` per call (or force it: the kernels' own line test must
    then keep unaligned lines plain)."""
    seen = []
    real = micro.micro_conv

    def conv(*args, stream=0, **kwargs):
        stream = stream if force is None else force
        seen.append(stream)
        return real(*args, stream=stream, **kwargs)

    monkeypatch.setattr(micro, "micro_conv", conv)
    return seen


@pytest.mark.parametrize("isa", MICRO_LEVELS)
@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("case", range(len(_CASES)))
def test_streamed_write_out_gives_the_float32_result_rounded_once(case, name, isa, rng,
                                                                   monkeypatch):
    monkeypatch.setattr(_cpu, "ISA", isa)
    x, w, b, kw, dt = _inputs(case, name, rng)
    seen = _spy(monkeypatch)
    ys = []
    for workers in (1, 2):
        op16, op32 = micro_ops(w, b, kw, workers)
        assert op16._plan.geometry(x.shape).variant == "micro"
        want = _bits(op32(x.astype(np.float32)).astype(dt))
        del seen[:]
        y = op16(x)
        # the call's own y: on a cache line, large enough to stream
        assert y.nbytes >= storage.STREAM16_BYTES and storage.streams16(y)
        assert seen == [1]
        np.testing.assert_array_equal(_bits(y), want)
        ys.append(_bits(y))
    np.testing.assert_array_equal(ys[0], ys[1])


@pytest.mark.parametrize("isa", MICRO_LEVELS)
@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("shift", [0, 1, 8, 31])
def test_out_at_any_offset_is_written_whole(shift, name, isa, rng, monkeypatch):
    """``out`` ``shift`` 16-bit values past a 64-byte line, stale values in it: streamed
    only on the line (the gate), and with the kernels told to stream anyway (their test of
    each block's lines keeps the others plain) the same bits."""
    monkeypatch.setattr(_cpu, "ISA", isa)
    x, w, b, kw, dt = _inputs(0, name, rng)
    op16, op32 = micro_ops(w, b, kw, 2)
    want = _bits(op32(x.astype(np.float32)).astype(dt))
    for force in (None, 1):
        seen = _spy(monkeypatch, force)
        raw = storage.aligned_empty((want.size + 32,), dt)
        out = raw[shift:shift + want.size].reshape(want.shape)
        out[...] = np.float32(7.0)
        assert op16(x, out=out) is out
        assert seen == [1 if force else int(shift == 0)]
        np.testing.assert_array_equal(_bits(out), want, err_msg=f"force={force}")
        monkeypatch.undo()
        monkeypatch.setattr(_cpu, "ISA", isa)


@pytest.mark.parametrize("isa", MICRO_LEVELS)
@pytest.mark.parametrize("case", [0, 1])
def test_streamed_blocks_with_specials(case, isa, rng, monkeypatch):
    # NaN, Inf and float16 overflow in a 16 x 16 block: the block takes the portable body
    # (NumPy's NaN bits), the others the vector rounding
    monkeypatch.setattr(_cpu, "ISA", isa)
    x, w, b, kw, dt = _inputs(case, "float16", rng)
    flat = x.reshape(-1)
    flat[::997] = 6e4
    flat[5::1289] = np.inf
    flat[13::1601] = np.nan
    op16, op32 = micro_ops(w, b, kw, 2)
    with np.errstate(invalid="ignore", over="ignore"):
        want = op32(x.astype(np.float32)).astype(np.float16)
    assert np.isnan(want).any() and np.isinf(want).any()
    np.testing.assert_array_equal(_bits(op16(x)), _bits(want))


@pytest.mark.parametrize("isa", MICRO_LEVELS)
def test_streamed_blocks_of_subnormal_results(isa, rng, monkeypatch):
    # float16 results nearly all subnormal, of both signs (x scaled down, no bias):
    # vcvtps2ph's rounding against astype's in every vector block, no NaN to send a block
    # to the portable body
    monkeypatch.setattr(_cpu, "ISA", isa)
    x, w, b, kw, dt = _inputs(0, "float16", rng)
    x = (x.astype(np.float32) * np.float32(2.0 ** -22)).astype(np.float16)
    b = np.zeros_like(b)
    op16, op32 = micro_ops(w, b, kw, 2)
    want = op32(x.astype(np.float32)).astype(np.float16)
    tiny = np.abs(want.astype(np.float32)) < np.float32(2.0 ** -14)
    assert tiny.mean() > 0.9 and (want != 0).mean() > 0.5 and np.signbit(want).mean() > 0.3
    np.testing.assert_array_equal(_bits(op16(x)), _bits(want))


def test_the_stream_gate_and_the_variants_16bit_result():
    # the micro variant's new 16-bit result: on a cache line from STREAM16_BYTES up (what
    # the gate streams), np.empty below; float32 never streams
    v = micro.VARIANT
    big = v.new_16bit((storage.STREAM16_BYTES // 2,), np.float16)
    assert big.__array_interface__["data"][0] % storage.ALIGN == 0 and storage.streams16(big)
    small = v.new_16bit((storage.STREAM16_BYTES // 2 - 1,), np.float16)
    assert small.flags.owndata and not storage.streams16(small)
    assert not storage.streams16(storage.aligned_empty(big.shape, np.float32))
    assert not storage.streams16(storage.aligned_empty((big.size + 1,), np.float16)[1:])
