"""The Winograd variant's channels-first kernel (convt._backends.direct.cfwino, convt/_kernels/_cfwino.pyx):
1-D channels-first layers of stride S whose S phases each have two taps one input apart (2S
taps). It computes the NXC Winograd kernel's products and sums on x as it is, so over a random
space of such layers (strides 2 to 8, pads, output padding, batch, groups, output channels that
are not a multiple of 4, widths that are not a whole number of blocks) its result is bit for
bit the NXC kernel's, and close to the float64 reference; the same for any thread count; the
fall-backs for inputs and weights the products cannot take; the layers it leaves to the NXC
kernel."""
import numpy as np
import pytest

from convt._kernels import _cpu

import convt
from convt._backends.direct import registry as _direct
from convt._backends.direct import cfwino as _cfwino
from convt._dispatch import cost as _cost
from convt._dispatch import plan as _plan
from convt._backends.direct import winograd as _winograd

from convt._kernels._cfwino import cf_pack

from conftest import (assert_close, assert_same_for_any_thread_count,
                      assert_weight_fallback)

pytestmark = pytest.mark.skipif(_cpu.ISA < 1,
                                reason="the channels-first kernel runs only with AVX2+FMA")


def _cases():
    rng = np.random.default_rng(21)
    out = []
    for i in range(56):
        # stride 2 for the first 40, then 3, 4, 5, 8 in turn (their phases have two taps each,
        # K = 2S), each twice in either dtype
        s = 2 if i < 40 else (3, 4, 5, 8)[(i - 40) // 4]
        g = int(rng.choice([1, 1, 1, 2, 3]))
        cg = int(rng.integers(1, 40))
        mg = int(rng.integers(1, 23))
        n = int(rng.integers(1, 4))
        width = int(rng.integers(4, 120)) if s == 2 else int(rng.integers(30, 120))
        pb, pe = (int(v) for v in rng.integers(0, 2 * s, 2))
        op_ = int(rng.integers(0, s))
        out.append((s, g, cg, mg, n, width, (pb, pe), op_, ("float32", "float64")[i % 2],
                    bool(i % 3)))
    return out


def _ops(w, b, kw, workers=2):
    """The op on channels-first x (the channels-first kernel) and on channels-last x (the NXC
    kernel), the Winograd variant imposed on both."""
    ops = [convt.ConvTranspose(w, b, method="direct", workers=workers, data_format=f, **kw)
           for f in ("NCX", "NXC")]
    for op in ops:
        op._plan.pin = ("winograd", None)
    return ops


@pytest.mark.parametrize("s, g, cg, mg, n, width, pads, op_, dtype, bias", _cases())
def test_same_bits_as_the_nxc_kernel(s, g, cg, mg, n, width, pads, op_, dtype, bias):
    rng = np.random.default_rng(abs(hash((s, g, cg, mg, n, width, pads))) % 2**32)
    x = rng.standard_normal((n, g * cg, width)).astype(dtype)
    w = rng.standard_normal((g * cg, mg, 2 * s)).astype(dtype)
    b = rng.standard_normal(g * mg).astype(dtype) if bias else None
    kw = dict(strides=(s,), pads=pads, output_padding=(op_,), group=g)
    cf, nxc = _ops(w, b, kw)
    p = cf._plan.geometry(x.shape)
    if _cfwino.cf_layout(p.geom, x.itemsize) is None:
        pytest.skip("no F(2, 2) tiles on a phase (too few outputs)")
    assert p.variant == "winograd" and p.runner is _cfwino._run_cf
    y = cf(x)
    yn = np.ascontiguousarray(np.moveaxis(nxc(np.ascontiguousarray(np.moveaxis(x, 1, -1))), -1, 1))
    np.testing.assert_array_equal(y.view(np.uint8), yn.view(np.uint8))
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               None if b is None else b.astype(np.float64),
                               method="reference", **kw)
    assert_close(y, ref, "direct", dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("s", [3, 4, 5, 6, 8, 16])
def test_each_stride_on_whole_blocks(s, dtype):
    """Rows of several whole blocks and a partial one for every stride's write-out (the
    transposed stores where the vector width divides S, or S = 4 in float32; one value at a
    time otherwise): the NXC kernel's bits."""
    rng = np.random.default_rng(s)
    x = rng.standard_normal((2, 24, 157)).astype(dtype)
    w = rng.standard_normal((24, 10, 2 * s)).astype(dtype)
    b = rng.standard_normal(10).astype(dtype)
    cf, nxc = _ops(w, b, dict(strides=(s,), pads=(s - 1, 1)))
    assert cf._plan.geometry(x.shape).runner is _cfwino._run_cf
    lay = cf._plan.geometry(x.shape).state[0]
    assert lay.blocks >= 3 and lay.stride == s
    yn = np.ascontiguousarray(np.moveaxis(nxc(np.ascontiguousarray(np.moveaxis(x, 1, -1))), -1, 1))
    np.testing.assert_array_equal(cf(x).view(np.uint8), yn.view(np.uint8))


def test_the_cases_reach_the_kernel():
    """Most random cases above are layers the kernel computes (the rest have too few
    outputs for tiles of two), blocks of 24 float32 tiles split past the first, the strides
    past 2 included, and their phases' tiles read x from two offsets in some of them."""
    ran, strides, two_sets = 0, set(), 0
    for s, g, cg, mg, n, width, pads, op_, dtype, bias in _cases():
        w = np.zeros((g * cg, mg, 2 * s), dtype)
        op = convt.ConvTranspose(w, strides=(s,), pads=pads, output_padding=(op_,), group=g)
        geom = op._plan.geometry((n, g * cg, width)).geom
        lay = _cfwino.cf_layout(geom, np.dtype(dtype).itemsize)
        if lay is not None:
            ran += lay.blocks > 1
            strides.add(lay.stride)
            two_sets += s > 2 and len(set(lay.e)) == 2
    assert ran >= 30
    assert strides == {2, 3, 4, 5, 8}
    assert two_sets >= 5


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("s", [2, 8])
def test_same_bits_for_any_thread_count(dtype, s):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 72, 301)).astype(dtype)
    w = rng.standard_normal((72, 66, 2 * s)).astype(dtype)
    assert_same_for_any_thread_count(w, x, "winograd", pin=("winograd", None), strides=(s,),
                                     pads=(1, 2), method="direct")


def test_hifigan_up3_runs_it_by_default():
    w = np.ones((128, 64, 4), np.float32)
    p = convt.ConvTranspose(w, strides=(2,), pads=(1, 1))._plan.geometry((1, 128, 4096))
    assert p.variant == "winograd" and p.runner is _cfwino._run_cf
    # the cost model prices it without the transposes of x and y
    kind = _cost.direct_kind(p.geom)
    assert kind.variant == "winograd" and kind.mode == "channels-first"
    nxc_kind = kind._replace(mode="")
    assert (_direct.seconds(p.geom, kind, False, 2, _cost.CONSTANTS)
            < _direct.seconds(p.geom, nxc_kind, False, 2, _cost.CONSTANTS))
    # the one Winograd axis: the NXC kernel's bound on x
    assert _cfwino.DIFF_AXES == _winograd.wino_layout(p.geom, 16).diff_axes


def test_hifigan_second_layer_runs_it_by_default():
    """HiFi-GAN's 256 -> 128 stride-8 layer (16 taps, 3.1 MB of float32 product weights):
    the channels-first kernel, priced without the transposes; in float64 too (6.3 MB)."""
    for dtype in (np.float32, np.float64):
        w = np.ones((256, 128, 16), dtype)
        p = convt.ConvTranspose(w, strides=(8,), pads=(4, 4))._plan.geometry((1, 256, 1024))
        assert p.variant == "winograd" and p.runner is _cfwino._run_cf
        assert p.state[0].stride == 8 and p.state[0].e == (-1,) * 4 + (0,) * 4
    assert _cost.direct_kind(p.geom).mode == "channels-first"


def _micro_result(w, x, kw):
    op = convt.ConvTranspose(w, method="direct", **kw)
    op._plan.pin = ("micro", False)
    return op(x)


@pytest.mark.parametrize("bad", [np.nan, -np.inf, 1e38])
@pytest.mark.parametrize("at", [(0, 0, 0), (1, 5, 30), (1, 15, 199), (0, 7, 48), (0, 8, 47)])
@pytest.mark.parametrize("s", [2, 4])
def test_input_it_cannot_take_runs_the_micro_variant(bad, at, s):
    """A NaN or Inf, or a value a difference could overflow (2^126 and up in float32), in
    any task's part of x (the first value, one at a block's edge, the last) runs the micro
    variant: its result, NaN and Inf pattern included, written over what the kernel wrote
    into out."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 16, 200)).astype(np.float32)
    x[at] = bad
    w = rng.standard_normal((16, 20, 2 * s)).astype(np.float32)
    kw = dict(strides=(s,), pads=(s // 2, s // 2))
    op = convt.ConvTranspose(w, method="direct", **kw)
    op._plan.pin = ("winograd", None)
    assert op._plan.geometry(x.shape).runner is _cfwino._run_cf
    out = np.full((2, 20, 200 * s), 7.0, np.float32)
    y = op(x, out=out)
    assert y is out
    np.testing.assert_array_equal(y, _micro_result(w, x, kw))
    ok = op(rng.standard_normal(x.shape).astype(np.float32))   # the next call: the kernel
    assert np.isfinite(ok).all()


@pytest.mark.parametrize("bad", [np.nan, 2e38])
def test_weights_it_cannot_take_run_another_variant(bad):
    """A NaN weight runs the pixel kernel (through the micro variant's check); two finite
    weights of one phase whose sum overflows float32 run the micro variant."""
    rng = np.random.default_rng(9)
    w = rng.standard_normal((16, 20, 4)).astype(np.float32)
    w[2, 3, 1] = w[2, 3, 3] = bad   # phase 0's two taps (pads 1: taps 1 and 3)
    x = (0.01 * rng.standard_normal((1, 16, 50))).astype(np.float32)
    kw = dict(strides=(2,), pads=(1, 1))
    op = convt.ConvTranspose(w, method="direct", **kw)
    op._plan.pin = ("winograd", None)
    assert_weight_fallback(op, x, w, bad, **kw)


@pytest.mark.parametrize("xs, ws, kw", [
    ((1, 64, 40), (64, 64, 4), dict(strides=(2,), pads=(1, 1), data_format="NXC")),
    ((1, 64, 40), (64, 64, 6), dict(strides=(2,), pads=(2, 2))),       # 3 taps a phase
    ((1, 64, 40), (64, 64, 3), dict(strides=(2,), pads=(1, 1))),       # 2 and 1
    ((1, 64, 40), (64, 64, 4), dict(strides=(4,), pads=(0, 0))),       # stride 4
    ((1, 64, 40), (64, 64, 3), dict(dilations=(2,), pads=(2, 2))),     # folded stride 1
    ((1, 64, 16, 16), (64, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),   # 2-D
    ((1, 2049, 40), (2049, 64, 4), dict(strides=(2,), pads=(1, 1))),   # past _MAX_CHANNELS
    ((1, 64, 40), (64, 64, 34), dict(strides=(17,), pads=(8, 8))),     # past _MAX_STRIDE
    # HiFi-GAN's first layer: 12.6 MB of product weights, past _MAX_WEIGHT_BYTES
    ((1, 512, 256), (512, 256, 16), dict(strides=(8,), pads=(4, 4))),
])
def test_layers_it_leaves_to_the_nxc_kernel(xs, ws, kw):
    w = np.ones(ws, np.float32)
    op = convt.ConvTranspose(w, method="direct", **kw)
    op._plan.pin = ("winograd", None)
    shape = xs if kw.get("data_format") != "NXC" else (xs[0], *xs[2:], xs[1])
    p = op._plan.geometry(shape)
    assert _cfwino.cf_layout(p.geom, 4) is None
    assert p.runner is not _cfwino._run_cf


def test_up_to_max_channels():
    w = np.ones((2048, 8, 4), np.float32)
    geom = convt.ConvTranspose(w, strides=(2,), pads=(1, 1))._plan.geometry((1, 2048, 40)).geom
    assert _cfwino.cf_layout(geom, 4) is not None


def test_a_portable_level_leaves_the_tiles_to_other_variants(monkeypatch):
    """At ISA level 0 (convt._kernels._cpu.ISA, read by the rule and the kernels on each call)
    neither Winograd kernel is chosen: the rule and the kernels agree; at level 1 the
    channels-first one is."""
    w = np.ones((128, 64, 4), np.float32)
    geom = convt.ConvTranspose(w, strides=(2,), pads=(1, 1)).geometry((1, 128, 64))
    monkeypatch.setattr(_cpu, "ISA", 0)
    assert _cfwino.cf_layout(geom, 4) is None
    p = convt.ConvTranspose(w, strides=(2,), pads=(1, 1), method="direct")._plan.geometry(
        (1, 128, 64))
    assert p.variant not in ("winograd", "micro", "upsample")
    monkeypatch.setattr(_cpu, "ISA", 1)
    p = convt.ConvTranspose(w, strides=(2,), pads=(1, 1), method="direct")._plan.geometry(
        (1, 128, 64))
    assert p.variant == "winograd" and p.runner is not _winograd._run_wino


def test_dask_blocks_run_the_nxc_kernel_with_the_same_bits():
    da = pytest.importorskip("dask.array")
    import convt.dask as cdask

    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 64, 90)).astype(np.float32)
    w = rng.standard_normal((64, 64, 4)).astype(np.float32)
    kw = dict(strides=(2,), pads=(1, 2))
    op = convt.ConvTranspose(w, **kw)
    assert op._plan.geometry(x.shape).runner is _cfwino._run_cf
    y = cdask.conv_transpose(da.from_array(x, chunks=(1, 64, 31)), w, **kw)
    np.testing.assert_array_equal(y.compute(scheduler="threads"), op(x))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("g, mg", [(1, 64), (3, 7), (2, 1)])
@pytest.mark.parametrize("taps", [[3, 1, 2, 0], [12, 4, 13, 5, 8, 0, 9, 1]])
def test_cf_pack_lays_out_the_products(dtype, g, mg, taps):
    """cf_pack's weights are W_lo, W_lo + W_hi and -W_hi per phase, blocks of four output
    channels (zeros past Mg), as numpy makes them; a sum past the float range is not
    finite."""
    rng = np.random.default_rng(5)
    cg, s = 5, len(taps) // 2
    k = max(taps) + 1
    w = rng.standard_normal((g * cg, mg, k)).astype(dtype)
    taps = np.array(taps, np.int64)
    qd = -(-mg // 4)
    out = np.empty(g * qd * 12 * s * cg, dtype)
    assert cf_pack(w, out, taps, g)
    wg = np.zeros((g, cg, qd * 4, k), dtype)
    wg[:, :, :mg] = w.reshape(g, cg, mg, k)
    want = np.empty((g, qd, s, 3, cg, 4), dtype)
    for c in range(s):
        lo, hi = wg[..., taps[2 * c]], wg[..., taps[2 * c + 1]]
        for m, v in enumerate((lo, lo + hi, -hi)):
            want[:, :, c, m] = v.reshape(g, cg, qd, 4).transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(out, want.reshape(-1))
    big = np.finfo(dtype).max / 1.5
    w[0, 0, taps[-1]] = w[0, 0, taps[-2]] = big
    assert not cf_pack(w, out, taps, g)


@pytest.mark.parametrize("taps, size, groups", [
    ([3, 1, 2, 4], 24 * 5 * 16, 1),    # a tap past the kernel
    ([3, 1, 2], 24 * 5 * 16, 1),       # three taps
    ([], 0, 1),                        # no phase
    ([3, 1, 2, 0], 100, 1),            # the wrong output size
    ([3, 1, 2, 0], 24 * 5 * 16, 0),    # no group
])
def test_cf_pack_refuses_what_it_cannot_hold(taps, size, groups):
    w = np.zeros((5, 64, 4), np.float32)
    with pytest.raises(ValueError, match=r"^cf_pack: filter \(C_in, Mg, K\) \(5, 64, 4\), "
                                         r"\d+ groups, two taps below K per phase and 12 Cg "
                                         r"QD G values per phase out; got taps \["):
        cf_pack(w, np.zeros(size, np.float32), np.array(taps, np.int64), groups)


@pytest.mark.skipif(_cpu.ISA < 2, reason="no AVX-512 on this machine")
@pytest.mark.parametrize("s, g, cg, mg, n, width, pads, op_, dtype, bias", _cases()[::3])
def test_avx512_tile_gives_the_avx2_bits(s, g, cg, mg, n, width, pads, op_, dtype, bias,
                                         monkeypatch):
    """The zmm + ymm tile sums each product's channels as the 3-ymm tile does: the same bits
    (the block of 3 ymm vectors of tiles and the write-outs are the same at both levels)."""
    rng = np.random.default_rng(abs(hash((s, g, cg, mg, n, width, pads))) % 2**32)
    x = rng.standard_normal((n, g * cg, width)).astype(dtype)
    w = rng.standard_normal((g * cg, mg, 2 * s)).astype(dtype)
    b = rng.standard_normal(g * mg).astype(dtype) if bias else None
    cf, _ = _ops(w, b, dict(strides=(s,), pads=pads, output_padding=(op_,), group=g))
    if _cfwino.cf_layout(cf._plan.geometry(x.shape).geom, x.itemsize) is None:
        pytest.skip("no F(2, 2) tiles on a phase (too few outputs)")
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)
    got = {}
    for level in (1, 2):
        monkeypatch.setattr(_cpu, "ISA", level)
        assert cf._plan.geometry(x.shape).runner is _cfwino._run_cf
        got[level] = cf(x)
    np.testing.assert_array_equal(got[2].view(np.uint8), got[1].view(np.uint8))
