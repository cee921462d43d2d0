"""convt in forked children; run as ``python -m _fork_driver CASE`` (tests/ on sys.path) by
tests/test_fork.py in a subprocess with a timeout, so that a hang fails that test instead of
stalling the suite.

The parent first runs every entry point on 2 threads (so libgomp has a team), then forks in the
way CASE names and the children run them again. Prints one JSON object: whether every child
result equals the parent's bit for bit, and what the children saw (their thread count for a
prepared operator, the single-threaded reason, the warnings).

CASE: ``os.fork``, ``pool`` (multiprocessing's fork Pool), ``executor`` (ProcessPoolExecutor
with the fork context), ``dask`` (Dask's processes scheduler with the fork context),
``other_thread`` (os.fork while another thread's team is alive), ``locks`` (os.fork while
another thread holds convt's locks), ``grandchild`` (a fork of a forked child).
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import threading
import warnings

import numpy as np

import convt
from convt._dispatch import threads as _threads

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 64, 24, 24), dtype=np.float32)
W = RNG.standard_normal((64, 32, 4, 4), dtype=np.float32)
B = RNG.standard_normal(32, dtype=np.float32)
X1 = RNG.standard_normal((1, 8, 300), dtype=np.float64)     # FFT: a long kernel at stride 1
W1 = RNG.standard_normal((8, 8, 63), dtype=np.float64)
OP = convt.ConvTranspose(W, B, strides=(2, 2), pads=(1, 1, 1, 1), workers=2)


def entry_points(child=False):
    """Every front end once, each asked for 2 threads. ``prepared_new``: the prepared operator
    on a shape it has not seen in the parent (so the child plans it, under the plan's lock),
    against the one-shot call in the parent."""
    nxc = np.ascontiguousarray(X.transpose(0, 2, 3, 1))
    xoi = np.ascontiguousarray(W.transpose(2, 3, 1, 0))
    return {
        "conv_transpose": convt.conv_transpose(X, W, B, strides=(2, 2), pads=(1, 1, 1, 1),
                                               workers=2),
        "prepared": OP(X),
        "prepared_new": (OP(X[:1]) if child else
                         convt.conv_transpose(X[:1], W, B, strides=(2, 2), pads=(1, 1, 1, 1),
                                              workers=2)),
        "onnx": convt.onnx.conv_transpose(X, W, B, opset=11, strides=[2, 2],
                                          pads=[1, 1, 1, 1], workers=2),
        "openvino": convt.openvino.convolution_backprop_data(
            X, W, strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
            workers=2),
        "onednn": convt.onednn.conv_transpose(nxc, xoi, B, strides=[2, 2], pads_begin=[1, 1],
                                              pads_end=[1, 1], dilations=[1, 1], workers=2),
        "fft": convt.conv_transpose(X1, W1, method="fft", workers=2),
    }


def child_report(_=None):
    """Run every entry point; return (results, what this process saw)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = entry_points(child=True)
    single, _teams = _threads.state()
    seen = {"pid": os.getpid(), "prepared_workers": OP.workers, "single": single,
            "warnings": [str(w.message) for w in caught]}
    return results, seen


def _compare(parent, results):
    return {k: bool(np.array_equal(parent[k], results[k])) for k in parent}


def _in_child(fn):
    """Fork; the child runs ``fn()`` and sends back its JSON-able result, which this returns."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # never return into the parent's code from here
        os.close(r)
        try:
            os.write(w, json.dumps(fn()).encode())
        except BaseException as e:
            os.write(w, json.dumps({"error": repr(e), "exact": {"child": False}}).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data)


def _fork_and_report(parent):
    def report():
        results, seen = child_report()
        return {**seen, "exact": _compare(parent, results)}

    return _in_child(report)


def _fork_while(start, end):
    """Fork and report while another thread, having run ``start()``, waits; then ``end()``."""
    started, stop = threading.Event(), threading.Event()

    def other():
        start()
        started.set()
        stop.wait()
        end()

    t = threading.Thread(target=other)
    t.start()
    started.wait()
    try:
        return _fork_and_report(PARENT)
    finally:
        stop.set()
        t.join()


def _dask_child(block):
    results, seen = child_report()
    return np.array([json.dumps({**seen, "exact": _compare(PARENT, results)})], dtype=object)


def run(case):
    global PARENT
    PARENT = entry_points()   # the parent's team exists from here on
    if case == "os.fork":
        return [_fork_and_report(PARENT)]
    if case in ("pool", "executor"):
        ctx = mp.get_context("fork")
        if case == "pool":
            with ctx.Pool(2) as pool:
                outs = pool.map(child_report, range(2))
        else:
            from concurrent.futures import ProcessPoolExecutor
            with ProcessPoolExecutor(2, mp_context=ctx) as ex:
                outs = list(ex.map(child_report, range(2)))
        return [{**seen, "exact": _compare(PARENT, res)} for res, seen in outs]
    if case == "dask":
        import dask
        import dask.array as da

        # By reference (cloudpickle would pickle a function of __main__ by value, with the
        # operator's locks): the forked workers find this module, with PARENT, already loaded.
        import _fork_driver as module

        module.PARENT = PARENT
        with dask.config.set({"multiprocessing.context": "fork"}):
            arr = da.arange(2, chunks=1).map_blocks(module._dask_child, dtype=object)
            outs = arr.compute(scheduler="processes", num_workers=2)
        return [json.loads(s) for s in outs]
    if case == "other_thread":
        # Another thread ran convt on 2 threads (its team is alive) when the fork happens.
        return [_fork_while(lambda: convt.conv_transpose(X, W, strides=(2, 2), workers=2),
                            lambda: None)]
    if case == "locks":
        # Another thread holds convt's locks (as if it were planning, tuning or inside the
        # GEMM variant) at the moment of the fork: the child must not wait for them.
        from convt._backends import blas
        from convt._dispatch import constants, tune
        from convt._dispatch import plan as plan_module

        held = [OP._plan._lock, tune._lock, plan_module._DECISIONS_LOCK,
                constants._CACHE_LOCK, blas._LOCK]
        return [_fork_while(lambda: [lock.acquire() for lock in held],
                            lambda: [lock.release() for lock in held])]
    if case == "grandchild":
        # the child starts a team of its own, then forks
        return [_in_child(lambda: (child_report(), _fork_and_report(PARENT))[1])]
    raise SystemExit(f"unknown case {case!r}")


PARENT = None

if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1])))
