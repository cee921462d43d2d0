"""The channels-first Winograd kernel against the channels-last one on 1-D stride-S layers.

    python docs/scripts/cf_strides.py [--calls 60] [--dtype float32]

For 1-D channels-first layers of stride S and 2S taps (HiFi-GAN's and MelGAN's up-sampling
layers, x (1, C_in, W), pads S/2), a ``convt.ConvTranspose`` as planned (the channels-first
kernel of convt/_backends/direct/cfwino.py where it takes the layer) and one planned with that kernel turned
off (the channels-last Winograd kernel, with its transposes of x and y), taking turns call by
call in one process on 2 threads; prints the median of each and their ratio, and whether the
two gave the same bits. A layer whose products' weights pass ``_MAX_WEIGHT_BYTES`` runs the
channels-last kernel both ways (ratio about 1). docs/performance.md ("Channels-first
Winograd") quotes a run.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401  (puts this checkout's convt first)

import convt  # noqa: E402
from convt._backends.direct import cfwino as _cfwino

# (C_in, C_out, W, S): the output is S W long
LAYERS = [(128, 64, 4096, 2), (512, 256, 1024, 2), (256, 128, 2048, 4), (512, 256, 512, 4),
          (128, 64, 2048, 8), (256, 128, 1024, 8), (512, 256, 256, 8)]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    a = ap.parse_args()
    print(f"convt {convt.__version__}, {a.dtype}, 2 threads, medians of {a.calls} calls each")
    for ci, co, width, s in LAYERS:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((1, ci, width)).astype(a.dtype)
        w = rng.standard_normal((ci, co, 2 * s)).astype(a.dtype)
        kw = dict(strides=(s,), pads=(s // 2, s // 2), workers=2)
        cf = convt.ConvTranspose(w, **kw)
        kept = _cfwino.cf_layout
        _cfwino.cf_layout = lambda *args: None
        try:
            nxc = convt.ConvTranspose(w, **kw)
            y_nxc = nxc(x)
        finally:
            _cfwino.cf_layout = kept
        y_cf = cf(x)
        runs = cf._plan.geometry(x.shape).runner is _cfwino._run_cf
        times = {cf: [], nxc: []}
        for i in range(a.calls):
            for op in (cf, nxc) if i % 2 else (nxc, cf):
                t = time.perf_counter()
                op(x)
                times[op].append(time.perf_counter() - t)
        t_cf, t_nxc = (float(np.median(times[op])) * 1e3 for op in (cf, nxc))
        print(f"{ci:4d} -> {co:4d}  W {width:5d}  S {s}:  channels-first kernel "
              f"{'yes' if runs else 'no '}  {t_cf:7.3f} ms  channels-last {t_nxc:7.3f} ms  "
              f"ratio {t_nxc / t_cf:5.2f}  same bits {np.array_equal(y_cf, y_nxc)}")


if __name__ == "__main__":
    main()
