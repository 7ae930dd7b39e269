// Flash-attention backward for few query rows (decode: the group's rows, group x Nq, at most 16),
// on CUDA cores, sm_80 and later; compiled at run time by NVRTC. Device code only: no standard
// headers. Launched as ffpa_bwd.cuh is: ffpa_bwd_pre_kernel and ffpa_bwd_convert_kernel
// (ffpa_bwd_aux.cuh) around ffpa_bwd_decode_kernel. On sm_90 all three are chained by
// programmatic dependent launch: this kernel's first loads overlap the preprocess (it waits for
// delta and the zeroed dq_accum), the convert kernel's launch overlaps its last tiles.
//
// Why: with one query row the tensor-core backwards run one query tile per key tile, mostly
// empty (1 of 64 rows), and the work is a stream: read K and V once, write dK and dV once. A
// block takes every query row of one kv head's group (at most 16) and a contiguous range of that
// head's keys, streamed in tiles of KB keys through a STAGES-deep cp.async pipeline (tiles j + 1
// .. j + STAGES - 1 load while tile j is computed and its dK, dV are stored). dK and dV of a key
// are complete in its tile (every row of the group is in the block: no atomics, GQA summed
// inside); dQ of the rows is summed over the block's whole key range in registers and added to
// dq_accum once at the end, so an address sees one atomic add per block of its head (gridDim.x).
//
// Grid: (splits, Hkv, B). Block x takes tiles [x T / splits, (x + 1) T / splits) of the head's
// T = ceil(Nkv / KB) tiles (balanced: every block at least one tile when splits <= T); the host
// picks splits so that the grid fills the GPU in whole waves (src/variants/ffpa_bwd_decode.cpp).
//
// The configuration comes in as macros (src/variants/ffpa_bwd_decode.cpp sets them):
//   FFPA_D       head dim (a multiple of 8, at most 1024)
//   FFPA_KB      keys of a tile: 16, 32 or 64
//   FFPA_STAGES  tiles in flight: 2 or 3
//   FFPA_BLOCKS  blocks an SM the registers are budgeted for (launch bounds): 1 to 3, 0 = by D
//   FFPA_ROWS    the group's query rows (group x Nq, 1 to 16): how the S phase's warps split
//   FFPA_BF16, FFPA_CAUSAL, FFPA_BIAS, FFPA_DBIAS, FFPA_DROPOUT as in ffpa_bwd.cuh
//
// Per tile (256 threads, 8 warps):
//  - S and dP: a warp takes 8 keys (a key octet) and a row group; its lanes are 4 chunks x 8 keys
//    (lane = chunk * 8 + key), a chunk takes the granules g = chunk (mod 4), so the 8 lanes of a
//    shared-memory phase read 8 keys' granules (distinct banks through the row pad) and the rows'
//    granules are broadcast; the 4 chunks are summed with two shuffles.
//  - P, dS per element (the 4 chunk lanes share a key's rows): masks, bias, dropout with the
//    forward's Philox elements, dBias; into shared memory.
//  - dV, dK per key and 8-column granule (lanes on consecutive granules: coalesced 16-byte
//    stores), then the tile's share of dQ per (row, granule) into registers; with fewer
//    (row, granule) pairs than threads, threads split the tile's keys and the block sums the
//    parts once at the end.
//  - Causal: a tile past every row's last key is not loaded; its dK, dV are stored as zeros.
#pragma once

#include "ffpa_bwd_aux.cuh"
#include "ffpa_bwd_decode_layout.h"
#include "ffpa_common.cuh"

namespace ffpa_bwd_dec {

using namespace ffpa_dev;

constexpr int D = FFPA_D;
constexpr int KB = FFPA_KB;
constexpr int ST = FFPA_STAGES;
constexpr int R = ffpa_layout::BwdDecode::kRows;
constexpr int NT = ffpa_layout::BwdDecode::kThreads;
constexpr int G = D / 8;           // 16-byte granules of a row
constexpr int KO = KB / 8;         // key octets of a tile
constexpr int NRG = NT / 32 / KO;  // row groups of S and dP (warps of a key octet)
constexpr int RJ = R / NRG;        // rows of a thread in S and dP
// Row groups that hold a row (a power of two); with fewer rows than row groups (decode without
// GQA: one row) the idle ones split D instead, DSPLIT parts.
__host__ __device__ constexpr int row_groups() {
  int n = 1;
  while (n < FFPA_ROWS && n < NRG) n *= 2;
  return n;
}
constexpr int NRH = row_groups();
constexpr int DSPLIT = NRG / NRH;
constexpr int RJS = DSPLIT > 1 ? 1 : RJ;   // rows of a thread in S and dP that can hold a row
constexpr int QS = (R * G + NT - 1) / NT;  // (row, granule) pairs of dQ a thread holds at most
// By D: two blocks an SM at D <= 512 (128 registers a thread), one (8 warps) above. Three (85
// registers) put a third block's warps beside the two whose barriers stall the SM (ncu: the
// block barrier is 39 % of the cycles between issues with two).
constexpr int MIN_BLOCKS = FFPA_BLOCKS ? FFPA_BLOCKS : D <= 512 ? 2 : 1;
constexpr float LOG2E = 1.4426950408889634f;
#define POS_INF __int_as_float(0x7f800000u)

static_assert(D % 8 == 0 && D <= 1024, "D: a multiple of 8, at most 1024");
static_assert(KB == 16 || KB == 32 || KB == 64, "16, 32 or 64 keys a tile");
static_assert(ST == 2 || ST == 3, "2 or 3 stages");
static_assert(NRG >= 1 && RJ >= 4 && R % NRG == 0, "the S phase's warps: key octets x row groups");

__device__ __forceinline__ void unpack8(uint4 x, float (&f)[8]) {
  const u32 w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = to_f32((u16)(w[i] & 0xffff));
    f[2 * i + 1] = to_f32((u16)(w[i] >> 16));
  }
}
__device__ __forceinline__ uint4 pack8(const float (&f)[8], float s) {
  return make_uint4(pack2(f[0] * s, f[1] * s), pack2(f[2] * s, f[3] * s), pack2(f[4] * s, f[5] * s),
                    pack2(f[6] * s, f[7] * s));
}

// dst[0..7] += v * scale (fp32, dst 32-byte aligned): two vector reductions on sm_90, eight
// scalar atomics (zeros skipped) before.
__device__ __forceinline__ void add8(float* dst, const float (&v)[8], float scale) {
#if __CUDA_ARCH__ >= 900
  red_add4(dst, make_float4(v[0], v[1], v[2], v[3]), scale);
  red_add4(dst + 4, make_float4(v[4], v[5], v[6], v[7]), scale);
#else
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (v[e] != 0.f) atomicAdd(dst + e, v[e] * scale);
#endif
}

}  // namespace ffpa_bwd_dec

extern "C" __global__ void __launch_bounds__(ffpa_bwd_dec::NT, ffpa_bwd_dec::MIN_BLOCKS)
    ffpa_bwd_decode_kernel(const FfpaBwdParams p) {
  using namespace ffpa_bwd_dec;
  const FfpaFwdParams& f = p.fwd;
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kvh = blockIdx.y, b = blockIdx.z;
  const int rows = f.group * f.Nq;  // the host refuses more than R
  const ffpa_layout::BwdDecode L = ffpa_layout::bwd_decode_layout(D, KB, ST, rows);
  const int DS = L.stride;
  const u16* sQ = reinterpret_cast<const u16*>(smem + L.q);
  const u16* sO = reinterpret_cast<const u16*>(smem + L.o);
  float* sPd = reinterpret_cast<float*>(smem + L.pd);  // [rows][KB]
  float* sDs = reinterpret_cast<float*>(smem + L.ds);
  float* sRow = reinterpret_cast<float*>(smem + L.stats);  // lse * log2(e) [R], delta [R]

  const int diag = FFPA_CAUSAL == 1 ? f.Nkv - f.Nq : 0;  // row r sees keys k <= r + diag
  // The last key any row sees: a tile starting past it has P = dS = 0.
  const int last_key = FFPA_CAUSAL ? f.Nq - 1 + diag : f.Nkv - 1;
  // Packed row i: q head kvh * group + i / Nq, query row i % Nq.
  auto hq_of = [&](int i) { return kvh * f.group + i / f.Nq; };

  // This block's tiles: a balanced share of the head's.
  const int ntiles = (f.Nkv + KB - 1) / KB;
  const int t0 = (int)((long long)blockIdx.x * ntiles / gridDim.x);
  const int nt = (int)((long long)(blockIdx.x + 1) * ntiles / gridDim.x) - t0;

  const u16* kg = static_cast<const u16*>(f.k) + b * f.k_batch_stride + kvh * f.k_head_stride;
  const u16* vg = static_cast<const u16*>(f.v) + b * f.v_batch_stride + kvh * f.v_head_stride;
  // Tile t into stage s (zero past Nkv); nothing for a tile no row sees.
  auto load_tile = [&](int t, int s) {
    const int n0 = t * KB;
    if (FFPA_CAUSAL && n0 > last_key) return;
    unsigned char* sk = smem + s * 2 * L.kv;
    for (int idx = tid; idx < KB * G; idx += NT) {
      const int row = idx / G, g = idx % G, key = n0 + row;
      const bool ok = key < f.Nkv;
      const u32 off = (row * DS + g * 8) * 2;
      cp_async16(smem_u32(sk + off), ok ? kg + key * f.k_row_stride + g * 8 : kg, ok);
      cp_async16(smem_u32(sk + L.kv + off), ok ? vg + key * f.v_row_stride + g * 8 : vg, ok);
    }
  };

  // The group's rows of Q and dO, lse and delta: once, with the first tile.
  {
    const u16* qb = static_cast<const u16*>(f.q) + b * f.q_batch_stride;
    const u16* ob = static_cast<const u16*>(p.dout) + b * p.do_batch_stride;
    for (int idx = tid; idx < rows * G; idx += NT) {
      const int i = idx / G, g = idx % G;
      const int hq = hq_of(i), r = i % f.Nq;
      const u32 off = (i * DS + g * 8) * 2;
      cp_async16(smem_u32(smem + L.q + off), qb + hq * f.q_head_stride + r * f.q_row_stride + g * 8,
                 true);
      cp_async16(smem_u32(smem + L.o + off),
                 ob + hq * p.do_head_stride + r * p.do_row_stride + g * 8, true);
    }
  }
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < nt) load_tile(t0 + s, s);
    cp_async_commit();
  }
  // Launched early (sm_90): the loads above overlap the preprocess, which writes delta and zeroes
  // dq_accum.
  grid_dependency_wait();
  if (tid < R) {
    float l = POS_INF, dl = 0.f;
    if (tid < rows) {
      const long long lrow = ((long long)b * f.Hq + hq_of(tid)) * f.Nq + tid % f.Nq;
      l = lse_log2(f.lse[lrow]);
      dl = p.delta[lrow];
    }
    sRow[tid] = l;
    sRow[R + tid] = dl;
  }

  // dQ: (row, granule) pairs; with fewer pairs than threads, ksp threads split a pair's keys.
  const int P = rows * G;
  const int ksp = P >= NT ? 1 : min(KB, NT / P);
  float dq[QS][8];
#pragma unroll
  for (int q = 0; q < QS; ++q)
#pragma unroll
    for (int e = 0; e < 8; ++e) dq[q][e] = 0.f;

  u16* dkb = static_cast<u16*>(p.dk) + b * p.dk_batch_stride + kvh * p.dk_head_stride;
  u16* dvb = static_cast<u16*>(p.dv) + b * p.dv_batch_stride + kvh * p.dv_head_stride;

  for (int j = 0; j < nt; ++j) {
    const int n0 = (t0 + j) * KB;
    const bool live = !FFPA_CAUSAL || n0 <= last_key;
    // Tile j has landed (ST - 2 later groups may be pending) and every thread is past tile
    // j - 1: its stage takes tile j + ST - 1.
    cp_async_wait<ST - 2>();
    __syncthreads();
    if (j + ST - 1 < nt) load_tile(t0 + j + ST - 1, (j + ST - 1) % ST);
    cp_async_commit();
    const u16* sK = reinterpret_cast<const u16*>(smem + (j % ST) * 2 * L.kv);
    const u16* sV = reinterpret_cast<const u16*>(smem + (j % ST) * 2 * L.kv + L.kv);

    // S and dP of key kk and rows rg + NRG jj, summed over the lane's chunk of granules. With
    // fewer rows than row groups (decode without GQA: one row) the idle row groups split D
    // instead: part dpart of DSPLIT takes every DSPLIT-th set of 4 granules, and the parts'
    // sums meet in shared memory.
    {
      const int c = lane >> 3, kk = (warp % KO) * 8 + (lane & 7);
      // (warp / KO < NRG: without the split, rg and dpart need no division by NRH)
      const int rg = DSPLIT == 1 ? warp / KO : warp / KO % NRH;
      const int dpart = DSPLIT == 1 ? 0 : warp / KO / NRH;
      float s[RJS], dp[RJS];
#pragma unroll
      for (int jj = 0; jj < RJS; ++jj) s[jj] = dp[jj] = 0.f;
      if (live && rg < rows) {
        const uint4* kr = reinterpret_cast<const uint4*>(sK + kk * DS);
        const uint4* vr = reinterpret_cast<const uint4*>(sV + kk * DS);
#pragma unroll 2
        for (int g = dpart * 4 + c; g < G; g += 4 * DSPLIT) {
          float k8[8], v8[8];
          unpack8(kr[g], k8);
          unpack8(vr[g], v8);
#pragma unroll
          for (int jj = 0; jj < RJS; ++jj) {
            const int i = rg + jj * NRG;
            if (i < rows) {
              float q8[8], o8[8];
              unpack8(reinterpret_cast<const uint4*>(sQ + i * DS)[g], q8);
              unpack8(reinterpret_cast<const uint4*>(sO + i * DS)[g], o8);
#pragma unroll
              for (int e = 0; e < 8; ++e) {
                s[jj] = fmaf(q8[e], k8[e], s[jj]);
                dp[jj] = fmaf(o8[e], v8[e], dp[jj]);
              }
            }
          }
        }
#pragma unroll
        for (int jj = 0; jj < RJS; ++jj)
          if (rg + jj * NRG < rows) {  // warp-uniform
            s[jj] += __shfl_xor_sync(0xffffffffu, s[jj], 8);
            s[jj] += __shfl_xor_sync(0xffffffffu, s[jj], 16);
            dp[jj] += __shfl_xor_sync(0xffffffffu, dp[jj], 8);
            dp[jj] += __shfl_xor_sync(0xffffffffu, dp[jj], 16);
          }
      }
      if (DSPLIT > 1) {  // then a warp has one row (jj = 0), rows <= NRH
        // Part d's sums of (row rg, key kk) at row d * NRH + rg of sPd / sDs: part 0's slot is
        // its own element's, the others' lie past every row that the step below writes.
        if (live && rg < rows && c == 0) {
          sPd[(dpart * NRH + rg) * KB + kk] = s[0];
          sDs[(dpart * NRH + rg) * KB + kk] = dp[0];
        }
        __syncthreads();
        if (live && rg < rows && c == 0 && dpart == 0)
          for (int d = 1; d < DSPLIT; ++d) {
            s[0] += sPd[(d * NRH + rg) * KB + kk];
            dp[0] += sDs[(d * NRH + rg) * KB + kk];
          }
      }
      // P, dS of the elements, row jj by chunk lane jj % 4 (masked: past Nkv, causal; a row
      // without gradient has P = 0).
      const int key = n0 + kk;
#pragma unroll
      for (int jj = 0; jj < RJS; ++jj) {
        const int i = rg + jj * NRG;
        if (i >= rows || (jj & 3) != c || dpart != 0) continue;
        float pd = 0.f, ds = 0.f;
        if (key < f.Nkv) {
          const int hq = hq_of(i), r = i % f.Nq;
          const bool masked = FFPA_CAUSAL && key > r + diag;
          float x = s[jj] * f.scale_log2 - sRow[i];
#if FFPA_BIAS
          x += bias_at(f, b * f.bias_batch_stride + hq * f.bias_head_stride +
                              (long long)r * f.bias_row_stride + key) *
               LOG2E;
#endif
          const float pr = masked ? 0.f : exp2f(x);
          pd = pr;
#if FFPA_DROPOUT
          FfpaDropoutStream st;
          st.init(f.dropout_seed);
          const unsigned long long g =
              f.dropout_offset + (((unsigned long long)b * f.Hq + hq) * f.Nq + r) * f.Nkv + key;
          pd = st.word(g) >= f.dropout_keep_min ? pr * f.dropout_scale : 0.f;
          ds = pd * dp[jj] - pr * sRow[R + i];
#else
          ds = pr * (dp[jj] - sRow[R + i]);
#endif
#if FFPA_DBIAS >= 2
          put_dbias(p, b, hq, r, key, ds);
#endif
        }
        sPd[i * KB + kk] = pd;
        sDs[i * KB + kk] = ds;
      }
    }
    __syncthreads();

#if FFPA_DBIAS == 1
    // A key bias [1,1,1,Nkv]: dBias of a key is the sum of its column of dS over every row.
    if (live && tid < KB && n0 + tid < f.Nkv) {
      float cs = 0.f;
      for (int i = 0; i < rows; ++i) cs += sDs[i * KB + tid];
      atomicAdd(p.dbias_accum + n0 + tid, cs);
    }
#endif

    // dV = Pd^T dO and dK = scale dS^T Q of key kk, granule g: complete here.
    for (int idx = tid; idx < KB * G; idx += NT) {
      const int kk = idx / G, g = idx % G, key = n0 + kk;
      if (key >= f.Nkv) continue;
      float dk[8], dv[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) dk[e] = dv[e] = 0.f;
      if (live)
        for (int i = 0; i < rows; ++i) {
          const float pd = sPd[i * KB + kk], ds = sDs[i * KB + kk];
          float q8[8], o8[8];
          unpack8(reinterpret_cast<const uint4*>(sQ + i * DS)[g], q8);
          unpack8(reinterpret_cast<const uint4*>(sO + i * DS)[g], o8);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            dv[e] = fmaf(pd, o8[e], dv[e]);
            dk[e] = fmaf(ds, q8[e], dk[e]);
          }
        }
      *reinterpret_cast<uint4*>(dkb + key * p.dk_row_stride + g * 8) = pack8(dk, f.scale);
      *reinterpret_cast<uint4*>(dvb + key * p.dv_row_stride + g * 8) = pack8(dv, 1.f);
    }

    // The tile's share of dQ: pair u % P (row i, granule g), keys u / P (mod ksp).
    if (live) {
#pragma unroll
      for (int q = 0; q < QS; ++q) {
        const int u = tid + q * NT;
        if (u < P * ksp) {
          const int pair = u % P, i = pair / G, g = pair % G;
          for (int kk = u / P; kk < KB; kk += ksp) {
            const float ds = sDs[i * KB + kk];
            float k8[8];
            unpack8(reinterpret_cast<const uint4*>(sK + kk * DS)[g], k8);
#pragma unroll
            for (int e = 0; e < 8; ++e) dq[q][e] = fmaf(ds, k8[e], dq[q][e]);
          }
        }
      }
    }
  }

  // The convert kernel (launched early on sm_90, it waits for this one) may start its blocks.
  launch_dependents();
  // dQ of the block's keys into dq_accum ([B, Hq, Nq, D]), scaled: once a block. With ksp > 1
  // the key parts are summed first through the (now idle) stage buffers.
  cp_async_wait<0>();
  auto dq_dst = [&](int pair) {
    const int i = pair / G, g = pair % G;
    return p.dq_accum + (((long long)b * f.Hq + hq_of(i)) * f.Nq + i % f.Nq) * D + g * 8;
  };
  if (ksp > 1) {  // block-uniform; then P * ksp <= NT: slot 0 only
    float* scratch = reinterpret_cast<float*>(smem);
    __syncthreads();
    if (tid < P * ksp) {
      float4* w = reinterpret_cast<float4*>(scratch + tid * 8);
      w[0] = make_float4(dq[0][0], dq[0][1], dq[0][2], dq[0][3]);
      w[1] = make_float4(dq[0][4], dq[0][5], dq[0][6], dq[0][7]);
    }
    __syncthreads();
    if (tid < P) {
      float sum[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) sum[e] = 0.f;
      for (int ph = 0; ph < ksp; ++ph)
#pragma unroll
        for (int e = 0; e < 8; ++e) sum[e] += scratch[(ph * P + tid) * 8 + e];
      add8(dq_dst(tid), sum, f.scale);
    }
  } else {
#pragma unroll
    for (int q = 0; q < QS; ++q) {
      const int u = tid + q * NT;
      if (u < P) add8(dq_dst(u), dq[q], f.scale);
    }
  }
}
