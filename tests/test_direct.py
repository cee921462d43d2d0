"""The direct kernel against the reference over a wide space of geometries, dtypes, layouts
and memory orders; thread-count determinism."""
import itertools

import numpy as np
import pytest

import convt

from _helpers import reference_at
from conftest import DTYPES, assert_close, np_dtype


def _geometries():
    """Deterministic sweep: rank x stride x dilation x kernel x pads x op x groups x batch."""
    rng = np.random.default_rng(2026)
    cases = []
    for nd in (1, 2, 3):
        for s, d, k in itertools.product((1, 2, 3, 5), (1, 2, 3), (1, 2, 3, 4)):
            if nd == 3 and rng.random() < 0.6:   # keep 3-D from dominating the runtime
                continue
            strides = tuple(int(v) for v in rng.integers(1, s + 1, nd - 1)) + (s,)
            dil = tuple(int(v) for v in rng.integers(1, d + 1, nd - 1)) + (d,)
            kern = tuple(int(v) for v in rng.integers(1, k + 1, nd - 1)) + (k,)
            pads = tuple(int(v) for v in rng.integers(0, 3, 2 * nd))
            op = tuple(int(rng.integers(0, max(a, b))) for a, b in zip(strides, dil))
            groups, cg, mg = [(1, 3, 2), (2, 2, 3), (4, 1, 1), (3, 1, 2)][int(rng.integers(4))]
            batch = int(rng.integers(0, 3))
            size = tuple(int(v) for v in rng.integers(1, 6 if nd < 3 else 4, nd))
            cases.append((size, strides, dil, kern, pads, op, groups, cg, mg, batch))
    return cases


GEOMS = _geometries()


def _make(case, rng, dtype=np.float64):
    size, strides, dil, kern, pads, op, groups, cg, mg, batch = case
    x = rng.standard_normal((batch, groups * cg, *size)).astype(dtype)
    w = rng.standard_normal((groups * cg, mg, *kern)).astype(dtype)
    b = rng.standard_normal(groups * mg).astype(dtype)
    kw = dict(strides=strides, dilations=dil, pads=pads, output_padding=op, group=groups)
    return x, w, b, kw


def _out_len(x, w, kw):
    nd = w.ndim - 2
    pads, op = kw["pads"], kw["output_padding"]
    return [(i - 1) * s + (k - 1) * d + 1 + o - pb - pe for i, s, k, d, o, pb, pe in
            zip(x.shape[2:], kw["strides"], w.shape[2:], kw["dilations"], op, pads[:nd],
                pads[nd:])]


def _expected(x, w, b, kw):
    nd = w.ndim - 2
    pads = kw["pads"]
    pe = [e - o for e, o in zip(pads[nd:], kw["output_padding"])]
    return reference_at(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                        kw["strides"], kw["dilations"], pads[:nd], pe, kw["group"])


@pytest.mark.parametrize("case", GEOMS, ids=[f"g{i}" for i in range(len(GEOMS))])
def test_direct_matches_reference(case):
    rng = np.random.default_rng(hash(str(case)) % 2**32)
    x, w, b, kw = _make(case, rng)
    if min(_out_len(x, w, kw)) < 1:  # both methods must refuse it alike
        for method in ("direct", "reference"):
            with pytest.raises(ValueError, match="'pads' leave no output"):
                convt.conv_transpose(x, w, b, method=method, **kw)
        return
    ref = _expected(x, w, b, kw)
    for method in ("direct", "reference"):
        assert_close(convt.conv_transpose(x, w, b, method=method, **kw), ref, method, "float64")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", GEOMS[::9], ids=[f"g{i}" for i in range(0, len(GEOMS), 9)])
def test_dtypes(case, dtype):
    rng = np.random.default_rng(7)
    dt = np_dtype(dtype)
    x, w, b, kw = _make(case, rng, dt)
    if min(_out_len(x, w, kw)) < 1:
        pytest.skip("pads leave no output (covered by test_direct_matches_reference)")
    ref = _expected(x, w, b, kw)
    for method in ("direct", "reference"):
        assert_close(convt.conv_transpose(x, w, b, method=method, **kw), ref, method, dtype)


def _layout_cases():
    return list(itertools.product(("NCX", "NXC"), ("IOX", "XOI"), ("C", "F", "strided", "ro")))


@pytest.mark.parametrize("data_format, filter_format, order", _layout_cases())
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_layouts_and_memory_orders(nd, data_format, filter_format, order, rng):
    x = rng.standard_normal((2, 4, *(5,) * nd)).astype(np.float32)
    w = rng.standard_normal((4, 3, *(3,) * nd)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    kw = dict(strides=(2,) * nd, pads=(1,) * (2 * nd), output_padding=(1,) * nd, group=2)
    ref = convt.conv_transpose(x, w, b, method="reference", **kw)
    xl = np.moveaxis(x, 1, -1) if data_format == "NXC" else x
    wl = np.moveaxis(w, (0, 1), (-1, -2)) if filter_format == "XOI" else w
    if order == "F":
        xl, wl = np.asfortranarray(xl), np.asfortranarray(wl)
    elif order == "strided":   # every other element of a twice-as-large buffer
        big = np.zeros(tuple(2 * n for n in xl.shape), xl.dtype)
        big[tuple(slice(None, None, 2) for _ in xl.shape)] = xl
        xl = big[tuple(slice(None, None, 2) for _ in xl.shape)]
    elif order == "ro":
        xl, wl = xl.copy(), wl.copy()
        xl.setflags(write=False)
        wl.setflags(write=False)
    for method in ("direct", "reference"):
        y = convt.conv_transpose(xl, wl, b, data_format=data_format,
                                 filter_format=filter_format, method=method, **kw)
        assert y.flags.c_contiguous
        y = np.moveaxis(y, -1, 1) if data_format == "NXC" else y
        assert_close(y, ref.astype(np.float64), method, "float32")


@pytest.mark.parametrize("shape, kw", [
    ((3, 16, 9, 11), dict(strides=(2, 3), pads=(1, 0, 2, 1), group=4)),
    ((2, 8, 5, 6, 7), dict(strides=(2, 1, 3), dilations=(1, 2, 1), output_padding=(1, 1, 2))),
    ((1, 32, 301), dict(strides=(4,), pads=(3, 2), dilations=(3,))),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bit_identical_for_any_thread_count(shape, kw, dtype, rng):
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((shape[1], 6, *(4,) * (len(shape) - 2))).astype(dtype)
    ys = [convt.conv_transpose(x, w, method="direct", workers=n, **kw) for n in (1, 2, 3, 2)]
    for y in ys[1:]:
        np.testing.assert_array_equal(ys[0], y)


def test_empty_batch(rng):
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    for method in ("direct", "reference"):
        y = convt.conv_transpose(np.zeros((0, 4, 5, 5), np.float32), w, method=method,
                                 strides=(2, 2))
        assert y.shape == (0, 2, 11, 11) and y.dtype == np.float32


def test_bias_everywhere_no_input_reaches(rng):
    """Positions no tap reaches (s = d = 2 phases, negative pads) hold exactly the bias."""
    x = rng.standard_normal((1, 1, 4))
    w = rng.standard_normal((1, 2, 3))
    b = np.array([0.5, -2.0])
    y = convt.conv_transpose(x, w, b, strides=[2], dilations=[2], output_shape=[14],
                             method="direct")
    # F = 11, T = -3: pb = ce(-3) = -1, pe = -2. With s = d = 2 a tap lands where o + pb is
    # even, so every even o holds exactly the bias, and so does o = 13 (past F - 1 + 1).
    np.testing.assert_array_equal(y[0, :, 0::2], np.broadcast_to(b[:, None], (2, 7)))
    assert y[0, 1, 13] == -2.0 and y[0, 1, 11] != -2.0


def test_prepared_operator_reuses_plan_across_shapes(rng):
    w = rng.standard_normal((3, 2, 4)).astype(np.float32)
    op = convt.ConvTranspose(w, strides=[2], pads=[1, 1])
    for n in (5, 17, 5, 3):
        x = rng.standard_normal((2, 3, n)).astype(np.float32)
        assert_close(op(x), convt.conv_transpose(x, w, strides=[2], pads=[1, 1],
                                                 method="reference").astype(np.float64),
                     "direct", "float32")


def test_nan_and_inf_propagate():
    x = np.zeros((1, 1, 4), np.float32)
    x[0, 0, 1] = np.nan
    x[0, 0, 3] = np.inf
    w = np.ones((1, 1, 2), np.float32)
    for method in ("direct", "reference"):
        y = convt.conv_transpose(x, w, method=method)
        assert np.isnan(y[0, 0, 1]) and np.isnan(y[0, 0, 2]) and y[0, 0, 0] == 0
        assert np.isinf(y[0, 0, 4])


def test_small_work_runs_serially(monkeypatch):
    from convt._backends.direct import registry

    monkeypatch.setattr(registry, "_PARALLEL_MIN_MACS", 1 << 22)
    monkeypatch.setattr(registry, "_PARALLEL_MIN_OUTPUTS", 1 << 18)
    w = np.ones((8, 8, 3, 3), np.float32)
    op = convt.ConvTranspose(w, strides=(2, 2), workers=2)
    assert op._plan.threads(op.geometry((1, 8, 8, 8))) == 1
    assert op._plan.threads(op.geometry((1, 8, 512, 512))) == 2
