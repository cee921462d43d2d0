"""The FFT backend's parts against plain NumPy: the pruned kernel spectra (DFT matrices and
scipy.fft paths) against an rfftn of the zero-padded polyphase kernel, the compiled per-bin
contraction against einsum, and the cost model's one-shot / prepared split."""
import itertools

import numpy as np
import pytest

import convt
import convt._backends.fft as fft_mod
import convt._backends.fft_spectra as spectra_mod
from convt._dispatch.cost import estimate
from convt._kernels._fftmul import fft_contract


def _geom(x_shape, w_shape, **kw):
    op = convt.ConvTranspose(np.zeros(w_shape), method="fft", **kw)
    return op._plan.geometry(x_shape).geom


def _spectrum_oracle(w_iox, geom, small):
    """Per phase r: rfftn at ``small`` of h_r[q] = wd[q*s + r], wd the dilated kernel."""
    g, nd = geom.groups, geom.ndim
    c_in, mg = w_iox.shape[:2]
    out = []
    for r in itertools.product(*map(range, geom.strides)):
        ext = [(k - 1) * d + 1 for k, d in zip(geom.kernel, geom.dilations)]
        wd = np.zeros((c_in, mg, *ext))
        wd[(slice(None), slice(None)) + tuple(slice(0, e, d) for e, d in
                                              zip(ext, geom.dilations))] = w_iox
        h = wd[(slice(None), slice(None)) + tuple(slice(ri, None, s) for ri, s in
                                                  zip(r, geom.strides))]
        spec = np.fft.rfftn(h, s=small, axes=tuple(range(2, 2 + nd)))
        spec = spec.reshape(g, c_in // g, mg, -1)       # (G, Cg, Mg, bins)
        out.append(np.moveaxis(spec, 3, 0).reshape(-1, c_in // g, mg))
    return np.stack(out)


SPECTRUM_CASES = [
    ((2, 3, 20), (3, 4, 5), {}, (24,)),
    ((1, 4, 30), (4, 2, 7), dict(strides=[3], dilations=[2]), (16,)),
    ((1, 4, 9, 11), (4, 3, 3, 5), dict(strides=[2, 1], group=2), (12, 18)),
    ((1, 2, 9, 8), (2, 2, 4, 3), dict(dilations=[2, 3], strides=[3, 2]), (10, 9)),
    ((1, 2, 5, 4, 6), (2, 3, 2, 3, 4), dict(strides=[1, 2, 2]), (8, 6, 10)),
]


@pytest.mark.parametrize("dft", [True, False], ids=["dft", "scipy-fft"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", SPECTRUM_CASES, ids=[str(c[3]) for c in SPECTRUM_CASES])
def test_kernel_spectrum_matches_rfftn(case, dtype, dft, monkeypatch):
    monkeypatch.setattr(spectra_mod, "uses_dft", lambda taps, length, last=False: dft)
    x_shape, w_shape, kw, small = case
    geom = _geom(x_shape, w_shape, **kw)
    w = np.random.default_rng(1).standard_normal(w_shape)
    got = spectra_mod.kernel_spectrum(w.astype(dtype), geom, small, dtype, 2)
    ref = fft_mod.split_spectrum(_spectrum_oracle(w.astype(dtype).astype(np.float64), geom,
                                                  small))
    assert got.dtype == dtype and got.shape == ref.shape
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.abs(got - ref).max() <= tol * np.abs(ref).max()


def test_dft_rule_and_matrix():
    assert spectra_mod.uses_dft(9, 60) and not spectra_mod.uses_dft(255, 16384)
    m = spectra_mod.dft_matrix(12, 5, np.dtype(np.float64), True)
    assert m.shape == (7, 5) and not m.flags.writeable
    np.testing.assert_allclose(m, np.fft.rfft(np.eye(5), n=12, axis=0), atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 7, 1, 3, 2), (2, 5, 4, 1, 3), (3, 40, 2, 8, 8),
                                   (1, 3, 1, 0, 4), (4, 2, 6, 5, 1)],
                         ids=lambda s: "x".join(map(str, s)))
def test_compiled_contraction_matches_einsum(shape, dtype):
    phases, rows, items, cg, mg = shape
    rng = np.random.default_rng(4)
    ct = np.result_type(dtype, np.complex64)
    x = (rng.standard_normal((rows, items, cg)) + 1j * rng.standard_normal((rows, items, cg))
         ).astype(ct)
    w = (rng.standard_normal((phases, rows, cg, mg))
         + 1j * rng.standard_normal((phases, rows, cg, mg))).astype(ct)
    ref = np.einsum("ric,prcm->prim", x.astype(complex), w.astype(complex))
    outs = []
    for threads in (1, 2, 3):
        y = np.full((phases, rows, items, mg), np.nan, ct)
        fft_contract(x.view(dtype), fft_mod.split_spectrum(w), y.view(dtype), threads)
        outs.append(y)
        tol = 1e-5 if dtype == np.float32 else 1e-12
        assert np.abs(y - ref).max() <= tol * max(np.abs(ref).max(), 1.0)
    np.testing.assert_array_equal(outs[0], outs[1])     # one thread per bin row
    np.testing.assert_array_equal(outs[0], outs[2])


def test_one_shot_priced_apart():
    """A one-shot call pays its kernel spectra, so it costs more than a prepared one and
    may take shorter transforms; explain shows both."""
    geom = _geom((1, 32, 48, 48), (32, 32, 9, 9))
    prep = estimate(geom, np.float32, 2)
    one = estimate(geom, np.float32, 2, one_shot=True)
    assert prep.split == one.split
    assert prep.seconds["fft"] == prep.split["fft"][0] < one.seconds["fft"] == one.split["fft"][1]
    assert one.seconds["direct"] > prep.seconds["direct"]       # weight packing
    lay_p = fft_mod.fft_layout(geom, np.float32)
    lay_o = fft_mod.fft_layout(geom, np.float32, one_shot=True)
    assert lay_o.spectra < lay_p.spectra and np.prod(lay_o.small) < np.prod(lay_p.small)
    text = str(convt.explain((1, 32, 48, 48), np.zeros((32, 32, 9, 9), np.float32)))
    assert "prepared" in text and "one-shot" in text


def test_one_shot_and_prepared_agree():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 6, 30, 26))
    w = rng.standard_normal((6, 4, 9, 7))
    ref = convt.conv_transpose(x, w, method="reference", pads=[2, 1, 3, 0])
    for y in (convt.conv_transpose(x, w, method="fft", pads=[2, 1, 3, 0]),
              convt.ConvTranspose(w, method="fft", pads=[2, 1, 3, 0])(x)):
        assert np.abs(y - ref).max() <= 1e-12 * np.abs(ref).max()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dft_gemms_give_the_same_bits_for_any_thread_count(dtype):
    """The kernel spectra's DFT GEMMs (_matmul) cut a large product into the same column
    blocks for every thread count: OpenBLAS rounds a column by where it falls in a GEMM's
    column blocks, so a cut at half the columns (20460 of 40920) gave other float64 bits."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((36, 6)).astype(dtype)
    b = rng.standard_normal((4, 6, 40920)).astype(dtype)
    assert a.shape[0] * b.size >= spectra_mod._MIN_THREADED_MACS   # the threaded path
    outs = [spectra_mod._matmul(a, b, n, np.empty((4, 36, 40920), dtype)) for n in (1, 2, 3)]
    for y in outs[1:]:
        np.testing.assert_array_equal(y, outs[0])
    np.testing.assert_allclose(outs[0], a @ b, rtol=1e-5 if dtype == np.float32 else 1e-13,
                               atol=1e-5 if dtype == np.float32 else 1e-13)


def test_prepared_float64_fft_gives_the_same_bits_for_any_thread_count():
    """A prepared float64 FFT call with a batch (the differential fuzz's case, session 11):
    the kernel spectra's GEMMs used to split their columns by the thread count."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 132, 16, 16)), rng.standard_normal((132, 31, 5, 5))
    ys = [convt.ConvTranspose(w, strides=(2, 2), group=4, method="fft", workers=n)(x)
          for n in (1, 2, 3)]
    for y in ys[1:]:
        np.testing.assert_array_equal(y, ys[0])
