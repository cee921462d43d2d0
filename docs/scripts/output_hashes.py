"""SHA-256 of convt's outputs on the harness's 14 workloads and the ONNX spec examples.

    python docs/scripts/output_hashes.py > before.txt      # one checkout
    python docs/scripts/output_hashes.py > after.txt       # another
    diff before.txt after.txt                              # a refactor must print nothing

Each workload is run one-shot (``convt.conv_transpose``) and prepared (``convt.ConvTranspose``)
in float32 and float64, with ``method="auto"`` and with each backend forced, so a change that
moves any output bit, or moves a layer from one backend to another, shows as a changed line.
``CONVT_ROOT`` names the checkout to import (default: this one).
"""
import hashlib
import os
import sys

import numpy as np

ROOT = os.environ.get("CONVT_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import convt  # noqa: E402
from _spec_data import CASES  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "asv_bench", "benchmarks"))
from common import WORKLOADS, attrs, make_inputs  # noqa: E402


def digest(y):
    y = np.ascontiguousarray(y)
    return hashlib.sha256(str((y.shape, y.dtype.str)).encode() + y.tobytes()).hexdigest()[:16]


def main():
    for name, shapes in WORKLOADS.items():
        for dtype in (np.float32, np.float64):
            x, w, b = make_inputs(shapes, dtype)
            kw = attrs(shapes)
            for method in ("auto", "direct", "fft"):
                y1 = convt.conv_transpose(x, w, b, method=method, **kw)
                y2 = convt.ConvTranspose(w, b, method=method, **kw)(x)
                print(f"{name:20s} {np.dtype(dtype).name:8s} {method:6s} "
                      f"one-shot {digest(y1)} prepared {digest(y2)}")
        x, w, b = make_inputs(shapes, np.float16)
        y = convt.ConvTranspose(w, b, **attrs(shapes))(x)
        print(f"{name:20s} float16  auto   prepared {digest(y)}")
    for case in CASES:
        y = convt.onnx.conv_transpose(case["x"], case["W"], case["B"], **case["attrs"])
        print(f"spec {case['name']:40s} {digest(y)} equal={np.array_equal(y, case['y'])}")


if __name__ == "__main__":
    main()
