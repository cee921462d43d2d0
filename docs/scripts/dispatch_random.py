"""The dispatcher's random sweep: geometries drawn from a seed, every backend forced.

    python docs/scripts/dispatch_random.py --seed 1 [--n 200] [--json F] [--out F.md]
    python docs/scripts/dispatch_random.py --render F.json [F2.json ...] --out F.md
    python docs/scripts/dispatch_random.py --fit F.json [F2.json ...] [--check G.json ...]

Issue 38's space: ranks 1-3, kernels 1-511 (long ones in 1-D), strides 1-4, dilations 1-3,
channels 1-256, groups (dense, grouped, depthwise), batch 1-4, float32 and float64, sizes
bounded so that one call of either backend takes well under a second. Per geometry the forced
backends ("direct", "fft") are timed interleaved, best-of a few rounds, as prepared operators
and, in a group of their own, as one-shot calls (``convt.conv_transpose``); "auto" is asked
what it picks for each call kind (the cost model's pick, ``convt._dispatch.plan.pick``, for a
prepared and a one-shot plan) and "tune" tunes the shape (after ``forget_tuning``). Regret =
time(picked backend) / time(fastest forced backend) of the same call kind, from the same
interleaved timings, so noise between two runs of one backend cannot read as regret. A case
whose timings read a pick as past its target's line (auto's 1.25x, tune's 1.10x) is timed
once more, and every call keeps its best time of the two (``--no-retime``: not).

``--fit`` refits the cost model's constants (``convt._dispatch.calibrate.fit_constants``'s
least squares on log time) on the forced timings of prepared and one-shot calls of the given
files; ``--check`` reports the regret the fitted constants would have on other files (the
picks recomputed from the estimates, the timings as measured): fit on one seed, judge on
another.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

sys.path.insert(0, os.path.join(HERE, "..", "..", "asv_bench"))

from _common import best_interleaved  # noqa: E402  (puts this checkout's convt first)
import convt  # noqa: E402
from convt._dispatch import cost as _cost  # noqa: E402
from convt._dispatch import tune as _tune  # noqa: E402
from convt._dispatch.plan import pick  # noqa: E402
from benchmarks.random_cases import _fit_size, _log_int, cases  # noqa: E402

METHODS = ("direct", "fft")
KINDS = ("prepared", "one-shot")
# A case whose timings read auto's pick this much slower than the fastest backend (tune's:
# RETIME_TUNE_ABOVE, its own target's line) is timed again (seeds from 118 on for tune's).
RETIME_ABOVE = 1.25
RETIME_TUNE_ABOVE = 1.10


def fft_probe_cases(seed, n):
    """``n`` affordable geometries drawn from ``seed`` where the FFT's pricing is least
    certain (``--probes``): many groups or depthwise, tiny inputs (1-4 samples per axis) or
    short ones, batch 1-4, long kernels, half of them float64. Not issue 38's space: for
    finding the FFT's missing terms, never for the regret tables."""
    rng = np.random.default_rng(10_000 + seed)
    out = []
    while len(out) < n:
        d = int(rng.choice([1, 2, 3], p=[0.4, 0.45, 0.15]))
        kind = str(rng.choice(["dense", "grouped", "depthwise"], p=[0.3, 0.3, 0.4]))
        if kind == "depthwise":
            g = c_in = _log_int(rng, 4, 256)
            c_out = g * int(rng.choice([1, 1, 2]))
        else:
            g = 1 if kind == "dense" else int(rng.choice([8, 16, 32, 64]))
            c_in = g * max(1, _log_int(rng, 1, 256) // g)
            c_out = g * max(1, _log_int(rng, 1, 256) // g)
        top = {1: 511, 2: 63, 3: 15}[d]
        kernel = tuple(_log_int(rng, max(2, top // 8), top) for _ in range(d))
        strides = tuple(int(rng.choice([1, 1, 2, 3, 4])) for _ in range(d))
        dil = tuple(int(rng.choice([1, 1, 2])) for _ in range(d))
        tiny = rng.random() < 0.5
        size = tuple(int(rng.integers(1, 5)) if tiny else
                     _log_int(rng, 4, {1: 4096, 2: 64, 3: 16}[d]) for _ in range(d))
        case = dict(x=[int(rng.integers(1, 5)), c_in, *size], w=[c_in, c_out // g, *kernel],
                    attrs=dict(strides=strides, dilations=dil, pads=(0,) * (2 * d), group=g),
                    dtype=str(rng.choice(["float32", "float64"])), kind=kind)
        case = _fit_size(case)
        if case is not None:
            out.append(case)
    return out


def inputs(c):
    rng = np.random.default_rng(0)
    dt = np.dtype(c["dtype"])
    x = rng.standard_normal(c["x"]).astype(dt)
    w = rng.standard_normal(c["w"]).astype(dt)
    b = rng.standard_normal(c["w"][1] * c["attrs"]["group"]).astype(dt)
    return x, w, b


def _geometry(c, workers=2):
    op = convt.ConvTranspose(np.zeros(c["w"], c["dtype"]), method="direct", workers=workers,
                             **c["attrs"])
    return op.geometry(tuple(c["x"])), op._plan.compute_dtype


def name(c):
    a = c["attrs"]
    d = len(c["x"]) - 2
    k = "x".join(map(str, c["w"][2:]))
    s = "" if set(a["strides"]) == {1} else "_s" + "x".join(map(str, a["strides"]))
    dl = "" if set(a["dilations"]) == {1} else "_d" + "x".join(map(str, a["dilations"]))
    g = "" if a["group"] == 1 else ("_dw" if c["kind"] == "depthwise" else "_g") + str(a["group"])
    return (f"{d}d_n{c['x'][0]}_c{c['w'][0]}-{c['w'][1] * a['group']}_i"
            f"{'x'.join(map(str, c['x'][2:]))}_k{k}{s}{dl}{g}"
            f"{'_f64' if c['dtype'] == 'float64' else ''}")


def one_case(c, workers, rounds, budget, warm=True, retime=True):
    x, w, b = inputs(c)
    kw = dict(c["attrs"], workers=workers)
    ops = {m: convt.ConvTranspose(w, b, method=m, **kw) for m in METHODS}
    calls = {}
    for m, op in ops.items():
        op(x)
        convt.conv_transpose(x, w, b, method=m, **kw)
        calls["prepared", m] = lambda op=op: op(x)
        calls["one-shot", m] = lambda m=m: convt.conv_transpose(x, w, b, method=m, **kw)
    # warm: a small call timed straight after another backend's measured up to 3.5x its
    # repeated time (2d_n2_c2-182_i21x21_k2x2_s4x4 of seed 15, direct: 3.08 ms after the
    # FFT's 25 ms call, 0.89 ms repeated; 2-core AMD EPYC Zen 4), which the cost model
    # cannot and should not price
    t = _timed_by_kind(calls, rounds, budget, warm)
    geom = ops["direct"].geometry(x.shape)
    ct = ops["direct"]._plan.compute_dtype
    _tune.forget_tuning()
    tuned = convt.ConvTranspose(w, b, method="tune", **kw)
    tuned(x)
    est = {k: _cost.estimate(geom, ct, workers, one_shot=k == "one-shot") for k in KINDS}
    picked = {k: pick(est[k]) for k in KINDS}
    picked["tune"] = tuned.method_for(x.shape)
    if retime and _reads_past_targets(t, picked):
        # one more interleaved timing of every call, each keeping its best of both: the
        # same rule for every backend, so it cannot favour the pick (a disturbance on the
        # shared 2-core VM read 2.0x for seed 107's 2d_n3_c1-6_i19x8_k55x55_s2x2_d3x1,
        # re-timed twice 0.80x and 0.80x: direct 1.29 / 1.98 / 1.27 ms, FFT 2.59 / 1.59 / 1.01)
        again = _timed_by_kind(calls, rounds, budget, warm)
        t = {key: min(t[key], again[key]) for key in t}
    return dict(case=c, name=name(c), macs=geom.macs, variant=est["prepared"].direct.variant,
                times={k: {m: t[k, m] for m in METHODS} for k in KINDS},
                estimates={k: est[k].seconds for k in KINDS},
                auto={k: picked[k] for k in KINDS}, tune=picked["tune"])


def _timed_by_kind(calls, rounds, budget, warm):
    """``best_interleaved`` over the prepared calls, then over the one-shot calls, each
    kind's backends interleaved with each other only (seeds from 114 on; before, all four
    calls in one round). A prepared FFT call timed after a one-shot call (its allocations,
    its spectra through the caches) read 0.39-0.69 ms where it ran 0.33-0.45 alone, even
    after its untimed warm-up (``1d_n1_c57-88_i101_k25_s2_d3_f64``: 0.63-0.83 ms in the sweep,
    0.31 in ``tune``, which times prepared calls back to back; 2-core AMD EPYC Zen 4,
    docs/dispatch.md). The same rule for every backend."""
    t = {}
    for kind in KINDS:
        group = {key: f for key, f in calls.items() if key[0] == kind}
        t.update(best_interleaved(group, rounds, budget / len(KINDS), warm=warm))
    return t


def _reads_past_targets(t, picked):
    """Whether the timings ``t`` read auto's pick of either call kind as more than
    RETIME_ABOVE slower than the fastest backend, or tune's (a prepared call) as more than
    RETIME_TUNE_ABOVE."""
    def regret(kind, method):
        return t[kind, method] / min(t[kind, n] for n in METHODS)
    return (any(regret(k, picked[k]) > RETIME_ABOVE for k in KINDS)
            or regret("prepared", picked["tune"]) > RETIME_TUNE_ABOVE)


def regrets(rows):
    """{call kind: array of auto's regrets}, plus "tune" (prepared timings)."""
    out = {}
    for k in KINDS:
        out[k] = np.array([r["times"][k][r["auto"][k]] / min(r["times"][k].values())
                           for r in rows])
    out["tune"] = np.array([r["times"]["prepared"][r["tune"]] / min(r["times"]["prepared"]
                                                                     .values()) for r in rows])
    return out


def table(runs):
    """Markdown: one line per (seed, call kind)."""
    lines = ["| seed | call | geometries | auto within 1.25x | within 1.5x | worst | "
             "geometric mean |", "|---|---|---|---|---|---|---|"]
    for run in runs:
        reg = regrets(run["rows"])
        for k in (*KINDS, "tune"):
            a = reg[k]
            who = "tune (prepared)" if k == "tune" else k
            lim = "within 1.10x: " if k == "tune" else ""
            share = (a <= 1.10).mean() if k == "tune" else (a <= 1.25).mean()
            lines.append(f"| {run['seed']} | {who} | {len(a)} | {lim}{share:.1%} | "
                         f"{(a <= 1.5).mean():.1%} | {a.max():.2f}x | "
                         f"{np.exp(np.log(a).mean()):.3f} |")
    return lines


def worst(runs, top=12):
    """Markdown: the geometries with the largest regret of auto, either call kind."""
    items = []
    for run in runs:
        reg = regrets(run["rows"])
        for i, r in enumerate(run["rows"]):
            for k in KINDS:
                items.append((reg[k][i], run["seed"], k, r))
    items.sort(key=lambda e: -e[0])
    lines = ["| seed | call | geometry | direct ms (variant) | fft ms | est. direct | "
             "est. fft | auto | regret |", "|---|---|---|---|---|---|---|---|---|"]
    for g, seed, k, r in items[:top]:
        t, e = r["times"][k], r["estimates"][k]
        ef = "-" if e["fft"] is None else f"{e['fft'] * 1e3:.2f}"
        lines.append(f"| {seed} | {k} | {r['name']} | {t['direct'] * 1e3:.2f} ({r['variant']}) "
                     f"| {t['fft'] * 1e3:.2f} | {e['direct'] * 1e3:.2f} | {ef} | "
                     f"{r['auto'][k]} | {g:.2f} |")
    return lines


def markdown(runs):
    head = [f"Measured by `python docs/scripts/dispatch_random.py {runs[0]['args']}` with seeds "
            f"{', '.join(str(r['seed']) for r in runs)} on {runs[0]['date']}, "
            f"{runs[0]['cpu']} ({runs[0]['cores']} cores), convt {convt.__version__}, "
            f"numpy {np.__version__}, Python {platform.python_version()}, 2 workers, shipped "
            "constants (no `calibrate()`).", ""]
    return "\n".join(head + table(runs) + ["", "Largest regrets of `auto`:", ""]
                     + worst(runs)) + "\n"


def _samples(paths):
    """(geom, compute dtype, workers, method, one-shot?, seconds) of every forced timing."""
    out = []
    for p in paths:
        for r in json.load(open(p))["rows"]:
            geom, ct = _geometry(r["case"])
            out += [(geom, ct, 2, m, k == "one-shot", r["times"][k][m])
                    for k in KINDS for m in METHODS]
    return out


def _model(geom, ct, workers, m, one_shot, c):
    if m == "fft":
        return (_cost.BACKENDS["fft"].estimate(geom, ct, workers, c, one_shot)
                + (c["oneshot_call_s"] if one_shot else 0.0))
    run = _cost.seconds(geom, ct, workers, m, c)
    return run + (_cost._packing_seconds(geom, ct, c, None, workers) if one_shot else 0.0)


def fit(paths, names=None):
    """Constants fitted to the forced timings of ``paths`` (soft-L1 least squares on log
    time, as ``convt._dispatch.calibrate.fit_constants``), one-shot calls included."""
    from scipy.optimize import least_squares

    from convt._dispatch.calibrate import _BOUNDS, _FIXED

    samples = _samples(paths)
    start = dict(_cost.DEFAULTS)
    names = names or [k for k in start if k not in _FIXED]
    lo = np.log([_BOUNDS.get(k, (start[k] / 30, 0))[0] for k in names])
    hi = np.log([_BOUNDS.get(k, (0, start[k] * 30))[1] for k in names])

    def resid(logv):
        c = dict(start, **dict(zip(names, np.exp(logv))))
        return [math.log(_model(g, ct, wk, m, o, c) / t) for g, ct, wk, m, o, t in samples]

    x0 = np.clip(np.log([start[k] for k in names]), lo + 1e-9, hi - 1e-9)
    res = least_squares(resid, x0, loss="soft_l1", bounds=(lo, hi))
    return dict(start, **{k: float(v) for k, v in zip(names, np.exp(res.x))})


def replay(paths, consts):
    """The regret tables the constants ``consts`` would give on ``paths``' timings."""
    runs = []
    for p in paths:
        data = json.load(open(p))
        for r in data["rows"]:
            geom, ct = _geometry(r["case"])
            for k in KINDS:
                est = _cost.estimate(geom, ct, 2, consts, one_shot=k == "one-shot")
                r["auto"][k], r["estimates"][k] = pick(est), est.seconds
        runs.append(data)
    return runs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.6, help="seconds per geometry")
    ap.add_argument("--no-retime", action="store_true",
                    help="keep a case's first timing even when it reads a pick as more than "
                         "RETIME_ABOVE slower (before 2026-11-27 08:50 UTC: the seeds up to 108)")
    ap.add_argument("--cold", action="store_true",
                    help="time each call straight after the other calls (before 2026-11-26 "
                         "23:00: the seeds up to 18), not after a run of itself")
    ap.add_argument("--probes", action="store_true",
                    help="FFT-heavy geometries (fft_probe_cases) instead of issue 38's space")
    ap.add_argument("--json", default=None, help="raw results (JSON) to write")
    ap.add_argument("--out", default=None, help="Markdown file to write")
    ap.add_argument("--render", nargs="+", default=None, help="JSON files to tabulate")
    ap.add_argument("--fit", nargs="+", default=None, help="JSON files to refit on")
    ap.add_argument("--check", nargs="+", default=(), help="JSON files to judge a fit on")
    ap.add_argument("--names", nargs="+", default=None, help="the constants to fit (all)")
    args = ap.parse_args(argv)
    if args.fit:
        consts = fit(args.fit, args.names)
        for k, v in consts.items():
            print(f'    "{k}": {v:.3g},')
        for label, paths in (("fitted on", args.fit), ("checked on", args.check)):
            if paths:
                print(f"{label}:\n" + "\n".join(table(replay(paths, consts))))
        return
    if args.render:
        runs = [json.load(open(p)) for p in args.render]
    else:
        rows = []
        draw = fft_probe_cases if args.probes else cases
        for i, c in enumerate(draw(args.seed, args.n)):
            rows.append(one_case(c, args.workers, args.rounds, args.budget, not args.cold,
                                 not args.no_retime))
            r = rows[-1]
            tp, to = r["times"]["prepared"], r["times"]["one-shot"]
            print(f"{i:3d} {r['name']:48s} prep d {tp['direct'] * 1e3:7.2f} f "
                  f"{tp['fft'] * 1e3:7.2f} auto {r['auto']['prepared']:6s} | one d "
                  f"{to['direct'] * 1e3:7.2f} f {to['fft'] * 1e3:7.2f} auto "
                  f"{r['auto']['one-shot']:6s} | tune {r['tune']}", file=sys.stderr, flush=True)
        runs = [dict(seed=args.seed, rows=rows, cpu=_tune.cpu_model(), cores=os.cpu_count(),
                     date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     args=f"--n {args.n} --rounds {args.rounds} --budget {args.budget}"
                          + (" --cold" if args.cold else "") + (" --probes" if args.probes else "")
                          + (" --no-retime" if args.no_retime else ""))]
        if args.json:
            with open(args.json, "w") as f:
                json.dump(runs[0], f, default=float)
    text = markdown(runs)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
