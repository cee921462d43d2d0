"""The bfloat16 tiles' rows grouped by the taps they read data for (convt/_kernels/_tile.pxd's
_rows_outer, kernels of 1-12 rows in _bf16kernel.h) and their AVX-512 write-out
(_writeout.h's convt_cf16_h16_avx512), bit for bit against a sequential float32 oracle.

The oracle sums, for each output, the products of its taps in ascending kernel index, each
pair of input channels odd element first (vdpbf16ps's order), one float32 rounding per
addition (the products of two bfloat16 are exact), adds the bias, and rounds once to
bfloat16 (ml_dtypes' astype). Border rows, whose taps fall partly or wholly outside the
input, must give exactly these bits: a tap skipped adds an exact zero."""
import itertools

import numpy as np
import pytest

import convt
from convt._backends.direct import micro_bf16
from convt._kernels import _cpu

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
needs_bf16 = pytest.mark.skipif(not _cpu.bf16(), reason="no AVX512-BF16 on this CPU (or "
                                                        "CONVT_ISA caps it)")


def _sequential(x, w, b, strides, pads, dilations, out_len):
    """float32 sums of x (N, C, *I) and w (C, M, *K) (groups 1) in the tiles' order, plus b:
    output o = i * s + k * d - pads_begin along each axis."""
    x, w = x.astype(np.float32), w.astype(np.float32)
    n, c = x.shape[:2]
    m, nd = w.shape[1], x.ndim - 2
    acc = np.zeros((n, m, *out_len), np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        _sum_taps(x, w, acc, strides, pads, dilations, out_len)
        return acc + b.astype(np.float32).reshape(1, m, *(1,) * nd)


def _sum_taps(x, w, acc, strides, pads, dilations, out_len):
    n, c = x.shape[:2]
    m, nd = w.shape[1], x.ndim - 2
    for k in itertools.product(*(range(K) for K in w.shape[2:])):   # ascending flat index
        ins, outs = [], []
        for a in range(nd):
            i = np.arange(x.shape[2 + a])
            o = i * strides[a] + k[a] * dilations[a] - pads[a]
            ok = (o >= 0) & (o < out_len[a])
            ins.append(i[ok])
            outs.append(o[ok])
        if any(len(v) == 0 for v in ins):
            continue
        xi = x[np.ix_(range(n), range(c), *ins)]
        at = np.ix_(range(n), range(m), *outs)
        for p in range((c + 1) // 2):
            for ch in (2 * p + 1, 2 * p):
                if ch < c:
                    wk = w[(ch, slice(None)) + k].reshape(1, m, *(1,) * nd)
                    acc[at] = acc[at] + xi[:, ch:ch + 1] * wk


def _run(op, x, hw=True, monkeypatch=None):
    """(float32 tiles plus bias, bfloat16 call) of the bfloat16 tiles (forced) on x; on the
    portable C body when not hw."""
    geom = op._plan.geometry(x.shape).geom
    name, _, state = micro_bf16.VARIANT.prepare(geom, op._plan, None)
    assert name == "micro_bf16"
    if not hw:
        monkeypatch.setattr(micro_bf16._cpu, "bf16", lambda level=None: False)
    y32 = micro_bf16.run_f32(x, state, geom, op._plan)
    return y32, micro_bf16._run(x, state, geom, op._plan)


def _check(x, w, b, kw, hw=True, monkeypatch=None):
    nd = x.ndim - 2
    op = convt.ConvTranspose(w, b, method="direct", **kw)
    y32, y16 = _run(op, x, hw, monkeypatch)
    want = _sequential(x, w, b, kw.get("strides", (1,) * nd), kw.get("pads", (0,) * nd),
                       kw.get("dilations", (1,) * nd), y32.shape[2:])
    assert y32.dtype == np.float32 and y16.dtype == BF16 and y16.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(y32), nan)
    np.testing.assert_array_equal(y32.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    np.testing.assert_array_equal(np.isnan(y16.astype(np.float32)), nan)
    np.testing.assert_array_equal(y16.view(np.uint16)[~nan],
                                  want.astype(BF16).view(np.uint16)[~nan])
    return want


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(BF16)


# (x shape, w shape, kwargs): taps partly outside the input (pads), wholly outside (output
# padding: trailing outputs no tap reaches; pads past the kernel), strides 1-4, dilations,
# odd channel counts, inputs of 1-3 positions, more than 16 distinct row masks (a long
# 1-D kernel over a short input: the pool) and 64 taps in a block (a full mask of 64 bits,
# and rows whose own masks are full).
CASES = [
    ((16, 16, 16, 16), (16, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),  # dcgan_g3
    ((3, 7, 9, 11), (7, 20, 3, 3), dict(pads=(1, 1, 1, 1))),
    ((2, 5, 6, 7), (5, 33, 5, 4), dict(strides=(3, 4), pads=(4, 3, 2, 1))),
    ((2, 4, 5, 5), (4, 16, 3, 3), dict(strides=(2, 2), pads=(2, 2, 2, 2),
                                       output_padding=(1, 1))),
    ((1, 3, 1, 2), (3, 16, 5, 5), dict(strides=(2, 1), pads=(1, 2, 1, 1))),
    ((2, 9, 40), (9, 32, 7), dict(strides=(1,), pads=(5,  6), dilations=(2,))),
    ((3, 6, 25), (6, 16, 4), dict(strides=(4,), pads=(3, 3), output_padding=(2,))),
    ((1, 2, 30), (2, 16, 40), dict(pads=(10, 12))),
    ((2, 2, 20), (2, 16, 64), dict(pads=(30, 30))),
    ((2, 4, 5, 4, 6), (4, 16, 3, 2, 3), dict(strides=(1, 2, 3), pads=(1, 1, 2, 1, 0, 1))),
    ((1, 3, 3, 3, 3), (3, 32, 4, 4, 4), dict(strides=(2, 2, 2), pads=(2, 2, 2, 2, 2, 2))),
    # rows reading data for all 64 taps of a block (one run of 64: _bf16_chunk's shifts)
    ((1, 3, 10, 12), (3, 16, 8, 8), dict(pads=(2, 2, 2, 2))),
]


@needs_bf16
@pytest.mark.parametrize("xs, ws, kw", CASES,
                         ids=[f"{len(c[0]) - 2}d-{i}" for i, c in enumerate(CASES)])
def test_border_rows_give_the_sequential_bits(xs, ws, kw, rng):
    x, w = _bf16(rng, xs), _bf16(rng, ws)
    b = _bf16(rng, ws[1])
    _check(x, w, b, kw)


@pytest.mark.parametrize("xs, ws, kw", CASES[1:6] + CASES[7:9] + CASES[11:],
                         ids=[f"{len(c[0]) - 2}d-{i}" for i, c in
                              enumerate(CASES[1:6] + CASES[7:9] + CASES[11:])])
def test_border_rows_on_the_portable_body(xs, ws, kw, rng, monkeypatch):
    """The rows' grouping and kernels of any row count in portable C (any ISA level)."""
    x, w = _bf16(rng, xs), _bf16(rng, ws)
    _check(x, w, _bf16(rng, ws[1]), kw, hw=False, monkeypatch=monkeypatch)


def _special(rng, shape, scale, subnormal=False):
    """bfloat16 values of few significant bits at 2^scale[0] to 2^scale[1] (the sums of x * w
    and the bias land on ties of bfloat16) and, when subnormal, a share of tiny ones whose
    products and sums are float32 subnormals."""
    mant = rng.choice(np.array([1.0, 1.5, 1.0078125, 1.9921875], np.float32), shape)
    exps = rng.integers(scale[0], scale[1] + 1, shape).astype(np.float32)
    v = mant * np.exp2(exps) * rng.choice(np.array([-1, 1], np.float32), shape)
    if subnormal:   # whole pixels (every channel) of 2^-129 to 2^-126: exact products
        tiny = np.broadcast_to(rng.random((shape[0], 1, *shape[2:])) < 0.5, shape)
        v[tiny] *= np.exp2(np.float32(-127))
    return v.astype(BF16)


@pytest.mark.parametrize("hw", [True, False], ids=["vdpbf16ps", "portable"])
@pytest.mark.parametrize("xs, ws, kw", [
    ((2, 4, 8, 40), (4, 32, 1, 1), {}),                      # one phase: runs of 40 rows
    ((2, 4, 8, 20), (4, 48, 2, 2), dict(strides=(2, 2))),    # phase pairs along the last axis
])
def test_write_out_rounds_ties_nan_inf_and_subnormals(xs, ws, kw, hw, rng, monkeypatch):
    """The write-out rounds each float32 sum plus bias to nearest even (ties included),
    overflows to inf, keeps NaN and, on the portable body (no flush to zero), rounds float32
    subnormals as ml_dtypes does: in 16 x 16 blocks on AVX-512, with remainders."""
    if hw and not _cpu.bf16():
        pytest.skip("no AVX512-BF16 on this CPU (or CONVT_ISA caps it)")
    x = _special(rng, xs, (0, 1), subnormal=not hw)
    w = _special(rng, ws, (-1, 0))
    b = _special(rng, (ws[1],), (-9, -6))
    b[::5] = np.float32(3.0e38)     # with a large enough sum, inf on the bias's addition
    b[1::5] = 0                     # tiny sums stay subnormal
    x[:, 0, 1::3, 2::5] = np.float32(3.0e38)
    x[0, 1, 2, 3] = np.nan
    x[1, 2, 5, 17] = np.inf
    want = _check(x, w, b, kw, hw=hw, monkeypatch=monkeypatch)
    bits = want.view(np.uint32)
    fin = np.isfinite(want)
    assert ((bits & 0xFFFF) == 0x8000)[fin].sum() >= 20            # ties
    assert np.isinf(want).any() and np.isnan(want).any()
    if not hw:
        sub = fin & (want != 0) & (np.abs(want) < np.float32(2.0 ** -126))
        assert sub.sum() >= 20                                      # float32 subnormals


@pytest.mark.parametrize("hw", [True, False], ids=["vdpbf16ps", "portable"])
@pytest.mark.parametrize("field, value, words", [("mb", 198, "198"), ("tb", 65, "65")])
def test_micro_conv_refuses_tables_past_the_row_groups(field, value, words, hw, rng):
    """micro_conv refuses bfloat16 tiles of more rows a task (192) or taps a block (64) than
    _rows_outer's stack tables hold, before any thread runs; the blocking at the limits
    runs."""
    x, w = _bf16(rng, (1, 4, 20, 20)), _bf16(rng, (4, 16, 9, 9))
    op = convt.ConvTranspose(w, method="direct", pads=(4, 4, 4, 4))
    geom = op._plan.geometry(x.shape).geom
    _, _, (lay, wp) = micro_bf16.VARIANT.prepare(geom, op._plan, None)
    mode = micro_bf16.bf16_mode(lay.nr, hw and _cpu.bf16())
    with op._plan.workspace.borrow() as arena:
        def run(layout):
            return micro_bf16.run_micro_bf16(x, layout, geom, wp, op._plan.bias_compute, 1,
                                             arena, mode=mode)
        with pytest.raises(ValueError, match=f"at most 192 rows a task and 64 taps a block; "
                                             f"got .*{words}"):
            run(micro_bf16.dataclasses.replace(lay, **{field: value}))
        got = run(micro_bf16.dataclasses.replace(lay, mb=192, tb=64))
        want = run(lay)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
