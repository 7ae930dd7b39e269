# usage: python3 tools/ffpa_bwd_element_sim.py   (no GPU; prints 'element emulation ok' or asserts)
# Transcribes kernels/ffpa_bwd.cuh's per-element logic; keep the two in step when either changes.
# Element-level emulation of ffpa_bwd_kernel's control flow and index logic (row packing, causal
# skip, masks, bias offsets, dropout element indices, dS, dBias modes, dQ/dK/dV targets) against a
# direct reference. GEMM fragment layouts are covered by ffpa_bwd_fragment_sim.py.
import math, random, sys
M32 = 0xffffffff
def philox(c, k0, k1):
    c = list(c)
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]; p1 = 0xCD9E8D57 * c[2]
        hi0, lo0 = p0 >> 32, p0 & M32; hi1, lo1 = p1 >> 32, p1 & M32
        c = [(hi1 ^ c[1] ^ k0) & M32, lo1, (hi0 ^ c[3] ^ k1) & M32, lo0]
        k0 = (k0 + 0x9E3779B9) & M32; k1 = (k1 + 0xBB67AE85) & M32
    return c
def uniform(seed, g):
    ctr = g >> 2
    r = philox([ctr & M32, ctr >> 32, 0, 0], seed & M32, seed >> 32)
    return r[g & 3] * 2.3283064e-10 + 2.3283064e-10 / 2
def run(B, Hq, Hkv, Nq, Nkv, D, BR, BC, causal, bias_kind, dropout, seed=3):
    rnd = random.Random(seed)
    g = Hq // Hkv
    Q = [[[[rnd.gauss(0, 1) for _ in range(D)] for _ in range(Nq)] for _ in range(Hq)] for _ in range(B)]
    dO = [[[[rnd.gauss(0, 1) for _ in range(D)] for _ in range(Nq)] for _ in range(Hq)] for _ in range(B)]
    K = [[[[rnd.gauss(0, 1) for _ in range(D)] for _ in range(Nkv)] for _ in range(Hkv)] for _ in range(B)]
    V = [[[[rnd.gauss(0, 1) for _ in range(D)] for _ in range(Nkv)] for _ in range(Hkv)] for _ in range(B)]
    bias = {}
    def bidx(b, h, r, k):  # bias strides as AttnTensors sets them
        if bias_kind == 'key': return k
        if bias_kind == 'qk': return r * Nkv + k
        return ((b * Hq + h) * Nq + r) * Nkv + k
    nb = {'none': 0, 'key': Nkv, 'qk': Nq * Nkv, 'full': B * Hq * Nq * Nkv}[bias_kind]
    bias = [rnd.gauss(0, 0.25) for _ in range(nb)]
    scale = 1 / math.sqrt(D); sd, off = 0x1234abcd5678ef01, 12345
    keep_scale = 1 / (1 - dropout) if dropout > 0 else 1.0
    diag = Nkv - Nq if causal == 1 else 0
    def vis(r, k): return causal == 0 or k <= r + diag
    def dot(a, b): return sum(x * y for x, y in zip(a, b))
    # reference (cpu_reference.cpp's algorithm)
    ref_dq = [[[[0.0] * D for _ in range(Nq)] for _ in range(Hq)] for _ in range(B)]
    ref_dk = [[[[0.0] * D for _ in range(Nkv)] for _ in range(Hkv)] for _ in range(B)]
    ref_dv = [[[[0.0] * D for _ in range(Nkv)] for _ in range(Hkv)] for _ in range(B)]
    ref_db = [0.0] * nb
    lse = {}; delta = {}
    for b in range(B):
        for h in range(Hq):
            hk = h // g
            for i in range(Nq):
                ks = [k for k in range(Nkv) if vis(i, k)]
                if not ks: lse[(b, h, i)] = -math.inf; delta[(b, h, i)] = 0.0; continue
                sc = {k: dot(Q[b][h][i], K[b][hk][k]) * scale + (bias[bidx(b, h, i, k)] if nb else 0) for k in ks}
                m = max(sc.values()); l = m + math.log(sum(math.exp(x - m) for x in sc.values()))
                lse[(b, h, i)] = l
                pr = {k: math.exp(sc[k] - l) for k in ks}
                mult = {k: (0.0 if dropout > 0 and not uniform(sd, off + ((b * Hq + h) * Nq + i) * Nkv + k) > dropout else keep_scale) for k in ks}
                O = [sum(pr[k] * mult[k] * V[b][hk][k][d] for k in ks) for d in range(D)]
                dl = dot(dO[b][h][i], O); delta[(b, h, i)] = dl
                for k in ks:
                    dp = dot(dO[b][h][i], V[b][hk][k]); ds = pr[k] * (dp * mult[k] - dl)
                    for d in range(D):
                        ref_dq[b][h][i][d] += scale * ds * K[b][hk][k][d]
                        ref_dk[b][hk][k][d] += scale * ds * Q[b][h][i][d]
                        ref_dv[b][hk][k][d] += pr[k] * mult[k] * dO[b][h][i][d]
                    if nb: ref_db[bidx(b, h, i, k)] += ds
    # kernel emulation
    dq = [[[[0.0] * D for _ in range(Nq)] for _ in range(Hq)] for _ in range(B)]
    dk = [[[[None] * D for _ in range(Nkv)] for _ in range(Hkv)] for _ in range(B)]
    dv = [[[[None] * D for _ in range(Nkv)] for _ in range(Hkv)] for _ in range(B)]
    db_acc = [0.0] * nb; db_full = [0.0] * nb  # memset 0
    rows_total = g * Nq; ntile = (rows_total + BR - 1) // BR; LOG2E = 1.4426950408889634
    for b in range(B):
        for kvh in range(Hkv):
            for n0 in range(0, Nkv, BC):
                adk = [[0.0] * D for _ in range(BC)]; adv = [[0.0] * D for _ in range(BC)]; colsum = [0.0] * BC
                for t in range(ntile):
                    m0 = t * BR
                    if causal:
                        i_hi = min(m0 + BR, rows_total) - 1
                        r_hi = Nq - 1 if m0 // Nq != i_hi // Nq else i_hi % Nq
                        if r_hi + diag < n0: continue
                    tab = []
                    for row in range(BR):
                        i = m0 + row; r = -1; hq = kvh * g; L = math.inf; dl = 0.0
                        if i < rows_total:
                            r = i % Nq; hq += i // Nq
                            x = lse[(b, hq, r)]
                            if x != -math.inf: L = x * LOG2E
                            dl = delta[(b, hq, r)]
                        tab.append((r, hq, L, dl))
                    for row in range(BR):
                        r, hq, L, dl = tab[row]
                        qv = Q[b][hq][r] if r >= 0 else [0.0] * D; ov = dO[b][hq][r] if r >= 0 else [0.0] * D
                        for c in range(BC):
                            key = n0 + c
                            kv = K[b][kvh][key] if key < Nkv else [0.0] * D; vv = V[b][kvh][key] if key < Nkv else [0.0] * D
                            s = dot(qv, kv); dp = dot(ov, vv)
                            key0 = n0 + (c // 2) * 2; kof = c - (c // 2) * 2  # pair base, as (lane & 3) * 2
                            kv_lim = Nkv - key0; causal_lim = r + diag - key0
                            x = s * scale * LOG2E
                            if nb and kof < kv_lim: x += bias[bidx(b, hq, max(r, 0), key0 + kof)] * LOG2E
                            masked = kof >= kv_lim or (causal and kof > causal_lim)
                            p = 0.0 if masked else 2 ** (x - L)
                            if dropout > 0:
                                gpos = off + ((b * Hq + hq) * Nq + max(r, 0)) * Nkv + key0 + kof
                                kept = p != 0.0 and uniform(sd, gpos) > dropout
                                pd = p * keep_scale if kept else 0.0
                            else:
                                pd = p
                            ds = pd * dp - p * dl
                            if nb and bias_kind == 'key': colsum[c] += ds
                            if nb and bias_kind in ('qk', 'full') and r >= 0 and key < Nkv:
                                if bias_kind == 'qk': db_acc[r * Nkv + key] += ds
                                else: db_full[bidx(b, hq, r, key)] = ds
                            for d in range(D):
                                adv[c][d] += pd * ov[d]; adk[c][d] += ds * qv[d]
                                if r >= 0: dq[b][hq][r][d] += scale * ds * kv[d]
                for c in range(BC):
                    key = n0 + c
                    if key >= Nkv: continue
                    for d in range(D):
                        dk[b][kvh][key][d] = adk[c][d] * scale; dv[b][kvh][key][d] = adv[c][d]
                    if nb and bias_kind == 'key': db_acc[key] += colsum[c]
    db = db_full if bias_kind == 'full' else db_acc
    err = 0.0
    for b in range(B):
        for h in range(Hq):
            for i in range(Nq):
                for d in range(D): err = max(err, abs(dq[b][h][i][d] - ref_dq[b][h][i][d]))
        for h in range(Hkv):
            for k in range(Nkv):
                for d in range(D):
                    err = max(err, abs(dk[b][h][k][d] - ref_dk[b][h][k][d]), abs(dv[b][h][k][d] - ref_dv[b][h][k][d]))
    for j in range(nb): err = max(err, abs(db[j] - ref_db[j]))
    return err
cases = []
for causal in (0, 1, 2):
    for bias_kind in ('none', 'key', 'qk', 'full'):
        for dropout in (0.0, 0.3):
            cases.append((2, 4, 2, 5, 7, 4, 4, 4, causal, bias_kind, dropout))
cases += [(1, 4, 1, 1, 9, 4, 16, 4, 1, 'key', 0.2), (2, 2, 2, 9, 3, 4, 4, 2, 1, 'full', 0.0),
          (1, 6, 2, 3, 11, 4, 4, 4, 2, 'qk', 0.5), (1, 2, 2, 7, 7, 4, 8, 4, 1, 'none', 0.0)]
worst = 0
for cs in cases:
    e = run(*cs); worst = max(worst, e)
    assert e < 1e-9, (cs, e)
print("element emulation ok:", len(cases), "cases, max err", worst)
