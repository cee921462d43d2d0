"""Golden fixtures for ``convt.keras``: small random cases run through the real Keras 3.

    /work/fw-venv/bin/python docs/scripts/fixtures_keras.py   # (pip install -e ".[frameworks]")

writes ``tests/fixtures/keras.json.gz``; ``tests/test_keras.py`` replays it without Keras. Each
case stores its shapes, dtype, keyword arguments and a seed: the inputs are
``numpy.random.default_rng(seed).standard_normal`` of the inputs and kernel shapes in that
order (float64, then cast to the case's dtype), and either Keras's output (little-endian
bytes, base64) or its refusal (exception type and message).

Every case runs on two backends, each in its own process: the default TensorFlow backend
decides what is accepted and gives the value; where only TensorFlow's CPU kernels refuse
(dilations on float64 / float16, channels-first data on its Eigen path) the value is the jax
backend's, with ``"derived"`` and TensorFlow's refusal in ``"tf_error"``. Where TensorFlow
refuses and jax computes, ``"jax_accepted"`` says so; where both compute they must agree
(the script counts disagreements: none with Keras 3.15.1). A case that aborts a backend's
process (XLA does, on some refusals) is run again from the next one.
"""
import base64
import gzip
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "keras.json.gz")
N_CASES = 520
MAX_OUTPUT = 600
CPU_LIMITS = ("yet support dilation", "only supports NHWC", "only supports NDHWC")


def arrays(case):
    rng = np.random.default_rng(case["seed"])
    dt = np.dtype(case["dtype"])
    return (rng.standard_normal(case["x_shape"]).astype(dt),
            rng.standard_normal(case["w_shape"]).astype(dt))


def _val(rng, v):
    """An int for every axis, or a tuple (JSON: list) of per-axis values."""
    return int(v[0]) if len(set(v)) == 1 and rng.random() < 0.5 else [int(a) for a in v]


def draw(rng, seed):
    nd = int(rng.integers(1, 4))
    first = rng.random() < 0.3
    n, c_in, c_out = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    kernel = [int(v) for v in rng.integers(1, 5, nd)]
    s = [int(v) for v in rng.integers(1, 4, nd)]
    d = [int(v) for v in rng.integers(1, 3, nd)] if rng.random() < 0.3 else [1] * nd
    i = [int(v) for v in rng.integers(1, 5, nd)]
    padding = str(rng.choice(["valid", "same", "valid", "same", "VALID", "Same"]))
    kwargs = {"strides": _val(rng, s), "padding": padding}
    if rng.random() < 0.5:
        # up to the stride inclusive: the bound is a refusal (valid), and so is op = 0 with
        # an even dilated kernel under same
        kwargs["output_padding"] = _val(rng, [int(rng.integers(0, ss + 1)) for ss in s])
    if d != [1] * nd or rng.random() < 0.2:
        kwargs["dilation_rate"] = _val(rng, d)
    if first:
        kwargs["data_format"] = str(rng.choice(["channels_first", "Channels_First"]))
    elif rng.random() < 0.3:
        kwargs["data_format"] = "channels_last"
    x_shape = [n, c_in, *i] if first else [n, *i, c_in]
    w_shape = [*kernel, c_out, c_in]
    r = rng.random()
    if r < 0.03:
        x_shape[1 if first else -1] += 1                      # channel mismatch
    elif r < 0.04:
        kwargs["padding"] = "full"
    elif r < 0.05:
        kwargs["data_format"] = "NHWC"
    elif r < 0.06 and nd > 1:
        kwargs["strides"] = [2] * (nd - 1)                    # too short
    elif r < 0.07:
        w_shape = w_shape[1:] if nd > 1 else [1, *w_shape]    # kernel rank
    dtype = str(rng.choice(["float64"] * 7 + ["float32"] * 2 + ["float16"]))
    return {"x_shape": x_shape, "w_shape": w_shape, "dtype": dtype, "seed": seed,
            "kwargs": kwargs}


EDGES = [   # (x, w, kwargs)
    ([1, 3, 2], [4, 1, 2], {"strides": 2, "padding": "same", "output_padding": 0}),  # even K
    ([1, 3, 2], [3, 1, 2], {"strides": 2, "padding": "same", "output_padding": 0}),
    ([1, 3, 2], [3, 1, 2], {"strides": 2, "padding": "same", "output_padding": 1}),
    ([1, 3, 2], [3, 1, 2], {"strides": 2, "padding": "same", "output_padding": 2}),
    ([1, 3, 2], [4, 1, 2], {"strides": 2, "padding": "same", "output_padding": 2}),  # op = s
    ([1, 3, 2], [1, 1, 2], {"strides": 3, "padding": "valid"}),          # max(E, s) - E zeros
    ([1, 3, 2], [1, 1, 2], {"strides": 3, "padding": "same"}),           # E < s
    ([1, 3, 2], [2, 1, 2], {"strides": 2, "padding": "valid", "output_padding": 2}),
    ([1, 1, 2], [2, 1, 2], {"strides": 1, "padding": "same", "output_padding": 0}),  # L = 0
    ([1, 3, 3, 2], [3, 3, 1, 2], {"strides": [2], "padding": "same"}),   # one stride, 2-D
    ([1, 3, 3, 2], [3, 3, 1, 2], {"strides": [2, 2, 2], "padding": "same"}),  # one too many
    ([1, 3, 3, 2], [3, 3, 1, 2], {"strides": 2, "output_padding": -1}),
    ([1, 3, 3, 2], [3, 3, 1, 2], {"strides": 0}),
]


def edges(seed):
    return [{"x_shape": x, "w_shape": w, "dtype": "float64", "seed": seed + k + 1,
             "kwargs": kw} for k, (x, w, kw) in enumerate(EDGES)]


def worker(path, start):
    """cases[start:] of ``path`` through keras.ops.conv_transpose on $KERAS_BACKEND."""
    import warnings
    warnings.simplefilter("ignore")
    import keras
    with open(path) as f:
        cases = json.load(f)
    for case in cases[start:]:
        x, w = arrays(case)
        res = _call(keras, x, w, case["kwargs"])
        if "y" in res and x.dtype == np.float32 and keras.config.backend() == "tensorflow":
            # TensorFlow's oneDNN path (float32) returns an empty result for a zero output
            # length without the op's shape check: ask its float64 (Eigen) path
            x64, w64, kw64 = _channels_last(x.astype(np.float64), w.astype(np.float64),
                                            case["kwargs"])
            check = _call(keras, x64, w64, kw64)
            if "error" in check:
                res = dict(check, onednn_accepted=True)
        if "error" in res and any(p in res["error"]["message"] for p in CPU_LIMITS):
            alt = _call(keras, *_channels_last(x, w, case["kwargs"]))
            if "y" in alt:
                alt.update(derived=True, tf_error=res["error"])
                if _first(case["kwargs"]):
                    y = np.moveaxis(_decode(alt).reshape(alt["y_shape"]), -1, 1)
                    alt.update(_encode(y))
            res = alt if "y" in alt else res
        print(json.dumps(res), flush=True)


def _first(kw):
    return str(kw.get("data_format", "channels_last")).lower() == "channels_first"


def _channels_last(x, w, kw):
    """The same computation with channels-last data and dilation 1 (the dilated kernel
    written out with zeros): what TensorFlow's CPU kernels compute for every dtype."""
    kw = dict(kw)
    nd = w.ndim - 2
    d = kw.pop("dilation_rate", 1)
    d = [d] * nd if isinstance(d, int) else list(d)
    if any(v > 1 for v in d) and len(d) == nd:
        ext = [(k - 1) * dd + 1 for k, dd in zip(w.shape[:nd], d)]
        big = np.zeros((*ext, *w.shape[nd:]), w.dtype)
        big[tuple(slice(None, None, dd) for dd in d)] = w
        w = big
    if _first(kw):
        x = np.moveaxis(x, 1, -1)
    kw["data_format"] = "channels_last"
    return x, w, kw


def _encode(y):
    return {"y_shape": list(y.shape), "dtype": y.dtype.name,
            "y": base64.b64encode(y.astype(y.dtype.newbyteorder("<")).tobytes()).decode()}


def _call(keras, x, w, kw):
    try:
        return _encode(np.asarray(keras.ops.conv_transpose(x, w, **kw)))
    except Exception as e:   # Keras's and the backend's own types
        return {"error": {"type": type(e).__name__, "message": str(e).split("\n")[0][:300]}}


def run_backend(path, backend, n):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3",
               JAX_ENABLE_X64="1")   # else jax computes float64 inputs in float32
    out = []
    while len(out) < n:   # restarted after a case that aborts the process (XLA does)
        proc = subprocess.run([sys.executable, __file__, "--worker", path, str(len(out))],
                              env=env, capture_output=True, text=True)
        out += [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        if len(out) < n:
            out.append({"error": {"type": "crash", "message": f"{backend} aborted (exit "
                                  f"{proc.returncode})"}})
    return out


def _decode(res):
    return np.frombuffer(base64.b64decode(res["y"]), np.dtype(res["dtype"]).newbyteorder("<"))


def main():
    rng = np.random.default_rng(20261126)
    cases, seed = [], 0
    while len(cases) < N_CASES:
        seed += 1
        case = draw(rng, seed)
        if int(np.prod(case["x_shape"])) * 9 <= MAX_OUTPUT:
            cases.append(case)
    cases += edges(10 ** 6)
    path = OUT + ".cases.json"
    with open(path, "w") as f:
        json.dump(cases, f)
    tf_res = run_backend(path, "tensorflow", len(cases))
    jax_res = run_backend(path, "jax", len(cases))
    os.remove(path)
    disagree = 0
    for case, t, j in zip(cases, tf_res, jax_res):
        if "y" in t:
            case.update(y_shape=t["y_shape"], y=t["y"])
            if "derived" in t:
                case.update(derived=True, tf_error=t["tf_error"])
            tol = {"float64": 1e-10, "float32": 1e-4}.get(case["dtype"], 2e-2)
            if "y" in j and (j["y_shape"] != t["y_shape"] or not np.allclose(
                    _decode(j).astype(float), _decode(t).astype(float), rtol=tol, atol=tol)):
                disagree += 1
        else:
            case["error"] = t["error"]
            if "onednn_accepted" in t:
                case["onednn_accepted"] = True
            if "y" in j:
                case["jax_accepted"] = True
            elif j["error"]["type"] == "crash":
                case["jax_crashed"] = True
    import keras
    data = {"framework": "keras", "version": keras.__version__, "numpy": np.__version__,
            "backends": ["tensorflow", "jax"], "cases": cases}
    with open(OUT, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(json.dumps(data, separators=(",", ":")).encode())
    print(f"{OUT}: {len(cases)} cases, {sum('error' in c for c in cases)} refusals "
          f"({sum('jax_accepted' in c for c in cases)} computed by jax), "
          f"{sum('derived' in c for c in cases)} derived, {disagree} tf/jax disagreements, "
          f"{os.path.getsize(OUT)} bytes", file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], int(sys.argv[3]))
    else:
        main()
