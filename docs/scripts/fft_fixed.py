"""The FFT backend's fixed cost (docs/fft.md, "Fixed cost"): small calls of ranks 1-3, FFT and
direct, prepared and one-shot (best of 60, 2 workers), beside the cost model's priced work
(var) and its FFT estimates (est), written to a JSON file for fitting ``fft_call_s``,
``fft_axis_call_s`` and ``fft_one_shot_axis_s``.

Usage: ``python docs/scripts/fft_fixed.py out.json`` (under the exclusive timing lock).
"""
import json
import sys
import time

import numpy as np

import convt
from convt._backends.fft import BACKEND as FB
from convt._backends.fft import FFT_MEMORY_BUDGET
from convt._backends.fft_cost import COST_UNITS as _COST_UNITS, layout_seconds
from convt._dispatch.constants import current
rng = np.random.default_rng(1)
cases = [((1,1,32),(1,1,5),1), ((1,4,64),(4,4,9),1), ((2,3,40),(3,3,7),1), ((1,8,100),(8,8,21),1),
         ((1,4,64),(4,1,9),4), ((2,8,200),(8,2,15),4), ((1,16,300),(16,16,31),1), ((3,6,90),(6,2,11),3),
         ((1,1,8,8),(1,1,3,3),1), ((1,4,16,16),(4,4,5,5),1), ((1,8,12,12),(8,2,5,5),4), ((2,4,20,20),(4,4,7,7),1),
         ((1,1,4,4,4),(1,1,3,3,3),1), ((1,2,8,8,8),(2,2,3,3,3),1), ((1,4,6,6,6),(4,1,3,3,3),4)]
def best(f, n=60):
    ts=[]
    for _ in range(n):
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    ts.sort(); return ts[0]
c = current(); rows=[]
for xs, ws, g in cases:
    x = rng.standard_normal(xs).astype(np.float32); w = rng.standard_normal(ws).astype(np.float32)
    r = {}
    for m in ("fft", "direct"):
        op = convt.ConvTranspose(w, method=m, workers=2, group=g); op(x)
        f1 = lambda: op(x); f2 = lambda: convt.conv_transpose(x, w, method=m, workers=2, group=g)
        for _ in range(5): f1(); f2()
        r[m] = (best(f1), best(f2))
    geom = convt.explain(x, w, method="fft", workers=2, group=g).geometry
    rates = tuple(c[k] for k in _COST_UNITS)
    pp = layout_seconds(geom, np.dtype(np.float32), False, rates, FFT_MEMORY_BUDGET)
    po = layout_seconds(geom, np.dtype(np.float32), True, rates, FFT_MEMORY_BUDGET)
    row = dict(case=str((xs, ws, g)), nd=len(xs)-2, fp=r["fft"][0], fo=r["fft"][1], dp=r["direct"][0], do=r["direct"][1],
               var_p=pp[0], var_o=po[0] + po[1], est_p=FB.estimate(geom, np.float32, 2, c),
               est_o=FB.estimate(geom, np.float32, 2, c, one_shot=True))
    rows.append(row)
    print(f"{row['case']:42s} nd {row['nd']} fft {row['fp']*1e6:6.1f} {row['fo']*1e6:6.1f} direct {row['dp']*1e6:6.1f} {row['do']*1e6:6.1f} var {row['var_p']*1e6:6.1f} {row['var_o']*1e6:6.1f} est {row['est_p']*1e6:6.1f} {row['est_o']*1e6:6.1f}")
json.dump(rows, open(sys.argv[1], "w"))
