"""The depthwise variant's estimate shares the threads as its kernel does: the channels-first
kernel (convt._kernels._depthwise) takes tasks of _ROWS_PER_TASK row blocks, so a call of
few output rows (1-D, few output channels, long rows) is one task on one thread. No timings."""

import numpy as np
import pytest

import convt
from convt._backends.base import parallel
from convt._backends.direct import depthwise as _dw
from convt._backends.direct import registry as _direct
from convt._dispatch import cost as _cost
from convt._geometry.geometry import OpSpec, PadRule, resolve

from _helpers import spy


def _geom(batch, c_in, c_out, spatial, kernel, stride, groups, data_format="NCX"):
    nd = len(spatial)
    spec = OpSpec("t", stride, (1,) * nd, kernel, groups, c_in, c_out,
                  PadRule("explicit", (0,) * nd, (0,) * nd, (0,) * nd),
                  data_format=data_format)
    shape = (batch, c_in, *spatial) if data_format == "NCX" else (batch, *spatial, c_in)
    return resolve(spec, shape)


def _kernel_tasks(args):
    # depthwise_ncx's own count: N x C_out x O0 x O1 rows, each in blocks of qblock of
    # phase 0's outputs, _ROWS_PER_TASK rows a task
    y, phases, qblock = args[3], args[8], args[10]
    rows = int(np.prod(y.shape[:4])) * -(-int(phases[0, 0]) // qblock)
    return -(-rows // _dw._ROWS_PER_TASK)


_LONG = [((1, 204, 4, (2821,), (67,), (4,), 2)), ((2, 11, 2, (5874,), (69,), (2,), 1)),
         ((3, 6, 6, (40, 50), (3, 3), (2, 2), 3)), ((2, 4, 8, (9, 7, 300), (2, 2, 5), (1, 2, 3), 2))]


def _drawn(n, seed):
    # ranks 1-3, 1-3 channels a group on each side, innermost rows up to 3000 long
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        nd, g = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        ints = lambda lo, hi, k=nd: tuple(int(v) for v in rng.integers(lo, hi, k))
        spatial = ints(1, 9, nd - 1) + (int(rng.integers(1, 3000 // 4 ** (nd - 1))),)
        out.append(_geom(int(rng.integers(1, 4)), g * int(rng.integers(1, 4)),
                         g * int(rng.integers(1, 4)), spatial, ints(1, 9), ints(1, 5), g))
    return out


@pytest.mark.parametrize("geom", [_geom(*a) for a in _LONG] + _drawn(16, 919),
                         ids=lambda g: "")
def test_tasks_are_the_kernels(geom, monkeypatch):
    calls = spy(monkeypatch, _dw, "depthwise_ncx")
    monkeypatch.setattr(_dw, "_NCX", {})   # the fused function, not its specialisations
    rng = np.random.default_rng(0)
    w = rng.standard_normal((geom.c_in, geom.c_out // geom.groups, *geom.kernel))
    x = rng.standard_normal(geom.array_shape("input"))
    plan = convt.ConvTranspose(w, method="direct", strides=geom.strides, group=geom.groups,
                               pads=geom.pads_begin + geom.pads_end, workers=2)
    plan._plan.pin = ("depthwise", False)
    plan(x)
    assert len(calls) == 1
    kind = _dw.depthwise_kind(geom)
    assert _dw.VARIANT.tasks(geom, kind) == _kernel_tasks(calls[0])


def test_one_task_runs_on_one_thread():
    # 1d_n1_c204-4_i2821_k67_s4_g2_f64 of random sweep seed 107: 4 output rows of 6 blocks,
    # one task (9.2 ms measured on 2 workers, priced 4.2 as two threads' work)
    geom = _geom(1, 204, 4, (2821,), (67,), (4,), 2)
    kind = _dw.depthwise_kind(geom)
    c = _cost.current()
    assert _dw.VARIANT.tasks(geom, kind) == 1
    for f64 in (False, True):
        assert _direct.seconds(geom, kind, f64, 2, c) == pytest.approx(
            _direct.seconds(geom, kind, f64, 1, c))


def test_tasks_share_the_threads():
    # 2-D, 3 x 40 x 50 input, stride 2: 6 x 81 rows of one block, 8 tasks: both threads busy
    geom = _geom(1, 6, 6, (40, 50), (3, 3), (2, 2), 3)
    kind = _dw.depthwise_kind(geom)
    c = _cost.current()
    assert _dw.VARIANT.tasks(geom, kind) == -(-6 * 81 // _dw._ROWS_PER_TASK) == 8
    one = _direct.seconds(geom, kind, False, 1, c) - c["call_s"]
    two = _direct.seconds(geom, kind, False, 2, c) - c["call_s"]
    assert one / two == pytest.approx(parallel(2, c))


def test_channels_last_depthwise_takes_pixels():
    # the channels-last kernel of one channel per group spreads its pixels over the threads
    geom = _geom(1, 8, 8, (2821,), (67,), (4,), 8, data_format="NXC")
    assert _dw.VARIANT.tasks(geom, _dw.depthwise_kind(geom)) is None
    # with 2 channels a group it transposes and runs the channels-first kernel's tasks
    geom = _geom(1, 4, 8, (2821,), (67,), (4,), 4, data_format="NXC")
    assert _dw.VARIANT.tasks(geom, _dw.depthwise_kind(geom)) == 1


@pytest.mark.parametrize("geom", [_geom(1, 8, 120, (16, 1), (3, 3), (1, 3), 8)]
                         + [g for g in _drawn(40, 920) if g.strides[-1] > 2], ids=lambda g: "")
def test_row_calls_skip_empty_phases(geom):
    # from innermost stride 3 on, _row_ncx calls the row kernel once per block and phase
    # with outputs in the block (phases[c, 0] > the block's first q), as the kernel's
    # layout gives them
    lay = _dw.depthwise_layout(geom)
    o0, o1 = ((1, 1) + tuple(geom.out_shape[:-1]))[-2:]
    blocks = sum(-(-int(q) // lay.qblock) for q in lay.phases[:, 0])
    assert _dw._row_calls(geom) == geom.batch * geom.c_out * o0 * o1 * blocks


def test_rows_shorter_than_the_stride():
    # 2d_n1_c8-120_i16x1_k3x3_s1x3_d2x1_g8 of seed 109: one output a row, so one phase of
    # three is called (0.10 ms measured, priced 0.22 when all three were counted)
    geom = resolve(OpSpec("t", (1, 3), (2, 1), (3, 3), 8, 8, 120,
                          PadRule("explicit", (0, 0), (0, 1), (0, 1))), (1, 8, 16, 1))
    assert geom.out_shape == (20, 1)
    assert _dw._row_calls(geom) == 120 * 20
