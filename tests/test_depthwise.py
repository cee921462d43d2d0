"""The depthwise variant of the direct backend (1-3 channels per group in or out) against the
reference: ranks 1-3, strides, dilations, kernels shorter than the stride, pads of either sign,
output_padding, output_shape beyond the natural length, both layouts, non-contiguous inputs,
dtypes; results are bit-identical for any thread count. The variant is pinned where the rule
would price a dense variant below it (tests/test_dispatch.py tests the rule)."""
import itertools

import numpy as np
import pytest

from convt._kernels import _cpu

import convt

from conftest import assert_close, assert_same_for_any_thread_count, np_dtype

# (groups, Cg, Mg): depthwise, channel multiplier 2 and 3, 3 -> 1, 1 -> 3 (not grouped),
# 2 in / 3 out per group, and 6 in / 1 out (min(Cg, Mg) < 4 still picks the variant).
CHANNELS = [(3, 1, 1), (2, 1, 2), (2, 1, 3), (1, 3, 1), (1, 1, 3), (2, 2, 3), (1, 6, 1)]


def _cases():
    rng = np.random.default_rng(4242)
    cases = []
    for nd, s, d in itertools.product((1, 2, 3), (1, 2, 3, 4), (1, 2, 3)):
        if nd == 3 and (s == 4 or d == 3):
            continue
        for _ in range(2 if nd < 3 else 1):
            k = tuple(int(v) for v in rng.integers(1, 6 if nd < 3 else 4, nd))
            strides = tuple(int(v) for v in rng.integers(1, s + 1, nd - 1)) + (s,)
            dil = tuple(int(v) for v in rng.integers(1, d + 1, nd - 1)) + (d,)
            pads = tuple(int(v) for v in rng.integers(0, 4, 2 * nd))
            op = tuple(int(rng.integers(0, max(a, b))) for a, b in zip(strides, dil))
            size = tuple(int(v) for v in rng.integers(1, 9 if nd < 3 else 5, nd))
            if rng.random() < 0.4:   # output_shape around the natural length: pads of either sign
                natural = [(i - 1) * a + (kk - 1) * b + 1 for i, a, kk, b in
                           zip(size, strides, k, dil)]
                pads = tuple(max(1, n + int(rng.integers(-2, 5))) for n in natural)
                op = None
            channels = CHANNELS[int(rng.integers(len(CHANNELS)))]
            batch = int(rng.choice([0, 1, 3]))
            fmt = "NXC" if rng.random() < 0.4 else "NCX"
            cases.append((size, k, strides, dil, pads, op, channels, batch, fmt))
    return cases


CASES = _cases()


def _run(case, dtype=np.float64, workers=None, contiguous=True):
    """y and the float64 reference; ``op`` None means ``pads`` is an explicit output_shape."""
    size, k, strides, dil, pads, op, (groups, cg, mg), batch, fmt = case
    rng = np.random.default_rng(len(str(case)))
    x = rng.standard_normal((batch, groups * cg, *size)).astype(dtype)
    w = rng.standard_normal((groups * cg, mg, *k)).astype(dtype)
    b = rng.standard_normal(groups * mg).astype(dtype)
    kw = dict(strides=strides, dilations=dil, group=groups)
    if op is None:
        kw.update(output_shape=pads)
    else:
        kw.update(pads=pads, output_padding=op)
    try:
        ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                   b.astype(np.float64), method="reference", **kw)
    except ValueError:
        pytest.skip("pads leave no output")
    xl = np.moveaxis(x, 1, -1) if fmt == "NXC" else x
    if not contiguous:   # every other element of a twice-as-large buffer
        big = np.zeros(tuple(2 * n for n in xl.shape), xl.dtype)
        big[tuple(slice(None, None, 2) for _ in xl.shape)] = xl
        xl = big[tuple(slice(None, None, 2) for _ in xl.shape)]
    op_ = convt.ConvTranspose(w, b, method="direct", data_format=fmt, workers=workers, **kw)
    op_._plan.pin = ("depthwise", False)
    assert op_._plan.geometry(xl.shape).variant == "depthwise"
    y = op_(xl)
    assert y.flags.c_contiguous
    y = np.moveaxis(y, -1, 1) if fmt == "NXC" else y
    return y, ref


@pytest.mark.parametrize("case", CASES, ids=[f"c{i}" for i in range(len(CASES))])
def test_depthwise_matches_reference(case):
    y, ref = _run(case)
    assert_close(y, ref, "direct", "float64")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", CASES[::4], ids=[f"c{i}" for i in range(0, len(CASES), 4)])
def test_depthwise_dtypes(case, dtype):
    y, ref = _run(case, np_dtype(dtype))
    assert_close(y, ref, "direct", dtype)


@pytest.mark.parametrize("case", CASES[1::5], ids=[f"c{i}" for i in range(1, len(CASES), 5)])
def test_depthwise_non_contiguous(case):
    y, ref = _run(case, contiguous=False)
    assert_close(y, ref, "direct", "float64")


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_depthwise_output_shape_beyond_natural(nd, fmt):
    """Explicit output_shape larger than the natural length (and K < s): bias-only tails."""
    natural = 3 * 3 + 2
    case = ((4,) * nd, (2,) * nd, (3,) * nd, (1,) * nd, (natural + 3,) * nd, None, (2, 1, 2), 2,
            fmt)
    y, ref = _run(case)
    assert_close(y, ref, "direct", "float64")


def test_depthwise_long_rows_split_into_blocks():
    """Rows longer than the phase buffer run as several tasks (1-D, stride 1 and 3)."""
    for s in (1, 3):
        case = ((3001,), (5,), (s,), (2,), (3, -1), (0,), (2, 1, 2), 2, "NCX")
        y, ref = _run(case)
        assert_close(y, ref, "direct", "float64")


def test_depthwise_bilinear_picks_variant():
    w = np.ones((8, 1, 4, 4), np.float32)
    for fmt in ("NCX", "NXC"):
        op = convt.ConvTranspose(w, group=8, strides=(2, 2), pads=(1, 1, 1, 1), data_format=fmt)
        shape = (1, 8, 16, 16) if fmt == "NCX" else (1, 16, 16, 8)
        assert op._plan.geometry(shape).variant == "depthwise"


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("groups, cg, mg", [(32, 1, 1), (16, 1, 2), (1, 3, 2)])
def test_depthwise_bit_identical_for_any_thread_count(groups, cg, mg, dtype, fmt):
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, groups * cg, 19, 3000 // groups)).astype(dtype)
    w = rng.standard_normal((groups * cg, mg, 4, 3)).astype(dtype)
    kw = dict(strides=(2, 3), pads=(1, 2, 0, 1), group=groups, data_format=fmt)
    xl = np.ascontiguousarray(np.moveaxis(x, 1, -1)) if fmt == "NXC" else x
    assert_same_for_any_thread_count(w, xl, "depthwise", pin=("depthwise", False), **kw)


# Rows for the AVX2 row kernel (_dwkernel.h): innermost stride 1 to 4, interiors shorter than
# a vector, between one and four vectors, longer and not a whole number of vectors (the last
# vector overlaps), odd output lengths (phase 1 one output short), taps on either border,
# explicit output_shape with bias-only tails, 2-3 channels per group (several rows a term).
# (size, kernel, strides, dilations, pads or output_shape, output_padding, channels)
ROWS = [
    ((2, 5), (2, 3), (1, 1), (1, 1), (0, 1, 0, 1), (0, 0), (3, 1, 1)),
    ((3, 11), (3, 4), (2, 2), (1, 1), (1, 1, 1, 1), (0, 1), (4, 1, 1)),
    ((2, 37), (2, 4), (1, 2), (1, 1), (0, 1, 1, 2), (0, 1), (2, 1, 2)),
    ((1, 70), (1, 5), (1, 2), (1, 2), (0, 3, 0, 0), (0, 1), (2, 2, 3)),
    ((2, 64), (4, 4), (2, 2), (1, 1), (1, 1, 1, 1), (0, 0), (3, 1, 1)),
    ((1, 29), (1, 7), (1, 1), (1, 3), (0, 5, 0, 2), (0, 0), (1, 3, 1)),
    ((2, 50), (2, 3), (2, 2), (1, 1), (2, 135), None, (2, 1, 1)),
    ((3, 9), (2, 2), (1, 2), (1, 1), (0, 0, 0, 0), (0, 1), (2, 1, 3)),
    # runs of rows whose vectors are all masked, more masked taps a row than the run keeps
    # masks for (CONVT_DW_NMASK: the rest worked out as they come), and a narrower kernel
    # whose runs keep every row's masks
    ((12, 40), (3, 31), (1, 2), (1, 1), (1, 15, 1, 15), (0, 0), (2, 1, 1)),
    ((9, 21), (3, 9), (1, 2), (1, 1), (1, 4, 1, 3), (0, 1), (2, 1, 1)),
    # innermost stride 3 and 4: the row kernel phase by phase into the phase buffer, phases
    # of different lengths and interiors, one without taps (kernel shorter than the stride),
    # long dilated kernels whose border covers most of the row, several blocks of a row
    ((2, 45), (2, 7), (1, 3), (1, 1), (0, 2, 1, 1), (0, 2), (2, 1, 1)),
    ((1, 33), (1, 3), (1, 4), (1, 1), (0, 1, 0, 0), (0, 3), (3, 1, 2)),
    ((2, 90), (1, 41), (1, 3), (1, 2), (0, 20, 0, 13), (0, 1), (2, 2, 1)),
    ((1, 700), (1, 67), (2, 4), (1, 3), (0, 90, 0, 50), (0, 0), (1, 3, 1)),
]


@pytest.mark.parametrize("isa", _cpu.levels()[:3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("row", ROWS, ids=[f"r{i}" for i in range(len(ROWS))])
def test_depthwise_rows_both_kernels(row, dtype, isa, monkeypatch):
    """Every row kernel (AVX2 + FMA and AVX-512 where the CPU has them, the portable loop)
    against the reference, rows of every length class the vector loop distinguishes."""
    monkeypatch.setattr(_cpu, "ISA", isa)
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)
    size, k, strides, dil, pads, op, channels = row
    case = (size, k, strides, dil, pads, op, channels, 2, "NCX")
    y, ref = _run(case, np_dtype(dtype))
    assert_close(y, ref, "direct", dtype)


# Innermost lengths 1..71 walk every path of the AVX2 row kernel's loop (blocks of four and
# two vectors, single vectors inside one phase's interior and not the other's, masked vectors
# on either border, rows shorter than a vector, partial last vectors): stride 2 with both
# phases' interiors offset by one, strides 3 and 4 (phase by phase, interleaved), stride 1
# with dilation, and stride 2 with a kernel shorter than the stride (phase 1 without taps)
# and output_padding (phase 0 one output longer).
# (kernel, strides, dilations, pads, output_padding)
ROW_SWEEP = [
    ((2, 4), (2, 2), (1, 1), (1, 1, 1, 1), (0, 0)),
    ((2, 7), (1, 3), (1, 2), (0, 3, 0, 1), (0, 2)),
    ((2, 9), (2, 4), (1, 1), (1, 2, 0, 1), (0, 1)),
    ((3, 3), (1, 1), (1, 2), (0, 2, 0, 1), (0, 0)),
    ((2, 1), (2, 2), (1, 1), (0, 0, 0, 0), (1, 1)),
]


@pytest.mark.parametrize("isa", _cpu.levels()[:3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("geo", ROW_SWEEP, ids=["s2k4", "s3k7d2", "s4k9", "s1d2", "s2k1op"])
def test_depthwise_every_row_length(geo, dtype, isa, monkeypatch):
    monkeypatch.setattr(_cpu, "ISA", isa)
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)
    k, strides, dil, pads, op = geo
    for n in range(1, 72):
        case = ((3, n), k, strides, dil, pads, op, (2, 1, 1), 1, "NCX")
        y, ref = _run(case, np_dtype(dtype))
        assert_close(y, ref, "direct", dtype)


def _ncx_bits(case, dtype, isa, monkeypatch):
    monkeypatch.setattr(_cpu, "ISA", isa)
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)   # the zmm body even on Zen 4
    y, _ = _run(case, np_dtype(dtype))
    return y.tobytes()


@pytest.mark.skipif(_cpu.ISA < 2, reason="no AVX-512 on this machine")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_depthwise_avx512_rows_give_the_avx2_bits(dtype, monkeypatch):
    """The zmm row kernel sums every output's taps in the ymm kernel's order, one rounding per
    multiply-add, and masks the same taps on the borders (opmask registers instead of blends):
    bit for bit the AVX2 results, over ROWS, the row-length sweep up to four zmm vectors a
    phase and beyond (1..150), and the random cases."""
    cases = [(*row, 2, "NCX") for row in ROWS]
    cases += [((2, n), k, s, d, p, op, (2, 1, 1), 1, "NCX")
              for k, s, d, p, op in ROW_SWEEP for n in range(1, 151, 3)]
    cases += [c for c in CASES if c[-1] == "NCX" and c[-2] > 0]
    for case in cases:
        assert _ncx_bits(case, dtype, 2, monkeypatch) == _ncx_bits(case, dtype, 1, monkeypatch), \
            case


@pytest.mark.skipif(_cpu.ISA < 2, reason="no AVX-512 on this machine")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_depthwise_avx512_border_taps_add_nothing_out_of_range(dtype, monkeypatch):
    """An infinite weight reaches exactly the outputs of its tap at either level: a border
    tap out of range adds nothing on the zmm rows' masked lanes, not even inf * 0 (NaN)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 4, 6, 70)).astype(dtype)
    w = rng.standard_normal((4, 1, 4, 4)).astype(dtype)
    w[1, 0, 2, 3] = np.inf
    w[2, 0, 0, 0] = -np.inf
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1), group=4)
    op = convt.ConvTranspose(w, method="direct", **kw)
    op._plan.pin = ("depthwise", False)
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)
    got = {}
    for level in (1, 2):
        monkeypatch.setattr(_cpu, "ISA", level)
        got[level] = op(x)
    np.testing.assert_array_equal(got[2].view(np.uint8), got[1].view(np.uint8))
    with np.errstate(invalid="ignore"):
        ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), method="reference",
                                   **kw)
    np.testing.assert_array_equal(np.isnan(got[2]), np.isnan(ref))
    assert not np.isnan(got[2]).any() and np.isinf(got[2]).any()
