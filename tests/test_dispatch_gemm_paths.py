"""Terms of the GEMM and pixel variants' estimates that follow what BLAS and the kernels do:
the BLAS path of each call (OpenBLAS's small-matrix kernels, or packed), the depth of the
products, and float64 in the pixel kernel. Each term is checked against the obvious
enumeration of the kernel's calls (test_gemm_cost._kernel_calls); no timings."""
import numpy as np
import pytest

import convt
from convt._backends.direct import gemm as _gemm
from convt._backends.direct import pixel as _pixel
from convt._backends.direct import registry as _direct
from convt._dispatch import cost as _cost

from _helpers import random_geometries
from test_gemm_cost import _kernel_calls


def _geoms(n, seed):
    return random_geometries(n, seed, lambda rng, g: (g * int(rng.integers(1, 40)),
                                                      g * int(rng.integers(1, 20))),
                             _gemm.gemm_fits)


def _geometry(x, w, dtype=np.float32, **kw):
    return convt.ConvTranspose(np.zeros(w, dtype), method="direct", **kw).geometry(x)


def _grid_kind(geom):
    c = _cost.current()
    kind = _direct.select(geom, c, start=_direct.VARIANTS.index(_gemm.VARIANT))
    if kind.variant != "gemm" or kind.mode != "grid":
        axes = _direct.axes(geom)
        gemm, exact = _direct.gemm_counts(geom, axes)
        kind = _direct.DirectKind("gemm", "grid", gemm, exact)
    return kind


@pytest.mark.parametrize("geom", _geoms(40, 383), ids=lambda g: "")
def test_calls_keep_each_size_apart(geom):
    # each entry of gemm_calls is calls of one size: rows / count is every call's M
    calls = _gemm.gemm_calls(geom, False)
    got = {}
    for count, rows, n in zip(calls.count, calls.rows, calls.columns):
        if not count:   # a layout without GEMMs
            continue
        key = (rows / count, int(n))
        got[key] = got.get(key, 0) + int(count)
    want = {}
    for (m, n, _), count in _kernel_calls(geom, False).items():
        want[float(m), n] = want.get((float(m), n), 0) + count
    assert got == want


def _packed_values(geom):
    """Values of A the packed calls read, each weighted 16 / (16 + N), from the kernel's
    calls: those with M N K above OpenBLAS's small-matrix bound."""
    total = 0.0
    for (m, n, k), count in _kernel_calls(geom, False).items():
        if m * n * k > 100 ** 3:
            total += count * m * k * 16 / (16 + n)
    return total


@pytest.mark.parametrize("geom", _geoms(30, 384), ids=lambda g: "")
def test_packed_calls_priced(geom):
    kind = _grid_kind(geom)
    c = _cost.current()
    without = _direct.seconds(geom, kind, False, 1, dict(c, gemm_stream_s=0.0))
    with_ = _direct.seconds(geom, kind, False, 1, c)
    assert with_ - without == pytest.approx(_packed_values(geom) * c["gemm_stream_s"],
                                            rel=1e-9, abs=1e-15)


def test_small_kernels_read_a_large_a_in_place():
    # 85 -> 2 channels, float64: A of 1.3 MB a call, above L2, but M N K = 1931 x 2 x 85
    # stays on the small kernels: nothing packed (5.4 ms measured, priced 20.6 as packed)
    geom = _geometry((2, 85, 6, 6, 10), (85, 2, 6, 6, 6), np.float64, strides=(2,) * 3,
                     dilations=(2,) * 3, pads=(1, 2, 4, 1, 2, 4))
    calls = _gemm.gemm_calls(geom, False)
    assert calls.small().all() and _packed_values(geom) == 0
    a_bytes = calls.rows / calls.count * calls.depth * 8
    assert a_bytes.max() > 1 << 20
    # 85 -> 8 channels: (1931, 8, 85) is above the bound and packed
    wide = _geometry((2, 85, 6, 6, 10), (85, 8, 6, 6, 6), np.float64, strides=(2,) * 3,
                     dilations=(2,) * 3, pads=(1, 2, 4, 1, 2, 4))
    assert not _gemm.gemm_calls(wide, False).small().any()


@pytest.mark.parametrize("geom", _geoms(20, 385), ids=lambda g: "")
def test_depth_term_is_the_calls(geom):
    # gemm_depth_half adds half * (m + rows_half) * (n + channel_half) per call kind
    kind = _grid_kind(geom)
    c = dict(_cost.current(), gemm_stream_s=0.0)
    zero = _direct.seconds(geom, kind, False, 1, dict(c, gemm_depth_half=0.0))
    half = _direct.seconds(geom, kind, False, 1, c)
    extra = 0.0
    for (m, n, _), count in _kernel_calls(geom, False).items():
        extra += count * (m + c["gemm_rows_half"]) * (n + c["gemm_channel_half"])
    rate = _gemm.VARIANT.rate(geom, kind, c)
    assert half - zero == pytest.approx(extra * c["gemm_depth_half"] / rate, rel=1e-9)


def test_shallow_products_priced_per_multiply_add_higher():
    # 2 input channels (2d_n3_c2-38_i21x21_k29x29_s2x2: 4.5 ms, priced 2.6 without the
    # depth term) against 16, same layer otherwise
    def per_mac(c_in):
        geom = _geometry((3, c_in, 21, 21), (c_in, 38, 29, 29), strides=(2, 2),
                         pads=(14, 9, 14, 9))
        kind = _grid_kind(geom)
        return _direct.seconds(geom, kind, False, 1, _cost.current()) / kind.macs
    assert per_mac(2) > 1.5 * per_mac(16)


@pytest.mark.parametrize("mg", [1, 2, 13, 64, 512])
def test_pixel_float64_slows_the_channel_loop_only(mg):
    geom = _geometry((3, 16, 22), (16, mg, 36), strides=(4,), dilations=(3,))
    c = _cost.current()
    kind = _direct.DirectKind("pixel", "", 1, 1)
    slow = _pixel.VARIANT.f64_slowdown(geom, kind, c)
    half = c["pixel_channel_half"]
    assert slow == pytest.approx((mg * c["direct_f64"] + half) / (mg + half))
    assert 1.0 < slow < c["direct_f64"]
    # the registry divides the float32 rate by it
    c0 = dict(c, call_s=0.0, bytes_per_s=1e30)
    f32 = _direct.seconds(geom, kind, False, 1, c0)
    f64 = _direct.seconds(geom, kind, True, 1, c0)
    assert f64 / f32 == pytest.approx(slow)


def test_other_variants_keep_direct_f64():
    geom = _geometry((1, 64, 32, 32), (64, 64, 2, 2), strides=(2, 2))
    c = _cost.current()
    kind = _direct.DirectKind("gemm", "grid", 1, 1)
    assert _gemm.VARIANT.f64_slowdown(geom, kind, c) == c["direct_f64"]


def test_mostly_halo_layer_runs_the_gemms():
    # 7x halo work, batch 3: grid-mode GEMMs priced 1.39x below the pixel kernel, within
    # _PIXEL_MARGIN (1.3); pinned, the GEMMs took 0.93 ms and the pixel kernel 2.60 (2-core
    # AMD EPYC Zen 4, docs/dispatch.md, "The GEMM variant's BLAS paths")
    geom = _geometry((3, 10, 10, 10), (10, 32, 10, 10), strides=(2, 4), dilations=(3, 3),
                     pads=(0, 1, 0, 1))
    rule_kind = _cost.direct_kind(geom)
    assert rule_kind.macs > 1.5 * rule_kind.useful
    assert (rule_kind.variant, rule_kind.mode) == ("gemm", "grid")
