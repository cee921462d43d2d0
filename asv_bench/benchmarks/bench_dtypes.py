"""Storage dtypes: float64, float32, float16 and bfloat16 on two layers, prepared.

float64 computes in float64; float32, float16 and bfloat16 accumulate in float32. The 16-bit
types are widened as the kernels read them and rounded once as they store the result (the
direct variants' copies and write-outs, block by block); bfloat16 runs AVX512-BF16 (or AMX)
dot products where the CPU has them. Their time over float32's is the cost of the
conversion, or the gain of the 16-bit dot products; their peak memory shows any widened
copy. bfloat16 needs ``ml_dtypes`` and is skipped without it.
"""
import convt

from .common import WORKLOADS, attrs, dtype_or_skip, make_inputs

# A dense Winograd layer, the memory-bound depthwise one (where conversion weighs most), and
# the upsample and channels-first Winograd kernels' 16-bit copies and write-outs.
DTYPE_WORKLOADS = ["dcgan_g3", "depthwise_bilinear", "unet_up2x2", "hifigan_up3"]


class Dtypes:
    number = 1
    repeat = (3, 10, 4.0)
    params = [DTYPE_WORKLOADS, ["float64", "float32", "float16", "bfloat16"]]
    param_names = ["workload", "dtype"]

    def setup(self, workload, dtype):
        shapes = WORKLOADS[workload]
        self.x, w, b = make_inputs(shapes, dtype=dtype_or_skip(dtype))
        self.op = convt.ConvTranspose(w, b, **attrs(shapes))
        self.op(self.x)

    def time_prepared(self, workload, dtype):
        self.op(self.x)

    def peakmem_prepared(self, workload, dtype):
        self.op(self.x)
