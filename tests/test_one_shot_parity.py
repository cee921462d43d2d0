"""One-shot calls against prepared operators: the same values, the same scratch.

``convt.conv_transpose`` builds a plan for one call and packs its weights into the calling
thread's one-shot workspace (convt._dispatch.workspace). Where it runs the same direct
variant as ``convt.ConvTranspose`` on the same weights, it must return the same bits; a
Winograd call that sums its taps in the kernel (late sums, winograd.late_sums: one-shot calls
on large weights) sums in another order and is held to the reference instead. Repeated calls
of one shape must reuse the workspace's buffers (fresh multi-MB buffers cost page faults on
every call) and keep what they hold bounded.
"""
import ml_dtypes
import numpy as np
import pytest

import convt
from convt._backends.direct import cfwino, winograd
from convt._dispatch import plan as _plan
from convt._dispatch.workspace import one_shot_workspace
from convt._kernels import _cpu

from conftest import assert_close

# name: (x shape, w shape (IOX), attributes, the direct variant the cost model picks in
# float32; bfloat16 may run its own variants, e.g. micro_bf16, which the parity covers too)
GEOMETRIES = {
    "micro_grouped": ((2, 32, 8, 8), (32, 16, 3, 3),
                      dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1), group=2),
                      "micro"),
    "micro_1d": ((1, 32, 20), (32, 16, 16), dict(strides=(8,), pads=(4, 4)), "micro"),
    "winograd_dilated": ((1, 64, 16, 16), (64, 64, 3, 3),
                         dict(dilations=(2, 2), pads=(2, 2, 2, 2)), "winograd"),
    "winograd_strided": ((2, 128, 4, 4), (128, 64, 4, 4),
                         dict(strides=(2, 2), pads=(1, 1, 1, 1)), "winograd"),
    "depthwise": ((1, 16, 12, 12), (16, 1, 4, 4),
                  dict(strides=(2, 2), pads=(1, 1, 1, 1), group=16), "depthwise"),
    "upsample": ((1, 16, 8, 8), (16, 8, 2, 2), dict(strides=(2, 2)), "upsample"),
    "gemm": ((1, 21, 4, 4), (21, 21, 16, 16), dict(strides=(8, 8), pads=(4, 4, 4, 4)), "gemm"),
    # a 3 x 3 input: on 4 x 4 the GEMM variant's per-call cost as refitted on the random
    # sweep's seeds 51-53 prices grid mode 1.7x below the pixel kernel, and it measured 42
    # against 77 us (2-core AMD EPYC Zen 4, float32, 2 workers: docs/dispatch.md)
    "pixel": ((1, 5, 3, 3), (5, 5, 16, 16), dict(strides=(8, 8), pads=(4, 4, 4, 4)), "pixel"),
}
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
# the variants that need the AVX2 level (CONVT_ISA=generic caps it below: GEMM or FFT run)
_AVX2_VARIANTS = ("micro", "winograd", "upsample")


def _needs_avx2(name):
    if _cpu.ISA < 1 and GEOMETRIES[name][3] in _AVX2_VARIANTS:
        pytest.skip(f"{GEOMETRIES[name][3]} needs the AVX2 level")


def _arrays(name, dtype, seed=0):
    xs, ws, kw, _ = GEOMETRIES[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[1] * kw.get("group", 1)).astype(dtype)
    return x, w, b, kw


@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_the_geometries_run_the_variant_they_are_named_for(name):
    _needs_avx2(name)
    # the parity tests below are only worth their names while this holds
    x, w, b, kw = _arrays(name, np.float32)
    assert convt.ConvTranspose(w, b, **kw)._plan.geometry(x.shape).variant == GEOMETRIES[name][3]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_one_shot_equals_prepared_bit_for_bit(name, dtype, workers):
    _needs_avx2(name)   # else one-shot and prepared may pick other methods
    x, w, b, kw = _arrays(name, dtype)
    op = convt.ConvTranspose(w, b, workers=workers, **kw)
    prepared = op(x)
    for _ in range(2):   # the second call reuses the workspace the first one filled
        one = convt.conv_transpose(x, w, b, workers=workers, **kw)
        assert one.dtype == prepared.dtype and one.shape == prepared.shape
        np.testing.assert_array_equal(one.view(np.uint8), prepared.view(np.uint8))
    # a prepared call after one-shot calls on the same thread is unchanged too
    np.testing.assert_array_equal(op(x).view(np.uint8), prepared.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["winograd_dilated", "winograd_strided"])
def test_late_sums_match_the_reference(name, dtype, monkeypatch):
    _needs_avx2(name)
    # every one-shot Winograd call sums its taps in the kernel, as dcgan_g1's does
    monkeypatch.setattr(winograd, "_LATE_SUM_BYTES", 0)
    x, w, b, kw = _arrays(name, dtype)
    seen = []
    orig = winograd.wino_taps

    def counted(*a, **k):
        seen.append(1)
        return orig(*a, **k)

    monkeypatch.setattr(winograd, "wino_taps", counted)
    got = convt.conv_transpose(x, w, b, **kw)
    assert seen, "the one-shot call did not take the late sums"
    want = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                b.astype(np.float64), method="reference", **kw)
    assert_close(got, want, "direct", dtype)


def _buffers(ws):
    return {name: (buf.ctypes.data, buf.nbytes) for name, (buf, _) in ws._bufs.items()}


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["micro_grouped", "winograd_strided", "depthwise"])
def test_repeated_one_shot_calls_reuse_the_workspace_buffers(name, dtype):
    x, w, b, kw = _arrays(name, dtype)
    convt.conv_transpose(x, w, b, **kw)
    ws, stage = one_shot_workspace(), one_shot_workspace("stage")
    first, first_stage = _buffers(ws), _buffers(stage)
    assert first or first_stage
    for seed in (1, 2):   # other weights and inputs of the same shapes: the same memory
        x, w, b, kw = _arrays(name, dtype, seed)
        want = convt.ConvTranspose(w, b, **kw)(x)
        got = convt.conv_transpose(x, w, b, **kw)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
        assert one_shot_workspace() is ws and _buffers(ws) == first
        assert _buffers(stage) == first_stage


def test_calls_of_decreasing_size_keep_the_largest_buffers_only():
    # what a thread keeps between one-shot calls is bounded by its largest call
    sizes = []
    for n in (4, 3, 2, 1, 4):
        x, w, b, kw = _arrays("winograd_strided", np.float32)
        convt.conv_transpose(np.ascontiguousarray(np.repeat(x, n, axis=0)), w, b, **kw)
        sizes.append(one_shot_workspace().nbytes())
    assert sizes[1:4] == [sizes[0]] * 3 and sizes[4] == sizes[0]


# Layers whose one-shot calls sum their taps in the kernel (late sums) once _LATE_SUM_BYTES is
# lowered: 16 taps (the AVX-512 tap pack's 16 x 16 blocks) and 25 (blocks and 9 taps past them)
LATE = {
    "k4s2": ((2, 128, 4, 4), (128, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "k5s2": ((1, 64, 5, 5), (64, 64, 5, 5), dict(strides=(2, 2), pads=(2, 2, 2, 2))),
    "k16s8_1d": ((1, 64, 12), (64, 64, 16), dict(strides=(8,), pads=(4, 4))),
}


@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize("isa", _cpu.levels())
@pytest.mark.parametrize("name", sorted(LATE))
def test_late_sums_equal_prepared_at_every_level_and_thread_count(name, isa, stream,
                                                                   monkeypatch):
    # a one-shot call summing its taps in the kernel gives the prepared operator's bits (its
    # products packed once), at every ISA level, on 1 and 2 threads, with the taps stored
    # through the caches or past them (the NXC Winograd kernel forced, as
    # tests/test_winograd_variant.py's _force does)
    orig = _plan.direct_variant
    monkeypatch.setattr(_plan, "direct_variant",
                        lambda geom, pin=None: orig(geom, pin or ("winograd", False)))
    monkeypatch.setattr(cfwino, "cf_layout", lambda geom, itemsize: None)
    monkeypatch.setattr(_cpu, "ISA", isa)
    monkeypatch.setattr(winograd, "_LATE_SUM_BYTES", 0)
    if stream:
        monkeypatch.setattr(winograd, "_STREAM_PACK_BYTES", 0)
    xs, ws, kw = LATE[name]
    kw = dict(kw, method="direct")
    rng = np.random.default_rng(5)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[1]).astype(np.float32)
    ys = []
    for workers in (1, 2):
        one = convt._api._OneShot(w, b, workers=workers, **kw)
        planned = one._plan.geometry(x.shape)
        assert planned.variant == "winograd" and planned.state[3] is True   # late sums
        got = one(x)
        want = convt.ConvTranspose(w, b, workers=workers, **kw)(x)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        ys.append(got)
    np.testing.assert_array_equal(ys[0].view(np.uint32), ys[1].view(np.uint32))
