"""The canonical API: ONNX opset-11 attribute semantics plus layouts, one-shot or prepared."""
from __future__ import annotations

import numpy as np

from ._dispatch import calibrate as _calibrate
from ._geometry.dtypes import ALL_FLOATS, as_array
from ._geometry.frontend import filter_to_iox, intake
from ._geometry.geometry import rank_mismatch
from ._dispatch.plan import Plan, _remember
from ._geometry.validate import bad_type, fail, shape_tuple
from .onnx import onnx_spec

__all__ = ["conv_transpose", "ConvTranspose", "explain", "calibrate"]

_CONV = "conv_transpose"


class ConvTranspose:
    """A prepared transposed convolution: attributes resolved and weights packed once.

    Parameters
    ----------
    w : ndarray of shape (C_in, C_out / group, *kernel)
        Filter, IOX (``filter_format="XOI"``: shape (*kernel, C_out / group, C_in)).
    b : ndarray of shape (C_out,), optional
        Bias, added to every output position (also where no input reaches).
    strides, pads, dilations, output_padding, output_shape, auto_pad, group, kernel_shape
        ONNX ConvTranspose-11 attributes with their defaults. ``pads`` is
        [x1_begin, x2_begin, ..., x1_end, x2_end, ...]; ``output_shape`` is spatial only.
    data_format : {"NCX", "NXC"}, default "NCX"
        Layout of the input and the output: (N, C, *spatial) or (N, *spatial, C).
    filter_format : {"IOX", "XOI"}, default "IOX"
    method : {"auto", "direct", "fft", "reference", "tune"}, default "auto"
        Backend. "direct" is the compiled kernel; "fft" multiplies spectra (``scipy.fft``),
        fast for large kernels at stride 1, with a normwise error (about 3e-7 of the largest
        abs(y) in float32, 1e-15 in float64; small outputs next to large ones lose relative
        accuracy, docs/fft.md); "reference" is the plain NumPy oracle (slow, float64 inside).
        "auto" picks "direct" or "fft" per input shape from a cost model (`explain` says
        why); "tune" times the candidates on the first call of a shape signature and reuses
        the winner (`convt.export_tuning`, docs/dispatch.md). NaN and Inf reach exactly the
        outputs they touch with every method: one NaN in a transform would spread over all of
        its output, so "fft" runs a call whose input or weights hold a non-finite value on
        the direct kernel (docs/reliability.md).
    tune : bool, default False
        Same as ``method="tune"``.
    workers : int, optional
        Threads, as in ``scipy.fft``: None uses OpenMP's default (OMP_NUM_THREADS or all
        cores), a negative value counts back from ``os.cpu_count()``.
    dtype : dtype, optional
        Cast the weights, the bias and every input to this dtype. Without it, mixed dtypes
        are a TypeError.

    Raises
    ------
    ValueError
        Attributes out of the ONNX-11 ranges or inconsistent with the weights (the message
        names ``conv_transpose``, the parameter and the value); at call time, an input whose
        shape does not fit.
    TypeError
        Non-floating or mixed dtypes (without ``dtype=``), wrongly typed attributes.

    Notes
    -----
    float64 computes in float64; float32, float16 and bfloat16 (``ml_dtypes``) accumulate in
    float32 and the result is rounded once to the input dtype. The output has the input's
    dtype and layout and is C-contiguous. Results are bit-identical for any ``workers`` on one
    backend (``method="auto"`` prices the backends per thread count, and may pick another for
    another ``workers``, or for a one-shot call; FFT also tiles a one-shot call its own way:
    pass ``method="direct"`` when the bits must not move), and one operator may be called
    from many Python threads at once (the kernels release the GIL). A call that would need more memory than the machine has is refused with a
    ``MemoryError`` (also a ``ValueError``) before anything is allocated.

    Examples
    --------
    >>> import numpy as np, convt
    >>> rng = np.random.default_rng(0)
    >>> w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    >>> op = convt.ConvTranspose(w, strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1))
    >>> op(rng.standard_normal((2, 8, 16, 16)).astype(np.float32)).shape
    (2, 4, 32, 32)
    """

    # The plan copies w and b (a caller may change them later) and owns its workspace; see
    # _OneShot.
    _one_shot = False

    def __init__(self, w, b=None, *, strides=None, pads=None, dilations=None,
                 output_padding=None, output_shape=None, auto_pad="NOTSET", group=1,
                 kernel_shape=None, data_format="NCX", filter_format="IOX", method="auto",
                 workers=None, dtype=None, tune=False):
        method = _tune_method(method, tune)
        _, w_iox, ba, dt, data_format, self._filter_format = intake(
            _CONV, None, w, b, allowed=ALL_FLOATS, dtype=dtype, names=("x", "w", "b"),
            data_format=data_format, filter_format=filter_format, castable=True)
        self.spec = onnx_spec(_CONV, 11, w_iox, ba, auto_pad=auto_pad, dilations=dilations,
                              group=group, kernel_shape=kernel_shape,
                              output_padding=output_padding, output_shape=output_shape,
                              pads=pads, strides=strides, data_format=data_format,
                              names=("x", "w", "b"))
        self._plan = Plan(self.spec, w_iox, ba, dt, allowed=ALL_FLOATS, method=method,
                          workers=workers, cast=dtype is not None, one_shot=self._one_shot,
                          castable=True)

    @property
    def dtype(self):
        """Storage dtype of the weights, of accepted inputs and of results.

        Examples
        --------
        >>> import numpy as np, convt
        >>> convt.ConvTranspose(np.ones((2, 2, 3), np.float16)).dtype
        dtype('float16')
        """
        return self._plan.dtype

    @property
    def workers(self):
        """Threads the kernels use (``workers=None`` resolved to OpenMP's default).

        Examples
        --------
        >>> import numpy as np, convt
        >>> convt.ConvTranspose(np.ones((2, 2, 3), np.float32), workers=1).workers
        1
        """
        return self._plan.workers

    def _shape(self, x_shape):
        # the shape-taking methods' argument, checked before it keys the plan's caches
        return shape_tuple(self._plan.spec.convention, "x_shape", x_shape)

    def method_for(self, x_shape):
        """The backend this operator runs on inputs of ``x_shape``.

        Parameters
        ----------
        x_shape : sequence of int
            Shape of an input array (``x.shape``), in the operator's ``data_format``; a
            float, bool or negative length is a ``TypeError`` / ``ValueError``. The input's
            values are not known here: where the FFT would run, weights holding NaN, Inf
            or values its transforms could overflow on make the call run on the direct
            backend, and the explanation says so; an input that does the same is
            explained by `convt.explain` given the input.

        Returns
        -------
        str
            "direct", "fft" or "reference": the forced method, or the one ``method="auto"``
            picks for this shape.

        Examples
        --------
        >>> import numpy as np, convt
        >>> op = convt.ConvTranspose(np.ones((4, 4, 3, 3), np.float32), strides=(2, 2))
        >>> op.method_for((1, 4, 16, 16))
        'direct'
        """
        return self._plan.geometry(self._shape(x_shape)).method

    def explain(self, x_shape):
        """What runs on inputs of ``x_shape``, and why.

        Tunes and runs nothing: with ``method="tune"``, a shape signature not tuned yet is
        explained by the cost model and names the candidates its first call will time.

        Parameters
        ----------
        x_shape : sequence of int
            Shape of an input array (``x.shape``), in the operator's ``data_format``; a
            float, bool or negative length is a ``TypeError`` / ``ValueError``.

        Returns
        -------
        Explanation
            The resolved geometry, the estimated time per backend, the backend that runs and
            why; ``print`` it.

        Raises
        ------
        ValueError
            A shape this operator cannot take: rank or channels not matching the filter, an
            empty spatial axis, or pads that leave no output.

        Examples
        --------
        >>> import numpy as np, convt
        >>> op = convt.ConvTranspose(np.ones((4, 2, 3, 3), np.float32), strides=(2, 2),
        ...                          workers=1)
        >>> e = op.explain((1, 4, 5, 5))
        >>> e.geometry.out_shape, e.method, e.choice in ("direct", "fft")
        ((11, 11), 'auto', True)
        >>> print(e)  # doctest: +ELLIPSIS
        geometry: batch 1, 4 -> 2 channels, groups 1, NCX, input (5, 5) -> output (11, 11)
        ...
        method='auto' -> ...
        """
        from ._dispatch.explain import explain_plan

        return explain_plan(self._plan, self._shape(x_shape))

    def geometry(self, x_shape):
        """The canonical geometry of this operator on inputs of ``x_shape``.

        Parameters
        ----------
        x_shape : sequence of int
            Shape of an input array (``x.shape``), in the operator's ``data_format``; a
            float, bool or negative length is a ``TypeError`` / ``ValueError``.

        Returns
        -------
        Geometry
            Frozen, convention-free description of the call: ``batch``, ``c_in``, ``c_out``,
            ``groups``, ``in_shape``, ``out_shape``, ``kernel``, ``strides``, ``dilations``
            and the resolved ``pads_begin`` / ``pads_end`` (either may be negative).

        Examples
        --------
        >>> import numpy as np, convt
        >>> op = convt.ConvTranspose(np.ones((4, 4, 3, 3), np.float32), strides=(2, 2),
        ...                          auto_pad="SAME_UPPER")
        >>> g = op.geometry((1, 4, 5, 5))
        >>> g.out_shape, g.pads_begin, g.pads_end
        ((10, 10), (0, 0), (1, 1))
        """
        return self._plan.geometry(self._shape(x_shape)).geom

    def __call__(self, x, out=None):
        """Apply the transposed convolution to ``x``.

        Parameters
        ----------
        x : ndarray of shape (N, C_in, *spatial)
            Input, (N, *spatial, C_in) for ``data_format="NXC"``; any spatial size and batch,
            any memory order. Its dtype must be the operator's (unless ``dtype=`` was given).
        out : ndarray, optional
            C-contiguous array of the result's shape and dtype, sharing no memory with ``x``;
            the result is written there and ``out`` is returned.

        Returns
        -------
        ndarray of shape (N, C_out, *out_spatial)
            C-contiguous, in the input's dtype and layout (``out`` when given).

        Raises
        ------
        ValueError
            ``x`` has the wrong rank or number of channels, or its shape gives no output;
            ``out`` has the wrong shape or overlaps ``x``; the call would need more memory
            than the machine has.
        TypeError
            ``x`` is not a floating array of the operator's dtype; ``out`` is not an ndarray
            of that dtype.

        Examples
        --------
        >>> import numpy as np, convt
        >>> op = convt.ConvTranspose(np.ones((1, 1, 2), np.float32), strides=(2,))
        >>> op(np.array([[[1, 2, 3]]], np.float32))
        array([[[1., 1., 2., 2., 3., 3.]]], dtype=float32)
        """
        return self._plan(x, out)

    def __repr__(self):
        s = self.spec
        return (f"ConvTranspose(c_in={s.c_in}, c_out={s.c_out}, kernel={s.kernel}, "
                f"strides={s.strides}, dilations={s.dilations}, groups={s.groups}, "
                f"dtype={self.dtype.name}, data_format={s.data_format!r}, "
                f"method={self._plan.method!r}, workers={self._plan.workers})")


def _tune_method(method, tune):
    """``method`` with ``tune=True`` folded in ("tune"); a conflicting pair is an error."""
    if not isinstance(tune, (bool, np.bool_)):
        raise bad_type(_CONV, "tune", "must be True or False", tune)
    if not tune:
        return method
    if isinstance(method, str) and method.lower() in ("auto", "tune"):
        return "tune"
    raise fail(_CONV, "tune", f"conflicts with method={method!r} (tuning chooses the method)",
               tune)


class _OneShot(ConvTranspose):
    """conv_transpose's private operator: it lives for one call, and the kernels' weights are
    made from w and b at once, so the plan keeps views of them where the dtype allows (no
    defensive copy, which for large weights costs the copy and its new pages' faults every
    call), and its scratch comes from the calling thread's one-shot workspace
    (convt._dispatch.workspace)."""

    _one_shot = True


def conv_transpose(x, w, b=None, *, strides=None, pads=None, dilations=None,
                   output_padding=None, output_shape=None, auto_pad="NOTSET", group=1,
                   kernel_shape=None, data_format="NCX", filter_format="IOX", method="auto",
                   workers=None, dtype=None, out=None):
    """Transposed convolution with ONNX ConvTranspose-11 attribute semantics.

    A thin wrapper: ``ConvTranspose(w, b, **keywords)(x, out)``. Use `ConvTranspose`
    directly to pack the weights once for many calls.

    Parameters
    ----------
    x : ndarray of shape (N, C_in, *spatial)
        Input, (N, *spatial, C_in) for ``data_format="NXC"``.
    w, b, strides, pads, dilations, output_padding, output_shape, auto_pad, group
        As for `ConvTranspose`.
    kernel_shape, data_format, filter_format, method, workers, dtype
        As for `ConvTranspose`.
    out : ndarray, optional
        C-contiguous array of the result's shape and dtype sharing no memory with x, w or b;
        the result is written into it and it is returned.

    Returns
    -------
    y : ndarray of shape (N, C_out, *out_spatial) (NXC: (N, *out_spatial, C_out))
        Per axis, out = s*(I-1) + output_padding + (K-1)*d + 1 - pad_begin - pad_end, unless
        ``output_shape`` or ``auto_pad`` fixes it.

    Raises
    ------
    ValueError
        Attributes out of the ONNX-11 ranges or inconsistent with the arrays, e.g.
        ``conv_transpose: 'strides' must be positive integers, one per spatial axis (2); got (2, 0)``;
        an ``out`` of the wrong shape, not C-contiguous or overlapping an input. A call that
        would need more memory than the machine has raises ``MemoryError`` (also a
        ``ValueError``) before allocating anything (docs/reliability.md).
    TypeError
        Non-floating or mixed dtypes (without ``dtype=``), wrongly typed attributes.

    Examples
    --------
    >>> import numpy as np, convt
    >>> x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    >>> w = np.ones((1, 2, 3, 3), np.float32)
    >>> y = convt.conv_transpose(x, w)
    >>> y.shape
    (1, 2, 5, 5)
    >>> y[0, 0, 2]
    array([ 9., 21., 36., 27., 15.], dtype=float32)
    >>> buf = np.empty((1, 2, 5, 5), np.float32)
    >>> convt.conv_transpose(x, w, out=buf) is buf
    True
    """
    attrs = (strides, pads, dilations, output_padding, output_shape, auto_pad, group,
             kernel_shape, data_format, filter_format, method, workers)
    key = _spec_key(x, w, b, attrs) if dtype is None else None
    known = _SPECS.get(key) if key is not None else None
    if known is None:
        if (isinstance(x, np.ndarray) and isinstance(w, np.ndarray) and w.ndim >= 3
                and x.ndim != w.ndim):   # before the attributes the filter's rank sizes
            raise rank_mismatch(_CONV, "x", w.ndim - 2, x.shape)
        op = _OneShot(w, b, strides=strides, pads=pads, dilations=dilations,
                      output_padding=output_padding, output_shape=output_shape,
                      auto_pad=auto_pad, group=group, kernel_shape=kernel_shape,
                      data_format=data_format, filter_format=filter_format, method=method,
                      workers=workers, dtype=dtype)
        plan = op._plan
        if key is not None:
            _remember(_SPECS, key, (op._filter_format, plan.skeleton()), _SPECS_SIZE)
    else:
        filter_format, skeleton = known
        plan = skeleton.rebind(filter_to_iox(_CONV, w, filter_format), b, workers)
    return plan(x, out, {"x": x, "w": w, "b": b})


# conv_transpose's attributes and arrays -> (filter format, the first call's plan without
# its weights, ``Plan.skeleton``): what the front end resolves (intake, onnx_spec) and the
# plan then (method, workers, dtypes) before any weights are bound, the same on every call
# with the same arguments: Python a call would otherwise run cold, right after a kernel
# (docs/performance.md, "One-shot calls: the plan skeleton"). Looked up for calls whose
# attributes are plain Python values (None, int, str, tuples and lists of them) and whose
# arrays are ndarrays (no dtype= cast):
# a float, a bool, a numpy scalar or array anywhere in the attributes, which the checks may
# refuse where an equal int passes, is never keyed; a call not found runs every check.
_SPECS = {}
_SPECS_SIZE = 64


class _Unkeyed(Exception):
    """An argument ``_frozen`` does not key (the call runs every check)."""


def _frozen(v):
    t = type(v)
    if v is None or t is int or t is str:
        return t, v
    if t is tuple or t is list:
        return t, tuple(_frozen(e) for e in v)
    raise _Unkeyed


def _spec_key(x, w, b, attrs):
    """The ``_SPECS`` key of a call, or None when an argument is not keyed."""
    if type(x) is not np.ndarray or type(w) is not np.ndarray or not (
            b is None or type(b) is np.ndarray):
        return None
    try:
        frozen = _frozen(attrs)
    except _Unkeyed:
        return None
    return (frozen, x.dtype, w.shape, w.dtype,
            None if b is None else (b.shape, b.dtype))


def explain(x, w, b=None, **keywords):
    """Explain what ``conv_transpose(x, w, b, **keywords)`` would run, without running it.

    Parameters
    ----------
    x : ndarray or tuple of int
        The input, or just its shape (then it takes ``w``'s dtype). Given the input, the
        explanation accounts for its values: where the FFT would run, an input holding NaN,
        Inf or values its transforms could overflow on runs on the direct backend
        (docs/reliability.md), and the explanation says so.
    w, b, **keywords
        As for `conv_transpose` (including ``method`` and ``workers``; ``out`` is taken and
        unused, since nothing runs).

    Returns
    -------
    Explanation
        The resolved geometry, each backend's estimated time, the choice and why; print it.

    Raises
    ------
    ValueError, TypeError
        As `conv_transpose` raises them for the same arguments.

    Examples
    --------
    >>> import numpy as np, convt
    >>> w = np.ones((16, 16, 31, 31), np.float32)
    >>> e = convt.explain((1, 16, 64, 64), w)
    >>> e.choice, e.geometry.out_shape
    ('fft', (94, 94))
    >>> print(e)  # doctest: +ELLIPSIS
    geometry: batch 1, 16 -> 16 channels, groups 1, NCX, input (64, 64) -> output (94, 94)
    ...
    method='auto' -> fft: the FFT estimate is ...x faster than the direct one
    """
    keywords.pop("out", None)   # conv_transpose's destination: nothing is written here
    op = _OneShot(w, b, **keywords)   # priced as the one-shot call it explains
    if isinstance(x, tuple):
        return op.explain(shape_tuple("explain", "x", x))
    from ._dispatch.explain import explain_plan

    xa = as_array("explain", "x", x, op._plan.allowed)
    return explain_plan(op._plan, op._shape(xa.shape), xa)


def calibrate(workers=None, save=False, path=None):
    """Measure this machine and refit the cost model behind ``method="auto"``.

    Times the direct and FFT backends on a few small layers (GEMM, depthwise, pixel and
    memory-bound direct variants, 1-D and 2-D FFTs, float32 and float64, one thread and
    ``workers``) and fits the constants of ``convt._dispatch.cost`` to them. Takes a few seconds.
    The new constants take effect at once in this process; with ``save=True`` they are also
    written to ``path`` (default: ``cost_model.json`` in convt's cache directory, or
    ``$CONVT_CALIBRATION``), which ``import convt`` loads when it is present.

    Parameters
    ----------
    workers : int, optional
        Threads to calibrate for (as in `conv_transpose`); the thread efficiency is fitted
        from one thread against this count.
    save : bool, default False
        Write the constants to ``path``.
    path : str, optional

    Returns
    -------
    dict
        The fitted constants (the keys of ``convt._dispatch.cost.DEFAULTS``).

    Notes
    -----
    Measurements on a loaded machine fit a slower machine; calibrate when it is quiet.

    Examples
    --------
    >>> import convt
    >>> c = convt.calibrate()  # doctest: +SKIP
    >>> sorted(c)[:3]  # doctest: +SKIP
    ['bytes_per_s', 'call_s', 'depthwise_macs_per_s']
    """
    return _calibrate.calibrate(ConvTranspose, workers, save, path)
