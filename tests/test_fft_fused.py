"""The one-shot FFT call's fused kernel spectra (``fft_contract_dft``: axis 0's DFT made row
by row inside the contraction, centred taps, mirrored rows) against plain NumPy, at every
ISA level this CPU has and for several thread counts, and whole one-shot calls that take
that path against the reference oracle over a parametrized space of geometries."""
import numpy as np
import pytest

import convt
import convt._backends.fft as fft_mod
import convt._backends.fft_blocks as blocks_mod
import convt._backends.fft_spectra as spectra_mod
from convt._kernels import _cpu
from convt._kernels._fftmul import fft_contract_dft

from _helpers import spy

LEVELS = list(range(min(_cpu.ISA, 2) + 1))


def _oracle(x, a, length):
    """y[p, r] = x[r] @ W[p, r] in complex128; W from A (P, parts, Q, RR, Cg, Mg) by the
    plain DFT along Q: rows f0 < L0 (parts 2) or f0 <= L0 // 2 (parts 1, real A)."""
    phases, parts, taps, rr_n, cg, mg = a.shape
    ac = a[:, 0] + 1j * a[:, 1] if parts == 2 else a[:, 0].astype(complex)
    nrows = length if parts == 2 else length // 2 + 1
    f = np.exp(-2j * np.pi * np.outer(np.arange(nrows), np.arange(taps)) / length)
    w = np.einsum("fk,pkrcm->pfrcm", f, ac).reshape(phases, nrows * rr_n, cg, mg)
    return np.einsum("ric,prcm->prim", x.astype(complex), w)


FUSED = [  # phases, parts, taps, L0, RR, items, Cg, Mg
    (1, 2, 9, 60, 3, 1, 4, 5),
    (2, 2, 8, 20, 2, 2, 3, 16),      # even taps: a zero tap centres them
    (1, 2, 1, 7, 4, 3, 2, 2),        # odd L0: no self-mirrored middle row
    (3, 2, 5, 16, 1, 1, 17, 3),      # weights past one 16-wide block
    (1, 1, 9, 40, 2, 2, 3, 4),       # 1-D: A real, half the rows
    (2, 1, 10, 33, 1, 1, 5, 7),
    (1, 2, 31, 96, 2, 1, 8, 8),
]


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", FUSED, ids=lambda c: "-".join(map(str, c)))
def test_fused_contraction_matches_oracle(case, dtype, isa):
    phases, parts, taps, length, rr_n, items, cg, mg = case
    rng = np.random.default_rng(11)
    # A as a strided view, as kernel_spectrum gives it: (P, Q, parts, RR, n) moved
    base = rng.standard_normal((phases, taps, parts, rr_n, cg * mg)).astype(dtype)
    a = np.moveaxis(base, 2, 1)
    nrows = (length if parts == 2 else length // 2 + 1) * rr_n
    ct = np.result_type(dtype, np.complex64)
    x = (rng.standard_normal((nrows, items, cg))
         + 1j * rng.standard_normal((nrows, items, cg))).astype(ct)
    ref = _oracle(x, a.reshape(phases, parts, taps, rr_n, cg, mg), length)
    table = spectra_mod.lead_dft(length, taps, dtype)
    outs = []
    for threads in (1, 2, 3):
        y = np.full((phases, nrows, items, mg), np.nan, ct)
        fft_contract_dft(x.view(dtype), a, table, y.view(dtype), length, threads, isa)
        outs.append(y)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.abs(outs[0] - ref).max() <= tol * np.abs(ref).max()
    np.testing.assert_array_equal(outs[0], outs[1])     # one thread per pair of rows
    np.testing.assert_array_equal(outs[0], outs[2])


def test_fused_contraction_refuses_a_table_for_other_taps():
    a = np.zeros((1, 2, 9, 1, 4), np.float32)
    x = np.zeros((20, 1, 4), np.float32)
    y = np.zeros((1, 20, 1, 4), np.float32)
    with pytest.raises(RuntimeError, match="DFT table for other taps: this is a bug in convt"):
        fft_contract_dft(x, a, spectra_mod.lead_dft(20, 7, np.float32), y, 20, 1)


GEOMETRIES = [  # x shape, w shape, keywords
    ((1, 32, 48, 48), (32, 32, 9, 9), {}),
    ((2, 6, 20, 21), (6, 4, 8, 6), {}),
    ((1, 4, 20, 24), (4, 6, 5, 7), dict(strides=[2, 3], dilations=[2, 1], pads=[1, 2, 0, 3])),
    ((1, 6, 17, 19), (6, 2, 4, 10), dict(strides=[2, 1], group=3)),
    ((2, 5, 60), (5, 3, 10), {}),
    ((3, 6, 50), (6, 3, 9), dict(strides=[3], group=3, dilations=[2])),
    ((2, 8, 400), (8, 8, 45), dict(pads=[7, 30])),
    ((1, 4, 9, 10, 11), (4, 2, 3, 4, 5), dict(strides=[1, 2, 1])),
    ((1, 3, 10, 9, 8), (3, 2, 6, 2, 4), dict(dilations=[1, 2, 1], output_padding=[0, 1, 0],
                                             strides=[1, 2, 1])),
    ((1, 16, 40, 40), (16, 16, 15, 15), dict(pads=[7, 7, 7, 7])),
    ((2, 12, 12, 4), (4, 4, 2, 2), dict(data_format="NXC")),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", GEOMETRIES, ids=[f"{i}-" + "x".join(map(str, c[1]))
                                                  for i, c in enumerate(GEOMETRIES)])
def test_one_shot_fused_matches_reference(case, dtype, monkeypatch):
    x_shape, w_shape, kw = case
    calls = [spy(monkeypatch, blocks_mod, name)
             for name in ("fft_contract_dft", "fft_contract_packed")]
    monkeypatch.setattr(fft_mod, "FFT_OVERLAP_SAVE", False)   # its spectra are made whole
    # groups of fewer weights than fuses_lead takes run the fused path too, for the test
    monkeypatch.setattr(spectra_mod, "_FUSE_MIN_COLUMNS", 1)
    rng = np.random.default_rng(12)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               method="reference", **kw)
    one = convt.conv_transpose(x, w, method="fft", workers=2, **kw)
    assert any(calls), "the one-shot call did not take the fused path"
    assert one.dtype == dtype and one.shape == ref.shape
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.abs(one - ref).max() <= tol * np.abs(ref).max()
    np.testing.assert_array_equal(one, convt.conv_transpose(x, w, method="fft", workers=1,
                                                            **kw))


def test_fused_rule_and_price():
    """Axis 0 is fused up to 8 log2(L0) taps, and the fused spectra are priced below the
    full ones they replace (no spectra written, half the multiply-adds)."""
    op = convt.ConvTranspose(np.zeros((32, 32, 9, 9)), method="fft")
    geom = op._plan.geometry((1, 32, 48, 48)).geom
    assert spectra_mod.fuses_lead(geom, (60, 60))
    op1 = convt.ConvTranspose(np.zeros((8, 8, 255)), method="fft")
    geom1 = op1._plan.geometry((4, 8, 16000)).geom
    assert not spectra_mod.fuses_lead(geom1, (16384,))
    fused = spectra_mod.spectrum_features(geom, (60, 60))
    assert fused[0] == 0 and 0 < fused[1] < 32 * 32 * 60 * 31 * 9 * 0.5


@pytest.mark.parametrize("w_shape, group, fused", [
    ((35, 1, 4, 4), 35, False),    # depthwise: one weight a group, padded to a block of 16
    ((8, 2, 4, 4), 2, True),       # 4 x 2 = 8 weights a group: fused
    ((6, 3, 4, 4), 3, False),      # 2 x 3 = 6: whole spectra
])
def test_fused_rule_wants_enough_weights_a_group(w_shape, group, fused, monkeypatch):
    """fuses_lead leaves axis 0 to the contraction only with at least _FUSE_MIN_COLUMNS
    weights a group (C_in/G x C_out/G): the fused DFT runs over blocks of 16 of them. Either
    way the one-shot call gives the prepared call's result within the tolerance."""
    monkeypatch.setattr(fft_mod, "FFT_OVERLAP_SAVE", False)
    kw = dict(strides=(2, 2), group=group)
    op = convt.ConvTranspose(np.zeros(w_shape, np.float32), method="fft", **kw)
    x_shape = (1, w_shape[0], 13, 11)
    geom = op._plan.geometry(x_shape).geom
    assert spectra_mod.fuses_lead(geom, (32, 32)) is fused
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               method="reference", **kw)
    one = convt.conv_transpose(x, w, method="fft", **kw)
    assert np.abs(one - ref).max() <= 1e-5 * np.abs(ref).max()
