#!/usr/bin/env python3
"""Pure-Python transcription (no NumPy on this machine) of kernels/ffpa_fwd_sm90.cuh's data movement for one block.

What is transcribed from the kernel (each formula as written there):
  - shared-memory placement: the 1024-byte align-up of the dynamic base, tile_off() of Q and of
    the K/V slots, load_slot()'s (tile, K/V, panel, half) decode of a slot index;
  - the wgmma descriptors as the kernel encodes them (make_desc/desc_k/desc_mn bit packing), the
    start addresses of every QK (per panel c, k16 step kk, n64 piece nb) and PV (per k16 step ks)
    wgmma;
  - the S exchange (float4 slots indexed by warpgroup, n8 group and thread);
  - the (row, key) the softmax attributes to each S register, the P -> A-register packing, and
    the (row, column) the epilogue stores each O register to;
  - the ring schedule: which slot each step reads/overwrites, cp.async groups and wgmma waits.

What models the hardware (my reading of the PTX ISA 8.x, section "Asynchronous Warpgroup Level
Matrix Multiply-Accumulate", cross-checked against CUTLASS's canonical GMMA layouts; nothing here
was run on a GPU):
  - descriptor fields: start address bits 0-13 (>> 4), LBO bits 16-29, SBO bits 32-45, base
    offset bits 49-51, swizzle mode bits 62-63 (1 = 128 B, 2 = 64 B, 3 = 32 B);
  - K-major operand, 128 B swizzle: element (r, k) of an r x k16 slice sits at logical byte
    start + (r // 8) * SBO + (r % 8) * 128 + 2 k; LBO unused (ISA-only reading);
  - MN-major operand (imm-trans = 1), 128 B swizzle: element (k, n) at start + (n // 64) * LBO +
    2 (n % 64) + (k % 8) * 128 + (k // 8) * SBO (CUTLASS: ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)));
    hw_mn_swapped() is the reading with LBO and SBO exchanged, which the kernel's choice
    LBO = SBO = 1024 makes equivalent;
  - the swizzle acts on the absolute shared address: bits 4..6 ^= bits 7..9 (128 B mode);
  - accumulator fragment of m64nNk16 (f32): thread t = 32 warp + lane, register r holds row
    16 warp + lane // 4 + 8 ((r // 2) % 2), column 8 (r // 4) + 2 (lane % 4) + r % 2;
  - A register fragment (16-bit, RS form): register i, half j holds row 16 warp + lane // 4 +
    8 (i % 2), k = 2 (lane % 4) + j + 8 (i // 2).

The check: S = Q K^T and O = P V of one key tile come out exactly (small integers, so every sum is
exact) for D in {64, 136, 320, 512} and Bc in {64, 128}; then every mutation in MUTATIONS (one
wrong formula each) must make some check fail. Run: python3 tools/ffpa_fwd_sm90_sim.py
"""
import random
import sys

BR = 64
MUT = set()  # active mutations


def mut(name):
    return name in MUT


def zeros(r, c):
    return [[0] * c for _ in range(r)]


def matmul(A, B):
    n, m = len(B), len(B[0])
    out = zeros(len(A), m)
    for i, a in enumerate(A):
        row = out[i]
        for kk in range(n):
            x = a[kk]
            if x:
                b = B[kk]
                for c in range(m):
                    row[c] += x * b[c]
    return out


def transpose(A):
    return [list(r) for r in zip(*A)]


# ---------------------------------------------------------------- kernel formulas (transcribed)


def tile_off(row, col, rows):
    g = (col >> 3) & 7
    x = g if mut("no_xor") else g ^ (row & 7)
    return (((col >> 6) * rows + row) << 7) + (x << 4) + ((col & 7) << 1)


def make_desc(addr, lbo, sbo):
    mode = 2 if mut("swizzle_64b") else 1
    if mut("lbo_sbo_fields_swapped"):
        lbo, sbo = sbo, lbo
    return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (mode << 62)


def desc_k(addr):
    return make_desc(addr, 16, 512 if mut("sbo_512") else 1024)


def desc_mn(addr):
    return make_desc(addr, 1024, 1024)


class Cfg:
    def __init__(self, D, BC, STAGES, PPS=1, PSMEM=0):
        self.D, self.BC, self.STAGES, self.PPS, self.PSMEM = D, BC, STAGES, PPS, PSMEM
        self.DP = (D + 127) // 128 * 128
        self.DH = self.DP // 2
        self.NP = self.DH // 64
        assert self.NP % PPS == 0
        self.NPS = self.NP // PPS
        self.NB = BC // 64
        self.KS = BC // 16
        self.LA = STAGES - 2
        self.Q_PANEL = BR * 128
        self.PANEL = BC * 128
        self.SLOT_BYTES = 2 * PPS * self.PANEL
        self.Q_BYTES = BR * self.DP * 2
        self.X_BYTES = 2 * BR * BC * 4
        self.P_BYTES = BR * BC * 2 if PSMEM else 0


def aligned_base(raw):
    return raw if mut("no_align") else (raw + 1023) & ~1023


def load_q(cfg, smem, sQ, q):
    """q: [rows, D] of this block (rows past the end are zero)."""
    for idx in range(BR * cfg.DP // 8):
        row, col = idx // (cfg.DP // 8), (idx % (cfg.DP // 8)) * 8
        ok = col < cfg.D
        dst = sQ + tile_off(row, col, BR)
        smem[dst // 2 : dst // 2 + 8] = q[row][col : col + 8] if ok else [0] * 8


def load_slot(cfg, smem, sSlot, gi, k, v, nkv):
    """One slot of the stream for tile gi // (2 NPS); k, v: [Nkv, D]."""
    NPS, PPS, BC = cfg.NPS, cfg.PPS, cfg.BC
    j, rem = gi // (2 * NPS), gi % (2 * NPS)
    isv = rem >= NPS
    cs = rem - NPS if isv else rem
    base = v if isv else k
    dst = sSlot + (gi % cfg.STAGES) * cfg.SLOT_BYTES
    for idx in range(2 * PPS * BC * 8):  # all 256 threads x iterations
        h, pp, g = idx // (PPS * BC * 8), idx // (BC * 8) % PPS, idx % (BC * 8)
        row, col = g >> 3, (g & 7) * 8
        key = j * BC + row
        d = (0 if mut("slot_no_half") else h * cfg.DH) + (cs * PPS + pp) * 64 + col
        ok = key < nkv and d < cfg.D
        panel = pp * 2 + h if mut("slot_panel_order") else h * PPS + pp
        a = dst + panel * cfg.PANEL + tile_off(row, col, BC)
        smem[a // 2 : a // 2 + 8] = base[key][d : d + 8] if ok else [0] * 8


# ----------------------------------------------------------------- hardware model (PTX ISA reading)


def swz(addr, mode):
    if mode == 1:
        return addr ^ (((addr >> 7) & 7) << 4)
    if mode == 2:
        return addr ^ (((addr >> 7) & 3) << 4)
    if mode == 3:
        return addr ^ (((addr >> 7) & 1) << 4)
    return addr


def decode(desc):
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    base_off = (desc >> 49) & 7
    mode = (desc >> 62) & 3
    assert base_off == 0
    return start, lbo, sbo, mode


def hw_k_major(smem, desc, rows):
    """rows x 16 matrix (M or N by K) of a K-major operand."""
    start, lbo, sbo, mode = decode(desc)
    out = zeros(rows, 16)
    for r in range(rows):
        for kk in range(16):
            a = swz(start + (r // 8) * sbo + (r % 8) * 128 + 2 * kk, mode)
            out[r][kk] = smem[a // 2]
    return out


def hw_mn(smem, desc, n, swapped=False):
    """16 x n matrix (K by N) of an MN-major operand."""
    start, lbo, sbo, mode = decode(desc)
    if swapped:
        lbo, sbo = sbo, lbo
    out = zeros(16, n)
    for kk in range(16):
        for c in range(n):
            a = swz(start + (c // 64) * lbo + 2 * (c % 64) + (kk % 8) * 128 + (kk // 8) * sbo, mode)
            out[kk][c] = smem[a // 2]
    return out


def acc_pos(t, r):
    warp, lane = t // 32, t % 32
    return 16 * warp + lane // 4 + 8 * ((r // 2) % 2), 8 * (r // 4) + 2 * (lane % 4) + r % 2


def a_pos(t, i, j):
    warp, lane = t // 32, t % 32
    return 16 * warp + lane // 4 + 8 * (i % 2), 2 * (lane % 4) + j + 8 * (i // 2)


def wgmma(acc, A, B):
    """acc[t][32] += fragments of A (64 x 16) @ B (16 x 64)."""
    C = matmul(A, B)
    for t in range(128):
        for r in range(32):
            row, col = acc_pos(t, r)
            acc[t][r] += C[row][col]


def a_from_regs(regs):
    """regs[t][4][2] (P fragment of one k16 step) -> the 64 x 16 A matrix the hardware reads."""
    A = zeros(64, 16)
    for t in range(128):
        for i in range(4):
            for j in range(2):
                row, kk = a_pos(t, i, j)
                A[row][kk] = regs[t][i][j]
    return A


# ----------------------------------------------------------------------------- one block, one tile


def run(cfg, rng, nkv, raw_base=0x410, j=0, swapped_mn=False):
    D, BC = cfg.D, cfg.BC
    def rand(rows, valid):
        m = zeros(rows, cfg.DP + 8)
        for r in range(valid):
            for c in range(D):
                m[r][c] = rng.randint(-3, 3)
        return m

    q = rand(BR, BR)
    k = rand(nkv + BC, nkv)
    v = rand(nkv + BC, nkv)
    # poison: a read of anything that was not loaded shows up
    smem = [99999] * ((raw_base + 1024 + cfg.Q_BYTES + cfg.STAGES * cfg.SLOT_BYTES + cfg.X_BYTES +
                       cfg.P_BYTES) // 2 + 64)
    sQ = aligned_base(raw_base)
    sSlot = sQ + cfg.Q_BYTES
    sP = sSlot + cfg.STAGES * cfg.SLOT_BYTES + cfg.X_BYTES  # the S partials live in xbuf below
    load_q(cfg, smem, sQ, q)

    # S_w per warpgroup from the QK slots of tile j.
    s = [[[0] * 32 * cfg.NB for _ in range(128)] for _ in range(2)]  # s[w][t][nb * 32 + r]
    for cs in range(cfg.NPS):
        gi = j * 2 * cfg.NPS + cs
        load_slot(cfg, smem, sSlot, gi, k, v, nkv)
        for wg in range(2):
            qhalf = sQ + wg * cfg.NP * cfg.Q_PANEL
            sk = sSlot + (gi % cfg.STAGES) * cfg.SLOT_BYTES + wg * cfg.PPS * cfg.PANEL
            sq = qhalf + cs * cfg.PPS * cfg.Q_PANEL
            for pp, kk in [(pp, kk) for pp in range(cfg.PPS) for kk in range(4)]:
                step = 16 if mut("kk_16") else 32
                for nb in range(cfg.NB):
                    A = hw_k_major(smem, desc_k(sq + pp * cfg.Q_PANEL + kk * step), 64)
                    Bt = hw_k_major(smem, desc_k(sk + pp * cfg.PANEL + nb * 64 * 128 + kk * step),
                                    64)
                    acc = [s[wg][t][nb * 32 : nb * 32 + 32] for t in range(128)]
                    wgmma(acc, A, transpose(Bt))
                    for t in range(128):
                        s[wg][t][nb * 32 : nb * 32 + 32] = acc[t]

    # Exchange: float4 slots (w * BC/8 + nb * 8 + n) * 128 + t; S = mine + other.
    xbuf = {}
    for wg in range(2):
        for t in range(128):
            for nb in range(cfg.NB):
                for n in range(8):
                    xbuf[(wg * (BC // 8) + nb * 8 + n) * 128 + t] = s[wg][t][nb * 32 + n * 4 :
                                                                           nb * 32 + n * 4 + 4]
    full = [[None] * 128 for _ in range(2)]
    for wg in range(2):
        other = wg if mut("exchange_self") else 1 - wg
        for t in range(128):
            regs = list(s[wg][t])
            for nb in range(cfg.NB):
                for n in range(8):
                    x = xbuf[(other * (BC // 8) + nb * 8 + n) * 128 + t]
                    for e in range(4):
                        regs[nb * 32 + n * 4 + e] += x[e]
            full[wg][t] = regs

    S_ref = matmul([r[: cfg.DP] for r in q], transpose([r[: cfg.DP] for r in k[j * BC : j * BC + BC]]))
    errors = []
    # Every register of both warpgroups, at the (row, key) the softmax attributes to it.
    for wg in range(2):
        for t in range(128):
            lane, wq = t % 32, t // 32
            key0 = j * BC + (lane & 3) * 2
            for h in range(2):
                row = wq * 16 + (lane >> 2) + h * 8
                for nb in range(cfg.NB):
                    for n in range(8):
                        for e in range(2):
                            kof = nb * 64 + n * 8 + e
                            if mut("softmax_key_n4"):
                                kof = nb * 64 + n * 4 + e
                            val = full[wg][t][nb * 32 + n * 4 + h * 2 + e]
                            if val != S_ref[row][key0 + kof - j * BC]:
                                errors.append(("S", wg, t, h, nb, n, e))
    if errors:
        return errors

    # P: any exact function of S (the layouts are what is checked, not the softmax).
    def pfun(x):
        return (x % 5) - 2

    P_ref = [[pfun(x) for x in r] for r in S_ref]
    pa = [[[[[0, 0] for _ in range(4)] for _ in range(cfg.KS)] for _ in range(128)]
          for _ in range(2)]
    o = [[[[0] * 32 for _ in range(128)] for _ in range(cfg.NP)] for _ in range(2)]
    for wg in range(2):  # softmax epilogue: P into registers or into the shared P tile
        for t in range(128):
            for h in range(2):
                for nb in range(cfg.NB):
                    for n in range(8):
                        pr = [pfun(full[wg][t][nb * 32 + n * 4 + h * 2 + e]) for e in range(2)]
                        if cfg.PSMEM:
                            # warpgroup w stores the rows of h = w (both hold the same P)
                            if h == (0 if mut("psmem_rows_h") else wg):
                                lane, wq = t % 32, t // 32
                                row = wq * 16 + (lane >> 2) + h * 8
                                a = sP + tile_off(row, nb * 64 + n * 8 + (lane & 3) * 2, BR)
                                smem[a // 2 : a // 2 + 2] = pr
                        else:
                            i = h * 2 + (n & 1) if mut("pa_swap") else (n & 1) * 2 + h
                            pa[wg][t][nb * 4 + n // 2][i] = pr
    # (the kernel's first PV slot barrier separates the P stores from the PV wgmmas)
    for cs in range(cfg.NPS):
        gi = j * 2 * cfg.NPS + cfg.NPS + cs
        load_slot(cfg, smem, sSlot, gi, k, v, nkv)
        for wg in range(2):
            sv = sSlot + (gi % cfg.STAGES) * cfg.SLOT_BYTES + wg * cfg.PPS * cfg.PANEL
            for pp in range(cfg.PPS):
                for ks in range(cfg.KS):
                    if cfg.PSMEM:  # K-major like Q: panel ks // 4, 32 bytes per k16 step
                        A = hw_k_major(smem, desc_k(sP + (ks >> 2) * cfg.Q_PANEL + (ks & 3) * 32),
                                       64)
                    else:
                        A = a_from_regs([pa[wg][t][ks] for t in range(128)])
                    vstep = 8 * 128 if mut("v_step_8rows") else 16 * 128
                    B = hw_mn(smem, desc_mn(sv + pp * cfg.PANEL + ks * vstep), 64,
                              swapped=swapped_mn)
                    wgmma(o[wg][cs * cfg.PPS + pp], A, B)

    O_ref = matmul(P_ref, [r[: cfg.DP] for r in v[j * BC : j * BC + BC]])
    seen = [[False] * cfg.D for _ in range(BR)]
    for wg in range(2):
        for t in range(128):
            lane, wq = t % 32, t // 32
            for h in range(2):
                row = wq * 16 + (lane >> 2) + h * 8
                for c in range(cfg.NP):
                    for n in range(8):
                        col = (0 if mut("epi_no_half") else wg * cfg.DH) + c * 64 + n * 8 + \
                            (lane & 3) * 2
                        if col < cfg.D:
                            for e in range(2):
                                if o[wg][c][t][n * 4 + h * 2 + e] != O_ref[row][col + e]:
                                    errors.append(("O", wg, t, h, c, n, e))
                                seen[row][col + e] = True
    unseen = sum(not x for r in seen for x in r)
    if unseen:
        errors.append(("O not fully written", unseen))
    return errors


def ring_schedule(cfg, ntile):
    """The slot_sync protocol: returns the violations (empty = correct). Per step gi: wait until
    at most LA - 1 cp.async groups are pending, wgmma wait<1> (wait<0> at the end of the QK half
    and of the tile), barrier, load stage gi + LA into slot (gi + LA) % STAGES, issue wgmma group
    gi on slot gi % STAGES."""
    S, LA = cfg.STAGES, cfg.LA
    if mut("lookahead_too_far"):
        LA = S - 1
    total = ntile * 2 * cfg.NPS
    committed = []  # stage loaded by each cp.async group (None: empty group)
    slot_of = {}  # slot -> stage it holds
    bad = []
    for s in range(LA):
        committed.append(s if s < total else None)
        slot_of[s % S] = s
    wg_done = -1  # every wgmma group <= this is complete (after the barrier)
    for gi in range(total):
        done_groups = len(committed) - (LA - 1)
        if gi >= done_groups:
            bad.append(("stage not landed", gi))
        wg_done = max(wg_done, gi - 2)  # wgmma wait<1> before the barrier
        nxt = gi + LA
        slot = nxt % S
        prev = slot_of.get(slot)
        if prev is not None and prev > wg_done:
            bad.append(("slot overwritten while read", gi, prev))
        if slot_of.get(gi % S) != gi:
            bad.append(("slot holds another stage", gi))
        committed.append(nxt if nxt < total else None)
        if nxt < total:
            slot_of[slot] = nxt
        rem = gi % (2 * cfg.NPS)
        if rem == cfg.NPS - 1 or rem == 2 * cfg.NPS - 1:
            wg_done = gi  # wait<0> after QK and after PV
    return bad


MUTATIONS = [
    "no_xor", "swizzle_64b", "lbo_sbo_fields_swapped", "sbo_512", "no_align", "slot_no_half",
    "kk_16", "exchange_self", "softmax_key_n4", "pa_swap", "v_step_8rows", "epi_no_half",
    "lookahead_too_far", "slot_panel_order", "psmem_rows_h",
]


def check_all(quick=False):
    rng = random.Random(1)
    fails = []
    cases = [(64, 64, 3, 1, 0, 50, 0), (320, 64, 8, 1, 0, 130, 1), (512, 64, 6, 1, 0, 64, 0),
             (136, 128, 3, 1, 0, 200, 1), (512, 64, 4, 2, 0, 100, 1), (320, 64, 3, 3, 0, 70, 0),
             (320, 64, 8, 1, 1, 130, 1), (136, 128, 3, 1, 1, 200, 0)]
    if quick:
        cases = [(320, 64, 8, 1, 0, 130, 1), (136, 128, 3, 1, 0, 200, 1),
                 (512, 64, 4, 2, 0, 100, 1), (136, 128, 3, 1, 1, 200, 0)]
    for D, BC, ST, PPS, PSMEM, nkv, j in cases:
        cfg = Cfg(D, BC, ST, PPS, PSMEM)
        for swapped in (False, True):
            e = run(cfg, rng, nkv, j=j, swapped_mn=swapped)
            if e:
                fails.append((D, BC, swapped, e[:3]))
        for ntile in (1, 2, 5):
            b = ring_schedule(cfg, ntile)
            if b:
                fails.append((D, BC, "ring", ntile, b[:3]))
    return fails


def main():
    fails = check_all()
    if fails:
        print("FAILED:", fails)
        return 1
    print("exact: S = QK^T, O = PV, exchange, fragments, ring schedule "
          "(D 64/136/320/512, Bc 64/128, panels 1/2/3, P in registers and in shared memory)")
    ok = True
    for m in MUTATIONS:
        MUT.clear()
        MUT.add(m)
        caught = bool(check_all(quick=True))
        print(f"mutation {m:24s} {'caught' if caught else 'NOT CAUGHT'}")
        ok &= caught
    MUT.clear()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
