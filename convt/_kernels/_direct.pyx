"""Direct transposed convolution, gather form over per-axis phase tables.

For output position o of an axis (stride s, dilation d, g = gcd(s, d)), the taps that reach it
are one arithmetic progression of the phase (o + pb) mod s (DESIGN.md, "phase decomposition"):
    k = k_first[o] + j * (s/g),   i = i_first[o] - j * (d/g),   j = 0 .. count[o]-1.
The tables (built by convt._backends.direct.pixel.axis_taps) list only taps with 0 <= k < K and 0 <= i < I, so
no multiply touches an inserted zero or an out-of-range input, and phases with no tap get just
the bias. Every output pixel (all of its C_out channels) is computed by exactly one OpenMP
iteration, and its sum is always taken in the same order (taps, then input channels), so the
result is bit-identical for any thread count.

Assumes (the caller guarantees; the kernel does not check):
  x (N, I0, I1, I2, C_in) C-contiguous; w (G, K0, K1, K2, C_in/G, C_out/G) C-contiguous;
  y (N, O0, O1, O2, C_out) C-contiguous; bias (C_out,); tab_a (O_a, 3) rows (k_first, i_first, count) whose
  taps are in range; steps = (kstep0, istep0, kstep1, istep1, kstep2, istep2); C_in >= 1.
Rank-1 and rank-2 problems are passed with leading unit axes (K = I = O = 1, one tap).
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t

from ._types cimport real


cdef void _pixel(int64_t p, const real* x, const real* w, const real* bias, real* y,
                 const int64_t* t0, const int64_t* t1, const int64_t* t2, const int64_t* st,
                 const int64_t* dims) noexcept nogil:
    # dims: O0, O1, O2, I0, I1, I2, K0, K1, K2, C_in, G, Cg, Mg
    cdef int64_t O0 = dims[0], O1 = dims[1], O2 = dims[2]
    cdef int64_t I0 = dims[3], I1 = dims[4], I2 = dims[5]
    cdef int64_t K1 = dims[7], K2 = dims[8]
    cdef int64_t C_in = dims[9], G = dims[10], Cg = dims[11], Mg = dims[12]
    cdef int64_t C_out = G * Mg, gstride = dims[6] * K1 * K2 * Cg * Mg
    cdef int64_t o2 = p % O2, r = p // O2
    cdef int64_t o1 = r % O1
    r = r // O1
    cdef int64_t o0 = r % O0, n = r // O0
    cdef real* yp = y + p * C_out
    cdef const real* xg
    cdef const real* wr
    cdef real* yg
    cdef real xv
    cdef int64_t c, j0, j1, j2, k0, k1, k2, i0, i1, i2, g, ci, m, xoff, woff
    for c in range(C_out):
        yp[c] = bias[c]
    for j0 in range(t0[3 * o0 + 2]):
        k0 = t0[3 * o0] + j0 * st[0]
        i0 = t0[3 * o0 + 1] - j0 * st[1]
        for j1 in range(t1[3 * o1 + 2]):
            k1 = t1[3 * o1] + j1 * st[2]
            i1 = t1[3 * o1 + 1] - j1 * st[3]
            for j2 in range(t2[3 * o2 + 2]):
                k2 = t2[3 * o2] + j2 * st[4]
                i2 = t2[3 * o2 + 1] - j2 * st[5]
                xoff = (((n * I0 + i0) * I1 + i1) * I2 + i2) * C_in
                woff = ((k0 * K1 + k1) * K2 + k2) * Cg * Mg
                for g in range(G):
                    xg = x + xoff + g * Cg
                    yg = yp + g * Mg
                    for ci in range(Cg):
                        xv = xg[ci]
                        wr = w + g * gstride + woff + ci * Mg
                        for m in range(Mg):
                            yg[m] += xv * wr[m]


def direct_nxc(const real[:, :, :, :, ::1] x,       # IN  (N, I0, I1, I2, C_in)
               const real[:, :, :, :, :, ::1] w,    # IN  (G, K0, K1, K2, Cg, Mg)
               const real[::1] bias,                # IN  (C_out,), zeros when there is none
               real[:, :, :, :, ::1] y,             # OUT (N, O0, O1, O2, C_out)
               const int64_t[:, ::1] tab0,          # IN  (O0, 3) k_first, i_first, count
               const int64_t[:, ::1] tab1,          # IN  (O1, 3)
               const int64_t[:, ::1] tab2,          # IN  (O2, 3)
               const int64_t[::1] steps,            # IN  (6,) kstep, istep per axis
               int num_threads):
    """Compute y in place; releases the GIL. See the module docstring for the contract."""
    cdef int64_t dims[13]
    cdef int64_t npix = y.shape[0] * y.shape[1] * y.shape[2] * y.shape[3]
    cdef int64_t p
    if npix == 0 or y.shape[4] == 0:
        return
    dims[0], dims[1], dims[2] = y.shape[1], y.shape[2], y.shape[3]
    dims[3], dims[4], dims[5] = x.shape[1], x.shape[2], x.shape[3]
    dims[6], dims[7], dims[8] = w.shape[1], w.shape[2], w.shape[3]
    dims[9], dims[10], dims[11], dims[12] = x.shape[4], w.shape[0], w.shape[4], w.shape[5]
    cdef const real* xp = &x[0, 0, 0, 0, 0]
    cdef const real* wp = &w[0, 0, 0, 0, 0, 0]
    cdef const real* bp = &bias[0]
    cdef real* yp = &y[0, 0, 0, 0, 0]
    cdef const int64_t* t0 = &tab0[0, 0]
    cdef const int64_t* t1 = &tab1[0, 0]
    cdef const int64_t* t2 = &tab2[0, 0]
    cdef const int64_t* st = &steps[0]
    with nogil:
        for p in prange(npix, schedule="static", num_threads=num_threads):
            _pixel(p, xp, wp, bp, yp, t0, t1, t2, st, dims)
