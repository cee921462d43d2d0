"""Transposed convolution of Dask arrays, chunk by chunk, with the in-memory call's values.

``conv_transpose`` plans with the same front ends and the same padding resolution as the
in-memory functions, then cuts the canonical geometry into independent output blocks
(convt/_geometry/chunking.py): each block is one convt call on its input slice plus a halo, with local
pads, so no block ever needs another's output. The graph has one task per output block; the
weights and bias are one more key that every task depends on, so a distributed scheduler ships
them once per worker, and each process keeps its prepared plans in a small cache keyed by a
token of the weights and the block's local spec.

Requires ``dask[array]`` (``pip install "convt[dask]"``, which also installs ``distributed``).
"""
from __future__ import annotations

import functools
import inspect
import itertools
import sys
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np

try:
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph
except ImportError as exc:  # pragma: no cover - exercised only without dask
    raise ImportError("convt.dask needs dask[array]: pip install \"convt[dask]\" "
                      "(dask[array] and distributed)") from exc

from . import onednn, onnx, openvino
from ._api import ConvTranspose
from ._api import conv_transpose as _canonical
from ._geometry.chunking import axis_blocks
from ._geometry.dtypes import as_array, cast_hint, dtype_name
from ._geometry.geometry import PadRule, resolve
from ._dispatch.guard import check_range
from ._dispatch.plan import Plan, pick, variant_choice
from ._dispatch.plan import block_pin as block_pin_of
from ._dispatch.threads import renew_after_fork
from ._geometry.validate import bad_type, choice, fail

__all__ = ["conv_transpose", "CONVENTIONS"]


def _canonical_prepare(x, w, b, **keywords):
    return x, ConvTranspose(w, b, **keywords)._plan


# convention -> (the in-memory function whose keywords it takes, how many leading array
# parameters that function has, its planning step: same parameters -> (input, Plan)).
_FRONT_ENDS = {
    "canonical": (_canonical, 3, _canonical_prepare),
    "onnx": (onnx.conv_transpose, 3, onnx._prepare),
    "openvino": (openvino.convolution_backprop_data, 2,
                 functools.partial(openvino._prepare, grouped=False)),
    "openvino_group": (openvino.group_convolution_backprop_data, 2,
                       functools.partial(openvino._prepare, grouped=True)),
    "onednn": (onednn.conv_transpose, 3, onednn._prepare),
}
CONVENTIONS = tuple(_FRONT_ENDS)
_CACHE_SIZE = 64  # prepared plans a process keeps (one per weights x block geometry)
_cache = OrderedDict()
_cache_lock = renew_after_fork(sys.modules[__name__], "_cache_lock")


@dataclass(frozen=True, eq=False)  # eq=False: hashed by identity, never by its arrays
class _Weights:
    """The one graph value every block task depends on (shipped once per worker)."""

    token: str
    spec: object
    w_iox: np.ndarray
    bias: np.ndarray | None
    dtype: np.dtype
    allowed: tuple
    cast: bool


@dataclass(frozen=True)
class _Block:
    """A block task's static arguments: how to cut its input and its local spec."""

    cuts: tuple          # per spatial axis, per input chunk it reads: (start, stop)
    spec: object         # the OpSpec with this block's local canonical pads
    method: str
    pin: tuple | None    # the whole array's direct variant (see Plan.with_spec)
    workers: int
    spatial_axes: tuple


def _plan_for(weights, block):
    """The process's prepared plan for one block geometry (weights packed once per
    process and method; each block geometry shares them through ``Plan.with_spec``)."""
    method, workers = block.method, block.workers
    key = (weights.token, block.spec, method, block.pin, workers)
    base_key = (weights.token, None, method, None, workers)
    # One lock for lookups and builds: concurrent blocks of a new array wait for the one
    # thread packing the weights instead of packing them again.
    with _cache_lock:
        hit = _cache.get(key)
        if hit is None:
            base = _cache.get(base_key)
            if base is None:
                base = Plan(weights.spec, weights.w_iox, weights.bias, weights.dtype,
                            allowed=weights.allowed, method=method, workers=workers,
                            cast=weights.cast)
            hit = _cache[key] = base.with_spec(block.spec, block.pin)
            _cache[base_key] = base
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
        _cache.move_to_end(key)
    return hit


def _assemble(blocks, cuts, axes):
    """The block's input: the needed part of each input chunk (C order over the spatial grid
    of ``cuts``), copied once into one array (a view when one chunk holds it all)."""
    grid = [range(len(c)) for c in cuts]
    if len(blocks) == 1:
        index = [slice(None)] * blocks[0].ndim
        for ax, ((lo, hi),) in zip(axes, cuts):
            index[ax] = slice(lo, hi)
        return blocks[0][tuple(index)]
    shape = list(blocks[0].shape)
    for ax, c in zip(axes, cuts):
        shape[ax] = sum(hi - lo for lo, hi in c)
    out = np.empty(shape, blocks[0].dtype)
    for block, pos in zip(blocks, itertools.product(*grid)):
        src, dst = [slice(None)] * out.ndim, [slice(None)] * out.ndim
        for ax, c, j in zip(axes, cuts, pos):
            start = sum(hi - lo for lo, hi in c[:j])
            lo, hi = c[j]
            src[ax], dst[ax] = slice(lo, hi), slice(start, start + hi - lo)
        out[tuple(dst)] = block[tuple(src)]
    return out


def _run_block(blocks, block, weights):
    x = _assemble(blocks, block.cuts, block.spatial_axes)
    return _plan_for(weights, block)(x)


def _front_end_plan(conv, convention, x_dtype, x_ndim, w, b, keywords):
    public, n_arrays, prepare = _FRONT_ENDS[convention]
    sig = inspect.signature(public)
    # out= has no meaning for a lazy result (dask.array.store writes one into any target)
    accepted = [k for k in list(sig.parameters)[n_arrays:] if k != "out"]
    unknown = sorted(set(keywords) - set(accepted))
    if unknown:
        raise bad_type(conv, unknown[0], f"is not a keyword of {public.__module__}."
                       f"{public.__name__}; it takes {accepted}", keywords[unknown[0]])
    if n_arrays == 2 and b is not None:
        raise fail(conv, "b", f"must be None: {public.__name__} has no bias input",
                   type(b).__name__)
    meta = np.empty((0,) * x_ndim, x_dtype)  # the front end checks x's dtype on it
    bound = sig.bind(meta, w, *([b] if n_arrays == 3 else []), **keywords)
    bound.apply_defaults()
    bound.arguments.pop("out", None)
    return prepare(**bound.arguments)[1]


def conv_transpose(x, w, b=None, *, convention="canonical", **keywords):
    """Transposed convolution of a Dask array, lazily, chunk by chunk.

    Parameters
    ----------
    x : dask.array.Array (or array_like) of shape (N, C_in, *spatial) or (N, *spatial, C_in)
        Chunked along the batch and / or the spatial axes in any way (uneven chunks and
        chunks smaller than the kernel or the stride included). The channel axis is rechunked
        to one chunk if it is split.
    w : ndarray
        The filter, in the layout the chosen convention's in-memory function expects.
    b : ndarray of shape (C_out,), optional
        Bias (not for the OpenVINO conventions, whose ops have no bias input).
    convention : {"canonical", "onnx", "openvino", "openvino_group", "onednn"}
        Whose keywords ``keywords`` are: `convt.conv_transpose`, `convt.onnx.conv_transpose`,
        `convt.openvino.convolution_backprop_data`,
        `convt.openvino.group_convolution_backprop_data` or `convt.onednn.conv_transpose`.
    **keywords
        That function's keyword arguments (OpenVINO's ``output_shape`` input included), with
        its defaults, except ``workers``: threads per block task, default 1 (Dask runs
        blocks in parallel; see docs/dask.md).

    Returns
    -------
    y : dask.array.Array
        The in-memory function's result, lazily: same shape, dtype, layout and values.
        Batch chunks are kept; the channel axis is one chunk; along a spatial axis an input
        chunk boundary at a becomes the output boundary a*s - pad_begin (clipped to the
        output; chunks that the pads crop away entirely disappear).

    Raises
    ------
    ValueError, TypeError
        As the in-memory function, with its convention's messages; unknown keywords or a
        bias for OpenVINO name ``convt.dask (<convention>)``.

    Notes
    -----
    With ``method="auto"``, the backend is chosen once from the whole array's geometry and
    used for every block. Direct-backend results equal the in-memory call's bit for bit (each
    output is computed by the same kernel with the same taps in the same order); the FFT
    backend's agree to its normwise error (docs/fft.md).

    Examples
    --------
    >>> import numpy as np, dask.array as da, convt.dask
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((2, 4, 20, 20)).astype(np.float32)
    >>> w = rng.standard_normal((4, 3, 4, 4)).astype(np.float32)
    >>> y = convt.dask.conv_transpose(da.from_array(x, chunks=(1, 4, 7, 10)), w,
    ...                               strides=(2, 2), pads=(1, 1, 1, 1))
    >>> y.chunks
    ((1, 1), (3,), (13, 14, 13), (19, 21))
    >>> bool((y.compute() == convt.conv_transpose(x, w, strides=(2, 2), pads=(1, 1, 1, 1))).all())
    True
    """
    convention = choice("convt.dask", "convention", convention, CONVENTIONS)
    conv = f"convt.dask ({convention})"
    if not isinstance(x, da.Array):
        x = da.asarray(x)
    keywords.setdefault("workers", 1)
    plan = _front_end_plan(conv, convention, x.dtype, x.ndim, w, b, keywords)
    spec = plan.spec
    # x's own dtype, whatever dtype= casts it to (the in-memory call refuses an int or
    # complex x at once; the canonical planner never sees x): now, not at compute()
    as_array(spec.convention, spec.input_name, np.empty(0, x.dtype), plan.allowed)
    if dtype_name(x.dtype) != dtype_name(plan.dtype) and not plan.cast:
        raise fail(spec.convention, spec.input_name, "must have the weights' dtype "
                   f"{plan.dtype.name} {cast_hint(plan.castable, 'it')}", x.dtype.name,
                   exc=TypeError)
    if any(np.isnan(c) for cs in x.chunks for c in cs):
        raise fail(conv, "x", "must have known chunk sizes (x.compute_chunk_sizes())", x.shape)
    geom = resolve(spec, x.shape)
    check_range(spec.convention, geom, spec.input_name)
    # One backend for every block, chosen on the whole array. "tune" is chosen as "auto" is,
    # by the cost model: timing candidates would need the whole array in memory.
    method = plan.method if plan.method not in ("auto", "tune") else pick(plan.estimate(geom))
    pin = variant_choice(geom, plan.dtype) if method == "direct" else None
    nxc = geom.data_format == "NXC"
    c_axis = x.ndim - 1 if nxc else 1
    if len(x.chunks[c_axis]) > 1:
        x = x.rechunk({c_axis: -1})
    return _graph(x, plan, geom, method, pin)


def _graph(x, plan, geom, method, pin):
    """The lazy result: one task per output block (per batch chunk x spatial blocks), each
    depending on the input chunks its block reads and on the one weights key."""
    spec, nd, nxc = plan.spec, geom.ndim, geom.data_format == "NXC"
    spatial_axes = tuple(range(1, nd + 1)) if nxc else tuple(range(2, nd + 2))
    axes = [axis_blocks(x.chunks[ax], stride=geom.strides[a], dilation=geom.dilations[a],
                        kernel=geom.kernel[a], pads_begin=geom.pads_begin[a],
                        out_len=geom.out_shape[a])
            for a, ax in enumerate(spatial_axes)]
    weights = _weights(plan)
    name = "convt-dask-" + tokenize(x.name, weights.token, spec, method, pin, plan.workers)
    wkey = "convt-weights-" + weights.token
    layer = {wkey: weights}
    for combo in itertools.product(*(range(len(blocks)) for blocks in axes)):
        pieces = [axes[a][j] for a, j in enumerate(combo)]
        rule = PadRule(kind="explicit", output_padding=(0,) * nd,
                       pads_begin=tuple(p.pads_begin for p in pieces),
                       pads_end=tuple(p.pads_end for p in pieces))
        # each block runs the whole array's variant, summing as the whole array does
        block_pin = pin if pin is None else block_pin_of(
            geom, pin, tuple(p.out_start for p in pieces))
        block = _Block(cuts=tuple(p.cuts for p in pieces), spec=replace(spec, rule=rule),
                       method=method, pin=block_pin, workers=plan.workers,
                       spatial_axes=spatial_axes)
        grid = list(itertools.product(*(range(p.first_chunk, p.first_chunk + len(p.cuts))
                                        for p in pieces)))
        for n in range(len(x.chunks[0])):
            out_key = (name, n, *combo, 0) if nxc else (name, n, 0, *combo)
            in_keys = [(x.name, n, *g, 0) if nxc else (x.name, n, 0, *g) for g in grid]
            layer[out_key] = (_run_block, in_keys, block, wkey)
    sp_chunks = [tuple(p.out_stop - p.out_start for p in blocks) for blocks in axes]
    chunks = ((x.chunks[0], *sp_chunks, (geom.c_out,)) if nxc
              else (x.chunks[0], (geom.c_out,), *sp_chunks))
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[x])
    return da.Array(graph, name, chunks, meta=np.empty((0,) * x.ndim, plan.dtype))


def _weights(plan):
    token = tokenize(plan.w_iox, plan.bias, plan.dtype.name, plan.spec, plan.cast)
    return _Weights(token=token, spec=plan.spec, w_iox=plan.w_iox, bias=plan.bias,
                    dtype=plan.dtype, allowed=plan.allowed, cast=plan.cast)
