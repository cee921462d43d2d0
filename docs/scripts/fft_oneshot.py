"""One-shot against prepared FFT calls (docs/fft.md, "The 9 x 9 layer's one-shot / prepared
ratio"): the two called alternately in one process, best and median of each and their
ratio; with ``--profile``, the one-shot call's parts (timed in-process by wrapping the FFT
backend's steps: spectra, input tiles, input transform, contraction, inverse, placement; the
rest is the front end, the plan and the range check).

Usage (under the exclusive timing lock)::

    python docs/scripts/fft_oneshot.py [--case k9|k31|audio|k45|3d|all] [--calls 25]
        [--rounds 3] [--profile]
"""
import argparse
import collections
import statistics
import sys
import time

import _common  # noqa: F401 -- puts this checkout's convt first on sys.path
import numpy as np

import convt
import convt._backends.fft as fft_mod
import convt._dispatch.plan as plan_mod

CASES = {   # name: (x shape, w shape, strides)
    "k9": ((1, 32, 48, 48), (32, 32, 9, 9), None),
    "k31": ((1, 16, 128, 128), (16, 16, 31, 31), None),      # large_k31_s1
    "audio": ((4, 8, 16000), (8, 8, 255), None),              # audio_k255_s1
    "k45": ((2, 8, 4000), (8, 8, 45), None),
    "3d": ((1, 8, 32, 32, 32), (8, 8, 9, 9, 9), None),
    "k9s2": ((1, 32, 24, 24), (32, 32, 9, 9), (2, 2)),
}


def _data(case, seed=0):
    xs, ws, st = CASES[case]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    return x, w, ({} if st is None else {"strides": st})


def ratio(case, calls):
    """(one-shot times, prepared times) of ``calls`` alternated calls each, seconds."""
    x, w, kw = _data(case)
    op = convt.ConvTranspose(w, method="fft", workers=2, **kw)

    def one():
        return convt.conv_transpose(x, w, method="fft", workers=2, **kw)

    for _ in range(5):
        one()
        op(x)
    a, b = [], []
    for _ in range(calls):
        t = time.perf_counter()
        one()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        op(x)
        b.append(time.perf_counter() - t)
    return a, b


_PARTS = {   # fft module name: the part it is counted in
    "kernel_spectrum": "spectra", "lead_spectra": "spectra", "_tiles": "input tiles",
    "contract": "contraction", "_inverse": "inverse", "_place_tiles": "placement",
    "_place": "placement", "place2": "placement", "_overlap_add": "placement",
    "bias_filled": "bias fill", "run_save": "overlap-save",
}


class _Rfftn:
    """scipy.fft as the backend sees it, rfftn timed as the input transform."""

    def __init__(self, sfft, spent):
        self._sfft, self._spent = sfft, spent

    def __getattr__(self, name):
        f = getattr(self._sfft, name)
        if name != "rfftn":
            return f

        def timed(*args, **kw):
            t = time.perf_counter()
            try:
                return f(*args, **kw)
            finally:
                self._spent["input transform"] += time.perf_counter() - t
        return timed


def profile(case, calls):
    """Median microseconds per part of a one-shot call and of a prepared call."""
    x, w, kw = _data(case)
    spent = collections.Counter()
    depth = [0]
    saved = {}

    def wrap(name, part):
        f = getattr(fft_mod, name)
        saved[name] = f

        def timed(*args, **kws):
            depth[0] += 1
            t = time.perf_counter()
            try:
                return f(*args, **kws)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    spent[part] += time.perf_counter() - t
        setattr(fft_mod, name, timed)

    for name, part in _PARTS.items():
        if hasattr(fft_mod, name):   # a tree of another version may lack some
            wrap(name, part)
    saved["sfft"] = fft_mod.sfft
    fft_mod.sfft = _Rfftn(saved["sfft"], spent)
    check = plan_mod._fft_in_range

    def in_range(*args):
        t = time.perf_counter()
        try:
            return check(*args)
        finally:
            spent["range check"] += time.perf_counter() - t
    plan_mod._fft_in_range = in_range
    out = {}
    try:
        op = convt.ConvTranspose(w, method="fft", workers=2, **kw)
        for label, f in (("one-shot", lambda: convt.conv_transpose(x, w, method="fft",
                                                                     workers=2, **kw)),
                         ("prepared", lambda: op(x))):
            for _ in range(3):
                f()
            rows = collections.defaultdict(list)
            for _ in range(calls):
                spent.clear()
                t = time.perf_counter()
                f()
                total = time.perf_counter() - t
                for k, v in spent.items():
                    rows[k].append(v)
                rows["rest"].append(total - sum(spent.values()))
                rows["total"].append(total)
            out[label] = {k: statistics.median(v) * 1e6 for k, v in rows.items()}
    finally:
        for name, f in saved.items():
            setattr(fft_mod, name, f)
        plan_mod._fft_in_range = check
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="k9", choices=[*CASES, "all"])
    ap.add_argument("--calls", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    cases = list(CASES) if args.case == "all" else [args.case]
    for case in cases:
        x, w, kw = _data(case)
        geom = convt.explain(x, w, method="fft", workers=2, **kw).geometry
        print(f"{case}: x {x.shape}, w {w.shape} {kw or ''}; one-shot "
              f"{fft_mod.BACKEND.describe(geom, np.float32, one_shot=True)}, prepared "
              f"{fft_mod.BACKEND.describe(geom, np.float32)}")
        for r in range(args.rounds):
            a, b = ratio(case, args.calls)
            ba, bb = min(a) * 1e3, min(b) * 1e3
            ma, mb = statistics.median(a) * 1e3, statistics.median(b) * 1e3
            print(f"  round {r}: one-shot {ba:.3f} / {ma:.3f} ms, prepared {bb:.3f} / "
                  f"{mb:.3f} ms (best / median of {args.calls}); ratio best {ba / bb:.2f}, "
                  f"median {ma / mb:.2f}")
        if args.profile:
            parts = profile(case, args.calls)
            names = sorted(set(parts["one-shot"]) | set(parts["prepared"]),
                           key=lambda k: (k in ("rest", "total"), k == "total", k))
            print(f"  {'part (median us)':20s} {'one-shot':>9s} {'prepared':>9s}")
            for k in names:
                print(f"  {k:20s} {parts['one-shot'].get(k, 0):9.1f} "
                      f"{parts['prepared'].get(k, 0):9.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
