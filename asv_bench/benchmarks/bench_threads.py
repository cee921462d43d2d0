"""convt and its neighbours on the same cores: what each call costs the one after it.

``Neighbours`` tracks ``median(call right after the other library) / median(call right after
itself)`` for NumPy's sgemm (768 x 768, float32, its BLAS's own threads) after convt, and for a
prepared convt call (the dcgan_g3 layer, every core) after sgemm: 1.0 when the first call leaves
the cores as it found them. Each pair (predecessor, timed call) starts after a pause, so nothing
spins from the pair before. ``BackToBack`` times convt's prepared call back to back, the speed the
idle-thread policy must keep. docs/scripts/neighbours.py runs the same measurement with more
pairs; docs/threads.md quotes it.
"""
import random
import time

import numpy as np

import convt


def calls():
    """The two neighbours: {"sgemm": f, "convt": f}."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((768, 768), dtype=np.float32)
    b = rng.standard_normal((768, 768), dtype=np.float32)
    x = rng.standard_normal((16, 128, 16, 16), dtype=np.float32)
    w = rng.standard_normal((128, 64, 4, 4), dtype=np.float32)
    op = convt.ConvTranspose(w, strides=(2, 2), pads=(1, 1, 1, 1))
    out = np.empty((16, 64, 32, 32), np.float32)
    return {"sgemm": lambda: np.matmul(a, b), "convt": lambda: op(x, out=out)}


def measure(pairs, pause, seed=0):
    """{(predecessor, timed): [seconds, ...]} over ``pairs`` shuffled rounds of the 4 pairs."""
    fns = calls()
    for f in fns.values():  # warm-up: plans, arenas, BLAS and OpenMP teams
        for _ in range(3):
            f()
    order = [(p, t) for p in fns for t in fns] * pairs
    random.Random(seed).shuffle(order)
    times = {k: [] for k in set(order)}
    for pred, timed in order:
        time.sleep(pause)
        fns[pred]()
        t0 = time.perf_counter()
        fns[timed]()
        times[(pred, timed)].append(time.perf_counter() - t0)
    return times


def ratios(times):
    """{timed: median after the other / median after itself}."""
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {t: med[("convt" if t == "sgemm" else "sgemm", t)] / med[(t, t)]
            for t in ("sgemm", "convt")}


class Neighbours:
    unit = "time after the other / time after itself"
    timeout = 240
    params = ["sgemm", "convt"]
    param_names = ["timed call"]

    def setup_cache(self):
        return ratios(measure(pairs=15, pause=0.1))

    def track_slowdown(self, result, timed):
        return result[timed]


class BackToBack:
    timeout = 120

    def setup(self):
        self.call = calls()["convt"]
        for _ in range(3):
            self.call()

    def time_prepared_back_to_back(self):
        self.call()
