"""Storage dtypes: float64, float32, float16 and bfloat16 on two layers, prepared.

float64 computes in float64; float32, float16 and bfloat16 accumulate in float32, the 16-bit
types widened at the API boundary and narrowed once on output: their time over float32's is
the cost of that conversion, their peak memory shows the widened copies. bfloat16 needs
``ml_dtypes`` and is skipped without it.
"""
import convt

from .common import WORKLOADS, attrs, dtype_or_skip, make_inputs

# A dense GEMM layer and the memory-bound depthwise one, where conversion weighs most.
DTYPE_WORKLOADS = ["dcgan_g3", "depthwise_bilinear"]


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
