"""A one-shot direct call's packing as its variant does it (``Variant.pack_seconds``): by
default the weights read and written once at ``pack_bytes_per_s``; the Winograd variant's
late sums (float32, large products) pack the kernel taps and sum the products' weights per
task in the kernel; the bfloat16 tiles (micro_bf16, and micro_amx's, which pack the same
way) read and write the 16-bit weights once at ``pairs_bytes_per_s``. No timings."""
from math import prod

import numpy as np
import pytest

from convt._backends.base import parallel
from convt._backends.direct import micro as _micro
from convt._backends.direct import registry as _direct
from convt._backends.direct import winograd as _wino
from convt._dispatch import cost as _cost
from convt._geometry.geometry import OpSpec, PadRule, resolve
from convt._kernels import _cpu


def _geom(x, w, strides, pads):
    nd = len(strides)
    spec = OpSpec("t", strides, (1,) * nd, w[2:], 1, w[0], w[1],
                  PadRule("explicit", (0,) * nd, pads, pads))
    return resolve(spec, x)


# bench workloads dcgan_g1 and hifigan_up1: float32 one-shot calls run the late sums
DCGAN_G1 = _geom((16, 512, 4, 4), (512, 256, 4, 4), (2, 2), (1, 1))
HIFIGAN_UP1 = _geom((1, 512, 256), (512, 256, 16), (8,), (4,))


def _generic(geom, itemsize, c):
    weights = geom.c_in * (geom.c_out // geom.groups) * prod(geom.kernel)
    return 2 * weights * itemsize / c["pack_bytes_per_s"]


@pytest.mark.skipif(_cpu.ISA < 1, reason="the micro variant and those built on it need the AVX2 level (CONVT_ISA caps it)")
@pytest.mark.parametrize("geom", [DCGAN_G1, HIFIGAN_UP1], ids=["dcgan_g1", "hifigan_up1"])
def test_late_sums_price_the_taps_and_the_sums(geom):
    c = _cost.current()
    kind = _cost.direct_kind(geom)
    assert kind.variant == "winograd"
    lay = _wino.wino_layout(geom, _micro.NR_F32)
    assert _wino.late_sums(lay, True, 4)
    weights = geom.c_in * geom.c_out * prod(geom.kernel)
    # one phase a task: every product value summed once
    assert (lay.tasks[:, 3] == 1).all() and len(lay.tasks) == len(lay.real)
    tasks = len(lay.tasks)
    expect = (2 * weights * 4 / c["wino_taps_bytes_per_s"] / parallel(2, c)
              + lay.packed * c["wino_late_sum_s"] / parallel(min(2, tasks / -(-tasks // 2)), c))
    got = _wino.VARIANT.pack_seconds(geom, kind, c, 4, 2)
    assert got == pytest.approx(expect)
    assert got < _generic(geom, 4, c)
    split = _cost.estimate(geom, np.float32, 2, one_shot=True).split["direct"]
    assert split[2] == pytest.approx(c["oneshot_call_s"] + got)
    assert split[1] == pytest.approx(split[0] + split[2])


@pytest.mark.parametrize("geom, low, high", [(DCGAN_G1, 0.80e-3, 1.02e-3),
                                             (HIFIGAN_UP1, 0.77e-3, 1.01e-3)],
                         ids=["dcgan_g1", "hifigan_up1"])
def test_late_sums_price_what_session_6_measured(geom, low, high):
    # The shipped constants against the figures they were set from (AMD EPYC Zen 4, 2
    # workers, float32, in one process: docs/performance.md, "One-shot Winograd: the taps
    # one line apart"): the taps' pack of 8.4 MB 0.44 ms, one-shot minus prepared 0.85-0.97
    # ms (dcgan_g1) and 0.82-0.96 (hifigan_up1), each band widened by 0.05 ms. A refit that
    # moves the price out of them fails here.
    from convt._dispatch.constants import DEFAULTS as c
    kind = _cost.direct_kind(geom)
    weights = geom.c_in * geom.c_out * prod(geom.kernel)
    assert 2 * weights * 4 / c["wino_taps_bytes_per_s"] / parallel(2, c) == pytest.approx(
        0.44e-3, rel=0.01)
    assert low <= c["oneshot_call_s"] + _wino.VARIANT.pack_seconds(geom, kind, c, 4, 2) <= high


@pytest.mark.parametrize("geom", [DCGAN_G1, HIFIGAN_UP1], ids=["dcgan_g1", "hifigan_up1"])
def test_float64_keeps_the_default(geom):
    # float64's taps go through pack_wino (3.4-3.8 ms over a prepared call, priced 3.4)
    c = _cost.current()
    kind = _cost.direct_kind(geom)
    assert _wino.VARIANT.pack_seconds(geom, kind, c, 8, 2) == pytest.approx(_generic(geom, 8, c))


@pytest.mark.skipif(_cpu.ISA < 1, reason="the micro variant and those built on it need the AVX2 level (CONVT_ISA caps it)")
def test_products_packed_keep_the_default():
    # products under _LATE_SUM_BYTES are packed by wino_weights: the default price
    geom = _geom((4, 128, 8, 8), (128, 64, 4, 4), (2, 2), (1, 1))
    c = _cost.current()
    kind = _cost.direct_kind(geom)
    lay = _wino.wino_layout(geom, _micro.NR_F32)
    assert kind.variant == "winograd" and not _wino.late_sums(lay, True, 4)
    assert _wino.VARIANT.pack_seconds(geom, kind, c, 4, 2) == pytest.approx(_generic(geom, 4, c))


@pytest.mark.parametrize("name", sorted(set(_direct.BY_NAME)
                                         - {"winograd", "micro_bf16", "micro_amx"}))
def test_other_variants_read_and_write_the_weights_once(name):
    c = _cost.current()
    geom = _geom((2, 6, 9), (6, 10, 5), (2,), (1,))
    kind = _cost.direct_kind(geom)
    assert _direct.BY_NAME[name].pack_seconds(geom, kind, c, 4, 2) == pytest.approx(
        _generic(geom, 4, c))
    assert _cost._packing_seconds(geom, np.float64, c) == pytest.approx(
        c["oneshot_call_s"] + _generic(geom, 8, c))


@pytest.mark.parametrize("geom", [DCGAN_G1, HIFIGAN_UP1], ids=["dcgan_g1", "hifigan_up1"])
def test_the_bfloat16_pair_pack_prices_what_session_7_measured(geom):
    # The pair pack (micro_bf16.packed_pairs) reads and writes the 16-bit weights once, on 2
    # workers for these 4 MiB: 0.31-0.33 ms inside the one-shot call (AMD EPYC Zen 4,
    # docs/performance.md, "bfloat16 one-shot calls: the pair pack"), the band widened by
    # 0.03 ms. The default price (4 bytes a value at pack_bytes_per_s) was 1.7 ms.
    from convt._backends.direct import micro_bf16
    from convt._dispatch.constants import DEFAULTS as c
    kind = _cost.direct_kind(geom)
    got = micro_bf16.VARIANT.pack_seconds(geom, kind, c, 4, 2)
    assert 0.28e-3 <= got <= 0.36e-3
    # one worker: no team, one thread's rate
    assert micro_bf16.VARIANT.pack_seconds(geom, kind, c, 4, 1) == pytest.approx(
        got * parallel(2, c))
    assert _generic(geom, 4, c) > 4 * got


def test_a_small_bfloat16_pack_is_priced_on_the_threads_that_pack_it(monkeypatch):
    # below micro_bf16._PARALLEL_PAIRS slots one thread packs, and is priced so
    from convt._backends.direct import micro_bf16
    c = _cost.current()
    geom = _geom((1, 64, 64, 64), (64, 64, 3, 3), (1, 1), (1, 1))   # 18 K slots
    kind = _cost.direct_kind(geom)
    slots = micro_bf16.bf16_layout(geom).packed
    monkeypatch.setattr(micro_bf16, "_PARALLEL_PAIRS", slots + 1)
    one = micro_bf16.VARIANT.pack_seconds(geom, kind, c, 4, 2)
    monkeypatch.setattr(micro_bf16, "_PARALLEL_PAIRS", slots)
    assert micro_bf16.VARIANT.pack_seconds(geom, kind, c, 4, 2) == pytest.approx(
        one / parallel(2, c))


def test_a_bfloat16_one_shot_estimate_uses_the_pair_pack_price():
    from convt._backends.direct import micro_bf16
    from convt._kernels import _cpu
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if not _cpu.bf16():
        pytest.skip("no AVX512-BF16 here: the float32 tiles run bfloat16 storage")
    c = _cost.current()
    est = _cost.estimate(DCGAN_G1, np.float32, 2, one_shot=True, storage=ml_dtypes.bfloat16)
    kind = _direct.storage_kind(DCGAN_G1, _cost.direct_kind(DCGAN_G1), ml_dtypes.bfloat16)
    assert kind.variant == "micro_bf16"
    pack = micro_bf16.VARIANT.pack_seconds(DCGAN_G1, kind, c, 4, 2)
    assert est.split["direct"][2] == pytest.approx(c["oneshot_call_s"] + pack)
