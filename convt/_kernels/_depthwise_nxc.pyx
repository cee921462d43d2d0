"""Direct transposed convolution for one channel per group in and out, channels last
(depthwise): depthwise_nxc.

The channel contraction is degenerate, so the op is memory-bound (DESIGN.md): the kernel
reads x and w and writes y once, with a unit-stride innermost loop along the channels that
gcc -O3 vectorises (SSE2 baseline). A task is an output pixel; its taps come from the
per-axis tables (as in convt._kernels._direct) and
y[c] = bias[c] + w_0[c] * x_0[c] + ... in chunks of up to 4 taps (weights packed (K0, K1, K2,
G, 1, 1)). Channels-last layers with 2-3 channels per group are run by _depthwise.pyx's
depthwise_ncx on transposed data (convt._backends.direct.depthwise): strided channel loops do not vectorise.

Every output is written by exactly one task and its sum is always taken in the same order
(bias, then tap of axis 0, axis 1, axis 2), so the result is bit-identical for any thread
count. Per-thread scratch (the taps' offsets) is allocated once per thread.

Assumes (the caller guarantees; the kernel does not check): x, y, w, bias C-contiguous in the
shapes of the `def` signature; tab_a (O_a, 3) rows (k_first, i_first, count) of taps in
range, steps = (kstep0, istep0, kstep1, istep1, kstep2, istep2).
"""
from cython.parallel cimport parallel, prange
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from ._types cimport real


cdef void _pixel_nxc(int64_t p, const real* x, const real* w, const real* bias, real* y,
                     const int64_t* t0, const int64_t* t1, const int64_t* t2,
                     const int64_t* st, const int64_t* dims, int64_t* off,
                     int64_t* woff) noexcept nogil:
    # dims: N, C_in, G, Cg, Mg, I0, I1, I2, O0, O1, O2, K1, K2 (Cg = Mg = 1)
    cdef int64_t C_in = dims[1]
    cdef int64_t I0 = dims[5], I1 = dims[6], I2 = dims[7]
    cdef int64_t O0 = dims[8], O1 = dims[9], O2 = dims[10], K1 = dims[11], K2 = dims[12]
    cdef int64_t C_out = C_in, o2 = p % O2, r = p // O2
    cdef int64_t o1 = r % O1
    r = r // O1
    cdef int64_t o0 = r % O0, n = r // O0
    cdef int64_t j0, j1, j2, k0, k1, k2, i0, i1, i2, nt = 0, t, c, nc
    cdef real* yp = y + p * C_out
    cdef const real* x0
    cdef const real* x1
    cdef const real* x2
    cdef const real* x3
    cdef const real* w0
    cdef const real* w1
    cdef const real* w2
    cdef const real* w3
    for j0 in range(t0[3 * o0 + 2]):
        k0 = t0[3 * o0] + j0 * st[0]
        i0 = t0[3 * o0 + 1] - j0 * st[1]
        for j1 in range(t1[3 * o1 + 2]):
            k1 = t1[3 * o1] + j1 * st[2]
            i1 = t1[3 * o1 + 1] - j1 * st[3]
            for j2 in range(t2[3 * o2 + 2]):
                k2 = t2[3 * o2] + j2 * st[4]
                i2 = t2[3 * o2 + 1] - j2 * st[5]
                off[nt] = (((n * I0 + i0) * I1 + i1) * I2 + i2) * C_in
                woff[nt] = ((k0 * K1 + k1) * K2 + k2) * C_in
                nt += 1
    if nt == 0:
        for c in range(C_out):
            yp[c] = bias[c]
        return
    for t in range(0, nt, 4):
        nc = nt - t if nt - t < 4 else 4
        x0 = x + off[t]
        w0 = w + woff[t]
        if nc == 1:
            if t == 0:
                for c in range(C_out):
                    yp[c] = bias[c] + w0[c] * x0[c]
            else:
                for c in range(C_out):
                    yp[c] = yp[c] + w0[c] * x0[c]
            continue
        x1 = x + off[t + 1]
        w1 = w + woff[t + 1]
        if nc == 2:
            if t == 0:
                for c in range(C_out):
                    yp[c] = bias[c] + w0[c] * x0[c] + w1[c] * x1[c]
            else:
                for c in range(C_out):
                    yp[c] = yp[c] + w0[c] * x0[c] + w1[c] * x1[c]
            continue
        x2 = x + off[t + 2]
        w2 = w + woff[t + 2]
        if nc == 3:
            if t == 0:
                for c in range(C_out):
                    yp[c] = bias[c] + w0[c] * x0[c] + w1[c] * x1[c] + w2[c] * x2[c]
            else:
                for c in range(C_out):
                    yp[c] = yp[c] + w0[c] * x0[c] + w1[c] * x1[c] + w2[c] * x2[c]
            continue
        x3 = x + off[t + 3]
        w3 = w + woff[t + 3]
        if t == 0:
            for c in range(C_out):
                yp[c] = bias[c] + w0[c] * x0[c] + w1[c] * x1[c] + w2[c] * x2[c] + w3[c] * x3[c]
        else:
            for c in range(C_out):
                yp[c] = yp[c] + w0[c] * x0[c] + w1[c] * x1[c] + w2[c] * x2[c] + w3[c] * x3[c]


def depthwise_nxc(const real[:, :, :, :, ::1] x,       # IN  (N, I0, I1, I2, C_in)
                  const real[:, :, :, :, :, ::1] w,    # IN  (K0, K1, K2, G, 1, 1)
                  const real[::1] bias,                # IN  (C_out,), zeros when there is none
                  real[:, :, :, :, ::1] y,             # OUT (N, O0, O1, O2, C_out = G)
                  const int64_t[:, ::1] tab0,          # IN  (O0, 3) k_first, i_first, count
                  const int64_t[:, ::1] tab1,          # IN  (O1, 3)
                  const int64_t[:, ::1] tab2,          # IN  (O2, 3)
                  const int64_t[::1] steps,            # IN  (6,) kstep, istep per axis
                  int num_threads):
    """Compute y in place; releases the GIL. See the module docstring for the contract."""
    cdef int64_t dims[13]
    cdef int64_t npix = y.shape[0] * y.shape[1] * y.shape[2] * y.shape[3], p
    cdef int64_t maxt = w.shape[0] * w.shape[1] * w.shape[2]
    cdef int err[1]
    cdef int* errp = err
    err[0] = 0
    if npix == 0 or y.shape[4] == 0:
        return
    dims[0], dims[1], dims[2], dims[3], dims[4] = x.shape[0], x.shape[4], w.shape[3], \
        w.shape[4], w.shape[5]
    dims[5], dims[6], dims[7] = x.shape[1], x.shape[2], x.shape[3]
    dims[8], dims[9], dims[10] = y.shape[1], y.shape[2], y.shape[3]
    dims[11], dims[12] = w.shape[1], w.shape[2]
    cdef const real* xp = &x[0, 0, 0, 0, 0]
    cdef const real* wp = &w[0, 0, 0, 0, 0, 0]
    cdef const real* bp = &bias[0]
    cdef real* yp = &y[0, 0, 0, 0, 0]
    cdef const int64_t* t0 = &tab0[0, 0]
    cdef const int64_t* t1 = &tab1[0, 0]
    cdef const int64_t* t2 = &tab2[0, 0]
    cdef const int64_t* st = &steps[0]
    cdef int64_t* off = NULL
    cdef int64_t* woff = NULL
    cdef bint ok = True
    with nogil, parallel(num_threads=num_threads):
        off = <int64_t*> malloc(maxt * sizeof(int64_t))
        woff = <int64_t*> malloc(maxt * sizeof(int64_t))
        ok = not (off == NULL or woff == NULL)
        if not ok:
            errp[0] = 1
        for p in prange(npix, schedule="static"):
            if ok:   # every thread reaches the loop (OpenMP), one without scratch skips its work
                _pixel_nxc(p, xp, wp, bp, yp, t0, t1, t2, st, dims, off, woff)
        free(off)
        free(woff)
    if err[0]:
        raise MemoryError("convt: no memory for the depthwise kernel's per-thread scratch")
