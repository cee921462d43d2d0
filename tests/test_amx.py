"""The AMX-BF16 tiles (convt._backends.direct.micro_amx, convt/_kernels/_amxkernel.h) on the
C emulation of the AMX instructions (convt._kernels._amxemu: the same kernel source, Intel
SDM semantics and checks), since the machines the suite runs on may lack AMX: the emulation
itself against the SDM's TDPBF16PS and LDTILECFG rules, the kernel against the float64
reference of the bfloat16 inputs over a wide space of layers, the variant's choice at each
ISA level, and the self-check that guards the hardware kernel."""
import re

import numpy as np
import pytest

import convt
from convt._backends.direct import micro, micro_amx, micro_bf16, storage
from convt._geometry.geometry import Geometry
from convt._kernels import _amxemu, _cpu

from conftest import assert_close, random_cases

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
# The tiles' float32 result against the float64 reference of the same bfloat16 inputs,
# normwise: the float32 tiles' bound, as tests/test_bf16.py's TOL_F32.
TOL_F32 = 1e-5


# ---- the emulation's instructions ----

def _cfg(**tiles):
    """The kernel's configuration with some bytes replaced: name=value for byte offsets
    ("b2"), a tile's colsb ("c4") or rows ("r4")."""
    cfg = bytearray(_amxemu.config_bytes())
    for key, value in tiles.items():
        at = int(key[1:])
        if key[0] == "b":
            cfg[at] = value
        elif key[0] == "c":
            cfg[16 + 2 * at:18 + 2 * at] = int(value).to_bytes(2, "little")
        else:
            cfg[48 + at] = value
    return np.frombuffer(bytes(cfg), np.uint8)


def test_the_kernel_loads_a_valid_palette_1_configuration():
    cfg = np.frombuffer(_amxemu.config_bytes(), np.uint8)
    assert _amxemu.config_error() is None and _amxemu.check_config(cfg) is None
    assert cfg[0] == 1 and not cfg[1:16].any() and not cfg[32:48].any() and not cfg[56:].any()
    assert (cfg[16:32].view(np.uint16) == 64).all() and (cfg[48:56] == 16).all()
    assert _amxemu.ROWS == micro_amx._ROWS == 32 and _amxemu.KC == micro.KC


@pytest.mark.parametrize("change, why", [
    (dict(b0=2), "palette_id above the only palette, 1"),
    (dict(b1=0, b2=1), "reserved byte 2-15 nonzero"),
    (dict(b15=4), "reserved byte 2-15 nonzero"),
    (dict(b40=1), r"reserved byte 32-47 \(colsb of tiles 8-15\) nonzero"),
    (dict(b63=1), r"reserved byte 56-63 \(rows of tiles 8-15\) nonzero"),
    (dict(c3=65), "colsb above 64 bytes"),
    (dict(r7=17), "rows above 16"),
    (dict(r2=0), "a tile with rows or colsb zero but not both"),
    (dict(c5=0), "a tile with rows or colsb zero but not both"),
])
def test_ldtilecfg_refuses_what_the_sdm_makes_gp(change, why):
    got = _amxemu.check_config(_cfg(**change))
    assert got is not None and re.fullmatch(why, got), got


def test_ldtilecfg_accepts_palette_0_and_unused_tiles():
    assert _amxemu.check_config(np.zeros(64, np.uint8)) is None
    assert _amxemu.check_config(_cfg(r6=0, c6=0, r7=0, c7=0, b1=3)) is None
    with pytest.raises(ValueError, match=r"check_config: a tile configuration is 64 bytes; "
                                         r"got 63"):
        _amxemu.check_config(np.zeros(63, np.uint8))


def _bits(a):
    return np.ascontiguousarray(a, np.float32).astype(BF16).view(np.uint16)


def _sdm_dpbf16ps(a, b, c):
    """TDPBF16PS per the SDM's pseudo-code, in float32 NumPy: two sums per output (even and
    odd elements of the pairs), each product exact in float32 and each addition one rounding,
    then C += (even + odd). For values whose products and sums stay normal."""
    a = a.view(BF16).astype(np.float32)
    b = b.view(BF16).astype(np.float32)
    out = c.copy()
    for m in range(c.shape[0]):
        even = np.zeros(c.shape[1], np.float32)
        odd = np.zeros(c.shape[1], np.float32)
        for k in range(a.shape[1] // 2):
            even = even + a[m, 2 * k] * b[k, 0::2]
            odd = odd + a[m, 2 * k + 1] * b[k, 1::2]
        out[m] = out[m] + (even + odd)
    return out


def test_tdpbf16ps_follows_the_sdm_pseudo_code_bit_for_bit(rng):
    a = _bits(rng.standard_normal((16, 32)))
    b = _bits(rng.standard_normal((16, 32)))
    c = rng.standard_normal((16, 16)).astype(np.float32)
    want = _sdm_dpbf16ps(a, b, c)
    assert _amxemu.tile_dpbf16ps(_cfg(), a, b, c) is None
    np.testing.assert_array_equal(c, want)


def test_tdpbf16ps_sums_even_and_odd_elements_apart():
    """The SDM's order: k = 0, 1 with A's pairs (1, 1) and B's (2^24, 1), (-2^24, 1): the
    even sum cancels to 0 and the odd one is 2, so C = 2 (one running sum would give 1)."""
    a = np.zeros((16, 32), np.uint16)
    b = np.zeros((16, 32), np.uint16)
    a[:, :4] = _bits([1, 1, 1, 1])
    b[0, :2] = _bits([2.0 ** 24, 1])
    b[1, :2] = _bits([-2.0 ** 24, 1])
    c = np.zeros((16, 16), np.float32)
    assert _amxemu.tile_dpbf16ps(_cfg(), a, b, c) is None
    assert (c[:, 0] == 2).all() and not c[:, 1:].any()


def test_tdpbf16ps_treats_denormals_as_zero_and_flushes_them():
    a = np.zeros((16, 32), np.uint16)
    b = np.zeros((16, 32), np.uint16)
    a[0, 0] = _bits([2.0 ** -130])[0]     # a bfloat16 denormal input: zero
    b[0, 0] = _bits([1.0])[0]
    a[1, 0] = _bits([2.0 ** -70])[0]      # a product of 2^-130, a denormal result: zero
    b[0, 2] = _bits([2.0 ** -60])[0]
    a[2, 0] = _bits([2.0 ** -60])[0]      # a normal product: kept
    c = np.zeros((16, 16), np.float32)
    c[3, 0] = np.float32(2.0 ** -127)     # a denormal C input: zero
    assert _amxemu.tile_dpbf16ps(_cfg(), a, b, c) is None
    assert c[0, 0] == 0 and c[1, 1] == 0 and c[2, 0] == np.float32(2.0 ** -60)
    assert c[3, 0] == 0 and np.signbit(c[3, 0]) == 0


@pytest.mark.parametrize("cfg, regs, fault", [
    (dict(), (4, 4, 6), "tdpbf16ps tmm4: #UD, two operands are the same tile"),
    (dict(c4=32), (0, 4, 6), r"tdpbf16ps tmm0: #UD, tile shapes do not match"),
    (dict(r6=8), (0, 4, 6), r"tdpbf16ps tmm0: #UD, tile shapes do not match"),
    (dict(c0=32), (0, 4, 6), r"tdpbf16ps tmm0: #UD, tile shapes do not match"),
    (dict(r0=8), (0, 4, 6), r"tdpbf16ps tmm0: #UD, tile shapes do not match"),
    (dict(c4=62), (0, 4, 6), r"tileloadd tmm4: #UD, colsb not a multiple of 4"),
    (dict(r6=0, c6=0), (0, 4, 6), r"tileloadd tmm6: #UD, not a configured tile"),
    (dict(b0=0), (0, 4, 6), r"tileloadd tmm0: #UD, tiles not configured"),
    (dict(r0=17), (0, 4, 6), r"ldtilecfg: rows above 16"),
])
def test_the_emulation_faults_where_the_hardware_does(cfg, regs, fault):
    a = np.ones((16, 32), np.uint16)
    b = np.ones((16, 32), np.uint16)
    c = np.zeros((16, 16), np.float32)
    got = _amxemu.tile_dpbf16ps(_cfg(**cfg), a, b, c, *regs)
    assert got is not None and re.match(fault, got), got


def test_smaller_tiles_multiply_their_configured_part(rng):
    """A 5-row, 6-pair, 3-column product (rows, colsb of C 12, A 24, B rows 6): the rest of
    each tile is zero and C's memory past its colsb and rows untouched."""
    a = _bits(rng.standard_normal((16, 32)))
    b = _bits(rng.standard_normal((16, 32)))
    c = rng.standard_normal((16, 16)).astype(np.float32)
    want = c.copy()
    want[:5, :3] = _sdm_dpbf16ps(a[:5, :12], b[:6, :6], c[:5, :3])
    assert _amxemu.tile_dpbf16ps(_cfg(r0=5, c0=12, r4=5, c4=24, r6=6, c6=12), a, b, c) is None
    np.testing.assert_array_equal(c, want)


# ---- the kernel, emulated, against the reference ----

def _layer(case, rng):
    cg, mg, g = case["cg"], case["mg"], case["kw"]["group"]
    x = rng.standard_normal((case["batch"], cg * g, *case["size"])).astype(BF16)
    w = rng.standard_normal((cg * g, mg, *case["k"])).astype(BF16)
    b = rng.standard_normal(mg * g).astype(BF16)
    return x, w, b


def _reference(x, w, b, **kw):
    return convt.conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                b.astype(np.float64), method="reference", **kw)


def _nxc(a):
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


def _emulated(op, x, workers=None):
    """The AMX tiles' float32 result on x (emulated), whatever variant the rule would run."""
    geom = op._plan.geometry(x.shape).geom
    name, runner, state = micro_amx.VARIANT.prepare(geom, op._plan, None)
    assert name == "micro_amx"
    if workers is None:
        return micro_amx.run_f32(x, state, geom, op._plan, emulated=True)
    layout, wp = state
    return micro_amx._call(x, layout, geom, wp, op._plan.bias_compute, workers,
                           micro_amx._Arena(), None, _amxemu.micro_conv)


def _has_output(case):
    kw, nd = case["kw"], case["nd"]
    return all((i - 1) * s + (k - 1) * d + 1 + o - a - e >= 1 for i, s, k, d, o, a, e in zip(
        case["size"], kw["strides"], case["k"], kw["dilations"], kw["output_padding"],
        kw["pads"][:nd], kw["pads"][nd:]))


# channels per group up to 12 (pairs below one tile's K: every chunk a tail) ...
CASES = random_cases(40, 41, k_max=5, size_max=9, c_max=12, keep=_has_output)
# ... and up to 80 (full 16-pair chunks, then tails), wider spatial sides (direct rows)
CASES += random_cases(24, 43, k_max=4, size_max=24, c_max=80, keep=_has_output)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['nd']}d-g{c['kw']['group']}-"
                         f"cg{c['cg']}-mg{c['mg']}-n{c['batch']}-{c['data_format']}")
def test_emulated_tiles_against_the_reference_of_the_bf16_inputs(case, rng):
    """Ranks 1-3, strides, dilations, pads, output padding, groups, channel tails, batch and
    both layouts: within the float32 bound of the float64 reference of the same inputs."""
    x, w, b = _layer(case, rng)
    kw = dict(case["kw"], data_format=case["data_format"])
    ref = _reference(x, w, b, **case["kw"])
    if case["data_format"] == "NXC":
        x, ref = _nxc(x), _nxc(ref)
    op = convt.ConvTranspose(w, b, method="direct", **kw)
    y = _emulated(op, x)
    assert y.dtype == np.float32 and y.shape == ref.shape
    assert float(np.abs(y - ref).max()) <= TOL_F32 * max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("xs, ws, kw", [
    ((2, 64, 6, 6), (64, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),    # NR 32
    ((1, 96, 5, 40), (96, 48, 3, 3), dict(pads=(1, 1, 1, 1))),                    # NR 16
    ((2, 70, 33), (70, 16, 5), dict(dilations=(2,), pads=(2, 3), group=2)),       # K tail
    ((1, 40, 3, 4, 20), (40, 32, 2, 2, 3), dict(strides=(2, 1, 2))),              # 3-D
    ((1, 600, 2, 3), (600, 32, 2, 2), dict(strides=(2, 2))),                      # 3 chunks
    ((8, 33, 4, 4), (33, 64, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1))),     # batch-inner
])
def test_emulated_tiles_on_full_and_tail_chunks(xs, ws, kw, rng):
    x = rng.standard_normal(xs).astype(BF16)
    w = (rng.standard_normal(ws) / np.sqrt(ws[0])).astype(BF16)
    b = rng.standard_normal(ws[1] * kw.get("group", 1)).astype(BF16)
    ref = _reference(x, w, b, **kw)
    op = convt.ConvTranspose(w, b, **kw)
    y1 = _emulated(op, x, workers=1)
    assert float(np.abs(y1 - ref).max()) <= TOL_F32 * max(1.0, float(np.abs(ref).max()))
    # each output summed by one thread, in a fixed order: the same bits for any count
    np.testing.assert_array_equal(_emulated(op, x, workers=3), y1)


@pytest.mark.parametrize("xs, ws, kw, gathered", [
    ((1, 40, 8, 32), (40, 32, 2, 2), dict(strides=(2, 2)), False),          # no border taps
    ((16, 40, 4, 4), (40, 32, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)), False),
    ((2, 40, 6, 16), (40, 32, 4, 4), dict(strides=(2, 2), pads=(1, 1, 1, 1)), True),
])
def test_rows_in_a_line_or_across_images_are_read_in_place(xs, ws, kw, gathered, rng):
    """16 rows along one output line (no tap off the data), or one position of 16 images
    (rows batch innermost), are equally spaced in x: tileloadd reads them where they are.
    A line's first or last row reading off the data makes the half gathered."""
    x = rng.standard_normal(xs).astype(BF16)
    w = rng.standard_normal(ws).astype(BF16)
    ref = _reference(x, w, np.zeros(ws[1], BF16), **kw)
    _amxemu.take_halves()
    y = _emulated(convt.ConvTranspose(w, **kw), x)
    _, direct, copied = _amxemu.take_halves()
    assert direct > 0 and (copied > 0) == gathered
    assert float(np.abs(y - ref).max()) <= TOL_F32 * max(1.0, float(np.abs(ref).max()))


def test_nan_and_inf_in_x_reach_only_their_outputs(rng):
    x = rng.standard_normal((2, 40, 6, 6)).astype(np.float32)
    x[0, 3, 2, 2], x[1, 37, 0, 4] = np.nan, np.inf
    w = rng.standard_normal((40, 32, 4, 4)).astype(BF16)
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    x = x.astype(BF16)
    ref = _reference(x, w, np.zeros(32, BF16), **kw)
    y = _emulated(convt.ConvTranspose(w, **kw), x)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(y), np.isinf(ref))


def _rows_per_set(lay, batch):
    return {(int(f), int(c)): max(batch * int(np.prod(p[:3])) for p in lay.phases[f:f + c])
            for f, c, _, _ in lay.tasks}


def test_the_layout_holds_whole_blocks_and_bounds_the_copy():
    for c_in, k in ((3, (5, 5)), (40, (3, 3)), (600, (2, 2)), (64, (4, 4))):
        geom = Geometry(batch=3, c_in=c_in, c_out=48, groups=1, in_shape=(7, 11),
                        out_shape=(11, 19), kernel=k, strides=(1, 1), dilations=(1, 1),
                        pads_begin=(1, 1), pads_end=(1, 1))
        lay, base = micro_amx.amx_layout(geom), micro_bf16.bf16_layout(geom)
        assert lay.mb % 32 == 0 and lay.mb >= base.mb and lay.mb >= int(lay.tasks[:, 3].max())
        assert (lay.tasks[:, 3] % 32 == 0).all() and (lay.tasks[:, 2] % 32 == 0).all()
        # every row of every set in exactly one task
        for (first, count), rows in _rows_per_set(base, geom.batch).items():
            mine = lay.tasks[(lay.tasks[:, 0] == first) & (lay.tasks[:, 1] == count)]
            starts = mine[:, 2]
            assert list(starts) == list(range(0, rows, int(mine[0, 3])))
            assert starts[-1] + mine[-1, 3] >= rows
        assert lay.tb * -(-lay.cc // 16) * 16 <= _amxemu.KC
        assert lay.packed == base.packed + 16 * lay.nr


def test_the_packed_weights_end_in_zeros_whatever_the_buffer_held(rng):
    """The K tail's B tile reads up to 15 lines past the last pair: packed_amx zeroes the 16
    lines it appends, even in a reused buffer full of NaN bits."""
    kw = dict(strides=(2,), pads=(1, 2))
    w = rng.standard_normal((34, 32, 4)).astype(BF16)          # 17 pairs: a 1-pair tail
    x = rng.standard_normal((2, 34, 9)).astype(BF16)
    op = convt.ConvTranspose(w, **kw)
    geom = op._plan.geometry(x.shape).geom
    lay = micro_amx.amx_layout(geom)
    wp, finite = micro_amx.packed_amx(lay, w, 1, buffer=lambda n, dt: np.full(n, 0xFFFF, dt))
    assert finite and lay.nr == 32 and not wp[-16 * lay.nr:].any()
    y = micro_amx._call(x, lay, geom, wp, np.zeros(32, np.float32), 1, micro_amx._Arena(),
                        None, _amxemu.micro_conv)
    ref = _reference(x, w, np.zeros(32, BF16), **kw)
    assert float(np.abs(y - ref).max()) <= TOL_F32 * max(1.0, float(np.abs(ref).max()))


# ---- the variant at each ISA level ----

@pytest.fixture
def level3(monkeypatch):
    """ISA level 3 on this machine, the AMX tiles run by the emulation."""
    monkeypatch.setattr(_cpu, "ISA", 3)
    monkeypatch.setattr(micro_amx, "_EMULATE", True)


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_at_level_3_bf16_storage_runs_the_amx_tiles(level3, data_format, rng):
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    x = rng.standard_normal((2, 48, 6, 6)).astype(BF16)
    w = rng.standard_normal((48, 64, 4, 4)).astype(BF16)
    b = rng.standard_normal(64).astype(BF16)
    ref = _reference(x, w, b, **kw)
    if data_format == "NXC":
        x, ref = _nxc(x), _nxc(ref)
    op = convt.ConvTranspose(w, b, data_format=data_format, **kw)
    p = op._plan.geometry(x.shape)
    assert p.variant == "micro_amx"
    assert "micro_amx" in str(convt.explain(x, w, b, data_format=data_format, **kw))
    y32 = micro_amx.run_f32(x, p.state, p.geom, op._plan)
    y = op(x)
    assert y.dtype == BF16 and y.shape == ref.shape
    np.testing.assert_array_equal(y.view(np.uint16), y32.astype(BF16).view(np.uint16))
    assert_close(y, ref, "direct", "bfloat16")
    out = np.full_like(y, np.nan)
    assert op(x, out=out) is out
    np.testing.assert_array_equal(out.view(np.uint16), y.view(np.uint16))
    # float32 storage keeps the float32 kernels
    op32 = convt.ConvTranspose(w.astype(np.float32), b.astype(np.float32),
                               data_format=data_format, **kw)
    assert op32._plan.geometry(x.shape).variant not in ("micro_amx", "micro_bf16")


def test_at_level_3_one_shot_calls_give_the_prepared_bits(level3, rng):
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    x = rng.standard_normal((2, 40, 5, 7)).astype(BF16)
    w = rng.standard_normal((40, 32, 4, 4)).astype(BF16)
    op = convt.ConvTranspose(w, **kw)
    assert op._plan.geometry(x.shape).variant == "micro_amx"
    for _ in range(2):   # the second reuses the one-shot workspace's packing buffer
        y = convt.conv_transpose(x, w, **kw)
        np.testing.assert_array_equal(y.view(np.uint16), op(x).view(np.uint16))


def test_at_level_3_a_large_result_streams_with_the_plain_stores_bits(level3, monkeypatch,
                                                                     rng):
    """The AMX tiles' write-out is micro_bf16's and streams through its gate
    (``stream_bit``): a 1 MiB bfloat16 result comes on a cache line, streamed, with the bits
    of plain stores (the gate shut) and of the float32 tiles rounded once."""
    kw = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    x = rng.standard_normal((8, 16, 16, 16)).astype(BF16)
    w = (rng.standard_normal((16, 64, 4, 4)) * 0.3).astype(BF16)
    op = convt.ConvTranspose(w, **kw)
    p = op._plan.geometry(x.shape)
    assert p.variant == "micro_amx"
    modes = []

    def spy(*args, mode=None, **kwargs):
        modes.append(mode)
        return micro_bf16.run_micro_bf16(*args, mode=mode, **kwargs)

    monkeypatch.setattr(micro_amx, "run_micro_bf16", spy)
    y = op(x)
    assert y.nbytes >= storage.STREAM16_BYTES and storage.streams16(y)
    assert modes == [micro_amx.amx_mode(p.state[0].nr) | micro_bf16.BF16_STREAM]
    want = micro_amx.run_f32(x, p.state, p.geom, op._plan).astype(BF16).view(np.uint16)
    np.testing.assert_array_equal(y.view(np.uint16), want)
    monkeypatch.setattr(storage, "STREAM16_BYTES", 1 << 62)
    plain = op(x)
    assert plain.flags.owndata and modes[-1] == micro_amx.amx_mode(p.state[0].nr)
    np.testing.assert_array_equal(plain.view(np.uint16), want)


def test_at_level_3_the_cost_model_prices_the_amx_tiles(level3):
    from convt._dispatch.cost import estimate
    geom = Geometry(batch=16, c_in=128, c_out=64, groups=1, in_shape=(16, 16),
                    out_shape=(32, 32), kernel=(4, 4), strides=(2, 2), dilations=(1, 1),
                    pads_begin=(1, 1), pads_end=(1, 1))
    amx = estimate(geom, np.float32, 2, storage=BF16)
    assert amx.direct.variant == "micro_amx"
    assert micro_amx.bf16_kernel() == "micro_amx (AMX-BF16 tdpbf16ps, emulated)"


def test_weights_that_are_not_finite_run_the_pixel_kernel(level3, rng):
    w = rng.standard_normal((16, 32, 3, 3)).astype(np.float32)
    w[3, 7, 1, 2] = np.inf
    op = convt.ConvTranspose(w.astype(BF16), pads=(1, 1, 1, 1))
    assert op._plan.geometry((1, 16, 5, 5)).variant == "pixel"


@pytest.mark.parametrize("level", [0, 1, 2])
def test_below_level_3_nothing_changes(monkeypatch, level, rng):
    """Below level 3 (this CPU's, or CONVT_ISA's cap) the AMX tiles never run nor check
    themselves: bfloat16 storage runs micro_bf16 where AVX512-BF16 is, else the float32
    kernels, as before."""
    monkeypatch.setattr(_cpu, "ISA", min(level, _cpu.ISA))
    monkeypatch.setattr(micro_amx, "_CHECK", {})
    w = rng.standard_normal((64, 64, 4, 4)).astype(BF16)
    op = convt.ConvTranspose(w, strides=(2, 2), pads=(1, 1, 1, 1))
    variant = op._plan.geometry((2, 64, 6, 6)).variant
    assert not micro_amx.amx_ready() and micro_amx._CHECK == {}
    assert variant == ("micro_bf16" if _cpu.bf16() else variant) != "micro_amx"
    assert micro_amx.bf16_kernel().startswith("micro_bf16" if _cpu.bf16() else "float32")


_CHILD = r"""
import json, warnings
warnings.simplefilter("error")
import numpy as np, ml_dtypes
import convt
from convt._kernels import _cpu
from convt._config import config_dict
w = np.ones((32, 32, 3, 3), ml_dtypes.bfloat16)
op = convt.ConvTranspose(w, pads=(1, 1, 1, 1))
print(json.dumps({"isa": _cpu.ISA, "variant": op._plan.geometry((1, 32, 5, 5)).variant,
                  "bf16": config_dict()["isa"]["bfloat16"]}))
"""


@pytest.mark.skipif(_cpu.CPU_ISA >= 3, reason="this CPU has AMX: the level would be 3")
@pytest.mark.parametrize("cap", ["avx512_amx", "avx512", ""])
def test_asking_for_amx_on_a_cpu_without_it_is_safe(cap):
    """CONVT_ISA=avx512_amx (or no cap) on a CPU without AMX: level 2 at most, no warning,
    the AMX tiles never run."""
    import json
    import os
    import subprocess
    import sys
    from conftest import REPO_ROOT
    env = dict(os.environ, CONVT_ISA=cap, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, check=True, cwd=str(REPO_ROOT))
    got = json.loads(run.stdout)
    assert got["isa"] == min(_cpu.CPU_ISA, 2) and got["variant"] != "micro_amx"
    assert got["bf16"].startswith("micro_bf16" if _cpu.bf16(2) else "float32")


def test_show_config_names_the_bf16_kernel():
    from convt._config import config_dict
    assert config_dict()["isa"]["bfloat16"] == micro_amx.bf16_kernel()


# ---- the self-check that guards the hardware kernel ----

def _perturbed(*args, **kwargs):
    _amxemu.micro_conv(*args, **kwargs)
    np.asarray(args[4])[0] += np.float32(1e-3)   # y: one output off by more than the bound


_ANY = Geometry(batch=1, c_in=1, c_out=1, groups=1, in_shape=(1,), out_shape=(1,), kernel=(1,),
                strides=(1,), dilations=(1,), pads_begin=(0,), pads_end=(0,))


@pytest.fixture
def fresh_check(monkeypatch):
    """Level 3 with the check not yet run in this process."""
    monkeypatch.setattr(_cpu, "ISA", 3)
    monkeypatch.setattr(micro_amx, "_CHECK", {})


def test_the_self_check_passes_a_kernel_that_agrees(fresh_check, monkeypatch, recwarn):
    monkeypatch.setattr(micro_amx, "micro_conv", _amxemu.micro_conv)
    assert not micro_amx.amx_ready() and micro_amx._CHECK == {}   # no geometry: not yet
    assert micro_amx.amx_ready(_ANY) and micro_amx._CHECK == {"ok": True}
    assert micro_amx.amx_ready()
    assert not [w for w in recwarn if "AMX" in str(w.message)]


def test_the_self_check_turns_amx_off_when_the_kernel_disagrees(fresh_check, monkeypatch,
                                                                 rng):
    monkeypatch.setattr(micro_amx, "micro_conv", _perturbed)
    with pytest.warns(RuntimeWarning, match=r"convt: the AMX-BF16 tiles failed their "
                                            r"self-check \(on a 2-D layer of 40 -> 64 "
                                            r"channels, output \(0, 0, 0, 0\) is .*, emulated "
                                            r".*\); bfloat16 storage runs the AVX512-BF16 or "
                                            r"float32 kernels in this process"):
        assert not micro_amx.amx_ready(_ANY)
    assert micro_amx._CHECK == {"ok": False} and not micro_amx.amx_ready(_ANY)   # once
    w = rng.standard_normal((64, 64, 4, 4)).astype(BF16)
    op = convt.ConvTranspose(w, strides=(2, 2), pads=(1, 1, 1, 1))
    assert op._plan.geometry((2, 64, 6, 6)).variant != "micro_amx"


def test_the_self_check_refuses_an_invalid_configuration(fresh_check, monkeypatch):
    monkeypatch.setattr(_amxemu, "config_error", lambda: "rows above 16")
    with pytest.warns(RuntimeWarning, match=r"self-check \(rows above 16\)"):
        assert not micro_amx.amx_ready(_ANY)


def test_an_emulated_fault_is_a_bug_report(monkeypatch, rng):
    monkeypatch.setattr(_amxemu, "take_fault", lambda: "tdpbf16ps tmm0: #UD, tile shapes "
                                                       "do not match")
    w = rng.standard_normal((32, 32, 3, 3)).astype(BF16)
    x = rng.standard_normal((1, 32, 5, 5)).astype(BF16)
    with pytest.raises(RuntimeError, match=r"micro_amx: the emulated AMX tiles faulted "
                                           r"\(tdpbf16ps tmm0: #UD, tile shapes do not "
                                           r"match\); on hardware this would be a crash: "
                                           r"this is a bug in convt"):
        _emulated(convt.ConvTranspose(w, pads=(1, 1, 1, 1)), x)
