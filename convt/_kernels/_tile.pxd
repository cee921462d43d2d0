# The register tiles of the micro and Winograd variants (_micro.pyx, _wino.pyx; the algorithm
# in _micro.pyx's docstring): the rows' input pointers (or a Winograd product's input
# transforms), the sub-tiles' tap masks, and the micro-kernel calls over blocks of taps and
# channels. cdef inline in a .pxd, so that each module compiles its own copy: no call
# crosses modules.
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

from ._packkernel cimport CONVT_WSUM_MAX, _wsum
from ._types cimport real

cdef extern from *:
    """
    #define convt_ctz64(v) ((int64_t) __builtin_ctzll(v))
    """
    int64_t convt_ctz64(uint64_t v) nogil

cdef extern from "_ukernel.h" nogil:
    int CONVT_MR
    int CONVT_NR_F32
    int CONVT_NR_F64
    void convt_ukernel_f32(int isa, int64_t ntaps, int64_t kc, const float* const* a,
                           int64_t astride, int64_t aoff, const float* b, int64_t bstride,
                           float* c, int64_t ldc, int acc)
    void convt_ukernel_f64(int isa, int64_t ntaps, int64_t kc, const double* const* a,
                           int64_t astride, int64_t aoff, const double* b, int64_t bstride,
                           double* c, int64_t ldc, int acc)

cdef extern from "_bf16kernel.h" nogil:
    void convt_ukernel_bf16_rows(int mode, int rows, int64_t ntaps, int64_t kp,
                                 const float* const* a, int64_t astride, int64_t aoff,
                                 const float* b, int64_t bstride, float* const* cr,
                                 int64_t coff, int acc)
    int CONVT_BF16_AMX
    int CONVT_BF16_STREAM
    enum: CONVT_BF16_MR   # the bfloat16 kernels' rows: 1 to 2 * CONVT_BF16_MR a call

cdef extern from "_amxkernel.h" nogil:
    int CONVT_AMX_ROWS
    void convt_amx_begin()
    void convt_amx_end()
    void convt_amx_block(const float* const* ptr, const float* zero, int64_t nt, int64_t mpad,
                         int64_t kc, int64_t c0, const float* wph, int64_t T, int64_t t0,
                         int64_t Cg, int64_t G, int64_t NP, int64_t NR, float* t, int64_t ldc,
                         int first)

cdef extern from "_corners.h" nogil:
    void convt_corners_f32(int isa, const float* src, const int64_t* off, int n, int neg,
                           float* dst, int64_t C)
    void convt_corners_f64(int isa, const double* src, const int64_t* off, int n, int neg,
                           double* dst, int64_t C)

cdef enum:
    PHASE_COLS = 9     # phase table columns: Q0, Q1, Q2, c0, c1, c2, first tap, taps,
                       # packed-weight offset (convt._backends.direct.micro writes the same)
    _MAX_ROWS = 192    # most rows of a task (convt._backends.direct.micro.MAX_MB): the
                       # stack tables of _wino_build and _rows_outer (wino_conv and
                       # micro_conv refuse more)
    _BF16_TAPS = 64    # most taps of a bfloat16 block (micro's MAX_TB): _rows_outer's stack
    _BF16_KEYS = 16    # most masks grouped per block (the rows of others: _rows_outer's pool)
    _BF16_LONE = 4     # a mask's last rows, when fewer, join the others' (_rows_outer)


cdef inline void _ukernel(int isa, int64_t ntaps, int64_t kc, const real** a, int64_t astride,
                          int64_t aoff, const real* b, int64_t bstride, real* c, int64_t ldc,
                          int acc) noexcept nogil:
    if real is float:
        convt_ukernel_f32(isa, ntaps, kc, <const float* const*> a, astride, aoff, b, bstride,
                          c, ldc, acc)
    else:
        convt_ukernel_f64(isa, ntaps, kc, <const double* const*> a, astride, aoff, b,
                          bstride, c, ldc, acc)


cdef inline void _row_pos(int64_t r, const int64_t* ph, const int64_t* d,
                          int64_t* q) noexcept nogil:
    # row r of a phase -> (n, q0, q1, q2); rows run over (n, q0, q1, q2), or with d[18]
    # (batch innermost) over (q0, q1, q2, n)
    if d[18]:
        q[0] = r % d[0]
        r = r // d[0]
    q[3] = r % ph[2]
    q[2] = (r // ph[2]) % ph[1]
    q[1] = (r // (ph[2] * ph[1])) % ph[0]
    if not d[18]:
        q[0] = r // (ph[2] * ph[1] * ph[0])


cdef inline void _next_pos(const int64_t* ph, const int64_t* d, int64_t* q) noexcept nogil:
    # (n, q0, q1, q2) of the next row (no division: rows are walked in order)
    if d[18]:
        q[0] += 1
        if q[0] < d[0]:
            return
        q[0] = 0
    q[3] += 1
    if q[3] == ph[2]:
        q[3] = 0
        q[2] += 1
        if q[2] == ph[1]:
            q[2] = 0
            q[1] += 1
            if q[1] == ph[0]:
                q[1] = 0
                q[0] += 1


cdef inline int64_t _run_len(const int64_t* ph, const int64_t* d, const int64_t* q,
                             int64_t left) noexcept nogil:
    # rows from q along its line of the last axis, at most left (one: batch innermost, d[18])
    return 1 if d[18] else min(ph[2] - q[3], left)


cdef inline void _past_run(const int64_t* ph, const int64_t* d, int64_t* q,
                           int64_t run) noexcept nogil:
    q[3] += run - 1   # the run's last row, then the next (the carry into q1, q0, n)
    _next_pos(ph, d, q)


cdef inline void _pointers(const real* x, const real* zero, const int64_t* ph,
                           const int64_t* tap_e, int64_t t0, int64_t nt, int64_t r0, int64_t m,
                           int64_t mpad, const int64_t* d, const real** ptr) noexcept nogil:
    # ptr[t * mpad + i]: the input pixel row r0 + i reads for tap t0 + t of the phase, or zero.
    # Rows in (n, q0, q1, q2) order go by runs along a line of the last axis: per run and
    # tap, one bounds test of the first two axes and the run's range of i2 in the data, then
    # pointers C_in apart (docs/performance.md, "pointer tables by lines"); with the batch
    # innermost (d[18]), runs of one row.
    cdef int64_t I0 = d[1], I1 = d[2], I2 = d[3], C_in = d[11]
    cdef int64_t i = 0, t, i0, i1, i2, j, run, lo, hi
    cdef int64_t q[4]
    cdef const int64_t* e
    cdef const real* base
    cdef const real** dst
    _row_pos(r0, ph, d, q)
    while i < m:
        run = _run_len(ph, d, q, m - i)   # rows i..i+run: q2 = q[3]..
        for t in range(nt):
            e = tap_e + 3 * (ph[6] + t0 + t)
            i0 = q[1] + e[0]
            i1 = q[2] + e[1]
            i2 = q[3] + e[2]
            dst = ptr + t * mpad + i
            lo = hi = 0
            if 0 <= i0 < I0 and 0 <= i1 < I1:
                lo = min(run, max(<int64_t> 0, -i2))    # rows j < lo: i2 + j < 0
                hi = max(lo, min(run, I2 - i2))         # rows j >= hi: past I2
                base = x + (((q[0] * I0 + i0) * I1 + i1) * I2 + i2 + lo) * C_in
                for j in range(hi - lo):
                    dst[lo + j] = base + j * C_in
            for j in range(lo):
                dst[j] = zero
            for j in range(hi, run):
                dst[j] = zero
        i += run
        _past_run(ph, d, q, run)
    for t in range(nt):
        for i in range(m, mpad):
            ptr[t * mpad + i] = zero


cdef inline void _wino_build(int isa, const real* x, const real* zero, const int64_t* ph,
                             const int64_t* toff, const int64_t* tkind, int64_t t0, int64_t nt,
                             int64_t r0, int64_t m, int64_t mpad, const int64_t* d, real* v,
                             const real** ptr) noexcept nogil:
    # As _pointers, for a Winograd product (wino_conv): row r0 + i is the tile (n, j0, j1,
    # j2) and its tap t reads the pixel x + toff[tap] + n * d[22] + sum of m_a * j_a * d[19 + a]
    # (steps m_a in ph[3:6]) of the zero-haloed grid. A tap of kind 0 reads it in place (or
    # a copy: below); one of another kind reads its input transform, built here into v (row t * mpad + i, C_in
    # values): the signed sum of the pixel's corners along the kind's axes (_corners.h's
    # convt_corners), 2 bits per axis a at bit 2a: 1 x[u] - x[u+1], 2 x[u] - x[u+2], 3 x[u] +
    # x[u+1] (convt._backends.direct.winograd's PLAIN, DIFF, DIFF2, SUM). The planner keeps every read inside
    # the grid. The rows' pixels first, then tap by tap (a tap's corners made once for all its
    # rows).
    cdef int64_t C = d[11], i, t, tap, kind, a, j, n, at, code
    # plain taps read x in place, unless consecutive tiles along the last axis are a multiple
    # of 4 KiB apart (hifigan_up1: 2 pixels of 512 channels): their rows would then share
    # one L1 set (64 sets of 64 bytes) and the register tile's 12 rows evict each other, so
    # they are copied into v like the transforms (hifigan_up1: docs/performance.md)
    cdef bint copy = (ph[5] * d[21] * <int64_t> sizeof(real)) % 4096 == 0
    cdef int neg
    cdef int64_t q[4]
    cdef int64_t off[8]
    cdef int64_t base[_MAX_ROWS]
    cdef real* dst
    _row_pos(r0, ph, d, q)
    for i in range(m):
        if i:
            _next_pos(ph, d, q)
        base[i] = (q[0] * d[22] + ph[3] * q[1] * d[19] + ph[4] * q[2] * d[20]
                   + ph[5] * q[3] * d[21])
    for t in range(nt):
        tap = ph[6] + t0 + t
        kind = tkind[tap]
        at = toff[tap]
        for i in range(m, mpad):
            ptr[t * mpad + i] = zero
        if kind == 0:
            if copy:
                for i in range(m):
                    dst = v + (t * mpad + i) * C
                    memcpy(dst, x + at + base[i], C * sizeof(real))
                    ptr[t * mpad + i] = dst
                continue
            for i in range(m):
                ptr[t * mpad + i] = x + at + base[i]
            continue
        # corner j's offset: bit b of j steps along the kind's b-th axis (two steps for a
        # difference two apart); bit b of neg: that axis subtracts
        off[0] = 0
        n = 1
        neg = 0
        for a in range(3):
            code = kind >> (2 * a) & 3
            if code:
                for j in range(n):
                    off[n + j] = off[j] + (2 if code == 2 else 1) * d[19 + a]
                if code != 3:
                    neg |= <int> n
                n *= 2
        for i in range(m):
            dst = v + (t * mpad + i) * C
            if real is float:
                convt_corners_f32(isa, x + at + base[i], off, <int> n, neg, dst, C)
            else:
                convt_corners_f64(isa, x + at + base[i], off, <int> n, neg, dst, C)
            ptr[t * mpad + i] = dst


cdef inline void _tap_masks(const real* zero, const real** ptr, int64_t nt, int64_t mpad,
                            uint64_t* masks) noexcept nogil:
    # masks[ir]: bit k set when tap k of the block reads data for a row of sub-tile ir
    cdef int64_t ir, k, i
    cdef uint64_t mask
    for ir in range(mpad // CONVT_MR):
        mask = 0
        for k in range(nt):
            for i in range(CONVT_MR):
                if ptr[k * mpad + ir * CONVT_MR + i] != zero:
                    mask |= (<uint64_t> 1) << k
                    break
        masks[ir] = mask


cdef inline void _masked_ukernel(int isa, uint64_t mask, int64_t nt, int64_t kc,
                                 const real** a, int64_t astride, int64_t aoff, const real* b,
                                 int64_t bstride, real* c, int64_t ldc,
                                 bint first) noexcept nogil:
    # One sub-tile over the taps of a block set in mask (runs of consecutive taps, one kernel
    # call each); first: the tile's first block and chunk (initialise, not accumulate).
    cdef uint64_t full = ((<uint64_t> 1) << nt) - 1 if nt < 64 else ~(<uint64_t> 0)
    cdef int64_t ts, run
    cdef int acc = not first
    if mask == full:
        _ukernel(isa, nt, kc, a, astride, aoff, b, bstride, c, ldc, acc)
        return
    if mask == 0 and first:   # no data at all: the sub-tile is zeros
        _ukernel(isa, 0, kc, a, astride, aoff, b, bstride, c, ldc, 0)
    while mask:
        ts = convt_ctz64(mask)
        run = convt_ctz64(~(mask >> ts))
        _ukernel(isa, run, kc, a + ts * astride, astride, aoff, b + ts * bstride, bstride, c,
                 ldc, acc)
        acc = 1
        mask &= ~((((<uint64_t> 1) << run) - 1) << ts)


cdef inline void _bf16_chunk(int isa, const int64_t* rows, int64_t r, const uint64_t* rm,
                             int64_t nt, int64_t kc, const real** ptr, int64_t mpad,
                             int64_t c0, const real* wph, int64_t T, int64_t t0, int64_t Cg,
                             int64_t G, int64_t NP, int64_t NR, int64_t bstride, real* t,
                             int64_t ldc, bint first, int bf16) noexcept nogil:
    # _rows_outer's kernel calls for the r (<= 2 * CONVT_BF16_MR) tile rows rows[0..r): the
    # taps any of them reads data for (runs of consecutive taps, one call each), per group
    # and panel
    cdef const float* ap[_BF16_TAPS * 2 * CONVT_BF16_MR]
    cdef float* cp[2 * CONVT_BF16_MR]
    cdef uint64_t u = 0, mask
    cdef int64_t i, k, g, jp, ts, run
    cdef int acc
    cdef const float* b
    if real is float:
        for i in range(r):
            u |= rm[rows[i]]
            cp[i] = t + rows[i] * ldc
            for k in range(nt):
                ap[k * r + i] = ptr[k * mpad + rows[i]]
        for g in range(G):
            for jp in range(NP):
                b = wph + (((g * NP + jp) * T + t0) * Cg + c0) * NR
                mask = u
                acc = not first
                if mask == 0 and first:   # no data at all: the rows are zeros
                    convt_ukernel_bf16_rows(bf16, <int> r, 0, kc, ap, r, 0, b, bstride, cp,
                                            (g * NP + jp) * NR, 0)
                while mask:
                    # (all 64 taps: one run; ctz of 0 and a shift by 64 are undefined)
                    ts = convt_ctz64(mask)
                    run = convt_ctz64(~(mask >> ts)) if ~mask else 64
                    convt_ukernel_bf16_rows(bf16, <int> r, run, kc, ap + ts * r, r,
                                            g * Cg + c0, b + ts * bstride, bstride, cp,
                                            (g * NP + jp) * NR, acc)
                    acc = 1
                    mask = mask & ~((((<uint64_t> 1) << run) - 1) << ts) if run < 64 else 0


cdef inline void _rows_outer(int isa, const real* zero, int64_t nt, int64_t m, int64_t CC,
                             const real** ptr, int64_t mpad, const real* wph,
                             int64_t T, int64_t t0, int64_t Cg, int64_t G, int64_t NP,
                             int64_t NR, real* t, int64_t ldc, bint first,
                             int bf16) noexcept nogil:
    # _tile's block of taps for the bfloat16 tiles, its chunks of CC pairs (the row groups
    # made once for all of them), rows outer and the panels inner: a group of up
    # to 2 * MR rows keeps its input rows (kc pairs each) in L1 across every panel while the
    # panels stream from L2 (faster than panels outer on unet_up2x2: docs/performance.md,
    # "Figures moved out of code comments (2026-11-28, session 10)"). The rows are
    # grouped by the taps they read data for (their mask; all taps first), each group run
    # in groups of up to 2 * MR rows through a kernel of exactly that many rows
    # (_bf16kernel.h), so a border row no longer runs the taps that fall off the data for
    # the rows it shares a fixed tile with (dcgan_g3: one row in 16 along each axis, a small
    # share of its multiply-adds). Each row still sums its own data taps in the same order (the taps
    # skipped add exact zeros), so the bits do not change, up to the sign of a zero: a row
    # whose sum is -0 (vdpbf16ps flushes a tiny negative to -0) stays -0 in its own group
    # but becomes +0 when, pooled, a tap it skips adds a +0 (zero times a positive weight);
    # the bias addition erases the difference unless the bias is -0 too. A mask's last
    # rows, when fewer than _BF16_LONE (a kernel that short runs below its rate), join those
    # of the other masks, run last with the taps of any of them.
    cdef int64_t perm[_MAX_ROWS]
    cdef int64_t pool[_MAX_ROWS]
    cdef uint64_t rm[_MAX_ROWS]
    cdef unsigned char bid[_MAX_ROWS]
    cdef uint64_t key[_BF16_KEYS]
    cdef int64_t at[_BF16_KEYS + 1]
    cdef int64_t cut[_BF16_KEYS]
    cdef uint64_t full = ((<uint64_t> 1) << nt) - 1 if nt < 64 else ~(<uint64_t> 0)
    cdef uint64_t mask
    cdef int64_t R = 2 * CONVT_BF16_MR if isa >= 2 else CONVT_BF16_MR
    cdef int64_t i, k, b, nb = 1, npool = 0, left, c0, kc, r
    # each row's mask and group (full first; past _BF16_KEYS masks, the pool), counted
    key[0] = full
    for b in range(_BF16_KEYS + 1):
        at[b] = 0
    for i in range(m):
        mask = 0
        for k in range(nt):
            mask |= (<uint64_t> (ptr[k * mpad + i] != zero)) << k
        rm[i] = mask
        b = 0
        while b < nb and key[b] != mask:
            b += 1
        if b == nb and nb < _BF16_KEYS:
            key[nb] = mask
            nb += 1
        bid[i] = <unsigned char> b if b < nb else _BF16_KEYS
        at[bid[i]] += 1
    # the rows in group order: at[b], where group b starts
    k = 0
    for b in range(_BF16_KEYS + 1):
        left = at[b]
        at[b] = k
        k += left
    for i in range(m):
        perm[at[bid[i]]] = i
        at[bid[i]] += 1
    # at[b] is now where group b ends; its rows run in groups of R up to cut[b], the last
    # few (fewer than _BF16_LONE) pooled
    k = 0
    for b in range(nb):
        i = k
        left = at[b] - k
        while left >= _BF16_LONE:
            i += min(R, left)
            left -= min(R, left)
        cut[b] = i
        for i in range(i, at[b]):
            pool[npool] = perm[i]
            npool += 1
        k = at[b]
    for i in range(at[nb - 1], m):   # the rows past _BF16_KEYS masks
        pool[npool] = perm[i]
        npool += 1
    c0 = 0
    while c0 < Cg:
        kc = min(CC, Cg - c0)
        k = 0
        for b in range(nb):
            i = k
            while i < cut[b]:
                r = min(R, cut[b] - i)
                _bf16_chunk(isa, perm + i, r, rm, nt, kc, ptr, mpad, c0, wph, T, t0, Cg, G,
                            NP, NR, Cg * NR, t, ldc, first, bf16)
                i += r
            k = at[b]
        i = 0
        while i < npool:
            r = min(R, npool - i)
            _bf16_chunk(isa, pool + i, r, rm, nt, kc, ptr, mpad, c0, wph, T, t0, Cg, G, NP,
                        NR, Cg * NR, t, ldc, first, bf16)
            i += r
        first = False
        c0 += kc


cdef inline void _tile_amx(const float* x, const float* zero, const float* wp,
                           const int64_t* ph, const int64_t* tap_e, int64_t r0, int64_t m,
                           const int64_t* d, float* t, const float** ptr) noexcept nogil:
    # _tile on the AMX tiles (_amxkernel.h; bf16 with CONVT_BF16_AMX): blocks of TB taps x CC
    # pairs as _tile's, each over whole 32-row blocks (the rows past m read zeros; the tile
    # memory and pointer table hold MB >= mpad rows: convt._backends.direct.micro_amx), with
    # the thread's tile state configured for the call and released after it.
    cdef int64_t G = d[7], Cg = d[8], NP = d[10], CC = d[12], TB = d[13], ldc = d[15]
    cdef int64_t NR = d[17], T = ph[7]
    cdef int64_t mpad = (m + CONVT_AMX_ROWS - 1) // CONVT_AMX_ROWS * CONVT_AMX_ROWS
    cdef int64_t t0 = 0, nt, c0, kc
    cdef bint first = True
    convt_amx_begin()
    while t0 < T:
        nt = min(TB, T - t0)
        _pointers(x, zero, ph, tap_e, t0, nt, r0, m, mpad, d, ptr)
        c0 = 0
        while c0 < Cg:
            kc = min(CC, Cg - c0)
            convt_amx_block(ptr, zero, nt, mpad, kc, c0, wp + ph[8], T, t0, Cg, G, NP, NR, t,
                            ldc, first)
            first = False
            c0 += kc
        t0 += nt
    convt_amx_end()


cdef inline void _tile(int isa, const real* x, const real* zero, const real* wp,
                       const int64_t* ph, const int64_t* tap_e, int64_t r0, int64_t m,
                       const int64_t* d, real* t, const real** ptr, uint64_t* masks,
                       const int64_t* tkind=NULL, real* v=NULL, const int64_t* ck=NULL,
                       const real* cf=NULL, int64_t rstride=0, real* wb=NULL,
                       int bf16=0) noexcept nogil:
    # The tile of rows r0..r0+m of the phase ph (which has taps): blocks of TB taps (pointers
    # looked up once per block), chunks of CC channels, then per group and panel the MR-row
    # sub-tiles. A sub-tile runs only the taps that read data for at least one of its rows
    # (masks: a bit per tap of the block), in runs of consecutive taps: the taps of a phase's
    # border rows that fall off the data are skipped when the sub-tile's rows share them.
    # ck != NULL (wino_conv's late sums): wp holds the kernel taps, tap k's lines at
    # wp + k * rstride laid out [G][NP][Cg][NR] (convt._backends.direct.winograd.wino_taps), and each block's
    # panel of product weights is summed here (convt_wsum, as pack_wino sums them: the same
    # bits) into wb, once per chunk, group and panel, for all the panel's sub-tiles.
    # bf16 (_rows_outer, or _tile_amx with CONVT_BF16_AMX): x, zero and wp hold pairs of
    # bfloat16 channels in their 32-bit slots, d's channel counts count pairs, bf16 holds
    # _bf16kernel.h's mode bits (convt._backends.direct.micro_bf16).
    cdef int64_t G = d[7], Cg = d[8], NP = d[10], CC = d[12], TB = d[13], ldc = d[15]
    cdef int64_t NR = d[17], T = ph[7]
    cdef int64_t mpad = (m + CONVT_MR - 1) // CONVT_MR * CONVT_MR
    cdef int64_t t0, nt, c0, kc, g, jp, ir, u, bstride, nsub = mpad // CONVT_MR
    cdef bint two
    cdef const real* panel
    cdef bint first = True
    if real is float and bf16 & CONVT_BF16_AMX:
        _tile_amx(x, zero, wp, ph, tap_e, r0, m, d, t, ptr)
        return
    t0 = 0
    while t0 < T:
        nt = min(TB, T - t0)
        if tkind != NULL:   # a Winograd product (wino_conv): tap_e holds flat offsets
            _wino_build(isa, x, zero, ph, tap_e, tkind, t0, nt, r0, m, mpad, d, v, ptr)
        else:
            _pointers(x, zero, ph, tap_e, t0, nt, r0, m, mpad, d, ptr)
        if bf16:   # the bfloat16 rows make their own masks, once per block
            _rows_outer(isa, zero, nt, m, CC, ptr, mpad, wp + ph[8], T, t0, Cg, G, NP, NR, t,
                        ldc, first, bf16)
            first = False
            t0 += nt
            continue
        _tap_masks(zero, ptr, nt, mpad, masks)
        c0 = 0
        while c0 < Cg:
            kc = min(CC, Cg - c0)
            # between a panel's taps: the panel's [tap][c][NR] (wb: kc channels of each)
            bstride = kc * NR if ck != NULL else Cg * NR
            for g in range(G):
                for jp in range(NP):
                    if ck != NULL:
                        for u in range(nt):
                            _wsum(isa, wp + ((g * NP + jp) * Cg + c0) * NR, rstride,
                                  ck + CONVT_WSUM_MAX * (ph[6] + t0 + u),
                                  cf + CONVT_WSUM_MAX * (ph[6] + t0 + u),
                                  wb + u * bstride, NR, kc, NR)
                        panel = wb
                    else:   # packed weights of the phase: [g][jp][tap][c][NR]
                        panel = wp + ph[8] + (((g * NP + jp) * T + t0) * Cg + c0) * NR
                    # AVX-512 (isa >= 2): pairs of adjacent sub-tiles with the same taps
                    # run as one 2*MR-row tile (_ukernel.h: the same bits), others alone
                    ir = 0
                    while ir < nsub:
                        two = isa >= 2 and ir + 1 < nsub and masks[ir] == masks[ir + 1]
                        _masked_ukernel(isa if two else min(isa, 1), masks[ir], nt, kc,
                                        ptr + ir * CONVT_MR, mpad, g * Cg + c0, panel,
                                        bstride, t + ir * CONVT_MR * ldc + (g * NP + jp) * NR,
                                        ldc, first)
                        ir += 2 if two else 1
            first = False
            c0 += kc
        t0 += nt
