"""Random calls of every source convention for the translator's tests: shapes, attributes,
and the source's own output (its public front end)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np

import convt

ALL = ("onnx", "openvino", "onednn", "torch", "tensorflow", "keras", "jax")


def available(name):
    """True when this convt has the front end convt.<name>."""
    try:
        importlib.import_module(f"convt.{name}")
    except ModuleNotFoundError:
        return False
    return True


@dataclass
class Case:
    src: str
    x_shape: tuple
    w_shape: tuple
    bias_shape: tuple | None
    attrs: dict
    run: object          # run(x, w, b) -> the source's output
    dtype: str = "float64"

    def arrays(self, rng):
        x = rng.standard_normal(self.x_shape).astype(self.dtype)
        w = rng.standard_normal(self.w_shape).astype(self.dtype)
        b = None if self.bias_shape is None else rng.standard_normal(self.bias_shape).astype(
            self.dtype)
        return x, w, b


def _ints(rng, lo, hi, n):
    return tuple(int(v) for v in rng.integers(lo, hi, n))


def _common(rng, groups_allowed=True):
    nd = int(rng.integers(1, 4))
    g = int(rng.choice([1, 1, 2])) if groups_allowed else 1
    return (nd, g, g * int(rng.integers(1, 3)), g * int(rng.integers(1, 3)),
            _ints(rng, 1, 4, nd), _ints(rng, 1, 4, nd), _ints(rng, 1, 3, nd),
            _ints(rng, 1, 5, nd), int(rng.integers(1, 3)))


def _full(i, s, k, d):
    return tuple((a - 1) * b + (c - 1) * e + 1 for a, b, c, e in zip(i, s, k, d))


def _layouts(rng, nd, ci, co, g, i, k, batch, data=("NCX", "NXC"), filt=("IOX", "XOI")):
    df, ff = str(rng.choice(data)), str(rng.choice(filt))
    xs = (batch, ci, *i) if df == "NCX" else (batch, *i, ci)
    ws = (ci, co // g, *k) if ff == "IOX" else (*k, co // g, ci)
    return df, ff, xs, ws


def onnx(rng):
    nd, g, ci, co, k, s, d, i, n = _common(rng)
    attrs = {"strides": s, "dilations": d, "group": g, "opset": int(rng.choice([1, 11, 22]))}
    if rng.random() < 0.5:
        attrs["output_padding"] = tuple(int(rng.integers(0, max(a, b))) for a, b in zip(s, d))
    mode = rng.choice(["pads", "SAME_UPPER", "SAME_LOWER", "VALID", "output_shape"])
    if mode == "pads":
        attrs["pads"] = _ints(rng, 0, 3, 2 * nd)
    elif mode == "output_shape":
        attrs["output_shape"] = tuple(max(1, f + int(rng.integers(-3, 3)))
                                      for f in _full(i, s, k, d))
    else:
        attrs["auto_pad"] = str(mode)
    df, ff, xs, ws = _layouts(rng, nd, ci, co, g, i, k, n)
    attrs.update(data_format=df, filter_format=ff)
    return Case("onnx", xs, ws, (co,) if rng.random() < 0.7 else None, attrs,
                lambda x, w, b: convt.onnx.conv_transpose(x, w, b, **attrs))


def openvino(rng):
    nd, g, ci, co, k, s, d, i, n = _common(rng)
    grouped = g > 1 or rng.random() < 0.2
    attrs = {"strides": s, "dilations": d,
             "auto_pad": str(rng.choice(["explicit", "explicit", "same_upper", "same_lower",
                                         "valid"]))}
    if rng.random() < 0.5:
        attrs["output_padding"] = _ints(rng, 0, 3, nd)
    if rng.random() < 0.3:
        attrs["output_shape"] = tuple(max(1, f + int(rng.integers(-3, 2)))
                                      for f in _full(i, s, k, d))
    else:
        attrs["pads_begin"], attrs["pads_end"] = _ints(rng, 0, 3, nd), _ints(rng, 0, 3, nd)
    df, ff, xs, ws = _layouts(rng, nd, ci, co, g, i, k, n)
    if grouped:
        ws = ((g, ci // g, co // g, *k) if ff == "IOX" else (g, *k, co // g, ci // g))
        attrs["grouped"] = True
    attrs.update(data_format=df, filter_format=ff)
    fn = (convt.openvino.group_convolution_backprop_data if grouped
          else convt.openvino.convolution_backprop_data)
    kw = {a: v for a, v in attrs.items() if a != "grouped"}
    return Case("openvino", xs, ws, None, attrs, lambda x, w, b: fn(x, w, **kw))


def onednn(rng):
    nd, g, ci, co, k, s, d, i, n = _common(rng)
    attrs = {"strides": s, "dilations": d, "groups": g,
             "auto_pad": str(rng.choice(["none", "none", "same_upper", "same_lower", "valid"]))}
    if rng.random() < 0.5:
        attrs["output_padding"] = tuple(int(rng.integers(0, a)) for a in s)
    if attrs["auto_pad"] == "none" and rng.random() < 0.3:
        attrs["output_shape"] = tuple(max(1, f + int(rng.integers(-3, 1)))
                                      for f in _full(i, s, k, d))
    else:
        attrs["pads_begin"], attrs["pads_end"] = _ints(rng, 0, 3, nd), _ints(rng, 0, 3, nd)
    df, ff, xs, ws = _layouts(rng, nd, ci, co, g, i, k, n)
    attrs.update(data_format=df, filter_format=ff)
    return Case("onednn", xs, ws, (co,) if rng.random() < 0.7 else None, attrs,
                lambda x, w, b: convt.onednn.conv_transpose(x, w, b, **attrs), "float32")


def torch(rng):
    nd, g, ci, co, k, s, d, i, n = _common(rng)
    attrs = {"stride": s, "padding": _ints(rng, 0, 3, nd), "groups": g, "dilation": d,
             "output_padding": tuple(int(rng.integers(0, max(a, b))) for a, b in zip(s, d))}
    if rng.random() < 0.3:   # torch's int forms
        attrs = {key: (v[0] if isinstance(v, tuple) else v) for key, v in attrs.items()}
    unbatched = rng.random() < 0.3
    xs = (ci, *i) if unbatched else (n, ci, *i)
    fn = getattr(convt.torch, f"conv_transpose{nd}d") if available("torch") else None
    return Case("torch", xs, (ci, co // g, *k), (co,) if rng.random() < 0.7 else None, attrs,
                lambda x, w, b: fn(x, w, b, **attrs))


def tensorflow(rng):
    nd, _, ci, co, k, s, d, i, n = _common(rng, groups_allowed=False)
    if rng.random() < 0.5:
        d = (1,) * nd
    f = _full(i, s, k, d)
    modes = ["SAME", "VALID"] + (["EXPLICIT"] if nd == 2 else [])
    mode = str(rng.choice(modes))
    if mode == "SAME":
        os_ = tuple(int(rng.integers((a - 1) * b + 1, a * b + 1)) for a, b in zip(i, s))
        padding = "SAME"
    elif mode == "VALID":
        os_ = tuple(int(rng.integers(a, a + b)) for a, b in zip(f, s))
        padding = "VALID"
    else:
        pads = [_ints(rng, 0, 3, 2) for _ in range(nd)]
        os_ = tuple(max(1, a - p[0] - p[1] + int(rng.integers(0, b)))
                    for a, p, b in zip(f, pads, s))
        padding = [[0, 0], *([*p] for p in pads), [0, 0]]
    last = rng.random() < 0.7
    space = "DHW"[3 - nd:] if nd > 1 else "W"
    fmt = ("N" + space + "C") if last else ("NC" + space)
    xs = (n, *i, ci) if last else (n, ci, *i)
    attrs = {"output_shape": [n, *os_, co] if last else [n, co, *os_], "strides": list(s),
             "padding": padding, "data_format": fmt, "dilations": list(d)}
    return Case("tensorflow", xs, (*k, co, ci), None, attrs,
                lambda x, w, b: convt.tensorflow.conv_transpose(x, w, **attrs))


def keras(rng):
    nd, _, ci, co, k, s, d, i, n = _common(rng, groups_allowed=False)
    if rng.random() < 0.5:
        d = (1,) * nd
    attrs = {"strides": s, "padding": str(rng.choice(["valid", "same"])), "dilation_rate": d}
    if rng.random() < 0.5:
        attrs["output_padding"] = tuple(int(rng.integers(0, a)) for a in s)
    last = rng.random() < 0.7
    attrs["data_format"] = "channels_last" if last else "channels_first"
    xs = (n, *i, ci) if last else (n, ci, *i)
    return Case("keras", xs, (*k, co, ci), None, attrs,
                lambda x, w, b: convt.keras.conv_transpose(x, w, **attrs))


def jax(rng):
    nd, _, ci, co, k, s, d, i, n = _common(rng, groups_allowed=False)
    space = "DHW"[3 - nd:]
    attrs = {"strides": s, "rhs_dilation": d,
             "transpose_kernel": bool(rng.random() < 0.5)}
    mode = rng.choice(["SAME", "VALID", "pairs"])
    attrs["padding"] = (str(mode) if mode != "pairs"
                        else tuple(_ints(rng, -1, 4, 2) for _ in range(nd)))
    lhs = "".join(rng.permutation(list("NC" + space)))
    rhs = "".join(rng.permutation(list("IO" + space)))
    out = "".join(rng.permutation(list("NC" + space)))
    if rng.random() < 0.3:
        lhs, rhs, out = "N" + space + "C", space + "IO", "N" + space + "C"
    attrs["dimension_numbers"] = (lhs, rhs, out)
    sizes = {"N": n, "C": ci, **dict(zip(space, i))}
    xs = tuple(sizes[c] for c in lhs)
    # the kernel's "I" is the input's features unless transpose_kernel swaps them
    io = {"I": co, "O": ci} if attrs["transpose_kernel"] else {"I": ci, "O": co}
    ws = tuple(io.get(c, dict(zip(space, k)).get(c)) for c in rhs)
    return Case("jax", xs, ws, None, attrs,
                lambda x, w, b: convt.jax.conv_transpose(x, w, **attrs))


DRAW = {"onnx": onnx, "openvino": openvino, "onednn": onednn, "torch": torch,
        "tensorflow": tensorflow, "keras": keras, "jax": jax}


def draw(src, rng, tries=200):
    """A random call of ``src`` its front end accepts, with its arrays and output."""
    for _ in range(tries):
        case = DRAW[src](rng)
        x, w, b = case.arrays(rng)
        try:
            y = case.run(x, w, b)
        except ValueError:
            continue
        if y.size:
            return case, (x, w, b), y
    raise AssertionError(f"no valid {src} call in {tries} draws")
