"""The value-by-value sums over tile rows (convt/_kernels/_tilerows.h): the Winograd output
transform (F(2, 2)'s and F(2, 3)'s combinations of the products' tiles, in place) and the
channels-last write-out of a tile row plus the bias (the micro and Winograd variants, and
the Winograd variant's staged channels-first y). Each body, at every ISA level, gives NumPy's
value-by-value sums in the same order: the same bits, NaN, infinities, signed zeros and
subnormals included, for every row width (the vector bodies' tails), with the values past
the width left alone."""
import numpy as np
import pytest

from convt._kernels import _cpu
from convt._kernels import _micro as _kmicro

ISAS = _cpu.levels()

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-310, 3.0e38, -3.0e38, 1.0]


def _rows(rng, m, ld, dtype):
    v = rng.standard_normal((m, ld)).astype(dtype)
    if v.size:   # a few special values, so that every kind meets them
        v.reshape(-1)[rng.integers(0, v.size, size=max(1, v.size // 8))] = rng.choice(
            np.array(SPECIAL, dtype), size=max(1, v.size // 8))
    return v


def _bits(v):
    return v.view(f"u{v.itemsize}")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", [0, 1, 2])
def test_output_transform_gives_numpys_sums(kind, dtype, isa):
    rng = np.random.default_rng(kind * 10 + isa)
    with np.errstate(all="ignore"):
        for width in [0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 70]:
            for m in (0, 1, 5):
                ld = width + (3 if width % 2 else 16)
                t, a, b = (_rows(rng, m, ld, dtype) for _ in range(3))
                want = t.copy()
                s = t[:, :width] + a[:, :width]
                want[:, :width] = (s if kind == 0 else s - b[:, :width] if kind == 1
                                   else s + b[:, :width])
                _kmicro.tile_rows(t, a, b, width, kind, isa)
                np.testing.assert_array_equal(_bits(t), _bits(want),
                                              err_msg=f"width {width}, {m} rows")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_rows_give_numpys_sums(dtype, isa):
    rng = np.random.default_rng(isa)
    with np.errstate(all="ignore"):
        for width in [0, 1, 5, 8, 12, 16, 20, 33, 64, 100]:
            m, ld = 4, width + 5
            t, y = _rows(rng, m, ld, dtype), _rows(rng, m, ld, dtype)
            bias = _rows(rng, 1, width, dtype)[0].copy()
            want = y.copy()
            want[:, :width] = t[:, :width] + bias
            _kmicro.tile_rows(t, t, t, width, 0, isa, bias, y)
            np.testing.assert_array_equal(_bits(y), _bits(want), err_msg=f"width {width}")


def test_tile_rows_names_what_is_wrong():
    t = np.zeros((2, 8), np.float32)
    with pytest.raises(ValueError, match="tile_rows: .* got kind 3"):
        _kmicro.tile_rows(t, t, t, 8, 3)
    with pytest.raises(ValueError, match="width 9 within them"):
        _kmicro.tile_rows(t, t, t, 9, 0)
