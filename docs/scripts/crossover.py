"""Time the direct and FFT backends over kernel sizes and mark what ``method="auto"`` picks.

    python docs/scripts/crossover.py               # measure (a few minutes), write data + figure
    python docs/scripts/crossover.py --workers 2   # the same with two threads per call
    python docs/scripts/crossover.py --plot-only   # redraw docs/images/crossover.png

Two stride-1 sweeps, C -> C channels, pads K // 2 (the "same"-size layer): 2-D 64 x 64 and
1-D 4096-long inputs, the settings of docs/fft.md's crossover table. Both backends are forced
(``method="direct"`` / ``"fft"``), prepared once and timed interleaved, best of up to 15 rounds
(a shared machine slows all of them alike); the dispatcher's pick is
``ConvTranspose(...).method_for(x.shape)`` of an ``"auto"`` operator with the same ``workers``.
Rerun it whenever the dispatcher changes. Writes ``docs/data/crossover.json`` and
``docs/images/crossover.png`` and prints a Markdown table.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

DATA, FIGURE = "crossover.json", "crossover.png"
SWEEPS = {
    "2-D, x (1, 16, 64, 64), 16 -> 16 channels": dict(
        x=(1, 16, 64, 64), kernels=(3, 5, 7, 9, 11, 15, 21, 31)),
    "1-D, x (2, 16, 4096), 16 -> 16 channels": dict(
        x=(2, 16, 4096), kernels=(7, 15, 31, 63, 127, 255, 511)),
}
METHODS = ("direct", "fft")


def measure(workers, rounds, budget):
    import convt

    rows = []
    for sweep, spec in SWEEPS.items():
        nd = len(spec["x"]) - 2
        c = spec["x"][1]
        for k in spec["kernels"]:
            shapes = dict(x=spec["x"], w=(c, c) + (k,) * nd, pads=(k // 2,) * (2 * nd))
            x, w, b = _common.make_inputs(shapes)
            kw = dict(_common.attrs(shapes), workers=workers)
            ops = {m: convt.ConvTranspose(w, b, method=m, **kw) for m in METHODS}
            for op in ops.values():
                op(x)  # plan the shape (FFT: kernel spectra) outside the timing
            best = _common.best_interleaved({m: (lambda op=op: op(x)) for m, op in ops.items()},
                                            rounds, budget)
            auto = convt.ConvTranspose(w, b, **kw).method_for(x.shape)
            rows.append(dict(sweep=sweep, kernel=k, auto=auto,
                             **{f"{m}_ms": best[m] * 1e3 for m in METHODS}))
            print(f"{sweep[:4]} K={k:4d} direct {best['direct'] * 1e3:8.2f} ms  "
                  f"fft {best['fft'] * 1e3:8.2f} ms  auto -> {auto}", flush=True)
    return rows


def markdown(data):
    out = ["| sweep | K | direct ms | fft ms | faster | auto picks |", "|---|---|---|---|---|---|"]
    for r in data["rows"]:
        faster = min(METHODS, key=lambda m: r[f"{m}_ms"])
        out.append(f"| {r['sweep'][:3]} | {r['kernel']} | {r['direct_ms']:.2f} | "
                   f"{r['fft_ms']:.2f} | {faster} | {r['auto']} |")
    return "\n".join(out)


def plot(data):
    plt = _common.matplotlib_pyplot()
    colors = {"direct": "tab:blue", "fft": "tab:orange"}
    sweeps = list(dict.fromkeys(r["sweep"] for r in data["rows"]))
    fig, axes = plt.subplots(1, len(sweeps), figsize=(5 * len(sweeps), 4), squeeze=False)
    for ax, sweep in zip(axes[0], sweeps):
        rows = [r for r in data["rows"] if r["sweep"] == sweep]
        ks = np.array([r["kernel"] for r in rows])
        for m in METHODS:
            ax.plot(ks, [r[f"{m}_ms"] for r in rows], "o-", color=colors[m], ms=4,
                    label=f'method="{m}"')
        picked = np.array([r[f"{r['auto']}_ms"] for r in rows])
        ax.scatter(ks, picked, s=130, facecolors="none", edgecolors="k", lw=1.2,
                   label='"auto" picks', zorder=3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_xlabel("kernel size K (stride 1, pads K // 2)")
        ax.set_ylabel("time per call, ms (best of interleaved rounds)")
        ax.set_title(sweep, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    meta = data["meta"]
    fig.suptitle(f"direct vs FFT, float32, workers={data['workers']} "
                 f"({meta['date']}, {meta['cpu']}, convt {meta['commit']})", fontsize=10)
    fig.tight_layout()
    return _common.save_figure(fig, FIGURE)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=1,
                    help="threads per call for both backends and for the dispatcher (default 1: "
                         "on a shared machine, two-thread timings carry OpenMP barrier waits)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--budget", type=float, default=3.0, help="seconds per kernel size")
    ap.add_argument("--plot-only", action="store_true", help="redraw from the saved data")
    a = ap.parse_args()
    if a.plot_only:
        data = _common.load_json(DATA)
    else:
        cmd = " ".join(["python docs/scripts/crossover.py", *sys.argv[1:]])
        data = dict(meta=_common.metadata(cmd), workers=a.workers,
                    rows=measure(a.workers, a.rounds, a.budget))
        print("wrote", _common.save_json(DATA, data))
    print("wrote", plot(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
