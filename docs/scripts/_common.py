"""Helpers shared by the figure scripts: paths, the workloads, run metadata, timing.

The workloads are the peer harness's 14 layers as copied into ``asv_bench/benchmarks/common.py``
(the asv suite and these pages measure the same shapes).
"""
import datetime
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import time

DOCS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(DOCS)
DATA = os.path.join(DOCS, "data")
IMAGES = os.path.join(DOCS, "images")

# The convt of this checkout, as for the docs build and pytest.
sys.path.insert(0, ROOT)


def _load_workloads():
    spec = importlib.util.spec_from_file_location(
        "_asv_common", os.path.join(ROOT, "asv_bench", "benchmarks", "common.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_workloads()
WORKLOADS, attrs, make_inputs = bench.WORKLOADS, bench.attrs, bench.make_inputs


def gflop(shapes):
    """Useful GFLOP of a workload (2 per multiply-add, none on inserted zeros), as the peer
    harness counts them: N * C_in * C_out/group * prod(I) * prod(K) * 2."""
    n, c_in, *spatial = shapes["x"]
    _, c_out_g, *kernel = shapes["w"]
    return 2 * n * c_in * c_out_g * math.prod(spatial) * math.prod(kernel) / 1e9


def metadata(command):
    """Where, when and with what a data file was measured."""
    import numpy as np
    import scipy

    import convt
    from convt._config import config_dict

    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    cfg = config_dict()
    return dict(date=datetime.date.today().isoformat(), command=command, convt=convt.__version__,
                commit=commit, numpy=np.__version__, scipy=scipy.__version__,
                python=platform.python_version(), cpu=cfg["machine"]["cpu"],
                cpu_count=cfg["machine"]["cpu_count"],
                omp_num_threads=os.environ.get("OMP_NUM_THREADS", "unset"))


def save_json(name, payload):
    path = os.path.join(DATA, name)
    os.makedirs(DATA, exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
        f.write("\n")
    return path


def load_json(name):
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)


def save_figure(fig, name):
    path = os.path.join(IMAGES, name)
    os.makedirs(IMAGES, exist_ok=True)
    # No timestamps or software versions in the PNG: regenerating unchanged data gives an
    # unchanged file, so git shows a figure as modified only when it is.
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    return path


def timed(f):
    """Seconds one call of ``f()`` takes (``time.perf_counter``)."""
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def best_interleaved(calls, rounds, budget, min_rounds=3, warm=False):
    """Best time in seconds of each call, over rounds that run every call once (so that load
    from a shared machine hits all of them alike); stops after ``budget`` seconds once at
    least ``min_rounds`` rounds have run. ``warm``: each call timed right after an untimed
    run of itself (the time of a call repeated, as a layer in a loop sees it)."""
    best = dict.fromkeys(calls, float("inf"))
    start = time.perf_counter()
    for r in range(rounds):
        for name, f in calls.items():
            if warm:
                f()
            best[name] = min(best[name], timed(f))
        if r + 1 >= min_rounds and time.perf_counter() - start > budget:
            break
    return best


def matplotlib_pyplot():
    """pyplot with a non-interactive backend (the scripts only write files)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
