"""Golden fixtures for ``convt.jax``: small random cases run through the real jax.

    /work/fw-venv/bin/python docs/scripts/fixtures_jax.py   # (pip install -e ".[frameworks]")

writes ``tests/fixtures/jax.json.gz``; ``tests/test_jax.py`` replays it without jax. Each case
stores the shapes, dtype, arguments and a seed: the inputs are
``numpy.random.default_rng(seed).standard_normal`` of the lhs and rhs shapes in that order
(float64, then cast to the case's dtype; jax_enable_x64 is on, so float64 stays float64), and
either jax's output (little-endian bytes, base64) or its refusal (exception type, message).
JSON turns tuples into lists: ``call_kwargs`` turns padding pairs (unless the case says
``pairs_as_lists``) and dimension_numbers back into tuples, for jax here and for convt in the
test. The draw covers 0-3 spatial axes, default and random dimension_numbers (spatial orders
differing between lhs, rhs and out), transpose_kernel, "SAME" / "VALID" / other strings /
(low, high) pairs (negative ones too), use_consistent_padding, rhs_dilation,
preferred_element_type, and some refusals.
"""
import base64
import gzip
import json
import os
import sys

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "jax.json.gz")
N_CASES = 480
MAX_OUTPUT = 600      # elements per stored output: keeps the file small
SPATIAL = "HWD"


def arrays(case):
    """The case's lhs and rhs as NumPy arrays of its dtype."""
    rng = np.random.default_rng(case["seed"])
    dt = np.dtype(case["dtype"])
    return (rng.standard_normal(case["x_shape"]).astype(dt),
            rng.standard_normal(case["w_shape"]).astype(dt))


def call_kwargs(case):
    """The case's keyword arguments with JSON's lists turned back into jax's tuples."""
    kw = dict(case["kwargs"])
    if isinstance(kw["padding"], list) and not case.get("pairs_as_lists"):
        kw["padding"] = tuple(tuple(p) for p in kw["padding"])
    if kw.get("dimension_numbers") is not None:
        kw["dimension_numbers"] = tuple(kw["dimension_numbers"])
    return kw


def _perm(rng, chars):
    return "".join(rng.permutation(list(chars)))


def draw(rng, seed):
    nd = 0 if rng.random() < 0.05 else int(rng.integers(1, 4))   # rank 2: a matrix product
    sp = SPATIAL[:nd]
    c_in, c_out = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    kernel = [int(v) for v in rng.integers(1, 4, nd)]        # in the rhs spec's order
    size = {c: int(v) for c, v in zip(sp, rng.integers(1, 5, nd))}
    if rng.random() < 0.4:
        dn = None
        lhs, rhs, out = "N" + sp + "C", sp + "IO", "N" + sp + "C"
    else:
        lhs, rhs, out = _perm(rng, "NC" + sp), _perm(rng, "OI" + sp), _perm(rng, "NC" + sp)
        dn = [lhs, rhs, out]
    tk = bool(rng.random() < 0.4)
    rsp = [c for c in rhs if c in sp]
    dims = {"N": int(rng.integers(1, 3)), "C": c_in, **size}
    wdims = {"I": c_out if tk else c_in, "O": c_in if tk else c_out,
             **{c: kernel[i] for i, c in enumerate(rsp)}}
    x_shape = [dims[c] for c in lhs]
    w_shape = [wdims[c] for c in rhs]
    strides = [int(v) for v in rng.integers(1, 4, nd)]
    dil = [int(v) for v in rng.integers(1, 3, nd)] if rng.random() < 0.6 else None
    consistent = bool(rng.random() < 0.15)
    r = rng.random()
    if r < 0.3:
        padding = "SAME"
    elif r < 0.55:
        padding = "VALID"
    elif r < 0.62:
        padding = str(rng.choice(["same", "valid", "SAME_LOWER", "same_lower"]))
        if rng.random() < 0.6:
            strides = [1] * nd           # where jax accepts them
    else:
        padding = [[int(v) for v in rng.integers(-3, 4, 2)] for _ in range(nd)]
    r = rng.random()   # one deliberate mistake in some cases
    if r < 0.03:
        w_shape[rhs.index("O" if tk else "I")] += 1     # feature mismatch
    elif r < 0.05:
        strides = strides + [1]                          # length
    elif r < 0.07:
        strides[0] = 0
    elif r < 0.09 and dn:
        dn = [lhs, rhs.replace("O", "X"), out]           # malformed spec
    kwargs = {"strides": strides, "padding": padding, "rhs_dilation": dil,
              "dimension_numbers": dn, "transpose_kernel": tk,
              "use_consistent_padding": consistent}
    dtype = "float32" if rng.random() < 0.2 else "float64"
    if dtype == "float32" and rng.random() < 0.2:
        kwargs["preferred_element_type"] = "float64"
    case = {"x_shape": x_shape, "w_shape": w_shape, "dtype": dtype, "seed": seed,
            "kwargs": kwargs}
    if consistent and isinstance(padding, list) and rng.random() < 0.3:
        case["pairs_as_lists"] = True    # lists, not tuples: jax tells them apart here
    return case


def run(case):
    x, w = arrays(case)
    try:
        y = np.asarray(lax.conv_transpose(x, w, **call_kwargs(case)))
    except (ValueError, TypeError, RuntimeError, AssertionError) as e:
        case["error"] = {"type": type(e).__name__, "message": str(e).split("\n")[0]}
        return case
    case["y_shape"] = list(y.shape)
    case["y"] = base64.b64encode(y.astype(y.dtype.newbyteorder("<")).tobytes()).decode()
    return case


def main():
    rng = np.random.default_rng(20261126)
    cases, seed = [], 0
    while len(cases) < N_CASES:
        seed += 1
        case = run(draw(rng, seed))
        if "y" in case and int(np.prod(case["y_shape"])) > MAX_OUTPUT:
            continue
        cases.append(case)
    data = {"framework": "jax", "version": jax.__version__, "numpy": np.__version__,
            "cases": cases}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(json.dumps(data, separators=(",", ":")).encode())   # mtime 0: reproducible
    refused = sum("error" in c for c in cases)
    print(f"{OUT}: {len(cases)} cases, {refused} refusals, {os.path.getsize(OUT)} bytes",
          file=sys.stderr)


if __name__ == "__main__":
    main()
