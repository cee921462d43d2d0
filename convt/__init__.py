"""convt: transposed convolution (ConvTranspose) as ONNX, OpenVINO and oneDNN define it and as
PyTorch, TensorFlow, Keras and JAX compute it, with a translator between them.

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
convt.torch.conv_transpose1d, convt.torch.conv_transpose2d, convt.torch.conv_transpose3d
    PyTorch ``torch.nn.functional`` semantics.
convt.jax.conv_transpose
    ``jax.lax.conv_transpose`` semantics.
convt.tensorflow.conv_transpose, conv1d_transpose, conv2d_transpose, conv3d_transpose
    TensorFlow ``tf.nn`` semantics.
convt.keras.conv_transpose
    Keras 3 ``keras.ops.conv_transpose`` semantics.
show_config
    Build and runtime configuration (OpenMP, threads, compiler flags, versions).
translate, Translation
    One convention's call written in another's terms: keyword arguments, code for the
    destination framework, and the same computation through convt (docs/translate.md).
explain, calibrate, export_tuning, import_tuning, forget_tuning, use_tuning_store
    The dispatcher: why a backend runs, refitting its cost model, tuned winners
    (docs/dispatch.md).
"""
from . import jax, keras, onednn, onnx, openvino, tensorflow, torch
from ._api import ConvTranspose, calibrate, conv_transpose, explain
from ._config import show_config
from ._dispatch.explain import Explanation
from ._dispatch.tune import export_tuning, forget_tuning, import_tuning, use_tuning_store
from ._translate import Translation, translate

from ._version import __version__  # noqa: E402
__all__ = ["conv_transpose", "ConvTranspose", "show_config", "onnx", "openvino", "onednn",
           "torch", "jax", "tensorflow", "keras",
           "__version__", "explain", "Explanation", "calibrate", "export_tuning",
           "import_tuning", "forget_tuning", "use_tuning_store", "translate", "Translation"]


def _load_calibration():
    # A saved calibration (convt.calibrate(save=True)) replaces the cost model's defaults;
    # a missing file costs one stat, a bad one a warning (convt._dispatch.cost.load_calibration).
    from ._dispatch import cost as _cost
    from ._dispatch import tune as _tune

    try:
        _cost.load_calibration(stamp=_tune.stamp())
    except Exception as e:  # never let a calibration file break the import
        import warnings

        warnings.warn(f"convt: cost-model calibration not loaded: {e}", RuntimeWarning)


_load_calibration()
