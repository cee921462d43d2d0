"""The canonical API: ONNX opset-11 attribute semantics plus layouts, one-shot or prepared."""
from __future__ import annotations

from ._dtypes import ALL_FLOATS
from ._frontend import intake
from ._plan import Plan
from .onnx import onnx_spec

__all__ = ["conv_transpose", "ConvTranspose"]

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
    method : {"auto", "direct", "fft", "reference"}, default "auto"
        Backend. "direct" is the compiled kernel; "fft" multiplies spectra (``scipy.fft``),
        fast for large kernels at stride 1, with a normwise error (about 3e-7 of the largest
        |output| in float32, 1e-15 in float64; small outputs next to large ones lose relative
        accuracy, docs/fft.md); "reference" is the plain NumPy oracle (slow, float64 inside).
        "auto" picks "direct" or "fft" per input shape from a cost estimate (`method_for`).
        NaN and Inf reach exactly the outputs they touch with every method: one NaN in a
        transform would spread over all of its output, so "fft" runs a call whose input or
        weights hold a non-finite value on the direct kernel (docs/reliability.md).
    workers : int, optional
        Threads, as in ``scipy.fft``: None uses OpenMP's default (OMP_NUM_THREADS or all
        cores), a negative value counts back from ``os.cpu_count()``.
    dtype : dtype, optional
        Cast the weights, the bias and every input to this dtype. Without it, mixed dtypes
        are a TypeError.

    Notes
    -----
    float64 computes in float64; float32, float16 and bfloat16 (``ml_dtypes``) accumulate in
    float32 and the result is rounded once to the input dtype. The output has the input's
    dtype and layout and is C-contiguous. Results are bit-identical for any ``workers``, and
    one operator may be called from many Python threads at once (the kernels release the
    GIL). A call that would need more memory than the machine has is refused with a
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

    def __init__(self, w, b=None, *, strides=None, pads=None, dilations=None,
                 output_padding=None, output_shape=None, auto_pad="NOTSET", group=1,
                 kernel_shape=None, data_format="NCX", filter_format="IOX", method="auto",
                 workers=None, dtype=None):
        _, w_iox, ba, dt, data_format, _ = intake(
            _CONV, None, w, b, allowed=ALL_FLOATS, dtype=dtype, names=("x", "w", "b"),
            data_format=data_format, filter_format=filter_format)
        self.spec = onnx_spec(_CONV, 11, w_iox, ba, auto_pad=auto_pad, dilations=dilations,
                              group=group, kernel_shape=kernel_shape,
                              output_padding=output_padding, output_shape=output_shape,
                              pads=pads, strides=strides, data_format=data_format,
                              names=("x", "w", "b"))
        self._plan = Plan(self.spec, w_iox, ba, dt, allowed=ALL_FLOATS, method=method,
                          workers=workers, cast=dtype is not None)

    @property
    def dtype(self):
        """Storage dtype of the weights, of accepted inputs and of results."""
        return self._plan.dtype

    @property
    def workers(self):
        """Threads the kernels use."""
        return self._plan.workers

    def method_for(self, x_shape):
        """The backend ``method="auto"`` picks for inputs of ``x_shape`` (str)."""
        return self._plan.geometry(x_shape).method

    def geometry(self, x_shape):
        """The canonical ``Geometry`` (resolved pads, output shape) for inputs of ``x_shape``."""
        return self._plan.geometry(x_shape).geom

    def __call__(self, x, out=None):
        """Apply to ``x`` of shape (N, C_in, *spatial) (or (N, *spatial, C_in) for NXC).

        ``out``: optional C-contiguous array of the result's shape and dtype, not overlapping
        ``x``; the result is written there and ``out`` is returned.
        """
        return self._plan(x, out)

    def __repr__(self):
        s = self.spec
        return (f"ConvTranspose(c_in={s.c_in}, c_out={s.c_out}, kernel={s.kernel}, "
                f"strides={s.strides}, dilations={s.dilations}, groups={s.groups}, "
                f"dtype={self.dtype.name}, data_format={s.data_format!r}, "
                f"method={self._plan.method!r}, workers={self._plan.workers})")


def conv_transpose(x, w, b=None, *, strides=None, pads=None, dilations=None,
                   output_padding=None, output_shape=None, auto_pad="NOTSET", group=1,
                   kernel_shape=None, data_format="NCX", filter_format="IOX", method="auto",
                   workers=None, dtype=None, out=None):
    """Transposed convolution with ONNX ConvTranspose-11 attribute semantics.

    A thin wrapper: ``ConvTranspose(w, b, **keywords)(x)``. See `ConvTranspose` for the
    parameters; use it directly to pack the weights once for many calls. ``out``, optional:
    a C-contiguous ndarray of the result's shape and dtype sharing no memory with x, w or b;
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
    op = ConvTranspose(w, b, strides=strides, pads=pads, dilations=dilations,
                         output_padding=output_padding, output_shape=output_shape,
                         auto_pad=auto_pad, group=group, kernel_shape=kernel_shape,
                         data_format=data_format, filter_format=filter_format, method=method,
                         workers=workers, dtype=dtype)
    return op._plan(x, out, {"x": x, "w": w, "b": b})
