// Flash-attention backward for Hopper (sm_90a) on clusters of two blocks that split D: wgmma,
// compiled at run time by NVRTC. Device code only: no standard headers. Launched as
// ffpa_bwd_sm90.cuh is: ffpa_bwd_pre_kernel and ffpa_bwd_convert_kernel (ffpa_bwd_aux.cuh) around
// ffpa_bwd_sm90c_kernel.
//
// Why: ffpa_bwd_sm90.cuh keeps dK and dV of its 32 keys for the whole D in the registers of one
// block, which forces 32-key tiles: m64n32 wgmmas (1.5 bytes of shared memory read per flop of
// math), Q and dO reloaded for every 32 keys, and 1/80 byte of fp32 dQ reduction per flop. Here a
// cluster of two blocks shares one key tile and each block owns half of D, so the same registers
// hold dK and dV of twice the keys (BC = 64 up to D = 512), or the same 32 keys at twice the D
// (D up to 1024). The price: S and dP are sums over both halves of D, exchanged through
// distributed shared memory (ordered by mbarriers; one cluster barrier a query tile with a single
// exchange buffer, none with two).
//
// The configuration comes in as macros (src/variants/ffpa_bwd_sm90c.cpp sets them):
//   FFPA_D       head dim (multiple of 8, at most 1024)
//   FFPA_BC      keys per cluster (key tile): 32 or 64
//   FFPA_PANELS  64-column panels of each warpgroup's quarter per Q/dO cp.async group (divides NP)
//   FFPA_DQBUF   dQ chunk accumulators: 1, or 2 (chunk c + 1 is issued before chunk c is reduced)
//   FFPA_DQ_TILED DQ: dq_accum in fragment order by parts of DQ columns (D padded to at most
//                512; FFPA_DQ_PARTS of them: 4 quarters, or 2 halves with FFPA_CLUSTER = 1),
//                0: row-major
//   FFPA_DQLAG   1: the last dQ chunk of a query tile is computed and reduced while the next
//                tile's cluster exchange is in flight (it hides the distributed shared memory
//                transfer; needs two chunks a warpgroup), 0: every chunk in its own tile
//   FFPA_XBUF    exchange buffers: 1, guarded by a cluster barrier a query tile, or 2 used in
//                turn, which leaves the exchange ordered by its mbarriers alone
//   FFPA_CLUSTER 2: the cluster of two blocks described below; 1: one block holds the whole D
//                (BC = 64, D at most 320: dK and dV of half of D in a warpgroup's registers)
//                and nothing is exchanged (below)
//   FFPA_KSPLIT  1: phase 1 split by keys, not D: a warpgroup computes S and dP over all of its
//                block's columns for 32 of the 64 keys (below); 0: over its own quarter
//                for all keys. Needed by FFPA_CLUSTER = 1; in a cluster it drops the exchange
//                in the block
//   FFPA_TAIL    1: the kernel can run the last wave's key tiles as pieces (below; the host plans
//                the split); 0: no piece code, whose registers a kernel near the limit lacks
//   FFPA_TMA     1: Q and dO arrive by TMA (tensor maps tq, tdo after the params: one box of 64
//                rows and a 64-column panel each), issued by one thread and waited for on an
//                mbarrier a Q/dO group (below); 0: by cp.async from every thread
//   FFPA_BF16, FFPA_CAUSAL, FFPA_BIAS, FFPA_DBIAS, FFPA_DROPOUT as in ffpa_bwd.cuh
//
// Layout of the work: block x = 2 i + rank (rank = the block's rank in its cluster) works on key
// tile i of one kv head and batch and loops over the query tiles (64 rows) of the packed
// group * Nq rows of the GQA group, as ffpa_bwd_sm90.cuh does; both blocks of a cluster visit the
// same query tiles, each cluster from its own first tile (wrapping around). D is split into
// four quarters of DQ columns (D rounded up to 64 at BC = 64, to 256 at BC = 32, over 4): block
// `rank` owns the DC = 2 DQ columns [rank * DC, (rank + 1) * DC), its warpgroup w the columns
// [rank * DC + w * DQ, + DQ). Shared tiles hold only the block's columns, each quarter from a
// 64-column panel of its own (smem_col: NP panels a quarter). Per query tile, warpgroup w of
// block rank:
//  - S_q = Q[:, quarter] K[:, quarter]^T and dP_q likewise (m64nBC, A and B K-major);
//  - exchange in the block (ffpa_bwd_sm90.cuh's): warpgroup w ends with the block's sums of the
//    accumulator rows of h = w (rows 16 warp + lane / 4 + 8 w);
//  - exchange in the cluster: a thread stores those sums into the same thread's slots of the
//    other block (st.async) and adds the other block's: both blocks then hold the full
//    S and dP of the same rows, bit-identical (a + b = b + a);
//  - P, dS as in ffpa_bwd_sm90.cuh, computed by both blocks (each needs them for its own half of
//    dV, dK, dQ); dBias is added by rank 0 only; dropout keep bits are drawn half in each block
//    and the halves travel with the cluster exchange;
//  - P^T and dS^T to shared memory (stmatrix .trans);
//  - BC = 64: dV += Pd^T dO[:, quarter], dK += dS^T Q[:, quarter] (M = the 64 keys, N = DQ);
//    BC = 32: dV^T[quarter] += dO[:, quarter]^T Pd, dK^T likewise (M = 64 columns a panel,
//    N = BC);
//  - dQ[:, quarter] = dS K[:, quarter] in 64-column chunks (the last one of DQ's remainder) with
//    K = BC keys, reduced to dq_accum
//    with red.global.add.v4.f32 (half the bytes per flop of ffpa_bwd_sm90.cuh at BC = 64), which
//    up to D = 512 is tiled in fragment order (ffpa_bwd_aux.cuh, FFPA_DQ_TILED).
// The cluster exchange's stores are asynchronous and complete on the receiving block's
// mbarriers, one for S's sums and one for dP's (and the keep bits) per tile parity. XBUF = 1:
// they land in the block exchange buffer, after barrier A (all threads of both blocks have read
// their block exchange); the next remote stores into a block come after the next barrier A,
// which its threads reach only after reading these. XBUF = 2: the two buffers take turns
// (exchange e, the e-th query tile a cluster processes, causal skips not counted: block exchange
// in buffer e % 2, received sums in the other), and no cluster barrier is needed: the other
// block stores exchange e's sums into a buffer this block last read at exchange e - 1 (block
// exchange) or e - 2 (received), and it stores them only after its own wait for exchange
// e - 1's dP, that is after this block's dP sends of e - 1, which follow those reads in every
// thread (the release of st.async's complete_tx, the acquire of the wait). The barriers' phases
// and keep-bit slots alternate with e for the same reason. Both blocks visit the same query
// tiles, so they agree on e. With two buffers S is exchanged as soon as its wgmmas retire, while
// dP's run (a commit group of their own), and P is computed while dP's sums travel.
// tools/ffpa_bwd_sm90c_sim.py checks the placement, fragments, exchanges and the barrier protocol.
//
// FFPA_TMA = 1: cp.async writes shared memory through the generic proxy, which wgmma reads
// through the async proxy only after fence.proxy.async; ptxas compiles that fence to
// MEMBAR.ALL.CTA, a wait for every memory access of the thread in flight, and at the top of a
// query tile those are the previous tile's dQ reductions (red.global: ncu put 2-3 % of the
// stall samples on that MEMBAR and more on the block barrier behind it). TMA writes through the
// async proxy: thread 0 issues the next tile's Q and dO boxes once dV and dK have retired in
// every warp (the block barrier before stage), each Q/dO group completing mbarrier `loads + 8 g`
// (phase e % 2 for the e-th query tile), and every thread waits there; no fence is left in the
// loop but the one that publishes P^T and dS^T. A box is 64 rows of one q head: the host refuses
// a problem whose packed GQA rows put a query tile across two heads (Nq not a multiple of 64
// with a group), and rows past Nq and columns past D arrive as zeros, as cp.async fills them.
// The row table stays on cp.async (its rows need -inf past the end), waited for with a block
// barrier before the last group's wgmmas as before.
//
// FFPA_KSPLIT = 1: S and dP are split by keys instead of columns: warpgroup w computes them over
// all of its block's columns for the keys [32 w, 32 w + 32) (m64n32), so its sums need no
// exchange in the block; its threads compute P and dS of those keys for both of their rows
// (h = 0, 1) and store them transposed. In a cluster each thread sends its whole S and dP
// partials (16 values each) to the same thread of the other block, as many bytes as before,
// into the same slots and on the same mbarriers (XBUF = 2: the buffers take turns as above, each
// only ever holding received sums: no block exchange writes them); dropout: block `rank` draws the
// keep bits of its threads' row h = rank and the other row's come with the exchange. The price:
// every warpgroup reads all of its block's Q and dO for m64n32 wgmmas in phase 1 (1.5 times the
// shared-memory reads of m64n64 a flop).
//
// FFPA_CLUSTER = 1 (FA3's split for a head dim whose dK and dV fit one block; with KSPLIT):
// block x works on key tile x alone and holds all of D, warpgroup w the half [w DQ, (w + 1) DQ)
// (D rounded up to 32, over 2) for dK, dV and dQ as above. The sums of phase 1 are complete, so
// nothing is exchanged at all, and the block barrier that publishes P^T and dS^T is the only
// hand-over. The block holds K, V, Q and dO of the whole D (D at most 320 fits with one Q/dO
// stage).
#pragma once

#include "ffpa_bwd_aux.cuh"
#include "ffpa_bwd_sm90c_layout.h"
#include "ffpa_common.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

namespace ffpa_bwd90c {

using namespace ffpa_dev;

constexpr int D = FFPA_D;
constexpr int BR = 64;
constexpr int BC = FFPA_BC;
constexpr int NN = BC / 8;  // n8 groups of an m64nBC accumulator
constexpr int NT = 256;
constexpr int CL = FFPA_CLUSTER;  // blocks a key tile is split over (halves of D)
constexpr bool KS = FFPA_KSPLIT;  // phase 1 split by keys between the warpgroups
// KM (64 keys): dK and dV key-major (M = the 64 keys, N = the quarter's columns), so a quarter
// is D rounded up to 64, over 4 (a multiple of 16 for the k16 steps of S): D = 320 does 320
// columns' work. 32 keys (past D = 512) cannot be an M: there dK^T and dV^T have M = the
// quarter's columns in 64-row steps, and D is padded to 256.
constexpr bool KM = BC == 64;
// CL = 1: a warpgroup holds half of D, rounded up to 16 columns (a k16 step of phase 1).
constexpr int DQ = CL == 1
                       ? (D + 31) / 32 * 16
                       : (KM ? (D + 63) / 64 * 64 : (D + 255) / 256 * 256) / 4;  // of a warpgroup
constexpr int DC = 2 * DQ;          // columns of a block
constexpr int NP = (DQ + 63) / 64;  // 64-column panels of a quarter, each quarter from its own
constexpr int LAST8 = (DQ - (NP - 1) * 64) / 8;  // n8 groups of a quarter's last panel
constexpr int PPG = FFPA_PANELS;                 // panels per Q/dO cp.async group
constexpr int NG = NP / PPG;
constexpr int KV_PANEL = BC * 128;
constexpr int Q_PANEL = BR * 128;
constexpr int DQB = FFPA_DQBUF;
constexpr int XB = FFPA_XBUF;
constexpr int DQL = FFPA_DQLAG;
constexpr int NPE = NP - DQL;          // dQ chunks of a warpgroup reduced within their own tile
constexpr int X_SLOTS = 2 * NN * 128;  // float4 slots of an exchange buffer
constexpr int ROW_BYTES = BR * 8;      // row table of a tile: lse, delta
// Bytes the other block's exchange stores deliver per query tile on each of its two mbarriers:
// S's sums, NN / 2 float4 a thread; dP's sums likewise (and one word of keep bits with dropout).
constexpr u32 XS_BYTES = NT * NN * 8;
constexpr u32 XD_BYTES = NT * NN * 8 + (FFPA_DROPOUT ? NT * 4 : 0);
// n8 groups of a warpgroup's S and dP accumulators: KS splits the keys between warpgroups.
constexpr int NS = KS ? NN / 2 : NN;
constexpr ffpa_layout::BwdSm90c LAYOUT =
    ffpa_layout::bwd_sm90c_layout(2 * NP * 64, BC, CL == 2 ? XB : 0);
static_assert(BR == ffpa_layout::BwdSm90c::kRows && NT == ffpa_layout::BwdSm90c::kThreads,
              "the layout's tile");
constexpr float LOG2E = 1.4426950408889634f;
// Whether the last wave's units may run as pieces (a query range each): never with causal
// masking (key tiles differ in work).
constexpr bool PIECES = FFPA_TAIL && !FFPA_CAUSAL;
// Q and dO by TMA: the bytes a Q/dO group's boxes deliver (both quarters, both tensors).
constexpr bool TMA = FFPA_TMA;
constexpr u32 QDO_BYTES = 2 * 2 * PPG * Q_PANEL;

static_assert(D % 8 == 0 && D <= 1024, "D: a multiple of 8, at most 1024");
static_assert(BC == 32 || BC == 64, "key tiles of 32 or 64");
// dV, dK accumulators: [1][DQ / 8] key-major, [NP][NN] transposed (one m64nBC a panel).
constexpr int DVX = KM ? 1 : NP, DVY = KM ? DQ / 8 : NN;
static_assert(DVX * DVY <= 32, "dK, dV (2 DVX DVY 4 fp32 a thread) live in registers");
static_assert(!KM || FFPA_DQ_TILED == DQ, "key-major quarters reduce dQ in fragment order");
static_assert(!FFPA_DQ_TILED || FFPA_DQ_TILED == DQ, "dq_accum's layout knows the quarter");
static_assert(NP % PPG == 0, "a Q/dO group holds a whole share of the quarter's panels");
static_assert(NG <= 4, "the layout holds four Q/dO load barriers");
static_assert(DQB == 1 || DQB == 2, "one or two dQ chunk accumulators");
static_assert(XB == 1 || XB == 2, "one or two exchange buffers");
static_assert(DQL == 0 || (DQL == 1 && NP >= 2), "the last of two or more dQ chunks deferred");
static_assert(CL == 2 || (CL == 1 && KS && XB == 1),
              "one block a key tile: phase 1 by keys, no exchange buffer");
static_assert(!KS || (KM && DQL == 0 && (CL == 1 || XB == 2)),
              "phase 1 by keys: 64 keys, key-major, nothing deferred; in a cluster two buffers");

// Granule (row, shared column lc) of the block's columns (global column col).
__device__ __forceinline__ void kv_granule(const FfpaFwdParams& f, const u16* kb, const u16* vb,
                                           u32 sK, u32 sV, int row, int lc, int col, int n0) {
  const int key = n0 + row;
  const bool ok = key < f.Nkv && col < D;
  const u32 off = tile_off(row, lc, BC);
  const long long ko = (long long)key * f.k_row_stride + col;
  const long long vo = (long long)key * f.v_row_stride + col;
  cp_async16(sK + off, ok ? kb + ko : kb, ok);
  cp_async16(sV + off, ok ? vb + vo : vb, ok);
}
// Shared-memory column of the block's column lc: each quarter starts on a panel of its own, so
// that MN-major operands over it start on a swizzle atom (wgmma.cuh, desc_mn_wide).
__device__ __forceinline__ int smem_col(int lc) {
  return lc / DQ * (NP * 64) + lc % DQ;
}
// dQ chunk (64 columns; the last one LAST8 n8 groups): dq (+)= dS K[:, chunk], K = BC keys.
template <int W8>
__device__ __forceinline__ void dq_mma(float (&dq)[8][4], u32 st, u32 kp) {
  wgmma_first_n<W8, 1, 1>(dq, desc_mn(st), desc_mn(kp));
#pragma unroll
  for (int ks = 1; ks < BC / 16; ++ks)
    wgmma_n<W8, 1, 1>(dq, desc_mn(st + ks * 16 * 128), desc_mn(kp + ks * 16 * 128));
}
__device__ __forceinline__ void qdo_gran(QdoRow src, u32 sQ, u32 sO, int row, int lc, int col) {
  const bool ok = src.ok && col < D;
  const u32 off = tile_off(row, lc, BR);
  cp_async16(sQ + off, ok ? src.q + col : src.q, ok);
  cp_async16(sO + off, ok ? src.o + col : src.o, ok);
}

}  // namespace ffpa_bwd90c

#if FFPA_CLUSTER == 2
#define FFPA_BWD90C_CLUSTER __cluster_dims__(2, 1, 1)
#else
#define FFPA_BWD90C_CLUSTER
#endif
#if FFPA_TMA
#define FFPA_BWD90C_MAPS \
  , const __grid_constant__ FfpaTmaDesc tq, const __grid_constant__ FfpaTmaDesc tdo
#else
#define FFPA_BWD90C_MAPS
#endif
extern "C" __global__ void FFPA_BWD90C_CLUSTER __launch_bounds__(ffpa_bwd90c::NT, 1)
    ffpa_bwd_sm90c_kernel(const FfpaBwdParams p FFPA_BWD90C_MAPS) {
  using namespace ffpa_bwd90c;
  const FfpaFwdParams& f = p.fwd;
  // The dynamic base is the same in both blocks (same kernel, same static shared memory), so the
  // exchange slots are at the same offsets in both.
  const SmemBase sb = smem_base_1024();
  const u32 sK = sb.addr;
  unsigned char* smem = sb.ptr;
  const u32 sV = sK + LAYOUT.v;
  const u32 sQ = sK + LAYOUT.q;
  const u32 sO = sK + LAYOUT.o;    // dO
  const u32 sPt = sK + LAYOUT.pt;  // P^T, then dS^T
  const u32 sSt = sK + LAYOUT.st;
  float4* xbuf = reinterpret_cast<float4*>(smem + LAYOUT.x);
  // Row tables of two consecutive query tiles (the next one is staged while dQ of this one is
  // still reduced): per row lse and delta.
  unsigned char* rows_base = smem + LAYOUT.rows;
  // Dropout: the keep bits the other block drew for this thread's row (slot tid).
  u32* keep_in = reinterpret_cast<u32*>(smem + LAYOUT.keep);
  // mbarriers 8 bytes apart, S's of parity 0 and 1, then dP's: the other block's stores of
  // exchange e (its e-th query tile) into that half have landed (phase e / 2 of parity e % 2).
  const u32 full = sK + LAYOUT.full;
  // FFPA_TMA: Q/dO group g of the query tile in flight has landed (phase e % 2 of tile e).
  const u32 loads = sK + LAYOUT.loads;

  const int tid = threadIdx.x, lane = tid & 31;
  // The warpgroup index through a shuffle, so that ptxas knows it is warp-uniform.
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0), t128 = tid & 127, wq = t128 >> 5;
  const int rank = CL == 2 ? (int)cluster_rank() : 0;
  const int cbase = rank * DC;  // the block's first column of D
  // A cluster per key tile x of kv head y and batch z. The last head's key tiles from
  // p.split_from on (the last wave's, when it would leave most SMs idle) run instead as
  // p.num_splits pieces each, a range of the query tiles a piece, in the plane z = B (its
  // clusters in order: piece q is the plane's q-th, past the last one they return); the merge
  // kernel sums their dK and dV. Never with causal masking (the host plans none there): those
  // kernels index as before, from the block indices alone.
  const int ktiles = (f.Nkv + BC - 1) / BC;
  const bool piece = PIECES && (int)blockIdx.z == f.B;
  int kx = blockIdx.x >> (CL - 1), kvh = blockIdx.y, b = blockIdx.z;
  int slot = -1, kbeg = 0, kend = (f.group * f.Nq + BR - 1) / BR;  // positions, below
  if (PIECES && !piece && kvh == f.Hkv - 1 && b == f.B - 1 && kx >= p.split_from) return;
  if (piece) {
    slot = blockIdx.y * (gridDim.x >> (CL - 1)) + kx;  // the piece's partial
    if (slot >= (ktiles - p.split_from) * p.num_splits) return;
    const int k = slot % p.num_splits, all = kend;
    kx = p.split_from + slot / p.num_splits, kvh = f.Hkv - 1, b = f.B - 1;
    kbeg = k * all / p.num_splits;
    kend = (k + 1) * all / p.num_splits;
  }
  const int n0 = kx * BC;
  const int rows_total = f.group * f.Nq;
  const int diag = FFPA_CAUSAL == 1 ? f.Nkv - f.Nq : 0;  // row r sees keys k <= r + diag
  const int ntile = (rows_total + BR - 1) / BR;

  // K and V of the key tile (the block's columns), resident: the first cp.async group.
  {
    const u16* kb = static_cast<const u16*>(f.k) + b * f.k_batch_stride + kvh * f.k_head_stride;
    const u16* vb = static_cast<const u16*>(f.v) + b * f.v_batch_stride + kvh * f.v_head_stride;
#pragma unroll 4
    for (int idx = tid; idx < BC * DC / 8; idx += NT) {
      const int row = idx / (DC / 8), lc = (idx % (DC / 8)) * 8;
      kv_granule(f, kb, vb, sK, sV, row, smem_col(lc), cbase + lc, n0);
    }
    cp_async_commit();
  }
  // The exchange barrier is initialized in both blocks before either can store into the other,
  // the load barriers before the first TMA (stage, below).
  if (CL == 2 || TMA) {
    if (tid == 0) {
      if (CL == 2)
        for (int i = 0; i < 4; ++i) mbar_init(full + i * 8, 1);
      if (TMA)
        for (int g = 0; g < NG; ++g) mbar_init(loads + g * 8, 1);
      mbar_init_fence();
    }
    if (CL == 2)
      cluster_sync();
    else
      __syncthreads();
  }

  // Causal: query tiles that see none of the key tile's keys are skipped (cluster-uniform: both
  // blocks have the same n0, so they meet at the same cluster barriers and count the same
  // exchanges on the mbarriers).
  // The clusters of a wave hold neighbouring key tiles of a head: starting together at query
  // tile 0 they would all reduce into the same dQ rows at once. Cluster i starts at tile
  // i span / clusters instead and wraps around (position k visits tile_at(k)). The starts span
  // one q head's tiles, not the group's: with GQA the clusters of a wave then stay within a head
  // of each other, so the Q, dO and dQ rows they share stay in L2 between their passes.
  const int span = min((f.Nq + BR - 1) / BR, ntile);
  const int start = (int)((long long)kx * span / ktiles);
  auto tile_at = [&](int k) { return k + start >= ntile ? k + start - ntile : k + start; };
  auto next_tile = [&](int k) {
    for (; FFPA_CAUSAL && k < ntile; ++k) {
      const int m0 = tile_at(k) * BR, i_hi = min(m0 + BR, rows_total) - 1;
      const int r_hi = m0 / f.Nq != i_hi / f.Nq ? f.Nq - 1 : i_hi % f.Nq;
      if (r_hi + diag >= n0) break;
    }
    return k;
  };

#if FFPA_TMA
  if (tid == 0) {
    tma_prefetch_desc(tq);
    tma_prefetch_desc(tdo);
  }
#else
  const u16* qb = static_cast<const u16*>(f.q) + b * f.q_batch_stride;
  const u16* ob = static_cast<const u16*>(p.dout) + b * p.do_batch_stride;
#endif
  // The row table of the tile at m0 into parity par: lse and delta of row m0 + tid, tid < BR.
  // A plain load stalled warps 0 and 1 for its latency before their Q/dO copies, and the block's
  // next barrier with them (ncu: ~2 % of the samples on its first use, more in the barrier's
  // wait). lse is converted where it is read.
  auto stage_rows = [&](int m0, int par) {
    if (tid >= BR) return;
    const int i = m0 + tid;
    const u32 rt = smem_u32(rows_base + par * ROW_BYTES) + tid * 4;
    if (i < rows_total) {
      const long long lrow = ((long long)b * f.Hq + kvh * f.group + i / f.Nq) * f.Nq + i % f.Nq;
      cp_async4(rt, f.lse + lrow);
      cp_async4(rt + BR * 4, p.delta + lrow);
    } else {
      float* r = reinterpret_cast<float*>(rows_base + par * ROW_BYTES);
      r[tid] = NEG_INF;  // past the last row: no gradient, as for a row that sees no key
      r[BR + tid] = 0.f;
    }
  };
  // Row table (into parity par) and the NG groups of Q and dO of query tile t (cp.async groups,
  // or with TMA boxes on the load barriers); group g holds panels g * PPG .. + PPG - 1 of both
  // warpgroups' quarters.
  auto stage = [&](int t, int par) {
    const int m0 = t * BR;
#if FFPA_TMA
    // Thread 0, after the block barrier that follows the last wgmma reading Q and dO: group g's
    // boxes (the panels g PPG .. + PPG - 1 of both quarters) complete on loads + 8 g. The tile's
    // rows lie in one q head (the host refuses other problems).
    if (tid == 0) {
      const int hq = kvh * f.group + m0 / f.Nq, r0 = m0 % f.Nq;
#pragma unroll 1
      for (int g = 0; g < NG; ++g) {
        const u32 bar = loads + g * 8;
        mbar_expect_tx(bar, QDO_BYTES);
#pragma unroll
        for (int q = 0; q < 2 * PPG; ++q) {
          const int qp = g * PPG + q % PPG;  // the panel of quarter q / PPG
          const u32 dst = (q / PPG * NP + qp) * Q_PANEL;
          const int col = cbase + q / PPG * DQ + qp * 64;
          tma_load_4d(sQ + dst, tq, col, r0, hq, b, bar);
          tma_load_4d(sO + dst, tdo, col, r0, hq, b, bar);
        }
      }
    }
    stage_rows(m0, par);
    cp_async_commit();
#else
    // A thread loads the same RPT rows and granule column of every panel: their sources are
    // computed once per tile (ffpa_bwd_sm90.cuh: a division per granule cost 30 %).
    constexpr int RPT = BR * 8 / NT;
    QdoRow src[RPT];
#pragma unroll
    for (int j = 0; j < RPT; ++j)
      src[j] = qdo_row(p, qb, ob, m0 + (tid >> 3) + j * (NT / 8), rows_total, kvh);
#pragma unroll 1
    for (int g = 0; g < NG; ++g) {
#pragma unroll
      for (int q = 0; q < 2 * PPG; ++q) {
        // Column qc of quarter q / PPG's panel g PPG + q % PPG (past the quarter: not loaded,
        // never read).
        const int qc = (g * PPG + q % PPG) * 64 + (tid & 7) * 8;
        if (qc >= DQ) continue;
        const int lc = (q / PPG) * NP * 64 + qc;
#pragma unroll
        for (int j = 0; j < RPT; ++j)
          qdo_gran(src[j], sQ, sO, (tid >> 3) + j * (NT / 8), lc, cbase + (q / PPG) * DQ + qc);
      }
      if (g == NG - 1) stage_rows(m0, par);  // the row table, in the last group
      cp_async_commit();
    }
#endif
  };

  float dv[DVX][DVY][4], dk[DVX][DVY][4];
#pragma unroll
  for (int c = 0; c < DVX; ++c)
#pragma unroll
    for (int n = 0; n < DVY; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dv[c][n][e] = dk[c][n][e] = 0.f;

  // Key of this thread's first accumulator column (CL = 1: of its warpgroup's keys).
  const int key0 = n0 + (KS ? wg * (BC / 2) : 0) + (lane & 3) * 2;
#if FFPA_DBIAS == 1
  // dBias column sums of the thread's keys (a key bias [1,1,1,Nkv]) over every query tile. The
  // bias itself is read per tile (cached): held in registers too, it spilled at D = 512, bc = 64.
  float colsum[NS][2];
#pragma unroll
  for (int n = 0; n < NS; ++n) colsum[n][0] = colsum[n][1] = 0.f;
#endif
  // This thread's first exchange slot (S's half of buffer 0) in the other block.
  const u32 xpeer = CL == 2 ? map_rank(smem_u32(xbuf + wg * NN / 2 * 128 + t128), rank ^ 1) : 0;
  const u32 keep_peer = CL == 2 ? map_rank(smem_u32(keep_in + tid), rank ^ 1) : 0;
  const u32 full_peer = CL == 2 ? map_rank(full, rank ^ 1) : 0;
  // dQ[:, quarter] = dS K[:, quarter] of the query tile whose dS^T is in sSt, chunk c: columns
  // cbase + w * DQ + c * 64 .. + 63 (the last chunk LAST8 * 8 of them), reduced into query tile
  // tt's rows.
  float dqs[DQB][8][4];
  auto dq_issue = [&](int c, int bi) {
    const u32 kp = opaque(sK + (wg * NP + c) * KV_PANEL), st = opaque(sSt);
    if (c == NP - 1)
      dq_mma<LAST8>(dqs[bi], st, kp);
    else
      dq_mma<8>(dqs[bi], st, kp);
    wgmma_commit();
  };
  // FFPA_DQ_TILED (D padded to 256 at most 512): the warp's fragment of chunk c goes to dq_accum in
  // fragment order (ffpa_bwd_aux.cuh's dq_offset): one 512-byte reduction a warp and n8 group,
  // with no lane exchange and no bounds check (rows past the group and columns past D fall in
  // the padding, which nothing reads). Row-major (past 512, where the tiled form made ptxas
  // spill with a bias and dropout), lane pairs swap half their fragment so that each lane holds
  // 4 neighbouring columns of one row (even lanes row g, odd lanes row g + 8): one vector
  // reduction each, with 16 shuffles, 16 selects and a branch per n8 group, and twice the L2
  // sectors a reduction.
  auto dq_reduce = [&](int c, int bi, int tt) {
    float(&dq)[8][4] = dqs[bi];
    fence_acc(dq);
#if FFPA_DQ_TILED
    float* dst = p.dq_accum + ffpa_bwd_aux::dq_block(f, b, kvh, tt, (rank * 2 + wg) * NP + c) +
                 (wq * 8 * 32 + lane) * 4;
#pragma unroll
    for (int n = 0; n < 8; ++n)
      if (c < NP - 1 || n < LAST8)
        red_add4(dst + n * 32 * 4, make_float4(dq[n][0], dq[n][1], dq[n][2], dq[n][3]), f.scale);
#else
    const bool odd = lane & 1;
    const int row = wq * 16 + (lane >> 2) + (odd ? 8 : 0);
    const int i = tt * BR + row;  // packed row of query tile tt
    const int r = i < rows_total ? i % f.Nq : -1, hq = kvh * f.group + i / f.Nq;
    const long long lrow = ((long long)b * f.Hq + hq) * f.Nq + r;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const float s0 = odd ? dq[n][0] : dq[n][2], s1 = odd ? dq[n][1] : dq[n][3];
      const float r0 = __shfl_xor_sync(0xffffffffu, s0, 1);
      const float r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
      const int col = cbase + wg * DQ + c * 64 + n * 8 + (lane & 2) * 2;
      if (r >= 0 && col < D) {
        const float4 v =
            odd ? make_float4(r0, r1, dq[n][2], dq[n][3]) : make_float4(dq[n][0], dq[n][1], r0, r1);
        red_add4(p.dq_accum + lrow * D + col, v, f.scale);
      }
    }
#endif
  };

  int k = next_tile(kbeg), ex = 0, tp = -1;  // ex: query tiles done (both blocks do the same);
  // tp: the previous one (FFPA_DQLAG: its last dQ chunk is still to do)
  // FFPA_DQLAG's deferred work: the last dQ chunk of query tile tp.
  auto dq_deferred = [&] {
    wgmma_fence();
    dq_issue(NP - 1, 0);
    wgmma_wait<0>();
    dq_reduce(NP - 1, 0, tp);
  };
  if (k < kend) stage(tile_at(k), 0);
#if FFPA_TMA
  // K and V came by cp.async: waited for and fenced for wgmma once, while the first tile's boxes
  // travel. (The fence at the top of every tile is what TMA removes.)
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();
#endif
  while (k < kend) {
    const int t = tile_at(k), kn = next_tile(k + 1), par = ex & 1;
    const float* rt = reinterpret_cast<const float*>(rows_base + par * ROW_BYTES);
    // This tile's block exchange buffer and the buffer the other block's sums land in.
    float4* const xe = xbuf + (XB == 2 ? par : 0) * X_SLOTS;
    const int xr = XB == 2 ? par ^ 1 : 0;
    const int m0 = t * BR;
    // Query row and q head of packed row `row` of the tile; r = -1 past the last row.
    auto row_of = [&](int row, int& r, int& hq) {
      const int i = m0 + row;
      r = i < rows_total ? i % f.Nq : -1;
      hq = kvh * f.group + i / f.Nq;
    };
#if FFPA_DROPOUT
    // Dropout keep bits of row (r, hq), n8 groups [n_lo, n_hi) (bit 2 n + e). The forward's
    // element ((b Hq + hq) Nq + r) Nkv + key. The lanes of a pair share the row: for the groups
    // n, n + 1 the even lane draws the 4 keys of both in group n and the odd lane those in n + 1
    // (keep_pair_swap), so each Philox block is drawn once. One draw live at a time (a rolled
    // loop).
    auto keep_bits = [&](int r, int hq, int n_lo, int n_hi) {
      u32 keep = 0;
      const unsigned long long g =
          f.dropout_offset +
          (((unsigned long long)b * f.Hq + hq) * f.Nq + max(r, 0)) * (unsigned long long)f.Nkv +
          key0 - (lane & 1) * 2 + (lane & 1) * 8;
#pragma unroll 1
      for (int n = n_lo; n < n_hi; n += 2) {
        const unsigned long long gn = g + n * 8;
        // Masked to its 4 decisions (keep_pair_swap reads no more): the form whose cubins ran.
        const u32 k4 = keep4(f.dropout_seed, gn >> 2, (u32)gn & 3, f.dropout_keep_min) & 15u;
        keep |= keep_pair_swap(k4, lane & 1) << (2 * n);
      }
      return keep;
    };
#endif

    // Phase 1: S and dP over the warpgroup's quarter of D (CL = 1: over both halves, for the
    // warpgroup's keys: rows 32 wg of K and V), one wgmma group per Q/dO group. With two
    // exchange buffers (or none: CL = 1) the last group's dP wgmmas are a commit group of their
    // own: S is exchanged (CL = 1: P computed) while they run.
    float s[NS][4], dp[NS][4];
#pragma unroll
    for (int g = 0; g < NG; ++g) {
#if FFPA_TMA
      mbar_wait(loads + g * 8, par);
      // The row table (cp.async by threads 0 .. BR - 1). This barrier is also the tile's one
      // before its block exchange and its P^T / dS^T stores, which the other warpgroup's dQ
      // wgmmas of the tile before may still be reading.
      if (g == NG - 1) {
        cp_async_wait<0>();
        __syncthreads();
      }
#else
      cp_async_wait_upto<NG - 1>(NG - 1 - g);
      fence_proxy_async();  // cp.async writes are generic-proxy, wgmma reads async-proxy
      __syncthreads();
#endif
      const int pn = (KS ? 0 : wg * NP) + g * PPG;  // first panel of the group in this quarter
      const int keys = KS ? wg * (BC / 2) * 128 : 0;
      const u32 sq = opaque(sQ + pn * Q_PANEL), so = opaque(sO + pn * Q_PANEL);
      const u32 sk = opaque(sK + pn * KV_PANEL + keys), sv = opaque(sV + pn * KV_PANEL + keys);
      const bool split = (KS || XB == 2) && g == NG - 1;
      auto issue = [&](bool with_s, bool with_dp) {
#pragma unroll
        for (int hh = 0; hh < (KS ? 2 : 1); ++hh)
#pragma unroll
          for (int pp = 0; pp < PPG; ++pp)
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
              if ((g * PPG + pp) * 64 + kk * 16 >= DQ) continue;  // past the quarter
              // acc (+)= A B^T over the k16 step: A = Q or dO, B = K or V.
              auto mma = [&](float(&acc)[NS][4], u32 a, u32 b) {
                const u64 da = desc_k(a + (hh * NP + pp) * Q_PANEL + kk * 32);
                const u64 db = desc_k(b + (hh * NP + pp) * KV_PANEL + kk * 32);
                if (g == 0 && hh == 0 && pp == 0 && kk == 0)
                  wgmma_first<0, 0>(acc, da, db);
                else
                  wgmma<0, 0>(acc, da, db);
              };
              if (with_s) mma(s, sq, sk);
              if (with_dp) mma(dp, so, sv);
            }
      };
      wgmma_fence();
      issue(true, !split);
      if (split) {
        wgmma_commit();
        issue(false, true);
      }
      wgmma_commit();
    }
    if (KS || XB == 2)
      wgmma_wait<1>();
    else
      wgmma_wait<0>();
    fence_acc(s);

#if FFPA_KSPLIT
    // The warpgroup's S and dP over its block's columns for its keys, held for two rows a thread
    // (h = 0, 1: accumulator elements 2 h + e). CL = 1: they are whole sums; P of both rows (in
    // S's registers) while dP's wgmmas run, the keep bits still under them, then Pd and dS,
    // stored transposed. CL = 2: first the exchange (below), then the same.
    // The formulas are the exchange path's below, which keeps its own inline copy: a shared form
    // changed the instructions of its measured causal kernels (one form once both are measured
    // again).
    {
      float dl[2], l[2];
      int r[2], hq[2];
      const int kv_lim = f.Nkv - key0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = wq * 16 + (lane >> 2) + h * 8;
        l[h] = lse_log2(rt[row]);
        dl[h] = rt[BR + row];
        row_of(row, r[h], hq[h]);
      }
      u32 keep[2] = {0u, 0u};
#if FFPA_CLUSTER == 2
      // The cluster exchange of the thread's whole partials: S's as soon as its wgmmas retire,
      // into the thread's slots of S's half of the other block's buffer xr (the slots the
      // exchange path's sums use: four float4), dP's once they retire, with this block's keep
      // bits (row h = rank); then the other block's S added and P computed while its dP travels.
      const u32 bar_s = full + par * 8, bar_d = full + 16 + par * 8;
      const float4* const xs = xbuf + xr * X_SLOTS + wg * NN / 2 * 128 + t128;
      auto add_acc = [&](const float4* x, float(&a)[NS][4]) {
#pragma unroll
        for (int n = 0; n < NS; ++n) {
          const float4 v = x[n * 128];
          a[n][0] += v.x;
          a[n][1] += v.y;
          a[n][2] += v.z;
          a[n][3] += v.w;
        }
      };
#if FFPA_DROPOUT
      u32 mine = 0;  // this block's keep bits: the thread's row h = rank
#endif
      {
        const u32 xs_peer = xpeer + xr * X_SLOTS * 16, xd_peer = xs_peer + X_SLOTS * 8;
        auto send_acc = [&](u32 dst, const float(&a)[NS][4], u32 bar_peer) {
#pragma unroll
          for (int n = 0; n < NS; ++n)
            st_async4(dst + n * 128 * 16, a[n][0], a[n][1], a[n][2], a[n][3], bar_peer);
        };
        send_acc(xs_peer, s, full_peer + par * 8);
#if FFPA_DROPOUT
        mine = keep_bits(rank ? r[1] : r[0], rank ? hq[1] : hq[0], 0, NS);
#endif
        wgmma_wait<0>();
        fence_acc(dp);
        send_acc(xd_peer, dp, full_peer + 16 + par * 8);
#if FFPA_DROPOUT
        st_async_u32(keep_peer + par * NT * 4, mine, full_peer + 16 + par * 8);
#endif
        if (tid == 0) {
          mbar_expect_tx(bar_s, XS_BYTES);
          mbar_expect_tx(bar_d, XD_BYTES);
        }
      }
      mbar_wait_cluster(bar_s, (ex >> 1) & 1);
      add_acc(xs, s);
#endif
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int causal_lim = r[h] + diag - key0;
#if FFPA_DBIAS >= 2
        const long long boff = b * f.bias_batch_stride + hq[h] * f.bias_head_stride +
                               max(r[h], 0) * f.bias_row_stride + key0;
#endif
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int kof = n * 8 + e;
            const bool masked = kof >= kv_lim || (FFPA_CAUSAL && kof > causal_lim);
            float x = s[n][2 * h + e] * f.scale_log2 - l[h];
#if FFPA_DBIAS == 1
            if (kof < kv_lim) x += bias_at(f, key0 + kof) * LOG2E;
#elif FFPA_DBIAS >= 2
            if (kof < kv_lim) x += bias_at(f, boff + kof) * LOG2E;
#endif
            s[n][2 * h + e] = masked ? 0.f : exp2f(x);
          }
      }
#if FFPA_CLUSTER == 1
#if FFPA_DROPOUT
#pragma unroll
      for (int h = 0; h < 2; ++h) keep[h] = keep_bits(r[h], hq[h], 0, NS);
#endif
      wgmma_wait<0>();
      fence_acc(dp);
#else
      mbar_wait_cluster(bar_d, (ex >> 1) & 1);
      add_acc(xs + X_SLOTS / 2, dp);
#if FFPA_DROPOUT
      const u32 other = keep_in[par * NT + tid];
      keep[0] = rank ? other : mine;
      keep[1] = rank ? mine : other;
#endif
#endif
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        u32 pp4[4], ds4[4];  // packed Pd and dS of the four n8 groups (bf16 / fp16 pairs)
#pragma unroll
        for (int n = 0; n < NS; ++n) {
          float pd[2], ds[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float pv = s[n][2 * h + e], dpv = dp[n][2 * h + e];
#if FFPA_DROPOUT
            pd[e] = keep[h] >> (2 * n + e) & 1 ? pv * f.dropout_scale : 0.f;
            ds[e] = pd[e] * dpv - pv * dl[h];
#else
            pd[e] = pv;
            ds[e] = pv * (dpv - dl[h]);
#endif
#if FFPA_DBIAS == 1
            colsum[n][e] += ds[e];
#elif FFPA_DBIAS >= 2
            // Both blocks of a cluster hold the same dS: rank 0 adds it.
            if (rank == 0 && r[h] >= 0 && n * 8 + e < kv_lim)
              put_dbias(p, b, hq[h], r[h], key0 + n * 8 + e, ds[e]);
#endif
          }
          pp4[n] = pack2(pd[0], pd[1]);
          ds4[n] = pack2(ds[0], ds[1]);
        }
        // The four n8 groups as four 8 x 8 matrices of the warp's 8 rows of h, stored
        // transposed: lane l addresses the warpgroup's key 8 (l / 8) + l % 8.
        const u32 off = tile_off(wg * (BC / 2) + lane, wq * 16 + h * 8, BC);
        stmatrix_x4_trans(sPt + off, pp4);
        stmatrix_x4_trans(sSt + off, ds4);
      }
    }
#else
    // Exchange in the block: warpgroup w finishes the accumulator rows of h = w. A thread hands
    // over its h = 1 - w partials (same warp and lane of the other warpgroup: the same
    // positions) and adds the other's h = w partials; the slots hold the S half of the buffer,
    // then the dP half, two n8 groups a float4. Selects, not indexing by wg: the arrays stay in
    // registers.
    auto hand_over = [&](float4* x, const float(&a)[NN][4]) {
#pragma unroll
      for (int n = 0; n < NN; n += 2)
        x[(wg * NN / 2 + n / 2) * 128 + t128] =
            wg ? make_float4(a[n][0], a[n][1], a[n + 1][0], a[n + 1][1])
               : make_float4(a[n][2], a[n][3], a[n + 1][2], a[n + 1][3]);
    };
    auto take_over = [&](const float4* x, const float(&a)[NN][4], float(&m)[NN][2]) {
#pragma unroll
      for (int n = 0; n < NN; n += 2) {
        const float4 v = x[((1 - wg) * NN / 2 + n / 2) * 128 + t128];
        m[n][0] = (wg ? a[n][2] : a[n][0]) + v.x;
        m[n][1] = (wg ? a[n][3] : a[n][1]) + v.y;
        m[n + 1][0] = (wg ? a[n + 1][2] : a[n + 1][0]) + v.z;
        m[n + 1][1] = (wg ? a[n + 1][3] : a[n + 1][1]) + v.w;
      }
    };
    // Exchange in the cluster: each thread sends its sums to the same thread of the other block
    // (slots wg of buffer xr's S or dP half, read by it alone) with asynchronous stores that
    // complete on that block's mbarrier of the half and parity, and adds the other block's once
    // they have landed: S and dP of the rows are then the same in both blocks.
    const u32 bar_s = full + par * 8, bar_d = full + 16 + par * 8;
    const u32 bar_s_peer = full_peer + par * 8, bar_d_peer = full_peer + 16 + par * 8;
    const u32 xs_peer = xpeer + xr * X_SLOTS * 16, xd_peer = xs_peer + X_SLOTS * 8;
    auto send = [&](u32 dst, const float(&m)[NN][2], u32 bar_peer) {
#pragma unroll
      for (int n = 0; n < NN; n += 2)
        st_async4(dst + n / 2 * 128 * 16, m[n][0], m[n][1], m[n + 1][0], m[n + 1][1], bar_peer);
    };
    float sm[NN][2], dm[NN][2];
    hand_over(xe, s);
    if (XB == 1) {
      fence_acc(dp);
      hand_over(xe + X_SLOTS / 2, dp);
    }
    __syncthreads();
    take_over(xe, s, sm);
    if (XB == 2) {
      send(xs_peer, sm, bar_s_peer);
    } else {
      take_over(xe + X_SLOTS / 2, dp, dm);
      // Barrier A arrives here: this thread has read its block exchange, whose slots the other
      // block's stores land in. The keep bits are drawn while the other block gets there.
      cluster_arrive();
    }
    // Keep bits of the thread's row (bit 2n + e): this block draws the n8 groups of its half,
    // n in [rank NN / 2, (rank + 1) NN / 2), and the other block's half comes with the cluster
    // exchange, so each P element's Philox draw is made once per cluster. With two buffers the
    // draws run under dP's wgmmas.
    static_assert(NN % 4 == 0, "each block draws whole pairs of n8 groups");
    u32 keep = 0;
#if FFPA_DROPOUT
    {
      int r, hq;
      row_of(wq * 16 + (lane >> 2) + wg * 8, r, hq);
      keep = keep_bits(r, hq, rank * (NN / 2), (rank + 1) * (NN / 2));
    }
#endif
    if (XB == 2) {
      // dP's block exchange in the other half: its slots were last read before this tile's
      // barrier above (as received sums, exchange e - 1).
      wgmma_wait<0>();
      fence_acc(dp);
      hand_over(xe + X_SLOTS / 2, dp);
      __syncthreads();
      take_over(xe + X_SLOTS / 2, dp, dm);
    } else {
      // Barrier A: every thread of both blocks has read its block exchange. No cluster barrier
      // after the stores: its release waited for every dQ reduction still in flight (ncu: 11 %
      // of the stall samples).
      cluster_wait();
      send(xs_peer, sm, bar_s_peer);
    }
    send(xd_peer, dm, bar_d_peer);
#if FFPA_DROPOUT
    st_async_u32(keep_peer + (XB == 2 ? par : 0) * NT * 4, keep, bar_d_peer);
#endif
    if (tid == 0) {
      mbar_expect_tx(bar_s, XS_BYTES);
      mbar_expect_tx(bar_d, XD_BYTES);
    }
    // FFPA_DQLAG: the previous tile's last dQ chunk (its dS^T is still in sSt) while the stores
    // travel (ncu: the wait for them was 18 % of the stall samples with nothing to overlap it).
    if (DQL && tp >= 0) dq_deferred();
    // FFPA_DQLAG: every warp's deferred chunk has read sSt before it is overwritten.
    if (DQL) __syncthreads();

    // P and dS of the thread's rows, stored transposed: [key][query row] (stmatrix .trans). P
    // needs only S: it is computed while dP's sums travel.
    {
      const int row = wq * 16 + (lane >> 2) + wg * 8;
      const float l = lse_log2(rt[row]), dl = rt[BR + row];
      int r, hq;
      row_of(row, r, hq);
      const int causal_lim = r + diag - key0;  // columns past it are masked
      const int kv_lim = f.Nkv - key0;
      // The other block's sums of a half into m: x is this thread's first slot of the half in
      // buffer xr, where send() stored them.
      auto add_received = [&](const float4* x, float(&m)[NN][2]) {
#pragma unroll
        for (int n = 0; n < NN; n += 2) {
          const float4 v = x[n / 2 * 128];
          m[n][0] += v.x;
          m[n][1] += v.y;
          m[n + 1][0] += v.z;
          m[n + 1][1] += v.w;
        }
      };
      const float4* const xs = xbuf + xr * X_SLOTS + wg * NN / 2 * 128 + t128;
      mbar_wait_cluster(bar_s, (ex >> 1) & 1);
      add_received(xs, sm);
#if FFPA_DBIAS >= 2
      const long long boff =
          b * f.bias_batch_stride + hq * f.bias_head_stride + max(r, 0) * f.bias_row_stride + key0;
#endif
      float(&pr)[NN][2] = sm;  // P in S's registers
#pragma unroll
      for (int n = 0; n < NN; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kof = n * 8 + e;
          const bool masked = kof >= kv_lim || (FFPA_CAUSAL && kof > causal_lim);
          float x = sm[n][e] * f.scale_log2 - l;
#if FFPA_DBIAS == 1
          if (kof < kv_lim) x += bias_at(f, key0 + kof) * LOG2E;
#elif FFPA_DBIAS >= 2
          if (kof < kv_lim) x += bias_at(f, boff + kof) * LOG2E;
#endif
          pr[n][e] = masked ? 0.f : exp2f(x);
        }

      mbar_wait_cluster(bar_d, (ex >> 1) & 1);
#if FFPA_DROPOUT
      keep |= keep_in[(XB == 2 ? par : 0) * NT + tid];
#endif
      add_received(xs + X_SLOTS / 2, dm);
      u32 pp4[4], ds4[4];  // packed Pd and dS of four n8 groups (bf16 / fp16 pairs)
#pragma unroll
      for (int n = 0; n < NN; ++n) {
        float pd[2], ds[2];
#if FFPA_DROPOUT
        // Pd = P keep / (1 - p) goes to dV; dS = Pd dP - P delta.
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          pd[e] = keep >> (2 * n + e) & 1 ? pr[n][e] * f.dropout_scale : 0.f;
          ds[e] = pd[e] * dm[n][e] - pr[n][e] * dl;
        }
#else
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          pd[e] = pr[n][e];
          ds[e] = pr[n][e] * (dm[n][e] - dl);
        }
#endif
#if FFPA_DBIAS == 1
#pragma unroll
        for (int e = 0; e < 2; ++e) colsum[n][e] += ds[e];
#elif FFPA_DBIAS >= 2
        // Both blocks hold the same dS: rank 0 adds it.
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (rank == 0 && r >= 0 && n * 8 + e < kv_lim)
            put_dbias(p, b, hq, r, key0 + n * 8 + e, ds[e]);
#endif
        pp4[n & 3] = pack2(pd[0], pd[1]);
        ds4[n & 3] = pack2(ds[0], ds[1]);
        // Groups n - 3 .. n as four 8 x 8 matrices of the warp's 8 rows, stored transposed: lane
        // l addresses key 8 (n - 3 + l / 8) + l % 8, which receives its 8 rows (16 bytes).
        if ((n & 3) == 3) {
          const u32 off = tile_off((n - 3 + (lane >> 3)) * 8 + (lane & 7), row & ~7, BC);
          stmatrix_x4_trans(sPt + off, pp4);
          stmatrix_x4_trans(sSt + off, ds4);
        }
      }
    }
#endif
    fence_proxy_async();
    __syncthreads();  // P^T and dS^T of both warpgroups published

    // dQ chunk 0 first, so that its reduction overlaps dV and dK (wait_group retires in order).
    wgmma_fence();
    dq_issue(0, 0);
    {
      const u32 so = opaque(sO + wg * NP * Q_PANEL), sq = opaque(sQ + wg * NP * Q_PANEL);
      const u32 pt = opaque(sPt), st = opaque(sSt);
#pragma unroll
      for (int c = 0; c < DVX; ++c)
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          if (KM) {  // dV += Pd^T dO[:, quarter]: A = P^T (K-major: query rows), B over the panels
            wgmma<0, 1>(dv[c], desc_k(pt + ks * 32), desc_mn_wide(so + ks * 16 * 128, Q_PANEL));
            wgmma<0, 1>(dk[c], desc_k(st + ks * 32), desc_mn_wide(sq + ks * 16 * 128, Q_PANEL));
          } else {  // dV^T[panel c] += dO[:, panel c]^T Pd
            wgmma<1, 0>(dv[c], desc_mn(so + c * Q_PANEL + ks * 16 * 128), desc_k(pt + ks * 32));
            wgmma<1, 0>(dk[c], desc_mn(sq + c * Q_PANEL + ks * 16 * 128), desc_k(st + ks * 32));
          }
      wgmma_commit();
    }
    wgmma_wait<1>();
    dq_reduce(0, 0, t);
    // dV and dK retired in both warpgroups: Q and dO are free for the next tile's loads.
    wgmma_wait<0>();
    __syncthreads();
    if (kn < kend) stage(tile_at(kn), par ^ 1);
      // DQB = 2: chunk c + 1 is in flight while chunk c is reduced; its accumulator held chunk
      // c - 1, reduced in the previous step (chunk 0 before the staging).
#pragma unroll
    for (int c = 1; c < NPE; ++c) {
      const int bi = DQB == 2 ? c & 1 : 0;
      if (DQB == 1 || c == 1) {
        wgmma_fence();
        dq_issue(c, bi);
      }
      if (DQB == 2 && c + 1 < NPE) {
        wgmma_fence();
        dq_issue(c + 1, (c + 1) & 1);
        wgmma_wait<1>();
      } else {
        // Retire every group inside the iteration: one in flight across the back edge makes
        // ptxas serialize the kernel's wgmmas (C7514/C7515, ffpa_fwd_sm90.cuh).
        wgmma_wait<0>();
      }
      dq_reduce(c, bi, t);
    }
    tp = t;
    k = kn;
    ++ex;
  }
  if (DQL && tp >= 0) dq_deferred();  // of the last tile
#pragma unroll
  for (int c = 0; c < DVX; ++c) {
    fence_acc(dv[c]);
    fence_acc(dk[c]);
  }
  cp_async_wait<0>();  // no query tile at all: K/V copies still in flight
#if FFPA_DBIAS == 1
  // dBias column sums (the same in both blocks: rank 0 adds them): over the 8 row lanes of each
  // key, then one atomic per warp and key.
  if (rank == 0) {
#pragma unroll
    for (int n = 0; n < NS; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v = colsum[n][e];
        v += __shfl_xor_sync(0xffffffffu, v, 4);
        v += __shfl_xor_sync(0xffffffffu, v, 8);
        v += __shfl_xor_sync(0xffffffffu, v, 16);
        const int key = key0 + n * 8 + e;
        if (lane < 4 && key < f.Nkv) atomicAdd(p.dbias_accum + key, v);
      }
  }
#endif

  // dK, dV of the key tile and quarter in the input dtype (zero where no query saw a key); a
  // piece's, of its query range, in fp32 into its slot of dkv_partial ([2][BC][D]).
  u16* dkb = static_cast<u16*>(p.dk) + b * p.dk_batch_stride + kvh * p.dk_head_stride;
  u16* dvb = static_cast<u16*>(p.dv) + b * p.dv_batch_stride + kvh * p.dv_head_stride;
  float* pk = p.dkv_partial + (long long)slot * 2 * BC * D;
  float* pv = pk + BC * D;
  if (KM) {  // rows: keys, columns: the quarter's; a pair is two columns of a key (D % 8 == 0)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = n0 + wq * 16 + (lane >> 2) + h * 8;
      if (key >= f.Nkv) continue;
#pragma unroll
      for (int j = 0; j < DVY; ++j) {
        const int col = cbase + wg * DQ + j * 8 + (lane & 3) * 2;
        if (col >= D) continue;
        const float2 k2 = make_float2(dk[0][j][h * 2] * f.scale, dk[0][j][h * 2 + 1] * f.scale);
        const float2 v2 = make_float2(dv[0][j][h * 2], dv[0][j][h * 2 + 1]);
        if (slot >= 0) {
          *reinterpret_cast<float2*>(pk + (key - n0) * D + col) = k2;
          *reinterpret_cast<float2*>(pv + (key - n0) * D + col) = v2;
        } else {
          *reinterpret_cast<u32*>(dkb + (long long)key * p.dk_row_stride + col) = pack2(k2.x, k2.y);
          *reinterpret_cast<u32*>(dvb + (long long)key * p.dv_row_stride + col) = pack2(v2.x, v2.y);
        }
      }
    }
    return;
  }
  // Transposed (rows: D, columns: keys): neighbours in a pair are two keys.
#pragma unroll
  for (int c = 0; c < DVX; ++c)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = cbase + wg * DQ + c * 64 + wq * 16 + (lane >> 2) + h * 8;
      if (col >= D) continue;
#pragma unroll
      for (int n = 0; n < DVY; ++n) {
        const u32 k2 = pack2(dk[c][n][h * 2] * f.scale, dk[c][n][h * 2 + 1] * f.scale);
        const u32 v2 = pack2(dv[c][n][h * 2], dv[c][n][h * 2 + 1]);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = key0 + n * 8 + e;
          if (key >= f.Nkv) continue;
          if (slot >= 0) {
            pk[(key - n0) * D + col] = dk[c][n][h * 2 + e] * f.scale;
            pv[(key - n0) * D + col] = dv[c][n][h * 2 + e];
          } else {
            dkb[(long long)key * p.dk_row_stride + col] = (u16)(e ? k2 >> 16 : k2);
            dvb[(long long)key * p.dv_row_stride + col] = (u16)(e ? v2 >> 16 : v2);
          }
        }
      }
    }
}

// The tail's pieces summed (launched after the backward, chained by programmatic dependent
// launch): a block per (tail key tile, key of it); dK and dV over the whole D in the input dtype.
extern "C" __global__ void __launch_bounds__(128)
    ffpa_bwd_sm90c_merge_kernel(const FfpaBwdParams p) {
  using namespace ffpa_bwd90c;
  const FfpaFwdParams& f = p.fwd;
  grid_dependency_wait();
  const int key = (int)(p.split_from + blockIdx.x) * BC + blockIdx.y;
  if (key >= f.Nkv) return;
  const int kvh = f.Hkv - 1, b = f.B - 1;  // the tail's key tiles are the last head's
  const float* pk = p.dkv_partial + (long long)blockIdx.x * p.num_splits * 2 * BC * D +
                    blockIdx.y * D;  // piece 0's row of the key
  u16* dk = static_cast<u16*>(p.dk) + b * p.dk_batch_stride + kvh * p.dk_head_stride +
            (long long)key * p.dk_row_stride;
  u16* dv = static_cast<u16*>(p.dv) + b * p.dv_batch_stride + kvh * p.dv_head_stride +
            (long long)key * p.dv_row_stride;
  for (int col = threadIdx.x * 2; col < D; col += 256) {
    float2 k = make_float2(0.f, 0.f), v = make_float2(0.f, 0.f);
    for (int s = 0; s < p.num_splits; ++s) {
      const float* ps = pk + (long long)s * 2 * BC * D + col;
      const float2 a = *reinterpret_cast<const float2*>(ps);
      const float2 c = *reinterpret_cast<const float2*>(ps + BC * D);
      k.x += a.x, k.y += a.y, v.x += c.x, v.y += c.y;
    }
    *reinterpret_cast<u32*>(dk + col) = pack2(k.x, k.y);
    *reinterpret_cast<u32*>(dv + col) = pack2(v.x, v.y);
  }
}
