"""convt.translate's emitted code, run with the real destination framework (torch, TensorFlow,
Keras, jax: each skipped when it is not installed), reproduces the source's output, computed
by convt's source front end, for random calls of every source convention this convt has.
Float32 in the frameworks (jax's default; TF's CPU kernels take dilation in float32 only)."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import convt

from _translate_cases import ALL, available, draw

SOURCES = [s for s in ALL if available(s)]
FRAMEWORKS = {"torch": "torch", "tensorflow": "tensorflow", "keras": "keras", "jax": "jax"}


def _namespace(dst):
    """The module names a translation's code uses, and a numpy -> tensor converter."""
    mod = pytest.importorskip(FRAMEWORKS[dst])
    if dst == "torch":
        return {"torch": mod}, mod.from_numpy
    if dst == "tensorflow":
        return {"tf": mod}, mod.constant
    if dst == "keras":
        return {"keras": mod}, mod.ops.convert_to_tensor
    importlib.import_module("jax.numpy")
    return {"jax": mod}, mod.numpy.asarray


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dst", list(FRAMEWORKS))
@pytest.mark.parametrize("src", SOURCES)
def test_code_runs_in_the_framework(src, dst, seed):
    ns, tensor = _namespace(dst)
    rng = np.random.default_rng([seed, 7, ALL.index(src), ALL.index(dst)])
    case, arrays, y = draw(src, rng)
    try:
        t = convt.translate(src, dst, case.x_shape, case.w_shape, case.bias_shape, **case.attrs)
    except ValueError as e:
        assert "'groups' cannot be expressed" in str(e)
        return
    x, w, b = (None if a is None else tensor(a.astype(np.float32)) for a in arrays)
    try:
        got = np.asarray(eval(t.code, dict(ns, x=x, w=w, b=b)))
    except Exception:
        if not t.notes:
            raise
        pytest.skip(t.notes[0])   # e.g. TF's CPU kernels and dilation: the note says so
    assert got.shape == y.shape, t.code
    scale = max(1.0, float(np.abs(y).max()))
    np.testing.assert_allclose(got, y, rtol=0, atol=1e-4 * scale, err_msg=t.code)
