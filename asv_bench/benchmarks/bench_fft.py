"""The FFT backend (``method="fft"``) against the direct one, over kernel sizes.

``KernelSweep2D`` (x (1, 16, 128, 128), K x K kernels, 16 -> 16 channels, stride 1) and
``KernelSweep1D`` (x (4, 8, 16000), 8 -> 8 channels, stride 1) time both methods per kernel size,
so the crossover shows as two crossing lines in one asv graph; ``LargeKernel`` times the two
large-kernel workloads of the peer harness. The dispatcher's regret is tracked in
``bench_dispatch.py``.

Where convt has no ``method="fft"`` (commits before the FFT backend) the fft cases are skipped.
"""
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



ONE_SHOT_CASES = {
    # issue 38's two cases: a one-shot call pays its kernel spectra (docs/fft.md)
    "2d_c32_k9": dict(x=(1, 32, 48, 48), w=(32, 32, 9, 9)),
    "1d_c8_k45": dict(x=(2, 8, 4000), w=(8, 8, 45)),
}


class OneShotOverPrepared:
    """time(one-shot FFT call) / time(prepared FFT call), best of interleaved calls: what
    computing the kernel spectra in the call costs (target of issue 38: at most 1.5)."""

    params = [list(ONE_SHOT_CASES)]
    param_names = ["case"]
    unit = "ratio"
    timeout = 120

    def setup(self, case):
        shapes = ONE_SHOT_CASES[case]
        self.op, self.x = prepared(shapes, "fft")
        _, self.w, self.b = make_inputs(shapes)

    def track_ratio(self, case):
        import time

        one, prep = [], []
        for _ in range(15):
            t = time.perf_counter()
            convt.conv_transpose(self.x, self.w, self.b, method="fft")
            one.append(time.perf_counter() - t)
            t = time.perf_counter()
            self.op(self.x)
            prep.append(time.perf_counter() - t)
        return min(one) / min(prep)


LONG_SIGNALS = {
    # 1-D signals from 16,000 to 1,048,576 samples (docs/fft.md, "Overlap-save")
    "n4_c8_i16000_k255": dict(x=(4, 8, 16000), w=(8, 8, 255)),
    "n1_c8_i262144_k255": dict(x=(1, 8, 262144), w=(8, 8, 255)),
    "n1_c4_i1048576_k511": dict(x=(1, 4, 1048576), w=(4, 4, 511)),
}


class LongSignal:
    """Prepared and one-shot FFT calls on long 1-D signals with overlap-save blocks forced on
    ("on"), ruled out ("off") or left to the cost model ("model"): the model should follow
    the faster of the first two. Skipped where convt has no ``FFT_OVERLAP_SAVE``."""

    params = [list(LONG_SIGNALS), ["model", "on", "off"]]
    param_names = ["case", "save"]
    number = 1
    repeat = (1, 7, 6.0)
    timeout = 120

    def setup(self, case, save):
        import convt._backends.fft as fft_mod

        if not hasattr(fft_mod, "FFT_OVERLAP_SAVE"):
            raise NotImplementedError("convt has no overlap-save path")
        self.mod, self.old = fft_mod, fft_mod.FFT_OVERLAP_SAVE
        fft_mod.FFT_OVERLAP_SAVE = {"model": None, "on": True, "off": False}[save]
        shapes = LONG_SIGNALS[case]
        self.op, self.x = prepared(shapes, "fft")
        _, self.w, self.b = make_inputs(shapes)

    def teardown(self, case, save):
        self.mod.FFT_OVERLAP_SAVE = self.old

    def time_prepared(self, case, save):
        self.op(self.x)

    def time_oneshot(self, case, save):
        convt.conv_transpose(self.x, self.w, self.b, method="fft")
