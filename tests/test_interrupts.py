"""A call cut short by an exception from a signal handler (Ctrl-C's KeyboardInterrupt, an alarm)
leaves nothing behind: no lock held, no half-built plan or workspace, no tuning entry from an
unfinished measurement. The next calls give the same bits as before."""
import gc
import os
import random
import signal

import numpy as np
import pytest

import convt
from convt._dispatch import constants, tune
from convt._dispatch import plan as plan_module
from convt._dispatch.workspace import one_shot_workspace

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")


class _Interrupted(Exception):
    pass


def _raise(signum, frame):
    raise _Interrupted


def _interrupt_many(calls, want, seed, limit=5000):
    """Run ``calls`` in turns, each under an alarm 0.02-0.5 ms away, until ``want`` of them were
    cut short (or ``limit`` calls); return how many were cut."""
    rng = random.Random(seed)
    old = signal.signal(signal.SIGALRM, _raise)
    cut = 0
    try:
        for i in range(limit):
            if cut >= want:
                break
            try:
                try:
                    signal.setitimer(signal.ITIMER_REAL, rng.uniform(2e-5, 5e-4))
                    calls[i % len(calls)]()
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except _Interrupted:   # in the call, or between it and the timer's reset
                cut += 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return cut


# An alarm may also land in a weakref callback or a finalizer, where Python reports the
# exception as unraisable instead of propagating it: expected here, not a failure.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_calls_cut_short_by_a_signal_leave_no_state_behind(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 32, 12, 12), dtype=np.float32)
    w = rng.standard_normal((32, 16, 4, 4), dtype=np.float32)
    x1 = rng.standard_normal((1, 4, 200))
    w1 = rng.standard_normal((4, 4, 41))
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    expect = {"one_shot": convt.conv_transpose(x, w, **kw),
              "fft": convt.conv_transpose(x1, w1, method="fft")}
    convt.use_tuning_store(str(tmp_path))
    try:
        ops = [convt.ConvTranspose(w, **kw) for _ in range(3)]
        tuned = convt.ConvTranspose(w, method="tune", **kw)
        calls = [lambda: convt.conv_transpose(x, w, **kw),
                 lambda: convt.conv_transpose(x1, w1, method="fft"),
                 lambda: ops[0](x), lambda: ops[1](x[:1]), lambda: ops[2](x),
                 lambda: tuned(x), lambda: convt.ConvTranspose(w, **kw)(x)]
        cut = _interrupt_many(calls, 100, seed=1)
        assert cut >= 100, cut   # the alarms did land inside calls
        # An alarm inside contextlib's __enter__ leaves a borrowed workspace to the generator's
        # finalizer, which may sit in a reference cycle with the traceback until the cyclic
        # collector runs (meanwhile a call just uses fresh buffers). What must not happen is a
        # lock that no collection releases.
        gc.collect()

        for lock in (tune._lock, plan_module._DECISIONS_LOCK, constants._CACHE_LOCK):
            assert not lock.locked()
        assert not any(gate.locked() for gate in tune._tuning.values())
        assert not one_shot_workspace()._lock.locked()   # the one-shot calls' workspace
        for op in ops + [tuned]:
            assert not op._plan._lock.locked()
            assert not op._plan.workspace._lock.locked()
            np.testing.assert_array_equal(op(x), expect["one_shot"])
            np.testing.assert_array_equal(op(x[:1]), expect["one_shot"][:1])
        np.testing.assert_array_equal(convt.conv_transpose(x, w, **kw), expect["one_shot"])
        np.testing.assert_array_equal(convt.conv_transpose(x1, w1, method="fft"), expect["fft"])
        for key, entry in tune._entries.items():   # only finished measurements were recorded
            assert entry["method"] in ("direct", "fft") and entry["seconds"], (key, entry)
    finally:
        convt.use_tuning_store(enable=False)
        convt.forget_tuning()


def test_a_process_interrupted_mid_call_exits_cleanly():
    # Ctrl-C during a long call: the interpreter must still exit (no thread left waiting).
    import subprocess
    import sys

    code = ("import signal, numpy as np, convt\n"
            "x = np.ones((4, 64, 64, 64), np.float32); w = np.ones((64, 64, 4, 4), np.float32)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.05)\n"
            "signal.signal(signal.SIGALRM, signal.default_int_handler)\n"
            "try:\n"
            "    for _ in range(100): convt.conv_transpose(x, w, strides=(2, 2))\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
         os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "interrupted"
