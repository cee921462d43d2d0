"""Both numeric backends against a brute-force oracle written with plain loops.

The oracle is the definition of a transposed convolution, scattered: every input element
x[n, c, i] meets every kernel tap w[c, m, k] and lands on o = i*s + k*d - pads_begin (per axis)
when 0 <= o < O. It knows nothing about conventions: it takes the canonical per-axis
pads_begin / pads_end (either may be negative) and output_padding, so that
O = (I - 1)*s + (K - 1)*d + 1 - pads_begin - pads_end + output_padding.

The cases are drawn from a seeded generator, so the collection is the same on every run. Two
families:
- explicit ``pads`` (ONNX layout [b1, b2, ..., e1, e2, ...], 0..3): the oracle gets them as is;
- ``output_shape`` (pads ignored): total padding T = F + op - output_shape, from -3 to 3, so that
  T < 0 reaches negative canonical pads, which the ONNX ``pads`` keyword may not carry. The
  opset-11 split: SAME_UPPER -> pads_begin = T // 2, otherwise pads_begin = T - T // 2
  (Python floor division, so T = -3 gives pads_begin -1, pads_end -2 under NOTSET).
"""

import itertools

import numpy as np
import pytest

import convt

RTOL = ATOL = 1e-12  # float64, a few hundred products per output at most


def oracle(x, w, b, strides, dilations, pads_begin, pads_end, output_padding, group):
    n_batch, c_in, *in_shape = x.shape
    _, m_per_group, *k_shape = w.shape
    c_in_per_group = c_in // group
    out_shape = [
        (i - 1) * s + (k - 1) * d + 1 - pb - pe + op
        for i, k, s, d, pb, pe, op in zip(
            in_shape, k_shape, strides, dilations, pads_begin, pads_end, output_padding
        )
    ]
    y = np.zeros([n_batch, group * m_per_group] + out_shape)
    for n in range(n_batch):
        for c in range(c_in):
            g = c // c_in_per_group
            for m in range(m_per_group):
                oc = g * m_per_group + m
                for ipos in itertools.product(*[range(i) for i in in_shape]):
                    for kpos in itertools.product(*[range(k) for k in k_shape]):
                        opos = tuple(
                            i * s + k * d - pb
                            for i, k, s, d, pb in zip(ipos, kpos, strides, dilations, pads_begin)
                        )
                        if all(0 <= o < size for o, size in zip(opos, out_shape)):
                            y[(n, oc) + opos] += x[(n, c) + ipos] * w[(c, m) + kpos]
    if b is not None:
        for oc in range(group * m_per_group):
            y[:, oc] += b[oc]
    return y


# ---------------------------------------------------------------------------------------------
# Case generation

N_CASES = 150
SEED = 20240611


def _draw_axis(rng, rank, family):
    """One spatial axis: (I, K, s, d, op, pb, pe, T-or-None). Output length is at least 1."""
    max_len = 3 if rank == 3 else 4
    while True:
        i = int(rng.integers(1, max_len + 1))
        k = int(rng.integers(1, (3 if rank == 3 else 4) + 1))
        s = int(rng.integers(1, 4))
        d = int(rng.integers(1, 4))
        op = int(rng.integers(0, max(s, d)))
        full = (i - 1) * s + (k - 1) * d + 1
        if family == "pads":
            pb, pe = (int(p) for p in rng.integers(0, 4, size=2))
            total = None
        else:
            total = int(rng.integers(-3, 4))
            pb, pe = None, None  # filled in by the caller once auto_pad is known
        natural = full + op - (pb + pe if family == "pads" else total)
        if natural >= 1:
            return i, k, s, d, op, pb, pe, total


def _draw_case(rng, index):
    rank = int(rng.choice([1, 2, 3], p=[0.4, 0.4, 0.2]))
    family = "pads" if rng.random() < 0.65 else "output_shape"
    n_batch = int(rng.choice([0, 1, 2], p=[0.1, 0.5, 0.4]))
    grouping = str(rng.choice(["1", "2", "dw"]))
    if grouping == "1":
        group, c_in, m = 1, int(rng.integers(1, 4)), int(rng.integers(1, 4))
    elif grouping == "2":
        group, c_in, m = 2, 2 * int(rng.integers(1, 3)), int(rng.integers(1, 3))
    else:
        c_in = int(rng.integers(1, 5))
        group, m = c_in, int(rng.integers(1, 3))
    axes = [_draw_axis(rng, rank, family) for _ in range(rank)]
    in_shape, k_shape, strides, dilations, output_padding, pbs, pes, totals = map(list, zip(*axes))
    kwargs = dict(strides=strides, dilations=dilations, output_padding=output_padding, group=group)
    if family == "pads":
        kwargs["pads"] = pbs + pes
        tag = "pads=" + "_".join(map(str, pbs + pes))
    else:
        auto_pad = str(rng.choice(["NOTSET", "SAME_UPPER", "SAME_LOWER"]))
        pbs, pes, out = [], [], []
        for i, k, s, d, op, t in zip(in_shape, k_shape, strides, dilations, output_padding, totals):
            full = (i - 1) * s + (k - 1) * d + 1
            pads_begin = t // 2 if auto_pad == "SAME_UPPER" else t - t // 2
            pbs.append(pads_begin)
            pes.append(t - pads_begin)  # the oracle subtracts output_padding itself
            out.append(full + op - t)
        kwargs.update(auto_pad=auto_pad, output_shape=out)
        tag = f"{auto_pad}-T=" + "_".join(map(str, totals))
    layout = str(rng.choice(["C", "F", "strided"], p=[0.8, 0.1, 0.1]))
    with_bias = bool(rng.random() < 0.5)
    case = dict(
        seed=int(rng.integers(2**31)), n_batch=n_batch, c_in=c_in, m=m, in_shape=in_shape,
        k_shape=k_shape, with_bias=with_bias, layout=layout, kwargs=kwargs,
        oracle_geom=dict(strides=strides, dilations=dilations, pads_begin=pbs, pads_end=pes,
                         output_padding=output_padding, group=group),
    )
    dims = lambda v: "x".join(map(str, v))  # noqa: E731
    case_id = (
        f"{index:03d}-{rank}d-N{n_batch}-G{grouping}-C{c_in}to{group * m}-I{dims(in_shape)}"
        f"-K{dims(k_shape)}-s{dims(strides)}-d{dims(dilations)}-{tag}-op{dims(output_padding)}"
        f"-{'bias' if with_bias else 'nobias'}-{layout}"
    )
    return case_id, case


def _draw_cases():
    rng = np.random.default_rng(SEED)
    return [_draw_case(rng, index) for index in range(N_CASES)]


CASES = _draw_cases()
_EXPECTED = {}


def _arrays(case):
    rng = np.random.default_rng(case["seed"])
    group = case["oracle_geom"]["group"]
    x = rng.standard_normal([case["n_batch"], case["c_in"]] + case["in_shape"])
    w = rng.standard_normal([case["c_in"], case["m"]] + case["k_shape"])
    b = rng.standard_normal(group * case["m"]) if case["with_bias"] else None
    if case["layout"] == "F":
        x = np.asfortranarray(x)
    elif case["layout"] == "strided":
        wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],))
        wide[..., ::2] = x
        x = wide[..., ::2]
    return x, w, b


@pytest.mark.parametrize("method", ["reference", "direct"])
@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[i for i, _ in CASES])
def test_against_oracle(case, method):
    x, w, b = _arrays(case)
    key = id(case)
    if key not in _EXPECTED:
        _EXPECTED[key] = oracle(x, w, b, **case["oracle_geom"])
    expected = _EXPECTED[key]
    x_before = x.copy()
    y = convt.conv_transpose(x, w, b, method=method, **case["kwargs"])
    assert y.dtype == np.float64
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(x, x_before)


def test_case_mix():
    """The draw covers what it claims to: every rank, grouping, batch size and T < 0."""
    ids = [i for i, _ in CASES]
    for part in ["-1d-", "-2d-", "-3d-", "-N0-", "-N1-", "-N2-", "-G1-", "-G2-", "-Gdw-",
                 "-nobias-", "-bias-", "pads", "NOTSET", "SAME_UPPER", "SAME_LOWER"]:
        assert any(part in i for i in ids), part
    negative = [c for _, c in CASES if min(c["oracle_geom"]["pads_begin"]) < 0]
    assert negative
