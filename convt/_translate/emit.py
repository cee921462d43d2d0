"""Writing a destination's call as one Python expression, in a framework's own tensor
operations or in NumPy + convt (what `Translation.__call__` evaluates).

A destination module describes its call as a `Call`: the function, its keyword arguments, the
layouts it wants (as transpositions of the canonical arrays), what it does to the canonical IOX
filter, and the window it produces on each axis. `render` turns that and the source's
`Canonical` into the expression: the source arrays' layout changes, the call, the crop or zero
pad (convt._translate.window), the bias where the destination takes none (or where zeros were
padded: convt adds the bias to every output position), and the source's output layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .window import axes_of, window

__all__ = ["Dialect", "DIALECTS", "Call", "render", "inverse", "identity"]


def identity(n):
    return tuple(range(n))


def inverse(perm):
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return tuple(out)


def _tup(v):
    v = tuple(v)
    return repr(v)


@dataclass(frozen=True)
class Dialect:
    """How one framework spells the few tensor operations a translation needs."""

    name: str
    transpose: str      # format with e (expression), p (permutation)
    flip: str           # e, a (axes)
    reshape: str        # e, s (shape)
    pad: str            # e, w (widths, as the framework takes them)
    torch_pad: bool = False   # widths as torch.nn.functional.pad takes them (last axis first)

    def pad_widths(self, widths):
        if self.torch_pad:
            flat = []
            for before, after in reversed(widths):
                flat += [before, after]
            while flat[-2:] == [0, 0]:
                flat = flat[:-2]
            return _tup(flat)
        return _tup(tuple(w) for w in widths)


DIALECTS = {
    "numpy": Dialect("numpy", "{e}.transpose({p})", "np.flip({e}, {a})", "{e}.reshape({s})",
                     "np.pad({e}, {w})"),
    "torch": Dialect("torch", "{e}.permute({p})", "{e}.flip({a})", "{e}.reshape({s})",
                     "torch.nn.functional.pad({e}, {w})", torch_pad=True),
    "tensorflow": Dialect("tensorflow", "tf.transpose({e}, {p})", "tf.reverse({e}, {a})",
                          "tf.reshape({e}, {s})", "tf.pad({e}, {w})"),
    "keras": Dialect("keras", "keras.ops.transpose({e}, {p})", "keras.ops.flip({e}, {a})",
                     "keras.ops.reshape({e}, {s})", "keras.ops.pad({e}, {w})"),
    "jax": Dialect("jax", "jax.numpy.transpose({e}, {p})", "jax.numpy.flip({e}, {a})",
                   "{e}.reshape({s})", "jax.numpy.pad({e}, {w})"),
}


@dataclass(frozen=True)
class Call:
    """One destination call, described on canonical arrays.

    ``x_layout`` / ``y_layout``: the destination's input is ``x_canonical.transpose(x_layout)``
    and its output is ``y_canonical.transpose(y_layout)``. ``w_ops``: what the destination
    wants done to the canonical IOX filter, in order: ("transpose", perm), ("reshape", shape) or
    ("flip", spatial axes of the canonical filter). ``pads``: per canonical spatial axis, the
    (pb_d, pe_d) of the window the call produces. ``takes_bias``: the bias is the call's third
    positional argument (else it is added, broadcast, in the output layout).
    """

    function: str           # the real framework's function, e.g. "torch.nn.functional.conv_transpose2d"
    convt_function: str     # convt's front end with the same signature
    dialect: str            # DIALECTS key of the real code
    kwargs: dict
    x_layout: tuple
    y_layout: tuple
    pads: tuple
    w_ops: tuple = ()
    takes_bias: bool = False
    unbatched_ok: bool = False   # the function takes an unbatched (C, *spatial) input as is
    notes: tuple = field(default=())


def _filter_ops(canon, w_shape, call):
    """(flip axes of the source filter, [(op, arg), ...]) turning the source's filter into the
    destination's: the flips move to the front (they commute with the transpositions and with
    merging / splitting the leading group axes), transpositions merge, and a reshape undone by
    the next one disappears."""
    lead = 3 if canon.w_grouped else 2
    flips = set(canon.w_flip) ^ {a for op, arg in call.w_ops if op == "flip" for a in arg}
    src_flip = sorted(canon.w_axes[lead + j] for j in flips)
    ops = [("transpose", canon.w_axes)]
    shape = tuple(w_shape[a] for a in canon.w_axes)
    if canon.w_grouped:
        ops.append(("reshape", (shape[0] * shape[1], *shape[2:])))
    ops += [(op, arg) for op, arg in call.w_ops if op != "flip"]
    return src_flip, _simplify(ops, tuple(w_shape))


def _simplify(ops, shape):
    out = []   # (op, arg, shape before)
    for op, arg in ops:
        arg = tuple(arg)
        if out and out[-1][0] == op == "transpose":
            _, prev, before = out.pop()
            arg = tuple(prev[a] for a in arg)
            shape = before
        elif out and out[-1][0] == op == "reshape":
            _, _, before = out.pop()
            shape = before
        new = tuple(shape[a] for a in arg) if op == "transpose" else arg
        if (op == "transpose" and arg == identity(len(arg))) or (op == "reshape"
                                                                and arg == shape):
            continue
        out.append((op, arg, shape))
        shape = new
    return [(op, arg) for op, arg, _ in out]


def _apply(d, e, op, arg):
    if op == "transpose":
        return d.transpose.format(e=e, p=_tup(arg))
    if op == "reshape":
        return d.reshape.format(e=e, s=_tup(arg))
    return d.flip.format(e=e, a=_tup(arg))


def _index(parts, ellipsis=False):
    """``[...]`` text of per-axis slices: '...' for the leading full slices when the last axis
    is sliced (or ``ellipsis``: always), else the trailing full slices dropped."""
    if parts[-1] != ":" or ellipsis:
        lead = 0
        while parts[lead] == ":":
            lead += 1
        return ", ".join((["..."] if lead else []) + parts[lead:])
    while parts[-1] == ":":
        parts = parts[:-1]
    return ", ".join(parts)


def _filter(d, canon, w_shape, call):
    flips, ops = _filter_ops(canon, w_shape, call)
    w = d.flip.format(e="w", a=_tup(flips)) if flips else "w"
    for op, arg in ops:
        w = _apply(d, w, op, arg)
    return w


def _fit(d, y, wins, pos, nd, ellipsis):
    """``y`` cropped and zero-padded to the source's windows (``pos``: canonical axis ->
    output axis)."""
    if any(win.crops for win in wins):
        parts = [":"] * (nd + 2)
        for j, win in enumerate(wins):
            if win.crops:
                parts[pos[2 + j]] = f"{win.lo}:{win.hi}"
        y = f"{y}[{_index(parts, ellipsis)}]"
    if any(win.pads for win in wins):
        widths = [(0, 0)] * (nd + 2)
        for j, win in enumerate(wins):
            widths[pos[2 + j]] = (win.before, win.after)
        y = d.pad.format(e=y, w=d.pad_widths(widths))
    return y


def render(canon, w_shape, call, dialect=None):
    """The expression in x, w, b computing the source's output with ``call``; ``dialect``:
    "numpy" for NumPy + convt (the function is then ``call.convt_function``)."""
    d = DIALECTS[dialect or call.dialect]
    nd, ident = canon.geometry.ndim, identity(canon.geometry.ndim + 2)
    perm = tuple(canon.x_axes[a] for a in call.x_layout)
    pos = {call.y_layout[m]: m for m in range(nd + 2)}   # canonical axis -> output axis
    back = tuple(pos[a] for a in canon.y_axes)
    # an unbatched input stays so where the function takes it and no axis moves
    add_batch = canon.unbatched and not (call.unbatched_ok and perm == back == ident)
    x = "x[None]" if add_batch else "x"
    if perm != ident:
        x = d.transpose.format(e=x, p=_tup(perm))
    wins = [window(ax, pb, pe) for ax, (pb, pe) in zip(axes_of(canon.geometry), call.pads)]
    # convt adds the bias to every output position, zero-padded ones included
    bias_in_call = canon.has_bias and call.takes_bias and not any(w.pads for w in wins)
    args = [x, _filter(d, canon, w_shape, call)] + (["b"] if bias_in_call else [])
    args += [f"{k}={v!r}" for k, v in call.kwargs.items()]
    fn = call.convt_function if d.name == "numpy" else call.function
    y = _fit(d, f"{fn}({', '.join(args)})", wins, pos, nd, canon.unbatched and not add_batch)
    summed = canon.has_bias and not bias_in_call
    if summed:
        ones = nd + 1 - pos[1]
        b = d.reshape.format(e="b", s=_tup((-1,) + (1,) * ones)) if ones else "b"
        y = f"{y} + {b}"

    def operand(template):   # a sum is parenthesised before a method call or an index
        return f"({y})" if summed and template.startswith("{e}") else y

    if back != ident:
        y, summed = d.transpose.format(e=operand(d.transpose), p=_tup(back)), False
    if add_batch:
        y = f"{operand('{e}')}[0]"
    return y
