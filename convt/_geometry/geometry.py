"""The one shared padding resolution: every convention ends here as a canonical ``Geometry``.

Per spatial axis (CONVENTIONS.md notation): stride s, dilation d, kernel K, input length I,
dilated kernel extent E = (K-1)*d + 1, full (uncropped) length F = (I-1)*s + E.
The canonical form is two integers pb, pe (either may be negative) with output length
L = F - pb - pe, and

    y[o] = bias + sum of x[i] * w[k] over all i*s + k*d - pb == o,  0 <= o < L.

A front end never computes pb / pe itself: it states its convention's rule as a ``PadRule``
(explicit pads, or a total padding T split floor/ceil), and ``resolve`` does the arithmetic for
every convention alike. Output padding op only lowers pe (pe = pads_end - op). Nothing after
``resolve`` knows which convention a call came from.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from .validate import fail

__all__ = ["PadRule", "OpSpec", "Geometry", "rank_mismatch", "resolve", "split_total"]

# How a rule obtains the total padding T of an axis (spec notation total_padding[i]).
TOTAL_FROM_OUTPUT_SHAPE = "output_shape"          # T = F + op - output_shape
TOTAL_FROM_INPUT_TIMES_STRIDE = "input*stride"    # T = F + op - I*s   (ONNX-11 SAME)
TOTAL_FROM_INPUT = "input"                        # T = F + op - I     (ONNX-1 SAME text)
TOTAL_KERNEL_MINUS_STRIDE = "kernel-stride"       # T = E - s          (oneDNN SAME)


@dataclass(frozen=True)
class PadRule:
    """A convention's padding rule, independent of the input shape.

    kind "explicit": pads_end and pads_begin as given (canonical pe = pads_end - op).
    kind "total": T from ``total``; pads_begin = T//2 when ``begin == "floor"``, T - T//2
    ("ceil"), max(T, 0)//2 ("floor_clamped"), 0 ("none"), or ``pads_begin`` as given
    ("given"); pads_end = T - pads_begin; canonical pe = pads_end - op.
    ``expect_output`` (spatial lengths or None): the resolved length must equal it, for rules
    whose spec fixes the length independently of a user-given output_shape.
    """

    kind: str
    output_padding: tuple
    pads_begin: tuple = ()
    pads_end: tuple = ()
    total: str = ""
    output_shape: tuple | None = None
    begin: str = "floor"
    expect_output: tuple | None = None


@dataclass(frozen=True)
class OpSpec:
    """Everything a front end knows before it sees the input: attributes and weights' shape."""

    convention: str
    strides: tuple
    dilations: tuple
    kernel: tuple
    groups: int
    c_in: int
    c_out: int
    rule: PadRule
    data_format: str = "NCX"
    input_name: str = "X"  # the convention's name for the data input, for messages

    @property
    def ndim(self):
        return len(self.kernel)


@dataclass(frozen=True)
class Geometry:
    """The canonical description of one call. Convention-free by construction."""

    batch: int
    c_in: int
    c_out: int
    groups: int
    in_shape: tuple
    out_shape: tuple
    kernel: tuple
    strides: tuple
    dilations: tuple
    pads_begin: tuple
    pads_end: tuple
    data_format: str = "NCX"

    @property
    def ndim(self):
        return len(self.kernel)

    @property
    def full_shape(self):
        """F per axis: the uncropped length (I-1)*s + (K-1)*d + 1."""
        return tuple((i - 1) * s + (k - 1) * d + 1
                     for i, s, k, d in zip(self.in_shape, self.strides, self.kernel, self.dilations))

    def array_shape(self, which):
        """Shape of the "input" or "output" array in this geometry's data layout."""
        n, c, sp = ((self.batch, self.c_in, self.in_shape) if which == "input"
                    else (self.batch, self.c_out, self.out_shape))
        return (n, c, *sp) if self.data_format == "NCX" else (n, *sp, c)

    @property
    def weights(self):
        """Values of the filter: C_in x C_out/G x prod(K)."""
        return self.c_in * (self.c_out // max(self.groups, 1)) * prod(self.kernel)

    @property
    def macs(self):
        """Useful multiply-adds (taps that land inside the output are a subset of these)."""
        return (self.batch * self.c_in * (self.c_out // max(self.groups, 1))
                * prod(self.in_shape) * prod(self.kernel))


def split_total(total, begin):
    """pads_begin for total padding T: floor half (T//2) or ceil half (T - T//2); "none": 0,
    all of T at the end; "floor_clamped": max(T, 0)//2, never a negative begin (TensorFlow's
    SAME: kernel_shape_util.cc GetWindowedOutputSizeVerbose clamps the padding at 0).

    Floor division is Python's (towards -inf), as CONVENTIONS.md defines fl / ce. It is the only
    reading under which the ONNX example test_convtranspose_output_shape (T = -1, NOTSET) yields
    its one trailing zero row; C's truncating '/' would put that row first.
    """
    if begin == "none":
        return 0
    if begin == "floor_clamped":
        return max(total, 0) // 2
    return total // 2 if begin == "floor" else total - total // 2


def _total(rule, axis, full, op, i_len, s, ext):
    if rule.total == TOTAL_FROM_OUTPUT_SHAPE:
        return full + op - rule.output_shape[axis]
    if rule.total == TOTAL_FROM_INPUT_TIMES_STRIDE:
        return full + op - i_len * s
    if rule.total == TOTAL_FROM_INPUT:
        return full + op - i_len
    if rule.total == TOTAL_KERNEL_MINUS_STRIDE:
        return ext - s
    raise RuntimeError(f"unknown padding total {rule.total!r}; this is a bug in convt")


def _axis_pads(rule, axis, i_len, s, k, d):
    op = rule.output_padding[axis]
    ext = (k - 1) * d + 1
    full = (i_len - 1) * s + ext
    if rule.kind == "explicit":
        pb, pads_end = rule.pads_begin[axis], rule.pads_end[axis]
    else:
        total = _total(rule, axis, full, op, i_len, s, ext)
        pb = rule.pads_begin[axis] if rule.begin == "given" else split_total(total, rule.begin)
        pads_end = total - pb
    return pb, pads_end - op, full


def rank_mismatch(conv, xn, nd, x_shape):
    """The ValueError for an input of shape ``x_shape`` whose rank is not the filter's
    (``nd`` spatial axes), naming the input ``xn``."""
    return fail(conv, xn, f"must have rank {nd + 2} (N, C, {nd} spatial) to match the "
                f"filter's {nd} spatial axes", tuple(x_shape))


def resolve(spec, x_shape):
    """Canonical ``Geometry`` of ``spec`` applied to an input array of shape ``x_shape``."""
    conv, nd, xn = spec.convention, spec.ndim, spec.input_name
    if len(x_shape) != nd + 2:
        raise rank_mismatch(conv, xn, nd, x_shape)
    if spec.data_format == "NCX":
        batch, c_in, in_shape = x_shape[0], x_shape[1], tuple(x_shape[2:])
    else:
        batch, c_in, in_shape = x_shape[0], x_shape[-1], tuple(x_shape[1:-1])
    if c_in != spec.c_in:
        raise fail(conv, xn, f"must have {spec.c_in} channels (the filter's C_in, "
                   f"data_format {spec.data_format})", tuple(x_shape))
    if any(i < 1 for i in in_shape):
        raise fail(conv, xn, "must have spatial lengths >= 1", tuple(x_shape))
    pb, pe, out = [], [], []
    for a in range(nd):
        b, e, full = _axis_pads(spec.rule, a, in_shape[a], spec.strides[a], spec.kernel[a],
                                spec.dilations[a])
        pb.append(b)
        pe.append(e)
        out.append(full - b - e)
    out = tuple(out)
    if any(o < 1 for o in out):
        raise fail(conv, "pads", "leave no output: output length = (I-1)*s + (K-1)*d + 1 "
                   "+ output_padding - pads_begin - pads_end must be >= 1", out)
    if spec.rule.expect_output is not None and out != spec.rule.expect_output:
        raise fail(conv, "output_shape", "conflicts with auto_pad, which fixes the output "
                   f"length to {out}", spec.rule.expect_output)
    return Geometry(batch=batch, c_in=c_in, c_out=spec.c_out, groups=spec.groups,
                    in_shape=in_shape, out_shape=out, kernel=spec.kernel, strides=spec.strides,
                    dilations=spec.dilations, pads_begin=tuple(pb), pads_end=tuple(pe),
                    data_format=spec.data_format)
