"""3-dtype alternation, each call split into cfwino_conv time and the rest (ms, medians)."""
import sys, time, statistics, numpy as np, ml_dtypes
sys.path.insert(0, "/work/shared/bench"); import workloads, peers, convt
import convt._backends.direct.cfwino as cf
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
inner = []
orig = cf.cfwino_conv
def timed(*a, **k):
    t0 = time.perf_counter(); r = orig(*a, **k); inner.append(time.perf_counter() - t0); return r
cf.cfwino_conv = timed
wl = [w for w in workloads.WORKLOADS if w["name"] == "hifigan_up3"][0]
kw = peers._convt_kwargs(wl); calls = {}
DT = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
for tag in (sys.argv[2] if len(sys.argv) > 2 else "f32,f16,bf16").split(","):
    dt = DT[tag]
    x, w, b = workloads.make_inputs(wl, dt)
    op = convt.ConvTranspose(w, b, **kw); op(x)
    calls[tag] = (lambda op=op, x=x: op(x))
t = {k: [] for k in calls}; ti = {k: [] for k in calls}
for _ in range(rounds):
    for k, f in calls.items():
        inner.clear(); t0 = time.perf_counter(); f(); t[k].append(time.perf_counter() - t0)
        ti[k].append(sum(inner))
print("  ".join(f"{k}: {statistics.median(t[k])*1e3:.3f} (kernel {statistics.median(ti[k])*1e3:.3f})" for k in calls))
