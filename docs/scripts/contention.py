"""convt's calls next to ONNX Runtime's spinning worker: per-call times, three conditions.

    ../peers-venv/bin/python docs/scripts/contention.py [--rounds 5] [--calls 20] [--layers ...]

Needs onnxruntime and onnx (the peer harness's environment, ``../shared/bench/README.md``).
After each ``InferenceSession.run``, ONNX Runtime's intra-op worker spins, waiting for more
work, unless the session sets ``session.intra_op.allow_spinning`` to "0". This script times
convt's prepared calls on the peer harness's layers (``asv_bench/benchmarks/common.py``), on
2 threads and on 1, in three conditions:

- ``quiet``: calls back to back, no ONNX Runtime call;
- ``after_ort``: each call right after one run of a small ONNX Runtime session (2 intra-op
  threads, as the harness builds its sessions) with ONNX Runtime's defaults;
- ``after_ort_nospin``: the same with ``allow_spinning`` "0".

Each condition runs in blocks of ``--calls`` calls, a quarter-second pause before each block
(the spinning outlasts a call by tens of ms, so blocks taken in turns call by call would
overlap), the three blocks in a rotated order each round. Prints the median and the 75th /
90th percentiles (ms) per layer, thread count and condition. README ("Performance") quotes
a run.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (puts this checkout's convt first)

import convt  # noqa: E402

CONDITIONS = ("quiet", "after_ort", "after_ort_nospin")


def ort_session(spinning):
    """A 2-thread ONNX Runtime session of a small ConvTranspose (64 -> 32, 1024 wide)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).standard_normal((64, 32, 4), dtype=np.float32)
    node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=[2], pads=[1, 1])
    graph = helper.make_graph(
        [node], "ct", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 64, 1024])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 32, 2048])],
        initializer=[numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    if not spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    x = np.ones((1, 64, 1024), np.float32)
    return lambda: sess.run(None, {"X": x})


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20, help="timed calls per block")
    ap.add_argument("--layers", default="hifigan_up3,dilated_s1,dcgan_g1,depthwise_bilinear")
    a = ap.parse_args()
    before = {"quiet": lambda: None, "after_ort": ort_session(True),
              "after_ort_nospin": ort_session(False)}
    for f in before.values():
        f()
    print(f"convt {convt.__version__}; {a.rounds} rounds of {a.calls} calls per row; "
          "ms: median, p75, p90")
    for name in [n for n in a.layers.split(",") if n]:
        if name not in _common.WORKLOADS:
            raise SystemExit(f"unknown layer {name!r}; known: {', '.join(_common.WORKLOADS)}")
        x, w, b = _common.make_inputs(_common.WORKLOADS[name])
        for workers in (2, 1):
            op = convt.ConvTranspose(w, b, workers=workers, **_common.attrs(
                _common.WORKLOADS[name]))
            out = op(x)
            times = {c: [] for c in CONDITIONS}
            for r in range(a.rounds):
                for c in CONDITIONS[r % 3:] + CONDITIONS[:r % 3]:   # rotated each round
                    time.sleep(0.25)   # ONNX Runtime's worker stops spinning (~50 ms)
                    for i in range(a.calls):
                        before[c]()
                        t = time.perf_counter()
                        op(x, out=out)
                        times[c].append(time.perf_counter() - t)
            for c in CONDITIONS:
                ms = np.array(times[c]) * 1e3
                p50, p75, p90 = np.percentile(ms, (50, 75, 90))
                print(f"{name:20s} {workers} thread{'s' if workers > 1 else ' '}  "
                      f"{c:17s} {p50:8.3f} {p75:8.3f} {p90:8.3f}", flush=True)


if __name__ == "__main__":
    main()
