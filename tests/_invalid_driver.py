"""Generated invalid calls of every front end; run as ``python -m _invalid_driver`` (from
tests/, or with tests/ on sys.path) by tests/test_invalid_inputs.py, in a subprocess, so that
a crash of the interpreter fails that test instead of killing pytest.

For every parameter of every front end (1-, 2- and 3-D base calls that are valid), bad values
of each kind: wrong length, zero / negative, out of the spec's range, wrong type, inconsistent
with the tensors, absurd sizes. A case passes when the call raises ValueError or TypeError
whose message starts with the convention's name and names the parameter (quoted, as
convt._geometry.validate writes it). Absurd sizes may instead be refused by the memory / index-range
guard, which names the data input. Before each case its label goes to stderr, so a crash
shows which one; the summary (JSON) goes to stdout.
"""
from __future__ import annotations

import json
import sys

import numpy as np

import convt

HUGE = [10**12, 2**63, 2**70]


def _ints(n, minimum, bound=None):
    """Bad values of an integer-tuple attribute of length ``n`` (kind, value, absurd?)."""
    out = [("short", [1] * (n - 1), False), ("long", [1] * (n + 1), False),
           ("empty", [], False), ("scalar", 1, False), ("float", [2.0] * n, False),
           ("half", [1.5] * n, False), ("str", "1" * n, False), ("bytes", b"1" * n, False),
           ("str items", ["1"] * n, False), ("bool", [True] * n, False),
           ("None items", [None] * n, False), ("nested", [[1]] * n, False),
           ("float array", np.ones(n), False), ("2-D array", np.ones((1, n), np.int64), False),
           ("complex", [1j] * n, False), ("dict", {i: 1 for i in range(n)}, False),
           ("object", object(), False), ("neg", [-1] * n, False),
           ("neg last", [1] * (n - 1) + [-1], False), ("min int64", [-2**63] * n, False)]
    if minimum == 1:
        out += [("zero", [0] * n, False), ("zero last", [1] * (n - 1) + [0], False)]
    out += [(f"huge {h:.0e}", [h] * n, True) for h in HUGE]
    if bound is not None:
        out += [("at bound", [bound] * n, False)]
    return out


def _choice(options):
    return [("empty", "", False), ("unknown", "nonsense", False),
            ("trailing space", options[0] + " ", False), ("int", 0, False),
            ("None", None, False), ("bytes", options[0].encode(), False),
            ("list", [options[0]], False)]


def _scalar(minimum=1):
    vals = [("float", 1.5, False), ("str", "2", False), ("bool", True, False),
            ("None", None, False), ("list", [1], False), ("np float", np.float64(1), False),
            ("neg", -1, False), ("complex", 1j, False)]
    if minimum == 1:
        vals.append(("zero", 0, False))
    return vals


def _tensor(shape, dtype, *, channel_axis):
    """Bad values of an array argument whose valid value has ``shape``."""
    good = np.zeros(shape, dtype)
    wrong_c = list(shape)
    wrong_c[channel_axis] += 1
    spatial0 = list(shape)
    spatial0[-1 if channel_axis != len(shape) - 1 else -2] = 0
    return [("None", None, False), ("rank-2", np.zeros((2, 2), dtype), False),
            ("rank+1", good[None], False), ("0-d", np.float32(1), False),
            ("channels", np.zeros(wrong_c, dtype), False),
            ("zero spatial", np.zeros(spatial0, dtype), False),
            ("int", good.astype(np.int32), False), ("bool", good.astype(bool), False),
            ("complex", good.astype(np.complex64), False),
            ("object", good.astype(object), False),
            ("str", np.full(shape, "a"), False), ("dict", {"a": 1}, False),
            ("ragged", [[1.0, 2.0], [1.0]], False), ("float64 mix", good.astype(np.float64)
                                                    if good.dtype != np.float64
                                                    else good.astype(np.float32), False)]


def _bias(c_out, dtype):
    return [("length", np.zeros(c_out + 1, dtype), False), ("2-D", np.zeros((1, c_out), dtype),
            False), ("int", np.zeros(c_out, np.int64), False), ("str", "bias", False),
            ("mix", np.zeros(c_out, np.float64 if dtype != np.float64 else np.float32),
             False), ("0-d", np.float32(0), False)]


def _outs(shape, dtype, x):
    a = np.zeros(shape, dtype)
    return [("list", a.tolist(), False), ("dtype", a.astype(np.float64), False),
            ("shape", np.zeros(shape[:-1] + (shape[-1] + 1,), dtype), False),
            ("fortran", np.asfortranarray(a) if a.ndim > 1 and shape[-1] > 1
             else np.zeros(shape[:-1] + (2 * shape[-1],), dtype)[..., ::2], False),
            ("strided", np.zeros(shape[:-1] + (2 * shape[-1],), dtype)[..., ::2], False),
            ("read-only", np.lib.stride_tricks.as_strided(a, writeable=False), False),
            ("overlaps input", ("X",), False), ("0-d", np.float32(0), False)]


class FrontEnd:
    """A valid base call of one convention at rank ``nd`` and its parameters' bad values."""

    def __init__(self, name, prefix, nd):
        self.name, self.prefix, self.nd = name, prefix, nd
        n = nd
        self.dtype = np.float32
        nxc = name == "onednn"
        self.x = np.ones((2, *[3] * n, 4) if nxc else (2, 4, *[3] * n), self.dtype)
        w_iox = np.ones((4, 3, *[2] * n), self.dtype)
        self.w = np.moveaxis(w_iox, (0, 1), (-1, -2)).copy() if nxc else w_iox
        if name == "openvino (grouped)":
            self.w = w_iox.reshape(2, 2, 3, *[2] * n)
        self.b = np.zeros(6, self.dtype)
        self.out_shape = ((2, *[6] * n, 6) if nxc else
                          (2, 3 if name == "openvino" else 6, *[6] * n))
        if name == "openvino":
            self.b = None
        self.kw = self._base_kw()

    def _base_kw(self):
        n = self.nd
        kw = dict(strides=[2] * n, dilations=[1] * n, output_padding=[1] * n, method="direct",
                  workers=1)
        if self.name in ("conv_transpose", "ConvTranspose") or self.name.startswith("onnx"):
            kw.update(pads=[1] * (2 * n), group=2, kernel_shape=[2] * n)
            if self.name.startswith("onnx"):
                kw["opset"] = int(self.name.split()[1])
        else:
            kw.update(pads_begin=[1] * n, pads_end=[1] * n)
            if self.name == "onednn":
                kw["groups"] = 2
        return kw

    def call(self, **over):
        kw = {**self.kw, **over}
        x, w = kw.pop("x", self.x), kw.pop("w", self.w)
        b = kw.pop("b", self.b)
        if isinstance(kw.get("out"), tuple):   # the overlap case: x is a view into out
            kw["out"] = np.zeros(self.out_shape, self.dtype)
            x = kw["out"].reshape(-1)[: self.x.size].reshape(self.x.shape)
        if self.name == "conv_transpose":
            return convt.conv_transpose(x, w, b, **kw)
        if self.name == "ConvTranspose":
            out = kw.pop("out", None)
            return convt.ConvTranspose(w, b, **kw)(x, out=out)
        if self.name.startswith("onnx"):
            return convt.onnx.conv_transpose(x, w, b, **kw)
        if self.name == "openvino":
            os_ = kw.pop("output_shape", None)
            return convt.openvino.convolution_backprop_data(x, w, os_, **kw)
        if self.name == "openvino (grouped)":
            os_ = kw.pop("output_shape", None)
            return convt.openvino.group_convolution_backprop_data(x, w, os_, **kw)
        return convt.onednn.conv_transpose(x, w, b, **kw)

    def names(self):
        """Parameter names of this convention: (x, w, b, group)."""
        if self.name == "onednn":
            return "src", "weights", "bias", "groups"
        if self.name.startswith("openvino"):
            return "data", "filter", "bias", "filter groups"
        if self.name.startswith("onnx"):
            return "X", "W", "B", "group"
        return "x", "w", "b", "group"

    def cases(self):
        """(parameter, kind, bad value, absurd) of every parameter."""
        n = self.nd
        xn, wn, bn, gn = self.names()
        canon = self.name in ("conv_transpose", "ConvTranspose")
        onnx = self.name.startswith("onnx")
        ovino = self.name.startswith("openvino")
        out = []
        for p in ("strides", "dilations"):
            out += [(p, *v) for v in _ints(n, 1)]
        pads = ["pads"] if canon or onnx else ["pads_begin", "pads_end"]
        for p in pads:
            out += [(p, *v) for v in _ints(2 * n if p == "pads" else n, 0)]
        out += [("output_padding", *v) for v in
                _ints(n, 0, bound=2 if canon or self.name in ("onnx 11", "onnx 22") else None)
                if v[0] != "at bound" or canon or onnx]
        out += [("output_shape", *v) for v in _ints(n, 1)]
        if canon or onnx:
            out += [("kernel_shape", *v) for v in _ints(n, 1)]
            out += [("kernel_shape", "mismatch", [3] * n, False)]
        if not ovino:
            gp = "groups" if self.name == "onednn" else "group"
            out += [(gp, *v) for v in _scalar()]
            out += [(gp, "not dividing", 3, False), (gp, "huge", 10**12, False)]
        if onnx:
            out += [("opset", *v) for v in _scalar() if v[0] != "np float"]
        out += [("auto_pad", *v) for v in _choice(["NOTSET"] if canon or onnx else
                                                  ["explicit"] if ovino else ["none"])]
        out += [("data_format", *v) for v in _choice(["NCX"])]
        out += [("filter_format", *v) for v in _choice(["IOX"])]
        out += [("method", *v) for v in _choice(["direct"])]
        out += [("workers", *v) for v in _scalar() if v[0] not in ("None", "neg")]
        out += [("workers", "too negative", -10**6, False), ("workers", "huge", 10**12, True)]
        if canon:
            out += [("dtype", k, v, False) for k, v in
                    [("int", "int8"), ("unknown", "nonsense"), ("number", 5),
                     ("object", object), ("longdouble", np.longdouble)]]
        x_axis = len(self.x.shape) - 1 if self.name == "onednn" else 1
        out += [("x", *v) for v in _tensor(self.x.shape, self.dtype, channel_axis=x_axis)]
        w_axis = len(self.w.shape) - 1 if self.name == "onednn" else 0   # XOI: C_in last
        out += [("w", *v) for v in _tensor(self.w.shape, self.dtype, channel_axis=w_axis)
                if v[0] not in ("channels", "zero spatial") or not ovino]
        if not ovino:
            out += [("b", *v) for v in _bias(6, self.dtype)]
        out += [("out", *v) for v in _outs(self.out_shape, self.dtype, self.x)]
        return out

    def accepted(self, param, value, absurd):
        """Parameter names a correct message may quote for this case."""
        xn, wn, bn, gn = self.names()
        alias = {"x": xn, "w": wn, "b": bn, "group": gn, "groups": gn}
        names = {alias.get(param, param)}
        if param in ("x", "w", "b"):
            names |= {xn, wn}   # mixed dtypes name the one that differs from w; rank: x vs w
        if param == "w":   # the filter's rank sets the spatial rank every attribute must have
            names |= {"kernel_shape", gn, bn, "filter", "strides", "dilations", "pads",
                      "pads_begin", "pads_end", "output_padding"}
        if param in ("pads", "pads_begin", "pads_end", "output_padding", "output_shape",
                     "strides", "dilations") or absurd:
            names |= {"pads", xn, "output_shape"}   # no output left; the size guards
        if param == "kernel_shape":
            names |= {wn}
        if param == "opset":
            names |= {"opset"}
        return names


FRONT_ENDS = ["conv_transpose", "ConvTranspose", "onnx 1", "onnx 11", "onnx 22", "openvino",
              "openvino (grouped)", "onednn"]
PREFIX = {"conv_transpose": "conv_transpose", "ConvTranspose": "conv_transpose",
          "onnx 1": "onnx", "onnx 11": "onnx", "onnx 22": "onnx", "openvino": "openvino",
          "openvino (grouped)": "openvino (grouped)", "onednn": "onednn"}


def _optional_ok(fe, param, kind):
    """Values a convention accepts by design (not failures): None for optional attributes."""
    if kind == "scalar" and param == "output_shape" and fe.name.startswith("openvino"):
        return fe.nd == 1   # OpenVINO's output_shape is a tensor input: 0-d holds one length
    if kind == "None":
        return param in ("strides", "dilations", "pads", "output_padding", "output_shape",
                         "kernel_shape", "pads_begin", "pads_end") and not (
            param in ("strides", "dilations") and fe.name.startswith(("openvino", "onednn")))
    return False


def run_case(fe, param, kind, value, absurd):
    """None when the case behaves, else a description of what went wrong."""
    key = {"x": "x", "w": "w", "b": "b"}.get(param, param)
    try:
        fe.call(**{key: value})
    except (ValueError, TypeError) as e:
        msg = str(e)
        if not msg.startswith(PREFIX[fe.name]):
            return f"{type(e).__name__} without the convention: {msg[:200]}"
        names = fe.accepted(param, value, absurd)
        if not any(f"'{n}'" in msg for n in names):
            return f"{type(e).__name__} names none of {sorted(names)}: {msg[:200]}"
        return None
    except Exception as e:  # noqa: BLE001 - any other exception is a finding
        return f"{type(e).__name__}: {str(e)[:200]}"
    if _optional_ok(fe, param, kind):
        return None
    return "no error"


def main(argv):
    cases = failures = 0
    report = []
    for name in FRONT_ENDS:
        for nd in (1, 2, 3):
            fe = FrontEnd(name, PREFIX[name], nd)
            fe.call()   # the base call must be valid
            for param, kind, value, absurd in fe.cases():
                label = f"{name} {nd}-D {param} {kind}"
                print(label, file=sys.stderr, flush=True)
                cases += 1
                problem = run_case(fe, param, kind, value, absurd)
                if problem is not None:
                    failures += 1
                    report.append(f"{label}: {problem}")
    json.dump({"cases": cases, "failures": failures, "report": report}, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
