"""The dispatcher's sweep: geometries on which every backend is timed (no benchmarks here).

Used by ``bench_dispatch.py`` (a subset) and by ``docs/scripts/dispatch_sweep.py`` (all of
them, docs/dispatch_sweep.md). Kernels 1-63, strides 1-4, dilations 1-3, channels 1-512,
ranks 1-3, groups, both layouts, float32 and float64. Sizes keep the slower backend of each
case below about half a second on 2 cores, so the whole sweep runs in minutes.
Each entry: x shape (NCX), w shape (IOX: C_in, C_out/group, K...), ONNX-11 attributes, and
optionally ``dtype`` ("float32" by default) and ``data_format`` ("NCX" by default).
"""


def _c(x, w, **kw):
    return dict(x=x, w=w, **kw)


def _s1(n, c, sp, k, m=None, **kw):
    """Stride-1 layer, ``c`` -> ``m`` channels, a K^D kernel."""
    m = c if m is None else m
    return _c((n, c, *sp), (c, m, *(k,) * len(sp)), **kw)


_BASE = {
    # tiny layers (one-shot calls on small shapes: fixed costs decide)
    "tiny_1d_c1_k3": _s1(1, 1, (64,), 3),
    "tiny_1d_c8_k15": _s1(2, 8, (100,), 15),
    "tiny_2d_c2_k5": _s1(1, 2, (16, 16), 5),
    "tiny_2d_c4_k9": _s1(1, 4, (32, 32), 9),
    "tiny_3d_c1_k3": _c((1, 1, 3, 4, 5), (1, 2, 3, 3, 3)),
    # 1-D: audio-like signals, kernels 1..63 (and beyond), strides 1..4
    "1d_c1_k15": _s1(1, 1, (16000,), 15),
    "1d_c1_k63": _s1(1, 1, (16000,), 63),
    "1d_c1_k255": _s1(1, 1, (16000,), 255),
    "1d_c8_k7": _s1(4, 8, (8000,), 7),
    "1d_c8_k31": _s1(4, 8, (8000,), 31),
    "1d_c8_k63": _s1(4, 8, (8000,), 63),
    "1d_c32_k1": _s1(4, 32, (4000,), 1),
    "1d_c64_k15": _s1(1, 64, (2048,), 15),
    "1d_c64_k41": _s1(1, 64, (2048,), 41),
    "1d_c512_s8_k16": _c((1, 512, 64), (512, 256, 16), strides=(8,), pads=(4, 4)),
    "1d_c128_s2_k4": _c((1, 128, 2048), (128, 64, 4), strides=(2,), pads=(1, 1)),
    "1d_c16_s4_k33": _c((2, 16, 1024), (16, 16, 33), strides=(4,), pads=(16, 16)),
    "1d_c16_d3_k21": _s1(2, 16, (2048,), 21, dilations=(3,)),
    "1d_dw64_k31": _c((1, 64, 4096), (64, 1, 31), group=64),
    "1d_g4_c32_k25": _c((2, 32, 2048), (32, 8, 25), group=4),
    # 2-D, stride 1: the kernel-size crossover
    "2d_c16_k1": _s1(1, 16, (128, 128), 1),
    "2d_c16_k3": _s1(1, 16, (64, 64), 3),
    "2d_c16_k7": _s1(1, 16, (64, 64), 7),
    "2d_c16_k11": _s1(1, 16, (64, 64), 11),
    "2d_c16_k15": _s1(1, 16, (64, 64), 15),
    "2d_c16_k23": _s1(1, 16, (64, 64), 23),
    "2d_c16_k31": _s1(1, 16, (64, 64), 31),
    "2d_c4_k45": _s1(1, 4, (48, 48), 45),
    "2d_c1_k3": _s1(1, 1, (256, 256), 3),
    "2d_c1_k15": _s1(1, 1, (128, 128), 15),
    "2d_c1_k63": _s1(1, 1, (64, 64), 63),
    "2d_c3_k9": _s1(4, 3, (64, 64), 9, m=16),
    "2d_c64_k3": _s1(1, 64, (32, 32), 3),
    "2d_c64_k7": _s1(1, 64, (32, 32), 7),
    "2d_c64_k13": _s1(1, 64, (32, 32), 13),
    "2d_c256_k3": _s1(1, 256, (16, 16), 3),
    "2d_c512_k3": _s1(4, 512, (4, 4), 3),
    # 2-D, strides 2..4 (decoders, GAN generators, FCN upsampling)
    "2d_c512_s2_k4": _c((16, 512, 4, 4), (512, 256, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
    "2d_c128_s2_k4": _c((4, 128, 16, 16), (128, 64, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
    "2d_c256_s2_k2": _c((1, 256, 32, 32), (256, 128, 2, 2), strides=(2, 2)),
    "2d_c64_s2_k3_op": _c((1, 64, 32, 32), (64, 32, 3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
                          output_padding=(1, 1)),
    "2d_c32_s2_k16": _c((1, 32, 32, 32), (32, 32, 16, 16), strides=(2, 2), pads=(7, 7, 7, 7)),
    "2d_c16_s2_k31": _c((1, 16, 32, 32), (16, 16, 31, 31), strides=(2, 2), pads=(15, 15, 15, 15)),
    "2d_c32_s3_k9": _c((1, 32, 32, 32), (32, 16, 9, 9), strides=(3, 3), pads=(3, 3, 3, 3)),
    "2d_c16_s4_k8": _c((1, 16, 32, 32), (16, 16, 8, 8), strides=(4, 4), pads=(2, 2, 2, 2)),
    "2d_c21_s4_k32": _c((1, 21, 16, 16), (21, 21, 32, 32), strides=(4, 4), pads=(14, 14, 14, 14)),
    "2d_c8_s2_k1": _c((2, 8, 64, 64), (8, 8, 1, 1), strides=(2, 2)),
    # 2-D, dilations and groups
    "2d_c64_d2_k3": _s1(1, 64, (64, 64), 3, dilations=(2, 2), pads=(2, 2, 2, 2)),
    "2d_c32_d3_k5": _s1(1, 32, (48, 48), 5, dilations=(3, 3), pads=(6, 6, 6, 6)),
    "2d_c8_d2_k15": _s1(1, 8, (48, 48), 15, dilations=(2, 2)),
    "2d_dw256_s2_k4": _c((1, 256, 32, 32), (256, 1, 4, 4), strides=(2, 2), pads=(1, 1, 1, 1),
                         group=256),
    "2d_dw32_k15": _c((1, 32, 64, 64), (32, 1, 15, 15), group=32),
    "2d_dw16_k31": _c((1, 16, 48, 48), (16, 1, 31, 31), group=16),
    "2d_g8_c256_s2_k3": _c((2, 256, 16, 16), (256, 32, 3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
                           output_padding=(1, 1), group=8),
    "2d_g4_c64_k9": _c((1, 64, 32, 32), (64, 16, 9, 9), group=4),
    "2d_g2_c32_k21": _c((1, 32, 32, 32), (32, 16, 21, 21), group=2),
    # 3-D
    "3d_c64_s2_k2": _c((1, 64, 16, 16, 16), (64, 32, 2, 2, 2), strides=(2, 2, 2)),
    "3d_c32_s2_k3": _c((1, 32, 16, 16, 16), (32, 16, 3, 3, 3), strides=(2, 2, 2),
                       pads=(1,) * 6, output_padding=(1, 1, 1)),
    "3d_c16_k3": _s1(1, 16, (16, 16, 16), 3),
    "3d_c8_k5": _s1(1, 8, (16, 16, 16), 5),
    "3d_c8_k9": _s1(1, 8, (16, 16, 16), 9),
    "3d_c4_k13": _s1(1, 4, (16, 16, 16), 13),
    "3d_c1_k7": _s1(1, 1, (32, 32, 32), 7),
    "3d_dw16_k7": _c((1, 16, 16, 16, 16), (16, 1, 7, 7, 7), group=16),
    "3d_c16_d2_k3": _s1(1, 16, (16, 16, 16), 3, dilations=(2, 2, 2), pads=(2,) * 6),
}

# Channels-last and float64 variants of some of them (the cost model keys on both).
_NXC = ("2d_c64_k3", "2d_c16_k11", "2d_c128_s2_k4", "1d_c64_k15", "3d_c16_k3", "2d_c8_d2_k15")
_F64 = ("1d_c1_k63", "1d_c8_k31", "1d_c64_k15", "2d_c16_k7", "2d_c16_k15", "2d_c64_k7",
        "2d_c128_s2_k4", "2d_c16_s2_k31", "2d_dw32_k15", "2d_g4_c64_k9", "3d_c8_k5", "3d_c4_k13")

CASES = {
    **_BASE,
    **{f"{n}_nxc": dict(_BASE[n], data_format="NXC") for n in _NXC},
    **{f"{n}_f64": dict(_BASE[n], dtype="float64") for n in _F64},
}

# The asv regret benchmark's subset: both sides of the direct / FFT crossover, every rank.
TRACKED = ("1d_c8_k31", "1d_c8_k63", "1d_c512_s8_k16", "2d_c16_k7", "2d_c16_k15",
           "2d_c64_k13", "2d_c128_s2_k4", "2d_c16_s2_k31", "2d_dw32_k15", "3d_c8_k9",
           "2d_c16_k15_f64", "2d_c64_k3_nxc")
