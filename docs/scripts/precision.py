"""Measure the error of every backend and dtype against the float64 reference; plot it.

    python docs/scripts/precision.py              # measure (about a minute), write data + figure
    python docs/scripts/precision.py --plot-only  # redraw docs/images/precision.png from the data

For each of the 14 workloads, standard normal x, w and b are rounded to the dtype; the float64
reference (``method="reference"`` on those rounded values, widened to float64) is the exact
answer, so the error is the computation's alone, not the input rounding's. The error is
normwise: max|y - ref| / max|ref| (the tests' measure, ``tests/conftest.py``). Writes
``docs/data/precision.json`` and ``docs/images/precision.png`` and prints the Markdown tables
of ``docs/precision.md``.
"""
import argparse
import importlib.util
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

BACKENDS = ("direct", "fft", "reference")
DTYPES = ("float64", "float32", "float16", "bfloat16")
DATA, FIGURE = "precision.json", "precision.png"


def np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def measure():
    import convt

    rows = []
    for name, shapes in _common.WORKLOADS.items():
        x, w, b = _common.make_inputs(shapes, dtype=np.float64, seed=1)
        kw = _common.attrs(shapes)
        for dt in DTYPES:
            xd, wd, bd = (a.astype(np_dtype(dt)) for a in (x, w, b))
            ref = convt.ConvTranspose(*(a.astype(np.float64) for a in (wd, bd)),
                                      method="reference", **kw)(xd.astype(np.float64))
            scale = float(np.abs(ref).max())
            for backend in BACKENDS:
                if backend == "reference" and dt == "float64":
                    continue  # the oracle itself
                y = convt.ConvTranspose(wd, bd, method=backend, **kw)(xd)
                assert y.dtype == xd.dtype and y.shape == ref.shape
                err = float(np.abs(y.astype(np.float64) - ref).max()) / scale
                rows.append(dict(workload=name, backend=backend, dtype=dt, error=err))
                print(f"{name:20s} {backend:9s} {dt:8s} {err:.2e}", flush=True)
    return rows


def tolerances():
    """The test tolerance table (``tests/conftest.py``), or {} where pytest is missing."""
    try:
        spec = importlib.util.spec_from_file_location(
            "_conftest", os.path.join(_common.ROOT, "tests", "conftest.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:
        return {}
    return {f"{k[0]}/{k[1]}": v for k, v in module.TOL.items()}


def combos(rows):
    seen = []
    for r in rows:
        if (r["backend"], r["dtype"]) not in seen:
            seen.append((r["backend"], r["dtype"]))
    order = {d: i for i, d in enumerate(DTYPES)}
    return sorted(seen, key=lambda c: (order[c[1]], BACKENDS.index(c[0])))


def markdown(data):
    rows, tol = data["rows"], data["tolerances"]
    out = ["| backend | dtype | median | worst (workload) | test tolerance |",
           "|---|---|---|---|---|"]
    for backend, dt in combos(rows):
        sel = [r for r in rows if r["backend"] == backend and r["dtype"] == dt]
        worst = max(sel, key=lambda r: r["error"])
        med = float(np.median([r["error"] for r in sel]))
        t = tol.get(f"{backend}/{dt}")
        out.append(f"| {backend} | {dt} | {med:.1e} | {worst['error']:.1e} "
                   f"({worst['workload']}) | {'' if t is None else f'{t:.0e}'} |")
    out += ["", "| workload | direct float32 | fft float32 | direct float64 | fft float64 |",
            "|---|---|---|---|---|"]
    err = {(r["workload"], r["backend"], r["dtype"]): r["error"] for r in rows}
    for name in dict.fromkeys(r["workload"] for r in rows):
        cells = [f"{err[(name, b, d)]:.1e}" for d in ("float32", "float64")
                 for b in ("direct", "fft")]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def plot(data):
    plt = _common.matplotlib_pyplot()
    rows, tol = data["rows"], data["tolerances"]
    colors = {"direct": "tab:blue", "fft": "tab:orange", "reference": "tab:gray"}
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for backend, color in colors.items():  # legend entries in this order
        ax.scatter([], [], s=14, color=color, label=backend)
    for i, (backend, dt) in enumerate(combos(rows)):
        errs = np.array([r["error"] for r in rows if r["backend"] == backend
                         and r["dtype"] == dt])
        jitter = np.linspace(-0.25, 0.25, len(errs))
        ax.scatter(i + jitter, np.maximum(errs, 1e-18), s=14, color=colors[backend])
        t = tol.get(f"{backend}/{dt}")
        if t is not None:
            ax.hlines(t, i - 0.35, i + 0.35, color="tab:red", lw=1.5,
                      label="test tolerance" if i == 0 else None)
    ticks = combos(rows)
    ax.set_xticks(range(len(ticks)), [f"{b}\n{d}" for b, d in ticks], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("max |y - ref| / max |ref|")
    ax.set_title("Normwise error vs the float64 reference, 14 workloads "
                 f"({data['meta']['date']})", fontsize=10)
    ax.grid(axis="y", which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _common.save_figure(fig, FIGURE)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plot-only", action="store_true", help="redraw from the saved data")
    a = ap.parse_args()
    if a.plot_only:
        data = _common.load_json(DATA)
    else:
        data = dict(meta=_common.metadata("python docs/scripts/precision.py"),
                    tolerances=tolerances(), rows=measure())
        print("wrote", _common.save_json(DATA, data))
    print("wrote", plot(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
