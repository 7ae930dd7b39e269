#!/usr/bin/env python3
"""Pure-Python transcription of kernels/ffpa_bwd_sm90c.cuh's data movement for one cluster (two
blocks splitting D, one key tile of BC keys, every query tile of a GQA group), checked exactly on
small integers, plus a race check of its barrier protocol.

What is transcribed from the kernel (each formula as written there):
  - per block: the 1024-byte align-up, the K/V load of the block's half of D (kv_granule), stage()'s
    decode of a Q/dO granule (group g, quarter, panel, row, local and global column), the row
    tables (two parities), the causal tile skip (next_tile, the same in both blocks);
  - the start address and descriptor of every wgmma: S and dP (K-major, m64nBCk16), dV^T and dK^T
    (A = dO^T / Q^T MN-major, B = P^T / dS^T K-major, m64nBCk16), dQ chunks (A = dS^T MN-major,
    B = K MN-major, m64n64k16, BC / 16 k-steps);
  - the block exchange (float4 slots [w][n8][thread], the half handed over and the half kept),
    the cluster exchange (each thread's sums into the same slots of the other block, mapa), the
    (row, key) of each P/dS value with the masks, the transposed 2-byte P^T/dS^T stores, dBias by
    rank 0 only;
  - the dQ reduction (lane-pair swap, the block's and warpgroup's columns, dq_accum offset) and
    the dK/dV epilogue.
The hardware model (descriptors, K-major and MN-major 128-byte swizzle layouts, the m64nNk16
accumulator fragment) is tools/ffpa_fwd_sm90_sim.py's, as for tools/ffpa_bwd_sm90_sim.py (both
kernels passed their GPU tests first time).

Exact integers stand in for the arithmetic, as in tools/ffpa_bwd_sm90_sim.py: P = ((S + L) % 5)
+ 1, dS = Pd dP - P delta, a hash for the dropout decision, 2 for 1 / (1 - p); dBias of a key
bias = the column sums of dS.

Protocol: every access to the exchange slots, the keep-bit slots and P^T/dS^T is logged with its
block, thread, program position, the block's barrier count (block and cluster barriers) and the cluster's
barrier count. Two accesses to the same location, one a write, must be ordered: the same thread
in program order, the same block across a barrier, or across a cluster barrier; and every read
must see the write the kernel means (the data check). Both blocks must meet the same number of
cluster barriers (no deadlock: every thread of both blocks executes the same sequence). The
kernel splits barrier A (arrive, the keep-bit draws, wait): nothing in between touches a logged
location, so it is one point here.
Then every mutation in MUTATIONS (one wrong formula each) must make a check fail.
Run: python3 tools/ffpa_bwd_sm90c_sim.py
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffpa_fwd_sm90_sim import acc_pos, hw_k_major, hw_mn, matmul, transpose  # noqa: E402

BR, NT = 64, 256
POISON = 77777
MUT = set()


def mut(name):
    return name in MUT


def tile_off(row, col, rows):
    g = (col >> 3) & 7
    x = g if mut("no_xor") else g ^ (row & 7)
    return (((col >> 6) * rows + row) << 7) + (x << 4) + ((col & 7) << 1)


def make_desc(addr, lbo, sbo):
    return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (1 << 62)


def desc_k(addr):
    return make_desc(addr, 16, 1024)


def desc_mn(addr):
    return make_desc(addr, 1024, 1024)


class Cfg:
    def __init__(self, D, BC, PPG=1):
        self.D, self.BC, self.PPG = D, BC, PPG
        self.NN = BC // 8
        self.DP = (D + 255) // 256 * 256
        self.DC, self.DQ = self.DP // 2, self.DP // 4
        self.NP = self.DQ // 64
        assert self.NP % PPG == 0 and self.NP * self.NN <= 32
        self.NG = self.NP // PPG
        self.KV_PANEL, self.Q_PANEL = BC * 128, BR * 128
        self.KV_BYTES, self.Q_BYTES = BC * self.DC * 2, BR * self.DC * 2
        self.PT_BYTES = BC * BR * 2
        self.X_BYTES = 2 * self.NN * 128 * 16
        self.ROW_BYTES = BR * 8
        self.SMEM = (1024 + 2 * self.KV_BYTES + 2 * self.Q_BYTES + 2 * self.PT_BYTES +
                     self.X_BYTES + 2 * self.ROW_BYTES + NT * 4)


class Prob:
    """One kv head of batch 0: group q heads of Nq rows, Nkv keys; causal 0, 1 (bottom-right),
    2 (top-left); dropout; a key bias (its dBias: dS column sums)."""

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
        self.L = [[None if causal and r + diag < 0 else rng.randint(0, 4) for r in range(Nq)]
                  for _ in range(group)]
        self.delta = [[rng.randint(-3, 3) for _ in range(Nq)] for _ in range(group)]


def pfun(s, l):
    return 0 if l is None else ((s + l) % 5) + 1


def keep(g):
    return (g * 2654435761 >> 7) % 3 != 0


DSCALE = 2


class Log:
    """Race check: accesses per location, each (write, block, thread, seq, sync, csync)."""

    def __init__(self):
        self.acc = {}
        self.races = []
        self.seq = {}
        self.sync = [0, 0]
        self.csync = 0

    def access(self, loc, write, block, thread):
        s = self.seq[(block, thread)] = self.seq.get((block, thread), 0) + 1
        a = (write, block, thread, s, self.sync[block], self.csync)
        for b in self.acc.setdefault(loc, []):
            if not (write or b[0]):
                continue
            same_thread = b[1] == block and b[2] == thread
            ordered = same_thread or (b[1] == block and b[4] < a[4]) or b[5] < a[5]
            if not ordered:
                self.races.append((loc, b[:3], a[:3]))
        self.acc[loc].append(a)
        if len(self.acc[loc]) > 16:  # older accesses are ordered before these by now
            del self.acc[loc][:8]

    def block_sync(self, block):
        self.sync[block] += 1

    def cluster_sync(self):
        self.calls = getattr(self, "calls", 0) + 1
        a = self.calls % 2  # barrier A: the odd calls, B the even ones
        if not (mut("no_cluster_sync_a") and a or mut("no_cluster_sync_b") and not a):
            self.csync += 1
        self.sync[0] += 1
        self.sync[1] += 1


def run_cluster(cfg, pr, j, raw_base):
    """Runs key tile j through the transcribed kernel on both blocks; returns (dk, dv as
    {(key, d): value}, dq_accum {(lrow, d): value}, dbias {key: value}, errors)."""
    D, BC, NN, NP, NG, PPG, DC, DQ = (cfg.D, cfg.BC, cfg.NN, cfg.NP, cfg.NG, cfg.PPG, cfg.DC,
                                      cfg.DQ)
    errors = []
    log = Log()
    raw_end = raw_base + cfg.SMEM
    smem = [[POISON] * (raw_end // 2 + 8) for _ in range(2)]

    def st(rank, addr, val):
        assert raw_base <= addr < raw_end, ("store out of shared memory", addr)
        smem[rank][addr // 2] = val

    sK = (raw_base + 1023) & ~1023
    sV = sK + cfg.KV_BYTES
    sQ = sV + cfg.KV_BYTES
    sO = sQ + cfg.Q_BYTES
    sPt = sO + cfg.Q_BYTES
    sSt = sPt + cfg.PT_BYTES
    xb0 = sSt + cfg.PT_BYTES  # the exchange: float4 slots, modelled as a dict per block
    assert xb0 + cfg.X_BYTES + 2 * cfg.ROW_BYTES + NT * 4 <= raw_end
    xbuf = [{}, {}]
    keep_in = [{}, {}]  # per block: keep bits from the other block, slot tid

    n0 = j * BC
    rows_total = pr.group * pr.Nq
    diag = pr.Nkv - pr.Nq if pr.causal == 1 else 0
    ntile = (rows_total + BR - 1) // BR

    for rank in range(2):
        cbase = (0 if mut("kv_no_cbase") else rank * DC)
        for tid in range(NT):
            for idx in range(tid, BC * DC // 8, NT):
                row, lc = idx // (DC // 8), (idx % (DC // 8)) * 8
                col = cbase + lc
                key = n0 + row
                ok = key < pr.Nkv and col < D
                off = tile_off(row, lc, BC)
                for e in range(8):
                    st(rank, sK + off + 2 * e, pr.k[key][col + e] if ok else 0)
                    st(rank, sV + off + 2 * e, pr.v[key][col + e] if ok else 0)

    def next_tile(t, rank):
        nsk = n0 + (BC if mut("skip_per_rank") and rank else 0)
        while pr.causal and t < ntile:
            m0 = t * BR
            i_hi = min(m0 + BR, rows_total) - 1
            r_hi = pr.Nq - 1 if m0 // pr.Nq != i_hi // pr.Nq else i_hi % pr.Nq
            if r_hi + diag >= nsk:
                break
            t += 1
        return t

    tables = {}

    def stage(rank, t, par):
        m0 = t * BR
        cbase = rank * DC
        tab = tables.setdefault((rank, par), [None] * BR)
        for tid in range(BR):
            i = m0 + tid
            l, dl = None, 0
            if i < rows_total:
                l, dl = pr.L[i // pr.Nq][i % pr.Nq], pr.delta[i // pr.Nq][i % pr.Nq]
            tab[tid] = (l, dl)
        rpt = BR * 8 // NT
        for g in range(NG):
            for q in range(2 * PPG):
                for jj in range(rpt):
                    for tid in range(NT):
                        quarter, pp = q // PPG, q % PPG
                        qn = 0 if mut("stage_no_quarter") else quarter * NP
                        lc = (qn + g * PPG + pp) * 64 + (tid & 7) * 8
                        col = cbase + lc
                        row = (tid >> 3) + jj * (NT // 8)
                        i = m0 + row
                        ok = i < rows_total and col < D
                        off = tile_off(row, lc, BR)
                        for e in range(8):
                            st(rank, sQ + off + 2 * e,
                               pr.q[i // pr.Nq][i % pr.Nq][col + e] if ok else 0)
                            st(rank, sO + off + 2 * e,
                               pr.do[i // pr.Nq][i % pr.Nq][col + e] if ok else 0)

    nreg = NN * 4
    dv = [[[[[0] * nreg for _ in range(128)] for _ in range(NP)] for _ in range(2)]
          for _ in range(2)]  # [rank][wg][c][t128][reg]
    dk = [[[[[0] * nreg for _ in range(128)] for _ in range(NP)] for _ in range(2)]
          for _ in range(2)]
    dq_accum = {}
    dbias = {}

    def wgmma(acc, A, B, nregs):
        C = matmul(A, B)
        for t in range(128):
            for r in range(nregs):
                row, col = acc_pos(t, r)
                acc[t][r] += C[row][col]

    ts = [next_tile(0, rank) for rank in range(2)]
    if ts[0] != ts[1]:
        errors.append(("blocks start on different tiles", ts))
    t, par = ts[0], 0
    if t < ntile:
        for rank in range(2):
            stage(rank, t, 0)
    clusters = 0
    while t < ntile:
        tns = [next_tile(t + 1, rank) for rank in range(2)]
        if tns[0] != tns[1]:
            errors.append(("blocks visit different tiles: a cluster barrier would hang", t, tns))
        tn = tns[0]
        m0 = t * BR

        def row_of(row):
            i = m0 + row
            return (i % pr.Nq if i < rows_total else -1), i // pr.Nq

        # phase 1 (after the group barriers)
        s = [[[[0] * nreg for _ in range(128)] for _ in range(2)] for _ in range(2)]
        dp = [[[[0] * nreg for _ in range(128)] for _ in range(2)] for _ in range(2)]
        for rank in range(2):
            for g in range(NG):
                log.block_sync(rank)
                for wg in range(2):
                    pn = wg * NP + g * PPG
                    sq, so = sQ + pn * cfg.Q_PANEL, sO + pn * cfg.Q_PANEL
                    sk, sv = sK + pn * cfg.KV_PANEL, sV + pn * cfg.KV_PANEL
                    for pp in range(PPG):
                        for kk in range(4):
                            for acc, a, b in ((s, sq, sk), (dp, so, sv)):
                                A = hw_k_major(smem[rank], desc_k(a + pp * cfg.Q_PANEL + kk * 32),
                                               64)
                                Bt = hw_k_major(smem[rank],
                                                desc_k(b + pp * cfg.KV_PANEL + kk * 32), BC)
                                wgmma(acc[rank][wg], A, transpose(Bt), nreg)
        # block exchange
        sm = [[[[0, 0] for _ in range(NN)] for _ in range(128)] for _ in range(4)]
        dm = [[[[0, 0] for _ in range(NN)] for _ in range(128)] for _ in range(4)]
        for rank in range(2):
            for wg in range(2):
                for t128 in range(128):
                    sw = 1 - wg
                    for n in range(NN):
                        slot = (wg * NN + n) * 128 + t128
                        log.access((rank, slot), True, rank, wg * 128 + t128)
                        sr, dr = s[rank][wg][t128], dp[rank][wg][t128]
                        xbuf[rank][slot] = (sr[n * 4 + 2 * sw], sr[n * 4 + 2 * sw + 1],
                                            dr[n * 4 + 2 * sw], dr[n * 4 + 2 * sw + 1])
            log.block_sync(rank)
            for wg in range(2):
                for t128 in range(128):
                    for n in range(NN):
                        slot = ((1 - wg) * NN + n) * 128 + t128
                        log.access((rank, slot), False, rank, wg * 128 + t128)
                        x = xbuf[rank][slot]
                        sr, dr = s[rank][wg][t128], dp[rank][wg][t128]
                        for e in range(2):
                            sm[rank * 2 + wg][t128][n][e] = sr[n * 4 + 2 * wg + e] + x[e]
                            dm[rank * 2 + wg][t128][n][e] = dr[n * 4 + 2 * wg + e] + x[2 + e]
        # dropout: each block draws the keep bits of its half of the n8 groups
        kmine = {}
        for rank in range(2):
            for wg in range(2):
                for t128 in range(128):
                    lane, wq = t128 % 32, t128 // 32
                    r, hq_row = row_of(wq * 16 + (lane >> 2) + wg * 8)
                    key0 = n0 + (lane & 3) * 2
                    erow = ((0 * pr.Hq + hq_row) * pr.Nq + max(r, 0)) * pr.Nkv + key0
                    half = 0 if mut("keep_same_half") else rank
                    kb = 0
                    for n in range(half * (NN // 2), (half + 1) * (NN // 2)):
                        g = pr.offset + erow + n * 8
                        kb |= (keep(g) << (2 * n)) | (keep(g + 1) << (2 * n + 1))
                    kmine[rank, wg * 128 + t128] = kb
        # cluster exchange: barrier A, stores into the other block, barrier B, adds
        log.cluster_sync()
        clusters += 1
        for rank in range(2):
            peer = rank if mut("cluster_to_self") else rank ^ 1
            for wg in range(2):
                for t128 in range(128):
                    for n in range(NN):
                        slot = (wg * NN + n) * 128 + t128
                        if mut("cluster_slot_other_wg"):
                            slot = ((1 - wg) * NN + n) * 128 + t128
                        log.access((peer, slot), True, rank, wg * 128 + t128)
                        v = sm[rank * 2 + wg][t128][n], dm[rank * 2 + wg][t128][n]
                        xbuf[peer][slot] = (v[0][0], v[0][1], v[1][0], v[1][1])
                    if pr.dropout:
                        tid = wg * 128 + t128
                        log.access((peer, "keep", tid), True, rank, tid)
                        keep_in[peer][tid] = kmine[rank, tid]
        log.cluster_sync()
        clusters += 1
        for rank in range(2):
            for wg in range(2):
                for t128 in range(128):
                    for n in range(NN):
                        slot = (wg * NN + n) * 128 + t128
                        log.access((rank, slot), False, rank, wg * 128 + t128)
                        x = xbuf[rank][slot]
                        for e in range(2):
                            sm[rank * 2 + wg][t128][n][e] += x[e]
                            dm[rank * 2 + wg][t128][n][e] += x[2 + e]
        # P, dS (both blocks), stored transposed
        kbits_all = {}
        for rank in range(2):
            for tid in range(NT):
                kb = kmine[rank, tid]
                if pr.dropout and not mut("keep_not_merged"):
                    log.access((rank, "keep", tid), False, rank, tid)
                    kb |= keep_in[rank][tid]
                kbits_all[rank, tid] = kb
        for rank in range(2):
            tab = tables[(rank, par)]
            for wg in range(2):
                for t128 in range(128):
                    lane, wq = t128 % 32, t128 // 32
                    row = wq * 16 + (lane >> 2) + wg * 8
                    l, dl = tab[row]
                    r, hq_row = row_of(row)
                    key0 = n0 + (lane & 3) * 2
                    causal_lim = r + diag - key0
                    kv_lim = pr.Nkv - key0
                    kbits = kbits_all[rank, wg * 128 + t128]
                    for n in range(NN):
                        for e in range(2):
                            kof = n * 8 + e
                            cm = kof >= causal_lim if mut("causal_ge") else kof > causal_lim
                            masked = kof >= kv_lim or (pr.causal and cm)
                            p_ = 0 if masked else pfun(sm[rank * 2 + wg][t128][n][e], l)
                            dmv = dm[rank * 2 + wg][t128][n][e]
                            if pr.dropout:
                                pd = p_ * DSCALE if kbits >> (2 * n + e) & 1 else 0
                                ds = pd * dmv - p_ * dl
                                p_ = pd
                            else:
                                ds = p_ * (dmv - dl)
                            if (rank == 0 or mut("dbias_both")) and not kof >= kv_lim:
                                dbias[key0 + kof] = dbias.get(key0 + kof, 0) + ds
                            kl = n * 8 + (lane & 3) * 2 + e
                            off = tile_off(kl, row, BC)
                            log.access((rank, "PtSt", off), True, rank, wg * 128 + t128)
                            st(rank, sPt + off, p_)
                            st(rank, sSt + off, ds)
            if not mut("no_pt_barrier"):
                log.block_sync(rank)

        def dq_chunk(rank, wg, c):
            acc = [[0] * 32 for _ in range(128)]
            kp = sK + (wg * NP + c) * cfg.KV_PANEL
            if c == 0:  # the warpgroup's wgmmas of this interval read every element
                for off in range(0, cfg.PT_BYTES, 2):
                    log.access((rank, "PtSt", off), False, rank, wg * 128)
            for ks in range(2 if mut("dq_ksteps_2") else BC // 16):
                A = transpose(hw_mn(smem[rank], desc_mn(sSt + ks * 16 * 128), 64))
                B = hw_mn(smem[rank], desc_mn(kp + ks * 16 * 128), 64)
                wgmma(acc, A, B, 32)
            return acc

        def dq_reduce(rank, wg, c, acc):
            for t128 in range(128):
                lane, wq = t128 % 32, t128 // 32
                odd = lane & 1
                partner = t128 ^ 1
                row = wq * 16 + (lane >> 2) + (8 if odd else 0)
                r, hq = row_of(row)
                lrow = hq * pr.Nq + r
                for n in range(8):
                    pd = acc[partner]
                    s0 = pd[n * 4 + 0] if (lane ^ 1) & 1 else pd[n * 4 + 2]
                    s1 = pd[n * 4 + 1] if (lane ^ 1) & 1 else pd[n * 4 + 3]
                    cb = 0 if mut("dq_no_cbase") else rank * DC
                    col = cb + wg * DQ + c * 64 + n * 8 + (lane & 2) * 2
                    if r >= 0 and col < D:
                        me = acc[t128]
                        v = (s0, s1, me[n * 4 + 2], me[n * 4 + 3]) if lane & 1 else \
                            (me[n * 4 + 0], me[n * 4 + 1], s0, s1)
                        if (lrow * D + col) % 4:
                            errors.append(("red.v4 misaligned", lrow, col))
                        for i in range(4):
                            dq_accum[(lrow, col + i)] = dq_accum.get((lrow, col + i), 0) + v[i]

        for rank in range(2):
            for wg in range(2):
                acc0 = dq_chunk(rank, wg, 0)
                so, sq = sO + wg * NP * cfg.Q_PANEL, sQ + wg * NP * cfg.Q_PANEL
                for c in range(NP):
                    for ks in range(4):
                        for acc, a, b in ((dv, so, sPt), (dk, sq, sSt)):
                            A = transpose(hw_mn(smem[rank], desc_mn(a + c * cfg.Q_PANEL +
                                                                    ks * 16 * 128), 64))
                            B = transpose(hw_k_major(smem[rank], desc_k(b + ks * 32), BC))
                            wgmma(acc[rank][wg][c], A, B, nreg)
                dq_reduce(rank, wg, 0, acc0)
            log.block_sync(rank)
            if tn < ntile:
                stage(rank, tn, par ^ 1)
            for wg in range(2):
                for c in range(1, NP):
                    dq_reduce(rank, wg, c, dq_chunk(rank, wg, c))
        t, par = tn, par ^ 1

    errors += [("race", x) for x in log.races[:3]]
    if log.sync[0] != log.sync[1]:
        errors.append(("block barrier counts differ", log.sync))
    # epilogue
    dk_out, dv_out = {}, {}
    for rank in range(2):
        for wg in range(2):
            for t128 in range(128):
                lane, wq = t128 % 32, t128 // 32
                key0 = n0 + (lane & 3) * 2
                for c in range(NP):
                    for h in range(2):
                        col = rank * DC + wg * DQ + c * 64 + wq * 16 + (lane >> 2) + h * 8
                        if col >= D:
                            continue
                        for n in range(NN):
                            for e in range(2):
                                key = key0 + n * 8 + e
                                if key >= pr.Nkv:
                                    continue
                                if (key, col) in dk_out:
                                    errors.append(("dK written twice", key, col))
                                dk_out[(key, col)] = dk[rank][wg][c][t128][n * 4 + h * 2 + e]
                                dv_out[(key, col)] = dv[rank][wg][c][t128][n * 4 + h * 2 + e]
    return dk_out, dv_out, dq_accum, dbias, errors


def reference(cfg, pr, j):
    D, BC = cfg.D, cfg.BC
    n0 = j * BC
    diag = pr.Nkv - pr.Nq if pr.causal == 1 else 0
    keys = [k for k in range(n0, min(n0 + BC, pr.Nkv))]
    dk = {(k, d): 0 for k in keys for d in range(D)}
    dv = {(k, d): 0 for k in keys for d in range(D)}
    dq, dbias = {}, {}
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
                dbias[k] = dbias.get(k, 0) + ds
                for d in range(D):
                    dv[(k, d)] += pd * do[d]
                    dk[(k, d)] += ds * q[d]
                    if ds:
                        key = (hq * pr.Nq + r, d)
                        dq[key] = dq.get(key, 0) + ds * pr.k[k][d]
    return dk, dv, dq, dbias


def check_case(cfg, pr, j, raw_base=0x410):
    dk, dv, dq, db, errors = run_cluster(cfg, pr, j, raw_base)
    rk, rv, rq, rb = reference(cfg, pr, j)
    for name, got, want in (("dK", dk, rk), ("dV", dv, rv), ("dQ", dq, rq), ("dBias", db, rb)):
        got = {x: y for x, y in got.items() if y}  # a sum may cancel to 0: compare the nonzero
        want = {x: y for x, y in want.items() if y}
        if got != want:
            bad = [x for x in set(want) | set(got) if got.get(x) != want.get(x)]
            errors.append((name, len(bad), sorted(bad)[:3]))
    return errors


MUTATIONS = [
    "no_xor", "kv_no_cbase", "skip_per_rank", "stage_no_quarter", "dq_ksteps_2", "causal_ge",
    "cluster_to_self", "cluster_slot_other_wg", "no_cluster_sync_a", "no_cluster_sync_b",
    "no_pt_barrier", "dq_no_cbase", "dbias_both", "keep_same_half", "keep_not_merged",
]


def cases(quick):
    # (D, BC, PPG, group, Nq, Nkv, causal, j[, dropout])
    full = [
        (64, 64, 1, 1, 50, 100, 0, 1),     # rows past the end, keys past Nkv, key tile 1
        (136, 32, 1, 2, 40, 70, 1, 1),     # GQA rows packed over two tiles, bottom-right
        (320, 64, 1, 1, 70, 45, 2, 0),     # top-left causal, D padded to 512, two tiles
        (512, 64, 2, 1, 100, 33, 1, 0),    # bottom-right with Nq > Nkv: rows without gradient
        (576, 32, 1, 3, 30, 40, 1, 1),     # D padded to 768 (3 panels a quarter), 3 q heads
        (1024, 32, 2, 1, 20, 40, 0, 1),    # D = 1024, two panels a group
        (136, 64, 1, 3, 30, 70, 1, 0, True),  # dropout, GQA, bottom-right
        (512, 32, 1, 2, 40, 50, 0, 1, True),  # dropout, two groups
    ]
    if quick:
        return [full[0], full[1], full[3], full[6]]
    return full


def check_all(quick=False):
    rng = random.Random(5)
    fails = []
    for D, BC, PPG, group, Nq, Nkv, causal, j, *drop in cases(quick):
        pr = Prob(group, Nq, Nkv, causal, rng, D, bool(drop))
        e = check_case(Cfg(D, BC, PPG), pr, j)
        if e:
            fails.append((D, BC, PPG, group, Nq, Nkv, causal, j, e[:3]))
    return fails


def main():
    fails = check_all()
    if fails:
        print("FAILED:", fails)
        return 1
    print("exact: dK, dV, dQ, dBias of a key tile (both blocks of the cluster) over every query "
          "tile: D 64/136/320/512/576/1024, bc 32/64, panels per group 1/2, GQA, causal both "
          "alignments, rows and keys past the end, dropout; no race on the exchange slots or "
          "P^T/dS^T, both blocks meet the same barriers")
    ok = True
    for m in MUTATIONS:
        MUT.clear()
        MUT.add(m)
        try:
            caught = bool(check_all(quick=True))
        except (AssertionError, IndexError, KeyError, TypeError):
            caught = True
        print(f"mutation {m:26s} {'caught' if caught else 'NOT CAUGHT'}")
        ok &= caught
    MUT.clear()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
