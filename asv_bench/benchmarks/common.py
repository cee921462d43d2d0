"""Workload shapes and seeded inputs shared by the benchmark modules (no benchmarks here).

The 14 layers are copied from the team's peer harness (``../shared/bench/workloads.py``, not
part of this repository) so that asv history and ``compare.py`` measure the same shapes:
name -> x shape (NCX), w shape (IOX: C_in, C_out/group, K...) and ONNX-11 attributes.
"""
import os

import numpy as np

WORKLOADS = {
    "dcgan_g1": dict(x=(16, 512, 4, 4), w=(512, 256, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
    "dcgan_g3": dict(x=(16, 128, 16, 16), w=(128, 64, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
    "unet_up2x2": dict(x=(1, 256, 64, 64), w=(256, 128, 2, 2), strides=(2, 2)),
    "unet_up3x3_op": dict(x=(1, 128, 64, 64), w=(128, 64, 3, 3), strides=(2, 2),
                          pads=(1, 1, 1, 1), output_padding=(1, 1)),
    "fcn32s_k64": dict(x=(1, 21, 16, 16), w=(21, 21, 64, 64), strides=(32, 32),
                       pads=(16, 16, 16, 16)),
    "hifigan_up1": dict(x=(1, 512, 256), w=(512, 256, 16), strides=(8,), pads=(4, 4)),
    "hifigan_up3": dict(x=(1, 128, 4096), w=(128, 64, 4), strides=(2,), pads=(1, 1)),
    "vnet3d_up": dict(x=(1, 64, 24, 24, 24), w=(64, 32, 2, 2, 2), strides=(2, 2, 2)),
    "unet3d_k3": dict(x=(1, 32, 24, 24, 24), w=(32, 16, 3, 3, 3), strides=(2, 2, 2),
                      pads=(1, 1, 1, 1, 1, 1), output_padding=(1, 1, 1)),
    "depthwise_bilinear": dict(x=(1, 256, 64, 64), w=(256, 1, 4, 4), strides=(2, 2),
                               pads=(1, 1, 1, 1), group=256),
    "grouped_g8": dict(x=(2, 256, 32, 32), w=(256, 32, 3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
                       output_padding=(1, 1), group=8),
    "dilated_s1": dict(x=(1, 64, 64, 64), w=(64, 64, 3, 3), dilations=(2, 2), pads=(2, 2, 2, 2)),
    # Large kernels at stride 1: the FFT backend's cases (bench_fft.py), not the direct sweep's.
    "large_k31_s1": dict(x=(1, 16, 128, 128), w=(16, 16, 31, 31)),
    "audio_k255_s1": dict(x=(4, 8, 16000), w=(8, 8, 255)),
}
LARGE_KERNEL = ("large_k31_s1", "audio_k255_s1")
ORDINARY = tuple(name for name in WORKLOADS if name not in LARGE_KERNEL)

# The thread count the asv matrix sets (asv.conf.json, env_nobuild); peers are given the same.
THREADS = int(os.environ.get("OMP_NUM_THREADS", "2"))


def attrs(shapes):
    """ONNX-11 keywords of one workload, defaults filled in (as ``workloads.full`` does)."""
    d = len(shapes["x"]) - 2
    return dict(strides=shapes.get("strides", (1,) * d), pads=shapes.get("pads", (0,) * (2 * d)),
                dilations=shapes.get("dilations", (1,) * d), group=shapes.get("group", 1),
                output_padding=shapes.get("output_padding", (0,) * d))


def make_inputs(shapes, dtype=np.float32, seed=0):
    """Seeded x (NCX), w (IOX) and b of a workload, in ``dtype``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shapes["x"]).astype(dtype)
    w = rng.standard_normal(shapes["w"]).astype(dtype)
    b = rng.standard_normal(shapes["w"][1] * shapes.get("group", 1)).astype(dtype)
    return x, w, b


def to_layout(x, data_format):
    """``x`` (NCX) as a C-contiguous array in ``data_format``: what a user would pass."""
    return x if data_format == "NCX" else np.ascontiguousarray(np.moveaxis(x, 1, -1))


def dtype_or_skip(name):
    """The NumPy dtype called ``name``; bfloat16 comes from ml_dtypes, skipped without it."""
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise NotImplementedError("bfloat16 needs ml_dtypes, which is not installed")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)
