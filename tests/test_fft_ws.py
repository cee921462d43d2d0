"""The FFT backend's working arrays in the plan's workspace (``convt._backends.fft``,
``fft_blocks``): the transforms written into our arrays give scipy.fft's bits; a prepared
operator keeps its arrays from call to call (no new ones), and its results do not depend on
what the kept arrays held (repeated calls, other batch sizes in between, fresh arrays when
another thread holds the workspace, two Python threads on one operator); every tiling
(one frame, overlap-add tiles and batch chunks, overlap-save groups) against the float64
reference."""
import itertools
import threading

import numpy as np
import pytest
import scipy.fft as sfft

import convt
import convt._backends.fft as fft_mod
import convt._backends.fft_blocks as blocks_mod
from convt._backends.fft_blocks import irfft_into, rfft_into

TOL = {np.float32: 1e-5, np.float64: 1e-12}


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axes", [
    ((16, 3, 5), (0,)), ((97, 2, 3), (0,)), ((202, 4), (0,)), ((12, 10, 3, 2), (0, 1)),
    ((9, 31, 2), (0, 1)), ((22, 127, 3), (0, 1)), ((6, 8, 10, 2, 3), (0, 1, 2)),
    ((7, 5, 13, 4), (0, 1, 2)), ((4, 40, 33), (1, 2))])
@pytest.mark.parametrize("threads", [1, 2])
def test_transforms_give_scipy_bits(shape, axes, dtype, threads):
    """rfft_into / irfft_into against scipy.fft.rfftn / irfftn, bit for bit (even, odd and
    prime lengths: pocketfft's Bluestein path too)."""
    rng = np.random.default_rng(len(shape) * 100 + shape[0])
    x = rng.standard_normal(shape).astype(dtype)
    cplx = np.result_type(dtype, np.complex64)
    ref = sfft.rfftn(x, axes=axes, workers=threads)
    got = rfft_into(x, axes, np.full(ref.shape, np.nan, cplx), threads)
    assert got.dtype == ref.dtype and np.array_equal(_bits(got), _bits(ref))
    lengths = tuple(shape[a] for a in axes)
    spec = (ref + 0.25j * rng.standard_normal(ref.shape)).astype(cplx)
    want = sfft.irfftn(spec.copy(), s=lengths, axes=axes, workers=threads)
    got = irfft_into(spec, axes, lengths, np.full(want.shape, np.nan, dtype), threads)
    assert got.dtype == want.dtype and np.array_equal(_bits(got), _bits(want))


# (N, C_in, C_out, groups), spatial size, kernel, attributes, mode
CASES = [
    (g, (size,) * nd, (k,) * nd, dict(strides=[s] * nd, dilations=[d] * nd,
                                      pads=[1] * (2 * nd), data_format=fmt), mode)
    for nd, size, k in [(1, 37, 9), (2, 11, 5), (3, 6, 3)]
    for g, s, d, fmt, mode in itertools.product(
        [(2, 4, 6, 1), (3, 6, 6, 6)], [1, 3], [1, 2], ["NCX", "NXC"],
        ["plain", "tiled", "save"])
    if mode != "save" or nd == 1
] + [((3, 89, 89, 89), (11, 11), (50, 7), dict(), "plain"),      # the depthwise case of issue 38
     ((2, 3, 5, 1), (400,), (16,), dict(strides=[4], output_padding=[3]), "save"),
     ((3, 4, 2, 1), (50, 40), (7, 5), dict(strides=[2, 1], pads=[3, 1, 2, 0]), "tiled")]


def _setup(case, dtype, monkeypatch, seed=3):
    (n, c, m, g), size, k, kw, mode = case
    if mode == "tiled":   # overlap-add tiles and batch chunks (a last chunk shorter)
        monkeypatch.setattr(fft_mod, "FFT_MEMORY_BUDGET", 20_000)
    if mode == "save":
        monkeypatch.setattr(fft_mod, "FFT_OVERLAP_SAVE", True)
        monkeypatch.setattr(blocks_mod, "SAVE_CACHE", 1 << 12)   # several groups
    rng = np.random.default_rng(seed)
    nxc = kw.get("data_format") == "NXC"
    x = rng.standard_normal((n, *size, c) if nxc else (n, c, *size)).astype(dtype)
    w = rng.standard_normal((c, m // g, *k)).astype(dtype)
    b = rng.standard_normal(m).astype(dtype)
    return x, w, b, dict(kw, group=g, workers=2)


def _ids(cases):
    return [f"{i}-{len(c[1])}d-{c[4]}-g{c[0][3]}-s{c[3].get('strides', [1])[0]}"
            f"-d{c[3].get('dilations', [1])[0]}-{c[3].get('data_format', 'NCX')}"
            for i, c in enumerate(cases)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_kept_arrays_do_not_change_results(case, dtype, monkeypatch):
    x, w, b, kw = _setup(case, dtype, monkeypatch)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                               b.astype(np.float64), method="reference", **kw)
    op = convt.ConvTranspose(w, b, method="fft", **kw)
    first = op(x)
    scale = max(np.max(np.abs(ref)), 1e-300)
    assert first.dtype == dtype and np.max(np.abs(first - ref)) / scale <= TOL[dtype]
    assert np.array_equal(_bits(op(x)), _bits(first))
    op(x[:1] * 3)                       # another batch size, other values, in between
    op(np.flip(x, 0).copy())
    assert np.array_equal(_bits(op(x)), _bits(first))
    with op._plan.workspace.borrow():   # held: the call gets fresh arrays, the same bits
        assert np.array_equal(_bits(op(x)), _bits(first))
    one = convt.conv_transpose(x, w, b, method="fft", **kw)
    assert np.max(np.abs(one - ref)) / scale <= TOL[dtype]
    assert np.array_equal(_bits(convt.conv_transpose(x, w, b, method="fft", **kw)), _bits(one))


def _kept(op):
    return {k: buf.__array_interface__["data"][0]
            for k, (buf, _) in op._plan.workspace._bufs.items() if k.startswith("fft-")}


@pytest.mark.parametrize("case", [CASES[0], CASES[5], CASES[2], CASES[-3], CASES[-1]],
                         ids=_ids([CASES[0], CASES[5], CASES[2], CASES[-3], CASES[-1]]))
def test_prepared_calls_keep_their_arrays(case, monkeypatch):
    """After the first call, the same buffers every call (no new pages), of the size the
    layout's working arrays take (``FftLayout.work_bytes`` per batch element of a chunk,
    which the budget bounds: input tiles, spectra, products, frames), or, overlap-
    save, a few block groups' arrays (``SAVE_CACHE``) per thread and the padded input."""
    x, w, b, kw = _setup(case, np.float32, monkeypatch)
    op = convt.ConvTranspose(w, b, method="fft", **kw)
    op(x)
    lay = op._plan.geometry(x.shape).state[0]
    kept = _kept(op)
    assert kept and any(k.startswith(("fft-spec", "fft-save-spec")) for k in kept)
    for _ in range(3):
        op(x)
        assert _kept(op) == kept
    if lay.save:
        bound = 2 * kw["workers"] * blocks_mod.SAVE_CACHE + 2 * x.nbytes
    else:
        bound = lay.chunk * lay.work_bytes    # the budget counts every kept array
    assert op._plan.workspace.nbytes() <= bound


@pytest.mark.parametrize("case", [CASES[0], CASES[6], CASES[4], CASES[-3], CASES[-1]],
                         ids=_ids([CASES[0], CASES[6], CASES[4], CASES[-3], CASES[-1]]))
def test_two_threads_on_one_operator(case, monkeypatch):
    x, w, b, kw = _setup(case, np.float64, monkeypatch)
    op = convt.ConvTranspose(w, b, method="fft", **kw)
    xs = [x, np.ascontiguousarray(x[::-1]), x[:1].copy()]
    want = [op(v) for v in xs]
    bad = []

    def worker(t):
        for i in range(12):
            j = (i + t) % 3
            if not np.array_equal(_bits(op(xs[j])), _bits(want[j])):
                bad.append((t, i))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


@pytest.mark.parametrize("mode", ["plain", "tiled", "save"])
def test_input_shapes_in_turn(mode, monkeypatch):
    """One operator on inputs of several sizes in turn (tilings that may share a transform
    length but write other regions of the kept arrays): each the bits of a new operator."""
    nd = 1 if mode == "save" else 2
    sizes = [10, 9, 12, 10, 9, 11, 10] if nd == 2 else [30, 37, 33, 30, 37, 31]
    case = ((2, 4, 6, 1), (sizes[0],) * nd, (5,) * nd, dict(strides=[2] * nd), mode)
    _, w, b, kw = _setup(case, np.float64, monkeypatch)
    op = convt.ConvTranspose(w, b, method="fft", **kw)
    rng = np.random.default_rng(1)
    for size in sizes:
        x = rng.standard_normal((2, 4) + (size,) * nd)
        fresh = convt.ConvTranspose(w, b, method="fft", **kw)(x)
        assert np.array_equal(_bits(op(x)), _bits(fresh))


class _ChangedPocketfft:
    """A scipy whose private pocketfft module took other arguments."""

    def r2c(self, *args):
        raise TypeError("r2c() takes 5 positional arguments but 6 were given")


def test_a_changed_private_pocketfft_is_not_used(monkeypatch):
    """The import-time check turns the private calls off when they fail or disagree, and the
    public scipy.fft fallbacks give the same bits."""
    x = np.random.default_rng(3).standard_normal((2, 3, 40, 40)).astype(np.float32)
    w = np.random.default_rng(4).standard_normal((3, 2, 5, 5)).astype(np.float32)
    assert blocks_mod._pocketfft_agrees()
    kept = convt.ConvTranspose(w, method="fft")(x)
    monkeypatch.setattr(blocks_mod, "_pfft", _ChangedPocketfft())
    assert not blocks_mod._pocketfft_agrees()
    monkeypatch.setattr(blocks_mod, "_pfft", None)
    y = convt.ConvTranspose(w, method="fft")(x)
    assert np.array_equal(y, kept)
    ref = convt.conv_transpose(x, w, method="reference")
    assert np.max(np.abs(y - ref)) / np.max(np.abs(ref)) <= 1e-5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, w_shape, strides, dilations", [
    ((2, 3, 9), (3, 2, 301), (3,), (1,)),           # 1-D, rfft of the padded polyphase copy
    ((1, 2, 4, 6), (2, 2, 3, 200), (1, 2), (1, 1)),  # 2-D, last axis by rfft, axis 0 after
    ((1, 3, 5), (3, 4, 100), (1,), (2,)),           # dilated: zeros between the taps
    ((1, 3, 5), (3, 4, 200), (1,), (1,)),           # one phase: the transposing copy
    ((1, 2, 3, 4), (2, 2, 120, 150), (2, 1), (1, 1)),  # 2-D, axis 0 by scipy.fft too
])
def test_spectra_chain_writes_only_the_buffers_it_is_given(x_shape, w_shape, strides,
                                                          dilations, dtype):
    """A one-shot call's kernel spectra (``kernel_spectrum`` with the call's workspace) map
    no new arrays for the polyphase kernel, its transform or its split copy, and give the
    bits of the chain on new arrays (what a prepared operator keeps)."""
    from convt._backends import fft_spectra

    rng = np.random.default_rng(3)
    w = rng.standard_normal(w_shape).astype(dtype)
    x = np.zeros(x_shape, dtype)
    geom = convt.explain(x, w, strides=strides, dilations=dilations, method="fft").geometry
    small = tuple(fft_mod.fft_layout(geom, dtype, one_shot=True).small)
    taps = fft_spectra.phase_taps(geom)
    assert not fft_spectra.uses_dft(taps[-1], small[-1], last=True)
    given = {}

    def buffer(name, shape, dt):
        given[name] = np.full(shape, np.nan, dt) if np.dtype(dt).kind == "f" else \
            np.full(shape, np.nan + 1j * np.nan, dt)
        return given[name]

    made = fft_spectra.kernel_spectrum(w, geom, small, dtype, 2, buffer)
    new = fft_spectra.kernel_spectrum(w, geom, small, dtype, 2)
    assert {"fft-poly", "fft-rspec", "fft-split"} <= set(given)
    assert ("fft-poly-z" in given) == (strides + dilations != (1,) * 2 * len(strides))
    assert np.array_equal(made, new)
    if geom.ndim == 1:
        assert made is given["fft-split"] or np.shares_memory(made, given["fft-split"])
    elif not fft_spectra.uses_dft(taps[0], small[0]):   # axis 0's split copy: a buffer too
        assert np.shares_memory(made, given["fft-dft-b"])
