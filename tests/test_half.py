"""16-bit storage converted in the kernels' passes (convt/_kernels/_half.h, _half.pyx,
_layout.pyx's to_padded_nxc16; convt._backends.direct.storage; guard.deliver).

The promise: a float16 / bfloat16 call gives, bit for bit, the float32 computation on the
widened data rounded once by NumPy / ml_dtypes astype (what convt did before the conversions
moved into the kernels). Pinned here for the conversions alone (every float16 and bfloat16
value widened; float32 values narrowed: specials, NaN payloads, ties, overflow, subnormals,
random bit patterns), at every ISA level the machine has, and for every direct variant,
both data layouts, ``out=``, one and two threads.
"""
import numpy as np
import pytest

import convt
from convt._dispatch import guard
from convt._kernels import _cpu, _half
from convt._kernels._layout import to_padded_nxc, to_padded_nxc16

from conftest import DTYPES, np_dtype

HALF = [d for d in DTYPES if d in ("float16", "bfloat16")]
LEVELS = _cpu.levels()


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


def _narrow_cases(rng):
    """float32 bit patterns: the specials, around each boundary of both 16-bit types, and
    random ones (every exponent)."""
    special = [0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001,
               0xff800001, 0x7fa00000, 0x7fc00001, 0x7fffffff, 0xffffffff, 0x7f801fff,
               0x7f802000, 0x7f7fffff, 0xff7fffff, 0x00000001, 0x807fffff, 0x00800000]
    around = []
    for base in (0x477fe000, 0x477ff000, 0x47800000, 0x38800000, 0x38000000, 0x33800000,
                 0x33000000, 0x32800000, 0x3f800000, 0x3f808000, 0x3f818000, 0x7f7f8000,
                 0x00008000, 0x00018000, 0x387fc000, 0x3c000000):
        around += [base + d for d in range(-3, 4)]
    u = np.array(special + around, np.uint32)
    u = np.concatenate([u, u | 0x80000000, rng.integers(0, 2**32, 1 << 18, dtype=np.uint32)])
    return u.view(np.float32)


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("name", HALF)
def test_widen_gives_astype_bits_for_every_value(name, isa):
    dt = np_dtype(name)
    src = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    for n in (1 << 16, (1 << 16) - 3, 7):   # tails past the vector bodies
        dst = np.empty(n, np.float32)
        _half.widen(src[:n], dst, _half.KINDS[name], 2, isa)
        with np.errstate(invalid="ignore"):
            want = src[:n].view(dt).astype(np.float32)
        np.testing.assert_array_equal(_bits(dst), _bits(want))


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("name", HALF)
def test_narrow_gives_astype_bits(name, isa, rng):
    dt = np_dtype(name)
    f = _narrow_cases(rng)
    for n in (f.size, f.size - 5, 3):
        dst = np.empty(n, np.uint16)
        _half.narrow(f[:n], dst, _half.KINDS[name], 2, isa)
        with np.errstate(invalid="ignore", over="ignore"):
            want = f[:n].astype(dt)
        np.testing.assert_array_equal(dst, _bits(want))


@pytest.mark.parametrize("name", HALF)
def test_narrow_every_float16_neighbourhood(name):
    # each 16-bit value's float32 image and its neighbours one float32 ulp up and down, and the
    # float32 midpoints between consecutive 16-bit values (the ties) with theirs
    dt = np_dtype(name)
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt)
    with np.errstate(invalid="ignore"):
        w = h.astype(np.float32).view(np.uint32).astype(np.int64)
    mid = (w[:-1] + w[1:]) // 2
    u = np.concatenate([w + d for d in (-1, 0, 1)] + [mid + d for d in (-1, 0, 1)])
    f = (u % 2**32).astype(np.uint32).view(np.float32)
    for isa in LEVELS:
        dst = np.empty(f.size, np.uint16)
        _half.narrow(f, dst, _half.KINDS[name], 2, isa)
        with np.errstate(invalid="ignore", over="ignore"):
            np.testing.assert_array_equal(dst, _bits(f.astype(dt)))


def test_conversions_refuse_mismatched_lengths():
    with pytest.raises(ValueError, match="widen: dst holds 3 values, src 4"):
        _half.widen(np.zeros(4, np.uint16), np.zeros(3, np.float32), 0, 1)
    with pytest.raises(ValueError, match="narrow: dst holds 5 values, src 4"):
        _half.narrow(np.zeros(4, np.float32), np.zeros(5, np.uint16), 1, 1)


def test_kernel_guards_refuse_what_they_cannot_write():
    # the internal kernels' own checks: a caller's slip is an error, never a write past
    # the end of an array
    w = np.zeros((2, 8, 3), np.uint16)
    with pytest.raises(ValueError, match="pack_taps16: Mg must be a multiple of 16; got 8"):
        _half.pack_taps16(w, np.zeros(64, np.float32), 1, 32, 1)
    w = np.zeros((2, 16, 3), np.uint16)
    with pytest.raises(ValueError, match=r"pack_taps16: line 32 and out \(64 values\) do not "
                                         r"hold 3 taps of 32 values"):
        _half.pack_taps16(w, np.zeros(64, np.float32), 1, 32, 1)
    from convt._kernels._micro import micro_conv
    one, i1 = np.zeros(1), np.zeros(1, np.int64)
    with pytest.raises(ValueError, match="micro_conv: a 16-bit y needs float32 tiles"):
        micro_conv(one, one, one, one, one, np.zeros((1, 9), np.int64), i1,
                   np.zeros((1, 4), np.int64), np.zeros(18, np.int64), np.zeros(5, np.int64),
                   one, i1, 1, 1, y16=np.zeros(1, np.uint16))


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("shape, halo, grid", [
    ((2, 19, 3, 5, 37), (1, 0, 2), (5, 6, 41)),
    ((1, 64, 1, 1, 300), (0, 0, 0), (1, 1, 300)),
    ((3, 8, 2, 16, 16), (0, 1, 1), (2, 18, 18)),
    ((1, 5, 1, 1, 3), (0, 0, 0), (1, 1, 3))])
def test_padded_transpose_widens_as_the_float32_one(name, isa, shape, halo, grid, rng):
    dt = np_dtype(name)
    x = rng.standard_normal(shape).astype(dt)
    x.reshape(-1)[::97] = np.inf
    x.reshape(-1)[5::101] = np.nan
    x.reshape(-1)[7::89] = 6e4 if name == "float16" else 3e38
    n, c = shape[:2]
    got = np.zeros((n, *grid, c), np.float32)
    want = np.zeros_like(got)
    h = np.array(halo, np.int64)
    for spare in (-1, 0, 2):
        r16 = to_padded_nxc16(x.view(np.uint16), got, h, 2, isa, spare, _half.KINDS[name])
        r32 = to_padded_nxc(x.astype(np.float32), want, h, 2, isa, spare)
        np.testing.assert_array_equal(_bits(got), _bits(want))
        assert r16 == r32
    small = np.where(np.abs(x.astype(np.float32)) < 1e4, x, 1).astype(dt)   # NaN -> 1 too
    assert to_padded_nxc16(small.view(np.uint16), got, h, 1, isa, 2, _half.KINDS[name])
    finite = small
    assert to_padded_nxc(finite.astype(np.float32), want, h, 1, isa, 2)


# One geometry per direct variant, each pinned (as convt.dask pins them): (pin, variant that
# runs, x shape NCX, w shape, keywords)
_VARIANTS = [
    (("micro", False), "micro", (2, 24, 5, 6), (24, 20, 3, 3),
     dict(strides=(2, 2), pads=(1, 1, 0, 1))),
    (("winograd", None), "winograd", (2, 32, 6, 7), (32, 32, 4, 4),
     dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    (("winograd", None), "winograd", (1, 64, 300), (64, 32, 4), dict(strides=(2,), pads=(1, 1))),
    (("gemm", False), "gemm", (2, 16, 5, 5), (16, 12, 2, 2), dict(strides=(2, 2))),
    (("gemm", True), "gemm", (3, 16, 4, 4), (16, 12, 3, 3),
     dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    (("pixel", False), "pixel", (2, 6, 5, 4), (6, 5, 3, 2), dict(strides=(2, 1), dilations=(1, 2))),
    (("depthwise", False), "depthwise", (2, 16, 9, 8), (16, 1, 4, 4),
     dict(strides=(2, 2), pads=(1, 1, 1, 1), group=16)),
    (("upsample", False), "upsample", (2, 16, 6, 33), (16, 16, 2, 2), dict(strides=(2, 2))),
]


def _pinned(w, b, pin, kw, data_format, workers):
    op = convt.ConvTranspose(w, b, method="direct", workers=workers, data_format=data_format,
                             **kw)
    op._plan.pin = pin
    return op


def _data(name, xs, ws, rng, special):
    dt = np_dtype(name)
    x = rng.standard_normal(xs).astype(dt)
    w = rng.standard_normal(ws).astype(dt)
    if special:
        big = 6e4 if name == "float16" else 3e38
        flat = x.reshape(-1)
        flat[::37] = big                    # sums overflowing to Inf on narrowing
        flat[3::41] = 3e-8 if name == "float16" else 1e-39    # subnormal products
        flat[11::53] = np.inf
        flat[17::59] = np.nan
    return x, w


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("special", [False, True], ids=["normal", "specials"])
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("case", range(len(_VARIANTS)))
def test_every_variant_gives_the_float32_result_rounded_once(case, name, data_format, special,
                                                            isa, rng, monkeypatch):
    monkeypatch.setattr(_cpu, "ISA", isa)
    pin, variant, xs, ws, kw = _VARIANTS[case]
    dt = np_dtype(name)
    groups = kw.get("group", 1)
    x, w = _data(name, xs, ws, rng, special)
    b = rng.standard_normal(ws[1] * groups).astype(dt)
    if data_format == "NXC":
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    f32 = [a.astype(np.float32) for a in (x, w, b)]
    ys = []
    for workers in (1, 2):
        op16 = _pinned(w, b, pin, kw, data_format, workers)
        op32 = _pinned(f32[1], f32[2], pin, kw, data_format, workers)
        ran = op16._plan.geometry(x.shape).variant
        assert ran == op32._plan.geometry(x.shape).variant
        if not special and isa >= 1:   # (micro, Winograd and upsample need AVX2 + FMA)
            assert ran == variant or (data_format == "NXC" and variant == "upsample")
        with np.errstate(invalid="ignore", over="ignore"):
            want = op32(f32[0]).astype(dt)
        y = op16(x)
        ys.append(_bits(y))
        assert y.dtype == dt and y.shape == want.shape and y.flags.c_contiguous
        np.testing.assert_array_equal(_bits(y), _bits(want))
        out = np.full(want.shape, 7, dt)
        assert op16(x, out=out) is out
        np.testing.assert_array_equal(_bits(out), _bits(want))
        one = convt.conv_transpose(x, w, b, method="direct", workers=workers,
                                   data_format=data_format, **kw)
        if not special:   # the one-shot call may choose another variant: same values
            np.testing.assert_allclose(one.astype(np.float32), want.astype(np.float32),
                                       rtol=2e-2, atol=2e-2)
    np.testing.assert_array_equal(ys[0], ys[1])   # 1 and 2 threads: the same bits


@pytest.mark.parametrize("name", HALF)
def test_deliver_rounds_as_astype_into_any_out(name, rng):
    dt = np_dtype(name)
    y = _narrow_cases(rng)[:5000].reshape(50, 100)
    with np.errstate(invalid="ignore", over="ignore"):
        want = y.astype(dt)
        got = guard.deliver(y, dt, None, 2)
        np.testing.assert_array_equal(_bits(got), _bits(want))
        out = np.empty_like(want)
        assert guard.deliver(y, dt, out, 2) is out
        np.testing.assert_array_equal(_bits(out), _bits(want))
        t = guard.deliver(y.T, dt, None, 2)   # not C-contiguous: NumPy's cast, same bits
        np.testing.assert_array_equal(_bits(t), _bits(np.ascontiguousarray(want.T)))


def test_one_shot_weights_widened_into_the_workspace(rng):
    # a one-shot float16 call widens its weights into the thread's one-shot workspace: two
    # calls with different weights each get their own
    x = rng.standard_normal((1, 8, 5, 5)).astype(np.float16)
    ws = [rng.standard_normal((8, 16, 3, 3)).astype(np.float16) for _ in range(2)]
    for w in ws + ws[::-1]:
        y = convt.conv_transpose(x, w, strides=(2, 2), method="direct")
        ref = convt.ConvTranspose(w, strides=(2, 2), method="direct")(x)
        np.testing.assert_array_equal(_bits(y), _bits(ref))


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("name", HALF)
@pytest.mark.parametrize("cin, mg, kt, groups", [(8, 32, 16, 1), (12, 16, 9, 3), (4, 48, 5, 2)])
def test_pack_taps16_packs_as_pack_taps_on_the_widened_weights(cin, mg, kt, groups, name, isa,
                                                               rng):
    from convt._backends.direct.micro import packing_arrays
    from convt._kernels._pack import pack_taps
    dt = np_dtype(name)
    w = rng.standard_normal((cin, mg, kt)).astype(dt)
    line = (mg // 16) * cin * 16 + 16
    for stream in (False, True):
        for spare, poke in ((0, None), (120, 1e4), (0, np.inf)):   # 120: bound 2^8
            wp = w.copy()
            if poke is not None:
                wp[cin - 1, mg - 1, kt - 1] = poke
            got, _ = packing_arrays(kt * line, w, dtype=np.float32)
            want, _ = packing_arrays(kt * line, w, dtype=np.float32)
            got[:] = 0
            want[:] = 0
            ok16 = _half.pack_taps16(wp.view(np.uint16), got, groups, line, 2, isa, stream,
                                     spare, _half.KINDS[name])
            ok32 = pack_taps(wp.astype(np.float32), want, groups, line, 2, isa, stream, spare)
            np.testing.assert_array_equal(_bits(got), _bits(want))
            assert ok16 == ok32 and ok16 == (poke is None)


@pytest.mark.parametrize("name", HALF)
def test_one_shot_late_sums_pack_16_bit_weights_directly(name, rng, monkeypatch):
    # a one-shot call whose Winograd products would be large sums them in the kernel from
    # taps packed straight from the 16-bit weights: the prepared call's bits
    from convt._backends.direct import winograd
    monkeypatch.setattr(winograd, "_LATE_SUM_BYTES", 0)
    # the float32 path's Winograd: bfloat16's dot-product tiles (micro_bf16) would take it
    from convt._backends.direct import micro_bf16
    monkeypatch.setattr(micro_bf16.VARIANT, "takes", lambda *a: False)
    dt = np_dtype(name)
    x = rng.standard_normal((2, 32, 6, 6)).astype(dt)
    w = rng.standard_normal((32, 32, 4, 4)).astype(dt)
    b = rng.standard_normal(32).astype(dt)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1), method="direct")
    from convt._dispatch import plan as _plan
    pick = _plan.direct_variant
    monkeypatch.setattr(_plan, "direct_variant",
                        lambda geom, pin=None: pick(geom, ("winograd", None)))
    calls = []
    orig = winograd.wino_taps
    monkeypatch.setattr(winograd, "wino_taps", lambda lay, w_, *a: calls.append(w_.dtype)
                        or orig(lay, w_, *a))
    op = convt.ConvTranspose(w, b, **kw)
    assert op._plan.geometry(x.shape).variant == "winograd"
    y = convt.conv_transpose(x, w, b, **kw)
    assert calls == [dt]
    np.testing.assert_array_equal(_bits(y), _bits(op(x)))


@pytest.mark.parametrize("name", HALF)
def test_other_byte_order_and_large_results_give_the_same_bits(name, rng, monkeypatch):
    # byte-swapped data is converted by NumPy (half_kind: None); a result too large to keep
    # in the plan's stage gets a new float32 array: the bits do not change
    from convt._backends.direct.storage import as_compute, half_kind
    from convt._dispatch import plan as _plan
    dt = np_dtype(name)
    x = rng.standard_normal((2, 8, 6, 5)).astype(dt)
    w = rng.standard_normal((8, 4, 3, 3)).astype(dt)
    swapped = x.astype(dt.newbyteorder())
    assert half_kind(swapped.dtype) is None and half_kind(dt) == _half.KINDS[name]
    np.testing.assert_array_equal(_bits(as_compute(swapped, np.dtype(np.float32), 2)),
                                  _bits(x.astype(np.float32)))
    op = convt.ConvTranspose(w, strides=(2, 2), method="direct")
    want = op(x)
    np.testing.assert_array_equal(_bits(op(swapped)), _bits(want))
    monkeypatch.setattr(_plan, "ONE_SHOT_KEEP", 16)
    big = convt.ConvTranspose(w, strides=(2, 2), method="direct")
    np.testing.assert_array_equal(_bits(big(x)), _bits(want))
    assert big._plan.stage.nbytes() == 0 and op._plan.stage.nbytes() > 0


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("case", range(len(_VARIANTS)))
def test_without_f16c_the_portable_bodies_give_the_same_bits(case, data_format, rng,
                                                              monkeypatch):
    # a CPU with AVX2 but no F16C runs the float16 conversions and 16-bit stores in portable
    # C (_half.level), beside the AVX2 kernels
    monkeypatch.setattr(_half, "F16C", False)
    assert _half.level(0, 2) == 0 and _half.level(1, 2) == 2
    pin, variant, xs, ws, kw = _VARIANTS[case]
    x, w = _data("float16", xs, ws, rng, True)
    b = rng.standard_normal(ws[1] * kw.get("group", 1)).astype(np.float16)
    if data_format == "NXC":
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    op16 = _pinned(w, b, pin, kw, data_format, 2)
    op32 = _pinned(w.astype(np.float32), b.astype(np.float32), pin, kw, data_format, 2)
    with np.errstate(invalid="ignore", over="ignore"):
        want = op32(x.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(_bits(op16(x)), _bits(want))
