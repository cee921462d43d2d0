"""_pack.pack_taps, the float32 kernel taps of wino_conv's late sums
(convt._backends.direct.winograd.wino_taps): its layout written out in NumPy, the same bits
at every ISA level (the AVX-512 body's 16 x 16 blocks and the AVX2 body's 8 x 8 ones and
single taps past them), thread count and store kind, and the same verdict on weights too
large for the Winograd sums."""
import numpy as np
import pytest

from convt._kernels import _cpu
from convt._kernels._pack import pack_taps

LEVELS = _cpu.levels()


def _aligned(n, shift=0):
    """n float32 zeros starting ``shift`` values past a 64-byte boundary."""
    raw = np.zeros(n + 32, np.float32)
    start = (-raw.ctypes.data % 64) // 4 + shift
    return raw[start:start + n]


def _reference(w, groups, line):
    # tap k of input channel c (group g) and output channel m at
    # k * line + ((g * panels + m // 16) * Cg + c) * 16 + m % 16
    c_in, mg, kt = w.shape
    cg, panels = c_in // groups, mg // 16
    out = np.zeros(kt * line, np.float32)
    body = w.reshape(groups, cg, panels, 16, kt).transpose(4, 0, 2, 1, 3)
    for k in range(kt):
        out[k * line:k * line + body[k].size] = body[k].reshape(-1)
    return out


# (C_in, Mg, taps, groups): 16-tap blocks alone (16, 32), with 8-tap blocks and single taps
# past them (25, 27, 41), none (9, 3), and grouped
SHAPES = [(8, 16, 16, 1), (6, 32, 32, 2), (5, 16, 25, 1), (4, 48, 27, 2), (3, 16, 41, 1),
          (8, 32, 9, 2), (2, 16, 3, 1)]


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize("c_in, mg, kt, groups", SHAPES)
@pytest.mark.parametrize("isa", LEVELS)
def test_pack_taps_writes_its_layout_at_every_level(isa, c_in, mg, kt, groups, stream):
    w = np.random.default_rng(kt).standard_normal((c_in, mg, kt)).astype(np.float32)
    line = c_in * mg + 16   # a gap after each tap's lines, left untouched
    want = _reference(w, groups, line)
    for workers in (1, 2):
        got = _aligned(kt * line)
        assert pack_taps(w, got, groups, line, workers, isa, stream)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("kt", [16, 25, 9])
def test_pack_taps_streams_whole_lines_off_a_64_byte_boundary(isa, kt):
    # 32-byte aligned lines that are not 64-byte aligned: the AVX-512 body stores each line
    # in two streamed halves instead of one store (which would fault), same values
    w = np.random.default_rng(1).standard_normal((4, 32, kt)).astype(np.float32)
    line = 4 * 32 + 8
    got = _aligned(kt * line, 8)
    assert pack_taps(w, got, 1, line, 2, isa, True)
    np.testing.assert_array_equal(got, _reference(w, 1, line))


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("kt", [16, 25, 9])
@pytest.mark.parametrize("value, spare, ok", [
    (np.inf, 0, False), (np.nan, 0, False), (-np.inf, 2, False),
    (2.0 ** 127, 1, False), (2.0 ** 126, 1, True), (2.0 ** 126, 2, False),
    (2.0 ** 125, 2, True),
    (np.finfo(np.float32).max, 0, True), (-1e-45, 3, True)])
def test_pack_taps_flags_weights_the_sums_could_overflow(isa, kt, value, spare, ok):
    # the verdict is "every weight below 2^(emax + 1 - spare)", wherever the weight sits: in
    # a 16 x 16 block, an 8 x 8 one or a single tap past them
    rng = np.random.default_rng(2)
    for where in [(0, 0, 0), (3, 31, kt - 1), (1, 17, kt // 2)]:
        w = rng.standard_normal((4, 32, kt)).astype(np.float32)
        w[where] = value
        got = _aligned(kt * 4 * 32)
        assert pack_taps(w, got, 1, 4 * 32, 2, isa, False, spare) == ok
        np.testing.assert_array_equal(got.view(np.uint32),
                                      _reference(w, 1, 4 * 32).view(np.uint32))
