"""``python -m convt info`` | ``demo`` | ``explain LAYER`` | ``tune LAYER [LAYER ...]`` |
``translate --from SRC --to DST CALL``.

A LAYER is one quoted string of key=value pairs: x (input shape, NCX unless
data_format=NXC), w (filter shape, IOX), and optionally strides, pads, dilations,
output_padding, group, dtype, data_format, e.g. "x=1,16,64,64 w=16,16,31,31 pads=15,15,15,15".
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _demo(args):
    import convt

    rng = np.random.default_rng(0)
    # A DCGAN generator layer (shared/bench/workloads.py "dcgan_g3"): 128 -> 64 channels,
    # 4x4 kernel, stride 2, pads 1: 16x16 -> 32x32, batch 16.
    x = rng.standard_normal((16, 128, 16, 16), dtype=np.float32)
    w = rng.standard_normal((128, 64, 4, 4), dtype=np.float32)
    b = rng.standard_normal(64, dtype=np.float32)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1), workers=args.workers)
    op = convt.ConvTranspose(w, b, **kw)
    y = op(x)
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        op(x)
        times.append(time.perf_counter() - t)
    best = min(times)
    macs = op.geometry(x.shape).macs
    ref = convt.conv_transpose(x[:1], w, b, method="reference", **kw)
    err = float(np.abs(y[:1] - ref).max() / np.abs(ref).max())
    print("convt demo: DCGAN generator layer, float32")
    print(f"  input {x.shape} -> output {y.shape}")
    print(f"  method: {op.method_for(x.shape)}, workers: {op.workers}")
    print(f"  time: {best * 1e3:.2f} ms (best of {args.repeat}), "
          f"{2 * macs / best / 1e9:.1f} GFLOP/s")
    print(f"  max relative difference vs the NumPy reference (first image): {err:.1e}")
    return 0 if err < 1e-4 else 1


_INT_TUPLES = ("x", "w", "strides", "pads", "dilations", "output_padding")


def _bad_item(item, text, why):
    """The CLI's exit for one bad LAYER item: the item, the whole LAYER and what was wrong."""
    return SystemExit(f"python -m convt: bad LAYER item {item!r} in {text!r} ({why})")


def _layer(text):
    """(x shape, keywords for ConvTranspose, dtype) of one LAYER string; SystemExit with the
    item at fault otherwise."""
    kv = {}
    keys = _INT_TUPLES + ("group", "dtype", "data_format")
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or key not in keys:
            raise _bad_item(item, text, f"expected key=value with key in {keys}")
        if key in _INT_TUPLES + ("group",):
            try:
                ints = tuple(int(v) for v in value.split(","))
            except ValueError:
                raise _bad_item(item, text, "expected integers separated by commas") from None
            if key in ("x", "w") and min(ints) < 0:
                raise _bad_item(item, text, "a shape's lengths are non-negative")
            if key == "group" and len(ints) != 1:
                raise _bad_item(item, text, "expected one integer")
            kv[key] = ints[0] if key == "group" else ints
        else:
            kv[key] = value
    if "x" not in kv or "w" not in kv:
        raise SystemExit(f"python -m convt: LAYER {text!r} needs x=... and w=...")
    x, w = kv.pop("x"), kv.pop("w")
    dtype = kv.pop("dtype", "float32")
    if kv.get("data_format", "NCX").upper() == "NXC":   # the library takes either case
        x = (x[0], *x[2:], x[1])
    return x, w, kv, dtype


def _weights(w, dtype, rng=None):
    """The LAYER's filter in ``dtype`` (zeros, or random numbers from ``rng``)."""
    from ._geometry.dtypes import ALL_FLOATS, _requested_dtype

    dt = _requested_dtype("LAYER", dtype, ALL_FLOATS)
    return (np.zeros(w, dt) if rng is None else rng.standard_normal(w).astype(dt)), dt


def _explain(args):
    import convt

    x, w, kw, dtype = _layer(args.layer)
    w, _ = _weights(w, dtype)
    print(convt.explain(x, w, method=args.method, workers=args.workers, **kw))
    return 0


def _tune(args):
    import convt

    if args.store is not None or not args.no_store:
        print(f"tuning store: {convt.use_tuning_store(args.store)}")
    for text in args.layers:
        x, w, kw, dtype = _layer(text)
        rng = np.random.default_rng(0)
        w, dt = _weights(w, dtype, rng)
        op = convt.ConvTranspose(w, method="tune", workers=args.workers, **kw)
        op(rng.standard_normal(x).astype(dt))
        e = op.explain(x)
        times = ", ".join(f"{m} {t * 1e3:.3f} ms" for m, t in (e.measured or {}).items())
        print(f"{text}: {e.choice}" + (f" ({times})" if times else f" ({e.reason})"))
    if args.export:
        convt.export_tuning(args.export)
        print(f"exported to {args.export}")
    return 0


def _translate(args):
    """Print the translation's code, its keyword arguments and notes; a call the source
    refuses or the destination cannot express exits with status 2 and the message."""
    import convt

    kv = {}
    for item in args.call.split():
        key, sep, value = item.partition("=")
        if not sep:
            print(f"python -m convt translate: bad CALL item {item!r} (expected key=value)",
                  file=sys.stderr)
            return 2
        kv[key] = _value(value)
    shapes = [kv.pop(k, None) for k in ("x", "w", "b")]
    if shapes[0] is None or shapes[1] is None:
        print(f"python -m convt translate: CALL {args.call!r} needs x=... and w=...",
              file=sys.stderr)
        return 2
    shapes = [s if s is None or isinstance(s, tuple) else (s,) for s in shapes]
    try:
        t = convt.translate(args.src, args.dst, shapes[0], shapes[1], shapes[2], **kv)
    except (ValueError, TypeError) as e:
        print(f"python -m convt translate: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    print(t.code)
    print(f"kwargs: {t.kwargs}")
    for note in t.notes:
        print(f"note: {note}")
    return 0


def _value(text):
    """A CALL value: True / False / None; integers (comma-separated: a tuple); "a:b" pairs,
    comma-separated (a tuple of pairs, jax's or TF's explicit padding); comma-separated
    words (a tuple of strings); else the string."""
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    items = text.rstrip(",").split(",")
    try:
        if ":" in text:
            return tuple(tuple(int(v) for v in item.split(":")) for item in items)
        ints = tuple(int(v) for v in items)
    except ValueError:
        return tuple(items) if "," in text else text
    return ints if "," in text else ints[0]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m convt", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="build and runtime configuration")
    d = sub.add_parser("demo", help="run a real layer, print the method, shape and time")
    d.add_argument("--workers", type=int, default=None)
    d.add_argument("--repeat", type=_positive, default=5)
    e = sub.add_parser("explain", help="print what conv_transpose would run on LAYER, and why")
    e.add_argument("layer", help='e.g. "x=1,16,64,64 w=16,16,31,31 strides=1,1"')
    e.add_argument("--method", default="auto")
    e.add_argument("--workers", type=int, default=None)
    t = sub.add_parser("tune", help="tune LAYERs (method='tune') and store the winners")
    t.add_argument("layers", nargs="+", metavar="LAYER")
    t.add_argument("--workers", type=int, default=None)
    t.add_argument("--store", default=None,
                   help="tuning store directory (default: $CONVT_TUNING_DIR or the user cache)")
    t.add_argument("--no-store", action="store_true", help="keep the winners in memory only")
    t.add_argument("--export", default=None, help="also write the winners to this JSON file")
    tr = sub.add_parser("translate", help="write one convention's call in another's terms",
                        description="CALL: x=SHAPE w=SHAPE [b=SHAPE] and the source's "
                        "keywords, e.g. \"x=1,16,32,32 w=16,8,4,4 strides=2,2 "
                        "auto_pad=SAME_UPPER\" (comma-separated integers are tuples)")
    tr.add_argument("--from", dest="src", required=True, help="source convention")
    tr.add_argument("--to", dest="dst", required=True, help="destination convention")
    tr.add_argument("call", help='e.g. "x=1,16,32,32 w=16,8,4,4 strides=2,2"')
    args = p.parse_args(argv)
    if args.cmd == "translate":
        return _translate(args)
    try:
        if args.cmd == "explain":
            return _explain(args)
        if args.cmd == "tune":
            return _tune(args)
        if args.cmd == "info":
            import convt

            convt.show_config()
            return 0
        return _demo(args)
    except (ValueError, TypeError, MemoryError) as e:
        # the library's messages name the parameter and the value: no traceback needed
        raise SystemExit(f"python -m convt {args.cmd}: {type(e).__name__}: {e}") from None


def _positive(text):
    """argparse type: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return n


if __name__ == "__main__":
    sys.exit(main())
