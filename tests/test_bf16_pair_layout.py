"""The pair pack's tables as fields of the bfloat16 tiles' layouts
(convt._backends.direct.micro_bf16.PairLayout): built once per geometry with the layout, the
same as ``pack_tables`` for the geometry's pairs and taps, read-only, and shared by the AMX
tiles' layout (the same phases, taps and width)."""
from math import prod

import numpy as np
import pytest

from convt._backends.direct import micro_amx, micro_bf16
from convt._geometry.geometry import Geometry


def _geom(c_in, c_out, groups, kernel, strides, data_format="NCX"):
    nd = len(kernel)
    in_shape = (5, 7, 3)[:nd]
    out_shape = tuple((i - 1) * s + k - 2 for i, s, k in zip(in_shape, strides, kernel))
    return Geometry(batch=2, c_in=c_in, c_out=c_out, groups=groups, in_shape=in_shape,
                    out_shape=out_shape, kernel=kernel, strides=strides, dilations=(1,) * nd,
                    pads_begin=(1,) * nd, pads_end=(1,) * nd, data_format=data_format)


@pytest.mark.parametrize("c_in, c_out, groups, kernel, strides", [
    (16, 64, 1, (4, 4), (2, 2)),       # even channels, 32-wide tiles
    (7, 16, 1, (3,), (1,)),            # an odd channel count: the last pair padded
    (130, 48, 2, (16,), (8,)),         # groups, many pairs, a long kernel
    (6, 32, 3, (2, 3, 2), (2, 1, 2)),  # rank 3, 2 channels a group
    (0, 16, 1, (3, 3), (2, 2)),        # no input channels: empty tables
])
def test_the_layouts_carry_the_pack_tables_read_only(c_in, c_out, groups, kernel, strides):
    geom = _geom(c_in, c_out, groups, kernel, strides)
    lay = micro_bf16.bf16_layout(geom)
    assert isinstance(lay, micro_bf16.PairLayout)
    pairs = (c_in // groups + 1) // 2
    want = micro_bf16.pack_tables(lay, pairs, prod(kernel))
    np.testing.assert_array_equal(lay.kdst, want[0])
    np.testing.assert_array_equal(lay.kstride, want[1])
    assert len(lay.kdst) == prod(kernel)
    for t in (lay.kdst, lay.kstride):
        with pytest.raises(ValueError, match="read-only"):
            t[0] = 1
    assert micro_bf16.bf16_layout(geom).kdst is lay.kdst   # once per geometry
    amx = micro_amx.amx_layout(geom)
    assert amx.kdst is lay.kdst and amx.kstride is lay.kstride
    np.testing.assert_array_equal(
        micro_bf16.pack_tables(amx, pairs, prod(kernel))[0], lay.kdst)
