"""The direct backend (``method="direct"``) on real layers and on one-parameter sweeps.

``Workloads`` times the 12 ordinary layers of the peer harness (every workload except the two
large-kernel ones, which are ``bench_fft``'s) prepared (``convt.ConvTranspose(...)(x)``, weights
packed and the per-shape plan cached in ``setup``; also into an ``out=`` array) and one-shot (``convt.conv_transpose``, which
plans and packs on every call), in both data layouts. float64 runs on a subset only, to keep the
suite short. The sweeps vary one attribute of a dense 2-D layer at a time, so a change in one
code path (a kernel size, a stride phase count, the GEMM width, batch rows, threads) shows as
one bent curve instead of a moved geomean.
"""
import numpy as np

import convt

from .common import ORDINARY, WORKLOADS, attrs, make_inputs, to_layout

# float64 on a dense 2-D, a 1-D, a 3-D and the depthwise layer: one per kernel variant.
FLOAT64_SUBSET = ("dcgan_g3", "hifigan_up1", "unet3d_k3", "depthwise_bilinear")


class _Prepared:
    """Base: build ``self.op`` for ``self.case(*params)`` in setup, warmed up once."""

    # Calls take 1-100 ms: one call per sample, a few samples within ~4 s per benchmark.
    number = 1
    repeat = (3, 10, 4.0)
    timeout = 120

    def case(self, *params):
        """(shapes, ConvTranspose keywords) of one parameter combination."""
        raise NotImplementedError

    def setup(self, *params):
        shapes, self.kwargs = self.case(*params)
        x, self.w, self.b = make_inputs(shapes, dtype=self.kwargs.pop("dtype", np.float32))
        self.x = to_layout(x, self.kwargs.get("data_format", "NCX"))
        self.op = convt.ConvTranspose(self.w, self.b, method="direct", **self.kwargs)
        # The first call on a shape plans it (workspace, variant); time the steady state.
        self.op(self.x)

    def time_prepared(self, *params):
        self.op(self.x)


class Workloads(_Prepared):
    params = [list(ORDINARY), ["NCX", "NXC"], ["float32", "float64"]]
    param_names = ["workload", "data_format", "dtype"]

    def case(self, workload, data_format, dtype):
        if dtype == "float64" and workload not in FLOAT64_SUBSET:
            raise NotImplementedError(f"float64 runs on {FLOAT64_SUBSET} only (suite time)")
        shapes = WORKLOADS[workload]
        return shapes, dict(attrs(shapes), data_format=data_format, dtype=np.dtype(dtype))

    def setup(self, *params):
        super().setup(*params)
        self.out = np.empty_like(self.op(self.x))
        self.op(self.x, out=self.out)   # its pages touched once, as a reused array's are

    def time_oneshot(self, *params):
        convt.conv_transpose(self.x, self.w, self.b, method="direct", **self.kwargs)

    def time_prepared_out(self, *params):
        """Into a caller's array (``out=``): the kernels write it in place."""
        self.op(self.x, out=self.out)

    def peakmem_prepared(self, *params):
        self.op(self.x)


def _dense_2d(c=64, hw=32, k=4, s=2, n=1):
    """A dense 2-D layer, C -> C channels, padded so the output is s*hw (k >= s)."""
    p = max(k - s, 0)
    shapes = dict(x=(n, c, hw, hw), w=(c, c, k, k))
    return shapes, dict(strides=(s, s), pads=(p // 2, p // 2, p - p // 2, p - p // 2))


class KernelSize(_Prepared):
    params = [[1, 2, 3, 4, 5, 7]]
    param_names = ["kernel"]

    def case(self, kernel):
        return _dense_2d(k=kernel)


class Stride(_Prepared):
    params = [[1, 2, 3, 4]]
    param_names = ["stride"]

    def case(self, stride):
        return _dense_2d(k=4, s=stride)


class Channels(_Prepared):
    params = [[4, 16, 64, 256]]
    param_names = ["channels"]

    def case(self, channels):
        return _dense_2d(c=channels)


class Batch(_Prepared):
    params = [[1, 4, 16, 64]]
    param_names = ["batch"]

    def case(self, batch):
        return _dense_2d(hw=16, n=batch)


class Workers(_Prepared):
    # One layer per kernel variant; 2 = the cores of the reference machine and the matrix's
    # OMP_NUM_THREADS, so the ratio of the two columns is the parallel speed-up.
    params = [[1, 2], ["dcgan_g3", "unet_up2x2", "hifigan_up3", "unet3d_k3", "depthwise_bilinear"]]
    param_names = ["workers", "workload"]

    def case(self, workers, workload):
        shapes = WORKLOADS[workload]
        return shapes, dict(attrs(shapes), workers=workers)


class FewChannels(_Prepared):
    """Few channels on one side (convt._dispatch.cost.direct_kind prices the depthwise kernel against
    the dense variant): a generator's last layer (64 -> 3), a 3-channel input layer (3 -> 16,
    9x9) and a 1-channel side that stays on the depthwise kernel (64 -> 1, 2x2 stride 2);
    docs/dispatch.md, "Few channels on one side"."""
    params = [["64to3_k4s2", "3to16_k9", "64to1_k2s2"]]
    param_names = ["layer"]
    LAYERS = {
        "64to3_k4s2": (dict(x=(16, 64, 32, 32), w=(64, 3, 4, 4)),
                       dict(strides=(2, 2), pads=(1, 1, 1, 1))),
        "3to16_k9": (dict(x=(4, 3, 64, 64), w=(3, 16, 9, 9)), {}),
        "64to1_k2s2": (dict(x=(1, 64, 128, 128), w=(64, 1, 2, 2)), dict(strides=(2, 2))),
    }

    def case(self, layer):
        shapes, kw = self.LAYERS[layer]
        return shapes, dict(kw)
