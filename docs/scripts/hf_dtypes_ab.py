"""hifigan_up3 prepared: f32, f16, bf16 alternating; medians. argv: rounds, layers"""
import sys, time, statistics, numpy as np, ml_dtypes
sys.path.insert(0, "/work/shared/bench"); import workloads, peers, convt
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
names = (sys.argv[2] if len(sys.argv) > 2 else "hifigan_up3").split(",")
dts = [("f32", np.float32), ("f16", np.float16), ("bf16", ml_dtypes.bfloat16)]
for wl in workloads.WORKLOADS:
    if wl["name"] not in names: continue
    kw = peers._convt_kwargs(wl); calls = {}
    for tag, dt in dts:
        x, w, b = workloads.make_inputs(wl, dt)
        op = convt.ConvTranspose(w, b, **kw); op(x); op(x)
        calls[tag] = (lambda op=op, x=x: op(x))
    t = {k: [] for k in calls}
    for _ in range(rounds):
        for k, f in calls.items():
            t0 = time.perf_counter(); f(); t[k].append(time.perf_counter() - t0)
    m = {k: (statistics.quantiles(v, n=5)[0] if "-q" in sys.argv else statistics.median(v)) for k, v in t.items()}
    print(f"{wl['name']:14s} ms f32 {m['f32']*1e3:.3f} f16 {m['f16']*1e3:.3f} bf16 {m['bf16']*1e3:.3f}"
          f" | f32/f16 {m['f32']/m['f16']:.3f} f32/bf16 {m['f32']/m['bf16']:.3f}", flush=True)
