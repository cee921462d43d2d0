"""Planning and dispatch overhead: what a call costs before and around the kernel.

On tiny shapes the arithmetic is negligible, so these times are the Python layers: attribute
validation and padding resolution (``ConvTranspose(...)``), the per-shape plan lookup of a
prepared call, the whole plan-and-run of a one-shot call, and each convention's front end.
"""
import numpy as np

import convt

from .common import make_inputs

# x (1, 8, 8, 8), w (8, 8, 3, 3), stride 2: every call here runs in well under a millisecond.
TINY = dict(x=(1, 8, 8, 8), w=(8, 8, 3, 3))
TINY_ATTRS = dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1))
# The front ends' layer: a little larger, so that the grouped form has 2 groups of 8 channels.
SMALL = dict(x=(1, 16, 16, 16), w=(16, 8, 3, 3))


class Construct:
    """``convt.ConvTranspose(w, b, ...)``: validation, padding rule, weight packing."""

    # dcgan_g1's weights (512, 256, 4, 4): packing 2M floats, against the tiny layer's 576.
    params = [["tiny", "dcgan_g1"]]
    param_names = ["weights"]

    def setup(self, weights):
        shapes = TINY if weights == "tiny" else dict(x=(1, 512, 4, 4), w=(512, 256, 4, 4))
        _, self.w, self.b = make_inputs(shapes)

    def time_ConvTranspose(self, weights):
        convt.ConvTranspose(self.w, self.b, **TINY_ATTRS)


class Call:
    """A prepared call, ``op(x)``, and a one-shot call, ``convt.conv_transpose``, on TINY."""

    params = [["auto", "direct"]]
    param_names = ["method"]

    def setup(self, method):
        self.x, self.w, self.b = make_inputs(TINY)
        self.op = convt.ConvTranspose(self.w, self.b, method=method, **TINY_ATTRS)
        self.op(self.x)

    def time_prepared(self, method):
        self.op(self.x)

    def time_conv_transpose(self, method):
        convt.conv_transpose(self.x, self.w, self.b, method=method, **TINY_ATTRS)


def _front_ends(x, w, b):
    """Public call name -> zero-argument call of that function on the same small layer.

    Every entry computes SMALL at stride 2, pads 1 (the grouped OpenVINO form: 2 groups of
    8 -> 4 channels); only the convention differs (and OpenVINO's ops have no bias).
    """
    x_nxc, w_xoi = np.moveaxis(x, 1, -1).copy(), np.moveaxis(w, (0, 1), (-1, -2)).copy()
    w_grouped = w[:, :4].reshape(2, 8, 4, 3, 3)   # [G, C_in/G, C_out/G, K, K]
    ov = dict(strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1])
    return {
        "convt.conv_transpose": lambda: convt.conv_transpose(
            x, w, b, strides=(2, 2), pads=(1, 1, 1, 1)),
        "convt.onnx.conv_transpose": lambda: convt.onnx.conv_transpose(
            x, w, b, opset=11, strides=[2, 2], pads=[1, 1, 1, 1]),
        "convt.openvino.convolution_backprop_data": lambda: (
            convt.openvino.convolution_backprop_data(x, w, **ov)),
        "convt.openvino.group_convolution_backprop_data": lambda: (
            convt.openvino.group_convolution_backprop_data(x, w_grouped, **ov)),
        "convt.onednn.conv_transpose": lambda: convt.onednn.conv_transpose(
            x_nxc, w_xoi, b, groups=1, data_format="NXC", filter_format="XOI", **ov),
    }


FRONT_ENDS = list(_front_ends(*make_inputs(SMALL)))


class FrontEnd:
    """Each convention's public one-shot function on the same small layer."""

    params = [FRONT_ENDS]
    param_names = ["call"]

    def setup(self, call):
        self.call = _front_ends(*make_inputs(SMALL))[call]
        self.call()

    def time_call(self, call):
        self.call()
