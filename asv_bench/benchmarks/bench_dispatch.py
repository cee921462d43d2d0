"""The dispatcher (STYLE.md): regret of ``method="auto"`` and ``"tune"``, and the cost of a
tuned call.

``AutoRegret`` and ``TuneRegret`` track time(backend the method picks) / time(fastest
backend) on the dispatch sweep's tracked geometries (``dispatch_cases.TRACKED``; the full
sweep is ``docs/scripts/dispatch_sweep.py``): 1.0 when it picks the fastest. The backends are
timed interleaved and the "auto" / "tune" operators are only asked what they pick
(``method_for``), so noise between two runs of the same backend cannot read as regret.
``RandomRegret`` tracks the same over 16 geometries drawn from a fixed seed over issue 38's
space (``random_cases``; the full random sweep is ``docs/scripts/dispatch_random.py``), for
prepared operators and one-shot calls: the share of them where "auto" is within 1.25x of the
fastest forced backend, and the worst regret. ``TunedCall`` times a prepared ``method="tune"`` call once its shape is tuned (the lookup on
top of a plain call, bench_planning.Call).

Where convt has no ``method="fft"`` or ``"tune"`` (older commits) the cases are skipped.
"""
import time

import numpy as np

import convt

from .dispatch_cases import CASES, TRACKED
from .random_cases import cases as random_cases

METHODS = ("direct", "fft")


def _inputs(case):
    d = len(case["x"]) - 2
    rng = np.random.default_rng(0)
    dt = np.dtype(case.get("dtype", "float32"))
    x = rng.standard_normal(case["x"]).astype(dt)
    if case.get("data_format") == "NXC":
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    w = rng.standard_normal(case["w"]).astype(dt)
    kw = dict(strides=case.get("strides", (1,) * d), pads=case.get("pads", (0,) * (2 * d)),
              dilations=case.get("dilations", (1,) * d), group=case.get("group", 1),
              output_padding=case.get("output_padding", (0,) * d),
              data_format=case.get("data_format", "NCX"))
    return x, w, kw


def _op(w, method, kw):
    try:
        return convt.ConvTranspose(w, method=method, **kw)
    except ValueError as e:
        # an unknown method (older convt) is rejected naming 'method'; anything else is real
        if "method" not in str(e):
            raise
        raise NotImplementedError(f"convt has no method={method!r}: {e}")


def _best_interleaved(calls, rounds=9, budget=2.0, warm=False):
    """Best time of each call over rounds that run every call once, within ``budget`` s;
    ``warm``: each timed right after an untimed run of itself (docs/scripts/_common.py)."""
    best = dict.fromkeys(calls, np.inf)
    start = time.perf_counter()
    for r in range(rounds):
        for name, f in calls.items():
            if warm:
                f()
            t = time.perf_counter()
            f()
            best[name] = min(best[name], time.perf_counter() - t)
        if r >= 2 and time.perf_counter() - start > budget:
            break
    return best


class _Regret:
    params = [list(TRACKED)]
    param_names = ["case"]
    unit = "time(picked backend) / time(fastest)"
    timeout = 300
    method = None

    def setup(self, case):
        x, w, kw = _inputs(CASES[case])
        self.calls = {}
        for m in METHODS:
            op = _op(w, m, kw)
            op(x)   # plans the shape outside the timed calls
            self.calls[m] = lambda op=op: op(x)
        chooser = _op(w, self.method, kw)
        if self.method == "tune":
            chooser(x)   # tunes the shape
        self.choice = chooser.method_for(x.shape)

    def _regret(self):
        t = _best_interleaved(self.calls)
        return t[self.choice] / min(t.values())


class AutoRegret(_Regret):
    method = "auto"

    def track_regret(self, case):
        return self._regret()


class TuneRegret(_Regret):
    method = "tune"

    def track_regret(self, case):
        return self._regret()


class RandomRegret:
    """Regret of "auto" on 16 random geometries (seed 38), per call kind."""
    params = [["prepared", "one-shot"]]
    param_names = ["call"]
    unit = "time(picked backend) / time(fastest)"
    timeout = 600
    seed, count = 38, 16

    def setup(self, call):
        from convt._dispatch.cost import estimate
        from convt._dispatch.plan import pick

        self.regrets = []
        for case in random_cases(self.seed, self.count):
            rng = np.random.default_rng(0)
            x = rng.standard_normal(case["x"]).astype(case["dtype"])
            w = rng.standard_normal(case["w"]).astype(case["dtype"])
            kw = case["attrs"]
            ops = {m: _op(w, m, kw) for m in METHODS}
            if call == "prepared":
                calls = {m: (lambda op=op: op(x)) for m, op in ops.items()}
            else:
                calls = {m: (lambda m=m: convt.conv_transpose(x, w, method=m, **kw))
                         for m in METHODS}
            for f in calls.values():
                f()
            geom = ops["direct"].geometry(x.shape)
            est = estimate(geom, ops["direct"]._plan.compute_dtype, ops["direct"]._plan.workers,
                           one_shot=call == "one-shot")
            # as docs/scripts/dispatch_random.py times them (docs/dispatch.md, seeds 21 on)
            t = _best_interleaved(calls, rounds=5, budget=0.5, warm=True)
            self.regrets.append(t[pick(est)] / min(t.values()))

    def track_share_within_1_25(self, call):
        return float(np.mean(np.array(self.regrets) <= 1.25))

    track_share_within_1_25.unit = "share of geometries"

    def track_worst(self, call):
        return max(self.regrets)


class TunedCall:
    """A prepared, already tuned call on a tiny layer: planning + dispatch + lookup."""

    def setup(self):
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((1, 8, 8, 8)).astype(np.float32)
        w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
        self.op = _op(w, "tune", dict(strides=(2, 2), pads=(1, 1, 1, 1)))
        self.op(self.x)

    def time_prepared(self):
        self.op(self.x)
