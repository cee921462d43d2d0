"""convt against PyTorch, ONNX Runtime and OpenVINO on the 14 workloads: data and bar chart.

    python docs/scripts/peers.py --isolated          # each implementation in its own process
    python docs/scripts/peers.py --isolated --rounds 5   # ... taking turns 5 times, medians
    python docs/scripts/peers.py                     # all interleaved in one process
    python docs/scripts/peers.py --from-json F.json  # take a saved `compare.py --json` run
    python docs/scripts/peers.py --plot-only         # redraw docs/images/peers.png

The harness is the team's ``../shared/bench/compare.py`` (outside this repository; set-up in
``../shared/bench/README.md``), run with the Python of a virtual environment that has the
peers (default ``../peers-venv/bin/python``) and with this checkout's convt first on
PYTHONPATH. By default it times every implementation interleaved in one process (median of
``--reps``), where each one's idle threads (spinning thread pools) slow the next; with
``--isolated`` it runs the harness once per implementation (``--impls torch``, then
``onnxruntime``, ``openvino``, ``convt,convt_prepared``) and merges the rows: what a user of
one library sees.
Writes ``docs/data/peers.json`` (the harness's JSON plus where and how it was measured) and
``docs/images/peers.png``, and prints a Markdown table.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

DATA, FIGURE = "peers.json", "peers.png"
PEERS = ("torch", "onnxruntime", "openvino")
CONVT = ("convt", "convt_prepared")  # one-shot conv_transpose, prepared ConvTranspose
LABELS = {"torch": "PyTorch", "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO",
          "convt": "convt one-shot", "convt_prepared": "convt prepared"}


def run(python, compare, reps, impls=None):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "compare.json")
        env = dict(os.environ, PYTHONPATH=_common.ROOT)
        cmd = [python, compare, "--reps", str(reps), "--json", out]
        subprocess.run(cmd + (["--impls", impls] if impls else []), check=True, env=env,
                       cwd=_common.ROOT)
        with open(out) as f:
            return json.load(f)


def run_isolated(python, compare, reps, rounds=1):
    """One harness process per implementation, rows merged (sgemm: the lowest of the runs).
    With several rounds the implementations take turns, round after round, and each time is
    the median over the rounds: a slow spell of the (shared) machine then falls on every
    implementation instead of the one that happened to run in it."""
    times, sgemm, gflop = {}, [], {}
    for _ in range(rounds):
        for impls in PEERS + (",".join(CONVT),):
            data = run(python, compare, reps, impls)
            sgemm.append(data["sgemm_gflops"])
            for r in data["rows"]:
                gflop[r["name"]] = r["gflop"]
                for impl, t in r["ms"].items():
                    times.setdefault(r["name"], {}).setdefault(impl, []).append(t)
    rows = [dict(name=name, gflop=gflop[name],
                 ms={impl: statistics.median(ts) for impl, ts in ms.items()})
            for name, ms in times.items()]
    return dict(sgemm_gflops=min(sgemm), rows=rows)


def speedups(row):
    """Per implementation: time of the fastest peer / its time (above 1: faster than all)."""
    ms = row["ms"]
    fastest = min(ms[p] for p in PEERS if p in ms)
    return {impl: fastest / t for impl, t in ms.items()}


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def markdown(data):
    out = ["| workload | GFLOP | " + " | ".join(f"{LABELS[i]} ms" for i in PEERS + CONVT)
           + " | fastest peer / convt prepared |", "|---" * (3 + len(PEERS + CONVT)) + "|"]
    ratios = []
    for row in data["rows"]:
        ms = row["ms"]
        cells = [f"{ms[i]:.1f}" if i in ms else "-" for i in PEERS + CONVT]
        r = speedups(row).get("convt_prepared")
        ratios.append(r)
        out.append(f"| {row['name']} | {row['gflop']:.3f} | " + " | ".join(cells)
                   + f" | {r:.2f} |")
    out.append(f"\nGeometric mean of the last column: {geomean(ratios):.2f} "
               f"(numpy sgemm {data['sgemm_gflops']:.0f} GFLOP/s in the same run).")
    return "\n".join(out)


def plot(data):
    plt = _common.matplotlib_pyplot()
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    colors = {"torch": "#d9a5a5", "onnxruntime": "#a5b8d9", "openvino": "#b5d9a5",
              "convt": "#f2c46d", "convt_prepared": "#d9822b"}
    rows = data["rows"][::-1]  # first workload on top
    fig, ax = plt.subplots(figsize=(8.5, 0.5 * len(rows) + 1.8))
    for i, row in enumerate(rows):
        # only the implementations this row has (a table with the fastest peer only has one)
        present = [impl for impl in PEERS + CONVT if impl in row["ms"]]
        height = 0.8 / len(present)
        for j, impl in enumerate(present):
            y = i + (len(present) - 1) / 2 * height - j * height
            ax.barh(y, speedups(row)[impl], height=height * 0.95, color=colors[impl])
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ticks = [t for t in (0.25, 0.5, 1, 2, 4, 8, 16, 32)
             if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_yticks(range(len(rows)), [r["name"] for r in rows], fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("speed relative to the fastest peer (its time / this time): right of 1 is "
                  "faster than every peer", fontsize=8)
    meta = data.get("meta", {})
    how = ("each in its own process" if meta.get("mode") == "isolated"
           else "interleaved in one process")
    ax.set_title(f"float32, 2 threads, medians, {how} ({meta.get('date', '?')}, "
                 f"{meta.get('cpu', '?')})", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    seen = [i for i in PEERS + CONVT if any(i in r["ms"] for r in rows)]
    ax.legend([Patch(color=colors[i]) for i in seen], [LABELS[i] for i in seen], fontsize=8,
              loc="upper center", bbox_to_anchor=(0.5, -0.07 - 0.3 / len(rows)),
              ncol=len(seen), frameon=False)
    return _common.save_figure(fig, FIGURE)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=os.path.join(_common.ROOT, "..", "peers-venv", "bin",
                                                     "python"))
    ap.add_argument("--compare", default=os.path.join(_common.ROOT, "..", "shared", "bench",
                                                      "compare.py"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--from-json", help="a saved `compare.py --json` output instead of a run")
    ap.add_argument("--isolated", action="store_true",
                    help="one harness process per implementation (default: interleaved)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="--isolated: implementations take turns this many times (median)")
    ap.add_argument("--note", default="", help="a remark stored with the data (e.g. load)")
    ap.add_argument("--plot-only", action="store_true", help="redraw from the saved data")
    a = ap.parse_args()
    if a.plot_only:
        data = _common.load_json(DATA)
    else:
        # --isolated with --from-json: the saved run was made that way (merged per-impl runs)
        meta = dict(mode="isolated" if a.isolated else "interleaved")
        if a.from_json:
            with open(a.from_json) as f:
                data = json.load(f)
            command = f"compare.py --json output {os.path.basename(a.from_json)}"
        elif a.isolated:
            data = run_isolated(a.python, a.compare, a.reps, a.rounds)
            command = ("../peers-venv/bin/python ../shared/bench/compare.py --reps "
                       f"{a.reps} --impls X, once per implementation"
                       + (f", {a.rounds} rounds in turn, median" if a.rounds > 1 else ""))
        else:
            data = run(a.python, a.compare, a.reps)
            command = f"../peers-venv/bin/python ../shared/bench/compare.py --reps {a.reps}"
        data = dict(meta=dict(_common.metadata(command), note=a.note, **meta), **data)
        print("wrote", _common.save_json(DATA, data))
    print("wrote", plot(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
