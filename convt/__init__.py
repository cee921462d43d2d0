"""convt: transposed convolution (ConvTranspose) exactly as ONNX, OpenVINO and oneDNN define it.

Public API
----------
conv_transpose, ConvTranspose
    The canonical entry points: ONNX ConvTranspose-11 attributes, NCX / NXC data and IOX / XOI
    filter layouts, float64 / float32 / float16 / bfloat16.
convt.onnx.conv_transpose
    ONNX opset 1 / 11 / 22 semantics.
convt.openvino.convolution_backprop_data, convt.openvino.group_convolution_backprop_data
    OpenVINO ConvolutionBackpropData-1 and its grouped form.
convt.onednn.conv_transpose
    oneDNN Graph ConvTranspose-1.
show_config
    Build and runtime configuration (OpenMP, threads, compiler flags, versions).
"""
from . import onednn, onnx, openvino
from ._api import ConvTranspose, conv_transpose
from ._config import show_config

__version__ = "0.1.0"
__all__ = ["conv_transpose", "ConvTranspose", "show_config", "onnx", "openvino", "onednn",
           "__version__"]
