"""convt's float16 prepared call against its own float32 one, in one process.

    python docs/scripts/f16_vs_f32.py [--only a,b] [--calls 21] [--rounds 3] [--parts]

Issue 37's float16 target: each dense layer's float16 call at least 0.9x the speed of
convt's float32 call. Two processes (compare.py) compare runs minutes apart, on a machine
whose same-binary times move by 10-20% between runs; here both plans live in one process and
their calls alternate (float32, float16, float32, ...), so a slow spell falls on both. Per
round and layer: the medians of ``--calls`` calls each, the variant each dtype runs, and
float32 time / float16 time (the speed ratio; below 0.9 misses the target). ``--parts``
also times, alternating likewise, the two conversion passes a float16 call of a variant that
does not round as it stores makes (x widened, ``_half.widen``; the float32 result rounded,
``_half.narrow``), on the layer's own arrays. 2 threads; run it under the exclusive CPU lock.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (puts this checkout's convt first)

import convt  # noqa: E402
from convt._kernels import _half  # noqa: E402

DENSE = ("dcgan_g1,dcgan_g3,unet_up2x2,unet_up3x3_op,hifigan_up1,hifigan_up3,dilated_s1,"
         "grouped_g8")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=DENSE)
    ap.add_argument("--calls", type=int, default=21)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parts", action="store_true")
    a = ap.parse_args()
    print(f"convt {convt.__version__}; medians of {a.calls} alternating calls, 2 threads")
    for name in a.only.split(","):
        shapes = _common.WORKLOADS[name]
        x, w, b = _common.make_inputs(shapes)
        kw = _common.attrs(shapes)
        ops, xs, variants = {}, {}, {}
        for dt in (np.float32, np.float16):
            xs[dt] = x.astype(dt)
            ops[dt] = convt.ConvTranspose(w.astype(dt), None if b is None else b.astype(dt),
                                          workers=2, **kw)
            ops[dt](xs[dt])
            variants[dt] = ops[dt]._plan.geometry(x.shape).variant
        src16 = np.ascontiguousarray(xs[np.float16]).reshape(-1).view(np.uint16)
        wide = np.empty(x.size, np.float32)
        y32 = ops[np.float32](xs[np.float32]).reshape(-1)
        y16 = np.empty(y32.size, np.uint16)
        for r in range(a.rounds):
            t = {k: [] for k in ("f32", "f16", "widen", "narrow")}
            for _ in range(a.calls):
                t["f32"].append(_common.timed(lambda: ops[np.float32](xs[np.float32])))
                t["f16"].append(_common.timed(lambda: ops[np.float16](xs[np.float16])))
                if a.parts:
                    t["widen"].append(_common.timed(lambda: _half.widen(src16, wide, 0, 2)))
                    t["narrow"].append(_common.timed(lambda: _half.narrow(y32, y16, 0, 2)))
            m = {k: float(np.median(v)) * 1e3 for k, v in t.items() if v}
            parts = (f"; widen x {m['widen']:.3f}, narrow y {m['narrow']:.3f} ms"
                     if a.parts else "")
            print(f"{name:15s} round {r}: float32 {m['f32']:.3f} ms ({variants[np.float32]}), "
                  f"float16 {m['f16']:.3f} ms ({variants[np.float16]}), float32 / float16 "
                  f"{m['f32'] / m['f16']:.3f}{parts}")


if __name__ == "__main__":
    main()
