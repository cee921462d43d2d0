"""The depthwise kernel's own row kernel for stride 2 with 4 taps a phase (_dwkernel.h's
CONVT_DW_ROW4: 4 x 4 stride-2 kernels such as depthwise_bilinear, 1-D kernels of 7-8 taps at
stride 2): the same bits as the generic row kernel it replaces on those rows (blocks of 4
vectors, masked first and last vectors, rows it leaves to the generic kernel), at every ISA
level, both dtypes, streamed or not, for 1-3 threads; and within tolerance of the reference."""
import numpy as np
import pytest

import convt
from convt._backends.direct import depthwise as dw
from convt._kernels import _cpu

from test_depthwise import _run

# (size, kernel, strides, dilations, pads, output_padding, (groups, cg, mg)), batch 2, NCX
_SHAPES = [((3, n), (4, 4), (2, 2), (1, 1), (p, p, p, p), (0, 0), (3, 1, 1))
           for n in (1, 3, 4, 5, 8, 9, 16, 17, 31, 32, 33, 40, 64, 65, 100, 130) for p in (0, 1, 2, 3)]
_SHAPES += [((1, n), (1, 8), (1, 2), (1, 1), (0, p, 0, p), (0, 1), (2, 1, 2))
            for n in (7, 24, 48, 67, 129) for p in (0, 3, 6)]
_SHAPES += [((2, 3, 40), (2, 4, 4), (1, 2, 2), (1, 1, 1), (0, 1, 1, 0, 1, 1), (0, 0, 0),
             (2, 1, 1)),
            ((4, 50), (4, 4), (2, 2), (1, 1), (1, 0, 2, 3), (1, 1), (2, 2, 1)),
            ((5, 33), (4, 4), (2, 2), (1, 1), (3, 5, 0, 0), (0, 0), (2, 1, 3))]
_CASES = [(*shape, 2, "NCX") for shape in _SHAPES]


def _bits(case, dtype, isa, row4, monkeypatch, workers=None, stream=False):
    monkeypatch.setattr(_cpu, "ISA", isa)
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)   # the zmm body even on Zen 4
    monkeypatch.setattr(dw, "_ROW4", row4)
    monkeypatch.setattr(dw, "_STREAM_BYTES", 0 if stream else 1 << 62)
    y, ref = _run(case, dtype, workers)
    return y, ref


@pytest.mark.parametrize("isa", _cpu.levels()[:3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row4_same_bits_as_generic_row(dtype, isa, monkeypatch):
    checked = 0
    for case in _CASES:
        try:
            generic, ref = _bits(case, dtype, isa, False, monkeypatch)
        except pytest.skip.Exception:   # pads that leave no output
            continue
        for workers, stream in ((1, False), (2, True), (3, False)):
            y, _ = _bits(case, dtype, isa, True, monkeypatch, workers, stream)
            assert y.tobytes() == generic.tobytes(), (case, workers, stream)
        tol = 1e-4 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(generic, ref, rtol=tol, atol=tol)
        checked += 1
    assert checked > 70


@pytest.mark.parametrize("isa", _cpu.levels()[1:3])
def test_row4_masked_taps_add_nothing(isa, monkeypatch):
    """Infinities in x next to a row's ends: a masked tap must not add 0 * inf (a NaN) to the
    border outputs it does not reach; the generic row's bits."""
    monkeypatch.setattr(_cpu, "ISA", isa)
    monkeypatch.setattr(_cpu, "ZMM_HALVES", False)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 3, 64)).astype(np.float32)
    x[:, :, :, 0] = np.inf
    x[:, :, :, -1] = -np.inf
    w = rng.standard_normal((3, 1, 4, 4)).astype(np.float32)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1), group=3)
    out = {}
    for row4 in (False, True):
        monkeypatch.setattr(dw, "_ROW4", row4)
        out[row4] = convt.ConvTranspose(w, None, **kw)(x)
    assert out[True].tobytes() == out[False].tobytes()
    with np.errstate(invalid="ignore"):   # the reference's inf - inf where taps meet
        ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), None,
                                   method="reference", **kw)
    np.testing.assert_array_equal(np.isnan(out[True]), np.isnan(ref))


@pytest.mark.parametrize("isa", _cpu.levels()[:3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row4_own_level_beside_the_generic_rows(dtype, isa, monkeypatch):
    """On a CPU with ZMM_HALVES (Zen 4) the stride-2 4-tap rows run their zmm body at level 2
    ("depthwise_row4") while the other rows run their ymm one: the same bits as the generic
    row alone and as every row at one level, for 1-3 threads, streamed or not, into a new y
    or an ``out=`` 16 bytes past a line (a large numpy array's), odd sizes included. Only
    level 2 mixes the two bodies; levels 0 and 1 (one body for every row) check that the
    level-capped calls keep those bits too."""
    monkeypatch.setattr(_cpu, "ZMM_HALVES", True)
    assert _cpu.kernel_level("depthwise_row4", 2) == 2 and _cpu.kernel_level("depthwise", 2) == 1
    assert _cpu.kernel_level("depthwise_row4", 1) == 1
    monkeypatch.setattr(_cpu, "ISA", isa)
    rng = np.random.default_rng(isa)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1), group=5)
    checked = 0
    for h, wd in ((3, 64), (7, 33), (9, 100), (2, 17)):
        x = rng.standard_normal((2, 5, h, wd)).astype(dtype)
        w = rng.standard_normal((5, 1, 4, 4)).astype(dtype)
        b = rng.standard_normal(5).astype(dtype)
        monkeypatch.setattr(dw, "_ROW4", False)
        monkeypatch.setattr(dw, "_STREAM_BYTES", 1 << 62)
        generic = convt.ConvTranspose(w, b, workers=1, **kw)(x)
        monkeypatch.setattr(dw, "_ROW4", True)
        for halves in (True, False):   # zmm 4-tap rows beside ymm ones, or every row zmm
            monkeypatch.setattr(_cpu, "ZMM_HALVES", halves)
            for workers, stream in ((1, False), (2, True), (3, True)):
                monkeypatch.setattr(dw, "_STREAM_BYTES", 0 if stream else 1 << 62)
                op = convt.ConvTranspose(w, b, workers=workers, **kw)
                assert op(x).tobytes() == generic.tobytes(), (h, wd, halves, workers, stream)
                raw = np.full(generic.size + 32, np.nan, dtype)
                at = (-raw.__array_interface__["data"][0] % 64 + 16) // raw.itemsize
                out = raw[at:at + generic.size].reshape(generic.shape)
                assert op(x, out=out) is out
                assert out.tobytes() == generic.tobytes(), (h, wd, halves, workers, "out")
                assert np.isnan(raw[:at]).all() and np.isnan(raw[at + generic.size:]).all()
                checked += 1
    assert checked == 24
