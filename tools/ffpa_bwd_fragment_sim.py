# Fragment-level emulation of kernels/ffpa_bwd.cuh for one query tile (no GPU needed): the
# swizzled shared-memory tiles (tile_off), ldmatrix x2/x4 (.trans), mma.sync m16n8k16 fragment
# layouts and the kernel's address formulas, transcribed. Checks S = QK^T, dP = dO V^T (phase 1)
# and dV = Pd^T dO, dK = dS^T Q, dQ = dS K (phase 2) exactly on small integers.
# usage: python3 tools/ffpa_bwd_fragment_sim.py D Br Bc warps Wr Kd   (prints 'all ok' or asserts)
# Run before committing a layout change: mutating one address formula makes it fail.
# Fragment-level emulation of kernels/ffpa_bwd.cuh's shared-memory layouts, ldmatrix and mma
# for one query tile: checks S, dP, dV, dK, dQ against numpy.
import sys, random
D, BR, BC, NW, WR, CW = [int(x) for x in sys.argv[1:7]]
G = NW // 2; WC = G // WR; R1 = BR // WR; M1 = R1 // 16; C1 = BC // WC; N1 = C1 // 8
DP = (D + CW - 1) // CW * CW; NCH = DP // CW; NBLK = (D + 15) // 16; NBW = (NBLK + NW - 1) // NW
MK = BC // 16; KR = BR // 16; KC = BC // 16; BCP = (BC + 63) // 64 * 64
KV = BC * DP * 2; QO = BR * DP * 2; PS = BR * BCP * 2
random.seed(0)
def rnd(r, c): return [[float(random.randint(-3, 3)) for _ in range(c)] for _ in range(r)]
def T(A): return [list(x) for x in zip(*A)]
def mm(A, B):
    Bt = T(B); return [[sum(a * b for a, b in zip(r, c)) for c in Bt] for r in A]
Q = rnd(BR, D); dO = rnd(BR, D); K = rnd(BC, D); V = rnd(BC, D)
SM = [float('nan')] * ((2 * KV + 2 * QO + 2 * PS) // 2)
sK, sV, sQ, sO = 0, KV, 2 * KV, 2 * KV + QO; sP = sO + QO; sS = sP + PS
def tile_off(row, col, rows):
    return ((((col >> 6) * rows + row) << 7) + ((((col >> 3) & 7) ^ (row & 7)) << 4) + ((col & 7) << 1))
def store(base, M, rows, cols_p):
    for r in range(rows):
        for c in range(cols_p):
            SM[(base + tile_off(r, c, rows)) // 2] = M[r][c] if c < len(M[0]) else 0.0
store(sK, K, BC, DP); store(sV, V, BC, DP); store(sQ, Q, BR, DP); store(sO, dO, BR, DP)
def ldsm(addrs, n, trans):  # addrs: 32 byte addresses; returns frags[t][j] = (lo, hi)
    out = [[None] * n for _ in range(32)]
    for j in range(n):
        Mj = [[SM[(addrs[8 * j + i] + 2 * e) // 2] for e in range(8)] for i in range(8)]
        assert addrs[8*j] % 16 == 0
        for t in range(32):
            g, c = t // 4, t % 4
            out[t][j] = (Mj[2 * c][g], Mj[2 * c + 1][g]) if trans else (Mj[g][2 * c], Mj[g][2 * c + 1])
    return out
def mma(C, A, b0, b1):  # C[t] 4 floats, A[t] 4 pairs, b0[t], b1[t] pairs
    Am = [[None] * 16 for _ in range(16)]; Bm = [[None] * 8 for _ in range(16)]
    for t in range(32):
        g, c = t // 4, t % 4
        for h in range(2):
            Am[g][2*c+h] = A[t][0][h]; Am[g+8][2*c+h] = A[t][1][h]
            Am[g][2*c+8+h] = A[t][2][h]; Am[g+8][2*c+8+h] = A[t][3][h]
            Bm[2*c+h][g] = b0[t][h]; Bm[2*c+8+h][g] = b1[t][h]
    Cm = mm(Am, Bm)
    for t in range(32):
        g, c = t // 4, t % 4
        C[t][0] += Cm[g][2*c]; C[t][1] += Cm[g][2*c+1]; C[t][2] += Cm[g+8][2*c]; C[t][3] += Cm[g+8][2*c+1]
def sel(fr, j): return [fr[t][j] for t in range(32)]
def quad(fr, j0): return [[fr[t][j0 + e] for e in range(4)] for t in range(32)]
# phase 1
S_ref = mm(Q, T(K)); dP_ref = mm(dO, T(V))
accs = {}
for warp in range(NW):
    is_s = warp < G; w1 = warp % G; wr = w1 // WC; wc = w1 % WC
    aA = [(sQ if is_s else sO) + (wr * R1 + (l & 15)) * 128 + (((l >> 4) ^ (l & 7)) << 4) for l in range(32)]
    aB = [(sK if is_s else sV) + (wc * C1 + (l & 7) + (l >> 4) * 8) * 128 + ((((l >> 3) & 1) ^ (l & 7)) << 4) for l in range(32)]
    acc = [[[0.0] * 4 for _ in range(32)] for _ in range(M1 * N1)]
    for kg in range(DP // 16):
        a = [ldsm([(x ^ ((kg & 3) << 5)) + (kg >> 2) * BR * 128 + mt * 16 * 128 for x in aA], 4, False) for mt in range(M1)]
        ns = 0
        while ns + 1 < N1:
            bf = ldsm([(x ^ ((kg & 3) << 5)) + (kg >> 2) * BC * 128 + ns * 8 * 128 for x in aB], 4, False)
            for mt in range(M1):
                mma(acc[mt * N1 + ns], quad(a[mt], 0), sel(bf, 0), sel(bf, 1))
                mma(acc[mt * N1 + ns + 1], quad(a[mt], 0), sel(bf, 2), sel(bf, 3))
            ns += 2
        if N1 % 2:
            bf = ldsm([(x ^ ((kg & 3) << 5)) + (kg >> 2) * BC * 128 + (N1 - 1) * 8 * 128 for x in aB[:16]] + [0] * 16, 2, False)
            for mt in range(M1): mma(acc[mt * N1 + N1 - 1], quad(a[mt], 0), sel(bf, 0), sel(bf, 1))
    ref = S_ref if is_s else dP_ref
    for mt in range(M1):
        for ns in range(N1):
            for t in range(32):
                for e in range(4):
                    row = wr * R1 + mt * 16 + (t >> 2) + (e >> 1) * 8; col = wc * C1 + ns * 8 + (t & 3) * 2 + (e & 1)
                    assert acc[mt * N1 + ns][t][e] == ref[row][col], ("phase1", warp, mt, ns, t, e)
print("phase 1 ok")
# P and dS: arbitrary values, stored as the S warps do
Pd = rnd(BR, BC); dS = rnd(BR, BC)
for row in range(BR):
    for col in range(0, BC, 2):
        for base, M in ((sP, Pd), (sS, dS)):
            o = (base + tile_off(row, col, BR)) // 2; SM[o] = M[row][col]; SM[o + 1] = M[row][col + 1]
dV_ref = mm(T(Pd), dO); dK_ref = mm(T(dS), Q); dQ_ref = mm(dS, K)
for warp in range(NW):
    dv = [[[[0.0] * 4 for _ in range(32)] for _ in range(2)] for _ in range(NBW * MK)]
    dk = [[[[0.0] * 4 for _ in range(32)] for _ in range(2)] for _ in range(NBW * MK)]
    for src, dst, accu, rows_dst in ((sP, sO, dv, BR), (sS, sQ, dk, BR)):
        for k in range(KR):
            a = [ldsm([src + tile_off(k * 16 + (l & 7) + ((l >> 4) & 1) * 8, m * 16 + ((l >> 3) & 1) * 8, BR) for l in range(32)], 4, True) for m in range(MK)]
            for j in range(NBW):
                blk = warp + NW * j
                if blk >= NBLK: break
                bf = ldsm([dst + tile_off(k * 16 + (l & 7) + ((l >> 3) & 1) * 8, blk * 16 + (l >> 4) * 8, BR) for l in range(32)], 4, True)
                for m in range(MK):
                    mma(accu[j * MK + m][0], quad(a[m], 0), sel(bf, 0), sel(bf, 1))
                    mma(accu[j * MK + m][1], quad(a[m], 0), sel(bf, 2), sel(bf, 3))
    for j in range(NBW):
        blk = warp + NW * j
        if blk >= NBLK: break
        for m in range(MK):
            for n in range(2):
                for t in range(32):
                    for e in range(4):
                        key = m * 16 + (t >> 2) + (e >> 1) * 8; col = blk * 16 + n * 8 + (t & 3) * 2 + (e & 1)
                        if col >= D: continue
                        assert dv[j * MK + m][n][t][e] == dV_ref[key][col], ("dV", warp, j, m, n, t, e)
                        assert dk[j * MK + m][n][t][e] == dK_ref[key][col], ("dK", warp, j, m, n, t, e)
        bk = [ldsm([sK + tile_off(k * 16 + (l & 7) + ((l >> 3) & 1) * 8, blk * 16 + (l >> 4) * 8, BC) for l in range(32)], 4, True) for k in range(KC)]
        for m in range(KR):
            q = [[[0.0] * 4 for _ in range(32)] for _ in range(2)]
            for k in range(KC):
                a = ldsm([sS + tile_off(m * 16 + (l & 15), k * 16 + (l >> 4) * 8, BR) for l in range(32)], 4, False)
                mma(q[0], quad(a, 0), sel(bk[k], 0), sel(bk[k], 1)); mma(q[1], quad(a, 0), sel(bk[k], 2), sel(bk[k], 3))
            for n in range(2):
                for t in range(32):
                    for e in range(4):
                        row = m * 16 + (t >> 2) + (e >> 1) * 8; col = blk * 16 + n * 8 + (t & 3) * 2 + (e & 1)
                        if col < D: assert q[n][t][e] == dQ_ref[row][col], ("dQ", warp, m, n, t, e)
print("phase 2 ok")
# key column sums: lanes 0..3 after xor 4, 8, 16 hold column (lane)*2+e of the warp's ns tile
print("all ok", sys.argv[1:7])
