"""The upsample variant (convt._backends.direct.upsample, kernel convt/_kernels/_upsample.pyx): channels-first
pure upsampling, K = s on every axis with stride 2 on the last, no padding. Checked against
the float64 reference over 1-D to 3-D layers (groups, batch, bias, last axes that are not a
whole number of vectors), for the same bits as the micro variant and for any thread count;
its rule and the geometries it leaves to the others."""
import numpy as np
import pytest

from convt._kernels import _cpu

import convt
from convt._dispatch import cost as _cost
from convt._dispatch import plan as _plan
from convt._backends.direct.upsample import packed_up, up_eligible, up_layout
from convt._geometry.geometry import resolve

from conftest import assert_close, assert_same_for_any_thread_count

pytestmark = pytest.mark.skipif(_cpu.ISA < 1,
                                reason="the upsample variant runs only with AVX2+FMA")


def _cases():
    rng = np.random.default_rng(7)
    out = []
    for i in range(48):
        nd = 1 + i % 3
        k = tuple(int(v) for v in rng.integers(1, 4, nd - 1)) + (2,)
        g = int(rng.choice([1, 1, 2, 4]))
        cg = int(rng.integers(16, 40))
        mg = int(rng.integers(4, 20))
        # last axis: 1 to 30 inputs (float32 vectors of 8, float64 of 4: every remainder)
        sp = tuple(int(v) for v in rng.integers(1, 5, nd - 1)) + (int(rng.integers(1, 31)),)
        dtype = ("float32", "float64")[i % 2]
        out.append((k, g, cg, mg, int(rng.integers(1, 4)), sp, dtype, bool(i % 4 < 3)))
    return out


@pytest.mark.parametrize("k, g, cg, mg, n, sp, dtype, bias", _cases())
def test_upsample_matches_reference_and_the_micro_variant(k, g, cg, mg, n, sp, dtype, bias):
    rng = np.random.default_rng(abs(hash((k, g, cg, mg, n, sp))) % 2**32)
    x = rng.standard_normal((n, g * cg, *sp)).astype(dtype)
    w = rng.standard_normal((g * cg, mg, *k)).astype(dtype)
    b = rng.standard_normal(g * mg).astype(dtype) if bias else None
    op = convt.ConvTranspose(w, b, strides=k, group=g, method="direct", workers=2)
    assert op._plan.geometry(x.shape).variant == "upsample"
    y = op(x)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               None if b is None else b.astype(np.float64), strides=k, group=g,
                               method="reference")
    assert_close(y, ref, "direct", dtype)
    # the micro variant sums each output in the same order: the same bits (convt.dask relies
    # on it for blocks the upsample kernel cannot compute)
    micro = convt.ConvTranspose(w, b, strides=k, group=g, method="direct", workers=1)
    micro._plan.pin = ("micro", False)
    assert micro._plan.geometry(x.shape).variant == "micro"
    np.testing.assert_array_equal(y.view(np.uint8), micro(x).view(np.uint8))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_upsample_same_bits_for_any_thread_count(dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 48, 5, 29)).astype(dtype)
    w = rng.standard_normal((48, 24, 2, 2)).astype(dtype)
    assert_same_for_any_thread_count(w, x, "upsample", strides=(2, 2), method="direct")


def test_one_shot_equals_prepared():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 64, 7, 19)).astype(np.float32)
    w = rng.standard_normal((64, 32, 3, 2)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    y = convt.conv_transpose(x, w, b, strides=(3, 2))
    np.testing.assert_array_equal(y, convt.ConvTranspose(w, b, strides=(3, 2))(x))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k, g, mg", [((2, 2), 1, 8), ((3, 2), 2, 5), ((1, 2), 1, 7), ((2,), 4, 1)])
@pytest.mark.parametrize("buffer", [False, True])
def test_packed_up_lays_out_each_tiles_pairs(k, g, mg, dtype, buffer):
    """Per group, tile t and input channel c: the weights of pairs 2t and 2t + 1 (pair p =
    the output channel and the axes but the last, in IOX order), then zeros for a tile's
    missing pair; the bias per tile pair likewise. Odd pair counts (3 x 5, 7, 1) end on a
    tile of one pair; a buffer (a one-shot plan's workspace) holding other values gets
    every value rewritten."""
    cg = 16
    rng = np.random.default_rng(5)
    w = rng.standard_normal((g * cg, mg) + k).astype(dtype)
    b = rng.standard_normal(g * mg).astype(dtype)
    op = convt.ConvTranspose(w, b, strides=k, group=g)
    geom = resolve(op.spec, (1, g * cg) + (3,) * len(k))
    lay = up_layout(geom, np.dtype(dtype).itemsize)
    held = []

    def buf(size, dt):
        held.append(np.full(size + 5, np.nan, dt))
        return held[-1][3:3 + size]   # not 16-byte aligned: the quadruples still move whole

    wp, pb = packed_up(lay, geom, w, b, buf if buffer else None)
    pairs = w.reshape(g, cg, -1, 2)
    want = np.zeros((g, lay.tiles, cg, 4), dtype)
    want_b = np.zeros((g, 2 * lay.tiles), dtype)
    for gi in range(g):
        for p in range(pairs.shape[2]):
            want[gi, p // 2, :, 2 * (p % 2):2 * (p % 2) + 2] = pairs[gi, :, p]
            want_b[gi, p] = b[gi * mg + p // (pairs.shape[2] // mg)]
    np.testing.assert_array_equal(wp, want.reshape(-1))
    np.testing.assert_array_equal(pb, want_b.reshape(-1))
    if buffer:
        assert np.shares_memory(wp, held[0])


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("where", ["x", "w"])
def test_non_finite_values_reach_the_outputs_of_their_tap(bad, where):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 32, 4, 11)).astype(np.float32)
    w = rng.standard_normal((32, 16, 2, 2)).astype(np.float32)
    if where == "x":
        x[0, 3, 2, 10] = bad
    else:
        w[5, 7, 1, 0] = bad
    op = convt.ConvTranspose(w, strides=(2, 2), method="direct")
    assert op._plan.geometry(x.shape).variant == "upsample"
    y = op(x)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), strides=(2, 2),
                               method="reference")
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(y), np.isinf(ref))
    ok = np.isfinite(ref)
    np.testing.assert_allclose(y[ok], ref[ok], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape, w_shape, kw, variant", [
    # the rule's edges on 16 to 512 input channels per group
    ((1, 16, 8, 8), (16, 8, 2, 2), dict(strides=(2, 2)), "upsample"),
    ((1, 512, 8, 8), (512, 8, 2, 2), dict(strides=(2, 2)), "upsample"),
    ((1, 1024, 8, 8), (1024, 8, 2, 2), dict(strides=(2, 2)), "gemm"),
    ((1, 2048, 8, 8), (2048, 8, 2, 2), dict(strides=(2, 2), group=4), "upsample"),
    # channels-last: one GEMM writes y as it is laid out
    ((1, 8, 8, 64), (64, 32, 2, 2), dict(strides=(2, 2), data_format="NXC"), "gemm"),
])
def test_variant_rule(shape, w_shape, kw, variant):
    op = convt.ConvTranspose(np.ones(w_shape, np.float32), **kw)
    assert op._plan.geometry(shape).variant == variant


@pytest.mark.parametrize("w_shape, kw", [
    ((32, 16, 2, 2), dict(strides=(2, 2), pads=(1, 0, 0, 0))),          # cropped
    ((32, 16, 2, 2), dict(strides=(2, 2), output_padding=(0, 1))),      # a bias-only column
    ((32, 16, 2, 3), dict(strides=(2, 3))),                              # stride 3 last
    ((32, 16, 3, 2), dict(strides=(2, 2))),                              # K > s: two taps
    ((32, 16, 2, 2), dict(strides=(2, 2), dilations=(2, 1))),            # taps 2 apart
    ((32, 16, 2, 1), dict(strides=(2, 1))),                              # stride 1 last
])
def test_not_eligible_and_a_pin_runs_the_micro_variant(w_shape, kw):
    """Layers the kernel cannot compute never get it, and a pin (convt.dask's, per block)
    that names it runs the micro variant, which gives the bits it would have."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal(w_shape).astype(np.float32)
    x = rng.standard_normal((1, 32, 5, 9)).astype(np.float32)
    op = convt.ConvTranspose(w, method="direct", **kw)
    geom = op._plan.geometry(x.shape).geom
    assert not up_eligible(geom)
    assert _cost.direct_kind(geom).variant != "upsample"
    assert _plan.direct_variant(geom, ("upsample", False))[0] == "micro"
    op._plan.pin = ("upsample", False)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), method="reference",
                               **kw)
    assert_close(op(x), ref, "direct", "float32")


def test_cost_model_prices_the_variant():
    geom = convt.ConvTranspose(np.ones((256, 128, 2, 2), np.float32),
                               strides=(2, 2))._plan.geometry((1, 256, 64, 64)).geom
    kind = _cost.direct_kind(geom)
    assert kind.variant == "upsample" and kind.macs == kind.useful == geom.macs
    est = _cost.estimate(geom, np.float32, 2)
    assert est.direct == kind and 0 < est.seconds["direct"] < 1
    # the micro rate, x and y moved once (no channels-last copy of x, as the micro variant's)
    c = _cost.CONSTANTS
    cg = geom.c_in // geom.groups
    rate = c["micro_macs_per_s"] * cg / (cg + c["micro_channel_half"])
    moved = 4 * (np.prod(geom.array_shape("input")) + np.prod(geom.array_shape("output")))
    work = kind.macs / rate + moved / c["bytes_per_s"]
    assert est.seconds["direct"] == pytest.approx(
        c["call_s"] + work / (1 + (est.threads - 1) * c["thread_efficiency"]))
    # the last axis padded to whole vectors: 13 inputs run as 16
    geom13 = convt.ConvTranspose(np.ones((256, 128, 2, 2), np.float32),
                                 strides=(2, 2))._plan.geometry((1, 256, 4, 13)).geom
    assert _cost.direct_kind(geom13).macs == geom13.macs * 16 // 13


def test_long_rows_and_a_shared_workspace():
    """A long 1-D row (the scratch holds one block, not the row), then one-shot calls of
    other sizes through the thread's one workspace, each against the reference."""
    rng = np.random.default_rng(8)
    for c_in, width in ((32, 5003), (96, 37), (16, 3)):
        x = rng.standard_normal((2, c_in, width)).astype(np.float32)
        w = rng.standard_normal((c_in, 8, 2)).astype(np.float32)
        op = convt.ConvTranspose(w, strides=(2,), method="direct")
        assert op._plan.geometry(x.shape).variant == "upsample"
        ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), strides=(2,),
                                   method="reference")
        assert_close(convt.conv_transpose(x, w, strides=(2,)), ref, "direct", "float32")


@pytest.mark.skipif(_cpu.ISA < 2, reason="no AVX-512 on this machine")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_avx512_tile_gives_the_avx2_bits(dtype, monkeypatch):
    """The zmm tile (blocks of up to 3 x 64 bytes) sums each output as the ymm tile does:
    the same bits, over last axes of 1 to 100 inputs (every block count and remainder of both
    vector widths), groups and 1-D to 3-D layers, and against the reference."""
    rng = np.random.default_rng(11)
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)
    for width in range(1, 101, 3):
        nd = 1 + width % 3
        k = (2,) * nd
        g = 1 + width % 2
        x = rng.standard_normal((2, g * 17, *(2,) * (nd - 1), width)).astype(dtype)
        w = rng.standard_normal((g * 17, 5, *k)).astype(dtype)
        b = rng.standard_normal(g * 5).astype(dtype)
        op = convt.ConvTranspose(w, b, strides=k, group=g, method="direct", workers=2)
        assert op._plan.geometry(x.shape).variant == "upsample"
        got = {}
        for level in (1, 2):
            monkeypatch.setattr(_cpu, "ISA", level)
            got[level] = op(x)
        np.testing.assert_array_equal(got[2].view(np.uint8), got[1].view(np.uint8))
        ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                   b.astype(np.float64), strides=k, group=g, method="reference")
        assert_close(got[2], ref, "direct", dtype)
