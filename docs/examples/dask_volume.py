"""A 3-D volume through a transposed convolution in chunks with convt.dask, against the
in-memory call: prints the shapes, a progress bar, the best-of-N times and the throughput.

    python docs/examples/dask_volume.py [--size 96] [--chunk 48] [--repeat 3]

Times are wall-clock best-of-N; on a shared machine, compare the ratios of one run.
"""
import argparse
import time

import dask
import dask.array as da
import numpy as np
from dask.diagnostics import ProgressBar

import convt
import convt.dask


def best_of(f, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=96, help="input edge (voxels)")
    p.add_argument("--chunk", type=int, default=48, help="input chunk edge (voxels)")
    p.add_argument("--channels", type=int, default=16, help="input channels (output: half)")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    c_in, c_out, n = a.channels, a.channels // 2, a.size
    x = rng.standard_normal((1, c_in, n, n, n), dtype=np.float32)
    w = rng.standard_normal((c_in, c_out, 4, 4, 4), dtype=np.float32)
    b = rng.standard_normal(c_out, dtype=np.float32)
    kw = dict(strides=(2, 2, 2), pads=(1, 1, 1, 1, 1, 1))       # 2x upsampling, VNet-like

    op = convt.ConvTranspose(w, b, **kw)                      # in memory, all cores
    t_mem, y_mem = best_of(lambda: op(x), a.repeat)

    xd = da.from_array(x, chunks=(1, c_in, a.chunk, a.chunk, a.chunk))
    yd = convt.dask.conv_transpose(xd, w, b, **kw)             # one thread per block task
    print(f"x {x.shape} in chunks {xd.chunksize}, {xd.npartitions} blocks "
          f"-> y {yd.shape} in chunks {yd.chunksize}, {yd.npartitions} blocks")
    with dask.config.set(scheduler="threads"), ProgressBar():
        t0 = time.perf_counter()
        y_dask = yd.compute()                                  # first call: plans too
        t_first = time.perf_counter() - t0
    assert np.array_equal(y_dask, y_mem), "chunked result differs from the in-memory one"
    with dask.config.set(scheduler="threads"):
        t_dask, _ = best_of(yd.compute, a.repeat)
        t_persist, _ = best_of(lambda: yd.persist(), a.repeat)  # blocks, not concatenated
        yd2 = convt.dask.conv_transpose(xd, w, b, workers=2, **kw)
        t_dask2, _ = best_of(yd2.compute, a.repeat)

    macs = op.geometry(x.shape).macs
    vox = y_mem.size // c_out
    print(f"OpenMP threads: {convt.ConvTranspose(w).workers}, dask threads: "
          f"{dask.system.CPU_COUNT}")
    for label, t in [("in-memory ConvTranspose (workers=all)", t_mem),
                     ("convt.dask, threaded, workers=1 per block", t_dask),
                     ("  the same, .persist() (no final concatenation)", t_persist),
                     ("convt.dask, threaded, workers=2 per block", t_dask2)]:
        print(f"{label:48s} {t * 1e3:8.1f} ms  {vox / t / 1e6:7.1f} Mvoxel/s  "
              f"{macs / t / 1e9:6.1f} GMAC/s  ({t / t_mem:.2f}x in-memory time)")
    print(f"first convt.dask compute (plans each block geometry): {t_first * 1e3:.1f} ms")
    print("chunked == in-memory, bit for bit:", bool(np.array_equal(y_dask, y_mem)))


if __name__ == "__main__":
    main()
