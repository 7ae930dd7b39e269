// Flash-attention backward for few query rows (decode: a kv head's group x Nq rows, at most 16) on
// sm_90: TMA loads of K and V through an mbarrier ring, mma.sync; compiled at run time by NVRTC.
// Device code only: no standard headers. Launched as ffpa_bwd.cuh is: ffpa_bwd_pre_kernel and
// ffpa_bwd_convert_kernel (ffpa_bwd_aux.cuh) around ffpa_bwd_decode_sm90_kernel, all three
// chained by programmatic dependent launch.
//
// Why: a decode backward reads K and V once and writes dK and dV once, ~1 FLOP a byte: its speed
// is the rate at which those bytes stream. ffpa-bwd-decode (CUDA cores, cp.async, block barriers
// between a tile's loads, its S/dP and its stores) holds HBM at ~79 % of its peak on the H100.
// Here a producer warp keeps `SLOTS` K or V tiles in flight through TMA, a tile's slots go back to
// it as soon as the consumers have read them (V after dP, K after dQ), and dK, dV leave from
// registers through a small per-warp staging buffer, so the loads of the next tiles never wait
// for a tile's stores.
//
// Work (as ffpa_fwd_decode.cuh): the keys every (batch, kv head) sees lie end to end and one wave
// of blocks takes equal shares of them; a share is one or more segments (a head's keys within
// it). dK and dV of a key are complete in its tile (every row of the group is in the block); dQ of
// a segment's rows is summed in registers and added to dq_accum when the segment ends (fp32
// vector reductions: a head's dQ sees as many adds as it has segments). Keys no causal row sees
// are never loaded; the blocks share storing their zero dK and dV.
//
// The configuration comes in as macros (src/variants/ffpa_bwd_decode_sm90.cpp sets them):
//   FFPA_D       head dim (a multiple of 8, at most 1024)
//   FFPA_KB      keys of a tile: 16, 32 or 64
//   FFPA_SLOTS   ring slots (a K or a V tile each), at least 2
//   FFPA_NR      query rows computed: 8 or 16 (the group's rows, group x Nq, rounded up)
//   FFPA_WARPS   consumer warps: 4 or 8
//   FFPA_PASSES  1: dK and dV from this kernel; 2: this kernel writes P and dS (p.pds) instead,
//                and ffpa_bwd_decode_sm90_writes_kernel makes dK and dV from them after it
//   FFPA_BF16, FFPA_CAUSAL, FFPA_BIAS, FFPA_DBIAS, FFPA_DROPOUT as in ffpa_bwd.cuh
//
// A block: warp FFPA_WARPS (lane 0) is the producer: for each tile of its segments, K then V into
// the next slot (dp / 64 boxes of KB keys x 64 columns, 128-byte swizzle) once the consumers
// released it. The consumer warps: a key block of 16 keys and DSP = warps / (KB / 16) warps on it,
// each a part of D. Warp (key block kbk, part dpart) for each tile:
//  - S^T = K Q^T and dP^T = V dO^T of its 16 keys over its part of D (mma m16n8k16, keys as M,
//    the rows as N); the V slot is released; the parts' partial sums meet in shared memory (a
//    named barrier of the key block's warps);
//  - P^T, dS^T per element (masks: past the segment, causal; bias, dropout with the forward's
//    Philox elements, dBias), kept in registers as the A fragments of the next products; part 0
//    writes dS to shared memory, and a named barrier of the consumer warps publishes it;
//  - dQ^T[its share of D's columns] += K^T dS^T over the tile's keys; the K slot is released;
//  - dV = P^T dO and dK = scale dS^T Q of its keys and part of D, in chunks of at most 64
//    columns, each through the warp's staging buffer to 16-byte global stores.
#pragma once

#include "ffpa_bwd_aux.cuh"
#include "ffpa_bwd_decode_sm90_layout.h"
#include "ffpa_decode_ring.cuh"
#include "wgmma.cuh"

namespace ffpa_bwd_dec90 {

using namespace ffpa_dev;
using namespace ffpa_decode;
using L = ffpa_layout::BwdDecodeSm90;

constexpr int D = FFPA_D;
constexpr int DP = (D + 63) / 64 * 64;
constexpr int KB = FFPA_KB;
constexpr int SLOTS = FFPA_SLOTS;
constexpr int NR = FFPA_NR;
constexpr int NN = NR / 8;  // n8 tiles of the rows
constexpr int R = L::kRows;
constexpr int NW = FFPA_WARPS;
constexpr int NT = (NW + 1) * 32;
constexpr int NC = NW * 32;      // consumer threads
constexpr int KBK = KB / 16;     // key blocks of a tile
constexpr int DSP = NW / KBK;    // warps of a key block: parts of D
constexpr int DPART = DP / DSP;  // columns of a part
// dQ: m16 tiles of columns a warp (the last warps' past DP, if any, skipped) and its columns.
constexpr int MT = (DP / 16 + NW - 1) / NW;
constexpr int QW = MT * 16;
// Columns of a dK/dV chunk: 64, or 32 beside dQ accumulators of 128 registers (16 rows at
// D > 512), which would otherwise spill.
constexpr int CW = DPART % 64 == 0 && MT * NN * 4 < 128 ? 64 : DPART % 32 == 0 ? 32 : 16;
FFPA_LAYOUT_FN ffpa_layout::BwdDecodeSm90 layout() {
  return ffpa_layout::bwd_decode_sm90_layout(DP, KB, SLOTS, NR, NW);
}
constexpr int SLOT = layout().slot;
constexpr int OFF_Q = layout().q, OFF_O = layout().o, OFF_DS = layout().ds;
constexpr int OFF_XCH = layout().xch, OFF_STAGE = layout().stage, OFF_STATS = layout().stats;
constexpr int OFF_BARS = layout().bars;
constexpr int BAR_ALL = 1;   // named barrier of the consumer warps (0 is __syncthreads)
constexpr int BAR_KEYS = 2;  // + key block: its DSP warps
constexpr float LOG2E = 1.4426950408889634f;

static_assert(D % 8 == 0 && D <= 1024, "D: a multiple of 8, at most 1024");
static_assert(KB == 16 || KB == 32 || KB == 64, "16, 32 or 64 keys a tile");
static_assert(SLOTS >= 2, "two ring slots at least");
static_assert(NR == 8 || NR == 16, "8 or 16 rows");
static_assert(NW == 4 || NW == 8, "4 or 8 consumer warps");
static_assert(FFPA_PASSES == 1 || FFPA_PASSES == 2, "one or two passes");
static_assert(DPART % 16 == 0, "whole k16 steps: the host refuses other parts of D");

// m16n8k8: the products over 8 rows (NR = 8).
__device__ __forceinline__ void mma_k8(float (&c)[4], u32 a0, u32 a1, u32 b0) {
#if FFPA_BF16
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
#endif
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// C += A B^T over the warp's part of D (columns d0 ..): A the 16 keys kb0 .. of a K or V tile
// (sa), B the NR rows of Q or dO (sb): S^T or dP^T. The k16 steps go round CH accumulators and
// are summed at the end: one accumulator made the DPART / 16 mma of a product a chain of
// dependent ones (16 at D = 512 with kb = 32 and 4 warps), each waiting for the last one's result.
// The ldmatrix addresses repeat every 4 steps a 64-column panel further on (the swizzle's period is
// 8 granules), so the first 4 are computed once and the rest are sums.
constexpr int STEPS = DPART / 16;
constexpr int CH = STEPS < 4 ? STEPS : MT * NN * 4 >= 128 ? 2 : 4;
__device__ __forceinline__ void part_product(float (&c)[NN][4], u32 sa, u32 sb, int kb0, int d0,
                                             int lane) {
  const int arow = kb0 + (lane & 7) + ((lane >> 3) & 1) * 8, acol = (lane >> 4) * 8;
  const int brow = NN == 2 ? (lane & 7) + (lane >> 4) * 8 : lane & 7;
  const int bcol = ((lane >> 3) & 1) * 8;
  u32 ao[4], bo[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    ao[j] = sa + tile_off(arow, d0 + j * 16 + acol, KB);
    bo[j] = sb + tile_off(brow, d0 + j * 16 + bcol, NR);
  }
  float acc[CH][NN][4];
#pragma unroll
  for (int j = 0; j < CH; ++j)
#pragma unroll
    for (int nt = 0; nt < NN; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][nt][e] = 0.f;
  // Step 4 m + j: its A and B fragments at ao[j], bo[j] plus m panels.
  auto step = [&](float(&a_c)[NN][4], u32 sa_j, u32 sb_j) {
    u32 a[4];
    ldsm_x4(a, sa_j);
    if (NN == 2) {
      u32 b[4];
      ldsm_x4(b, sb_j);
      mma(a_c[0], a, b[0], b[1]);
      mma(a_c[NN - 1], a, b[2], b[3]);
    } else {
      u32 b[2];
      ldsm_x2(b, sb_j);
      mma(a_c[0], a, b[0], b[1]);
    }
  };
#pragma unroll 1
  for (int m = 0; m < STEPS / 4; ++m)
#pragma unroll
    for (int j = 0; j < 4; ++j) step(acc[j % CH], ao[j] + m * KB * 128, bo[j] + m * NR * 128);
#pragma unroll
  for (int j = 0; j < STEPS % 4; ++j)
    step(acc[j % CH], ao[j] + STEPS / 4 * KB * 128, bo[j] + STEPS / 4 * NR * 128);
#pragma unroll
  for (int j = 0; j < CH; ++j)
#pragma unroll
    for (int nt = 0; nt < NN; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) c[nt][e] += acc[j][nt][e];
}

// C = A B for one chunk of W columns starting at col: A the warp's 16 keys x NR rows (P^T or
// dS^T fragments), B [NR][dp] 16-bit rows in shared memory (dO or Q).
template <int W>
__device__ __forceinline__ void chunk_product(float (&c)[W / 8][4], const u32 (&a)[4], u32 sB,
                                              int col, int lane) {
#pragma unroll
  for (int nt = 0; nt < W / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) c[nt][e] = 0.f;
#pragma unroll
  for (int np = 0; np < W / 16; ++np) {
    if (NN == 2) {
      u32 b[4];
      ldsm_x4_t(b, sB + tile_off((lane & 7) + ((lane >> 3) & 1) * 8,
                                 col + np * 16 + (lane >> 4) * 8, NR));
      mma(c[2 * np], a, b[0], b[1]);
      mma(c[2 * np + 1], a, b[2], b[3]);
    } else {
      u32 b[2];
      ldsm_x2_t(b, sB + tile_off(lane & 7, col + np * 16 + ((lane >> 3) & 1) * 8, NR));
      mma_k8(c[2 * np], a[0], a[1], b[0]);
      mma_k8(c[2 * np + 1], a[0], a[1], b[1]);
    }
  }
}

// A chunk's 16 keys x W columns (scaled, 16-bit) into the warp's staging buffer: row r at r x 128
// bytes, its 16-byte granule g at (g ^ r % 8) x 16 (the 128-byte swizzle of a TMA box).
template <int W>
__device__ __forceinline__ void stage_chunk(const float (&c)[W / 8][4], float scale, u32 stage,
                                            int lane) {
  // Matrices (2 np, h = 0), (2 np, 1), (2 np + 1, 0), (2 np + 1, 1): n8 tile nt's rows h 8 ..
  // go to granule nt of those staging rows. Lane l gives row l % 8 of matrix l / 8.
  const int srow = (lane & 7) + ((lane >> 3) & 1) * 8, snt = lane >> 4;
#pragma unroll
  for (int np = 0; np < W / 16; ++np) {
    u32 r[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int nt = 2 * np + (m >> 1), h = m & 1;
      r[m] = pack2(c[nt][2 * h] * scale, c[nt][2 * h + 1] * scale);
    }
    stmatrix_x4(stage + srow * 128 + (((2 * np + snt) ^ (srow & 7)) << 4), r);
  }
}

// The chunk through the staging buffer to rows key0 + 0..15 of dst from column col: keys past
// `hi` (another block's, or past Nkv) and columns past D are not stored.
template <int W>
__device__ __forceinline__ void store_chunk(const float (&c)[W / 8][4], float scale, u32 stage,
                                            u16* dst, long long row_stride, int key0, int hi,
                                            int col, int lane) {
  __syncwarp();  // the previous chunk's reads of the staging buffer are done
  stage_chunk<W>(c, scale, stage, lane);
  __syncwarp();
  // Lane l reads granule l % G of rows l / G + i (32 / G): every read before the first store,
  // whose guards would otherwise put each read's latency before its store in turn.
  constexpr int G = W / 8, PER = 16 * G / 32, RSTEP = 32 / G;
  const int row0 = lane / G, g = lane % G, d = col + g * 8;
  uint4 v[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int row = row0 + i * RSTEP;
    asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v[i].x), "=r"(v[i].y), "=r"(v[i].z), "=r"(v[i].w)
                 : "r"(stage + row * 128 + ((g ^ (row & 7)) << 4)));
  }
  u16* q = dst + (long long)(key0 + row0) * row_stride + d;
#pragma unroll
  for (int i = 0; i < PER; ++i)
    if (key0 + row0 + i * RSTEP < hi && d < D) st_global_v4(q + i * RSTEP * row_stride, v[i]);
}

#if FFPA_PASSES == 2
// The P / dS words of head hh's key (p.pds: [B, Hkv, Nkv, 2, NR / 2] words, a word two rows):
// P's at the result, dS's NR / 2 words on.
__device__ __forceinline__ u32* pds_at(const FfpaBwdParams& p, long long hh, int key) {
  return p.pds + (hh * p.fwd.Nkv + key) * NR;
}
// P^T and dS^T of 16 keys from key0 as the A fragments hold them (pa[h], pa[2 + h]: key
// lane / 4 + 8 h, rows 2 (lane % 4) .. + 1 and 8 more), keys at or past `hi` skipped.
__device__ __forceinline__ void put_pds(const FfpaBwdParams& p, long long hh, int key0, int hi,
                                        const u32 (&pa)[4], const u32 (&da)[4], int lane) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key0 + (lane >> 2) + h * 8;
    if (key >= hi) continue;
    u32* w = pds_at(p, hh, key) + (lane & 3);
    w[0] = pa[h];
    w[NR / 2] = da[h];
    if (NN == 2) {
      w[4] = pa[2 + h];
      w[NR / 2 + 4] = da[2 + h];
    }
  }
}
// put_pds's words back as A fragments; keys at or past `hi` read as zeros.
__device__ __forceinline__ void get_pds(const FfpaBwdParams& p, long long hh, int key0, int hi,
                                        u32 (&pa)[4], u32 (&da)[4], int lane) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key0 + (lane >> 2) + h * 8;
    pa[h] = da[h] = pa[2 + h] = da[2 + h] = 0u;
    if (key >= hi) continue;
    const u32* w = pds_at(p, hh, key) + (lane & 3);
    pa[h] = w[0];
    da[h] = w[NR / 2];
    pa[2 + h] = NN == 2 ? w[4] : pa[h];
    da[2 + h] = NN == 2 ? w[NR / 2 + 4] : da[h];
  }
}

// A chunk into staging buffer buf and out to the box at (col, key0) of map. buf's store before
// last (two groups ago, buf's previous use) must have read it first.
__device__ __forceinline__ void put_chunk(const float (&c)[8][4], float scale, u32 buf,
                                          const FfpaTmaDesc& map, int col, int key0, int kvh, int b,
                                          int lane) {
  if (lane == 0) bulk_wait_read<1>();
  __syncwarp();
  stage_chunk<64>(c, scale, buf, lane);
  fence_proxy_async();  // the staging writes (generic proxy) before the TMA's reads (async)
  __syncwarp();
  if (lane == 0) {
    tma_store_4d(map, buf, col, key0, kvh, b);
    bulk_commit();
  }
}
#endif

}  // namespace ffpa_bwd_dec90

extern "C" __global__ void __launch_bounds__(ffpa_bwd_dec90::NT, 1)
    ffpa_bwd_decode_sm90_kernel(const __grid_constant__ FfpaBwdParams p,
                                const __grid_constant__ FfpaTmaDesc tk,
                                const __grid_constant__ FfpaTmaDesc tv) {
  using namespace ffpa_bwd_dec90;
  const FfpaFwdParams& f = p.fwd;
  const SmemBase sb = smem_base_1024();
  const u32 base = sb.addr;
  unsigned char* smem = sb.ptr;
  const u32 sQ = base + OFF_Q, sO = base + OFF_O;
  float* xch = reinterpret_cast<float*>(smem + OFF_XCH);
  float* sRow = reinterpret_cast<float*>(smem + OFF_STATS);  // lse log2(e) [R], delta [R]
  const RingBars<SLOTS> ring{base + OFF_BARS};

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rows = f.group * f.Nq;  // the host refuses more than R
  const long long vis = visible_keys(f);
  const long long total = (long long)f.B * f.Hkv * vis;
  const long long x0 = ffpa_layout::decode_start(total, gridDim.x, blockIdx.x);
  const long long x1 = ffpa_layout::decode_start(total, gridDim.x, blockIdx.x + 1);

  ring.init(NW);  // released by lane 0 of each consumer warp

  if (warp == NW) {
    // The producer (ffpa_decode_ring.cuh); K and V do not depend on the preprocess: no wait.
    if (lane == 0) produce<KB, DP, SLOTS>(f, tk, tv, base, ring, x0, x1, vis);
    return;
  }

  const int kbk = warp / DSP, dpart = warp % DSP;
  const int kb0 = kbk * 16;  // the warp's keys within a tile
  const int d0 = dpart * DPART;
  const u32 stage = base + OFF_STAGE + warp * L::kStage;
  const int diag = FFPA_CAUSAL == 1 ? f.Nkv - f.Nq : 0;  // row r sees keys k <= r + diag
  // Delta (and the zeroed dq_accum) come from the preprocess, launched before.
  grid_dependency_wait();

  int n = 0, tile = 0;  // ring item of the next tile's K; tiles done (the dS buffer's parity)
  for (long long x = x0; x < x1;) {
    const Segment g = segment_at(f, x, x1, vis);
    x = g.hh * vis + g.hi;
    // Q, dO, lse and delta of the segment's head. The barrier before: every warp is past the
    // previous segment's reads of them.
    named_sync(BAR_ALL, NC);
    {
      const u16* qb = static_cast<const u16*>(f.q) + g.b * f.q_batch_stride;
      const u16* ob = static_cast<const u16*>(p.dout) + g.b * p.do_batch_stride;
      for (int idx = tid; idx < NR * DP / 8; idx += NC) {
        const int row = idx / (DP / 8), col = (idx % (DP / 8)) * 8;
        qdo_granule<NR, D>(qdo_row(p, qb, ob, row, rows, g.kvh), sQ, sO, row, col);
      }
      cp_async_commit();
      if (tid < R) {
        float l = __int_as_float(0x7f800000u), dl = 0.f;
        if (tid < rows) {
          const long long lrow =
              ((long long)g.b * f.Hq + g.kvh * f.group + tid / f.Nq) * f.Nq + tid % f.Nq;
          l = lse_log2(f.lse[lrow]);
          dl = p.delta[lrow];
        }
        sRow[tid] = l;
        sRow[R + tid] = dl;
      }
      cp_async_wait<0>();
    }
    named_sync(BAR_ALL, NC);

    float dq[MT][NN][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NN; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) dq[mt][nt][e] = 0.f;

    [[maybe_unused]] u16* dkb =
        static_cast<u16*>(p.dk) + g.b * p.dk_batch_stride + g.kvh * p.dk_head_stride;
    [[maybe_unused]] u16* dvb =
        static_cast<u16*>(p.dv) + g.b * p.dv_batch_stride + g.kvh * p.dv_head_stride;

    for (int k = g.lo; k < g.hi; k += KB, n += 2, ++tile) {
      const int ks_slot = n % SLOTS, vs_slot = (n + 1) % SLOTS;
      const u32 sk = base + ks_slot * SLOT, sv = base + vs_slot * SLOT;
      // S^T = K Q^T and dP^T = V dO^T: the warp's 16 keys, its part of D.
      float s[NN][4], dp[NN][4];
#pragma unroll
      for (int nt = 0; nt < NN; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.f;
      mbar_wait(ring.full(ks_slot), (n / SLOTS) & 1);
      part_product(s, sk, sQ, kb0, d0, lane);
      mbar_wait(ring.full(vs_slot), ((n + 1) / SLOTS) & 1);
      part_product(dp, sv, sO, kb0, d0, lane);
      __syncwarp();
      if (lane == 0) mbar_arrive(ring.empty(vs_slot));  // V is read: dV needs dO and P only

      if (DSP > 1) {
        // The key block's parts of D meet: partial sums through shared memory.
        float* mine = xch + warp * 16 * 32 + lane;
#pragma unroll
        for (int nt = 0; nt < NN; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            mine[(nt * 4 + e) * 32] = s[nt][e];
            mine[(8 + nt * 4 + e) * 32] = dp[nt][e];
          }
        named_sync(BAR_KEYS + kbk, DSP * 32);
#pragma unroll
        for (int o = 1; o < DSP; ++o) {
          const float* other = xch + (kbk * DSP + (dpart + o) % DSP) * 16 * 32 + lane;
#pragma unroll
          for (int nt = 0; nt < NN; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              s[nt][e] += other[(nt * 4 + e) * 32];
              dp[nt][e] += other[(8 + nt * 4 + e) * 32];
            }
        }
      }

      // P^T and dS^T of (key kb0 + lane / 4 + 8 (e / 2), row 8 nt + 2 (lane % 4) + e % 2). Rows
      // past the group and keys past the segment (another block's, or past Nkv) are zero.
      const u32 sDS = base + OFF_DS + (tile & 1) * NR * 128;
      float pv[NN][4], dsv[NN][4];
#pragma unroll
      for (int nt = 0; nt < NN; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int kk = kb0 + (lane >> 2) + (e >> 1) * 8, key = k + kk;
          const int i = nt * 8 + (lane & 3) * 2 + (e & 1);
          float pd = 0.f, ds = 0.f;
          if (key < g.hi && i < rows) {
            const int r = i % f.Nq;
            [[maybe_unused]] const int hq = g.kvh * f.group + i / f.Nq;
            float xs = s[nt][e] * f.scale_log2 - sRow[i];
#if FFPA_BIAS
            xs += bias_at(f, g.b * f.bias_batch_stride + hq * f.bias_head_stride +
                                 (long long)r * f.bias_row_stride + key) *
                  LOG2E;
#endif
            const float pr = FFPA_CAUSAL && key > r + diag ? 0.f : exp2f(xs);
            pd = pr;
#if FFPA_DROPOUT
            FfpaDropoutStream st;
            st.init(f.dropout_seed);
            const unsigned long long ge =
                f.dropout_offset + (((unsigned long long)g.b * f.Hq + hq) * f.Nq + r) * f.Nkv + key;
            pd = st.word(ge) >= f.dropout_keep_min ? pr * f.dropout_scale : 0.f;
            ds = pd * dp[nt][e] - pr * sRow[R + i];
#else
            ds = pr * (dp[nt][e] - sRow[R + i]);
#endif
#if FFPA_DBIAS >= 2
            if (dpart == 0) put_dbias(p, g.b, hq, r, key, ds);
#endif
          }
          pv[nt][e] = pd;
          dsv[nt][e] = ds;
          if (dpart == 0) st_b16(sDS + tile_off(i, kk, NR), pack2(ds, 0.f));
        }
#if FFPA_DBIAS == 1
      // A key bias [1,1,1,Nkv]: dBias of a key is the sum of its column of dS over every row.
      if (dpart == 0) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float cs = 0.f;
#pragma unroll
          for (int nt = 0; nt < NN; ++nt) cs += dsv[nt][2 * h] + dsv[nt][2 * h + 1];
          cs += __shfl_xor_sync(0xffffffffu, cs, 1);
          cs += __shfl_xor_sync(0xffffffffu, cs, 2);
          const int key = k + kb0 + (lane >> 2) + h * 8;
          if ((lane & 3) == 0 && key < g.hi) atomicAdd(p.dbias_accum + key, cs);
        }
      }
#endif
      // The A fragments (keys x rows) of dV = P^T dO and dK = dS^T Q.
      u32 pa[4], da[4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        pa[h] = pack2(pv[0][2 * h], pv[0][2 * h + 1]);
        da[h] = pack2(dsv[0][2 * h], dsv[0][2 * h + 1]);
        pa[2 + h] = pack2(pv[NN - 1][2 * h], pv[NN - 1][2 * h + 1]);
        da[2 + h] = pack2(dsv[NN - 1][2 * h], dsv[NN - 1][2 * h + 1]);
      }
      named_sync(BAR_ALL, NC);  // dS of every key block written

      // dQ^T[the warp's QW columns] += K^T dS^T over the tile's keys (a k16 step at a time: its
      // fragments beside dQ's accumulators are what the registers hold).
#pragma unroll 1
      for (int ks = 0; ks < KB / 16; ++ks) {
        u32 b[4];
        if (NN == 2) {
          ldsm_x4(
              b, sDS + tile_off((lane & 7) + (lane >> 4) * 8, ks * 16 + ((lane >> 3) & 1) * 8, NR));
        } else {
          u32 b2[2];
          ldsm_x2(b2, sDS + tile_off(lane & 7, ks * 16 + ((lane >> 3) & 1) * 8, NR));
          b[0] = b2[0], b[1] = b2[1], b[2] = b[3] = 0u;
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (warp * QW + mt * 16 >= DP) break;  // warp-uniform
          u32 a[4];
          ldsm_x4_t(a, sk + tile_off(ks * 16 + (lane & 7) + (lane >> 4) * 8,
                                     warp * QW + mt * 16 + ((lane >> 3) & 1) * 8, KB));
          mma(dq[mt][0], a, b[0], b[1]);
          if (NN == 2) mma(dq[mt][NN - 1], a, b[2], b[3]);
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(ring.empty(ks_slot));  // K is read

      const int key0 = k + kb0;
#if FFPA_PASSES == 1
      // dV = P^T dO and dK = scale dS^T Q: the warp's keys and part of D, chunk by chunk.
#pragma unroll 1
      for (int col = d0; col < d0 + DPART; col += CW) {
        float c[CW / 8][4];
        chunk_product<CW>(c, pa, sO, col, lane);
        store_chunk<CW>(c, 1.f, stage, dvb, p.dv_row_stride, key0, g.hi, col, lane);
        chunk_product<CW>(c, da, sQ, col, lane);
        store_chunk<CW>(c, f.scale, stage, dkb, p.dk_row_stride, key0, g.hi, col, lane);
      }
#else
      // P^T and dS^T of the warp's keys for the second pass, as the fragments hold them.
      if (dpart == 0) put_pds(p, g.hh, key0, g.hi, pa, da, lane);
#endif
    }

    // The segment's dQ into dq_accum ([B, Hq, Nq, D], scaled), an m16 tile at a time through the
    // staging buffer (fp32 [NR][16]).
    if (x >= x1) launch_dependents();  // the convert kernel may start its blocks (it waits)
    float* sf = reinterpret_cast<float*>(smem + OFF_STAGE + warp * L::kStage);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {  // unrolled: dq is indexed by constants only
      if (warp * QW + mt * 16 >= DP) break;
      __syncwarp();
#pragma unroll
      for (int nt = 0; nt < NN; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          sf[(nt * 8 + (lane & 3) * 2 + (e & 1)) * 16 + (lane >> 2) + (e >> 1) * 8] = dq[mt][nt][e];
      __syncwarp();
      const int col = warp * QW + mt * 16;
      for (int idx = lane; idx < rows * 4; idx += 32) {
        const int i = idx >> 2, q = idx & 3;
        if (col + q * 4 >= D) continue;
        const int hq = g.kvh * f.group + i / f.Nq, r = i % f.Nq;
        red_add4(p.dq_accum + (((long long)g.b * f.Hq + hq) * f.Nq + r) * D + col + q * 4,
                 *reinterpret_cast<const float4*>(sf + i * 16 + q * 4), f.scale);
      }
    }
  }

  // Keys past every causal row's last one: never loaded, their dK and dV zero. The blocks share
  // them as they share the visible keys.
  if (FFPA_CAUSAL && vis < f.Nkv) {
    const long long inv = f.Nkv - vis, itotal = (long long)f.B * f.Hkv * inv;
    const long long z0 = ffpa_layout::decode_start(itotal, gridDim.x, blockIdx.x);
    const long long z1 = ffpa_layout::decode_start(itotal, gridDim.x, blockIdx.x + 1);
    for (long long idx = z0 * (D / 8) + tid; idx < z1 * (D / 8); idx += NC) {
      const long long z = idx / (D / 8), hh = z / inv;
      const int key = (int)(vis + z % inv), col = (int)(idx % (D / 8)) * 8;
      const int kvh = (int)(hh % f.Hkv), b = (int)(hh / f.Hkv);
      const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
      *reinterpret_cast<uint4*>(static_cast<u16*>(p.dk) + b * p.dk_batch_stride +
                                kvh * p.dk_head_stride + key * p.dk_row_stride + col) = zero;
      *reinterpret_cast<uint4*>(static_cast<u16*>(p.dv) + b * p.dv_batch_stride +
                                kvh * p.dv_head_stride + key * p.dv_row_stride + col) = zero;
    }
  }
}

// The second pass (FFPA_PASSES = 2): dV = P^T dO and dK = scale dS^T Q of every visible key from
// the first pass's P and dS, reading nothing large: the HBM stream of this kernel only writes,
// and the first pass's only reads (a stream that mixes them is slower: microbench.md). Grid:
// x = a head's share of key blocks (16 keys), y = the head (b x Hkv + kvh); a warp a key block at
// a time, over all of D in chunks of 64 columns. Compiled only for FFPA_PASSES = 2.
// At least three blocks an SM (with 8 warps at most 85 registers); with 16-byte stores that ran
// as two did (2026-12-07: 407.9 us against 408.9, DRAM 77 % busy either way). dK and dV leave by
// TMA stores (tdk, tdv: boxes of 16 keys x 64 columns, rows past Nkv and columns past D not
// written) from two staging buffers a warp: at 16-byte stores by every lane the warps' load-store
// queue, not HBM, held the write rate (ncu: 2.6 TB/s, stalls on the staging reads and the stores).
#if FFPA_PASSES == 2
extern "C" __global__ void __launch_bounds__(ffpa_bwd_dec90::NC, 3)
    ffpa_bwd_decode_sm90_writes_kernel(const __grid_constant__ FfpaBwdParams p,
                                       const __grid_constant__ FfpaTmaDesc tdk,
                                       const __grid_constant__ FfpaTmaDesc tdv) {
  using namespace ffpa_bwd_dec90;
  const FfpaFwdParams& f = p.fwd;
  constexpr auto lw = ffpa_layout::bwd_decode_sm90_writes_layout(DP, NR, NW);
  const SmemBase sb = smem_base_1024();
  const u32 base = sb.addr;
  const u32 sQ = base + lw.q, sO = base + lw.o;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const long long hh = blockIdx.y;
  const int kvh = (int)(hh % f.Hkv), b = (int)(hh / f.Hkv);
  const int rows = f.group * f.Nq;
  const int vis = (int)visible_keys(f);
  const int blocks = (vis + 15) / 16;
  const int kb_lo = (int)((long long)blocks * blockIdx.x / gridDim.x);
  const int kb_hi = (int)((long long)blocks * (blockIdx.x + 1) / gridDim.x);
  {
    const u16* qb = static_cast<const u16*>(f.q) + b * f.q_batch_stride;
    const u16* ob = static_cast<const u16*>(p.dout) + b * p.do_batch_stride;
    for (int idx = tid; idx < NR * DP / 8; idx += NC) {
      const int row = idx / (DP / 8), col = (idx % (DP / 8)) * 8;
      qdo_granule<NR, D>(qdo_row(p, qb, ob, row, rows, kvh), sQ, sO, row, col);
    }
    cp_async_commit();
    cp_async_wait<0>();
  }
  __syncthreads();
  launch_dependents();     // the convert kernel may start its blocks (it waits)
  grid_dependency_wait();  // P and dS from the first pass
  const u32 stage = base + lw.stage + warp * 2 * L::kStage;  // dV's buffer, then dK's
  // A warp's next key block's fragments are loaded before its chunks of this one, so their
  // latency can hide under the stores (ncu at 96 registers put the loads' long scoreboard first
  // among the stalls; with 16-byte stores the load-ahead did not change the time).
  u32 pa[4], da[4], npa[4], nda[4];
  get_pds(p, hh, (kb_lo + warp) * 16, vis, npa, nda, lane);
  for (int kb = kb_lo + warp; kb < kb_hi; kb += NW) {
    const int key0 = kb * 16;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      pa[i] = npa[i];
      da[i] = nda[i];
    }
    if (kb + NW < kb_hi) get_pds(p, hh, key0 + NW * 16, vis, npa, nda, lane);
#pragma unroll 1
    for (int col = 0; col < DP; col += 64) {
      float c[8][4];
      chunk_product<64>(c, pa, sO, col, lane);
      put_chunk(c, 1.f, stage, tdv, col, key0, kvh, b, lane);
      chunk_product<64>(c, da, sQ, col, lane);
      put_chunk(c, f.scale, stage + L::kStage, tdk, col, key0, kvh, b, lane);
    }
  }
  // The stores are done (and have read the staging buffers) before the block's shared memory
  // goes.
  if (lane == 0) bulk_wait_all();
}
#endif
