"""convt._geometry.chunking: output blocks of one axis, checked against the definition by brute force.

No Dask needed: these are the arithmetic convt.dask builds its graph from.
"""
import itertools

import numpy as np
import pytest

from convt._geometry.chunking import axis_blocks


def _random_chunks(rng, n):
    out, left = [], n
    while left:
        c = min(left, int(rng.integers(1, max(2, n // 2) + 1)))
        out.append(c)
        left -= c
    return out


def _cases():
    rng = np.random.default_rng(7)
    for s, d, k in itertools.product((1, 2, 3, 5), (1, 2), (1, 2, 3, 4)):
        n = int(rng.integers(1, 12))
        ext = (k - 1) * d + 1
        full = (n - 1) * s + ext
        pb = int(rng.integers(-4, min(full, 6)))
        pe = int(rng.integers(-4, 6))
        if full - pb - pe >= 1:
            yield s, d, k, _random_chunks(rng, n), pb, full - pb - pe


@pytest.mark.parametrize("s,d,k,chunks,pb,out_len", list(_cases()))
def test_blocks_tile_the_output_and_read_exactly_what_they_need(s, d, k, chunks, pb, out_len):
    blocks = axis_blocks(chunks, stride=s, dilation=d, kernel=k, pads_begin=pb,
                         out_len=out_len)
    n = sum(chunks)
    starts = np.cumsum([0, *chunks])
    assert blocks[0].out_start == 0 and blocks[-1].out_stop == out_len
    for prev, nxt in zip(blocks, blocks[1:]):
        assert prev.out_stop == nxt.out_start
    for b in blocks:
        assert b.out_stop > b.out_start and 0 <= b.in_start < b.in_stop <= n
        # every (i, k) term that lands in the block reads an input inside [in_start, in_stop)
        needed = {i for i in range(n) for kk in range(k)
                  if b.out_start <= i * s + kk * d - pb < b.out_stop}
        assert needed <= set(range(b.in_start, b.in_stop))
        if needed:  # and nothing more than that
            assert (b.in_start, b.in_stop) == (min(needed), max(needed) + 1)
        # the local call's geometry reproduces the global positions
        ext = (k - 1) * d + 1
        local_full = (b.in_stop - b.in_start - 1) * s + ext
        assert local_full - b.pads_begin - b.pads_end == b.out_stop - b.out_start
        assert b.pads_begin == pb + b.out_start - b.in_start * s
        # the cuts select [in_start, in_stop) from consecutive input chunks
        got = [starts[b.first_chunk + j] + np.arange(lo, hi) for j, (lo, hi) in enumerate(b.cuts)]
        np.testing.assert_array_equal(np.concatenate(got), np.arange(b.in_start, b.in_stop))


def test_interior_halo_is_floor_of_extent_over_stride():
    """Boundaries at input boundary a -> output a*s - pb; the block then starts reading
    floor((K-1)*d / s) inputs before a (the issue's ceil is an upper bound)."""
    for s, d, k in [(2, 1, 4), (2, 1, 3), (3, 2, 3), (1, 1, 5), (4, 1, 2)]:
        blocks = axis_blocks([6, 6, 6], stride=s, dilation=d, kernel=k, pads_begin=1,
                             out_len=(18 - 1) * s + (k - 1) * d + 1 - 2)
        assert [b.out_start for b in blocks[1:]] == [6 * s - 1, 12 * s - 1]
        halo = (k - 1) * d // s
        assert [b.in_start for b in blocks[1:]] == [6 - halo, 12 - halo]
        assert [b.in_stop for b in blocks[:-1]] == [6, 12]
        assert len({b.pads_begin for b in blocks[1:]}) == 1


def test_pads_that_crop_whole_chunks_drop_their_blocks():
    blocks = axis_blocks([2, 2, 2, 2], stride=1, dilation=1, kernel=1, pads_begin=5,
                         out_len=2)
    assert [(b.out_start, b.out_stop) for b in blocks] == [(0, 1), (1, 2)]
    assert [(b.in_start, b.in_stop) for b in blocks] == [(5, 6), (6, 7)]
