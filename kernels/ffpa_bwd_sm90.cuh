// Split-D flash-attention backward for Hopper (sm_90a): warpgroup MMA (wgmma), compiled at run time
// by NVRTC. Device code only: no standard headers. Launched as ffpa_bwd.cuh's three kernels are:
// ffpa_bwd_pre_kernel and ffpa_bwd_convert_kernel (ffpa_bwd_aux.cuh) around ffpa_bwd_sm90_kernel.
// The configuration comes in as macros (src/variants/ffpa_bwd_sm90.cpp sets them):
//   FFPA_D       head dim (multiple of 8, at most 512)
//   FFPA_PANELS  64-column panels of each half of D per Q/dO cp.async group (divides DP / 128):
//                phase 1 waits for (and meets at a barrier on) each group
//   FFPA_SPLIT   0: the warpgroups meet at block barriers (phase-1 groups, exchange, P/dS, the
//                release of Q/dO); 1: each warpgroup loads and guards its own half of K, V, Q, dO
//                and its own row table with warpgroup barriers, the exchange pairs warp w of one
//                with warp w of the other, and only the P/dS publication is a block barrier
//                (P^T and dS^T double-buffered by tile parity), so the warpgroups drift apart
//                by up to a tile phase (one reduces dQ while the other runs its wgmmas)
//   FFPA_PAIR    1 (with FFPA_SPLIT 0): clusters of two blocks (key tiles 2i, 2i + 1, the same
//                query tiles): each dQ chunk is summed over the pair through distributed shared
//                memory (the exchange buffer) and each block reduces half its rows, so half the
//                fp32 reductions reach L2; two cluster barriers per chunk
//   FFPA_DQBUF   dQ chunk accumulators: 1, or 2 (chunk c + 1 is issued before chunk c is
//                reduced, 32 registers more)
//   FFPA_BF16, FFPA_CAUSAL, FFPA_BIAS, FFPA_DBIAS, FFPA_DROPOUT as in ffpa_bwd.cuh (a key bias,
//                FFPA_DBIAS 1, is read once per block and its dBias column sums are kept in
//                registers across the query tiles)
//
// Layout of the work: a block is one key tile of BC = 32 keys of one kv head (and batch), two
// warpgroups; it loops over the query tiles (64 rows) of the packed group * Nq rows of every q
// head of the GQA group, as ffpa_bwd.cuh does. D is padded to DP (a multiple of 128) and split in
// halves: warpgroup w owns the DP/2 columns [w * DH, (w + 1) * DH). K, V stay resident; Q and dO
// of a query tile are loaded whole, in NG cp.async groups, and the next tile's load is issued as
// soon as the current tile's last reader of them (dV, dK) retired.
// Per query tile, warpgroup w:
//  - S_w = Q[:, half w] K[:, half w]^T and dP_w = dO[:, half w] V[:, half w]^T: wgmma m64n32k16,
//    A and B from shared memory, K-major (the forward's QK);
//  - exchange: each thread hands the other warpgroup the partials of the rows the other finishes
//    (the accumulator rows of h = 1 - w) and adds the other's partials of its own rows (h = w);
//  - P = exp2(S scale log2e - lse log2e) (masked: 0), with dropout Pd = P keep / (1 - p) (else
//    Pd = P), dS = Pd dP - P delta for its rows, stored transposed (Pd^T, dS^T: [key][query row],
//    128-byte rows) in the input dtype;
//  - dV^T[half w] += dO[:, half w]^T Pd and dK^T[half w] += Q[:, half w]^T dS: M = D, so the fp32
//    accumulators are DP/128 m64n32 tiles each (D = 512: 64 + 64 registers); A = dO^T / Q^T is the
//    resident tile read MN-major (imm-trans-a), B = P^T / dS^T K-major;
//  - dQ[:, half w] = dS K[:, half w] in 64-column chunks (m64n64k16, A = dS^T read MN-major, B = K
//    MN-major as the forward's V), each added to dq_accum with red.global.add.v4.f32.
//
// Shared panels use tile_off (ffpa_common.cuh): 128-byte rows, 16-byte granule XOR (row & 7), on a
// 1024-byte aligned base: the wgmma 128-byte swizzle. Descriptors and wgmma forms are wgmma.cuh's
// (shared with ffpa_fwd_sm90.cuh). tools/ffpa_bwd_sm90_sim.py checks the descriptors and fragment
// maps below against it.
#pragma once

#include "ffpa_bwd_sm90_layout.h"
#include "ffpa_common.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

namespace ffpa_bwd90 {

using namespace ffpa_dev;

constexpr int D = FFPA_D;
constexpr int BR = 64;
constexpr int BC = 32;
constexpr int NT = 256;
constexpr int DP = (D + 127) / 128 * 128;  // zero-filled past D
constexpr int DH = DP / 2;                 // columns of a warpgroup
constexpr int NP = DH / 64;                // 64-column panels of a warpgroup
constexpr int PPG = FFPA_PANELS;           // of them per Q/dO cp.async group
constexpr int NG = NP / PPG;
constexpr int KV_PANEL = BC * 128;
constexpr int Q_PANEL = BR * 128;
constexpr bool SPLIT = FFPA_SPLIT;
constexpr bool PAIR = FFPA_PAIR;
constexpr int DQB = FFPA_DQBUF;
constexpr int PT_BYTES = BC * BR * 2;  // P^T or dS^T
constexpr int ROW_BYTES = BR * 8;      // row table of a tile: lse * log2(e), delta
constexpr ffpa_layout::BwdSm90 LAYOUT = ffpa_layout::bwd_sm90_layout(DP, SPLIT);
static_assert(BR == ffpa_layout::BwdSm90::kRows && BC == ffpa_layout::BwdSm90::kKeys,
              "the layout's tile");
// Loads: SPLIT, a warpgroup its own half; else all threads both halves.
constexpr int LT = SPLIT ? 128 : NT;
constexpr int LHALVES = SPLIT ? 1 : 2;
#define POS_INF __int_as_float(0x7f800000u)
constexpr float LOG2E = 1.4426950408889634f;

static_assert(D % 8 == 0 && D <= 512, "D: a multiple of 8, at most 512 (dK, dV live in registers)");
static_assert(NP % PPG == 0, "a Q/dO group holds a whole share of the half's panels");
static_assert((LHALVES * PPG * BR * 8) % LT == 0, "whole 16-byte granules per thread");
static_assert(!(PAIR && SPLIT), "the pair exchange borrows the block-synchronous exchange buffer");
static_assert(DQB == 1 || DQB == 2, "one or two dQ chunk accumulators");

// Named barriers: 1 + w for the 128 threads of warpgroup w, 3 + q for warp q of both warpgroups.
__device__ __forceinline__ void wg_sync(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
}
__device__ __forceinline__ void pair_sync(int wq) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(3 + wq) : "memory");
}

}  // namespace ffpa_bwd90

#if FFPA_PAIR
#define FFPA_CLUSTER_DIMS __cluster_dims__(2, 1, 1)
#else
#define FFPA_CLUSTER_DIMS
#endif

extern "C" __global__ void FFPA_CLUSTER_DIMS __launch_bounds__(ffpa_bwd90::NT, 1)
    ffpa_bwd_sm90_kernel(const FfpaBwdParams p) {
  using namespace ffpa_bwd90;
  const FfpaFwdParams& f = p.fwd;
  const SmemBase sb = smem_base_1024();
  const u32 sK = sb.addr;
  unsigned char* smem = sb.ptr;
  const u32 sV = sK + LAYOUT.v;
  const u32 sQ = sK + LAYOUT.q;
  const u32 sO = sK + LAYOUT.o;     // dO
  const u32 sPt0 = sK + LAYOUT.pt;  // P^T, then dS^T, of each set
  float4* xbuf = reinterpret_cast<float4*>(smem + LAYOUT.x);
  // Row tables of two consecutive query tiles (the next one is staged while dQ of this one is
  // still reduced; SPLIT: one pair per warpgroup): per row lse * log2(e) (+inf: no gradient) and
  // delta.
  unsigned char* rows_base = smem + LAYOUT.rows;

  const int tid = threadIdx.x, lane = tid & 31;
  // The warpgroup index through a shuffle, so that ptxas knows it is warp-uniform (CUTLASS does the
  // same): the shared addresses and descriptors derived from it stay in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0), t128 = tid & 127, wq = t128 >> 5;
  const int lt = SPLIT ? t128 : tid;  // this thread among the LT loading threads
  // SPLIT: the K, V, Q, dO columns a warpgroup loads; else all of them.
  constexpr int LW = SPLIT ? DH : DP;
  const int lc0 = SPLIT ? wg * DH : 0;
  // Waits for the warpgroup (SPLIT) or the block.
  auto sync_own = [&] {
    if (SPLIT)
      wg_sync(wg);
    else
      __syncthreads();
  };
  const int n0 = blockIdx.x * BC;
  // PAIR: the two blocks of a cluster visit the same query tiles (those the first one's keys
  // see: a superset of the second's) and meet at the same cluster barriers.
  const int rank = PAIR ? (int)cluster_rank() : 0;
  const int n0_skip = n0 - rank * BC;
  const int kvh = blockIdx.y, b = blockIdx.z;
  const int rows_total = f.group * f.Nq;
  const int diag = FFPA_CAUSAL == 1 ? f.Nkv - f.Nq : 0;  // row r sees keys k <= r + diag
  const int ntile = (rows_total + BR - 1) / BR;

  // K and V of the key tile, resident for the whole block: the first cp.async group.
  {
    const u16* kb = static_cast<const u16*>(f.k) + b * f.k_batch_stride + kvh * f.k_head_stride;
    const u16* vb = static_cast<const u16*>(f.v) + b * f.v_batch_stride + kvh * f.v_head_stride;
#pragma unroll 4
    for (int idx = lt; idx < BC * LW / 8; idx += LT) {
      const int row = idx / (LW / 8), col = lc0 + (idx % (LW / 8)) * 8;
      load_kv_granule<BC, D>(f, kb, vb, sK, sV, row, col, n0);
    }
    cp_async_commit();
  }

  // Causal: query tiles that see none of the block's keys are skipped (block-uniform).
  auto next_tile = [&](int t) {
    for (; FFPA_CAUSAL && t < ntile; ++t) {
      const int m0 = t * BR, i_hi = min(m0 + BR, rows_total) - 1;
      const int r_hi = m0 / f.Nq != i_hi / f.Nq ? f.Nq - 1 : i_hi % f.Nq;
      if (r_hi + diag >= n0_skip) break;
    }
    return t;
  };

  // Row table (into parity par) and the NG cp.async groups of Q and dO of query tile t; group g
  // holds panels g * PPG .. + PPG - 1 of both halves (SPLIT: of the warpgroup's half).
  const u16* qb = static_cast<const u16*>(f.q) + b * f.q_batch_stride;
  const u16* ob = static_cast<const u16*>(p.dout) + b * p.do_batch_stride;
  auto stage = [&](int t, int par) {
    const int m0 = t * BR;
    if (lt < BR) {
      const int i = m0 + lt;
      float l = POS_INF, dl = 0.f;
      if (i < rows_total) {
        const long long lrow = ((long long)b * f.Hq + kvh * f.group + i / f.Nq) * f.Nq + i % f.Nq;
        l = lse_log2(f.lse[lrow]);
        dl = p.delta[lrow];
      }
      float* rt = reinterpret_cast<float*>(rows_base + ((SPLIT ? wg * 2 : 0) + par) * ROW_BYTES);
      rt[lt] = l;
      rt[BR + lt] = dl;
    }
    // A thread loads the same RPT rows and granule column of every panel: their sources are
    // computed once (a division by Nq per granule took D = 512 self from 66 to 86 ms on the H200).
    // The group loop is rolled: unrolled, the granule addresses were live beside dK and dV
    // mid-tile.
    constexpr int RPT = BR * 8 / LT;
    QdoRow src[RPT];
#pragma unroll
    for (int j = 0; j < RPT; ++j)
      src[j] = qdo_row(p, qb, ob, m0 + (lt >> 3) + j * (LT / 8), rows_total, kvh);
#pragma unroll 1
    for (int g = 0; g < NG; ++g) {
#pragma unroll
      for (int q = 0; q < LHALVES * PPG; ++q) {
        const int h = SPLIT ? wg : q / PPG;
        const int col = h * DH + (g * PPG + q % PPG) * 64 + (lt & 7) * 8;
#pragma unroll
        for (int j = 0; j < RPT; ++j)
          qdo_granule<BR, D>(src[j], sQ, sO, (lt >> 3) + j * (LT / 8), col);
      }
      cp_async_commit();
    }
  };

  float dv[NP][4][4], dk[NP][4][4];
#pragma unroll
  for (int c = 0; c < NP; ++c)
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dv[c][n][e] = dk[c][n][e] = 0.f;

  const int key0 = n0 + (lane & 3) * 2;  // key of this thread's first accumulator column
#if FFPA_DBIAS == 1
  // The key bias ([1,1,1,Nkv]) of the thread's 8 keys (x log2 e) is the same in every query tile;
  // so are the keys of the dBias column sums.
  float kbias[4][2], colsum[4][2];
#pragma unroll
  for (int n = 0; n < 4; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int key = key0 + n * 8 + e;
      kbias[n][e] = key < f.Nkv ? bias_at(f, key) * LOG2E : 0.f;
      colsum[n][e] = 0.f;
    }
#endif
  int t = next_tile(0), par = 0;
  if (t < ntile) stage(t, 0);
  while (t < ntile) {
    const int tn = next_tile(t + 1);
    const float* rt =
        reinterpret_cast<const float*>(rows_base + ((SPLIT ? wg * 2 : 0) + par) * ROW_BYTES);
    const u32 sPt = sPt0 + (SPLIT ? par : 0) * 2 * PT_BYTES, sSt = sPt + PT_BYTES;  // dS^T
    const int m0 = t * BR;
    // Query row and q head of packed row `row` of the tile; r = -1 past the last row.
    auto row_of = [&](int row, int& r, int& hq) {
      const int i = m0 + row;
      r = i < rows_total ? i % f.Nq : -1;
      hq = kvh * f.group + i / f.Nq;
    };

    // Phase 1: S_w and dP_w over the warpgroup's half of D, one wgmma group per Q/dO group.
    float s[4][4], dp[4][4];
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      cp_async_wait_upto<NG - 1>(NG - 1 - g);
      fence_proxy_async();  // cp.async writes are generic-proxy, wgmma reads async-proxy
      sync_own();
      const int pn = wg * NP + g * PPG;  // first panel of the group in this half
      const u32 sq = opaque(sQ + pn * Q_PANEL), so = opaque(sO + pn * Q_PANEL);
      const u32 sk = opaque(sK + pn * KV_PANEL), sv = opaque(sV + pn * KV_PANEL);
      wgmma_fence();
#pragma unroll
      for (int pp = 0; pp < PPG; ++pp)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          const u64 dq_ = desc_k(sq + pp * Q_PANEL + kk * 32);
          const u64 dk_ = desc_k(sk + pp * KV_PANEL + kk * 32);
          const u64 do_ = desc_k(so + pp * Q_PANEL + kk * 32);
          const u64 dv_ = desc_k(sv + pp * KV_PANEL + kk * 32);
          if (g == 0 && pp == 0 && kk == 0) {
            wgmma_first<0, 0>(s, dq_, dk_);
            wgmma_first<0, 0>(dp, do_, dv_);
          } else {
            wgmma<0, 0>(s, dq_, dk_);
            wgmma<0, 0>(dp, do_, dv_);
          }
        }
      wgmma_commit();
    }
    wgmma_wait<0>();
    fence_acc(s);
    fence_acc(dp);

    // Exchange: warpgroup w finishes the accumulator rows of h = w. A thread hands over its h =
    // 1 - w partials (same warp and lane in the other warpgroup: the same positions) and adds
    // the other's h = w partials. Selects, not indexing by wg: the arrays stay in registers.
    float sm[4][2], dm[4][2];
    {
#pragma unroll
      for (int n = 0; n < 4; ++n)
        xbuf[(wg * 4 + n) * 128 + t128] = wg ? make_float4(s[n][0], s[n][1], dp[n][0], dp[n][1])
                                             : make_float4(s[n][2], s[n][3], dp[n][2], dp[n][3]);
      if (SPLIT)
        pair_sync(wq);  // the partner thread is in warp wq of the other warpgroup
      else
        __syncthreads();
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const float4 x = xbuf[((1 - wg) * 4 + n) * 128 + t128];
        sm[n][0] = (wg ? s[n][2] : s[n][0]) + x.x;
        sm[n][1] = (wg ? s[n][3] : s[n][1]) + x.y;
        dm[n][0] = (wg ? dp[n][2] : dp[n][0]) + x.z;
        dm[n][1] = (wg ? dp[n][3] : dp[n][1]) + x.w;
      }
    }

    // P and dS of the thread's rows, stored transposed: [key][query row], 2-byte stores.
    {
      const int row = wq * 16 + (lane >> 2) + wg * 8;
      const float l = rt[row], dl = rt[BR + row];
      int r, hq;
      row_of(row, r, hq);
      const int causal_lim = r + diag - key0;  // columns past it are masked
      const int kv_lim = f.Nkv - key0;
#if FFPA_DBIAS >= 2
      const long long boff =
          b * f.bias_batch_stride + hq * f.bias_head_stride + max(r, 0) * f.bias_row_stride + key0;
#endif
#if FFPA_DROPOUT
      // The forward's element ((b Hq + hq) Nq + r) Nkv + key of the Philox stream.
      const unsigned long long erow =
          (((unsigned long long)b * f.Hq + hq) * f.Nq + max(r, 0)) * (unsigned long long)f.Nkv +
          key0;
      // Keep bits first (bit 2n + e), one Philox draw live at a time (a rolled loop): unrolled,
      // the draws beside dK and dV spilled at D = 512.
      u32 keep = 0;
#pragma unroll 1
      for (int n = 0; n < 4; ++n) {
        float k2[2] = {1.f, 1.f};
        dropout2(f.dropout_seed, f.dropout_offset + erow + n * 8, f.dropout_keep_min, k2);
        keep |= (k2[0] != 0.f ? 1u : 0u) << (2 * n) | (k2[1] != 0.f ? 2u : 0u) << (2 * n);
      }
#endif
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        float pr[2], pd[2], ds[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kof = n * 8 + e;
          const bool masked = kof >= kv_lim || (FFPA_CAUSAL && kof > causal_lim);
          float x = sm[n][e] * f.scale_log2 - l;
#if FFPA_DBIAS == 1
          x += kbias[n][e];
#elif FFPA_DBIAS >= 2
          if (kof < kv_lim) x += bias_at(f, boff + kof) * LOG2E;
#endif
          pr[e] = masked ? 0.f : exp2f(x);
          pd[e] = pr[e];
        }
#if FFPA_DROPOUT
        // Pd = P keep / (1 - p) goes to dV; dS = Pd dP - P delta (= P (dP keep / (1 - p) - delta)).
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          pd[e] = keep >> (2 * n + e) & 1 ? pd[e] * f.dropout_scale : 0.f;
          ds[e] = pd[e] * dm[n][e] - pr[e] * dl;
        }
#else
#pragma unroll
        for (int e = 0; e < 2; ++e) ds[e] = pr[e] * (dm[n][e] - dl);
#endif
#if FFPA_DBIAS == 1
#pragma unroll
        for (int e = 0; e < 2; ++e) colsum[n][e] += ds[e];
#elif FFPA_DBIAS >= 2
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (r >= 0 && n * 8 + e < kv_lim) put_dbias(p, b, hq, r, key0 + n * 8 + e, ds[e]);
#endif
        const u32 pp2 = pack2(pd[0], pd[1]), ds2 = pack2(ds[0], ds[1]);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const u32 off = tile_off(n * 8 + (lane & 3) * 2 + e, row, BC);
          st_b16(sPt + off, e ? pp2 >> 16 : pp2);
          st_b16(sSt + off, e ? ds2 >> 16 : ds2);
        }
      }
    }
    fence_proxy_async();
    __syncthreads();  // P^T and dS^T of both warpgroups published

    // dQ[:, half w] = dS K[:, half w], chunk c: columns w * DH + c * 64 .. + 63.
    // Chunk c goes to accumulator bi (a constant once the chunk loop is unrolled).
    float dqs[DQB][8][4];
    auto dq_issue = [&](int c, int bi) {
      float(&dq)[8][4] = dqs[bi];
      const u32 kp = opaque(sK + (wg * NP + c) * KV_PANEL), st = opaque(sSt);
      wgmma_first<1, 1>(dq, desc_mn(st), desc_mn(kp));
      wgmma<1, 1>(dq, desc_mn(st + 16 * 128), desc_mn(kp + 16 * 128));
      wgmma_commit();
    };
    // Lane pairs swap half their fragment so that each lane holds 4 neighbouring columns of one
    // row (even lanes row g, odd lanes row g + 8): one vector reduction each (ffpa_bwd.cuh).
    auto dq_reduce = [&](int c, int bi) {
      float(&dq)[8][4] = dqs[bi];
      fence_acc(dq);
      const bool odd = lane & 1;
      const int row = wq * 16 + (lane >> 2) + (odd ? 8 : 0);
      int r, hq;
      row_of(row, r, hq);
      const long long lrow = ((long long)b * f.Hq + hq) * f.Nq + r;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const float s0 = odd ? dq[n][0] : dq[n][2], s1 = odd ? dq[n][1] : dq[n][3];
        const float r0 = __shfl_xor_sync(0xffffffffu, s0, 1);
        const float r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
        const int col = wg * DH + c * 64 + n * 8 + (lane & 2) * 2;
        if (r >= 0 && col < D) {
          const float4 v = odd ? make_float4(r0, r1, dq[n][2], dq[n][3])
                               : make_float4(dq[n][0], dq[n][1], r0, r1);
          red_add4(p.dq_accum + lrow * D + col, v, f.scale);
        }
      }
    };

    // PAIR: dQ summed over the two blocks. A thread sends the rows the other block reduces
    // (h = 1 - rank) to the same thread there, through that block's exchange buffer, and adds
    // the other's h = rank rows to its own. Then lane pairs swap so that each lane holds 4
    // neighbouring columns of its row: even lanes the n8 groups 2m, odd lanes 2m + 1.
    auto dq_pair_reduce = [&](int c, int bi) {
      float(&dq)[8][4] = dqs[bi];
      fence_acc(dq);
      const u32 xmine = smem_u32(xbuf + wg * 4 * 128 + t128);
      const u32 xpeer = map_rank(xmine, rank ^ 1);
      cluster_sync();  // the other block has read what this one sent before
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int a = 2 * m, b2 = 2 * m + 1;
        if (rank)
          st_cluster4(xpeer + m * 128 * 16, dq[a][0], dq[a][1], dq[b2][0], dq[b2][1]);
        else
          st_cluster4(xpeer + m * 128 * 16, dq[a][2], dq[a][3], dq[b2][2], dq[b2][3]);
      }
      cluster_sync();  // both blocks' halves arrived
      const bool odd = lane & 1;
      const int row = wq * 16 + (lane >> 2) + rank * 8;
      int r, hq;
      row_of(row, r, hq);
      const long long lrow = ((long long)b * f.Hq + hq) * f.Nq + r;
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const float4 x = xbuf[(wg * 4 + m) * 128 + t128];
        const int a = 2 * m, b2 = 2 * m + 1;
        const float a0 = (rank ? dq[a][2] : dq[a][0]) + x.x;
        const float a1 = (rank ? dq[a][3] : dq[a][1]) + x.y;
        const float b0 = (rank ? dq[b2][2] : dq[b2][0]) + x.z;
        const float b1 = (rank ? dq[b2][3] : dq[b2][1]) + x.w;
        const float r0 = __shfl_xor_sync(0xffffffffu, odd ? a0 : b0, 1);
        const float r1 = __shfl_xor_sync(0xffffffffu, odd ? a1 : b1, 1);
        const int col = wg * DH + c * 64 + (a + (odd ? 1 : 0)) * 8 + (lane & 2) * 2;
        if (r >= 0 && col < D) {
          const float4 v = odd ? make_float4(r0, r1, b0, b1) : make_float4(a0, a1, r0, r1);
          red_add4(p.dq_accum + lrow * D + col, v, f.scale);
        }
      }
    };

    auto dq_finish = [&](int c, int bi) {
      if (PAIR)
        dq_pair_reduce(c, bi);
      else
        dq_reduce(c, bi);
    };
    // dQ chunk 0 first, so that its reduction (and PAIR its exchange) overlaps dV and dK
    // (wait_group retires in order).
    wgmma_fence();
    dq_issue(0, 0);
    {
      const u32 so = opaque(sO + wg * NP * Q_PANEL), sq = opaque(sQ + wg * NP * Q_PANEL);
      const u32 pt = opaque(sPt), st = opaque(sSt);
#pragma unroll
      for (int c = 0; c < NP; ++c)
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          wgmma<1, 0>(dv[c], desc_mn(so + c * Q_PANEL + ks * 16 * 128), desc_k(pt + ks * 32));
          wgmma<1, 0>(dk[c], desc_mn(sq + c * Q_PANEL + ks * 16 * 128), desc_k(st + ks * 32));
        }
      wgmma_commit();
    }
    wgmma_wait<1>();
    dq_finish(0, 0);
    // dV and dK retired in both warpgroups (SPLIT: in this one, the only reader of its half):
    // Q and dO are free for the next tile's loads.
    wgmma_wait<0>();
    sync_own();
    if (tn < ntile) stage(tn, par ^ 1);
      // DQB = 2: chunk c + 1 is in flight while chunk c is reduced; its accumulator held chunk
      // c - 1, reduced in the previous step (chunk 0 before the staging).
#pragma unroll
    for (int c = 1; c < NP; ++c) {
      const int bi = DQB == 2 ? c & 1 : 0;
      if (DQB == 1 || c == 1) {
        wgmma_fence();
        dq_issue(c, bi);
      }
      if (DQB == 2 && c + 1 < NP) {
        wgmma_fence();
        dq_issue(c + 1, (c + 1) & 1);
        wgmma_wait<1>();
      } else {
        // Retire every group inside the iteration: one in flight across the back edge makes
        // ptxas serialize the kernel's wgmmas (C7514/C7515, ffpa_fwd_sm90.cuh).
        wgmma_wait<0>();
      }
      dq_finish(c, bi);
    }
    t = tn;
    par ^= 1;
  }
#pragma unroll
  for (int c = 0; c < NP; ++c) {
    fence_acc(dv[c]);
    fence_acc(dk[c]);
  }
  cp_async_wait<0>();  // no query tile at all: K/V copies still in flight
#if FFPA_DBIAS == 1
  // dBias column sums: over the 8 row lanes of each key, then one atomic per warp and key.
#pragma unroll
  for (int n = 0; n < 4; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float v = colsum[n][e];
      v += __shfl_xor_sync(0xffffffffu, v, 4);
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      const int key = key0 + n * 8 + e;
      if (lane < 4 && key < f.Nkv) atomicAdd(p.dbias_accum + key, v);
    }
#endif

  // dK, dV of the key tile in the input dtype (zero where no query saw a key). The accumulators
  // are transposed (rows: D, columns: keys), so neighbours in a register pair are two keys.
  u16* dkb = static_cast<u16*>(p.dk) + b * p.dk_batch_stride + kvh * p.dk_head_stride;
  u16* dvb = static_cast<u16*>(p.dv) + b * p.dv_batch_stride + kvh * p.dv_head_stride;
#pragma unroll
  for (int c = 0; c < NP; ++c)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = wg * DH + c * 64 + wq * 16 + (lane >> 2) + h * 8;
      if (col >= D) continue;
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const u32 k2 = pack2(dk[c][n][h * 2] * f.scale, dk[c][n][h * 2 + 1] * f.scale);
        const u32 v2 = pack2(dv[c][n][h * 2], dv[c][n][h * 2 + 1]);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = key0 + n * 8 + e;
          if (key >= f.Nkv) continue;
          dkb[key * p.dk_row_stride + col] = (u16)(e ? k2 >> 16 : k2);
          dvb[key * p.dv_row_stride + col] = (u16)(e ? v2 >> 16 : v2);
        }
      }
    }
}

#include "ffpa_bwd_aux.cuh"
