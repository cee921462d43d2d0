"""A one-shot FFT call's kernel spectra packed straight from the weights
(``fft_pack_weights``: the last axis' DFT and axis 0's centred sums in one compiled pass,
into the rows ``fft_contract_packed`` reads): the contraction from those rows against
einsum with the rfftn of the polyphase kernel, at every ISA level this CPU has and for 1, 2
and 3 threads, and whole one-shot calls that take the path against the reference oracle."""
import itertools

import numpy as np
import pytest

import convt
import convt._backends.fft as fft_mod
import convt._backends.fft_spectra as spectra_mod
from convt._kernels import _cpu
from convt._kernels._fftmul import fft_contract_packed, fft_pack_weights

from _helpers import spy

LEVELS = list(range(min(_cpu.ISA, 2) + 1))


def _geom(x_shape, w_shape, **kw):
    op = convt.ConvTranspose(np.zeros(w_shape), method="fft", **kw)
    return op._plan.geometry(x_shape).geom


def _oracle(w_iox, geom, small):
    """(P, rows, Cg, Mg) complex128: per phase r the rfftn at ``small`` of the polyphase
    kernel h_r[q] = wd[q*s + r] (wd the dilated kernel), rows (bins..., G) flattened."""
    g, nd = geom.groups, geom.ndim
    c_in, mg = w_iox.shape[:2]
    ext = [(k - 1) * d + 1 for k, d in zip(geom.kernel, geom.dilations)]
    wd = np.zeros((c_in, mg, *ext))
    wd[(slice(None), slice(None)) + tuple(slice(0, e, d) for e, d in
                                          zip(ext, geom.dilations))] = w_iox
    out = []
    for r in itertools.product(*map(range, geom.strides)):
        h = wd[(slice(None), slice(None)) + tuple(slice(ri, None, s) for ri, s in
                                                  zip(r, geom.strides))]
        spec = np.fft.rfftn(h, s=small, axes=tuple(range(2, 2 + nd)))
        spec = spec.reshape(g, c_in // g, mg, -1)
        out.append(np.moveaxis(spec, 3, 0).reshape(-1, c_in // g, mg))
    return np.stack(out)


PACK_CASES = [  # x shape, w shape, keywords, transform lengths
    ((1, 8, 12, 12), (8, 4, 9, 9), {}, (20, 20)),
    ((1, 4, 10, 12), (4, 6, 5, 7), dict(strides=[2, 3], dilations=[2, 1]), (12, 9)),
    ((1, 6, 9, 11), (6, 2, 4, 10), dict(strides=[2, 1], group=3), (16, 25)),
    ((1, 4, 8, 8), (4, 5, 8, 6), dict(dilations=[3, 2]), (36, 20)),       # even taps
    ((1, 3, 7, 9), (3, 7, 3, 2), dict(strides=[4, 3]), (8, 10)),          # stride > kernel
    ((1, 2, 9, 8), (2, 9, 1, 5), {}, (10, 15)),                           # one tap on axis 0
    ((2, 20, 6, 6), (20, 3, 3, 3), {}, (9, 8)),                           # 60 weights: 4 blocks
    ((1, 5, 30), (5, 3, 10), {}, (40,)),
    ((1, 6, 20), (6, 3, 9), dict(strides=[3], group=3, dilations=[2]), (21,)),
    ((1, 4, 16), (4, 4, 7), dict(strides=[2], dilations=[3]), (27,)),
]


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", PACK_CASES, ids=lambda c: "x".join(map(str, c[1])) + "-"
                         + "-".join(f"{k}{v}" for k, v in c[2].items()))
def test_packed_contraction_matches_oracle(case, dtype, isa):
    x_shape, w_shape, kw, small = case
    geom = _geom(x_shape, w_shape, **kw)
    rng = np.random.default_rng(5)
    w = rng.standard_normal(w_shape).astype(dtype)
    ref_w = _oracle(w.astype(np.float64), geom, small)
    phases, rows, cg, mg = ref_w.shape
    ct = np.result_type(dtype, np.complex64)
    x = (rng.standard_normal((rows, 3, cg)) + 1j * rng.standard_normal((rows, 3, cg))).astype(ct)
    ref = np.einsum("ric,prcm->prim", x.astype(complex), ref_w)
    dft, taps0, taps1, f, shape = spectra_mod._pack_tables(geom, small, np.dtype(dtype))
    outs = []
    for threads in (1, 2, 3):
        packed = np.full(shape, np.nan, dtype)
        fft_pack_weights(w.reshape(geom.c_in * w.shape[1], -1), taps0, taps1, f, packed,
                         geom.groups, geom.ndim == 2, threads, isa)
        y = np.full((phases, rows, 3, mg), np.nan, ct)
        fft_contract_packed(x.view(dtype), packed, dft, f, y.view(dtype), small[0],
                            f.shape[1] * geom.groups, geom.groups, geom.ndim == 2, threads, isa)
        outs.append((packed, y))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.abs(outs[0][1] - ref).max() <= tol * np.abs(ref).max()
    for packed, y in outs[1:]:   # each value made by one thread
        np.testing.assert_array_equal(packed, outs[0][0])
        np.testing.assert_array_equal(y, outs[0][1])


def test_pack_refuses_rows_of_another_shape():
    geom = _geom((1, 4, 8, 8), (4, 4, 3, 3))
    _, taps0, taps1, f, shape = spectra_mod._pack_tables(geom, (10, 10), np.dtype(np.float32))
    w = np.zeros((16, 9), np.float32)
    out = np.zeros((shape[0], shape[1] + 16), np.float32)
    with pytest.raises(RuntimeError, match="packed rows or a table of another shape: this is a "
                       "bug in convt"):
        fft_pack_weights(w, taps0, taps1, f, out, 1, True, 1)


def test_three_dims_and_long_last_axes_keep_the_partial_spectra():
    """3-D calls, and 2-D calls whose last axis takes scipy.fft, are not packed from the
    weights: their spectra short of axis 0 come from kernel_spectrum (``Lead.partial``)."""
    g3 = _geom((1, 2, 6, 6, 6), (2, 2, 3, 3, 3))
    assert spectra_mod._pack_tables(g3, (8, 8, 8), np.dtype(np.float32)) is None
    lead = spectra_mod.lead_spectra(np.ones((2, 2, 3, 3, 3)), g3, (8, 8, 8), np.float32, 1)
    assert lead.packed is None and lead.partial is not None
    g2 = _geom((1, 2, 4, 200), (2, 2, 3, 121))
    assert spectra_mod._pack_tables(g2, (8, 324), np.dtype(np.float32)) is None


ONE_SHOT = [  # x shape, w shape, keywords
    ((1, 32, 48, 48), (32, 32, 9, 9), {}),
    ((2, 8, 21, 17), (8, 8, 7, 5), dict(pads=[3, 2, 1, 4])),
    ((1, 6, 15, 16), (6, 4, 5, 6), dict(strides=[2, 2], dilations=[1, 2])),
    ((1, 4, 13, 11), (4, 6, 7, 4), dict(strides=[3, 2], output_padding=[1, 1])),
    ((2, 12, 10, 12), (12, 4, 3, 5), dict(group=3, dilations=[3, 1])),
    ((1, 16, 24, 20), (16, 16, 11, 11), dict(pads=[5, 5, 5, 5])),
    ((2, 9, 9, 10), (10, 10, 6, 6), dict(strides=[1, 2], data_format="NXC")),
    ((1, 8, 30, 8), (8, 8, 15, 3), dict(auto_pad="SAME_UPPER")),
    ((3, 8, 200), (8, 8, 31), {}),
    ((2, 6, 120), (6, 4, 12), dict(strides=[2], dilations=[2], group=2)),
    ((1, 9, 90), (9, 3, 21), dict(strides=[3], pads=[10, 4], group=3)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ONE_SHOT, ids=[f"{i}-" + "x".join(map(str, c[1]))
                                                for i, c in enumerate(ONE_SHOT)])
def test_one_shot_packed_matches_reference(case, dtype, monkeypatch):
    x_shape, w_shape, kw = case
    calls = spy(monkeypatch, spectra_mod, "fft_pack_weights")
    monkeypatch.setattr(fft_mod, "FFT_OVERLAP_SAVE", False)   # its spectra are made whole
    monkeypatch.setattr(spectra_mod, "_FUSE_MIN_COLUMNS", 1)
    rng = np.random.default_rng(13)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               method="reference", **kw)
    outs = [convt.conv_transpose(x, w, method="fft", workers=n, **kw) for n in (1, 2, 3)]
    assert calls, "the one-shot call did not pack its spectra from the weights"
    one = outs[0]
    assert one.dtype == dtype and one.shape == ref.shape
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.abs(one - ref).max() <= tol * np.abs(ref).max()
    np.testing.assert_array_equal(outs[1], one)
    np.testing.assert_array_equal(outs[2], one)


PLACE = [  # x shape, w shape, keywords, one_shot (its overlap-add tiles) or prepared
    ((1, 32, 48, 48), (32, 32, 9, 9), {}, True),
    ((1, 32, 48, 48), (32, 32, 9, 9), {}, False),
    ((2, 6, 20, 21), (6, 5, 8, 6), dict(pads=[3, 1, 0, 4]), True),
    ((3, 4, 13, 17), (4, 18, 5, 7), dict(strides=[2, 3], output_padding=[1, 2]), False),
    ((1, 6, 30, 26), (6, 20, 7, 9), dict(group=2, pads=[9, 2, 1, 12]), True),
    ((2, 8, 40, 33), (8, 3, 11, 5), dict(auto_pad="SAME_LOWER", strides=[1, 2]), True),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("case", PLACE, ids=[f"{i}" for i in range(len(PLACE))])
def test_compiled_placement_gives_numpys_bits(case, workers, dtype, monkeypatch):
    """fft_place2 (2-D, channels first: one frame or a few tiles) adds the tile frames in
    the order of _place_tiles / _place: the same bits, for any thread count, with crops,
    pads that cut into the frames, several groups and channel counts off the 16-block."""
    x_shape, w_shape, kw, one_shot = case
    rng = np.random.default_rng(21)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)

    def run():
        if one_shot:
            return convt.conv_transpose(x, w, method="fft", workers=workers, **kw)
        return convt.ConvTranspose(w, method="fft", workers=workers, **kw)(x)

    placed = spy(monkeypatch, fft_mod, "place2")
    y = run()
    assert placed, "the call did not take the compiled placement"
    monkeypatch.setattr(fft_mod, "place2", lambda y, z, geom, lay, n0, workers: (
        fft_mod._place_tiles(y, z, geom, lay, n0) if lay.blocked else
        fft_mod._place(y, fft_mod._overlap_add(z, geom, lay, z.shape[3]), geom, lay, n0)))
    np.testing.assert_array_equal(y, run())
