"""``convt.explain``: what the dispatcher decides for one call, and why (printable)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import tune as _tune
from .._backends import BACKENDS
from .._backends.direct.registry import describe
from .._geometry.geometry import resolve
from .constants import rate_sources
from .guard import check_range
from .plan import fft_in_range, pick, tune_candidates

__all__ = ["Explanation", "explain_plan"]


@dataclass(frozen=True)
class Explanation:
    """The dispatcher's decision for one input shape; ``str()`` formats it.

    `explain` and `ConvTranspose.explain` make it; each parameter is kept as the (read-only)
    attribute of the same name.

    Parameters
    ----------
    geometry : Geometry
        The resolved canonical geometry (pads, output shape, layout).
    method : str
        The method asked for ("auto", "tune", "direct", "fft" or "reference").
    choice : str
        The backend that runs.
    reason : str
        Why that backend.
    estimates : dict
        Estimated seconds per backend ("direct", "fft"; None where not estimated).
    direct : str
        What the direct backend runs on this geometry (variant and mode).
    threads : int
        Threads of the direct kernels (workers, or one for small work).
    workers : int or None
        The ``workers`` the operator was made with (None: OpenMP's default).
    dtype : str
        Storage dtype (float16 and bfloat16 compute in float32).
    measured : dict or None, optional
        Seconds per backend that tuning measured, when this shape's signature is tuned.
    split : dict or None, optional
        Per estimated backend, (seconds of a prepared call, seconds of a one-shot call,
        seconds of the one-shot call's set-up): a one-shot call computes the FFT's kernel
        spectra (with its own, shorter, transforms) and packs the direct backend's
        weights. ``estimates`` holds the one this operator makes (one-shot for
        `convt.explain` and `convt.conv_transpose`).
    rates : dict or None, optional
        Where the cost model's compute rates come from, per constant: this machine's FMA
        peak probe (rescaled, or the shipped value when the peak is within the dead band of
        the machine they were fitted on), or a calibration (docs/dispatch.md).
    tilings : dict or None, optional
        Per estimated backend that tiles its transforms (the FFT), (the tiling of a
        prepared call, that of a one-shot call), in words: one transform, overlap-add tiles
        or overlap-save blocks, and their lengths (a one-shot call, which computes its
        kernel spectra, may prefer shorter ones).

    Examples
    --------
    >>> import numpy as np, convt
    >>> w = np.ones((4, 2, 3, 3), np.float32)
    >>> e = convt.explain((1, 4, 5, 5), w, strides=(2, 2), method="fft", workers=1)
    >>> e.method, e.choice, e.reason
    ('fft', 'fft', 'forced by the caller')
    >>> e.geometry.out_shape, e.dtype, e.workers, sorted(e.estimates)
    ((11, 11), 'float32', 1, ['direct', 'fft'])
    >>> print(e)  # doctest: +ELLIPSIS
    geometry: batch 1, 4 -> 2 channels, groups 1, NCX, input (5, 5) -> output (11, 11)
      kernel (3, 3), strides (2, 2), dilations (1, 1), pads_begin (0, 0), pads_end (0, 0)
    dtype float32, workers 1 (direct kernels: 1 thread)
    estimated time per backend (cost model):
    ...
    method='fft' -> fft: forced by the caller
    """
    geometry: object
    method: str
    choice: str
    reason: str
    estimates: dict
    direct: str
    threads: int
    workers: int
    dtype: str
    measured: dict | None = None
    split: dict | None = None
    rates: dict | None = None
    tilings: dict | None = None

    def __str__(self):
        g = self.geometry
        lines = [
            f"geometry: batch {g.batch}, {g.c_in} -> {g.c_out} channels, groups {g.groups}, "
            f"{g.data_format}, input {g.in_shape} -> output {g.out_shape}",
            f"  kernel {g.kernel}, strides {g.strides}, dilations {g.dilations}, "
            f"pads_begin {g.pads_begin}, pads_end {g.pads_end}",
            f"dtype {self.dtype}, workers {self.workers} (direct kernels: {self.threads} "
            f"thread{'s' if self.threads > 1 else ''})",
            "estimated time per backend (cost model):"]
        for m, t in self.estimates.items():
            what = f"  [{self.direct}]" if m == "direct" else ""
            both = (self.split or {}).get(m)
            if t is not None and both is not None:
                t = f"{_ms(both[0])} prepared, {_ms(both[1])} one-shot"
                if len(both) > 2:
                    t += f" (of which set-up {_ms(both[2])})"
            tiling = (self.tilings or {}).get(m)
            if t is not None and tiling is not None:
                what += (f"  [{tiling[0]}]" if tiling[0] == tiling[1] else
                         f"  [prepared: {tiling[0]}; one-shot: {tiling[1]}]")
            lines.append(f"  {m:8s} " + ("not estimated" if t is None else
                                         t if isinstance(t, str) else _ms(t)) + what)
        if self.rates:
            lines.append("compute rates: " + "; ".join(
                f"{k.split('_')[0]} {v}" for k, v in self.rates.items()))
        if self.measured:
            lines.append("measured by tuning (best of):")
            lines += [f"  {m:8s} {_ms(t)}" for m, t in self.measured.items()]
        lines.append(f"method={self.method!r} -> {self.choice}: {self.reason}")
        return "\n".join(lines)


def _ms(t):
    return f"{t * 1e3:.3f} ms"


def explain_plan(plan, x_shape, xa=None):
    """The ``Explanation`` of ``plan`` on inputs of ``x_shape`` (tunes nothing, runs nothing).
    ``xa``: the input itself, when known: an FFT call whose input or weights hold NaN, Inf
    or values its transforms could overflow on runs on the direct backend (shape only: the
    weights alone decide)."""
    geom = resolve(plan.spec, tuple(x_shape))
    check_range(plan.spec.convention, geom, plan.spec.input_name)
    est = plan.estimate(geom)
    direct = describe(est.direct)
    measured = None
    if plan.method in ("direct", "fft", "reference"):
        choice, reason = plan.method, "forced by the caller"
    else:
        choice = pick(est)
        reason = _auto_reason(est, choice)
        if plan.method == "tune":
            cands = tune_candidates(est)
            key = _tune.signature(geom, plan.dtype, plan.workers)
            entry = _tune.lookup(key) if len(cands) > 1 else None
            if len(cands) == 1:
                reason = (f"the only candidate within the tuning window (the other estimates "
                          f"are over {_tune_within()}x slower); " + reason)
            elif entry is not None:
                measured = entry["seconds"]
                choice = entry["method"]
                reason = "measured fastest when this shape signature was tuned"
            else:
                reason = (f"not tuned yet: the first call times {', '.join(cands)}; "
                          f"until then the cost model says: {reason}")
    if choice == "fft" and not fft_in_range(xa if xa is not None else np.zeros(0), geom, plan):
        choice = "direct"
        reason = (f"the FFT would run ({reason}), but the {'input or ' if xa is not None else ''}"
                  "weights hold NaN, Inf or values its transforms could overflow on, so the "
                  "call runs on the direct backend (docs/reliability.md)")
    tilings = {name: tuple(BACKENDS[name].describe(geom, plan.compute_dtype, one)
                           for one in (False, True))
               for name, t in est.seconds.items()
               if t is not None and name != "direct" and hasattr(BACKENDS[name], "describe")}
    return Explanation(geometry=geom, method=plan.method, choice=choice, reason=reason,
                       estimates=dict(est.seconds), direct=direct, threads=est.threads,
                       workers=plan.workers, dtype=plan.dtype.name, measured=measured,
                       split=dict(est.split), rates=rate_sources(), tilings=tilings)


def _tune_within():
    from . import plan as _plan

    return f"{_plan._TUNE_WITHIN:g}"


def _auto_reason(est, choice):
    d, f = est.seconds["direct"], est.seconds["fft"]
    if f is None:
        return est.note
    if choice == "fft":
        return f"the FFT estimate is {d / f:.2f}x faster than the direct one"
    return f"the direct estimate is {f / d:.2f}x faster than the FFT one" if d <= f else \
        "the FFT is not enough faster to leave the exact direct kernel"
