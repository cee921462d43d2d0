"""convt against PyTorch, ONNX Runtime and OpenVINO on the 14 workloads: data and bar chart.

    python docs/scripts/peers.py                     # run the peer harness (a few minutes)
    python docs/scripts/peers.py --from-json F.json  # take a saved `compare.py --json` run
    python docs/scripts/peers.py --from-readme       # take the README's table (fastest peer only)
    python docs/scripts/peers.py --plot-only         # redraw docs/images/peers.png

The harness is the team's ``../shared/bench/compare.py`` (outside this repository; set-up in
``../shared/bench/README.md``), run with the Python of a virtual environment that has the
peers (default ``../peers-venv/bin/python``) and with this checkout's convt first on
PYTHONPATH. It times every implementation interleaved in one process (median of ``--reps``).
Writes ``docs/data/peers.json`` (the harness's JSON plus where and how it was measured) and
``docs/images/peers.png``, and prints a Markdown table.
"""
import argparse
import json
import math
import os
import re
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


def run(python, compare, reps):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "compare.json")
        env = dict(os.environ, PYTHONPATH=_common.ROOT)
        subprocess.run([python, compare, "--reps", str(reps), "--json", out], check=True,
                       env=env, cwd=_common.ROOT)
        with open(out) as f:
            return json.load(f)


def from_readme(path):
    """The rows of the README's "Performance (today)" table, as compare.py's JSON has them.

    That table keeps the fastest peer of each workload only (and its name), so the other
    peers are absent from the rows and from the plot. GFLOP comes from the workload shapes."""
    text = open(path).read()
    rows = []
    pattern = re.compile(r"^\| (\w+) \| ([\d.]+) \((\w+)\) \| ([\d.]+)(?: \(fft\))? \| "
                         r"([\d.]+)(?: \(fft\))? \| [\d.]+ \|$", re.M)
    for name, peer_ms, peer, prepared, oneshot in pattern.findall(text):
        rows.append(dict(name=name, gflop=_common.gflop(_common.WORKLOADS[name]),
                         ms={peer: float(peer_ms), "convt_prepared": float(prepared),
                             "convt": float(oneshot)}))
    sgemm = re.search(r"numpy\s+sgemm ([\d.]+) GFLOP/s", text)
    date = re.search(r"Measured on (\d{4}-\d\d-\d\d)", text)
    if len(rows) != len(_common.WORKLOADS) or not sgemm or not date:
        raise SystemExit(f"{path}: found {len(rows)} of {len(_common.WORKLOADS)} table rows; "
                         "has the table's layout changed?")
    return dict(sgemm_gflops=float(sgemm.group(1)), rows=rows), date.group(1)


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
    ax.set_title(f"float32, 2 threads, medians of interleaved runs ({meta.get('date', '?')}, "
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
    ap.add_argument("--from-readme", action="store_true",
                    help="the README's table (the lead's latest full run) instead of a run")
    ap.add_argument("--note", default="", help="a remark stored with the data (e.g. load)")
    ap.add_argument("--plot-only", action="store_true", help="redraw from the saved data")
    a = ap.parse_args()
    if a.plot_only:
        data = _common.load_json(DATA)
    else:
        meta = {}
        if a.from_readme:
            data, date = from_readme(os.path.join(_common.ROOT, "README.md"))
            # The README's run: its date and command (README), not today's.
            meta = dict(date=date, source="README.md, section 'Performance (today)'",
                        commit="not recorded (the README's run)")
            command = "../peers-venv/bin/python ../shared/bench/compare.py --reps 7"
        elif a.from_json:
            with open(a.from_json) as f:
                data = json.load(f)
            command = f"compare.py --json output {os.path.basename(a.from_json)}"
        else:
            data = run(a.python, a.compare, a.reps)
            command = f"../peers-venv/bin/python ../shared/bench/compare.py --reps {a.reps}"
        data = dict(meta=dict(_common.metadata(command), note=a.note, **meta), **data)
        print("wrote", _common.save_json(DATA, data))
    print("wrote", plot(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
