"""Golden fixtures for ``convt.tensorflow``: small random cases run through the real TensorFlow.

    /work/fw-venv/bin/python docs/scripts/fixtures_tensorflow.py   # (pip install -e ".[frameworks]")

writes ``tests/fixtures/tensorflow.json.gz``; ``tests/test_tensorflow.py`` replays it without
TensorFlow. Each case stores its function, shapes, dtype, keyword arguments and a seed: the
inputs are ``numpy.random.default_rng(seed).standard_normal`` of the input and filters shapes
in that order (float64, then cast to the case's dtype), and either TensorFlow's output
(little-endian bytes, base64) or its refusal (exception type and message).

TensorFlow's CPU kernels refuse some calls the op defines: dilations > 1 on its Eigen path
(float64, float16), channels-first data there, explicit padding with channels-first data.
For those the case stores the op's value computed by TensorFlow another way -- channels-last
data, the dilated filter written out with zeros (dilations 1) -- with ``"derived"`` and
TensorFlow's own refusal in ``"tf_error"``. Its oneDNN path (float32, bfloat16) skips the op's
shape check and returns values for output lengths the op refuses: such a case stores the
float64 (Eigen path) refusal, with ``"onednn_accepted"``. A call is run in a worker process that a crash
(TensorFlow aborts on some malformed output_shape lengths) does not take down: the case is
then stored as a refusal of type "crash".
"""
import base64
import gzip
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "tensorflow.json.gz")
N_CASES = 520
MAX_OUTPUT = 600      # elements per stored output: keeps the file small
# TensorFlow's CPU-kernel refusals of calls the op defines (conv_grad_input_ops.cc,
# conv_grad_ops_3d.cc): these cases store the op's value computed another way
CPU_LIMITS = ("yet support dilation", "only supports NHWC", "only supports NDHWC")
FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}


def arrays(case):
    """The case's input and filters as NumPy arrays of its dtype."""
    rng = np.random.default_rng(case["seed"])
    dt = case["dtype"]
    if dt == "bfloat16":
        import ml_dtypes
        dt = ml_dtypes.bfloat16
    x = rng.standard_normal(case["x_shape"]).astype(dt)
    w = rng.standard_normal(case["w_shape"]).astype(dt)
    return x, w


def _seq(rng, v, nd, first):
    """strides / dilations as TensorFlow takes them: an int, [v], nd values or nd + 2."""
    r = rng.random()
    if r < 0.3 and len(set(v)) == 1:
        return int(v[0])
    if r < 0.4 and len(set(v)) == 1:
        return [int(v[0])]
    if r < 0.55:
        return [1, 1, *v] if first else [1, *v, 1]
    return [int(a) for a in v]


def draw(rng, seed):
    nd = int(rng.integers(1, 4))
    fn = str(rng.choice(["conv_transpose", f"conv{nd}d_transpose"]))
    first = rng.random() < 0.3
    n, c_in, c_out = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    kernel = [int(v) for v in rng.integers(1, 4, nd)]
    s = [int(v) for v in rng.integers(1, 4, nd)]
    d = [int(v) for v in rng.integers(1, 3, nd)] if rng.random() < 0.3 else [1] * nd
    i = [int(v) for v in rng.integers(1, 5, nd)]
    ext = [(k - 1) * dd + 1 for k, dd in zip(kernel, d)]
    full = [(ii - 1) * ss + e for ii, ss, e in zip(i, s, ext)]
    mode = str(rng.choice(["SAME", "VALID", "EXPLICIT"] if nd == 2 else ["SAME", "VALID"]))
    pads = [[int(a), int(b)] for a, b in rng.integers(0, 3, (nd, 2))]
    lengths = []
    for a in range(nd):
        if mode == "SAME":
            lo, hi = (i[a] - 1) * s[a] + 1, i[a] * s[a]
        else:
            extra = sum(pads[a]) if mode == "EXPLICIT" else 0
            lo, hi = full[a] - extra, full[a] - extra + s[a] - 1
        length = int(rng.integers(lo, hi + 1))
        if rng.random() < 0.05:
            length = int(rng.choice([lo - 1, hi + 1]))     # just outside: a refusal
        lengths.append(max(length, 1))
    out_shape = [n, c_out, *lengths] if first else [n, *lengths, c_out]
    padding = mode
    if mode == "EXPLICIT":
        padding = [[0, 0], [0, 0], *pads] if first else [[0, 0], *pads, [0, 0]]
    kwargs = {"output_shape": out_shape, "strides": _seq(rng, s, nd, first),
              "padding": padding}
    if d != [1] * nd or rng.random() < 0.2:
        kwargs["dilations"] = _seq(rng, d, nd, first)
    if first or rng.random() < 0.3:
        kwargs["data_format"] = FORMATS[nd][int(first)]
    x_shape = [n, c_in, *i] if first else [n, *i, c_in]
    w_shape = [*kernel, c_out, c_in]
    r = rng.random()   # one deliberate mistake in some cases
    if r < 0.03:
        x_shape[1 if first else -1] += 1                           # channel mismatch
    elif r < 0.05:
        out_shape[1 if first else -1] *= 2                        # groups
    elif r < 0.07:
        out_shape[0] += 1                                         # batch mismatch
    elif r < 0.08:
        kwargs["padding"] = mode.lower() if mode != "EXPLICIT" else "EXPLICIT"
    elif r < 0.09:
        kwargs["strides"] = [2] + [1] * (nd + 1)                  # batch stride
    elif r < 0.10:
        kwargs["strides"] = [1] * (nd + 1)                        # wrong length
    elif r < 0.11:
        kwargs["strides"] = 0
    elif r < 0.12 and mode == "EXPLICIT":
        kwargs["padding"][0] = [1, 0]                             # batch padding
    elif r < 0.13 and mode == "EXPLICIT":
        kwargs["padding"][-2 if not first else -1] = [-1, 1]      # negative padding
    elif r < 0.14:
        kwargs["data_format"] = FORMATS[nd % 3 + 1][0]           # another rank's format
    dtype = str(rng.choice(["float64"] * 7 + ["float32"] * 2 + ["float16"]))
    return {"fn": fn, "x_shape": x_shape, "w_shape": w_shape, "dtype": dtype, "seed": seed,
            "kwargs": kwargs}


# Hand-picked edges the random draw rarely reaches: (fn, x, w, dtype, kwargs).
EDGES = [
    ("conv2d_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float64",
     {"output_shape": [6, 6], "strides": 2}),                     # spatial output_shape only
    ("conv_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float64",
     {"output_shape": [6, 6], "strides": 2}),                     # refused by conv_transpose
    ("conv2d_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float64",
     {"output_shape": [1, 6, 6], "strides": 2}),                  # length 3: refused
    ("conv2d_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float32",
     {"output_shape": [1, 6, 6], "strides": 2}),                  # oneDNN path: aborts
    ("conv1d_transpose", [1, 3, 2], [3, 4, 2], "float64",
     {"output_shape": [1, 5, 4], "strides": 2,
      "padding": [[0, 0], [1, 1], [0, 0]]}),                      # explicit pairs in 1-D
    ("conv3d_transpose", [1, 1, 3, 3, 2], [1, 3, 3, 4, 2], "float64",
     {"output_shape": [1, 1, 5, 5, 4], "strides": 2, "padding": "EXPLICIT"}),
    ("conv2d_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float64",
     {"output_shape": [1, 6, 6, 4], "strides": 2, "padding": "EXPLICIT"}),
    ("conv2d_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float64",
     {"output_shape": [1, 5, 5, 4], "strides": 2, "padding": [[1, 1], [1, 1]]}),
    ("conv2d_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float64",
     {"output_shape": [1, 6, 6, 4], "strides": 2, "data_format": "nhwc"}),
    ("conv1d_transpose", [1, 3, 2], [3, 4, 2], "float64",
     {"output_shape": [1, 6, 4], "strides": 2, "data_format": "NHWC"}),
    ("conv2d_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float32",
     {"output_shape": [1, 12, 12, 4], "strides": 4}),            # L > F with SAME
    ("conv2d_transpose", [1, 3, 3, 2], [1, 1, 4, 2], "float64",
     {"output_shape": [1, 9, 9, 4], "strides": 3, "padding": "VALID"}),   # zeros at the end
    ("conv2d_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float32",
     {"output_shape": [1, 6, 6, 4], "strides": 2, "dilations": 2}),   # oneDNN: s and d > 1
    ("conv2d_transpose", [2, 3, 3, 2], [3, 3, 4, 2], "float64",
     {"output_shape": [1, 6, 6, 4], "strides": 2}),              # batch mismatch
    ("conv_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float64",
     {"output_shape": [1, 6, 6, 4], "strides": [2, 2, 2]}),      # strides length 3
    ("conv_transpose", [1, 3, 3, 2], [3, 3, 4, 2], "float64",
     {"output_shape": [1, 3, 3, 4], "strides": None}),           # strides None: 1
]


def edges(seed):
    out = []
    for fn, x, w, dt, kwargs in EDGES:
        seed += 1
        out.append({"fn": fn, "x_shape": x, "w_shape": w, "dtype": dt, "seed": seed,
                    "kwargs": kwargs})
    return out


def _channels_last(case):
    """The same computation with channels-last data and dilations 1 (the dilated filters
    written out): what TensorFlow's CPU kernels compute whatever the dtype."""
    kw = dict(case["kwargs"])
    nd = len(case["w_shape"]) - 2
    fmt = kw.pop("data_format", None)
    first = fmt is not None and fmt.startswith("NC")
    x, w = arrays(case)
    dil = kw.pop("dilations", None)
    spatial = _spatial(dil, nd, first)
    if any(v > 1 for v in spatial):
        ext = [(k - 1) * d + 1 for k, d in zip(w.shape[:nd], spatial)]
        big = np.zeros((*ext, *w.shape[nd:]), w.dtype)
        big[tuple(slice(None, None, d) for d in spatial)] = w
        w = big
    if first:
        x = np.moveaxis(x, 1, -1)
        os_ = list(kw["output_shape"])
        kw["output_shape"] = os_ if len(os_) == 2 else [os_[0], *os_[2:], os_[1]]
        st = kw["strides"]
        if isinstance(st, (list, tuple)) and len(st) == nd + 2:
            kw["strides"] = [st[0], *st[2:], st[1]]
        if isinstance(kw.get("padding"), list):
            p = kw["padding"]
            kw["padding"] = [p[0], *p[2:], p[1]]
    return x, w, kw, first


def _spatial(v, nd, first):
    if v is None:
        return [1] * nd
    v = [v] if isinstance(v, int) else list(v)
    if len(v) == 1:
        return v * nd
    if len(v) == nd + 2:
        return v[2:] if first else v[1:-1]
    return v


def _call(tf, case, x, w, kw):
    fn = getattr(tf.nn, case["fn"])
    try:
        y = fn(x, w, **kw)
    except Exception as e:   # TensorFlow's own types: InvalidArgumentError, ValueError, ...
        return None, {"type": type(e).__name__, "message": str(e).split("\n")[0][:300]}
    return np.asarray(y), None


def run(tf, case):
    x, w = arrays(case)
    y, err = _call(tf, case, x, w, case["kwargs"])
    if err is not None and not any(p in err["message"] for p in CPU_LIMITS):
        case["error"] = err
        return case
    if err is None and case["dtype"] in ("float32", "bfloat16"):
        # the oneDNN path (float32, bfloat16) skips the op's shape check: ask the Eigen path
        x2, w2, kw2, _ = _channels_last(case)
        _, err64 = _call(tf, case, x2.astype(np.float64), w2.astype(np.float64), kw2)
        if err64 is not None:
            case["error"], case["onednn_accepted"] = err64, True
            return case
    if err is not None:
        try:
            x2, w2, kw2, first = _channels_last(case)
        except Exception:   # malformed arguments: TensorFlow's refusal stands
            y2 = None
        else:
            y2, _ = _call(tf, case, x2, w2, kw2)
        if y2 is None:
            case["error"] = err
            return case
        y = np.moveaxis(y2, -1, 1) if first else y2
        case["derived"], case["tf_error"] = True, err
    case["y_shape"] = list(y.shape)
    case["y"] = base64.b64encode(y.astype(y.dtype.newbyteorder("<")).tobytes()).decode()
    return case


def worker(path, start):
    """Run cases[start:] from ``path``, one JSON line each on stdout."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    with open(path) as f:
        cases = json.load(f)
    for case in cases[start:]:
        print(json.dumps(run(tf, case)), flush=True)


def run_all(cases):
    """Every case through `worker`, restarted after the case that crashed it."""
    path = OUT + ".cases.json"
    with open(path, "w") as f:
        json.dump(cases, f)
    done = []
    while len(done) < len(cases):
        proc = subprocess.run([sys.executable, __file__, "--worker", path, str(len(done))],
                              capture_output=True, text=True)
        done += [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        if len(done) < len(cases):
            case = cases[len(done)]
            case["error"] = {"type": "crash", "message": f"TensorFlow aborted (exit "
                             f"{proc.returncode})"}
            done.append(case)
    os.remove(path)
    return done


def main():
    rng = np.random.default_rng(20261126)
    cases, seed = [], 0
    while len(cases) < N_CASES:
        seed += 1
        case = draw(rng, seed)
        if int(np.prod(case["kwargs"]["output_shape"])) <= MAX_OUTPUT:
            cases.append(case)
    cases += edges(10 ** 6)
    cases = run_all(cases)
    import tensorflow as tf
    data = {"framework": "tensorflow", "version": tf.__version__, "numpy": np.__version__,
            "cases": cases}
    with open(OUT, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(json.dumps(data, separators=(",", ":")).encode())   # mtime 0: reproducible
    refused = sum("error" in c for c in cases)
    derived = sum("derived" in c for c in cases)
    print(f"{OUT}: {len(cases)} cases, {refused} refusals, {derived} derived, "
          f"{os.path.getsize(OUT)} bytes", file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], int(sys.argv[3]))
    else:
        main()
