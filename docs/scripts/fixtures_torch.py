"""Golden fixtures for ``convt.torch``: small random cases run through the real PyTorch.

    /work/fw-venv/bin/python docs/scripts/fixtures_torch.py   # (pip install -e ".[frameworks]")

writes ``tests/fixtures/torch.json.gz``; ``tests/test_torch.py`` replays it without torch. Each
case stores its function, shapes, dtype, keyword arguments and a seed: the inputs are
``numpy.random.default_rng(seed).standard_normal`` of the input, weight and bias shapes in that
order (float64, then cast to the case's dtype), and either torch's output (little-endian bytes,
base64) or its refusal (exception type and message). Attributes are drawn so that about a
fifth of the cases are ones torch refuses (output_padding at the bound, padding that leaves
no output, groups that do not divide, mismatched channels or bias, bad ranks and lengths).
"""
import base64
import gzip
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "torch.json.gz")
N_CASES = 500
MAX_OUTPUT = 600      # elements per stored output: keeps the file small


def arrays(case):
    """The case's input, weight and bias (None) as NumPy arrays of its dtype."""
    rng = np.random.default_rng(case["seed"])
    dt = np.dtype(case["dtype"])
    x = rng.standard_normal(case["x_shape"]).astype(dt)
    w = rng.standard_normal(case["w_shape"]).astype(dt)
    b = None if case["b_shape"] is None else rng.standard_normal(case["b_shape"]).astype(dt)
    return x, w, b


def _arg(rng, nd, lo, hi):
    """An int, a 1-tuple or an nd-tuple, as torch takes them (JSON: lists)."""
    r = rng.random()
    if r < 0.3:
        return int(rng.integers(lo, hi))
    if r < 0.4:
        return [int(rng.integers(lo, hi))]
    return [int(v) for v in rng.integers(lo, hi, nd)]


def _per_axis(v, nd):
    return [v] * nd if isinstance(v, int) else (v * nd if len(v) == 1 else v)


def draw(rng, seed):
    nd = int(rng.integers(1, 4))
    groups = int(rng.choice([1, 1, 1, 2, 3]))
    c_in = groups * int(rng.integers(1, 3))
    c_out_g = int(rng.integers(1, 3))
    kernel = [int(v) for v in rng.integers(1, 4, nd)]
    stride, dilation = _arg(rng, nd, 1, 4), _arg(rng, nd, 1, 3)
    s, d = _per_axis(stride, nd), _per_axis(dilation, nd)
    # output_padding up to max(s, d) inclusive: the bound itself is a refusal
    op = [int(rng.integers(0, max(a, b) + (rng.random() < 0.1))) for a, b in zip(s, d)]
    # mostly within the dilated kernel's reach (a larger padding leaves no output)
    reach = [(k - 1) * dd // 2 + 1 for k, dd in zip(kernel, d)]
    padding = ([int(rng.integers(0, r + 1)) for r in reach] if rng.random() < 0.85
               else _arg(rng, nd, 0, 4))
    unbatched = rng.random() < 0.2
    x_shape = [c_in] + [int(v) for v in rng.integers(1, 5, nd)]
    if not unbatched:
        x_shape = [int(rng.integers(1, 3))] + x_shape
    w_shape = [c_in, c_out_g] + kernel
    b_shape = [c_out_g * groups] if rng.random() < 0.6 else None
    r = rng.random()   # one deliberate mistake in some cases
    if r < 0.04:
        groups += 1                               # groups not dividing / too many
    elif r < 0.07:
        x_shape[-nd - 1] += 1                     # channel mismatch
    elif r < 0.09 and b_shape:
        b_shape[0] += 1                           # bias length
    elif r < 0.11:
        stride = [1] * (nd + 1)                   # wrong length
    elif r < 0.13:
        padding = -1                              # negative
    elif r < 0.14:
        dilation = 0
    kwargs = {"stride": stride, "padding": padding, "output_padding": op, "groups": groups,
              "dilation": dilation}
    dtype = "float32" if rng.random() < 0.2 else "float64"
    return {"fn": f"conv_transpose{nd}d", "x_shape": x_shape, "w_shape": w_shape,
            "b_shape": b_shape, "dtype": dtype, "seed": seed, "kwargs": kwargs}


# Hand-picked edges the random draw rarely reaches: (fn, x, w, b, kwargs).
EDGES = [
    ("conv_transpose1d", [2, 5], [2, 3, 3], None, {"stride": 2, "output_padding": 2,
                                                  "dilation": 3}),   # op = s < d: accepted
    ("conv_transpose1d", [1, 2, 5], [2, 3, 3], None, {"stride": 2, "output_padding": 2,
                                                     "dilation": 2}),  # op = s = d: refused
    ("conv_transpose1d", [1, 2, 5], [2, 3, 3], [3], {"padding": 3}),    # L = 1
    ("conv_transpose1d", [1, 2, 1], [2, 3, 2], None, {"padding": 1}),   # L = 0: refused
    ("conv_transpose2d", [0, 2, 3, 3], [2, 3, 2, 2], [3], {"stride": 2}),   # empty batch
    ("conv_transpose2d", [2, 3, 3], [2, 3, 2, 2], None, {}),           # unbatched 2-D
    ("conv_transpose2d", [3, 3], [2, 3, 2, 2], None, {}),              # input rank
    ("conv_transpose2d", [2, 3, 3], [2, 3, 2], None, {}),              # weight rank
    ("conv_transpose3d", [4, 2, 2, 3], [4, 1, 2, 1, 2], [2], {"groups": 2, "stride": [1, 2, 3]}),
    ("conv_transpose2d", [1, 3, 4, 4], [3, 2, 3, 3], None, {"groups": 2}),   # 2 does not divide 3
    ("conv_transpose2d", [1, 2, 4, 4], [2, 2, 3, 3], None, {"stride": [2, 2, 2]}),
    ("conv_transpose2d", [1, 2, 4, 4], [2, 2, 3, 3], None, {"stride": 0}),
    ("conv_transpose2d", [1, 2, 4, 4], [2, 2, 3, 3], None, {"output_padding": -1}),
    ("conv_transpose2d", [1, 2, 4, 4], [2, 2, 3, 3], None, {"groups": 0}),
    ("conv_transpose2d", [1, 2, 4, 4], [2, 2, 3, 3], None, {"stride": [3, 1],
                                                           "output_padding": [2, 0]}),
    ("conv_transpose2d", [1, 2, 4, 4], [2, 2, 3, 3], None, {"stride": [3, 1],
                                                           "output_padding": [0, 1]}),
]


def edges(seed):
    out = []
    for fn, x, w, b, kwargs in EDGES:
        seed += 1
        out.append({"fn": fn, "x_shape": x, "w_shape": w, "b_shape": b, "dtype": "float64",
                    "seed": seed, "kwargs": kwargs})
    return out


def run(case):
    x, w, b = arrays(case)
    fn = getattr(F, case["fn"])
    try:
        y = fn(torch.from_numpy(x), torch.from_numpy(w),
               None if b is None else torch.from_numpy(b), **case["kwargs"])
    except (RuntimeError, TypeError, ValueError) as e:
        case["error"] = {"type": type(e).__name__, "message": str(e).split("\n")[0]}
        return case
    y = y.numpy()
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
    cases += [run(c) for c in edges(10 ** 6)]
    data = {"framework": "torch", "version": torch.__version__,
            "numpy": np.__version__, "cases": cases}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(json.dumps(data, separators=(",", ":")).encode())   # mtime 0: reproducible
    refused = sum("error" in c for c in cases)
    print(f"{OUT}: {len(cases)} cases, {refused} refusals, {os.path.getsize(OUT)} bytes",
          file=sys.stderr)


if __name__ == "__main__":
    main()
