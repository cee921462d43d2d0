"""convt.dask: chunked results equal the in-memory call's, on the threaded and distributed
schedulers, for every front end and chunking.

The direct backend's results are compared for exact equality: each block pins the whole
array's direct variant (convt._dispatch.plan.direct_variant), so every output's terms are summed in
the same order as in the in-memory call. The FFT backend transforms each block at its own
length, so its results are compared with the tolerance table (conftest.py).
"""
import pickle
import subprocess
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

import convt  # noqa: E402
import convt.dask as cdask  # noqa: E402

from conftest import assert_close, np_dtype  # noqa: E402

# (name, convention, in-memory function, nd, data_format, keywords, chunks of the spatial
# axes (None: one chunk), groups, kernel, x spatial shape, batch)
R = np.random.default_rng(2024)


def _case(name, convention, nd, kw, chunks, *, groups=1, kernel=3, size=9, batch=2,
          c_in=4, m=3, data_format="NCX", bias=True, batch_chunks=1, dtype="float32"):
    return pytest.param(dict(convention=convention, nd=nd, kw=kw, chunks=chunks,
                             groups=groups, kernel=kernel, size=size, batch=batch, c_in=c_in,
                             m=m, data_format=data_format, bias=bias,
                             batch_chunks=batch_chunks, dtype=dtype), id=name)


CASES = [
    _case("batch-only", "canonical", 2, dict(strides=(2, 2), pads=(1, 1, 1, 1)), None,
          batch=4, batch_chunks=2),
    _case("1d-uneven", "canonical", 1, dict(strides=(2,), pads=(1, 2)), (3, 1, 4, 1)),
    _case("1d-chunks<stride", "canonical", 1, dict(strides=(4,), pads=(2, 0)), (1,) * 9),
    _case("1d-chunks<kernel-dilated", "canonical", 1, dict(dilations=(3,), pads=(0, 4)),
          (2, 1, 3, 1, 2), kernel=5),
    _case("2d-gemm-op", "canonical", 2, dict(strides=(2, 3), output_padding=(1, 2),
                                             pads=(1, 0, 0, 2)), ((4, 5), (2, 2, 5)),
          c_in=8, m=8),
    _case("2d-groups-nxc", "canonical", 2, dict(strides=(2, 2), group=2), ((3, 3, 3), (5, 4)),
          c_in=8, m=4, groups=2, data_format="NXC"),
    _case("2d-depthwise", "canonical", 2, dict(strides=(2, 2), group=4, pads=(1, 1, 1, 1)),
          ((2, 7), (1, 8)), c_in=4, m=1, groups=4, kernel=4),
    _case("2d-negative-pads", "canonical", 2, dict(strides=(3, 2), output_shape=(31, 22)),
          ((4, 4, 1), (2, 7)), c_in=8, m=8),
    _case("2d-stride>kernel-negative", "canonical", 2,
          dict(strides=(3, 3), output_shape=(30, 28)), ((2, 3, 4), (5, 4)), kernel=1,
          c_in=5, m=4),
    _case("3d-ncx", "canonical", 3, dict(strides=(2, 2, 1), pads=(1, 0, 1, 0, 1, 1)),
          ((3, 3), (2, 4), (4, 2)), size=6, c_in=8, m=4),
    _case("3d-nxc-dilated", "canonical", 3, dict(dilations=(2, 1, 2), strides=(1, 2, 2)),
          ((2, 2, 2), (6,), (1, 5)), size=6, kernel=2, data_format="NXC"),
    _case("batch-rows", "canonical", 1, dict(strides=(2,), output_shape=(60,)), (1, 2),
          size=3, batch=8, batch_chunks=3, c_in=8, m=8),
    _case("float64", "canonical", 2, dict(strides=(2, 2)), ((5, 4), (4, 5)),
          dtype="float64", c_in=6, m=5),
    _case("float16", "canonical", 1, dict(strides=(2,)), (4, 5), dtype="float16"),
    _case("onnx-11-same-upper", "onnx", 2, dict(opset=11, auto_pad="SAME_UPPER",
                                                 strides=[2, 2]), ((4, 5), (3, 6))),
    _case("onnx-1-output-shape", "onnx", 2, dict(opset=1, strides=[2, 2],
                                                 output_shape=[20, 18]), ((4, 5), (3, 6))),
    _case("openvino", "openvino", 2, dict(strides=[2, 2], pads_begin=[1, 0],
                                          pads_end=[0, 1], dilations=[1, 2],
                                          output_padding=[1, 0]), ((2, 7), (4, 5)),
          bias=False),
    _case("openvino-group-output-shape", "openvino_group", 1,
          dict(strides=[3], dilations=[1], output_shape=np.array([29])), (4, 2, 3),
          groups=2, c_in=4, m=2, bias=False),
    _case("onednn-nxc-same-lower", "onednn", 2, dict(strides=[2, 2], dilations=[1, 1],
                                                     auto_pad="same_lower"),
          ((5, 4), (2, 2, 5)), data_format="NXC"),
]

_IN_MEMORY = {
    "canonical": convt.conv_transpose,
    "onnx": convt.onnx.conv_transpose,
    "openvino": convt.openvino.convolution_backprop_data,
    "openvino_group": convt.openvino.group_convolution_backprop_data,
    "onednn": convt.onednn.conv_transpose,
}


def _arrays(c):
    """x (in c's data layout), w (in the convention's filter layout), b, chunks of x."""
    nd, g, dt = c["nd"], c["groups"], np_dtype(c["dtype"])
    x = R.standard_normal((c["batch"], c["c_in"], *(c["size"],) * nd)).astype(dt)
    w = R.standard_normal((c["c_in"], c["m"], *(c["kernel"],) * nd)).astype(dt)
    b = R.standard_normal(c["m"] * g).astype(dt) if c["bias"] else None
    nxc = c["data_format"] == "NXC"
    if nxc:
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    if c["convention"] == "onednn":  # its default filter layout, XOI
        w = np.ascontiguousarray(np.moveaxis(w, (0, 1), (-1, -2)))
    if c["convention"] == "openvino_group":  # [G, C_in/G, C_out/G, K...]
        w = w.reshape(g, c["c_in"] // g, *w.shape[1:])
    sp = c["chunks"] or (None,) * nd
    sp = [ch if ch is not None else -1 for ch in sp]
    if nd == 1 and c["chunks"] is not None:
        sp = [c["chunks"]]
    nb = c["batch"]
    bch = tuple(np.diff(np.linspace(0, nb, c["batch_chunks"] + 1).astype(int)))
    chunks = (bch, *sp, -1) if nxc else (bch, -1, *sp)
    return x, w, b, chunks


def _keywords(c):
    kw = dict(c["kw"])
    conv = c["convention"]
    if conv in ("canonical", "onnx"):
        kw.setdefault("group", c["groups"])
    if conv == "onednn":
        kw["groups"] = c["groups"]
        kw.setdefault("data_format", c["data_format"])
    elif conv in ("canonical", "onnx", "openvino", "openvino_group"):
        kw["data_format"] = c["data_format"]
    return kw


def _in_memory(c, x, w, b, kw):
    f = _IN_MEMORY[c["convention"]]
    return f(x, w, **kw) if b is None else f(x, w, b, **kw)


def _dask_call(c, x, w, b, chunks, kw):
    xd = da.from_array(x, chunks=chunks)
    return cdask.conv_transpose(xd, w, b, convention=c["convention"], **kw)


@pytest.mark.parametrize("c", CASES)
def test_threaded_equals_in_memory(c):
    x, w, b, chunks = _arrays(c)
    kw = _keywords(c)
    ref = _in_memory(c, x, w, b, kw)
    y = _dask_call(c, x, w, b, chunks, kw)
    assert y.shape == ref.shape and y.dtype == ref.dtype
    got = y.compute(scheduler="threads")
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)  # bit for bit (see the module docstring)


def test_output_chunks_follow_input_boundaries():
    x = da.zeros((3, 2, 10), chunks=((2, 1), 2, (4, 6)), dtype=np.float32)
    w = np.ones((2, 3, 5), np.float32)
    y = cdask.conv_transpose(x, w, strides=(3,), pads=(2, 1))
    # input boundary 4 -> output 4*3 - 2 = 10; length (10-1)*3 + 5 - 3 = 29
    assert y.chunks == ((2, 1), (3,), (10, 19))


def test_split_channels_are_rechunked():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 6, 8, 8)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    y = cdask.conv_transpose(da.from_array(x, chunks=(1, 2, 4, 4)), w, strides=(2, 2))
    assert y.chunks[1] == (4,)
    np.testing.assert_array_equal(y.compute(), convt.conv_transpose(x, w, strides=(2, 2)))


@pytest.mark.parametrize("chunks", [(1, 8, (5, 9), (7, 7)), (1, 8, (1,) * 14, (3, 11))])
def test_fft_blocks_within_tolerance(chunks):
    """The FFT backend (chosen once for the whole array) transforms each block at its own
    length: equal to its normwise error, not bit for bit."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 14, 14)).astype(np.float32)
    w = rng.standard_normal((8, 4, 9, 9)).astype(np.float32)
    ref = convt.conv_transpose(x.astype(np.float64), w.astype(np.float64), pads=(2, 3, 1, 0),
                               method="reference")
    y = cdask.conv_transpose(da.from_array(x, chunks=chunks), w, pads=(2, 3, 1, 0),
                             method="fft").compute()
    assert_close(y, ref, "fft", "float32")


def _containing(graph, needle):
    """Keys of tasks whose pickled form contains the bytes ``needle``."""
    return [k for k, t in dict(graph).items() if needle in pickle.dumps(t, protocol=5)]


def test_weights_are_one_graph_key_not_embedded_in_tasks():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    x = da.from_array(rng.standard_normal((2, 8, 12, 12)).astype(np.float32),
                      chunks=(1, 8, 4, 4))
    y = cdask.conv_transpose(x, w, b, strides=(2, 2))
    blocks = [k for k in dict(y.dask) if isinstance(k, tuple) and k[0] == y.name]
    assert len(blocks) == 2 * 3 * 3
    for graph in (y.dask, dask.optimize(y)[0].dask):
        holders = _containing(graph, w.tobytes())
        assert len(holders) == 1 and str(holders[0]).startswith("convt-weights-")
        assert _containing(graph, b.tobytes()) == holders
        deps = graph.get_all_dependencies() if hasattr(graph, "get_all_dependencies") else None
        if deps is not None:
            assert all(holders[0] in deps[k] for k in blocks if k in deps)


def test_plans_prepared_once_per_process(monkeypatch):
    """Blocks share one packed-weights plan per process (per weights, method, workers)."""
    made = []
    real = cdask.Plan

    def counting(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cdask, "Plan", counting)
    rng = np.random.default_rng(6)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32) + 17.0  # a token not seen before
    x = da.from_array(rng.standard_normal((3, 4, 9, 9)).astype(np.float32),
                      chunks=(1, 4, 3, 3))
    y = cdask.conv_transpose(x, w, strides=(2, 2))
    y.compute(scheduler="threads")
    y.compute(scheduler="threads")
    assert len(made) == 1


def test_errors():
    x = da.zeros((1, 4, 6), chunks=(1, 4, 3), dtype=np.float32)
    w = np.ones((4, 2, 3), np.float32)
    with pytest.raises(ValueError, match=r"convt.dask: 'convention' must be one of"):
        cdask.conv_transpose(x, w, convention="caffe")
    with pytest.raises(TypeError, match=r"convt.dask \(onnx\): 'auto_pads' is not a keyword "
                                        r"of convt.onnx.conv_transpose"):
        cdask.conv_transpose(x, w, convention="onnx", auto_pads="VALID")
    with pytest.raises(ValueError, match=r"convt.dask \(openvino\): 'b' must be None: "
                                         r"convolution_backprop_data has no bias input"):
        cdask.conv_transpose(x, w, np.ones(2, np.float32), convention="openvino",
                             strides=[1], dilations=[1], pads_begin=[0], pads_end=[0])
    with pytest.raises(TypeError, match=r"conv_transpose: 'x' must have the weights' dtype "
                                        r"float64"):
        cdask.conv_transpose(x, w.astype(np.float64))
    with pytest.raises(TypeError, match=r"onnx \(opset 11\): 'X' must have the dtype of 'W', "
                                        r"float64"):
        cdask.conv_transpose(x, w.astype(np.float64), convention="onnx")
    for bad in (np.int32, np.complex64):   # at once, dtype= or not (it came at compute())
        with pytest.raises(TypeError, match=r"conv_transpose: 'x' must have a floating dtype "
                                            rf"in .*; got '{np.dtype(bad).name}'"):
            cdask.conv_transpose(x.astype(bad), w, dtype=np.float32)
    with pytest.raises(ValueError, match=r"conv_transpose: 'x' must have 4 channels"):
        cdask.conv_transpose(da.zeros((1, 3, 6), chunks=2, dtype=np.float32), w)
    with pytest.raises(ValueError, match=r"onednn: 'strides' is required"):
        cdask.conv_transpose(x, w, convention="onednn", data_format="NCX",
                             filter_format="IOX")
    unknown = da.zeros((4, 4, 6), chunks=(2, 4, 3), dtype=np.float32)
    unknown = unknown[unknown[:, 0, 0] >= 0]
    with pytest.raises(ValueError, match=r"convt.dask \(canonical\): 'x' must have known "
                                         r"chunk sizes"):
        cdask.conv_transpose(unknown, w)


def test_import_convt_without_dask_and_clear_error_for_convt_dask():
    code = ("import sys; sys.modules['dask'] = None; sys.modules['dask.array'] = None\n"
            "import convt\n"
            "try:\n    import convt.dask\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=str(__import__("pathlib").Path(convt.__file__)
                                             .parent.parent)).stdout
    assert 'pip install "convt[dask]"' in out


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    # client.run ships functions of this module by value, so workers never import it (its
    # "from conftest import" would depend on the workers' sys.path).
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as cl:
        yield cl


@pytest.mark.parametrize("c", [CASES[1], CASES[5], CASES[7], CASES[9], CASES[16],
                               CASES[18]])
def test_distributed_equals_in_memory(client, c):
    x, w, b, chunks = _arrays(c)
    kw = _keywords(c)
    ref = _in_memory(c, x, w, b, kw)
    got = client.compute(_dask_call(c, x, w, b, chunks, kw)).result()
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


def _base_plans(token):  # runs on the workers (pickled by value: see the fixture)
    from convt import dask as worker_dask
    return sum(1 for k in list(worker_dask._cache) if k[0] == token and k[1] is None)


def test_distributed_workers_prepare_weights_once(client):
    rng = np.random.default_rng(8)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    x = da.from_array(rng.standard_normal((4, 4, 16, 16)).astype(np.float32),
                      chunks=(1, 4, 4, 4))
    y = cdask.conv_transpose(x, w, strides=(2, 2))
    client.compute(y).result()
    token = cdask._weights(convt.ConvTranspose(w, strides=(2, 2), workers=1)._plan).token
    counts = client.run(_base_plans, token)
    # one packed-weights plan per worker that ran blocks (64 blocks: usually both do)
    assert len(counts) == 2 and set(counts.values()) <= {0, 1} and sum(counts.values()) >= 1


@pytest.mark.parametrize("case", range(4))
def test_bfloat16_blocks_give_the_in_memory_bits(case):
    """The blocks run the variant the in-memory call runs in the storage dtype (micro_bf16 on
    AVX512-BF16 CPUs), on blocks whose local pads differ: before, they ran the float32
    kernels (other bits), and a pinned micro_bf16 read one block's pack for all."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = ml_dtypes.bfloat16
    xs, ws, kw = [((2, 64, 12, 12), (64, 48, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
                  ((1, 64, 20, 20), (64, 64, 3, 3), dict(dilations=(2, 2), pads=(2, 2, 2, 2))),
                  ((1, 64, 16, 16), (64, 32, 3, 3),
                   dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1))),
                  ((1, 64, 64), (64, 32, 16), dict(strides=(8,), pads=(4, 4)))][case]
    rng = np.random.default_rng(case)
    x, w = rng.standard_normal(xs).astype(bf), rng.standard_normal(ws).astype(bf)
    b = rng.standard_normal(ws[1]).astype(bf)
    y = convt.ConvTranspose(w, b, method="direct", **kw)(x)
    chunks = (max(1, xs[0] // 2), xs[1], *(max(2, s // 3) for s in xs[2:]))
    yd = cdask.conv_transpose(da.from_array(x, chunks=chunks), w, b, method="direct",
                              **kw).compute()
    assert np.array_equal(yd.view(np.uint16), y.view(np.uint16))
