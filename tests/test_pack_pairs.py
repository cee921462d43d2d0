"""_pack.pack_pairs, the bfloat16 tiles' weight pack (convt._backends.direct.micro_bf16):
the same bits as a NumPy loop over the slots at every ISA level, thread count and store
kind, and the same finiteness verdict."""
import itertools

import numpy as np
import pytest

from convt._kernels import _cpu, _pack

from conftest import assert_close

LEVELS = _cpu.levels()


def _tables(kt, groups, np_, pairs, nr, rng, aligned=True):
    # per tap: an offset and panel stride in slots (some taps unused, -1), regions apart
    kd = np.full(kt, -1, np.int64)
    ks = np.zeros(kt, np.int64)
    off = 0
    for k in rng.permutation(kt):
        if rng.random() < 0.2:
            continue
        kd[k] = off
        ks[k] = pairs * nr * int(rng.integers(1, 3))
        off += groups * np_ * ks[k] + (16 if aligned else 3)
    return kd, ks, off + 16


def _reference(w, size, kd, ks, groups, nr):
    # the obviously correct loop: every weight of a used tap to its half of its slot
    c_in, mg, kt = w.shape
    cg = c_in // groups
    np_ = -(-mg // nr)
    out = np.zeros(2 * size, np.uint16)
    for k, ci, m in itertools.product(range(kt), range(c_in), range(mg)):
        if kd[k] < 0:
            continue
        g, c = divmod(ci, cg)
        slot = kd[k] + (g * np_ + m // nr) * ks[k] + (c // 2) * nr + m % nr
        out[2 * slot + c % 2] = w[ci, m, k]
    return out


def _weights(c_in, mg, kt, rng):
    w = rng.integers(0, 1 << 16, (c_in, mg, kt), dtype=np.uint16)
    w[(w & 0x7F80) == 0x7F80] = 0x3F80   # finite: exponent not all ones
    return w


@pytest.mark.parametrize("stream", [False, True, None])
@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("cg,groups", [(1, 1), (2, 1), (3, 2), (6, 1), (5, 3)])
@pytest.mark.parametrize("mg,kt,nr", [(1, 1, 16), (8, 8, 16), (21, 20, 32), (16, 9, 16),
                                      (40, 16, 32), (32, 3, 32)])
def test_pack_pairs_puts_every_weight_in_its_slot(cg, groups, mg, kt, nr, isa, stream):
    rng = np.random.default_rng(cg * 1000 + mg * 10 + kt)
    c_in = cg * groups
    w = _weights(c_in, mg, kt, rng)
    kd, ks, size = _tables(kt, groups, -(-mg // nr), (cg + 1) // 2, nr, rng)
    want = _reference(w, size, kd, ks, groups, nr)
    for threads in (1, 2):
        buf = np.zeros(2 * size + 32, np.uint16)
        start = (-buf.ctypes.data % 64) // 2   # a 64-byte line, as packing_arrays gives
        got = buf[start:start + 2 * size]
        assert _pack.pack_pairs(w, got, kd, ks, groups, nr, threads, isa, stream)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("cg,groups,mg,kt,nr", [(130, 1, 70, 4, 32), (257, 1, 16, 9, 16),
                                                (64, 3, 96, 2, 32), (3, 1, 200, 16, 16),
                                                (200, 2, 33, 1, 16)])
def test_pack_pairs_splits_its_tasks_without_changing_a_bit(cg, groups, mg, kt, nr, isa):
    # runs of at most 64 pairs (more pairs: several runs a panel), and at least 4 tasks a
    # thread where the pairs allow (few groups x panels: runs split further); any thread
    # count, streamed or not, gives the reference's bits and the finiteness verdict
    rng = np.random.default_rng(cg + mg + kt)
    w = _weights(cg * groups, mg, kt, rng)
    kd, ks, size = _tables(kt, groups, -(-mg // nr), (cg + 1) // 2, nr, rng)
    want = _reference(w, size, kd, ks, groups, nr)
    for threads, stream in itertools.product((1, 2, 3, 5), (False, True)):
        buf = np.zeros(2 * size + 32, np.uint16)
        start = (-buf.ctypes.data % 64) // 2
        got = buf[start:start + 2 * size]
        assert _pack.pack_pairs(w, got, kd, ks, groups, nr, threads, isa, stream)
        np.testing.assert_array_equal(got, want)
    used = np.flatnonzero(kd >= 0)
    bad = w.copy()
    bad[-1, mg - 1, used[-1]] = 0x7FC1   # the last pair, row and used tap: NaN
    assert not _pack.pack_pairs(bad, np.zeros(2 * size, np.uint16), kd, ks, groups, nr, 3,
                                isa)


@pytest.mark.parametrize("isa", LEVELS)
def test_pack_pairs_with_unaligned_tables_stores_normally(isa):
    # tables whose lines are not 32-byte aligned: the stream hint is dropped, same bits
    rng = np.random.default_rng(3)
    w = _weights(4, 32, 10, rng)
    kd, ks, size = _tables(10, 1, 2, 2, 16, rng, aligned=False)
    got = np.zeros(2 * size, np.uint16)
    assert _pack.pack_pairs(w, got, kd, ks, 1, 16, 2, isa, True)
    np.testing.assert_array_equal(got, _reference(w, size, kd, ks, 1, 16))


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("bits", [0x7F80, 0xFF80, 0x7FC1], ids=["inf", "-inf", "nan"])
def test_pack_pairs_reports_a_non_finite_weight_of_a_used_tap_only(bits, isa):
    rng = np.random.default_rng(4)
    w = _weights(6, 21, 12, rng)
    kd, ks, size = _tables(12, 1, 1, 3, 32, rng)
    used, unused = np.flatnonzero(kd >= 0), np.flatnonzero(kd < 0)
    for k, finite in [(used[0], False), (used[-1], False)] + [(k, True) for k in unused[:1]]:
        for c, m in [(0, 0), (5, 20), (3, 9)]:
            bad = w.copy()
            bad[c, m, k] = bits
            out = np.zeros(2 * size, np.uint16)
            assert _pack.pack_pairs(bad, out, kd, ks, 1, 32, 2, isa) is finite


def test_pack_pairs_rejects_tables_that_do_not_fit():
    w = np.zeros((4, 8, 3), np.uint16)
    kd, ks = np.zeros(3, np.int64), np.full(3, 32, np.int64)
    with pytest.raises(ValueError, match=r"pack_pairs: groups \(3\) must divide C_in \(4\)"):
        _pack.pack_pairs(w, np.zeros(1024, np.uint16), kd, ks, 3, 16, 1)
    with pytest.raises(ValueError, match=r"one value per tap \(3\); got 2 and 3"):
        _pack.pack_pairs(w, np.zeros(1024, np.uint16), kd[:2], ks, 1, 16, 1)
    with pytest.raises(ValueError, match=r"out \(10 values\) is too short for the slots"):
        _pack.pack_pairs(w, np.zeros(10, np.uint16), kd, ks, 1, 16, 1)


def test_a_pack_large_enough_to_stream_gives_the_prepared_bits():
    # 256 x 256 channels x 32 taps: 4 MiB of pairs (_pack._STREAM_PAIRS_BYTES), streamed
    # in both the one-shot and the prepared call, as dcgan_g1's are
    import ml_dtypes

    import convt
    from convt._backends.direct import micro_bf16

    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 256, 6)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((256, 256, 32)).astype(ml_dtypes.bfloat16)
    kw = dict(strides=(16,), pads=(8, 8))
    assert w.size * 2 >= _pack._STREAM_PAIRS_BYTES
    op = convt.ConvTranspose(w, **kw)
    if op._plan.geometry(x.shape).variant != micro_bf16.VARIANT.name:
        pytest.skip("bfloat16 pairs do not run here (no AVX512-BF16)")
    want = op(x)
    got = convt.conv_transpose(x, w, **kw)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), method="reference",
                               **kw)
    assert_close(got, ref, "direct", ml_dtypes.bfloat16)
