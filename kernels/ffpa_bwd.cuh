// Split-D flash-attention backward for sm80+ (mma.sync m16n8k16, ldmatrix, cp.async), compiled at
// run time by NVRTC. Device code only: no standard headers. Three kernels, launched in order (the
// first and the last are in ffpa_bwd_aux.cuh, shared with ffpa_bwd_sm90.cuh):
//   ffpa_bwd_pre_kernel      delta = rowsum(dO * O) (fp32), and zeroes the row's dq_accum
//   ffpa_bwd_kernel          one block per (key tile, kv head, batch): dK, dV in registers over
//                            the query tiles of every q head of the GQA group; dQ partial sums
//                            added to dq_accum with fp32 atomics; dBias
//   ffpa_bwd_convert_kernel  dq_accum -> dq (input dtype), dbias_accum -> dbias
// The configuration comes in as macros (src/variants/ffpa_bwd_sm80.cpp sets them):
//   FFPA_D            head dim (multiple of 8)
//   FFPA_BR, FFPA_BC  query rows of a query tile, keys of the block's key tile
//   FFPA_WARPS        warps (NW)
//   FFPA_WR           phase 1: each half of the warps (S, dP) splits its [BR x BC] tile into WR
//                     row slices x (NW/2)/WR column slices
//   FFPA_KD           D chunk (CW): Q and dO of a tile arrive in CW-column cp.async groups and
//                     phase 1 starts on the first one
//   FFPA_BF16         1 bf16, 0 fp16
//   FFPA_CAUSAL       0 none, 1 bottom-right, 2 top-left
//   FFPA_BIAS         0 none, 1 fp32 bias, 2 bias in the input dtype
//   FFPA_DBIAS        0 none; 1 key bias [1,1,1,Nkv]: column sums -> dbias_accum; 2 [1,1,Nq,Nkv]:
//                     atomics -> dbias_accum; 3 full [B,Hq,Nq,Nkv]: stored into dbias directly
//                     (each element belongs to one block; the host zeroes dbias first)
//   FFPA_DROPOUT      0/1
//
// Per query tile (rows = the group's q heads packed, as in the forward), with K and V of the key
// tile resident in shared memory:
//   phase 1: warps [0, NW/2) compute S = Q K^T, warps [NW/2, NW) dP = dO V^T, both over all of D
//            (Q and dO of the tile are resident too). The S warps form P = exp2(S*scale*log2e +
//            bias*log2e - lse*log2e) and Pd = P * dropout mask / (1 - p); the dP warps hand dP over
//            through shared memory (same fragment layout), the S warps form
//            dS = Pd * dP - P * delta and write Pd and dS (input dtype) to shared memory.
//   phase 2: every warp owns 16-column blocks of D (block j of the warp: warp + NW * j):
//            dV += Pd^T dO, dK += dS^T Q (fp32 registers, the whole loop), dQ = dS K -> atomics.
// dV and dK cost (BC/16) * 16 registers per owned block: D=512 with 8 warps and BC=32 is 128.
#pragma once

#include "ffpa_bwd_sm80_layout.h"
#include "ffpa_common.cuh"

namespace ffpa_bwd {

using namespace ffpa_dev;

constexpr int D = FFPA_D;
constexpr int BR = FFPA_BR;
constexpr int BC = FFPA_BC;
constexpr int NW = FFPA_WARPS;
constexpr int WR = FFPA_WR;
constexpr int CW = FFPA_KD;
constexpr int NT = NW * 32;
constexpr int G = NW / 2;  // warps of each phase-1 half
constexpr int WC = G / WR;
constexpr int R1 = BR / WR;  // phase-1 rows per warp
constexpr int M1 = R1 / 16;
constexpr int C1 = BC / WC;  // phase-1 key columns per warp
constexpr int N1 = C1 / 8;
constexpr int DP = (D + CW - 1) / CW * CW;  // D padded to whole chunks (zero-filled)
constexpr int NCH = DP / CW;
constexpr int NBLK = (D + 15) / 16;        // 16-column blocks of D that hold data
constexpr int NBW = (NBLK + NW - 1) / NW;  // blocks a warp owns (the last may be absent)
constexpr int MK = BC / 16;                // m16 tiles of dK/dV (key rows)
constexpr int KR = BR / 16;                // k16 steps over query rows; m16 tiles of dQ
constexpr int KC = BC / 16;                // k16 steps over keys (dQ)
constexpr int BCP = (BC + 63) / 64 * 64;   // P/dS tiles: whole 64-column swizzled tiles
constexpr ffpa_layout::BwdSm80 LAYOUT = ffpa_layout::bwd_sm80_layout(DP, BR, BC);
#define POS_INF __int_as_float(0x7f800000u)
constexpr float LOG2E = 1.4426950408889634f;

static_assert(D % 8 == 0, "D must be a multiple of 8");
static_assert(CW % 64 == 0, "chunks are whole 64-column swizzled tiles");
static_assert(NW % 2 == 0 && G % WR == 0, "phase 1 splits each half of the warps WR x WC");
static_assert(R1 % 16 == 0 && C1 % 8 == 0 && BC % 16 == 0 && BR % 16 == 0, "whole mma tiles");
static_assert(NCH <= 16, "cp_async_wait_n covers 16 groups");

// n is a constant once the caller's loop is unrolled; the switch folds away.
__device__ __forceinline__ void cp_async_wait_n(int n) {
  switch (n) {
    case 15:
      cp_async_wait<15>();
      break;
    case 14:
      cp_async_wait<14>();
      break;
    case 13:
      cp_async_wait<13>();
      break;
    case 12:
      cp_async_wait<12>();
      break;
    case 11:
      cp_async_wait<11>();
      break;
    case 10:
      cp_async_wait<10>();
      break;
    case 9:
      cp_async_wait<9>();
      break;
    case 8:
      cp_async_wait<8>();
      break;
    case 7:
      cp_async_wait<7>();
      break;
    case 6:
      cp_async_wait<6>();
      break;
    case 5:
      cp_async_wait<5>();
      break;
    case 4:
      cp_async_wait<4>();
      break;
    case 3:
      cp_async_wait<3>();
      break;
    case 2:
      cp_async_wait<2>();
      break;
    case 1:
      cp_async_wait<1>();
      break;
    default:
      cp_async_wait<0>();
      break;
  }
}

__device__ __forceinline__ void ldsm_x2(u32& r0, u32& r1, u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(addr));
}
#if __CUDA_ARCH__ < 900
// fp32 atomic add of two neighbours (red_add4 from sm_90).
__device__ __forceinline__ void red_add2(float* dst, float a, float b) {
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
}
#endif

#if FFPA_DROPOUT
// One bit per phase-1 accumulator of a thread: whether dropout kept the element.
template <bool Small>
struct KeepBits {
  typedef u32 T;
};
template <>
struct KeepBits<false> {
  typedef unsigned long long T;
};
typedef KeepBits<M1 * N1 * 4 <= 32>::T Keep;
static_assert(M1 * N1 * 4 <= 64, "dropout keep bits fit two registers");
#endif

// acc += A^T B for the warp's 16-column blocks of D: A = [BR x BC] (Pd or dS) and B = [BR x D]
// (dO or Q) in shared memory, the contraction over the tile's query rows. A fragments are loaded
// one k step at a time (4 * MK registers).
__device__ __forceinline__ void mma_at_b(float (&acc)[NBW][MK][2][4], u32 sA, u32 sB, int warp,
                                         int lane) {
#pragma unroll
  for (int k = 0; k < KR; ++k) {
    u32 a[MK][4];
#pragma unroll
    for (int m = 0; m < MK; ++m)
      ldsm_x4_t(a[m], sA + tile_off(k * 16 + (lane & 7) + ((lane >> 4) & 1) * 8,
                                    m * 16 + ((lane >> 3) & 1) * 8, BR));
#pragma unroll
    for (int j = 0; j < NBW; ++j) {
      const int blk = warp + NW * j;
      if (NBLK % NW && blk >= NBLK) break;
      u32 bf[4];
      ldsm_x4_t(bf, sB + tile_off(k * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                  blk * 16 + (lane >> 4) * 8, BR));
#pragma unroll
      for (int m = 0; m < MK; ++m) {
        mma(acc[j][m][0], a[m], bf[0], bf[1]);
        mma(acc[j][m][1], a[m], bf[2], bf[3]);
      }
    }
  }
}

}  // namespace ffpa_bwd

extern "C" __global__ void __launch_bounds__(ffpa_bwd::NT, 1)
    ffpa_bwd_kernel(const FfpaBwdParams p) {
  using namespace ffpa_bwd;
  const FfpaFwdParams& f = p.fwd;
  extern __shared__ __align__(128) unsigned char smem[];
  const u32 sK = smem_u32(smem);
  const u32 sV = sK + LAYOUT.v;
  const u32 sQ = sK + LAYOUT.q;
  const u32 sO = sK + LAYOUT.o;                                 // dO
  const u32 sP = sK + LAYOUT.p;                                 // Pd, input dtype
  const u32 sS = sK + LAYOUT.s;                                 // dS, input dtype
  float* sX = reinterpret_cast<float*>(smem + LAYOUT.x);        // dP
  float* s_lse = reinterpret_cast<float*>(smem + LAYOUT.rows);  // lse * log2(e); +inf: no gradient
  float* s_delta = s_lse + BR;
  int* s_r = reinterpret_cast<int*>(s_delta + BR);  // query row, -1 past the last row
  int* s_hq = s_r + BR;
#if FFPA_DBIAS == 1
  float* s_colsum = reinterpret_cast<float*>(s_hq + BR);
#endif

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n0 = blockIdx.x * BC;
  const int kvh = blockIdx.y, b = blockIdx.z;
  const int rows_total = f.group * f.Nq;
  const int diag = FFPA_CAUSAL == 1 ? f.Nkv - f.Nq : 0;  // row r sees keys k <= r + diag

  // K and V of the key tile, resident for the whole block.
  {
    const u16* kb = static_cast<const u16*>(f.k) + b * f.k_batch_stride + kvh * f.k_head_stride;
    const u16* vb = static_cast<const u16*>(f.v) + b * f.v_batch_stride + kvh * f.v_head_stride;
    for (int idx = tid; idx < BC * DP / 8; idx += NT) {
      const int row = idx / (DP / 8), col = (idx % (DP / 8)) * 8;
      load_kv_granule<BC, D>(f, kb, vb, sK, sV, row, col, n0);
    }
    cp_async_commit();
  }
#if FFPA_DBIAS == 1
  for (int i = tid; i < BC; i += NT) s_colsum[i] = 0.f;
#endif

  float dv[NBW][MK][2][4], dk[NBW][MK][2][4];
#pragma unroll
  for (int j = 0; j < NBW; ++j)
#pragma unroll
    for (int m = 0; m < MK; ++m)
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) dv[j][m][n][e] = dk[j][m][n][e] = 0.f;

  const bool is_s = warp < G;  // phase 1: S warps, else dP warps
  const int w1 = warp % G, wr = w1 / WC, wc = w1 % WC;
  const u32 aA =
      (is_s ? sQ : sO) + (wr * R1 + (lane & 15)) * 128 + (((lane >> 4) ^ (lane & 7)) << 4);
  const u32 aB = (is_s ? sK : sV) + (wc * C1 + (lane & 7) + (lane >> 4) * 8) * 128 +
                 ((((lane >> 3) & 1) ^ (lane & 7)) << 4);
  const u16* qb = static_cast<const u16*>(f.q) + b * f.q_batch_stride;
  const u16* ob = static_cast<const u16*>(p.dout) + b * p.do_batch_stride;

  const int ntile = (rows_total + BR - 1) / BR;
  for (int t = 0; t < ntile; ++t) {
    const int m0 = t * BR;
    if (FFPA_CAUSAL) {  // skip query tiles that see none of the block's keys
      const int i_hi = min(m0 + BR, rows_total) - 1;
      const int r_hi = m0 / f.Nq != i_hi / f.Nq ? f.Nq - 1 : i_hi % f.Nq;
      if (r_hi + diag < n0) continue;
    }
    for (int row = tid; row < BR; row += NT) {
      const int i = m0 + row;
      int r = -1, hq = kvh * f.group;
      float l = POS_INF, dl = 0.f;  // a row that sees no key (or none at all) has no gradient
      if (i < rows_total) {
        r = i % f.Nq;
        hq += i / f.Nq;
        const long long lrow = ((long long)b * f.Hq + hq) * f.Nq + r;
        l = lse_log2(f.lse[lrow]);
        dl = p.delta[lrow];
      }
      s_r[row] = r;
      s_hq[row] = hq;
      s_lse[row] = l;
      s_delta[row] = dl;
    }
    // Q and dO of the tile, one cp.async group per D chunk.
#pragma unroll
    for (int c = 0; c < NCH; ++c) {
      for (int idx = tid; idx < BR * CW / 8; idx += NT) {
        const int row = idx / (CW / 8), col = c * CW + (idx % (CW / 8)) * 8;
        load_qdo_granule<BR, D>(p, qb, ob, sQ, sO, row, col, m0, rows_total, kvh);
      }
      cp_async_commit();
    }

    // Phase 1: S (or dP) of the warp's [R1 x C1] slice, over all of D.
    float acc[M1][N1][4];
#pragma unroll
    for (int mt = 0; mt < M1; ++mt)
#pragma unroll
      for (int ns = 0; ns < N1; ++ns)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][ns][e] = 0.f;
#pragma unroll
    for (int c = 0; c < NCH; ++c) {
      cp_async_wait_n(NCH - 1 - c);
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < CW / 16; ++kk) {
        const int kg = c * (CW / 16) + kk;  // k16 step over D; its 64-column tile is kg / 4
        u32 a[M1][4];
#pragma unroll
        for (int mt = 0; mt < M1; ++mt)
          ldsm_x4(a[mt], (aA ^ ((kg & 3) << 5)) + (kg >> 2) * BR * 128 + mt * 16 * 128);
#pragma unroll
        for (int ns = 0; ns + 1 < N1; ns += 2) {
          u32 bf[4];
          ldsm_x4(bf, (aB ^ ((kg & 3) << 5)) + (kg >> 2) * BC * 128 + ns * 8 * 128);
#pragma unroll
          for (int mt = 0; mt < M1; ++mt) {
            mma(acc[mt][ns], a[mt], bf[0], bf[1]);
            mma(acc[mt][ns + 1], a[mt], bf[2], bf[3]);
          }
        }
        if (N1 % 2) {
          u32 b0, b1;
          ldsm_x2(b0, b1, (aB ^ ((kg & 3) << 5)) + (kg >> 2) * BC * 128 + (N1 - 1) * 8 * 128);
#pragma unroll
          for (int mt = 0; mt < M1; ++mt) mma(acc[mt][N1 - 1], a[mt], b0, b1);
        }
      }
    }

    const int key0 = n0 + wc * C1 + (lane & 3) * 2;  // key of this thread's first column
#if FFPA_DROPOUT
    Keep keep = 0;  // bit (mt * N1 + ns) * 4 + e: element kept by dropout
#endif
    if (is_s) {
      // P from the forward's lse; masked keys, keys past Nkv and rows without gradient give 0.
#pragma unroll
      for (int mt = 0; mt < M1; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = wr * R1 + mt * 16 + (lane >> 2) + h * 8;
          const int r = s_r[row];
          const float l = s_lse[row];
          const int causal_lim = r + diag - key0;
          const int kv_lim = f.Nkv - key0;
#if FFPA_BIAS
          const long long boff = b * f.bias_batch_stride + s_hq[row] * f.bias_head_stride +
                                 max(r, 0) * f.bias_row_stride + key0;
#endif
#if FFPA_DROPOUT
          const unsigned long long erow =
              (((unsigned long long)b * f.Hq + s_hq[row]) * f.Nq + max(r, 0)) *
                  (unsigned long long)f.Nkv +
              key0;
#endif
#pragma unroll
          for (int ns = 0; ns < N1; ++ns) {
            float pr[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int kof = ns * 8 + e;
              float x = acc[mt][ns][h * 2 + e] * f.scale_log2;
#if FFPA_BIAS
              if (kof < kv_lim) x += bias_at(f, boff + kof) * LOG2E;
#endif
              const bool masked = kof >= kv_lim || (FFPA_CAUSAL && kof > causal_lim);
              pr[e] = masked ? 0.f : exp2f(x - l);
              acc[mt][ns][h * 2 + e] = pr[e];
            }
#if FFPA_DROPOUT
            dropout2(f.dropout_seed, f.dropout_offset + erow + ns * 8, f.dropout_keep_min, pr);
            keep |= (Keep)(pr[0] != 0.f) << ((mt * N1 + ns) * 4 + h * 2);
            keep |= (Keep)(pr[1] != 0.f) << ((mt * N1 + ns) * 4 + h * 2 + 1);
#endif
          }
        }
    } else {
#pragma unroll
      for (int mt = 0; mt < M1; ++mt)
#pragma unroll
        for (int ns = 0; ns < N1; ++ns)
          reinterpret_cast<float4*>(sX)[((w1 * M1 + mt) * N1 + ns) * 32 + lane] =
              make_float4(acc[mt][ns][0], acc[mt][ns][1], acc[mt][ns][2], acc[mt][ns][3]);
    }
    __syncthreads();  // dP handed over

    if (is_s) {
#pragma unroll
      for (int mt = 0; mt < M1; ++mt) {
        float ds[N1][4];
#pragma unroll
        for (int ns = 0; ns < N1; ++ns) {
          const float4 x =
              reinterpret_cast<const float4*>(sX)[((w1 * M1 + mt) * N1 + ns) * 32 + lane];
          const float dp[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float pv = acc[mt][ns][e];
#if FFPA_DROPOUT
            const float pd = keep >> ((mt * N1 + ns) * 4 + e) & 1 ? pv * f.dropout_scale : 0.f;
#else
            const float pd = pv;
#endif
            ds[ns][e] = pd * dp[e] - pv * s_delta[wr * R1 + mt * 16 + (lane >> 2) + (e >> 1) * 8];
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = wr * R1 + mt * 16 + (lane >> 2) + h * 8;
#if FFPA_DBIAS >= 2
          const int r = s_r[row];
#endif
#pragma unroll
          for (int ns = 0; ns < N1; ++ns) {
            const int col = wc * C1 + ns * 8 + (lane & 3) * 2;
#if FFPA_DROPOUT
            const int kb = (mt * N1 + ns) * 4 + h * 2;
            const u32 pv2 =
                pack2(keep >> kb & 1 ? acc[mt][ns][h * 2] * f.dropout_scale : 0.f,
                      keep >> (kb + 1) & 1 ? acc[mt][ns][h * 2 + 1] * f.dropout_scale : 0.f);
#else
            const u32 pv2 = pack2(acc[mt][ns][h * 2], acc[mt][ns][h * 2 + 1]);
#endif
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sP + tile_off(row, col, BR)), "r"(pv2));
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sS + tile_off(row, col, BR)),
                         "r"(pack2(ds[ns][h * 2], ds[ns][h * 2 + 1])));
#if FFPA_DBIAS >= 2
            if (r >= 0) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int key = n0 + col + e;
                const float g = ds[ns][h * 2 + e];
                if (key < f.Nkv) put_dbias(p, b, s_hq[row], r, key, g);
              }
            }
#endif
          }
        }
#if FFPA_DBIAS == 1
        // Column sums over the warp's rows: the 8 row lanes of a column, then both halves.
#pragma unroll
        for (int ns = 0; ns < N1; ++ns)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float v = ds[ns][e] + ds[ns][2 + e];
            v += __shfl_xor_sync(0xffffffffu, v, 4);
            v += __shfl_xor_sync(0xffffffffu, v, 8);
            v += __shfl_xor_sync(0xffffffffu, v, 16);
            if (lane < 4) atomicAdd(s_colsum + wc * C1 + ns * 8 + lane * 2 + e, v);
          }
#endif
      }
    }
    __syncthreads();  // Pd and dS written

    // Phase 2: the warp's 16-column blocks of D.
    mma_at_b(dv, sP, sO, warp, lane);  // dV += Pd^T dO
    mma_at_b(dk, sS, sQ, warp, lane);  // dK += dS^T Q (scaled at the end)
    // dQ = scale * dS K, added to dq_accum
    {
#pragma unroll
      for (int j = 0; j < NBW; ++j) {
        const int blk = warp + NW * j;
        if (NBLK % NW && blk >= NBLK) break;
        u32 bk[KC][4];
#pragma unroll
        for (int k = 0; k < KC; ++k)
          ldsm_x4_t(bk[k], sK + tile_off(k * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                         blk * 16 + (lane >> 4) * 8, BC));
#pragma unroll
        for (int m = 0; m < KR; ++m) {  // dS fragments re-read per block: registers are short
          float q[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
          for (int k = 0; k < KC; ++k) {
            u32 a[4];
            ldsm_x4(a, sS + tile_off(m * 16 + (lane & 15), k * 16 + (lane >> 4) * 8, BR));
            mma(q[0], a, bk[k][0], bk[k][1]);
            mma(q[1], a, bk[k][2], bk[k][3]);
          }
#if __CUDA_ARCH__ >= 900
          // Lane pairs swap half their fragment so that each lane holds 4 neighbouring columns of
          // one row (even lanes row g, odd lanes row g + 8): half as many L2 reductions, which
          // bound this kernel (its speed followed Bc, i.e. the dQ reductions per flop).
          const bool odd = lane & 1;
          const int row = m * 16 + (lane >> 2) + (odd ? 8 : 0);
          const int r = s_r[row];
          const long long lrow = ((long long)b * f.Hq + s_hq[row]) * f.Nq + r;
#pragma unroll
          for (int n = 0; n < 2; ++n) {
            const float s0 = odd ? q[n][0] : q[n][2], s1 = odd ? q[n][1] : q[n][3];
            const float r0 = __shfl_xor_sync(0xffffffffu, s0, 1);
            const float r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
            const int col = blk * 16 + n * 8 + (lane & 2) * 2;
            if (r >= 0 && col < D) {
              const float4 v = odd ? make_float4(r0, r1, q[n][2], q[n][3])
                                   : make_float4(q[n][0], q[n][1], r0, r1);
              red_add4(p.dq_accum + lrow * D + col, v, f.scale);
            }
          }
#else
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = m * 16 + (lane >> 2) + h * 8;
            const int r = s_r[row];
            if (r < 0) continue;
            const long long lrow = ((long long)b * f.Hq + s_hq[row]) * f.Nq + r;
#pragma unroll
            for (int n = 0; n < 2; ++n) {
              const int col = blk * 16 + n * 8 + (lane & 3) * 2;
              if (col < D)
                red_add2(p.dq_accum + lrow * D + col, q[n][h * 2] * f.scale,
                         q[n][h * 2 + 1] * f.scale);
            }
          }
#endif
        }
      }
    }
    __syncthreads();  // the tile's shared memory is free for the next one
  }
  cp_async_wait<0>();  // no query tile at all: K/V copies still in flight

  // dK, dV of the key tile in the input dtype (zero where no query saw a key).
  u16* dkb = static_cast<u16*>(p.dk) + b * p.dk_batch_stride + kvh * p.dk_head_stride;
  u16* dvb = static_cast<u16*>(p.dv) + b * p.dv_batch_stride + kvh * p.dv_head_stride;
#pragma unroll
  for (int j = 0; j < NBW; ++j) {
    const int blk = warp + NW * j;
    if (NBLK % NW && blk >= NBLK) break;
#pragma unroll
    for (int m = 0; m < MK; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = n0 + m * 16 + (lane >> 2) + h * 8;
        if (key >= f.Nkv) continue;
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          const int col = blk * 16 + n * 8 + (lane & 3) * 2;
          if (col >= D) continue;
          *reinterpret_cast<u32*>(dkb + key * p.dk_row_stride + col) =
              pack2(dk[j][m][n][h * 2] * f.scale, dk[j][m][n][h * 2 + 1] * f.scale);
          *reinterpret_cast<u32*>(dvb + key * p.dv_row_stride + col) =
              pack2(dv[j][m][n][h * 2], dv[j][m][n][h * 2 + 1]);
        }
      }
  }
#if FFPA_DBIAS == 1
  __syncthreads();
  for (int i = tid; i < BC; i += NT)
    if (n0 + i < f.Nkv) atomicAdd(p.dbias_accum + n0 + i, s_colsum[i]);
#endif
}

#include "ffpa_bwd_aux.cuh"
