#!/usr/bin/env python3
"""Pure-Python transcription of kernels/ffpa_bwd_sm90.cuh's data movement for one block (one key
tile of 32 keys, every query tile of a GQA group), checked exactly on small integers.

What is transcribed from the kernel (each formula as written there):
  - shared-memory placement: the 1024-byte align-up, the K/V load and stage()'s decode of a Q/dO
    granule (group g, half h, panel pp, row, column) with tile_off(); the row tables (two
    parities); the causal tile skip (next_tile);
  - the start address and descriptor of every wgmma: S and dP (K-major, m64n32k16), dV^T and dK^T
    (A = dO^T / Q^T MN-major, B = P^T / dS^T K-major, m64n32k16), dQ chunks (A = dS^T MN-major,
    B = K MN-major, m64n64k16);
  - the exchange (float4 slots [w][n8][thread], which accumulator half is handed over and which
    is kept), the (row, key) of each P/dS value, the masks, the transposed 2-byte P^T/dS^T stores;
  - the dQ reduction (lane-pair swap, row, column, dq_accum offset) and the dK/dV epilogue;
  - pair = 1: the dQ chunk sum of the two blocks of a cluster through each other's exchange
    buffer and the reduction of each block's h = rank rows (pair_reduce_check, on random
    fragments; the chunk contents themselves are the ones checked above);
  - the order of the kernel's barrier intervals (within one interval every store is applied
    before any read, so a read of something overwritten in the same interval shows; with
    split = 1 warpgroup 0 runs its whole phase 2, staging its half of the next tile, before
    warpgroup 1's: the furthest its barriers let it run ahead), and the cp.async group
    accounting of phase 1 (cp_async_wait_upto).

The hardware model (descriptor decoding, K-major and MN-major 128-byte swizzle layouts, the
m64nNk16 accumulator fragment) is imported from tools/ffpa_fwd_sm90_sim.py, whose kernel passed
every GPU test on the H200 first time; A MN-major (imm-trans-a) is read with the same canonical
MN-major layout as B there (CUTLASS uses one set of GMMA layout atoms for A and B).

Exact integers stand in for the arithmetic: P = ((S + L) % 5) + 1 with L the row's lse proxy
(0 for a row without gradient, as exp2(x - inf)), delta an integer per row, dS = P (dP - delta);
with dropout a hash of the stream position stands in for Philox and 2 for 1 / (1 - p):
Pd = P keep 2 (stored and used for dV), dS = Pd dP - P delta.
The reference computes S, dP, masks, P, dS, dV, dK and dQ directly from the problem. Then every
mutation in MUTATIONS (one wrong formula each) must make a check fail.
Run: python3 tools/ffpa_bwd_sm90_sim.py
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffpa_fwd_sm90_sim import acc_pos, hw_k_major, hw_mn, matmul, transpose, zeros  # noqa: E402

BR, BC, NT = 64, 32, 256
POISON = 77777
MUT = set()


def mut(name):
    return name in MUT


# ---------------------------------------------------------------- kernel formulas (transcribed)


def tile_off(row, col, rows):
    g = (col >> 3) & 7
    x = g if mut("no_xor") else g ^ (row & 7)
    return (((col >> 6) * rows + row) << 7) + (x << 4) + ((col & 7) << 1)


def make_desc(addr, lbo, sbo):
    return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (1 << 62)


def desc_k(addr):
    return make_desc(addr, 16, 512 if mut("sbo_512") else 1024)


def desc_mn(addr):
    return make_desc(addr, 1024, 1024)


class Cfg:
    def __init__(self, D, PPG=1, SPLIT=0):
        self.D, self.PPG, self.SPLIT = D, PPG, SPLIT
        self.DP = (D + 127) // 128 * 128
        self.DH = self.DP // 2
        self.NP = self.DH // 64
        assert self.NP % PPG == 0
        self.NG = self.NP // PPG
        self.KV_PANEL = BC * 128
        self.Q_PANEL = BR * 128
        self.KV_BYTES = BC * self.DP * 2
        self.Q_BYTES = BR * self.DP * 2
        self.PT_BYTES = BC * BR * 2
        self.PT_SETS = 2 if SPLIT else 1
        self.X_BYTES = 2 * 4 * 128 * 16
        self.ROW_BYTES = BR * 8
        self.ROW_TABLES = 4 if SPLIT else 2
        self.SMEM = (1024 + 2 * self.KV_BYTES + 2 * self.Q_BYTES + self.PT_SETS * 2 * self.PT_BYTES
                     + self.X_BYTES + self.ROW_TABLES * self.ROW_BYTES)
        self.LT = 128 if SPLIT else NT
        self.LHALVES = 1 if SPLIT else 2
        self.LW = self.DH if SPLIT else self.DP


class Prob:
    """One kv head of batch 0: group q heads of Nq rows, Nkv keys; causal 0, 1 (bottom-right),
    2 (top-left)."""

    def __init__(self, group, Nq, Nkv, causal, rng, D, dropout=False):
        self.group, self.Nq, self.Nkv, self.causal = group, Nq, Nkv, causal
        self.dropout, self.offset = dropout, 12345
        self.Hq = group
        rnd = lambda: rng.randint(-2, 2)  # noqa: E731
        self.q = [[[rnd() for _ in range(D)] for _ in range(Nq)] for _ in range(group)]
        self.do = [[[rnd() for _ in range(D)] for _ in range(Nq)] for _ in range(group)]
        self.k = [[rnd() for _ in range(D)] for _ in range(Nkv)]
        self.v = [[rnd() for _ in range(D)] for _ in range(Nkv)]
        diag = Nkv - Nq if causal == 1 else 0
        # lse proxy per row; None: the row sees no key (lse = -inf in the forward)
        self.L = [[None if causal and r + diag < 0 else rng.randint(0, 4) for r in range(Nq)]
                  for _ in range(group)]
        self.delta = [[rng.randint(-3, 3) for _ in range(Nq)] for _ in range(group)]


def pfun(s, l):
    return 0 if l is None else ((s + l) % 5) + 1


def keep(g):
    """Stands in for the Philox decision of stream position g (dropout2 / ffpa_dropout_keep)."""
    return (g * 2654435761 >> 7) % 3 != 0


DSCALE = 2  # stands in for 1 / (1 - p)


def run_block(cfg, pr, j, raw_base):
    """Runs key tile j through the transcribed kernel; returns (dk, dv as {(key, d): value},
    dq_accum {(lrow, d): value}, errors)."""
    D, DP, DH, NP, NG, PPG = cfg.D, cfg.DP, cfg.DH, cfg.NP, cfg.NG, cfg.PPG
    errors = []
    smem = [POISON] * ((raw_base + cfg.SMEM) // 2 + 8)
    raw_end = raw_base + cfg.SMEM

    def st(addr, val):
        assert raw_base <= addr < raw_end, ("store out of shared memory", addr)
        smem[addr // 2] = val

    sK = raw_base if mut("no_align") else (raw_base + 1023) & ~1023
    sV = sK + cfg.KV_BYTES
    sQ = sV + cfg.KV_BYTES
    sO = sQ + cfg.Q_BYTES
    sPt0 = sO + cfg.Q_BYTES
    rows_base = sPt0 + cfg.PT_SETS * 2 * cfg.PT_BYTES + cfg.X_BYTES  # tables: Python lists below
    assert rows_base + cfg.ROW_TABLES * cfg.ROW_BYTES <= raw_end
    SPLIT, LT, LW = cfg.SPLIT, cfg.LT, cfg.LW
    loaders = [(wg, t128) for wg in range(2) for t128 in range(128)] if SPLIT else \
        [(tid >> 7, tid) for tid in range(NT)]  # (warpgroup, lt)

    n0 = j * BC
    rows_total = pr.group * pr.Nq
    diag = pr.Nkv - pr.Nq if pr.causal == 1 else 0
    ntile = (rows_total + BR - 1) // BR

    kv = [(idx, (wg * DH if SPLIT else 0)) for wg, lt in loaders
          for idx in range(lt, BC * LW // 8, LT)]
    for idx, lc0 in kv:  # K, V resident
        row, col = idx // (LW // 8), lc0 + (idx % (LW // 8)) * 8
        key = n0 + row
        ok = key < pr.Nkv and col < D
        off = tile_off(row, col, BR if mut("kv_rows_br") else BC)
        for e in range(8):
            st(sK + off + 2 * e, pr.k[key][col + e] if ok else 0)
            st(sV + off + 2 * e, pr.v[key][col + e] if ok else 0)

    def next_tile(t):
        while pr.causal and t < ntile:
            m0 = t * BR
            i_hi = min(m0 + BR, rows_total) - 1
            r_hi = pr.Nq - 1 if m0 // pr.Nq != i_hi // pr.Nq else i_hi % pr.Nq
            if r_hi + diag >= n0 + (1 if mut("skip_off_by_one") else 0):
                break
            t += 1
        return t

    tables = {}  # (warpgroup copy, parity) -> [(lse proxy, delta)] of the 64 rows

    def stage(t, par, wgs):
        """Row table and Q/dO groups of tile t, by the loading threads of warpgroups wgs."""
        m0 = t * BR
        for wg, lt in loaders:
            if wg not in wgs:
                continue
            if lt < BR:
                i = m0 + lt
                l, dl = None, 0
                if i < rows_total:
                    l, dl = pr.L[i // pr.Nq][i % pr.Nq], pr.delta[i // pr.Nq][i % pr.Nq]
                tables.setdefault(((wg if SPLIT else 0), par), [None] * BR)[lt] = (l, dl)
        rpt = BR * 8 // LT  # rows of a loading thread, the same in every panel
        for g in range(NG):
            for q in range(cfg.LHALVES * PPG):
                for j in range(rpt):
                    for wg, lt in loaders:
                        if wg not in wgs:
                            continue
                        h, pp = (wg if SPLIT else q // PPG), q % PPG
                        if SPLIT and mut("split_stage_other_half"):
                            h = 1 - wg
                        if mut("stage_h_pp_swapped") and PPG > 1:
                            h, pp = pp % 2, h
                        row = (lt >> 3) + j * (LT // 8)
                        col = h * DH + (g * PPG + pp) * 64 + (lt & 7) * 8
                        i = m0 + row
                        ok = i < rows_total and col < D
                        off = tile_off(row, col, BR)
                        for e in range(8):
                            st(sQ + off + 2 * e, pr.q[i // pr.Nq][i % pr.Nq][col + e] if ok else 0)
                            st(sO + off + 2 * e, pr.do[i // pr.Nq][i % pr.Nq][col + e] if ok else 0)

    dv = [[[[0] * 16 for _ in range(128)] for _ in range(NP)] for _ in range(2)]
    dk = [[[[0] * 16 for _ in range(128)] for _ in range(NP)] for _ in range(2)]
    dq_accum = {}

    def wgmma(acc, A, B, nregs):
        C = matmul(A, B)
        for t in range(128):
            for r in range(nregs):
                row, col = acc_pos(t, r)
                acc[t][r] += C[row][col]

    t, par = next_tile(0), 0
    if t < ntile:
        stage(t, 0, (0, 1))
    while t < ntile:
        tn = next_tile(t + 1)
        m0 = t * BR
        tabs = [tables[((wg if SPLIT else 0), par)] for wg in range(2)]
        sset = par if SPLIT else 0
        sPt = sPt0 + sset * 2 * cfg.PT_BYTES
        sSt = sPt + cfg.PT_BYTES

        def row_of(row):
            i = m0 + row
            return (i % pr.Nq if i < rows_total else -1), i // pr.Nq
        # phase 1
        s = [[[0] * 16 for _ in range(128)] for _ in range(2)]
        dp = [[[0] * 16 for _ in range(128)] for _ in range(2)]
        for g in range(NG):
            for wg in range(2):
                pn = (0 if mut("phase1_no_half") else wg * NP) + g * PPG
                sq, so = sQ + pn * cfg.Q_PANEL, sO + pn * cfg.Q_PANEL
                sk, sv = sK + pn * cfg.KV_PANEL, sV + pn * cfg.KV_PANEL
                for pp in range(PPG):
                    for kk in range(4):
                        step = 16 if mut("kk_16") else 32
                        for acc, a, b in ((s, sq, sk), (dp, so, sv)):
                            A = hw_k_major(smem, desc_k(a + pp * cfg.Q_PANEL + kk * step), 64)
                            Bt = hw_k_major(smem, desc_k(b + pp * cfg.KV_PANEL + kk * step), 32)
                            wgmma(acc[wg], A, transpose(Bt), 16)
        # exchange: slot (w * 4 + n) * 128 + t128 holds the h = 1 - w partials of S and dP
        xbuf = {}
        for wg in range(2):
            for t128 in range(128):
                for n in range(4):
                    sw = wg if mut("exchange_wrong_half") else 1 - wg
                    xbuf[(wg * 4 + n) * 128 + t128] = (
                        s[wg][t128][n * 4 + 2 * sw], s[wg][t128][n * 4 + 2 * sw + 1],
                        dp[wg][t128][n * 4 + 2 * sw], dp[wg][t128][n * 4 + 2 * sw + 1])
        # P, dS of the rows of h = w, stored transposed
        for wg in range(2):
            for t128 in range(128):
                lane, wq = t128 % 32, t128 // 32
                other = wg if mut("exchange_self") else 1 - wg
                sm, dm = [[0, 0] for _ in range(4)], [[0, 0] for _ in range(4)]
                for n in range(4):
                    x = xbuf[(other * 4 + n) * 128 + t128]
                    for e in range(2):
                        sm[n][e] = s[wg][t128][n * 4 + 2 * wg + e] + x[e]
                        dm[n][e] = dp[wg][t128][n * 4 + 2 * wg + e] + x[2 + e]
                row = wq * 16 + (lane >> 2) + wg * 8
                l, dl = tabs[wg][row]
                r, hq_row = row_of(row)
                key0 = n0 + (lane & 3) * 2
                causal_lim = r + diag - key0
                kv_lim = pr.Nkv - key0
                erow = ((0 * pr.Hq + (0 if mut("dropout_no_hq") else hq_row)) * pr.Nq +
                        max(r, 0)) * pr.Nkv + key0
                kbits = 0  # keep bits first: bit 2n + e
                for n in range(4):
                    g = pr.offset + erow + (n * 4 if mut("dropout_n4") else n * 8)
                    kbits |= (keep(g) << (2 * n)) | (keep(g + 1) << (2 * n + 1))
                for n in range(4):
                    for e in range(2):
                        kof = n * 8 + e
                        if mut("causal_ge"):
                            cm = kof >= causal_lim
                        else:
                            cm = kof > causal_lim
                        masked = kof >= kv_lim or (pr.causal and cm)
                        p_ = 0 if masked else pfun(sm[n][e], l)
                        if pr.dropout:
                            pd = p_ * DSCALE if kbits >> (2 * n + e) & 1 else 0
                            ds = pd * (dm[n][e] - dl) if mut("dropout_ds") else \
                                pd * dm[n][e] - p_ * dl
                            p_ = pd  # Pd^T is what the kernel stores
                        elif mut("ds_formula"):
                            ds = p_ * dm[n][e] - dl
                        else:
                            ds = p_ * (dm[n][e] - dl)
                        kl = n * 8 + (lane & 3) * 2 + e
                        off = tile_off(row, kl, BR) if mut("pt_untransposed") else \
                            tile_off(kl, row, BC)
                        st(sPt + off, p_)
                        st(sSt + off, ds)

        # dQ chunk c of warpgroup wg: 64 x 64 accumulators of the 128 threads
        def dq_chunk(wg, c):
            acc = [[0] * 32 for _ in range(128)]
            kp = sK + ((0 if mut("dq_no_half") else wg * NP) + c) * cfg.KV_PANEL
            for ks in range(2):
                aoff = 0 if mut("dq_a_no_step") else ks * 16 * 128
                A = transpose(hw_mn(smem, desc_mn(sSt + aoff), 64))
                B = hw_mn(smem, desc_mn(kp + ks * 16 * 128), 64)
                wgmma(acc, A, B, 32)
            return acc

        def dq_reduce(wg, c, acc):
            for t128 in range(128):
                lane, wq = t128 % 32, t128 // 32
                odd = lane & 1
                if mut("dq_swap_rows"):
                    odd ^= 1
                partner = t128 ^ 1
                row = wq * 16 + (lane >> 2) + (8 if odd else 0)
                r, hq = row_of(row)
                lrow = hq * pr.Nq + r
                for n in range(8):
                    pd = acc[partner]
                    s0 = pd[n * 4 + 0] if (lane ^ 1) & 1 else pd[n * 4 + 2]
                    s1 = pd[n * 4 + 1] if (lane ^ 1) & 1 else pd[n * 4 + 3]
                    col = wg * DH + c * 64 + n * 8 + (lane & 2) * 2
                    if r >= 0 and col < D:
                        me = acc[t128]
                        v = (s0, s1, me[n * 4 + 2], me[n * 4 + 3]) if lane & 1 else \
                            (me[n * 4 + 0], me[n * 4 + 1], s0, s1)
                        if (lrow * D + col) % 4:
                            errors.append(("red.v4 misaligned", lrow, col))
                        for i in range(4):
                            dq_accum[(lrow, col + i)] = dq_accum.get((lrow, col + i), 0) + v[i]

        def phase2a(wg):  # dQ chunk 0, dV, dK, reduce chunk 0
            acc0 = dq_chunk(wg, 0)
            so, sq = sO + wg * NP * cfg.Q_PANEL, sQ + wg * NP * cfg.Q_PANEL
            for c in range(NP):
                for ks in range(4):
                    astep = 8 * 128 if mut("dvdk_a_step_8rows") else 16 * 128
                    for acc, a, b in ((dv, so, sPt), (dk, sq, sSt)):
                        A = transpose(hw_mn(smem, desc_mn(a + c * cfg.Q_PANEL + ks * astep), 64))
                        B = transpose(hw_k_major(smem, desc_k(b + ks * 32), 32))
                        wgmma(acc[wg][c], A, B, 16)
            dq_reduce(wg, 0, acc0)

        def phase2b(wg):  # dQ chunks 1..NP-1
            for c in range(1, NP):
                dq_reduce(wg, c, dq_chunk(wg, c))

        npar = par if mut("stage_same_parity") else par ^ 1
        if SPLIT:
            # Warpgroup 0 runs ahead as far as its barriers let it: its whole phase 2, with its
            # half of the next tile staged, before warpgroup 1's.
            for wg in range(2):
                phase2a(wg)
                if tn < ntile:
                    stage(tn, npar, (wg,))
                phase2b(wg)
        else:
            for wg in range(2):
                phase2a(wg)
            # interval 3: the next tile's stage (stores first), then dQ chunks 1..NP-1
            if tn < ntile:
                stage(tn, npar, (0, 1))
            for wg in range(2):
                phase2b(wg)
        t, par = tn, par ^ 1

    # epilogue
    dk_out, dv_out = {}, {}
    for wg in range(2):
        for t128 in range(128):
            lane, wq = t128 % 32, t128 // 32
            key0 = n0 + (lane & 3) * 2
            for c in range(NP):
                for h in range(2):
                    col = wg * DH + c * 64 + wq * 16 + (lane >> 2) + h * 8
                    if col >= D:
                        continue
                    for n in range(4):
                        for e in range(2):
                            key = key0 + n * 8 + e
                            if mut("epi_key_col"):
                                key = key0 + n * 8 + h
                            if key >= pr.Nkv:
                                continue
                            dk_out[(key, col)] = dk[wg][c][t128][n * 4 + h * 2 + e]
                            dv_out[(key, col)] = dv[wg][c][t128][n * 4 + h * 2 + e]
    return dk_out, dv_out, dq_accum, errors


def reference(cfg, pr, j):
    D = cfg.D
    n0 = j * BC
    diag = pr.Nkv - pr.Nq if pr.causal == 1 else 0
    keys = [k for k in range(n0, min(n0 + BC, pr.Nkv))]
    dk = {(k, d): 0 for k in keys for d in range(D)}
    dv = {(k, d): 0 for k in keys for d in range(D)}
    dq = {}
    for hq in range(pr.group):
        for r in range(pr.Nq):
            q, do = pr.q[hq][r], pr.do[hq][r]
            for k in keys:
                if pr.causal and k > r + diag:
                    continue
                s = sum(a * b for a, b in zip(q, pr.k[k]))
                dpv = sum(a * b for a, b in zip(do, pr.v[k]))
                p_ = pfun(s, pr.L[hq][r])
                pd = p_
                if pr.dropout:
                    g = pr.offset + (hq * pr.Nq + r) * pr.Nkv + k
                    pd = p_ * DSCALE if keep(g) else 0
                ds = pd * dpv - p_ * pr.delta[hq][r]
                for d in range(D):
                    dv[(k, d)] += pd * do[d]
                    dk[(k, d)] += ds * q[d]
                    if ds:
                        key = (hq * pr.Nq + r, d)
                        dq[key] = dq.get(key, 0) + ds * pr.k[k][d]
    return dk, dv, dq


def check_case(cfg, pr, j, raw_base=0x410):
    dk, dv, dq, errors = run_block(cfg, pr, j, raw_base)
    rk, rv, rq = reference(cfg, pr, j)
    if dk != rk:
        bad = [x for x in set(rk) | set(dk) if dk.get(x) != rk.get(x)]
        errors.append(("dK", len(bad), sorted(bad)[:3]))
    if dv != rv:
        bad = [x for x in set(rv) | set(dv) if dv.get(x) != rv.get(x)]
        errors.append(("dV", len(bad), sorted(bad)[:3]))
    got = {x: y for x, y in dq.items() if y}  # a sum may cancel to 0: compare the nonzero ones
    rq = {x: y for x, y in rq.items() if y}
    if got != rq:
        bad = [x for x in set(rq) | set(got) if got.get(x) != rq.get(x)]
        errors.append(("dQ", len(bad), sorted(bad)[:3]))
    return errors


def phase1_groups(cfg, ntiles):
    """cp.async accounting: the K/V group, then NG groups per staged tile (the next tile's are
    committed in the middle of the current one). At phase-1 step g the kernel waits until at
    most NG - 1 - g groups are pending; the groups of that step (and K/V) must be complete."""
    NG = cfg.NG
    committed = ["kv"] + [(0, g) for g in range(NG)]
    bad = []
    for t in range(ntiles):
        for g in range(NG):
            n = NG - g if mut("wait_count") else NG - 1 - g
            done = committed[: len(committed) - n]
            if (t, g) not in done or "kv" not in done:
                bad.append(("group not landed", t, g))
        if t + 1 < ntiles:
            committed += [(t + 1, g) for g in range(NG)]
    return bad


def pair_reduce_check(rng, D, c, nvalid):
    """pair = 1: the two blocks' dQ chunk c (random fragments) summed through each other's
    exchange buffer and reduced, each block its h = rank rows. Every (row, column < D) of a valid
    row must receive A + B exactly once, nothing else anything."""
    DH = (D + 127) // 128 * 64
    frag = [[[[rng.randint(-9, 9) for _ in range(32)] for _ in range(128)] for _ in range(2)]
            for _ in range(2)]  # [rank][wg][t128][reg]
    xbuf = [{}, {}]  # per block: float4 slot -> 4 values
    for rank in range(2):  # st.shared::cluster into the other block's buffer
        peer = rank if mut("pair_to_self") else rank ^ 1
        for wg in range(2):
            for t128 in range(128):
                dq = frag[rank][wg][t128]
                h = rank if mut("pair_send_own_half") else 1 - rank
                for m in range(4):
                    a, b2 = 2 * m, 2 * m + 1
                    xbuf[peer][(wg * 4 + m) * 128 + t128] = (
                        dq[a * 4 + 2 * h], dq[a * 4 + 2 * h + 1], dq[b2 * 4 + 2 * h],
                        dq[b2 * 4 + 2 * h + 1])
    got = {}
    for rank in range(2):
        for wg in range(2):
            vals = {}
            for t128 in range(128):
                dq = frag[rank][wg][t128]
                for m in range(4):
                    x = xbuf[rank][(wg * 4 + m) * 128 + t128]
                    a, b2 = 2 * m, 2 * m + 1
                    h = rank
                    vals[t128, m] = (dq[a * 4 + 2 * h] + x[0], dq[a * 4 + 2 * h + 1] + x[1],
                                     dq[b2 * 4 + 2 * h] + x[2], dq[b2 * 4 + 2 * h + 1] + x[3])
            for t128 in range(128):
                lane, wq = t128 % 32, t128 // 32
                odd = lane & 1
                row = wq * 16 + (lane >> 2) + rank * 8
                if row >= nvalid:
                    continue
                for m in range(4):
                    a0, a1, b0, b1 = vals[t128, m]
                    p0, p1, q0, q1 = vals[t128 ^ 1, m]
                    # the partner shuffles `odd ? a : b` with its own parity
                    r0, r1 = (p0, p1) if not odd else (q0, q1)
                    a = 2 * m
                    col = wg * DH + c * 64 + (a + (0 if mut("pair_col_even") else odd)) * 8 + \
                        (lane & 2) * 2
                    if col >= D:
                        continue
                    v = (r0, r1, b0, b1) if odd else (a0, a1, r0, r1)
                    for i in range(4):
                        key = (row, col + i)
                        got[key] = got.get(key, 0) + v[i] + (1j if key in got else 0)
    want = {}
    for wg in range(2):
        for t128 in range(128):
            for r in range(32):
                row, col = acc_pos(t128, r)
                col += wg * DH + c * 64
                if row < nvalid and col < D:
                    want[(row, col)] = frag[0][wg][t128][r] + frag[1][wg][t128][r]
    return [] if got == want else [("pair dQ", len(set(got) ^ set(want)),
                                    sum(got.get(k) != w for k, w in want.items()))]


MUTATIONS = [
    "no_xor", "sbo_512", "no_align", "kv_rows_br", "kk_16", "phase1_no_half",
    "exchange_wrong_half", "exchange_self", "causal_ge", "ds_formula", "pt_untransposed",
    "dq_no_half", "dq_a_no_step", "dq_swap_rows", "dvdk_a_step_8rows", "stage_same_parity",
    "stage_h_pp_swapped", "epi_key_col", "skip_off_by_one", "wait_count", "dropout_n4",
    "dropout_no_hq", "dropout_ds", "split_stage_other_half", "pair_to_self",
    "pair_send_own_half", "pair_col_even",
]


def cases(quick):
    # (D, PPG, group, Nq, Nkv, causal, j[, dropout])
    full = [
        (64, 1, 1, 50, 40, 0, 1),     # rows past the end, keys past Nkv, key tile 1
        (136, 1, 2, 40, 70, 1, 1),    # GQA rows packed over two tiles, bottom-right causal
        (320, 3, 1, 70, 45, 2, 1),    # top-left causal, one group of 3 panels
        (320, 1, 3, 30, 64, 1, 0),    # bottom-right, Nq < Nkv, three q heads
        (512, 1, 1, 100, 33, 1, 0),   # bottom-right with Nq > Nkv: rows without gradient
        (512, 2, 2, 40, 40, 0, 1),    # two panels a group, two tiles
        (64, 1, 1, 33, 50, 2, 1),     # the last row of the only query tile sees key n0 only
        (136, 1, 3, 30, 70, 1, 1, True),  # dropout, GQA, bottom-right
        (320, 3, 2, 40, 50, 0, 0, True),  # dropout, one group of 3 panels
    ]
    if quick:
        return [full[1], full[2], full[4], full[5], full[6], full[7]]
    return full


def check_all(quick=False):
    rng = random.Random(3)
    fails = []
    for D, PPG, group, Nq, Nkv, causal, j, *drop in cases(quick):
        pr = Prob(group, Nq, Nkv, causal, rng, D, bool(drop))
        for split in (0, 1):
            cfg = Cfg(D, PPG, split)
            e = check_case(cfg, pr, j)
            if e:
                fails.append((D, PPG, split, group, Nq, Nkv, causal, j, e[:3]))
        for nt in (1, 2, 3):
            b = phase1_groups(cfg, nt)
            if b:
                fails.append((D, "groups", nt, b[:2]))
    for D, c, nvalid in ((64, 0, 64), (320, 2, 50), (512, 3, 64), (136, 1, 7)):
        e = pair_reduce_check(rng, D, c, nvalid)
        if e:
            fails.append((D, "pair", c, nvalid, e))
    return fails


def main():
    fails = check_all()
    if fails:
        print("FAILED:", fails)
        return 1
    print("exact: dK, dV, dQ of a key tile over every query tile (D 64/136/320/512, panels per "
          "group 1/2/3, GQA, causal both alignments, rows and keys past the end, dropout; split 0 and 1), cp.async groups, "
          "the pair dQ sum and reduction")
    ok = True
    for m in MUTATIONS:
        MUT.clear()
        MUT.add(m)
        try:
            caught = bool(check_all(quick=True))
        except (AssertionError, IndexError, KeyError, TypeError):
            caught = True
        print(f"mutation {m:22s} {'caught' if caught else 'NOT CAUGHT'}")
        ok &= caught
    MUT.clear()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
