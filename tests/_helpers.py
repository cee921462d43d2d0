"""Helpers for tests: the reference at canonical pads, independent of any front end; the
checks of 16-bit results (bits, the float32 result rounded, no narrowing pass)."""

import numpy as np

import convt
from convt._geometry.geometry import Geometry, OpSpec, PadRule, resolve
from convt._backends.reference import conv_transpose_reference
from convt._dispatch import plan as _plan


def reference_at(x_ncx, w_iox, b, strides, dilations, pb, pe, groups=1):
    """Reference output at canonical pads (pb, pe) -- the oracle for every front end."""
    nd = w_iox.ndim - 2
    in_shape, kernel = x_ncx.shape[2:], w_iox.shape[2:]
    full = [(i - 1) * s + (k - 1) * d + 1 for i, s, k, d in zip(in_shape, strides, kernel,
                                                                 dilations)]
    geom = Geometry(batch=x_ncx.shape[0], c_in=x_ncx.shape[1], c_out=w_iox.shape[1] * groups,
                    groups=groups, in_shape=tuple(in_shape),
                    out_shape=tuple(f - a - e for f, a, e in zip(full, pb, pe)),
                    kernel=tuple(kernel), strides=tuple(strides), dilations=tuple(dilations),
                    pads_begin=tuple(pb), pads_end=tuple(pe))
    assert geom.ndim == nd
    return conv_transpose_reference(x_ncx, w_iox, b, geom)


def random_geometries(n, seed, channels, keep):
    """``n`` resolved geometries drawn from ``seed``: ranks 1-3, kernels 1-5, strides 1-4,
    dilations 1-3, 1 or 2 groups, explicit pads -1 to 3, batch 1-4, inputs 1-11, NCX and NXC
    in turn; ``channels(rng, groups)`` draws (C_in, C_out). Draws that do not resolve, or
    that ``keep(geom)`` rejects, are skipped."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        nd = int(rng.integers(1, 4))
        ints = lambda lo, hi: tuple(int(v) for v in rng.integers(lo, hi, nd))
        groups = int(rng.choice([1, 2]))
        kernel, strides, dilations = ints(1, 6), ints(1, 5), ints(1, 4)
        c_in, c_out = channels(rng, groups)
        spec = OpSpec("t", kernel, strides, dilations, groups, c_in, c_out,
                      PadRule("explicit", (0,) * nd, ints(-1, 4), ints(-1, 4)),
                      data_format=("NCX", "NXC")[len(out) % 2])
        try:
            geom = resolve(spec, (int(rng.integers(1, 5)), spec.c_in, *ints(1, 12)))
        except (ValueError, AttributeError):
            continue
        if keep(geom):
            out.append(geom)
    return out


def spy(monkeypatch, module, name):
    """Replace ``module.name`` for the test by a wrapper that records each call's positional
    arguments in the returned list, then calls the original."""
    calls, real = [], getattr(module, name)

    def recording(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, recording)
    return calls


def same_bits(a, b):
    """Whether ``a`` and ``b`` have the same dtype, shape and bits (NaN payloads and the
    sign of zero included)."""
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}"))


def float32_rounded(x, w, b, kw, workers=1, pin=None):
    """The float32 call (method "direct"; the variant ``pin`` when given) on the widened
    arrays, rounded to x's dtype by astype (NumPy for float16, ml_dtypes for bfloat16): the
    bits a 16-bit call must give."""
    f = np.float32
    op = convt.ConvTranspose(w.astype(f), None if b is None else b.astype(f), method="direct",
                             workers=workers, **kw)
    if pin is not None:
        op._plan.pin = pin
    return op(x.astype(f)).astype(x.dtype)


def micro_ops(w, b, kw, workers):
    """The operators of (w, b) as they are and widened to float32, both on the micro variant
    (method "direct", pinned): a 16-bit call and the float32 call its bits must round."""
    ops = []
    for ww, bb in ((w, b), (w.astype(np.float32), b.astype(np.float32))):
        op = convt.ConvTranspose(ww, bb, method="direct", workers=workers, **kw)
        op._plan.pin = ("micro", False)
        ops.append(op)
    return ops


def strict_deliver(real):
    """``real`` (the plan's deliver) failing on a 16-bit result; float32 calls still take it."""
    def deliver(y, dtype, out, workers=1):
        if np.dtype(dtype).itemsize == 2:
            raise AssertionError(f"a 16-bit result ({y.dtype} y) took the narrowing pass")
        return real(y, dtype, out, workers)
    return deliver


def refuse_narrowing(monkeypatch):
    """From here on, a 16-bit call whose result the plan's narrowing pass (``deliver``)
    rounds fails: its kernel must round each value as it stores it."""
    monkeypatch.setattr(_plan, "deliver", strict_deliver(_plan.deliver))
