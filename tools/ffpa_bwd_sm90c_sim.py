#!/usr/bin/env python3
"""Pure-Python transcription of kernels/ffpa_bwd_sm90c.cuh's data movement for one cluster (two
blocks splitting D, one key tile of BC keys, every query tile of a GQA group), checked exactly on
small integers, plus a check of its synchronization protocol, for both values of the knob xbuf
(FFPA_XBUF: one exchange buffer, or two taking turns).

The kernel transcribed is the one of 2026-12-04 (commit ccf8215: key-major dK and dV at
bc = 64, quarters of D rounded up to 64 rather than 256) with the split exchange: S's and dP's
sums exchanged apart, each on mbarriers of its own, S's (xbuf = 2) as soon as its wgmmas retire
and P computed while dP's sums travel.

What is transcribed from the kernel (each formula as written there):
  - the geometry: KM = (BC == 64); a warpgroup's quarter DQ = D rounded up to 64 (KM) or to 256
    (bc = 32), over 4; DC = 2 DQ global columns a block, [rank DC, + DC); NP = ceil(DQ / 64)
    shared-memory panels a quarter, each quarter from a panel of its own (smem_col(lc) =
    lc / DQ NP 64 + lc % DQ), so that MN-major operands over a quarter start on a swizzle atom;
    the shared layout is DP = 4 NP 64 columns wide (ffpa_bwd_sm90c_layout.h); LAST8 = (DQ -
    (NP - 1) 64) / 8 n8 groups in a quarter's last panel. The shared columns of a last panel
    past DQ are never loaded: they hold garbage (POISON) here, so any read of them shows;
  - per block: the 1024-byte align-up, the K/V load of the block's DC columns at their smem_col
    (kv_granule), stage()'s decode of a Q/dO granule (group g, quarter, panel, row, quarter
    column qc, skipped when qc >= DQ, shared column quarter NP 64 + qc, global column cbase +
    quarter DQ + qc), the row tables (two parities), the order of the query tiles (each
    cluster from its own first tile, j span / clusters with span = one q head's tiles, wrapping
    around the group's) and the causal tile
    skip (next_tile, the same in both blocks);
  - the start address and descriptor of every wgmma: S and dP (K-major, m64nBCk16, k16 steps
    only while panel 64 + kk 16 < DQ); KM: dV += Pd^T dO[:, quarter] and dK += dS^T Q[:, quarter]
    (m64n(DQ)k16, 4 k-steps over the query rows: A = P^T / dS^T K-major, B = dO / Q MN-major over
    the quarter's panels, desc_mn_wide with LBO = Q_PANEL between the 64-column atoms); bc = 32:
    dV^T and dK^T a panel at a time (A = dO^T / Q^T MN-major, B = P^T / dS^T K-major,
    m64nBCk16); dQ chunks (A = dS^T MN-major, B = K MN-major, BC / 16 k-steps, m64n64k16 except
    a quarter's last chunk, m64n(8 LAST8)k16 on the first LAST8 groups of the accumulator, whose
    other groups keep what they held: the previous chunk's values here);
  - the exchange buffers: xbuf buffers of X_SLOTS = 2 NN 128 float4 slots, S's half (the first
    X_SLOTS / 2) then dP's; in a half, slot (w NN / 2 + n / 2) 128 + t128 holds a thread's n8
    groups n, n + 1 (n even). With ex = the query tiles the cluster has done so far and par =
    ex & 1, the block exchange uses buffer xe = (xbuf == 2 ? par : 0): warpgroup w stores its
    h = 1 - w partials into its slots w of the half, the other warpgroup loads them from its
    slots 1 - w and adds its h = w partials; the other block's sums land in buffer xr =
    (xbuf == 2 ? par ^ 1 : 0): each thread's sums of S into its slots w of S's half of buffer xr
    of the other block, those of dP into the same slots of dP's half, its dropout keep bits into
    keep slot (xbuf == 2 ? par : 0) * 256 + tid there; after its waits it reads the same slots of
    its own buffer xr;
  - the (row, key) of each P/dS value with the masks, the P^T/dS^T stores (stmatrix .trans: per
    lane, the key row it addresses and the 8 values it receives from the warp's fragments),
    dBias by rank 0 only;
  - the dQ reduction into the fp32 workspace dq_accum, in the layout the host picks:
    FFPA_DQ_TILED = the quarter (src/variants/ffpa_bwd_sm90c.cpp's quarter(D, bc)) exactly when
    D padded to 256 is at most 512 (dq_tiled), the tiled layout of kernels/ffpa_bwd_aux.cuh;
    past 512 (bc = 32 only) 0, the row-major [B, Hq, Nq, D] one.
    Tiled: blocks of 64 x 64 floats per (b, kv head, query tile, chunk = quarter QCHUNKS + the
    quarter's 64-column chunk), QCHUNKS = ceil(DQ / 64), 4 QCHUNKS chunks a query tile; each
    thread's fragment of chunk c goes, one n8 group at a time (of the last chunk only the groups
    n < LAST8), as a 4-float reduction to dq_block(b, kvh, query tile t, (rank 2 + wg) NP + c)
    + ((warp 8 + n) 32 + lane) 4, with no lane exchange and no bounds check; the pre kernel
    zeroes and the convert kernel reads through dq_offset (row (b, hq, r), column col < D:
    qc = col % DQ, chunk col / DQ QCHUNKS + qc / 64, in-block column qc & 63); the workspace has
    the host's dq_accum_floats floats (tiles 4 NP 4096 a b and kv head: the host's D padded to
    256 over 64 is 4 NP for both forms).
    Row-major: lane pairs swap half their fragment, the block's and warpgroup's columns, offset
    lrow D + col, bounds checks r >= 0 and col < D;
  - the dK/dV epilogue: KM a u32 pair of columns of a key (key 16 warp + lane / 4 + 8 h, column
    cbase + wg DQ + 8 j + 2 (lane % 4)), guarded by key < Nkv and column < D; bc = 32 transposed
    (a column of D, two keys a pair).
The hardware model (descriptors, K-major and MN-major 128-byte swizzle layouts, the m64nNk16
accumulator fragment) is tools/ffpa_fwd_sm90_sim.py's, as for tools/ffpa_bwd_sm90_sim.py (both
kernels passed their GPU tests first time). Its MN-major reading puts column n of an operand at
(n // 64) LBO + 2 (n % 64) (CUTLASS's canonical ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))), which the
key-major dV/dK B operand (N = DQ up to 128, not always whole atoms: 48, 80, 112) relies on; the
bc = 32 form and the dQ chunks use N <= 64 from an atom's start, as before.

Phase 1 split by keys (ksplit = 1, FFPA_KSPLIT = 1; bc = 64): warpgroup wg computes S and dP
over all of its block's columns (both parts' panels of each Q/dO group) for keys [32 wg, + 32)
(m64n32, K and V from row 32 wg). In the cluster (xbuf = 2) there is no block exchange: each
thread sends its whole S and dP partials (registers 4 n .. 4 n + 3 as the float4 of slot
(wg NN / 2 + n) 128 + t128 of S's or dP's half of the other block's buffer xr, on the same
mbarriers, bytes and keep slots as the exchange path), block `rank` draws the keep bits of its
threads' row h = rank and receives the other row's; P and dS as below, dBias by rank 0.

One block a key tile (cluster = 1, FFPA_CLUSTER = 1, with ksplit = 1; bc = 64, xbuf = 1): the block holds the
whole D, a warpgroup's part is half of D rounded up to 32 (DQ = part(D, bc, 1)), the block's
shared columns 2 NP 64 and no exchange buffers or keep sets (the host's xbuf argument 0). Phase 1
runs over both halves' panels of each Q/dO group (hh = 0, 1), with K and V from row 32 wg
(m64n32: the warpgroup's keys); there is no exchange: each thread computes P, Pd and dS of its
four n8 groups for both of its rows (registers 4 n + 2 h + e) with key0 = n0 + 32 wg + 2 (lane %
4), dBias in its one block, and stores them by one stmatrix .trans per row half (lane l: key
32 wg + l). dq_accum is tiled by 2 halves (FFPA_DQ_PARTS = 2, the chunk of dq_block (wg NP + c)).
Everything after P^T and dS^T (dV, dK, the dQ chunks and reductions, the staging, the epilogue)
is the cluster's code with rank 0.

The knobs dqbuf and dqlag are not modelled: one dQ chunk accumulator a warpgroup (FFPA_DQBUF =
1) and every chunk reduced within its own tile (FFPA_DQLAG = 0), chunk 0 before the next tile's
staging and the others after it, as the kernel orders them.

Exact integers stand in for the arithmetic, as in tools/ffpa_bwd_sm90_sim.py: P = ((S + L) % 5)
+ 1, dS = Pd dP - P delta, a hash for the dropout decision, 2 for 1 / (1 - p); dBias of a key
bias = the column sums of dS.

Protocol modelled (the kernel's, per block; both blocks do the same query tiles): thread 0 of
each block initializes its four mbarriers (8 bytes apart at LAYOUT.full: S's of parity 0 and 1,
then dP's) and one cluster barrier follows, at kernel start (none at the end). Per query tile,
with the mbarriers of parity par:
  - xbuf = 1: S's and dP's block exchanges in their halves of buffer 0 (stores, __syncthreads,
    loads); barrier A, a cluster barrier (the kernel arrives after the block exchange loads and
    waits before the remote stores; nothing in between touches a logged location, so it is one
    point here); S's sums sent, then dP's and the keep word;
  - xbuf = 2, no cluster barrier in the tile loop: S's block exchange in buffer xe (stores,
    __syncthreads, loads) and S's sums sent, while dP's wgmmas run (the last Q/dO group's, a
    commit group of their own); then dP's block exchange in its half of xe with a __syncthreads
    of its own, and dP's sums and the keep word sent.
Each thread's st.async stores of S's sums (NN / 2 float4) complete their bytes on the other
block's S mbarrier, those of dP's (NN / 2 float4, and a keep word with dropout) on its dP
mbarrier; then thread 0 arrives on its own two with expect_tx of XS_BYTES = 256 NN 8 and
XD_BYTES = 256 NN 8 (+ 256 4 with dropout). Every thread waits on S's mbarrier with parity
(ex >> 1) & 1, adds the received S of buffer xr and computes P; then waits on dP's, reads its keep
slot and adds the received dP (then Pd, dS). The blocks run in lockstep here, block 0 before
block 1 within each step, so that an mbarrier sees both orders of the arrival and the bytes
(S's at xbuf = 2 excepted: their bytes come a step before either block's expect_tx).

Checks of the protocol:
  - races: every access to the exchange slots, the keep slots, P^T/dS^T and the mbarriers (their
    initialization a plain store, each st.async's complete_tx and the expect_tx an atomic update)
    is logged with its block, thread, program position, the block's barrier count (block and
    cluster barriers), the cluster's barrier count, the block's count of send events (a send
    event: its st.async stores of a tile's S sums, or of its dP sums with the keep words) and
    the count of the other block's send events its waits have acquired. Two accesses to the same
    location, one a write and not both atomic, must be ordered: the same thread in program
    order; the same block across a block barrier; a cluster barrier between them; or, across
    blocks, the earlier one came before a send event (everything the sending block did up to
    and including those st.async stores: complete_tx releases, and every thread's bytes are
    needed) whose phase the later one's block had waited for (the wait acquires) - that is, the
    send count of the earlier access < the acquired count of the later one. The st.async stores
    are logged as accesses of the sending block before their send event. So S's wait orders
    only what the other block did before its S sends: at xbuf = 2 not its dP block exchange.
    Every read must also see the write the kernel means (the data check).
  - mbarrier phases: each mbarrier's phase, pending arrival and transaction byte count are
    modelled; a wait must find the phase of its tile complete and its parity the one asked for
    (else it would hang or pass early), and each block must have waited for S and dP of every
    tile sent to it (so no store reaches a block that has exited) with its four mbarriers
    between phases.
  - phase overrun: the lockstep order cannot show another block's stores arriving early, so the
    happened-before knowledge is tracked instead: a block's sends of S (dP) of tile k may
    complete on the other block's S (dP) mbarrier b only if the other block's wait for the tile
    that used b before (k - 2, an mbarrier per parity) is known to have happened before them,
    learnt through the waits (a wait for S or dP of tile k learns the sender's wait count at
    that send event) and cluster barriers (each block learns the other's). With no cluster
    barrier (xbuf = 2) this is the chain: the other block's wait of k - 2, then its sends of
    k - 1, whose waits this block did at tile k - 1, before its sends of k.
  - both blocks meet the same barriers (every thread of both blocks executes the same sequence).

Checks of the tiled dq_accum (its addresses only; the values by the exact comparison). The cluster
is placed at the last batch and kv head of a shape of 2 batches and 2 kv heads, so that its blocks
are the last of the workspace. The workspace is a map from address to value: the positions the
pre kernel zeroes hold 0, any other garbage. Padding elements (packed rows past the GQA group's
end, columns past D) carry zeros here (no P for those rows, zero K past D), so the comparison
with the reference cannot see where they land (nor, under a change such as dq_last_chunk_full,
where the groups of a last chunk past the quarter land); hence:
  - dq_offset over every row and column < D of the whole shape stays inside the workspace and
    gives each element its own address (no two elements, of any head or batch, share one);
  - every address the main kernel reduces into lies in [0, dq_accum_floats);
  - each reduced value is identified by the hardware fragment (the row and column the register
    holds, in the query tile and chunk the warp really computed, not by the writer's formula;
    none where the chunk's wgmma did not write the register's n8 group or its column is past the
    quarter): a real element must land exactly at its dq_offset position, a padding element at
    no position dq_offset gives any element. With dq_offset injective this makes the writer's
    map of the real elements injective and disjoint from the padding's.
The result is read back as the convert kernel does, through dq_offset for every row of the kv
head and column < D, and compared exactly with the reference.

Then every mutation in MUTATIONS (one wrong formula or a missing synchronization each) must make a
check fail; the kind of the failed checks is printed. Each entry of HARMLESS (a change that the
checks show to be harmless, kept to record why the kernel's form is a choice, not a necessity)
must pass them. A case's problem and reference do not depend on the knobs or the mutations: each
is drawn (seeded by the case) and computed once.
Run: python3 tools/ffpa_bwd_sm90c_sim.py
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffpa_fwd_sm90_sim import acc_pos, hw_k_major, hw_mn, matmul, transpose  # noqa: E402

BR, NT = 64, 256
# m64nNk16 fragment, N up to 128 (the key-major dV, dK at D = 512): register r of thread t holds
# (row, col) = ACC_POS[t][r]
ACC_POS = [[acc_pos(t, r) for r in range(80)] for t in range(128)]  # up to m64n160
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


def desc_mn_wide(addr, atom):
    """wgmma.cuh's MN-major operand over several 64-column atoms `atom` bytes apart (LBO)."""
    return make_desc(addr, 1024 if mut("mn_wide_lbo_1024") else atom, 1024)


class Cfg:
    def __init__(self, D, BC, PPG=1, XB=1, CL=2, KS=0):
        self.D, self.BC, self.PPG, self.XB, self.CL, self.KS = D, BC, PPG, XB, CL, KS
        self.NN = BC // 8
        # KM (64 keys): dK, dV key-major and quarters of D rounded up to 64; 32 keys: transposed,
        # quarters of D padded to 256 (multiples of 64). CL = 1 (one block a key tile, bc = 64):
        # a warpgroup's part is half of D rounded up to 32
        self.KM = BC == 64
        assert CL == 2 or (CL == 1 and KS and XB == 1)
        assert not KS or (self.KM and (CL == 1 or XB == 2))
        self.DQ = part(D, BC, CL)
        self.DC = 2 * self.DQ
        self.NP = (self.DQ + 63) // 64  # panels of a part, each part from its own
        # the block's shared columns (ffpa_bwd_sm90c_layout.h's dc, the host's 2 part_panels 64)
        self.BW = 2 * self.NP * 64
        # CL = 2: the host's padded(D) is the cluster's columns, the same layout
        assert CL == 1 or 2 * self.BW == padded(D)
        # n8 groups of a warpgroup's S and dP: KS splits the keys between the warpgroups
        self.NS = self.NN // 2 if KS else self.NN
        self.PARTS = 2 * CL  # FFPA_DQ_PARTS
        last8 = (self.DQ % 64 if mut("last8_mod") else self.DQ - (self.NP - 1) * 64) // 8
        self.LAST8 = last8  # n8 groups of a quarter's last panel (its last dQ chunk)
        # xbuf = 2 does not fit beside the tiles of D padded past 768 (the host's smem check)
        assert XB == 1 or XB == 2 and padded(D) <= 768
        assert self.DQ % 16 == 0 and (self.KM or self.DQ % 64 == 0)
        # dV, dK accumulators: [1][DQ / 8] key-major, [NP][NN] transposed (one m64nBC a panel)
        self.DVX, self.DVY = (1, self.DQ // 8) if self.KM else (self.NP, self.NN)
        assert self.NP % PPG == 0 and self.DVX * self.DVY <= 32 and (CL == 2 or self.DQ <= 160)
        self.NG = self.NP // PPG
        self.KV_PANEL, self.Q_PANEL = BC * 128, BR * 128
        self.KV_BYTES, self.Q_BYTES = BC * self.BW * 2, BR * self.BW * 2
        self.PT_BYTES = BC * BR * 2
        self.X_SLOTS = 2 * self.NN * 128  # float4 slots of an exchange buffer
        self.ROW_BYTES = BR * 8
        # ffpa_bwd_sm90c_layout.h: xbuf exchange buffers, row tables, xbuf keep sets, 4 mbarriers
        # (CL = 1: the host's xbuf argument is 0, no exchange buffer or keep set)
        self.XL = XB if CL == 2 else 0
        self.SMEM = (1024 + 2 * self.KV_BYTES + 2 * self.Q_BYTES + 2 * self.PT_BYTES +
                     self.XL * self.X_SLOTS * 16 + 2 * self.ROW_BYTES + self.XL * NT * 4 + 32)
        # FFPA_DQ_TILED, as the host sets it: the part where dq_accum is tiled, else 0; the
        # kernel's static_asserts: key-major only tiled, and the tiled layout's part is DQ
        self.TILED = part(D, BC, CL) if dq_tiled(D) else 0
        assert (not self.KM or self.TILED) and self.TILED in (0, self.DQ)

    def smem_col(self, lc):
        """The kernel's smem_col: shared column of the block's column lc (each quarter from a
        panel of its own, so that MN-major operands over it start on a swizzle atom)."""
        if mut("smem_col_no_quarter_align"):
            return lc
        return lc // self.DQ * (self.NP * 64) + lc % self.DQ


class Prob:
    """One kv head of batch 0: group q heads of Nq rows, Nkv keys; causal 0, 1 (bottom-right),
    2 (top-left); dropout; a key bias (its dBias: dS column sums). For the addresses of the tiled
    dq_accum only, the shape has B = 2 batches and Hkv = 2 kv heads and the cluster is at the last
    of them (b = 1, kvh = 1), so that its blocks end the workspace; the other heads' data are not
    modelled."""

    def __init__(self, group, Nq, Nkv, causal, rng, D, dropout=False):
        self.group, self.Nq, self.Nkv, self.causal = group, Nq, Nkv, causal
        self.dropout, self.offset = dropout, 12345
        self.Hq = group
        self.B, self.Hkv, self.b, self.kvh = 2, 2, 1, 1
        rnd = lambda: rng.randint(-2, 2)  # noqa: E731
        self.q = [[[rnd() for _ in range(D)] for _ in range(Nq)] for _ in range(group)]
        self.do = [[[rnd() for _ in range(D)] for _ in range(Nq)] for _ in range(group)]
        self.k = [[rnd() for _ in range(D)] for _ in range(Nkv)]
        self.v = [[rnd() for _ in range(D)] for _ in range(Nkv)]
        diag = Nkv - Nq if causal == 1 else 0
        self.L = [[None if causal and r + diag < 0 else rng.randint(0, 4) for r in range(Nq)]
                  for _ in range(group)]
        self.delta = [[rng.randint(-3, 3) for _ in range(Nq)] for _ in range(group)]


def padded(D):
    """src/variants/ffpa_bwd_sm90c.cpp's padded: D padded to 256."""
    return (D + 255) // 256 * 256


def quarter(D, bc):
    """src/variants/ffpa_bwd_sm90c.cpp's quarter: the columns of a warpgroup's quarter of D."""
    return ((D + 63) // 64 * 64 if bc == 64 else padded(D)) // 4


def part(D, bc, cl):
    """src/variants/ffpa_bwd_sm90c.cpp's part: a warpgroup's columns, a quarter, or with
    cluster = 1 a half of D rounded up to 32."""
    return (D + 31) // 32 * 16 if cl == 1 else quarter(D, bc)


def dq_tiled(D):
    """src/variants/ffpa_bwd_sm90c.cpp's dq_tiled: dq_accum tiled up to D padded to 512."""
    return padded(D) <= 512


def dq_accum_floats(pr, D, cl):
    """src/variants/ffpa_bwd_sm90c.cpp's dq_accum_floats (0: bwd::make_op's row-major size):
    2 cluster part_panels chunks a query tile."""
    if not dq_tiled(D):
        return 0
    rows = pr.group * pr.Nq
    if mut("dq_floats_rows_unpadded"):  # the packed rows not rounded up to whole query tiles
        return pr.B * pr.Hkv * rows * padded(D)
    tiles = (rows + 63) // 64
    chunks = 2 * cl * ((part(D, 64, cl) + 63) // 64)
    return pr.B * pr.Hkv * tiles * chunks * 64 * 64


def dq_block(pr, dqt, parts, b, kvh, tile, chunk):
    """kernels/ffpa_bwd_aux.cuh's dq_block (FFPA_DQ_TILED = dqt, the part; FFPA_DQ_PARTS =
    parts): the first float of the 64 x 64 block of query tile `tile` (64 packed rows of the GQA
    group) and chunk `chunk` (part * QCHUNKS + the part's 64-column chunk) of kv head kvh."""
    qchunks = (dqt + 63) // 64
    tiles = ((pr.Nq if mut("dq_tiles_per_head") else pr.group * pr.Nq) + 63) // 64
    return ((((b * pr.Hkv + kvh) * tiles + tile) * (parts * qchunks) + chunk) * 4096)


def dq_offset(pr, dqt, parts, b, hq, r, col):
    """kernels/ffpa_bwd_aux.cuh's dq_offset: row (b, hq, r), columns col, col + 1 (col even)."""
    kvh = hq // pr.group
    i = (hq - kvh * pr.group) * pr.Nq + r
    qchunks = (dqt + 63) // 64
    if mut("dq_offset_chunk_of_d"):  # chunks of D, not of the quarter (the layout before KM)
        qc, chunk = col, col >> 6
    else:
        qc = col % dqt
        chunk = col // dqt * qchunks + qc // 64
    row, c = i & 63, qc & 63
    lane = (row & 7) * 4 + ((c & 7) >> 1)
    return (dq_block(pr, dqt, parts, b, kvh, i >> 6, chunk) +
            (((row >> 4) * 8 + (c >> 3)) * 32 + lane) * 4 + ((row >> 3) & 1) * 2)


_DQ_OWNERS = {}


def dq_owners(pr, D, dqt, parts):
    """The pre kernel's zeroing and the convert kernel's reads of the tiled dq_accum (quarter
    dqt), over every row (b, hq, r) of the shape and column < D: {address: (b, hq, r, col)}, with
    the errors found (two elements at one address, an address outside the workspace). Cached per
    shape."""
    key = (pr.B, pr.Hkv, pr.group, pr.Nq, D, dqt, parts, mut("dq_tiles_per_head"),
           mut("dq_floats_rows_unpadded"), mut("dq_offset_chunk_of_d"))
    if key not in _DQ_OWNERS:
        owners, errs = {}, []
        floats = dq_accum_floats(pr, D, parts // 2)
        for b in range(pr.B):
            for hq in range(pr.Hkv * pr.group):
                for r in range(pr.Nq):
                    for col in range(0, D, 2):  # the pre kernel's c = lane * 2; c < D; c += 64
                        a = dq_offset(pr, dqt, parts, b, hq, r, col)
                        if not (0 <= a and a + 1 < floats) and len(errs) < 3:
                            errs.append(("dq_offset outside the workspace", b, hq, r, col, a))
                        for e in range(2):
                            if a + e in owners and len(errs) < 3:
                                errs.append(("dq_offset not injective", owners[a + e],
                                             (b, hq, r, col + e)))
                            owners[a + e] = (b, hq, r, col + e)
        _DQ_OWNERS[key] = owners, errs
    return _DQ_OWNERS[key]


def pfun(s, l):
    return 0 if l is None else ((s + l) % 5) + 1


def keep(g):
    return (g * 2654435761 >> 7) % 3 != 0


DSCALE = 2


def pd_ds(p_, dmv, dl, kept):
    """The kernel's Pd and dS of an element from P, dP and delta: with dropout (kept: the keep
    bit; None without) Pd = P keep / (1 - p), dS = Pd dP - P delta; else Pd = P, dS = P (dP -
    delta)."""
    if kept is None:
        return p_, p_ * (dmv - dl)
    pd = p_ * DSCALE if kept else 0
    return pd, pd * dmv - p_ * dl


class Log:
    """Race and protocol check: accesses per location, each (write, block, thread, seq, sync,
    csync, sends, acq, atomic); the mbarriers; the happened-before knowledge of waits. A block's
    send events are its st.async stores of one half (S's, dP's with the keep bits) of a tile,
    numbered in its program order; a wait for a half of a tile acquires the other block's send
    event of it (whose bytes the phase counts: else the byte counts show)."""

    def __init__(self):
        self.acc = {}
        self.races = []
        self.errs = []
        self.seq = {}
        self.sync = [0, 0]  # per block: block barriers passed (a cluster barrier is one too)
        self.csync = 0  # cluster barriers passed
        self.sends = [0, 0]  # per block: send events it has issued
        self.acq = [0, 0]  # per block: the other block's send events known to precede (waits)
        self.sent = [{}, {}]  # per block: {(tile, half): the number of its send event}
        self.sent_at = {}  # (block, tile, half): the block's waits completed at that send event
        self.waits = [[], []]  # per block: the (tile, half) of each completed wait, in order
        self.seen = [0, 0]  # per block: waits of the other block known to have happened before
        self.last = {}  # (receiving block, mbarrier): the last (tile, half) whose bytes went to it
        self.mbar = [[[0, 1, 0] for _ in range(4)] for _ in range(2)]  # [phases, arrivals, tx]
        self.uses = [[0] * 4 for _ in range(2)]  # per block and mbarrier: phases expected so far

    def access(self, loc, write, block, thread, atomic=False):
        s = self.seq[(block, thread)] = self.seq.get((block, thread), 0) + 1
        a = (write, block, thread, s, self.sync[block], self.csync, self.sends[block],
             self.acq[block], atomic)
        for b in self.acc.setdefault(loc, []):
            if not (write or b[0]) or atomic and b[8]:
                continue  # two reads, or two mbarrier updates (atomic)
            if b[1] == block:
                ordered = b[2] == thread or b[4] < a[4]
            else:  # a cluster barrier, or b precedes a send event that a's block has acquired
                ordered = b[5] < a[5] or b[6] < a[7]
            if not ordered:
                self.races.append((loc, b[:3], a[:3]))
        self.acc[loc].append(a)
        if len(self.acc[loc]) > 16:  # older accesses are ordered before these by now
            del self.acc[loc][:8]

    def block_sync(self, block):
        self.sync[block] += 1

    def cluster_sync(self):
        self.csync += 1
        self.sync[0] += 1
        self.sync[1] += 1
        # each block's later accesses follow every wait the other block did before it
        self.seen = [max(self.seen[0], len(self.waits[1])), max(self.seen[1], len(self.waits[0]))]

    def mbar_update(self, block, bar, arrivals, tx):
        m = self.mbar[block][bar]
        m[1] -= arrivals
        m[2] += tx
        if m[1] == 0 and m[2] == 0:  # the phase completes: the next one expects 1 arrival
            m[0] += 1
            m[1] = 1

    def send(self, block, peer, k, half, bar):
        """Block `block` has issued its stores of the half of tile k into `peer`, completing on
        its mbarrier `bar`: the wait of the tile that used that mbarrier before must be known to
        have happened before them."""
        prev = self.last.get((peer, bar))
        if prev is not None and peer != block and prev not in self.waits[peer][:self.seen[block]]:
            self.errs.append(("stores may complete on a phase still pending", block, k, half,
                              bar, prev, self.seen[block]))
        self.last[peer, bar] = k, half
        self.sent[block][k, half] = self.sends[block]
        self.sent_at[block, k, half] = len(self.waits[block])
        self.sends[block] += 1

    def expect(self, block, bar, nbytes):  # thread 0's arrive.expect_tx
        self.uses[block][bar] += 1
        self.mbar_update(block, bar, 1, nbytes)

    def wait(self, block, k, half, bar, parity):
        u, m = self.uses[block][bar], self.mbar[block][bar]
        if m[0] != u:
            self.errs.append(("mbarrier wait: the tile's phase is not complete (hang)", block, k,
                              half, bar, m))
        elif (u - 1) & 1 != parity:
            self.errs.append(("mbarrier wait: parity of another phase", block, k, half, bar,
                              parity))
        self.waits[block].append((k, half))
        i = self.sent[block ^ 1].get((k, half))
        if i is not None:
            self.acq[block] = max(self.acq[block], i + 1)
            self.seen[block] = max(self.seen[block], self.sent_at[block ^ 1, k, half])


def run_cluster(cfg, pr, j, raw_base):
    """Runs key tile j through the transcribed kernel on both blocks; returns (dk, dv as
    {(key, d): value}, dq_accum {(lrow, d): value}, dbias {key: value}, errors)."""
    D, BC, NN, NP, NG, PPG, DC, DQ = (cfg.D, cfg.BC, cfg.NN, cfg.NP, cfg.NG, cfg.PPG, cfg.DC,
                                      cfg.DQ)
    NB = cfg.CL  # blocks of the key tile
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
    xb0 = sSt + cfg.PT_BYTES  # the exchange buffers: float4 slots, modelled as a dict per block
    full = xb0 + cfg.XL * cfg.X_SLOTS * 16 + 2 * cfg.ROW_BYTES + cfg.XL * NT * 4
    assert full % 8 == 0 and full + 4 * 8 <= raw_end  # mbarrier i at full + 8 i
    xs = [{}, {}]  # per block: {(buffer, slot): float4}
    keep_in = [{}, {}]  # per block: keep bits from the other block, {(keep set, tid): word}
    nothing = (POISON,) * 4  # a slot never written: shared memory holds garbage

    # thread 0 of each block initializes the four mbarriers; the start cluster barrier publishes
    # them to the other block, whose st.async stores complete on them
    if cfg.CL == 2:
        for rank in range(2):
            for bar in range(4):
                log.access((rank, "full", bar), True, rank, 0)
        if not mut("no_start_sync"):
            log.cluster_sync()

    n0 = j * BC
    rows_total = pr.group * pr.Nq
    diag = pr.Nkv - pr.Nq if pr.causal == 1 else 0
    ntile = (rows_total + BR - 1) // BR

    # K and V: granules over the block's DC columns, each at its quarter's shared column
    # (smem_col); the columns of a quarter's last panel past DQ are never loaded (they keep
    # POISON: a read of them shows)
    for rank in range(NB):
        cbase = (0 if mut("kv_no_cbase") else rank * DC)
        for tid in range(NT):
            for idx in range(tid, BC * DC // 8, NT):
                row, lc = idx // (DC // 8), (idx % (DC // 8)) * 8
                col = cbase + lc
                key = n0 + row
                ok = key < pr.Nkv and col < D
                off = tile_off(row, cfg.smem_col(lc), BC)
                for e in range(8):
                    st(rank, sK + off + 2 * e, pr.k[key][col + e] if ok else 0)
                    st(rank, sV + off + 2 * e, pr.v[key][col + e] if ok else 0)

    # cluster j starts at query tile j span / clusters (the kernel's (x / 2) span / (grid x / 2))
    # and wraps around: position k visits tile_at(k)
    nclusters = (pr.Nkv + BC - 1) // BC
    # the starts span one q head's tiles (the group's under the mutation)
    span = ntile if mut("span_whole_group") else min((pr.Nq + BR - 1) // BR, ntile)

    def tile_at(k, rank):
        if mut("start_per_rank"):  # from the block's x, not the cluster's
            start = (2 * j + rank) * span // (2 * nclusters)
        else:
            start = j * span // nclusters
        return k + start - ntile if k + start >= ntile and not mut("no_wrap") else k + start

    def next_tile(k, rank):  # the first position from k whose tile sees a key of the tile
        nsk = n0 + (BC if mut("skip_per_rank") and rank else 0)
        while pr.causal and k < ntile:
            m0 = tile_at(k, rank) * BR
            i_hi = min(m0 + BR, rows_total) - 1
            r_hi = pr.Nq - 1 if m0 // pr.Nq != i_hi // pr.Nq else i_hi % pr.Nq
            if r_hi + diag >= nsk:
                break
            k += 1
        return k

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
                        # column qc of quarter q / PPG's panel g PPG + q % PPG; past the quarter
                        # not loaded (never read)
                        qr, pp = q // PPG, q % PPG
                        qc = (g * PPG + pp) * 64 + (tid & 7) * 8
                        if qc >= DQ:
                            continue
                        if mut("smem_col_no_quarter_align"):  # quarters packed: smem_col = lc
                            lc = qr * DQ + qc
                        else:
                            lc = (0 if mut("stage_no_quarter") else qr * NP * 64) + qc
                        col = cbase + (lc if mut("stage_col_smem") else qr * DQ + qc)
                        row = (tid >> 3) + jj * (NT // 8)
                        i = m0 + row
                        ok = i < rows_total and col < D
                        off = tile_off(row, lc, BR)
                        for e in range(8):
                            st(rank, sQ + off + 2 * e,
                               pr.q[i // pr.Nq][i % pr.Nq][col + e] if ok else 0)
                            st(rank, sO + off + 2 * e,
                               pr.do[i // pr.Nq][i % pr.Nq][col + e] if ok else 0)

    nreg = NN * 4  # registers of an m64nBC accumulator (S, dP; dV^T, dK^T of a panel)
    DVX, DVY = cfg.DVX, cfg.DVY
    dv = [[[[[0] * (DVY * 4) for _ in range(128)] for _ in range(DVX)] for _ in range(2)]
          for _ in range(2)]  # [rank][wg][c][t128][reg]: dv[DVX][DVY][4] of each thread
    dk = [[[[[0] * (DVY * 4) for _ in range(128)] for _ in range(DVX)] for _ in range(2)]
          for _ in range(2)]
    # the dQ chunk accumulator of each warpgroup (dqs[0]; DQB = 1): an m64nN wgmma of N < 64 (the
    # last chunk of a quarter) leaves the other n8 groups as they were, here the previous chunk's
    # values (garbage, uninitialized registers, at the first)
    dqs = [[[[POISON] * 32 for _ in range(128)] for _ in range(2)] for _ in range(2)]
    dq_w8 = [[0, 0], [0, 0]]  # the n8 groups the last wgmma of each accumulator wrote
    # dq_accum: row-major {(lrow, d): value}; tiled (cfg.TILED) {address: value}, every address
    # the pre kernel zeroes (dq_offset of each row and column < D) at 0, any other holds garbage
    # (POISON); dq_writes: each tiled write's (address, packed row i, column) of the element that
    # the accumulator register written there holds (the hardware fragment, not the writer's
    # formula)
    if cfg.TILED:
        dq_own, dq_errs = dq_owners(pr, D, cfg.TILED, cfg.PARTS)
        errors += dq_errs
        dq_accum = dict.fromkeys(dq_own, 0)
    else:
        dq_accum = {}
    dq_writes = []
    dbias = {}

    def wgmma(acc, A, B, nregs, first=False):
        """m64nNk16, N = nregs * 2, on the first nregs registers of each thread's accumulator;
        first: scale-d false (D = A B)."""
        C = matmul(A, B)
        for t in range(128):
            at, pos = acc[t], ACC_POS[t]  # acc_pos, tabulated
            for r in range(nregs):
                row, col = pos[r]
                at[r] = C[row][col] + (0 if first else at[r])

    def stmatrix_lane(rank, tid, off, val):
        """A lane's share of a stmatrix .trans into P^T and dS^T: the 8 query rows of the key
        row at off, row i's (Pd, dS) = val(i)."""
        for i in range(8):
            p_, ds = val(i)
            log.access((rank, "PtSt", off + 2 * i), True, rank, tid)
            st(rank, sPt + off + 2 * i, p_)
            st(rank, sSt + off + 2 * i, ds)

    def ks_exchange(row_of, s, dp, xr, ks, bar_s, bar_d, parity):
        """KS in the cluster: each thread's whole S and dP partials (registers 4 n .. 4 n + 3 as
        the float4 of slot (wg NN / 2 + n) 128 + t128 of the half) into the other block's buffer
        xr, st.async completing on its S or dP mbarrier; its keep bits of row h = rank into keep
        set ks there (with dP's); thread 0's expect_tx on its own two; the other block's
        partials added after the waits. Returns each thread's keep bits of rows 0 and 1."""
        X2 = cfg.X_SLOTS // 2

        def slots(half):
            """(wg, t128, n, slot) of every thread's float4 n in the half."""
            for wg in range(2):
                w = 0 if mut("ks_slot_no_wg") else wg * NN // 2
                for t128 in range(128):
                    for n in range(cfg.NS):
                        yield wg, t128, n, half + (w + n) * 128 + t128

        def send(rank, half, acc, bar):
            peer = rank ^ 1
            for wg, t128, n, slot in slots(half):
                log.access((peer, "x", xr, slot), True, rank, wg * 128 + t128)
                xs[peer][xr, slot] = tuple(acc[rank][wg][t128][4 * n:4 * n + 4])
                log.mbar_update(peer, bar, 0, -16)
                if n == cfg.NS - 1:
                    log.access((peer, "full", bar), True, rank, wg * 128 + t128, atomic=True)

        def recv(rank, half, acc):
            for wg, t128, n, slot in slots(half):
                log.access((rank, "x", xr, slot), False, rank, wg * 128 + t128)
                x = xs[rank].get((xr, slot), nothing)
                for e in range(4):
                    acc[rank][wg][t128][4 * n + e] += x[e]

        kmine = {}  # the keep bits a block draws: its threads' row h = rank (bit 2 n + e)
        for rank in range(2):
            h = 1 - rank if mut("ks_keep_row_other") else rank
            for wg in range(2):
                for t128 in range(128):
                    lane, wq = t128 % 32, t128 // 32
                    r, hq_row = row_of(wq * 16 + (lane >> 2) + 8 * h)
                    key0 = n0 + wg * (BC // 2) + (lane & 3) * 2
                    erow = ((0 * pr.Hq + hq_row) * pr.Nq + max(r, 0)) * pr.Nkv + key0
                    kb = 0
                    for n in range(cfg.NS):
                        for e in range(2):
                            kb |= keep(pr.offset + erow + n * 8 + e) << (2 * n + e)
                    kmine[rank, wg * 128 + t128] = kb
        for rank in range(2):
            send(rank, 0, s, bar_s)
            log.send(rank, rank ^ 1, ex, "S", bar_s)
        for rank in range(2):
            send(rank, X2, dp, bar_d)
            if pr.dropout:
                for tid in range(NT):
                    log.access((rank ^ 1, "keep", ks, tid), True, rank, tid)
                    keep_in[rank ^ 1][ks, tid] = kmine[rank, tid]
                    log.mbar_update(rank ^ 1, bar_d, 0, -4)
                    log.access((rank ^ 1, "full", bar_d), True, rank, tid, atomic=True)
            log.send(rank, rank ^ 1, ex, "dP", bar_d)
            for bar, nbytes in ((bar_s, NT * NN * 8),
                                (bar_d, NT * NN * 8 + (NT * 4 if pr.dropout else 0))):
                log.access((rank, "full", bar), True, rank, 0, atomic=True)
                log.expect(rank, bar, nbytes)
        for rank in range(2):
            log.wait(rank, ex, "S", bar_s, parity)
            recv(rank, 0, s)
        keeps = {}
        for rank in range(2):
            log.wait(rank, ex, "dP", bar_d, parity)
            for tid in range(NT):
                other = 0
                if pr.dropout:
                    log.access((rank, "keep", ks, tid), False, rank, tid)
                    other = keep_in[rank].get((ks, tid), POISON)
                mine = kmine[rank, tid]
                swap = rank == 0 if mut("ks_keep_merge_swapped") else rank == 1
                keeps[rank, tid] = (other, mine) if swap else (mine, other)
            recv(rank, X2, dp)
        return keeps

    def ks_pds(rank, tab, row_of, s, dp, dbias, keeps):
        """KS: warpgroup wg's S and dP hold whole sums (CL = 2: after ks_exchange) for its keys
        [32 wg, + 32) and both rows h = 0, 1 of a thread (registers 4 n + 2 h + e); P, Pd, dS of
        each with the keep bits of row h (CL = 2: keeps, as exchanged), dBias by rank 0, then
        P^T, dS^T by stmatrix .trans: for each warp and h, lane l addresses the warpgroup's key
        l (n8 group l / 8) of the warp's 8 rows of h and receives row i from lane 4 i +
        (l % 8) / 2, element (l % 8) & 1."""
        for wg in range(2):
            pds = {}  # (t128, n, h, e): the thread's Pd and dS
            for t128 in range(128):
                lane, wq = t128 % 32, t128 // 32
                key0 = n0 + (0 if mut("solo_key0_no_wg") else wg * (BC // 2)) + (lane & 3) * 2
                kv_lim = pr.Nkv - key0
                for h in range(2):
                    hr = 1 - h if mut("solo_rows_swapped") else h
                    row = wq * 16 + (lane >> 2) + 8 * hr
                    l, dl = tab[row]
                    r, hq_row = row_of(row)
                    causal_lim = r + diag - key0
                    erow = ((0 * pr.Hq + hq_row) * pr.Nq + max(r, 0)) * pr.Nkv + key0
                    for n in range(cfg.NS):
                        for e in range(2):
                            kof = n * 8 + e
                            masked = kof >= kv_lim or (pr.causal and kof > causal_lim)
                            reg = n * 4 + 2 * h + e
                            p_ = 0 if masked else pfun(s[rank][wg][t128][reg], l)
                            dmv = dp[rank][wg][t128][reg]
                            kept = None
                            if pr.dropout and keeps is None:
                                kept = keep(pr.offset + erow + n * 8 + e)
                            elif pr.dropout:
                                kept = keeps[rank, wg * 128 + t128][h] >> (2 * n + e) & 1
                            p_, ds = pd_ds(p_, dmv, dl, kept)
                            if (rank == 0 or mut("dbias_both")) and not kof >= kv_lim:
                                dbias[key0 + kof] = dbias.get(key0 + kof, 0) + ds
                            pds[t128, n, h, e] = p_, ds
            for wq in range(4):
                for h in range(2):
                    row0 = wq * 16 + h * 8
                    for lane in range(32):
                        m, jk = lane // 8, lane % 8
                        key = (0 if mut("solo_pt_no_keys") else wg * (BC // 2)) + 8 * m + jk
                        off = tile_off(key, row0, BC)
                        stmatrix_lane(rank, wg * 128 + wq * 32 + lane, off,
                                      lambda i: pds[wq * 32 + 4 * i + jk // 2, m, h, jk & 1])
        if not mut("no_pt_barrier"):
            log.block_sync(rank)

    if tile_at(0, 0) >= min((pr.Nq + BR - 1) // BR, ntile):
        errors.append(("the first query tile lies past a q head's tiles", tile_at(0, 0)))
    ks0 = [next_tile(0, rank) for rank in range(NB)] * (3 - NB)
    if ks0[0] != ks0[1] or ks0[0] < ntile and tile_at(ks0[0], 0) != tile_at(ks0[0], 1):
        errors.append(("blocks start on different tiles", ks0))
    k, ex = ks0[0], 0  # ex: query tiles done (both blocks do the same)
    if k < ntile:
        for rank in range(NB):
            stage(rank, tile_at(k, rank), 0)
    while k < ntile:
        t = tile_at(k, 0)
        par = t & 1 if mut("par_from_tile") else ex & 1
        # this tile's block exchange buffer, the buffer the other block's sums land in, the keep
        # set, the mbarriers (index 2 kind + parity: S's of parity 0, 1, then dP's, 8 bytes apart
        # at full) and the parity of their phase
        xe = par if cfg.XB == 2 else 0
        xr = xe if mut("xbuf2_same_buffer") else par ^ 1 if cfg.XB == 2 else 0
        ks = par if cfg.XB == 2 and not mut("keep_one_slot") else 0
        bpar = 0 if mut("one_mbarrier") else par
        bar_s, bar_d = bpar, 2 + bpar
        parity = ex & 1 if mut("one_mbarrier") else ((t if mut("par_from_tile") else ex) >> 1) & 1
        kns = [next_tile(k + 1, rank) for rank in range(NB)] * (3 - NB)
        if kns[0] != kns[1] or tile_at(k, 1) != t:
            errors.append(("blocks visit different tiles: a cluster barrier would hang", k, kns))
        kn = kns[0]
        m0 = t * BR

        def row_of(row):
            i = m0 + row
            return (i % pr.Nq if i < rows_total else -1), i // pr.Nq

        # phase 1 (after the group barriers). KS: warpgroup wg over both parts' panels of the
        # group, for its keys (rows 32 wg of K and V: m64n32)
        s = [[[[0] * nreg for _ in range(128)] for _ in range(2)] for _ in range(2)]
        dp = [[[[0] * nreg for _ in range(128)] for _ in range(2)] for _ in range(2)]
        nkeys = BC // 2 if cfg.KS else BC  # the N of S and dP
        for rank in range(NB):
            for g in range(NG):
                log.block_sync(rank)
                for wg in range(2):
                    pn = (0 if cfg.KS else wg * NP) + g * PPG
                    keys = wg * (BC // 2) * 128 if cfg.KS and not mut("solo_b_no_keys") else 0
                    sq, so = sQ + pn * cfg.Q_PANEL, sO + pn * cfg.Q_PANEL
                    sk, sv = sK + pn * cfg.KV_PANEL + keys, sV + pn * cfg.KV_PANEL + keys
                    for hh in range(2 if cfg.KS else 1):
                        for pp in range(PPG):
                            for kk in range(4):
                                # k16 steps past the part skipped (their columns are not loaded)
                                if ((g * PPG + pp) * 64 + kk * 16 >= DQ and
                                        not mut("phase1_no_skip")):
                                    continue
                                pnl = hh * NP + pp
                                for acc, a, b in ((s, sq, sk), (dp, so, sv)):
                                    A = hw_k_major(smem[rank],
                                                   desc_k(a + pnl * cfg.Q_PANEL + kk * 32), 64)
                                    Bt = hw_k_major(smem[rank],
                                                    desc_k(b + pnl * cfg.KV_PANEL + kk * 32),
                                                    nkeys)
                                    wgmma(acc[rank][wg], A, transpose(Bt), nkeys // 2)
        if cfg.KS:
            keeps = ks_exchange(row_of, s, dp, xr, ks, bar_s, bar_d, parity) if NB == 2 else None
            for rank in range(NB):
                ks_pds(rank, tables[(rank, par)], row_of, s, dp, dbias, keeps)
        else:
            # (xbuf = 2: the last group's dP wgmmas are a commit group of their own, retired after
            # S's block exchange and sends; the same values)
            # the exchange's slots: in each buffer the S half, then the dP half (from slot X2); in a
            # half, slot (w NN / 2 + n / 2) 128 + t128 holds the n8 groups n, n + 1 (n even)
            X2 = cfg.X_SLOTS // 2
            sm = [[[[0, 0] for _ in range(NN)] for _ in range(128)] for _ in range(4)]
            dm = [[[[0, 0] for _ in range(NN)] for _ in range(128)] for _ in range(4)]

            def hand_over(rank, half, a):
                """The block exchange's stores: each thread's h = 1 - wg partials of a (s or dp)
                into its slots wg of the half of buffer xe."""
                for wg in range(2):
                    sw = 1 - wg
                    for t128 in range(128):
                        r = a[rank][wg][t128]
                        for n in range(0, NN, 2):
                            slot = half + (wg * NN // 2 + n // 2) * 128 + t128
                            log.access((rank, "x", xe, slot), True, rank, wg * 128 + t128)
                            xs[rank][xe, slot] = (r[n * 4 + 2 * sw], r[n * 4 + 2 * sw + 1],
                                                  r[n * 4 + 4 + 2 * sw], r[n * 4 + 5 + 2 * sw])

            def take_over(rank, half, a, m):
                """The block exchange's loads: each thread's h = wg partials of a plus the other
                warpgroup's, from its slots 1 - wg of the half of buffer xe, into the sums m."""
                for wg in range(2):
                    for t128 in range(128):
                        r, mt = a[rank][wg][t128], m[rank * 2 + wg][t128]
                        for n in range(0, NN, 2):
                            slot = half + ((1 - wg) * NN // 2 + n // 2) * 128 + t128
                            log.access((rank, "x", xe, slot), False, rank, wg * 128 + t128)
                            x = xs[rank].get((xe, slot), nothing)
                            for e in range(2):
                                mt[n][e] = r[n * 4 + 2 * wg + e] + x[e]
                                mt[n + 1][e] = r[n * 4 + 4 + 2 * wg + e] + x[2 + e]

            def peer_of(rank):
                return rank if mut("cluster_to_self") else rank ^ 1

            def send(rank, half, m, bar):
                """The cluster exchange's stores of the sums m: each thread's into its slots wg of
                the half of the other block's buffer xr, st.async completing on its mbarrier bar."""
                peer = peer_of(rank)
                for wg in range(2):
                    w = 1 - wg if mut("cluster_slot_other_wg") else wg
                    for t128 in range(128):
                        mt = m[rank * 2 + wg][t128]
                        for n in range(0, NN, 2):
                            slot = half + (w * NN // 2 + n // 2) * 128 + t128
                            log.access((peer, "x", xr, slot), True, rank, wg * 128 + t128)
                            xs[peer][xr, slot] = (mt[n][0], mt[n][1], mt[n + 1][0], mt[n + 1][1])
                            log.mbar_update(peer, bar, 0, -16)
                        log.access((peer, "full", bar), True, rank, wg * 128 + t128, atomic=True)

            def send_keep(rank, bar):
                """Each thread's keep bits into its keep slot of set ks of the other block."""
                peer = peer_of(rank)
                for tid in range(NT):
                    log.access((peer, "keep", ks, tid), True, rank, tid)
                    keep_in[peer][ks, tid] = kmine[rank, tid]
                    log.mbar_update(peer, bar, 0, -4)
                    log.access((peer, "full", bar), True, rank, tid, atomic=True)

            def recv(rank, half, m):
                """The other block's sums, from the thread's slots wg of the half of buffer xr,
                added to m."""
                xrr = xe if mut("recv_wrong_buffer") else xr  # the buffer read
                for wg in range(2):
                    for t128 in range(128):
                        mt = m[rank * 2 + wg][t128]
                        for n in range(0, NN, 2):
                            slot = half + (wg * NN // 2 + n // 2) * 128 + t128
                            log.access((rank, "x", xrr, slot), False, rank, wg * 128 + t128)
                            x = xs[rank].get((xrr, slot), nothing)
                            for e in range(2):
                                mt[n][e] += x[e]
                                mt[n + 1][e] += x[2 + e]

            # bytes each mbarrier of a tile expects (thread 0's expect_tx, after its own sends)
            xs_bytes = NT * NN * 8
            xd_bytes = NT * NN * 8 + (NT * 4 if pr.dropout and not mut("x_bytes_no_keep") else 0)

            def expect(rank):
                for bar, nbytes in ((bar_s, xs_bytes), (bar_d, xd_bytes)):
                    log.access((rank, "full", bar), True, rank, 0, atomic=True)
                    log.expect(rank, bar, nbytes)

            # the dP half of xe for dP's block exchange (a mutation: the S half, whose loads at
            # xbuf = 2 no barrier separates from these stores)
            xd_half = 0 if mut("dp_exchange_in_s_half") else X2
            # S's block exchange (xbuf = 1: and dP's), a __syncthreads, the loads; xbuf = 2: S's
            # sums sent at once
            for rank in range(2):
                hand_over(rank, 0, s)
                if cfg.XB == 1:
                    hand_over(rank, xd_half, dp)
                log.block_sync(rank)
                take_over(rank, 0, s, sm)
                if cfg.XB == 2:
                    send(rank, 0, sm, bar_s)
                    log.send(rank, peer_of(rank), ex, "S", bar_s)
                else:
                    take_over(rank, xd_half, dp, dm)
            # dropout: each block draws the keep bits of its half of the n8 groups (xbuf = 2: while
            # dP's wgmmas run)
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
            if cfg.XB == 2:  # dP's block exchange, its own __syncthreads
                for rank in range(2):
                    hand_over(rank, xd_half, dp)
                    if not mut("no_dp_block_sync"):
                        log.block_sync(rank)
                    take_over(rank, xd_half, dp, dm)
            elif not mut("no_cluster_sync_a"):
                log.cluster_sync()  # barrier A
            # the cluster exchange's other stores: xbuf = 1 S's sums (S's mbarrier), then dP's sums
            # and the keep bits (dP's mbarrier); thread 0's expect_tx on both own mbarriers
            for rank in range(2):
                if cfg.XB == 1:
                    send(rank, 0, sm, bar_s)
                    log.send(rank, peer_of(rank), ex, "S", bar_s)
                send(rank, X2, dm, bar_s if mut("dp_on_s_barrier") else bar_d)
                if pr.dropout:
                    send_keep(rank, bar_s if mut("keep_on_s_barrier") else bar_d)
                log.send(rank, peer_of(rank), ex, "dP", bar_d)
                expect(rank)
            # the halves the received sums are read from (a mutation: swapped)
            rs_half, rd_half = (X2, 0) if mut("recv_halves_swapped") else (0, X2)
            # S's sums from the other block after the wait on S's mbarrier, then P (both blocks)
            for rank in range(2):
                if mut("s_read_before_wait"):
                    recv(rank, rs_half, sm)
                if not mut("no_mbar_wait"):
                    log.wait(rank, ex, "S", bar_s, parity)
                if not mut("s_read_before_wait"):
                    recv(rank, rs_half, sm)
            prs = [[[[0, 0] for _ in range(NN)] for _ in range(128)] for _ in range(4)]
            for rank in range(2):
                tab = tables[(rank, par)]
                for wg in range(2):
                    for t128 in range(128):
                        lane, wq = t128 % 32, t128 // 32
                        row = wq * 16 + (lane >> 2) + wg * 8
                        l = tab[row][0]
                        r = row_of(row)[0]
                        key0 = n0 + (lane & 3) * 2
                        causal_lim = r + diag - key0
                        kv_lim = pr.Nkv - key0
                        for n in range(NN):
                            for e in range(2):
                                kof = n * 8 + e
                                cm = kof >= causal_lim if mut("causal_ge") else kof > causal_lim
                                masked = kof >= kv_lim or (pr.causal and cm)
                                prs[rank * 2 + wg][t128][n][e] = (
                                    0 if masked else pfun(sm[rank * 2 + wg][t128][n][e], l))
            # dP's sums and the keep bits from the other block after the wait on dP's mbarrier
            kbits_all = {}
            for rank in range(2):
                if mut("dp_read_before_wait"):  # after S's wait only
                    recv(rank, rd_half, dm)
                if not mut("no_mbar_wait"):
                    log.wait(rank, ex, "dP", bar_d, parity)
                for tid in range(NT):
                    kb = kmine[rank, tid]
                    if pr.dropout and not mut("keep_not_merged"):
                        log.access((rank, "keep", ks, tid), False, rank, tid)
                        kb |= keep_in[rank].get((ks, tid), POISON)
                    kbits_all[rank, tid] = kb
                if not mut("dp_read_before_wait"):
                    recv(rank, rd_half, dm)
            # Pd, dS (both blocks), stored transposed
            for rank in range(2):
                tab = tables[(rank, par)]
                for wg in range(2):
                    pds = {}  # (t128, n, e): the thread's Pd and dS
                    for t128 in range(128):
                        lane, wq = t128 % 32, t128 // 32
                        dl = tab[wq * 16 + (lane >> 2) + wg * 8][1]
                        key0 = n0 + (lane & 3) * 2
                        kv_lim = pr.Nkv - key0
                        kbits = kbits_all[rank, wg * 128 + t128]
                        for n in range(NN):
                            for e in range(2):
                                kof = n * 8 + e
                                p_ = prs[rank * 2 + wg][t128][n][e]
                                dmv = dm[rank * 2 + wg][t128][n][e]
                                kept = kbits >> (2 * n + e) & 1 if pr.dropout else None
                                p_, ds = pd_ds(p_, dmv, dl, kept)
                                if (rank == 0 or mut("dbias_both")) and not kof >= kv_lim:
                                    dbias[key0 + kof] = dbias.get(key0 + kof, 0) + ds
                                pds[wg, t128, n, e] = p_, ds
                    # stmatrix .trans, four n8 groups an instruction: lane l addresses key 8 (4 q +
                    # l / 8) + l % 8 of the warp's 8 rows (row0) and receives that key's column of
                    # the four matrices: row i from lane 4 i + (l % 8) / 2, element (l % 8) & 1
                    for wq in range(4):
                        row0 = wq * 16 + wg * 8
                        for q in range(NN // 4):
                            for lane in range(32):
                                m, jk = 4 * q + lane // 8, lane % 8
                                off = tile_off(8 * m + jk, row0, BC)
                                def val(i):
                                    if mut("stmatrix_no_trans"):  # fragment rows as memory rows
                                        return pds[wg, wq * 32 + 4 * jk + i // 2, m, i & 1]
                                    return pds[wg, wq * 32 + 4 * i + jk // 2, m, jk & 1]
                                stmatrix_lane(rank, wg * 128 + wq * 32 + lane, off, val)
                if not mut("no_pt_barrier"):
                    log.block_sync(rank)

        def dq_chunk(rank, wg, c):
            """dq_issue(c) (dq_mma<LAST8> for the last chunk, else <8>): m64n(8 W8)k16, BC / 16
            k-steps, the first with scale-d false, on the first W8 n8 groups of the warpgroup's
            accumulator."""
            acc = dqs[rank][wg]
            w8 = cfg.LAST8 if c == NP - 1 or mut("dq_narrow_every_chunk") else 8
            dq_w8[rank][wg] = w8
            kp = sK + (wg * NP + c) * cfg.KV_PANEL
            if c == 0:  # the warpgroup's wgmmas of this interval read every element
                for off in range(0, cfg.PT_BYTES, 2):
                    log.access((rank, "PtSt", off), False, rank, wg * 128)
            for ks in range(2 if mut("dq_ksteps_2") else BC // 16):
                A = transpose(hw_mn(smem[rank], desc_mn(sSt + ks * 16 * 128), 64))
                B = hw_mn(smem[rank], desc_mn(kp + ks * 16 * 128), 8 * w8)
                wgmma(acc, A, B, 4 * w8, first=ks == 0)
            return acc

        def dq_reduce_tiled(rank, wg, c, acc):
            rk = 0 if mut("dq_no_cbase") else rank
            tq = ex if mut("dq_block_uses_ex") else t  # the query tile
            chunk = (rk * 2 + wg) * NP + c
            if mut("dq_chunk_no_np"):
                chunk = rk * 2 + wg + c
            elif mut("dq_chunk_from_column"):  # the form before KM: chunks of D by its column
                chunk = (rk * DC + wg * DQ) // 64 + c
            for t128 in range(128):
                lane, wq = t128 % 32, t128 // 32
                dst = (dq_block(pr, cfg.TILED, cfg.PARTS, pr.b, pr.kvh, tq, chunk) +
                       (wq * 8 * 32 + lane) * 4)
                if dst % 4:
                    errors.append(("red.v4 misaligned", dst))
                for n in range(8):  # red.add.v4 of dq[n][0..3] at dst + n * 32 * 4
                    if not (c < NP - 1 or n < cfg.LAST8 or mut("dq_last_chunk_full")):
                        continue  # the last chunk's groups past the quarter: not reduced
                    regs = [n * 4 + e for e in range(4)]
                    if mut("dq_tile_wrong_row_order"):  # the rows g and g + 8 swapped
                        regs = regs[2:] + regs[:2]
                    for e, reg in enumerate(regs):
                        a = dst + n * 32 * 4 + e
                        dq_accum[a] = dq_accum.get(a, POISON) + acc[t128][reg]
                        # the element the register holds (the hardware's fragment): column qc
                        # of the quarter if this chunk's wgmma wrote its group and qc < DQ; else
                        # none (an earlier chunk's value, or a K column past the quarter)
                        row, lc = ACC_POS[t128][reg]
                        qc = c * 64 + lc
                        real = reg < 4 * dq_w8[rank][wg] and qc < DQ
                        dq_writes.append((a, m0 + row, rank * DC + wg * DQ + qc if real else None))

        def dq_reduce(rank, wg, c, acc):
            if cfg.TILED:
                return dq_reduce_tiled(rank, wg, c, acc)
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

        for rank in range(NB):
            for wg in range(2):
                acc0 = dq_chunk(rank, wg, 0)
                so, sq = sO + wg * NP * cfg.Q_PANEL, sQ + wg * NP * cfg.Q_PANEL
                for c in range(DVX):
                    for ks in range(4):
                        for acc, a, b in ((dv, so, sPt), (dk, sq, sSt)):
                            if cfg.KM:
                                # dV += Pd^T dO[:, quarter], m64n(DQ)k16: A = P^T K-major (64
                                # keys by 16 query rows), B = dO's 16 rows by DQ columns,
                                # MN-major over the quarter's panels (LBO Q_PANEL)
                                A = hw_k_major(smem[rank], desc_k(b + ks * 32), BC)
                                B = hw_mn(smem[rank], desc_mn_wide(a + ks * 16 * 128,
                                                                   cfg.Q_PANEL), DQ)
                            else:  # dV^T[panel c] += dO[:, panel c]^T Pd, m64nBCk16
                                A = transpose(hw_mn(smem[rank], desc_mn(a + c * cfg.Q_PANEL +
                                                                        ks * 16 * 128), 64))
                                B = transpose(hw_k_major(smem[rank], desc_k(b + ks * 32), BC))
                            wgmma(acc[rank][wg][c], A, B, DVY * 4)
                dq_reduce(rank, wg, 0, acc0)
            log.block_sync(rank)
            if kn < ntile:
                stage(rank, tile_at(kn, rank), par ^ 1)
            for wg in range(2):
                for c in range(1, NP):
                    dq_reduce(rank, wg, c, dq_chunk(rank, wg, c))
        k = kn
        ex += 1

    if cfg.TILED:
        # every tiled write inside the workspace; a real element (packed row < group Nq, column
        # < D) only at its own dq_offset position (which the convert reads), a padding element
        # at no position that dq_offset gives any element of the shape
        floats = dq_accum_floats(pr, D, cfg.CL)
        bad = {}
        for a, i, col in dq_writes:
            if not 0 <= a < floats:
                bad.setdefault("dq write outside the workspace", (a, i, col, floats))
            o = dq_own.get(a)
            if i < rows_total and col is not None and col < D:
                if o != (pr.b, pr.kvh * pr.group + i // pr.Nq, i % pr.Nq, col):
                    bad.setdefault("dq real element off its dq_offset position", (a, i, col, o))
            elif o is not None:
                bad.setdefault("dq padding write on a real element's position", (a, i, col, o))
        errors += list(bad.items())
        # the convert kernel: every row of the kv head, columns col, col + 1 < D through dq_offset
        dq_out = {}
        for hl in range(pr.group):
            for r in range(pr.Nq):
                for col in range(0, D, 2):
                    a = dq_offset(pr, cfg.TILED, cfg.PARTS, pr.b, pr.kvh * pr.group + hl, r, col)
                    for e in range(2):
                        dq_out[(hl * pr.Nq + r, col + e)] = dq_accum.get(a + e, POISON)
        dq_accum = dq_out
    errors += [("race", x) for x in log.races[:3]]
    errors += log.errs[:3]
    if NB == 2 and log.sync[0] != log.sync[1]:
        errors.append(("block barrier counts differ", log.sync))
    for rank in range(NB if NB == 2 else 0):  # no end barrier: every store was waited for
        if (sorted(log.waits[rank]) != sorted(log.sent[rank ^ 1]) or
                any(m[1:] != [1, 0] for m in log.mbar[rank])):
            errors.append(("exchange stores not waited for at exit", rank, len(log.waits[rank]),
                           len(log.sent[rank ^ 1]), log.mbar[rank]))
    # epilogue: dK, dV of the key tile and each quarter (dK's f.scale is 1 here)
    dk_out, dv_out = {}, {}

    def put(key, col, k, v):
        if (key, col) in dk_out:
            errors.append(("dK written twice", key, col))
        dk_out[(key, col)], dv_out[(key, col)] = k, v

    for rank in range(NB):
        for wg in range(2):
            cbase = rank * DC
            for t128 in range(128):
                lane, wq = t128 % 32, t128 // 32
                if cfg.KM:  # rows: keys, columns: the quarter's; a pair is two columns of a key
                    for h in range(2):
                        for jn in range(DVY):
                            key = n0 + wq * 16 + (lane >> 2) + h * 8
                            col = cbase + wg * DQ + jn * 8 + (lane & 3) * 2
                            if mut("km_epilogue_transposed"):  # rows and columns swapped
                                key = n0 + jn * 8 + (lane & 3) * 2
                                col = cbase + wg * DQ + wq * 16 + (lane >> 2) + h * 8
                            if key >= pr.Nkv:
                                continue
                            if col >= D:
                                continue
                            if (col & 1) or col + 1 >= D:  # the u32 store of columns col, col + 1
                                errors.append(("dK pair store misaligned or past D", key, col))
                            for e in range(2):
                                put(key, col + e, dk[rank][wg][0][t128][jn * 4 + h * 2 + e],
                                    dv[rank][wg][0][t128][jn * 4 + h * 2 + e])
                    continue
                # transposed (rows: D, columns: keys): neighbours in a pair are two keys
                key0 = n0 + (lane & 3) * 2
                for c in range(DVX):
                    for h in range(2):
                        col = rank * DC + wg * DQ + c * 64 + wq * 16 + (lane >> 2) + h * 8
                        if col >= D:
                            continue
                        for n in range(DVY):
                            for e in range(2):
                                key = key0 + n * 8 + e
                                if key >= pr.Nkv:
                                    continue
                                put(key, col, dk[rank][wg][c][t128][n * 4 + h * 2 + e],
                                    dv[rank][wg][c][t128][n * 4 + h * 2 + e])
    return dk_out, dv_out, dq_accum, dbias, errors


def reference(D, BC, pr, j):
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


_CASES = {}


def case_data(D, BC, group, Nq, Nkv, causal, j, drop):
    """A case's problem, drawn from a generator seeded by the case, and its reference: neither
    depends on the knobs or the mutations, so each is made once."""
    key = (D, BC, group, Nq, Nkv, causal, j, drop)
    if key not in _CASES:
        pr = Prob(group, Nq, Nkv, causal, random.Random(repr(key)), D, drop)
        _CASES[key] = pr, reference(D, BC, pr, j)
    return _CASES[key]


def check_case(cfg, pr, j, ref, raw_base=0x410):
    dk, dv, dq, db, errors = run_cluster(cfg, pr, j, raw_base)
    rk, rv, rq, rb = ref
    dq_name = "dQ " + ("tiled" if cfg.TILED else "row-major")
    for name, got, want in (("dK", dk, rk), ("dV", dv, rv), (dq_name, dq, rq), ("dBias", db, rb)):
        got = {x: y for x, y in got.items() if y}  # a sum may cancel to 0: compare the nonzero
        want = {x: y for x, y in want.items() if y}
        if got != want:
            bad = [x for x in set(want) | set(got) if got.get(x) != want.get(x)]
            errors.append((name, len(bad), sorted(bad)[:3]))
    return errors


MUTATIONS = [
    "no_xor", "kv_no_cbase", "skip_per_rank", "stage_no_quarter", "dq_ksteps_2", "causal_ge",
    "cluster_to_self", "cluster_slot_other_wg", "no_cluster_sync_a", "no_pt_barrier",
    "dq_no_cbase", "dbias_both", "keep_same_half", "keep_not_merged",
    "xbuf2_same_buffer",  # xbuf = 2, the sums land in the block exchange buffer xe
    "keep_one_slot",      # xbuf = 2, keep bits always in keep set 0
    "no_mbar_wait",       # the received sums read without either wait
    "recv_wrong_buffer",  # xbuf = 2, the received sums read from xe
    "one_mbarrier",       # S's and dP's of parity 0 for every tile (parity ex & 1): needs barrier A
    "no_start_sync",      # no cluster barrier after the mbarrier init
    "x_bytes_no_keep",    # dP's expect_tx without the keep words
    "par_from_tile",      # buffers, mbarriers and row table by the tile's parity, not ex's
    # S and dP exchanged apart: halves of the buffers, an mbarrier each
    "dp_on_s_barrier",        # dP's sums complete on S's mbarrier: its bytes and dP's both wrong
    "keep_on_s_barrier",      # the keep words complete on S's mbarrier
    "s_read_before_wait",     # S's received sums read before S's wait
    "dp_read_before_wait",    # dP's received sums read after S's wait only
    "no_dp_block_sync",       # xbuf = 2, dP's block exchange without its __syncthreads
    "dp_exchange_in_s_half",  # dP's block exchange in S's half of xe (xbuf = 2: still being read)
    "recv_halves_swapped",    # the received S read from the dP half and dP from the S half
    # tiled dq_accum (D padded to at most 512); dq_no_cbase above applies to both layouts
    "dq_tile_wrong_row_order",  # the writer swaps the rows g and g + 8 of its fragment
    "dq_block_uses_ex",         # the writer's block of exchange ex, not of query tile t
    "dq_tiles_per_head",        # dq_block's tiles of one q head's rows: kv heads' blocks overlap
    "dq_floats_rows_unpadded",  # the host's workspace without the last tile's padding rows
    # quarters of D rounded up to 64 (bc = 64: key-major dK, dV)
    "smem_col_no_quarter_align",  # quarters packed in shared memory (smem_col = lc, stage alike)
    "stage_col_smem",             # a Q/dO granule's global column from its shared column
    "phase1_no_skip",             # S, dP k16 steps past the quarter (never-loaded columns)
    "mn_wide_lbo_1024",           # desc_mn_wide's LBO left at 1024 (desc_mn's)
    "km_epilogue_transposed",     # key-major epilogue with the transposed form's rows, columns
    "dq_chunk_no_np",             # the writer's chunk (rank 2 + wg) + c: quarters' chunks overlap
    "dq_chunk_from_column",       # the writer's chunk (cbase + wg DQ) / 64 + c, as before KM
    "dq_offset_chunk_of_d",       # dq_offset's chunk col / 64 (pre, convert), as before KM
    "dq_narrow_every_chunk",      # every dQ chunk's wgmma N = 8 LAST8, not only the last
    "last8_mod",                  # LAST8 = DQ % 64 / 8: 0 for a whole last panel
    # each cluster's own first query tile; P^T, dS^T by stmatrix .trans
    "start_per_rank",     # the first tile from the block's x: the blocks of a cluster differ
    "no_wrap",            # positions past the last tile not wrapped to the first ones
    "span_whole_group",   # the starts spread over the group's query tiles, not a head's
    "stmatrix_no_trans",  # stmatrix without .trans: the fragment's rows as memory rows
    # one block a key tile (cluster = 1)
    "solo_b_no_keys",     # phase 1's K and V from row 0 in both warpgroups, not from row 32 wg
    "solo_key0_no_wg",    # the thread's first key without its warpgroup's 32
    "solo_rows_swapped",  # registers 2 h + e read as the other row's
    "solo_pt_no_keys",    # P^T, dS^T stored at keys 0..31 by both warpgroups
    # phase 1 by keys in the cluster
    "ks_slot_no_wg",          # both warpgroups' partials in the same slots
    "ks_keep_row_other",      # a block draws the keep bits of row 1 - rank: both draw the same
    "ks_keep_merge_swapped",  # the own and the received keep bits in each other's row
]
# Changes that must stay harmless, checked like the mutations but expected to pass:
# dq_last_chunk_full reduces all 8 n8 groups of a quarter's last dQ chunk; the groups past
# LAST8 hold an earlier chunk's values (or garbage) but land at in-block columns >= 8 LAST8 of
# the quarter's last block, which dq_offset gives no element (qc & 63 < 8 LAST8 there): padding,
# never read. The kernel skips them for the reductions' cost alone.
HARMLESS = ["dq_last_chunk_full"]

# (D, BC, PPG, group, Nq, Nkv, causal, j, dropout); bc = 64: key-major, quarter DQ = D rounded up
# to 64, over 4; bc = 32: transposed, D padded to 256
BASE = [
    (64, 64, 1, 1, 50, 100, 0, 1, False),    # DQ 16; rows past the end, keys past Nkv, tile 1
    (136, 32, 1, 2, 40, 70, 1, 1, False),    # transposed DQ 64; GQA rows over two tiles
    (320, 64, 1, 1, 70, 45, 2, 0, False),    # DQ 80: two panels, the last 16 columns; top-left
    (512, 64, 2, 1, 100, 33, 1, 0, False),   # DQ 128 (m64n128); bottom-right, Nq > Nkv
    (576, 32, 1, 3, 30, 40, 1, 1, False),    # D padded to 768 (3 panels a quarter), 3 q heads
    (1024, 32, 2, 1, 20, 40, 0, 1, False),   # D = 1024, two panels a group (xbuf = 1 only)
    (136, 64, 1, 3, 30, 70, 1, 0, True),     # DQ 48: one panel, k16 steps 0..2; dropout, GQA
    (512, 32, 1, 2, 40, 50, 0, 1, True),     # transposed DQ 128, dropout, two panels
    (64, 32, 1, 1, 300, 40, 0, 0, True),     # 5 tiles: each buffer, keep set, mbarrier reused
    (64, 32, 1, 3, 150, 150, 2, 4, False),   # top-left, tiles 0, 1, 3, 5 skipped: ex != t
    (448, 64, 2, 2, 40, 80, 1, 1, False),    # DQ 112: panels 64 + 48, two a group; GQA
    (200, 64, 1, 1, 70, 64, 0, 0, True),     # DQ 64: one panel, D ends inside the last quarter
    (72, 64, 1, 2, 40, 60, 2, 0, False),     # DQ 32: the last quarter wholly past D; top-left
    (320, 32, 1, 1, 50, 40, 0, 1, False),    # transposed at D 320: DQ 128 (padded to 512)
    (64, 64, 1, 2, 128, 200, 1, 3, False),   # GQA: the starts span one q head's tiles
]
# Phase 1 by keys in the cluster (ksplit = 1, xbuf = 2): quarters as in BASE, each thread's
# whole partials exchanged
KSC = [
    (512, 64, 2, 1, 100, 33, 1, 0, False),   # quarters of 128 (m64n128), two panels a group
    (320, 64, 1, 1, 70, 45, 2, 0, True),     # quarters of 80; top-left, dropout
    (136, 64, 1, 3, 30, 70, 1, 0, True),     # quarters of 48, 3 q heads, dropout
    (64, 64, 1, 1, 300, 100, 0, 0, True),    # 5 tiles: each buffer, keep set, mbarrier reused
    (72, 64, 1, 2, 40, 60, 2, 0, False),     # the last quarter wholly past D; top-left
    (448, 64, 2, 2, 40, 80, 1, 1, False),    # quarters of 112: panels 64 + 48; GQA
]
# One block a key tile (cluster = 1, bc = 64): halves of D rounded up to 32, S and dP by keys
SOLO = [
    (64, 64, 1, 1, 50, 100, 0, 1, False),    # halves of 32; rows past the end, keys past Nkv
    (320, 64, 1, 1, 70, 45, 2, 0, False),    # halves of 160: panels 64, 64, 32; top-left
    (320, 64, 3, 2, 40, 80, 1, 1, True),     # three panels a group; GQA, bottom-right, dropout
    (72, 64, 1, 2, 40, 60, 2, 0, False),     # halves of 48: D ends inside the second
    (200, 64, 1, 1, 70, 64, 0, 0, True),     # halves of 112: panels 64 + 48; dropout
    (136, 64, 1, 3, 30, 70, 1, 0, True),     # halves of 80, 3 q heads, dropout
    (64, 64, 1, 2, 128, 200, 1, 3, False),   # GQA: the starts span one q head's tiles
]
# (BASE index, xbuf): D 1024 keeps the row-major dq_accum under the mutations, 512 with a skipped
# tile and 64 with ex != t the tiled one; 320 (bc 64) a quarter of two panels, the last partial;
# the GQA case of two whole-tile heads the span of the starts; SOLO 0 and 2 one block a key tile
QUICK = [(0, 2), (1, 1), (2, 1), (3, 2), (5, 1), (6, 1), (6, 2), (9, 2), (14, 2)]
QUICK_SOLO = [0, 2]
QUICK_KSC = [1, 3]


def cases(quick):
    """Each case with (xbuf, cluster, ksplit)."""
    if quick:
        return ([BASE[i] + (xb, 2, 0) for i, xb in QUICK] +
                [KSC[i] + (2, 2, 1) for i in QUICK_KSC] +
                [SOLO[i] + (1, 1, 1) for i in QUICK_SOLO])
    # xbuf = 2 where the host allows it: D padded to at most 768
    return ([c + (xb, 2, 0) for c in BASE for xb in (1, 2) if xb == 1 or c[0] <= 768] +
            [c + (2, 2, 1) for c in KSC] + [c + (1, 1, 1) for c in SOLO])


def check_all(quick=False):
    fails = []
    for D, BC, PPG, group, Nq, Nkv, causal, j, drop, xb, cl, ks in cases(quick):
        pr, ref = case_data(D, BC, group, Nq, Nkv, causal, j, drop)
        try:
            e = check_case(Cfg(D, BC, PPG, xb, cl, ks), pr, j, ref)
        except (AssertionError, IndexError, KeyError, TypeError) as x:
            if not MUT:
                raise
            e = [(type(x).__name__, str(x))]  # a mutation may derail the transcription itself
        if e:
            fails.append((D, BC, PPG, group, Nq, Nkv, causal, j, drop, xb, cl, ks, e))
    return fails


def main():
    fails = check_all()
    if fails:
        print("FAILED:", [f[:-1] + (f[-1][:3],) for f in fails])
        return 1
    print(f"exact: dK, dV, dQ, dBias of a key tile (both blocks of the cluster) over every query "
          f"tile, {len(cases(False))} cases: bc 64 (key-major dK, dV) at D 64/72/136/200/320/448/"
          f"512 (quarters of 16/32/48/64/80/112/128 columns: partial last panels, a quarter "
          f"wholly past D), bc 32 (transposed) at D 64/136/320/512 and 576/1024, panels per "
          f"group 1/2, xbuf 1/2 (2 up to D 768), GQA, causal both alignments and skipped tiles, "
          f"rows and keys past the end, dropout, up to 5 tiles; dq_accum tiled by quarters up to "
          f"D 512 (every write inside the workspace, real elements at their own dq_offset "
          f"position, padding at none, dq_offset injective), row-major past it; no race on the "
          f"exchange slots (S's and dP's halves), keep slots, mbarriers (S's and dP's) or "
          f"P^T/dS^T; every mbarrier wait finds its tile's phase complete, no stores reach a "
          f"pending phase, every store waited for; both blocks meet the same barriers; one block "
          f"a key tile (cluster = 1) at D 64/72/136/200/320 (halves of 32/48/80/112/160 "
          f"columns), 1 and 3 panels a group, GQA, causal both alignments, dropout; phase 1 by "
          f"keys in the cluster (ksplit = 1) at D 64/72/136/320/448/512, its exchange of whole "
          f"partials and keep bits under the same checks")
    ok = True
    for m in MUTATIONS + HARMLESS:
        MUT.clear()
        MUT.add(m)
        kinds = sorted({e[0] for f in check_all(quick=True) for e in f[-1]})
        found = "; ".join(kinds)
        if m in HARMLESS:
            print(f"harmless {m:26s} {'FAILS (' + found + ')' if kinds else 'passes, as it must'}")
            ok &= not kinds
        else:
            print(f"mutation {m:26s} {'caught (' + found + ')' if kinds else 'NOT CAUGHT'}")
            ok &= bool(kinds)
    MUT.clear()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
