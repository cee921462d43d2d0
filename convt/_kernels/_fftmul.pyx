"""The FFT backend's per-bin channel contraction: fft_contract, and fft_contract_dft, which
also finishes the kernel spectra on the way (a one-shot call's, never stored).

Per phase p, bin row r (a frequency bin of one group) and item i (a batch element of one
tile), Y[p, r, i, :] = sum_c X[r, i, c] W[p, r, c, :], complex. The matrices are tiny (C_in/G
x C_out/G per bin, thousands of bins), where NumPy's batched matmul pays per bin; here one
loop nest runs them all. W comes in a split layout (P, 2, R, Cg, Mg): the real parts, then the
imaginary parts, so the innermost loop over output channels reads two unit-stride streams
that gcc -O3 vectorises; X and Y stay interleaved complex (scipy.fft's layout), and a
row of Y is summed in per-thread scratch and written once.

fft_contract_dft takes the kernel spectra transformed along every axis but the first (A,
split layout, Q0 taps left on axis 0) and the first axis' DFT matrix: per bin row it makes the
row's kernel spectrum in per-thread scratch (Q0 complex multiply-adds per weight, in cache)
and contracts it at once, so a one-shot call's full spectra (MBs, written then read back)
never exist. Axis 0 complex (2-D, 3-D): rows f and L0 - f share the products of the real
and imaginary parts (F[L0 - f] = conj F[f]), so one pass over A makes both (half the work).
Axis 0 real (1-D: it is also the rfft axis): A is the real kernel, and only L0/2 + 1 rows.

The loops themselves are C (``_fftrow.h``), compiled once per ISA level of ``_isa.h`` and
picked by the ``isa`` argument (default ``convt._kernels._cpu.ISA``).

Threads: OpenMP prange over bin rows (fft_contract_dft: pairs of mirrored rows), each row
(every phase and item of it) computed by one thread in a fixed order, so results are
bit-identical for any thread count.
"""
from cython.parallel cimport parallel, prange
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from ._types cimport real
from . import _cpu


cdef extern from "_fftrow.h" nogil:
    enum: CONVT_FFTROW_BLOCK
    void fftrow_contract_f(int isa, const float* x, const float* wr, const float* wi,
                           float* y, int64_t items, int64_t cg, int64_t mg, int64_t xs,
                           float* acc)
    void fftrow_contract_d(int isa, const double* x, const double* wr, const double* wi,
                           double* y, int64_t items, int64_t cg, int64_t mg, int64_t xs,
                           double* acc)
    void fftrow_dft_f(int isa, const float* a, const float* ca, const float* sa,
                      const float* cb, const float* sb, float* s, int64_t terms, int64_t nb,
                      int64_t n, int cplx)
    void fftrow_dft_d(int isa, const double* a, const double* ca, const double* sa,
                      const double* cb, const double* sb, double* s, int64_t terms,
                      int64_t nb, int64_t n, int cplx)
    void fftrow_packw_f(int isa, const float* w, int64_t ws, int64_t nw, const int64_t* hi,
                        const int64_t* lo, const int64_t* i1, int64_t taps1, int64_t terms,
                        const float* fr, const float* fi, int64_t bins, int cplx, float* sd,
                        float* out, int64_t ostride)
    void fftrow_packw_d(int isa, const double* w, int64_t ws, int64_t nw, const int64_t* hi,
                        const int64_t* lo, const int64_t* i1, int64_t taps1, int64_t terms,
                        const double* fr, const double* fi, int64_t bins, int cplx,
                        double* sd, double* out, int64_t ostride)


# weights per packed block of A (fft_pack_weights' rows are laid out by it)
FFTROW_BLOCK = CONVT_FFTROW_BLOCK


cdef inline void _row(int isa, const real* x, const real* wr, const real* wi, real* y,
                      int64_t items, int64_t cg, int64_t mg, real* acc) noexcept nogil:
    """Every item of one bin row: y[i] = x[i] @ (wr + i wi); x, y interleaved complex."""
    if real is float:
        fftrow_contract_f(isa, x, wr, wi, y, items, cg, mg, 2 * cg, acc)
    else:
        fftrow_contract_d(isa, x, wr, wi, y, items, cg, mg, 2 * cg, acc)


cdef inline void _dft_rows(int isa, const real* a, const real* ca, const real* sa,
                           const real* cb, const real* sb, real* s, int64_t terms,
                           int64_t nb, int64_t n, bint cplx) noexcept nogil:
    """Kernel spectra of two rows f (a, b) and, ``cplx``, of their mirrors L0 - f, short of
    their phase (``_fftrow.h``), from one packed row of A (``_pack``): s[0:2n] row a, s[2n:4n]
    its mirror, s[4n:8n] the same for b (real then imaginary parts), n >= nb * BLOCK.
    ca, sa: cos and sin of 2 pi f t / L0, t < ``terms``, for row a; cb, sb for row b."""
    if real is float:
        fftrow_dft_f(isa, a, ca, sa, cb, sb, s, terms, nb, n, cplx)
    else:
        fftrow_dft_d(isa, a, ca, sa, cb, sb, s, terms, nb, n, cplx)


cdef void _pack(const real* a, real* out, int64_t taps, int64_t parts, int64_t ks,
                int64_t aim, int64_t n, int64_t nb, int64_t terms) noexcept nogil:
    """One row of A (``taps`` lines ``ks`` apart, imaginary parts ``aim`` after the real
    ones, ``n`` weights) as ``nb`` blocks of (terms, E then O, parts, BLOCK), zero padded:
    E_t = A[c + t] + A[c - t], O_t = A[c + t] - A[c - t], c = terms - 1 (E_0 = A[c], O_0 = 0;
    tap ``taps`` is a zero when Q is even)."""
    cdef int64_t b, t, q, j, m = CONVT_FFTROW_BLOCK, c = terms - 1
    cdef real hi, lo
    cdef real* o
    cdef const real* h
    cdef const real* l
    for b in range(nb):
        for t in range(terms):
            for q in range(parts):
                o = out + ((b * terms + t) * 2 * parts + q) * m
                if (b + 1) * m <= n and c + t < taps and t > 0:   # the common case, vectorised
                    h = a + (c + t) * ks + q * aim + b * m
                    l = a + (c - t) * ks + q * aim + b * m
                    for j in range(m):
                        o[j] = h[j] + l[j]
                        o[parts * m + j] = h[j] - l[j]
                    continue
                for j in range(m):
                    hi = 0
                    lo = 0
                    if b * m + j < n:
                        if c + t < taps:
                            hi = a[(c + t) * ks + q * aim + b * m + j]
                        if t > 0:
                            lo = a[(c - t) * ks + q * aim + b * m + j]
                    o[j] = hi + lo
                    o[parts * m + j] = hi - lo if t > 0 else 0


cdef inline void _packw(int isa, const real* w, int64_t ws, int64_t nw, const int64_t* hi,
                        const int64_t* lo, const int64_t* i1, int64_t taps1, int64_t terms,
                        const real* fr, const real* fi, int64_t bins, bint cplx, real* sd,
                        real* out, int64_t ostride) noexcept nogil:
    if real is float:
        fftrow_packw_f(isa, w, ws, nw, hi, lo, i1, taps1, terms, fr, fi, bins, cplx, sd, out,
                       ostride)
    else:
        fftrow_packw_d(isa, w, ws, nw, hi, lo, i1, taps1, terms, fr, fi, bins, cplx, sd, out,
                       ostride)


cdef void _rotate(const real* x, real* out, int64_t count, real c, real s) noexcept nogil:
    """out = x * (c + i s), ``count`` interleaved complex values."""
    cdef int64_t j
    for j in range(count):
        out[2 * j] = x[2 * j] * c - x[2 * j + 1] * s
        out[2 * j + 1] = x[2 * j] * s + x[2 * j + 1] * c


def fft_contract(const real[:, :, ::1] x,            # IN  (R, items, 2 * Cg) interleaved
                 const real[:, :, :, :, ::1] w,      # IN  (P, 2, R, Cg, Mg) split
                 real[:, :, :, ::1] y,               # OUT (P, R, items, 2 * Mg) interleaved
                 int num_threads, int isa=-1):
    """y[p, r, i] = x[r, i] @ w[p, r] in complex arithmetic (shapes above; trusted);
    ``isa``: the level of the loops (-1: ``_cpu.ISA``)."""
    cdef int64_t rows = x.shape[0], items = x.shape[1], cg = w.shape[3], mg = w.shape[4]
    cdef int64_t phases = w.shape[0], r, p
    cdef int64_t wrow = cg * mg, yrow = items * 2 * mg, xrow = items * 2 * cg
    cdef int64_t ws = 2 * rows * wrow, ys = rows * yrow, wim = rows * wrow
    cdef const real* xp = &x[0, 0, 0] if x.size else NULL
    cdef const real* wp = &w[0, 0, 0, 0, 0] if w.size else NULL
    cdef real* yp = &y[0, 0, 0, 0] if y.size else NULL
    cdef real* acc = NULL
    cdef int level = _cpu.ISA if isa < 0 else isa
    cdef int err[1]
    cdef int* errp = err
    err[0] = 0
    if rows == 0 or items == 0 or mg == 0 or phases == 0:
        return
    if cg == 0:
        y[...] = 0
        return
    cdef bint ok = True
    with nogil, parallel(num_threads=num_threads):
        acc = <real*> malloc(2 * mg * sizeof(real))
        ok = not (acc == NULL)
        if not ok:
            errp[0] = 1
        for r in prange(rows, schedule="static"):
            if ok:   # every thread reaches the loop (OpenMP), one without scratch skips its work
                for p in range(phases):
                    _row(level, xp + r * xrow, wp + p * ws + r * wrow,
                         wp + p * ws + wim + r * wrow, yp + p * ys + r * yrow, items, cg, mg,
                         acc)
        free(acc)
    if err[0]:
        raise MemoryError("convt: no memory for the FFT contraction's per-thread scratch")


def fft_contract_dft(const real[:, :, ::1] x,            # IN  (R, items, 2 * Cg) interleaved
                     const real[:, :, :, :, :] a,        # IN  (P, parts, Q0, RR, Cg * Mg), strided
                     const real[:, :, ::1] f,            # IN  (2, L0 // 2 + 1, terms)
                     real[:, :, :, ::1] y,               # OUT (P, R, items, 2 * Mg) interleaved
                     int64_t length, int num_threads, int isa=-1):
    """y[p, r] = x[r] @ W[p, r], W[p, f0 * RR + rr] = sum_k e^(-2 pi i f0 k / L0) A[p, :, k, rr]:
    the kernel spectra's last transform, along axis 0 (length L0 = ``length``), fused into
    the contraction. ``parts`` 2: A is split complex and R = L0 * RR rows; 1: A is real (1-D)
    and R = (L0 // 2 + 1) * RR. f: cos and sin of 2 pi f0 t / L0 for the rows f0 <= L0 // 2
    and t < terms = Q0 // 2 + 1 (the centred taps: ``_fftrow.h``). Shapes trusted;
    Mg = y.shape[3] // 2, Cg = x.shape[2] // 2; ``isa`` as ``fft_contract``'s.
    A is packed first (``_pack``), then ``fft_contract_packed``'s loop runs."""
    cdef int64_t phases = a.shape[0], taps = a.shape[2], parts = a.shape[1]
    cdef int64_t rr_n = a.shape[3], n = a.shape[4], terms = f.shape[2]
    cdef int64_t aps = a.strides[0] // sizeof(real), aim = a.strides[1] // sizeof(real)
    cdef int64_t ks = a.strides[2] // sizeof(real), rs = a.strides[3] // sizeof(real)
    cdef int64_t u, p
    cdef int64_t nb = (n + CONVT_FFTROW_BLOCK - 1) // CONVT_FFTROW_BLOCK
    cdef int64_t prow = nb * terms * 2 * parts * CONVT_FFTROW_BLOCK   # a packed row
    cdef const real* ap = &a[0, 0, 0, 0, 0] if a.size else NULL
    cdef real* packed = NULL
    if x.shape[0] == 0 or x.shape[1] == 0 or y.shape[3] == 0 or phases == 0:
        return
    if x.shape[2] == 0 or taps == 0:
        y[...] = 0
        return
    if (n > 1 and a.strides[4] != sizeof(real)) or terms != taps // 2 + 1:
        raise RuntimeError("fft_contract_dft: A's weights not contiguous, or a DFT table "
                           "for other taps: this is a bug in convt")
    packed = <real*> malloc(phases * rr_n * prow * sizeof(real))
    if packed == NULL:
        raise MemoryError("convt: no memory for the FFT contraction's packed kernel spectra")
    with nogil, parallel(num_threads=num_threads):
        for u in prange(phases * rr_n, schedule="static"):
            p = u // rr_n
            _pack(ap + p * aps + (u - p * rr_n) * rs, packed + u * prow, taps, parts,
                  ks, aim, n, nb, terms)
    try:
        _contract_packed(x, packed, prow, f, y, length, phases, rr_n, parts == 2,
                         num_threads, isa, NULL, 0, 0, 1)
    finally:
        free(packed)


def fft_pack_weights(const real[:, ::1] w,             # IN  (C_in * Mg, prod(K)) IOX weights
                     const int64_t[:, :, ::1] taps0,   # IN  (P, 2, terms) axis 0's rows
                     const int64_t[:, ::1] taps1,      # IN  (P, Q1) the last axis' taps
                     const real[:, :, ::1] f,          # IN  (2, bins, Q1 // 2 + 1) cos, sin
                     real[:, ::1] out,                 # OUT (P * bins * G, prow) packed
                     int64_t groups, bint cplx, int num_threads, int isa=-1):
    """A one-shot call's kernel spectra short of axis 0, straight from the weights into the
    packed rows ``fft_contract_packed`` reads (``_pack``'s layout: per row, blocks of BLOCK
    weights, each every term's E and O): with ``cplx`` (2-D) A[p, k0, f1 * G + g] =
    e^(i th c1) sum_q e^(-i th q) h_p[k0, q] (th = 2 pi f1 / L1, c1 = Q1 // 2: the last axis'
    DFT of the polyphase kernel h_p with its taps centred, f = ``lead_dft``'s cos and sin of
    th u; ``fft_contract_packed`` turns the row's input by e^(-i th c1)), E_t = A[c + t] +
    A[c - t], O_t = A[c + t] - A[c - t]; without (1-D) A is h_p itself (bins 1).
    taps0[p, 0, t] / taps0[p, 1, t]: the offset in a weight's prod(K) taps of the
    row of tap c + t / c - t of phase p's axis 0 (-1: a zero tap); taps1[p, q]: the offset
    of its last axis' tap q (-1: zero). No polyphase kernel, no spectra array, no pack pass.
    Each output value is computed by one thread: the same bits for any ``num_threads``."""
    cdef int64_t phases = taps0.shape[0], terms = taps0.shape[2], q1 = taps1.shape[1]
    cdef int64_t bins = f.shape[1], ws = w.shape[1], n = w.shape[0] // groups
    cdef int64_t nb = (n + CONVT_FFTROW_BLOCK - 1) // CONVT_FFTROW_BLOCK
    cdef int64_t prow = out.shape[1], rr_n = bins * groups, task, g, b, p
    cdef int64_t step = (4 if cplx else 2) * CONVT_FFTROW_BLOCK
    cdef const real* wp = &w[0, 0] if w.size else NULL
    cdef const int64_t* t0 = &taps0[0, 0, 0] if taps0.size else NULL
    cdef const int64_t* t1 = &taps1[0, 0] if taps1.size else NULL
    cdef const real* fp = &f[0, 0, 0] if f.size else NULL
    cdef real* op = &out[0, 0] if out.size else NULL
    cdef real* sd = NULL
    cdef int level = _cpu.ISA if isa < 0 else isa
    cdef int err[1]
    cdef int* errp = err
    err[0] = 0
    if (prow != nb * terms * step or out.shape[0] != phases * rr_n or ws == 0 or q1 == 0
            or (cplx and f.shape[2] != q1 // 2 + 1)):
        raise RuntimeError("fft_pack_weights: packed rows or a table of another shape: this is a "
                           "bug in convt")
    if n == 0 or phases == 0:
        return
    cdef bint ok = True
    with nogil, parallel(num_threads=num_threads):
        sd = <real*> malloc((2 * q1 + 4 * (q1 // 2 + 1)) * terms * CONVT_FFTROW_BLOCK
                            * sizeof(real))
        ok = not (sd == NULL)
        if not ok:
            errp[0] = 1
        for task in prange(groups * nb, schedule="static"):
            if ok:   # every thread reaches the loop (OpenMP), one without scratch skips its work
                g = task // nb
                b = task - g * nb
                for p in range(phases):
                    _packw(level, wp + (g * n + b * CONVT_FFTROW_BLOCK) * ws, ws,
                           min(CONVT_FFTROW_BLOCK, n - b * CONVT_FFTROW_BLOCK),
                           t0 + p * 2 * terms, t0 + (p * 2 + 1) * terms, t1 + p * q1, q1,
                           terms, fp, fp + bins * f.shape[2], bins, cplx, sd,
                           op + (p * rr_n + g) * prow + b * terms * step, groups * prow)
        free(sd)
    if err[0]:
        raise MemoryError("convt: no memory for the FFT kernel spectra's per-thread scratch")


def fft_contract_packed(const real[:, :, ::1] x,         # IN  (R, items, 2 * Cg) interleaved
                        const real[:, ::1] packed,       # IN  (P * RR, prow) packed A
                        const real[:, :, ::1] f,         # IN  (2, L0 // 2 + 1, terms)
                        const real[:, :, ::1] f1,        # IN  (2, bins1, terms1) axis 1's
                        real[:, :, :, ::1] y,            # OUT (P, R, items, 2 * Mg) interleaved
                        int64_t length, int64_t rr_n, int64_t groups, bint cplx,
                        int num_threads, int isa=-1):
    """``fft_contract_dft`` from A already packed (``fft_pack_weights``); ``cplx``: A split
    complex (R = L0 * RR rows, RR = bins1 * ``groups``), its rows f1 turned by e^(i th c1) (the
    last axis' centred taps: f1 = its ``lead_dft`` table, c1 = terms1 - 1), so each row's
    input is turned back by e^(-i th c1); else real (1-D, R = (L0 // 2 + 1) * RR, f1 unused)."""
    cdef int64_t phases = packed.shape[0] // rr_n if rr_n else 0
    if x.shape[0] == 0 or x.shape[1] == 0 or y.shape[3] == 0 or phases == 0:
        return
    if x.shape[2] == 0:
        y[...] = 0
        return
    _contract_packed(x, &packed[0, 0], packed.shape[1], f, y, length, phases, rr_n, cplx,
                     num_threads, isa, &f1[0, 0, 0] if cplx else NULL, f1.shape[1], f1.shape[2],
                     groups)


cdef _contract_packed(const real[:, :, ::1] x, const real* packed, int64_t prow,
                      const real[:, :, ::1] f, real[:, :, :, ::1] y, int64_t length,
                      int64_t phases, int64_t rr_n, bint cplx, int num_threads, int isa,
                      const real* ph, int64_t ph_bins, int64_t ph_terms, int64_t groups):
    """The loop of ``fft_contract_dft`` over pairs of mirrored rows, from packed A (rows of
    ``prow`` reals: (nb, terms, 2, parts, BLOCK)); ``ph`` (NULL: none) the cos / sin table
    (2, ph_bins, ph_terms) whose last column turns row rr's input by e^(-i th c1) more,
    th of bin rr // ``groups``."""
    cdef int64_t rows = x.shape[0], items = x.shape[1], cg = x.shape[2] // 2
    cdef int64_t mg = y.shape[3] // 2, half = f.shape[1], terms = f.shape[2]
    cdef int64_t parts = 2 if cplx else 1
    cdef int64_t nb = prow // (terms * 2 * parts * CONVT_FFTROW_BLOCK)
    cdef int64_t yrow = items * 2 * mg, ys = rows * yrow, xrow = items * 2 * cg
    cdef int64_t pairs = (half + 1) // 2
    cdef int64_t u, p, f0, h, rr, r0, fb, c = terms - 1
    cdef int64_t nn = (nb + 1) * CONVT_FFTROW_BLOCK   # scratch rows apart (_fftrow.h)
    cdef const real* xp = &x[0, 0, 0]
    cdef const real* fp = &f[0, 0, 0]
    cdef real* yp = &y[0, 0, 0, 0]
    cdef real* acc = NULL
    cdef real* s
    cdef real* xr
    cdef const real* fc
    cdef real pc, ps, ra, rb
    cdef int level = _cpu.ISA if isa < 0 else isa
    cdef int err[1]
    cdef int* errp = err
    err[0] = 0
    cdef bint ok = True
    with nogil, parallel(num_threads=num_threads):
        acc = <real*> malloc((2 * mg + 8 * nn + xrow) * sizeof(real))
        ok = not (acc == NULL)
        if not ok:
            errp[0] = 1
        for u in prange(pairs * rr_n, schedule="static"):
            if ok:   # every thread reaches the loop (OpenMP), one without scratch skips its work
                s = acc + 2 * mg
                xr = s + 8 * nn
                rr = u // pairs    # consecutive units share rr: its packed row stays in cache
                f0 = 2 * (u - rr * pairs)
                fb = f0 + 1 if f0 + 1 < half else f0
                pc = 1
                ps = 0
                if ph != NULL:     # e^(-i th c1) of the row's last-axis bin
                    pc = ph[(rr // groups) * ph_terms + ph_terms - 1]
                    ps = -ph[(ph_bins + rr // groups) * ph_terms + ph_terms - 1]
                for p in range(phases):
                    _dft_rows(level, packed + (p * rr_n + rr) * prow, fp + f0 * terms,
                              fp + (half + f0) * terms, fp + fb * terms,
                              fp + (half + fb) * terms, s, terms, nb, nn, cplx)
                    for h in range(2 if fb != f0 else 1):
                        # row f0 + h: input turned by e^(-i theta c), theta = 2 pi f / L0
                        fc = fp + (f0 + h) * terms + c
                        r0 = (f0 + h) * rr_n + rr
                        ra = fc[0]
                        rb = -fc[half * terms]
                        _rotate(xp + r0 * xrow, xr, items * cg, ra * pc - rb * ps,
                                ra * ps + rb * pc)
                        _row(level, xr, s + 4 * h * nn, s + (4 * h + 1) * nn,
                             yp + p * ys + r0 * yrow, items, cg, mg, acc)
                        if cplx and f0 + h > 0 and 2 * (f0 + h) != length:
                            r0 = (length - f0 - h) * rr_n + rr     # the mirror row
                            ra = fc[0]
                            rb = fc[half * terms]
                            _rotate(xp + r0 * xrow, xr, items * cg, ra * pc - rb * ps,
                                    ra * ps + rb * pc)
                            _row(level, xr, s + (4 * h + 2) * nn, s + (4 * h + 3) * nn,
                                 yp + p * ys + r0 * yrow, items, cg, mg, acc)
        free(acc)
    if err[0]:
        raise MemoryError("convt: no memory for the FFT contraction's per-thread scratch")


def fft_place2(const real[:, :, :, :, :, :, ::1] z,   # IN  (N0, N1, G, nc, T0, T1, Mg) frames
               real[:, :, :, :, ::1] y,               # OUT (nc, G, Mg, O0, O1) channels first
               int64_t offset0, int64_t step0, int64_t offset1, int64_t step1,
               int num_threads):
    """y[n, g, m, o0, o1] += z[a0, a1, g, n, t0, t1, m] for every tile (t0, t1) in order, a
    = o + offset - t * step within the frame: the tile frames of a 2-D call added into a
    channels-first output, the channels turned to the last place through a 16 x 16 block
    per thread (the adds read the frames' channel rows, each output is loaded and stored
    once). Each output row (n, g, o0) is made by one thread, its tiles added in the order
    above: the bits of adding the tiles one after another, for any ``num_threads``."""
    cdef int64_t n0_ = z.shape[0], n1_ = z.shape[1], groups = z.shape[2], nc = z.shape[3]
    cdef int64_t t0n = z.shape[4], t1n = z.shape[5], mg = z.shape[6]
    cdef int64_t o0n = y.shape[3], o1n = y.shape[4]
    cdef int64_t zs0 = z.strides[0] // sizeof(real), zs1 = z.strides[1] // sizeof(real)
    cdef int64_t zsg = z.strides[2] // sizeof(real), zsn = z.strides[3] // sizeof(real)
    cdef int64_t zst0 = z.strides[4] // sizeof(real), zst1 = z.strides[5] // sizeof(real)
    cdef int64_t task, n, g, o0, m0, b1, t0, t1, a0, lo, hi, o1, m, mb, ob
    cdef const real* zp = &z[0, 0, 0, 0, 0, 0, 0] if z.size else NULL
    cdef real* yp = &y[0, 0, 0, 0, 0] if y.size else NULL
    cdef const real* src
    cdef real* dst
    cdef real* acc = NULL
    cdef int err[1]
    cdef int* errp = err
    err[0] = 0
    if y.shape[0] != nc or y.shape[1] != groups or y.shape[2] != mg:
        raise RuntimeError("fft_place2: frames and output of other channels: this is a bug "
                           "in convt")
    if z.size == 0 or y.size == 0:
        return
    cdef bint ok = True
    with nogil, parallel(num_threads=num_threads):
        acc = <real*> malloc(16 * 16 * sizeof(real))
        ok = not (acc == NULL)
        if not ok:
            errp[0] = 1
        for task in prange(nc * groups * o0n, schedule="static"):
            if ok:   # every thread reaches the loop (OpenMP), one without scratch skips its work
                n = task // (groups * o0n)
                g = (task // o0n) % groups
                o0 = task % o0n
                dst = yp + ((n * groups + g) * mg * o0n + o0) * o1n
                for m0 in range(0, mg, 16):
                    mb = min(16, mg - m0)
                    for b1 in range(0, o1n, 16):
                        ob = min(16, o1n - b1)
                        for o1 in range(ob):       # acc[o1][m] = y[m][o1]
                            for m in range(mb):
                                acc[o1 * 16 + m] = dst[(m0 + m) * o0n * o1n + b1 + o1]
                        for t0 in range(t0n):
                            a0 = o0 + offset0 - t0 * step0
                            if a0 < 0 or a0 >= n0_:
                                continue
                            for t1 in range(t1n):
                                # o1 in the block whose frame position is in [0, N1)
                                lo = max(b1, t1 * step1 - offset1)
                                hi = min(b1 + ob, n1_ + t1 * step1 - offset1)
                                for o1 in range(lo, hi):
                                    src = (zp + a0 * zs0 + (o1 + offset1 - t1 * step1) * zs1
                                           + g * zsg + n * zsn + t0 * zst0 + t1 * zst1 + m0)
                                    for m in range(mb):
                                        acc[(o1 - b1) * 16 + m] += src[m]
                        for o1 in range(ob):
                            for m in range(mb):
                                dst[(m0 + m) * o0n * o1n + b1 + o1] = acc[o1 * 16 + m]
        free(acc)
    if err[0]:
        raise MemoryError("convt: no memory for the FFT placement's per-thread scratch")
