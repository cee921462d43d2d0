"""The backends, by method name: one table, as scipy.fft's ``_backend`` names its own.

Each implements the protocol of ``convt._backends.base``. "auto" and "tune" choose among
those that estimate themselves; "reference" runs only when asked for.
"""
from . import fft, reference
from .direct.registry import BACKEND as _DIRECT

__all__ = ["BACKENDS"]

BACKENDS = {
    "direct": _DIRECT,
    "fft": fft.BACKEND,
    "reference": reference.BACKEND,
}
