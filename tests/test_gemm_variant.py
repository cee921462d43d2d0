"""The GEMM variant of the direct backend (per-phase BLAS GEMMs over a zero-haloed input).

The sweep in test_direct.py mostly has 1-3 channels per group, where the plan picks the pixel
kernel; these tests use >= 4 channels per group so the GEMM variant runs, and force it (no
waste bound) on geometries whose halo is large, to check the halo and grid arithmetic.
"""
import itertools

import numpy as np
import pytest

import convt
from convt._backends.direct import base as _direct_base
from convt._backends.direct import micro as _micro
from convt._dispatch import cost as _cost
from convt._backends.direct import gemm as _phase_gemm
from convt._dispatch import plan as _plan
from convt._backends.direct.gemm import batch_rows_layout, gemm_layout

from conftest import assert_close, assert_same_for_any_thread_count


def _cases():
    rng = np.random.default_rng(99)
    out = []
    for nd, s, d, k in itertools.product((1, 2, 3), (1, 2, 3, 4), (1, 2), (1, 2, 3, 5)):
        if nd == 3 and (s > 2 or k > 3):
            continue
        pads = tuple(int(v) for v in rng.integers(0, k + 1, 2 * nd))
        op = tuple(int(rng.integers(0, max(s, d))) for _ in range(nd))
        size = tuple(int(v) for v in rng.integers(2, 7 if nd < 3 else 4, nd))
        groups = int(rng.choice([1, 2]))
        out.append((nd, (s,) * nd, (d,) * nd, (k,) * nd, pads, op, size, groups,
                    int(rng.integers(0, 3))))
    return out


CASES = _cases()


def _force(monkeypatch, batch_rows):
    """Make the plan run every geometry through the GEMM variant in the given mode."""
    def variant(geom):
        layout = gemm_layout(geom)
        return "gemm", batch_rows_layout(layout, geom.batch) if batch_rows else layout
    monkeypatch.setattr(_plan, "direct_variant", variant)


def _run(case, dtype, data_format="NCX", force=None, monkeypatch=None):
    nd, s, d, k, pads, op, size, groups, batch = case
    rng = np.random.default_rng(len(str(case)))
    x = rng.standard_normal((batch, 4 * groups, *size)).astype(dtype)
    w = rng.standard_normal((4 * groups, 5, *k)).astype(dtype)
    b = rng.standard_normal(5 * groups).astype(dtype)
    kw = dict(strides=s, dilations=d, pads=pads, output_padding=op, group=groups)
    try:
        ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                   b.astype(np.float64), method="reference", **kw)
    except ValueError:
        pytest.skip("pads leave no output")
    if force is not None:
        _force(monkeypatch, force == "batch")
    xl = np.moveaxis(x, 1, -1) if data_format == "NXC" else x
    op_ = convt.ConvTranspose(w, b, method="direct", data_format=data_format, **kw)
    if force is not None:
        p = op_._plan.geometry(xl.shape)
        variant, layout = p.variant, p.state[0]
        assert variant == "gemm" and layout.batch_rows == (force == "batch")
    y = op_(xl)
    y = np.moveaxis(y, -1, 1) if data_format == "NXC" else y
    return y, ref


@pytest.mark.parametrize("case", CASES, ids=[f"c{i}" for i in range(len(CASES))])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mode", ["grid", "batch"])
def test_gemm_variant_forced(case, dtype, mode, monkeypatch):
    y, ref = _run(case, dtype, force=mode, monkeypatch=monkeypatch)
    assert_close(y, ref, "direct", dtype)


@pytest.mark.parametrize("case", CASES[::5], ids=[f"c{i}" for i in range(0, len(CASES), 5)])
def test_gemm_variant_channels_last(case, monkeypatch):
    y, ref = _run(case, "float32", data_format="NXC", force="grid", monkeypatch=monkeypatch)
    assert_close(y, ref, "direct", "float32")


def test_variant_choice():
    """Mostly-halo grids go to batch rows (large batch) or the pixel kernel (small batch)."""
    w = np.ones((8, 8, 3), np.float32)
    op = convt.ConvTranspose(w, strides=[2], output_shape=[200])
    assert op._plan.geometry((1, 8, 10)).variant == "pixel"
    p = op._plan.geometry((16, 8, 10))
    variant, layout = p.variant, p.state[0]
    assert variant == "gemm" and layout.batch_rows
    p = op._plan.geometry((1, 8, 100))
    variant, layout = p.variant, p.state[0]
    assert variant == "gemm" and not layout.batch_rows
    dw = convt.ConvTranspose(np.ones((8, 1, 4, 4), np.float32), group=8, strides=[2, 2])
    assert dw._plan.geometry((1, 8, 16, 16)).variant == "depthwise"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_bit_identical_for_any_thread_count(dtype, monkeypatch):
    _force(monkeypatch, batch_rows=False)   # the micro variant would run this layer
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 64, 20, 20)).astype(dtype)
    w = rng.standard_normal((64, 48, 4, 4)).astype(dtype)
    assert_same_for_any_thread_count(w, x, "gemm", strides=(2, 2), pads=(1, 1, 1, 1))


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("nd,s,k,pads,groups", [
    (1, 3, 5, (2, 1), 1), (2, 2, 3, (1, 0, 1, 1), 1), (2, 1, 2, (0, 0, 0, 0), 2),
    (3, 2, 2, (0, 1, 0, 0, 1, 1), 1), (2, 4, 3, (2, 1, 0, 0), 1)])
@pytest.mark.parametrize("mode", ["grid", "batch"])
def test_gemm_wide_channels(nd, s, k, pads, groups, data_format, mode, monkeypatch):
    """64+ channels per group: channels-first outputs take the channel-major tile path."""
    rng = np.random.default_rng(nd * 10 + s)
    x = rng.standard_normal((2, 64 * groups, *(5,) * nd))
    w = rng.standard_normal((64 * groups, 66, *(k,) * nd))
    b = rng.standard_normal(66 * groups)
    kw = dict(strides=(s,) * nd, pads=pads, group=groups)
    ref = convt.conv_transpose(x, w, b, method="reference", **kw)
    xl = np.moveaxis(x, 1, -1) if data_format == "NXC" else x
    _force(monkeypatch, mode == "batch")
    op = convt.ConvTranspose(w.astype(np.float32), b.astype(np.float32), method="direct",
                             data_format=data_format, **kw)
    y = op(xl.astype(np.float32))
    assert_close(np.moveaxis(y, -1, 1) if data_format == "NXC" else y, ref, "direct", "float32")


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("nd,s,k,size,out", [
    (1, 3, 1, 8, 26), (1, 2, 1, 8, 19), (1, 4, 2, 8, 34), (2, 3, 1, 5, 17), (3, 2, 1, 3, 8)])
@pytest.mark.parametrize("mode", ["grid", "batch"])
def test_gemm_negative_pads_both_sides_stride_above_kernel(nd, s, k, size, out, data_format,
                                                           mode, monkeypatch):
    """Stride > kernel extent with both pads negative: a residue without taps then has more
    outputs than the data has rows, and the grid must still hold them (this wrote past the
    output before; convt.dask's blocks produce such local geometries)."""
    rng = np.random.default_rng(nd * 100 + s * 10 + k)
    x = rng.standard_normal((2, 5, *(size,) * nd))
    w = rng.standard_normal((5, 4, *(k,) * nd))
    b = rng.standard_normal(4)
    kw = dict(strides=(s,) * nd, output_shape=(out,) * nd)
    ref = convt.conv_transpose(x, w, b, method="reference", **kw)
    op = convt.ConvTranspose(w.astype(np.float32), b.astype(np.float32), method="direct",
                             data_format=data_format, **kw)
    xl = np.moveaxis(x, 1, -1) if data_format == "NXC" else x
    geom = op.geometry(xl.shape)
    assert min(geom.pads_begin) < 0 and min(geom.pads_end) < 0
    _force(monkeypatch, mode == "batch")
    y = op(xl.astype(np.float32))
    assert_close(np.moveaxis(y, -1, 1) if data_format == "NXC" else y, ref, "direct", "float32")


@pytest.mark.parametrize("method, variant, packs", [
    ("direct", "gemm", False),    # grid mode merges straight from the IOX weights
    ("fft", None, False),
    ("direct", "pixel", True),
])
def test_weights_packed_only_for_kernels_that_read_them(method, variant, packs, rng,
                                                         monkeypatch):
    x = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
    w = rng.standard_normal((8, 8, 4, 4)).astype(np.float32)
    if variant == "pixel":   # grid mode never acceptable, batch too small for batch rows
        monkeypatch.setattr(_plan, "direct_variant", _plan.direct_variant.__wrapped__)
        monkeypatch.setattr(_plan, "direct_kind", _cost.direct_kind.__wrapped__)
        for module in (_direct_base, _micro, _phase_gemm):
            monkeypatch.setattr(module, "MAX_GEMM_WASTE", 0.0)
        monkeypatch.setattr(_direct_base, "GRID_WASTE_OK", 0.0)
        monkeypatch.setattr(_phase_gemm, "_PIXEL_MARGIN", float("inf"))
    op = convt.ConvTranspose(w, strides=(2, 2), pads=(1, 1, 1, 1), method=method)
    y = op(x)
    if variant is not None:
        assert op._plan.geometry(x.shape).variant == variant
    assert ("w_packed" in vars(op._plan)) == packs
    ref = convt.conv_transpose(x, w, strides=(2, 2), pads=(1, 1, 1, 1), method="reference")
    assert_close(y, ref.astype(np.float64), method, "float32")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size,k,pads,op", [
    ((3, 21), (2, 2), (0, 0, 0, 0), (0, 0)),       # pure upsampling: phase pairs of 21
    ((2, 40), (3, 4), (1, 1, 1, 1), (1, 1)),       # pairs of 40 (vectors and remainder)
    ((2, 19), (3, 3), (1, 1, 1, 1), (0, 0)),       # odd row: phase 1 one short, no pair
    ((1, 33), (1, 5), (0, 2, 0, 1), (0, 1)),       # 1-tap rows, pads at one end only
])
def test_gemm_channels_first_pairs_both_kernels(size, k, pads, op, dtype, monkeypatch):
    """Stride-2 phase pairs interleaved by the AVX2 write-out and the portable one: both
    match the reference and each other (one rounding per value in both)."""
    case = (2, (2, 2), (1, 1), k, pads, op, size, 2, 2)
    ys = []
    for isa in (-1, 0):
        monkeypatch.setattr(_phase_gemm, "ISA", isa)
        y, ref = _run(case, dtype, force="grid", monkeypatch=monkeypatch)
        assert_close(y, ref, "direct", dtype)
        ys.append(y)
    np.testing.assert_array_equal(ys[0], ys[1])


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
def test_halo_grid_rezeroed_when_its_shape_changes(fmt, monkeypatch):
    """One prepared operator on a large input, a small one, then a larger batch of the small
    one: the grid buffer is reused under the same halo key, and the third call must not find
    the first call's data in the halo (it did before the workspace compared shapes)."""
    _force(monkeypatch, batch_rows=False)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 6, 3, 3))
    op = convt.ConvTranspose(w, pads=(1, 1, 1, 1), method="direct", data_format=fmt)
    for shape in [(1, 8, 12, 12), (1, 8, 5, 5), (4, 8, 5, 5)]:
        x = rng.standard_normal(shape)
        ref = convt.conv_transpose(x, w, pads=(1, 1, 1, 1), method="reference")
        y = op(np.ascontiguousarray(np.moveaxis(x, 1, -1)) if fmt == "NXC" else x)
        assert_close(np.moveaxis(y, -1, 1) if fmt == "NXC" else y, ref, "direct", "float64")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("isa", [-1, 0])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("cin,mg,k,s,groups", [
    (21, 21, (64, 64), (32, 32), 1),   # fcn32s_k64's shape: 4096 taps, 16 of 21 channels
    (16, 16, (8, 8), (2, 2), 2),       # whole 8 x 8 register transposes only
    (6, 40, (5,), (3,), 3),            # fewer taps than a transposed block
    (4, 7, (3, 3, 3), (1, 1, 1), 1),   # no whole block at all
])
def test_merged_weights_put_every_tap_in_place(cin, mg, k, s, groups, dtype, isa, threads,
                                               monkeypatch):
    """merged_weights' blocked transposes: every weight a GEMM op reads is the filter's,
    out[dst[k] + r * step[k] + m] = w[r, m, k], through the register transposes and the
    portable loops; a non-finite weight is found wherever it is."""
    from convt._geometry.geometry import resolve
    monkeypatch.setattr(_phase_gemm, "ISA", isa)
    rng = np.random.default_rng(cin * mg)
    w = rng.standard_normal((cin, mg, *k)).astype(dtype)
    nd = len(k)
    op = convt.ConvTranspose(w, strides=s, group=groups)
    geom = op.geometry((1, cin, *(3,) * nd))
    layout = gemm_layout(geom)
    out, finite = _phase_gemm.merged_weights(layout, w, threads)
    assert finite
    kt = int(np.prod(k))
    used = np.flatnonzero(layout.merge_dst >= 0)
    assert len(used) == kt
    w3 = w.reshape(cin, mg, kt)
    r, m = np.arange(cin)[:, None, None], np.arange(mg)[None, :, None]
    idx = layout.merge_dst[used] + r * layout.merge_step[used] + m
    np.testing.assert_array_equal(out[idx], w3[:, :, used])
    for bad in (np.nan, np.inf):
        w2 = w.copy()
        w2.reshape(-1)[rng.integers(w.size)] = bad
        assert not _phase_gemm.merged_weights(layout, w2, threads)[1]


def test_merge_iox_refuses_a_short_scratch():
    from convt._kernels._layout import MERGE_TAPS, merge_iox
    w = np.zeros(2 * 8 * 4, np.float32)
    dst = np.arange(4, dtype=np.int64) * 8
    step = np.full(4, 32, np.int64)
    out = np.zeros(2 * 32, np.float32)
    short = np.zeros(2 * MERGE_TAPS * 8 - 1, np.float32)
    with pytest.raises(ValueError, match=rf"merge_iox: scratch holds {short.size} values, "
                                         rf"needs {2 * MERGE_TAPS * 8}"):
        merge_iox(w, out, dst, step, 8, 2, short)
    assert merge_iox(w, out, dst, step, 8, 2, np.zeros(short.size + 1, np.float32))
