"""The dispatcher's sweep: every backend forced on each geometry, against "auto" and "tune".

    python docs/scripts/dispatch_sweep.py [--runs 2] [--out docs/dispatch_sweep.md]
                                          [--json sweep.json] [--cases REGEX]
    python docs/scripts/dispatch_sweep.py --fit sweep.json [sweep2.json ...]
    python docs/scripts/dispatch_sweep.py --render sweep.json --out docs/dispatch_sweep.md

Per geometry (asv_bench/benchmarks/dispatch_cases.py): prepared operators with
``method="direct"`` and ``"fft"`` are planned and warmed up, then timed in interleaved rounds
(one call of each per round, so load from other processes hits both alike), best-of. The
regret of a method choice is time(chosen backend) / time(fastest backend) from those same
timings: "auto" is asked which backend it picks (``method_for``), "tune" tunes the shape
(its own timings, after ``forget_tuning``) and is asked the same. The Markdown output holds a
summary per run (share of geometries within 1.25x, worst regret, the cost model's errors,
planning + dispatch overhead) and one table row per geometry.

``--fit`` refits ``convt._dispatch.cost.DEFAULTS`` to the forced timings of the given JSON files
(least squares on log time) and prints the constants.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "asv_bench"))
sys.path.insert(0, HERE)

from _common import best_interleaved  # noqa: E402  (puts this checkout's convt first)
import convt  # noqa: E402
from convt._dispatch import cost as _cost  # noqa: E402
from convt._dispatch import tune as _tune  # noqa: E402
from benchmarks.dispatch_cases import CASES  # noqa: E402

METHODS = ("direct", "fft")


def attrs(c):
    d = len(c["x"]) - 2
    return dict(strides=c.get("strides", (1,) * d), pads=c.get("pads", (0,) * (2 * d)),
                dilations=c.get("dilations", (1,) * d), group=c.get("group", 1),
                output_padding=c.get("output_padding", (0,) * d),
                data_format=c.get("data_format", "NCX"))


def inputs(c):
    rng = np.random.default_rng(0)
    dt = np.dtype(c.get("dtype", "float32"))
    x = rng.standard_normal(c["x"]).astype(dt)
    if c.get("data_format") == "NXC":
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    w = rng.standard_normal(c["w"]).astype(dt)
    b = rng.standard_normal(c["w"][1] * c.get("group", 1)).astype(dt)
    return x, w, b


def one_case(name, c, workers, rounds, budget):
    x, w, b = inputs(c)
    kw = dict(attrs(c), workers=workers)
    ops = {m: convt.ConvTranspose(w, b, method=m, **kw) for m in METHODS}
    for op in ops.values():
        op(x)
    t = best_interleaved({m: (lambda op=op: op(x)) for m, op in ops.items()}, rounds, budget)
    auto = convt.ConvTranspose(w, b, **kw)
    plan = auto._plan
    geom = auto.geometry(x.shape)
    est = plan.estimate(geom)
    _tune.forget_tuning()
    tuned = convt.ConvTranspose(w, b, method="tune", **kw)
    tuned(x)
    best = min(t.values())
    pick_auto, pick_tune = auto.method_for(x.shape), tuned.method_for(x.shape)
    return dict(
        name=name, dtype=c.get("dtype", "float32"), layout=c.get("data_format", "NCX"),
        rank=len(c["x"]) - 2, kernel=c["w"][2:], strides=kw["strides"], c_in=c["w"][0],
        groups=kw["group"], macs=geom.macs, times=t, variant=est.direct.variant,
        mode=est.direct.mode, estimates=est.seconds, auto=pick_auto, tune=pick_tune,
        auto_regret=t[pick_auto] / best, tune_regret=t[pick_tune] / best)


def overheads(workers):
    """(prepared call - its runner, one-shot call - the runner) in seconds, best of many, on
    a small shape (batch 1, 8 -> 8 channels, 3x3, 16x16, stride 2)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1), workers=workers)
    op = convt.ConvTranspose(w, **kw)
    op(x)
    p = op._plan.geometry(x.shape)
    calls = {"runner": lambda: p.runner(x, p.state, p.geom, op._plan),
             "prepared": lambda: op(x),
             "one-shot": lambda: convt.conv_transpose(x, w, **kw)}
    t = best_interleaved(calls, 3000, 3.0)
    return t["prepared"] - t["runner"], t["one-shot"] - t["runner"], t["runner"]


def sweep(pattern, workers, rounds, budget):
    rows = []
    for name, c in CASES.items():
        if pattern and not re.search(pattern, name):
            continue
        rows.append(one_case(name, c, workers, rounds, budget))
        r = rows[-1]
        print(f"{name:24s} direct {r['times']['direct'] * 1e3:8.2f} ms  fft "
              f"{r['times']['fft'] * 1e3:8.2f} ms  auto {r['auto']:6s} {r['auto_regret']:.2f}"
              f"  tune {r['tune']:6s} {r['tune_regret']:.2f}", file=sys.stderr, flush=True)
    prep, one, runner = overheads(workers)
    return dict(rows=rows, overhead_prepared=prep, overhead_oneshot=one, small_runner=runner)


def _summary(run):
    rows = run["rows"]
    a = np.array([r["auto_regret"] for r in rows])
    tn = np.array([r["tune_regret"] for r in rows])
    err = [r["estimates"][m] / r["times"][m] for r in rows for m in METHODS
           if r["estimates"][m] is not None]
    return (f"{len(rows)} geometries; auto within 1.25x of the fastest on "
            f"{(a <= 1.25).sum()} ({(a <= 1.25).mean():.0%}), worst {a.max():.2f}x, "
            f"geometric mean {np.exp(np.log(a).mean()):.3f}; tune within 1.10x on "
            f"{(tn <= 1.10).sum()} ({(tn <= 1.10).mean():.0%}), worst {tn.max():.2f}x; "
            f"cost model estimate / measured: median {np.median(err):.2f}, "
            f"5-95% {np.percentile(err, 5):.2f}-{np.percentile(err, 95):.2f}; "
            f"overhead per prepared call {run['overhead_prepared'] * 1e6:.1f} us, "
            f"one-shot {run['overhead_oneshot'] * 1e6:.1f} us (small shape, kernel "
            f"{run['small_runner'] * 1e6:.1f} us)")


def pooled(runs):
    """Per geometry and backend, the best time over all runs (load only ever adds time), and
    the regrets of each run's auto / tune picks against those."""
    out = []
    for k, r in enumerate(runs[0]["rows"]):
        best = {m: min(run["rows"][k]["times"][m] for run in runs) for m in METHODS}
        fastest = min(best.values())
        out.append(dict(name=r["name"], best=best,
                        auto=max(best[run["rows"][k]["auto"]] for run in runs) / fastest,
                        tune=max(best[run["rows"][k]["tune"]] for run in runs) / fastest))
    return out


def _pooled_summary(runs):
    p = pooled(runs)
    a = np.array([r["auto"] for r in p])
    t = np.array([r["tune"] for r in p])
    return (f"pooled over the {len(runs)} runs (each backend's best time over all runs; the "
            f"worse pick of the runs): auto within 1.25x on {(a <= 1.25).sum()} of {len(a)} "
            f"({(a <= 1.25).mean():.0%}), worst {a.max():.2f}x, geometric mean "
            f"{np.exp(np.log(a).mean()):.3f}; tune within 1.10x on {(t <= 1.10).sum()} "
            f"({(t <= 1.10).mean():.0%}), worst {t.max():.2f}x")


def markdown(runs, command):
    lines = ["# Dispatch sweep", "",
             f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
             f", {_tune.cpu_model()} ({os.cpu_count()} cores), convt {convt.__version__}, "
             f"numpy {np.__version__}, Python {platform.python_version()}. Regret = "
             "time(backend picked) / time(fastest backend), from one interleaved best-of "
             "measurement per run; estimates are `convt._dispatch.cost.estimate`.", ""]
    for i, run in enumerate(runs, 1):
        lines += [f"- run {i}: " + _summary(run)]
    if len(runs) > 1:
        lines += ["- " + _pooled_summary(runs)]
    head = ("| geometry | dtype | layout | direct ms (variant) | fft ms | est. direct ms | "
            "est. fft ms | auto | " + " | ".join(f"regret auto r{i} | regret tune r{i}"
                                                for i in range(1, len(runs) + 1)) + " |")
    lines += ["", head, "|" + "---|" * (head.count("|") - 1)]
    for k, r in enumerate(runs[0]["rows"]):
        e = r["estimates"]
        fft_est = "-" if e["fft"] is None else f"{e['fft'] * 1e3:.2f}"
        var = r["variant"] + (f" {r['mode']}" if r["mode"] else "")
        regs = " | ".join(f"{run['rows'][k]['auto_regret']:.2f} | "
                          f"{run['rows'][k]['tune_regret']:.2f}" for run in runs)
        lines.append(f"| {r['name']} | {r['dtype']} | {r['layout']} | "
                     f"{r['times']['direct'] * 1e3:.2f} ({var}) | {r['times']['fft'] * 1e3:.2f}"
                     f" | {e['direct'] * 1e3:.2f} | {fft_est} | {r['auto']} | {regs} |")
    return "\n".join(lines) + "\n"


def fit(paths):
    """Refit the cost model's constants on forced timings (convt._dispatch.calibrate.fit_constants)."""
    from convt._dispatch.calibrate import fit_constants

    samples = []
    for p in paths:
        for r in json.load(open(p))["runs"][0]["rows"]:
            c = CASES[r["name"]]
            x, w, b = inputs(c)
            op = convt.ConvTranspose(w, b, workers=2, **attrs(c))
            ct = op._plan.w_packed.dtype
            samples += [(op.geometry(x.shape), ct, 2, m, r["times"][m]) for m in METHODS]
    consts = fit_constants(samples)
    for k, v in consts.items():
        print(f'    "{k}": {v:.3g},')
    est = [(_cost.estimate(g, ct, wk, consts).seconds[m], t) for g, ct, wk, m, t in samples]
    err = np.log([e / t for e, t in est if e is not None])
    print(f"log(estimate / measured): rms {np.sqrt((err ** 2).mean()):.3f}, "
          f"max {np.abs(err).max():.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--budget", type=float, default=1.5, help="seconds per case and run")
    ap.add_argument("--cases", default="", help="regex on case names")
    ap.add_argument("--out", default=None, help="Markdown file to write")
    ap.add_argument("--json", default=None, help="raw results (JSON) to write")
    ap.add_argument("--fit", nargs="+", default=None, help="refit constants from JSON files")
    ap.add_argument("--render", default=None,
                    help="write --out from this --json file instead of measuring")
    args = ap.parse_args(argv)
    if args.fit:
        return fit(args.fit)
    if args.render:
        with open(args.render) as f:
            data = json.load(f)
        with open(args.out, "w") as f:
            f.write(markdown(data["runs"], data["command"]))
        return None
    runs = [sweep(args.cases, args.workers, args.rounds, args.budget) for _ in range(args.runs)]
    command = "python docs/scripts/dispatch_sweep.py " + " ".join(argv or sys.argv[1:])
    for i, run in enumerate(runs, 1):
        print(f"run {i}: {_summary(run)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "command": command.strip()}, f, default=float)
    if args.out:
        with open(args.out, "w") as f:
            f.write(markdown(runs, command.strip()))


if __name__ == "__main__":
    main()
