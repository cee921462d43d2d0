"""The FFT backend (``method="fft"``) against the direct one, over kernel sizes.

``KernelSweep2D`` (x (1, 16, 128, 128), K x K kernels, 16 -> 16 channels, stride 1) and
``KernelSweep1D`` (x (4, 8, 16000), 8 -> 8 channels, stride 1) time both methods per kernel size,
so the crossover shows as two crossing lines in one asv graph; ``LargeKernel`` times the two
large-kernel workloads of the peer harness. ``AutoRegret`` tracks the dispatcher (STYLE.md):
time(the method "auto" picks) / time(fastest of "direct", "fft"), 1.0 when it picks right.

Where convt has no ``method="fft"`` (commits before the FFT backend) the fft cases are skipped.
"""
import time
from functools import partial

import numpy as np

import convt

from .common import LARGE_KERNEL, WORKLOADS, attrs, make_inputs

METHODS = ["direct", "fft"]


def _sweep(x, k):
    """Stride-1 layer, C -> C channels, a K^D kernel."""
    return dict(x=x, w=(x[1], x[1]) + (k,) * (len(x) - 2))


CASES = {
    **{f"2d_k{k}": _sweep((1, 16, 128, 128), k) for k in (3, 7, 15, 31, 63)},
    **{f"1d_k{k}": _sweep((4, 8, 16000), k) for k in (15, 63, 255, 1023)},
    **{name: WORKLOADS[name] for name in LARGE_KERNEL},
}


def prepared(shapes, method):
    """(op, x) for one case, planned and warmed up; skips when convt has no such method."""
    x, w, b = make_inputs(shapes)
    try:
        op = convt.ConvTranspose(w, b, method=method, **attrs(shapes))
    except ValueError as e:
        # Construction rejects an unknown method (convt before the FFT backend) with a
        # ValueError naming 'method'; any other error is a real failure.
        if "method" not in str(e):
            raise
        raise NotImplementedError(f"convt has no method={method!r}: {e}")
    op(x)  # plans the shape (FFT: kernel spectra) outside the timed call
    return op, x


class _Methods:
    # Direct calls on the largest kernels take seconds (2d_k63: ~3.5 s on 2 cores).
    number = 1
    repeat = (1, 5, 6.0)
    timeout = 180
    param_names = ["case", "method"]

    def setup(self, case, method):
        self.op, self.x = prepared(CASES[case], method)

    def time_prepared(self, case, method):
        self.op(self.x)


class KernelSweep2D(_Methods):
    params = [[c for c in CASES if c.startswith("2d_")], METHODS]


class KernelSweep1D(_Methods):
    params = [[c for c in CASES if c.startswith("1d_")], METHODS]


class LargeKernel(_Methods):
    """The two large-kernel layers: prepared and one-shot time, and peak memory (the FFT
    backend's kernel spectra are ~27x the weights on large_k31_s1, docs/fft.md)."""

    params = [list(LARGE_KERNEL), METHODS]

    def setup(self, case, method):
        super().setup(case, method)
        _, self.w, self.b = make_inputs(CASES[case])
        self.kwargs = attrs(CASES[case])

    def time_oneshot(self, case, method):
        # conv_transpose plans in the call: for FFT that includes the kernel spectra.
        convt.conv_transpose(self.x, self.w, self.b, method=method, **self.kwargs)

    def peakmem_prepared(self, case, method):
        self.op(self.x)

    def peakmem_oneshot(self, case, method):
        convt.conv_transpose(self.x, self.w, self.b, method=method, **self.kwargs)


def _best_interleaved(calls, rounds=7, budget=1.0):
    """Best time of each call, over rounds that run every call once (so that load from the
    shared machine hits all of them alike), stopping after ``budget`` seconds."""
    best = dict.fromkeys(calls, np.inf)
    start = time.perf_counter()
    for _ in range(rounds):
        for name, f in calls.items():
            t = time.perf_counter()
            f()
            best[name] = min(best[name], time.perf_counter() - t)
        if time.perf_counter() - start > budget:
            break
    return best


class AutoRegret:
    """time(method auto picks) / time(fastest method): 1.0 when "auto" picks the faster one.

    Both methods are timed interleaved; the "auto" operator is only asked which method it
    picks (``method_for``), so noise between two runs of the same backend cannot read as regret.
    """

    params = [list(CASES)]
    param_names = ["case"]
    unit = "time(auto's method) / time(fastest)"
    timeout = 180

    def setup(self, case):
        shapes = CASES[case]
        self.calls = {m: partial(*prepared(shapes, m)) for m in METHODS}
        x, w, b = make_inputs(shapes)
        self.choice = convt.ConvTranspose(w, b, **attrs(shapes)).method_for(x.shape)

    def track_auto_regret(self, case):
        t = _best_interleaved(self.calls)
        return t[self.choice] / min(t.values())
