// Split-D flash-attention forward for sm80+ (mma.sync m16n8k16, ldmatrix, cp.async), compiled at
// run time by NVRTC. Device code only: no standard headers. The configuration comes in as macros
// (src/variants/ffpa_fwd_sm80.cpp sets them):
//   FFPA_D            head dim (multiple of 8)
//   FFPA_BR, FFPA_BC  query rows and key columns of one tile
//   FFPA_WM, FFPA_WN  warp grid: WM warps along rows, WN along key columns (QK) and D (PV)
//   FFPA_KD           D chunk: K and V stream through shared memory as [BC x KD] pieces, so a stage
//                     does not grow with D
//   FFPA_STAGES       cp.async pipeline depth
//   FFPA_PRIVATE      0: K/V chunks are loaded once per block (a block barrier per chunk);
//                     1: each warp streams its own K rows / V columns of the chunk (WM times the
//                     L2 reads, but only warp-level syncs in the chunk loop)
//   FFPA_BF16         1 bf16, 0 fp16
//   FFPA_CAUSAL       0 none, 1 bottom-right, 2 top-left
//   FFPA_BIAS         0 none, 1 fp32 bias, 2 bias in the input dtype
//   FFPA_DROPOUT      0/1
//   FFPA_SPLIT        0: write o and lse; 1: write o_partial/lse_partial for ffpa_merge_kernel
//
// Layout of the work: the q heads of one kv head are packed into the row dimension (GQA without
// expanding K/V; rows = group * Nq), a block takes BR of those rows. Warp (wm, wn) computes
// S[wm rows][wn key columns] over all D chunks, the row max is exchanged through shared memory, P
// goes to shared memory once and comes back as A fragments held in registers for the whole PV
// pass. O[wm rows][D] is split by columns across the WN warps (each owns KD/WN columns of every
// chunk), so a thread holds (BR/WM)*(D/WN)/32 fp32 accumulators.
#pragma once

#include "ffpa_common.cuh"
#include "ffpa_fwd_sm80_layout.h"

namespace ffpa_fwd {

using namespace ffpa_dev;

constexpr int D = FFPA_D;
constexpr int BR = FFPA_BR;
constexpr int BC = FFPA_BC;
constexpr int WM = FFPA_WM;
constexpr int WN = FFPA_WN;
constexpr int KD = FFPA_KD;
constexpr int STAGES = FFPA_STAGES;
constexpr int NT = WM * WN * 32;
constexpr bool PRIV = FFPA_PRIVATE;
// The shared-memory layout the host sizes the launch with (kernels/ffpa_fwd_sm80_layout.h).
FFPA_LAYOUT_FN ffpa_layout::FwdSm80 layout() {
  return ffpa_layout::fwd_sm80_layout(D, BR, BC, WM, WN, KD, STAGES, PRIV);
}
constexpr int DP = layout().padded_d;  // D padded to whole chunks (zero-filled)
constexpr int NCH = DP / KD;
constexpr int RW = BR / WM;  // rows per warp
constexpr int MT = RW / 16;  // m16 tiles per warp
constexpr int SN = BC / WN;  // S columns per warp
constexpr int NS = SN / 8;   // n8 tiles of S per warp
constexpr int VN = KD / WN;  // O columns per warp per chunk
constexpr int NV = VN / 8;
constexpr int KS = BC / 16;                      // k16 steps of PV
constexpr int SLOT_BYTES = layout().slot_bytes;  // one warp's slice of a chunk (private mode)
constexpr int STAGE_BYTES = layout().stage_bytes;
// Region offsets as scalars (device code reads constexpr scalars, not a constexpr struct).
constexpr int STAGE_OFF = layout().stage, P_OFF = layout().p, RED_OFF = layout().red;
static_assert(layout().q == 0, "Q starts the block's shared memory");
static_assert(layout().rows == RED_OFF + WN * BR * 4, "row indices follow the row exchange");
constexpr int VG = VN / 8;  // 16-byte granules in a row of a warp's V slice
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

static_assert(D % 8 == 0, "D must be a multiple of 8");
static_assert(KD % 64 == 0 && BC % 64 == 0, "chunks are whole 64-column swizzled tiles");
static_assert(RW % 16 == 0 && SN % 16 == 0 && VN % 16 == 0, "warp tiles are whole 16x16 pieces");
static_assert(STAGES >= 2, "pipeline needs two stages");

// A warp's V slice is [BC][VN] with VN = 16..128 columns: rows narrower than 128 bytes are
// swizzled with the row's position inside its 128-byte line group.
__device__ __forceinline__ u32 vslice_off(int row, int g) {
  return (u32)(row * VN * 2 + ((g ^ ((row / (8 / VG)) % VG)) << 4));
}

}  // namespace ffpa_fwd

extern "C" __global__ void __launch_bounds__(ffpa_fwd::NT, 1)
    ffpa_fwd_kernel(const FfpaFwdParams p) {
  using namespace ffpa_fwd;
  extern __shared__ __align__(128) unsigned char smem[];
  const u32 sQ = smem_u32(smem);
  const u32 sStage = sQ + STAGE_OFF;
  const u32 sP = sStage + (P_OFF - STAGE_OFF);
  float* red = reinterpret_cast<float*>(smem + RED_OFF);
  // Per-row query index and q head, read back every tile: kept in registers across the loop they
  // would cost 4-16 registers at the ptxas limit.
  int* srow = reinterpret_cast<int*>(red + WN * BR);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WN, wn = warp % WN;
  const int rows_total = p.group * p.Nq;
  const int m0 = (gridDim.x - 1 - blockIdx.x) * BR;  // heaviest causal blocks first
  const int kvh = blockIdx.y;
  const int split = blockIdx.z % p.num_splits;
  const int b = blockIdx.z / p.num_splits;

  // Rows and key tiles of this block.
  const auto [r_lo, diag, n_end] = block_span<BR, BC>(p, m0, rows_total);
  const int per = (n_end + p.num_splits - 1) / p.num_splits;
  const int t0 = split * per;
  const int ntile = max(0, min(n_end, t0 + per) - t0);

  for (int row = tid; row < BR; row += NT) {
    const int i = min(m0 + row, rows_total - 1);
    srow[row] = i % p.Nq;
    srow[BR + row] = kvh * p.group + i / p.Nq;
  }

  const u16* kbase = static_cast<const u16*>(p.k) + b * p.k_batch_stride + kvh * p.k_head_stride;
  const u16* vbase = static_cast<const u16*>(p.v) + b * p.v_batch_stride + kvh * p.v_head_stride;

  // Q: all of D stays resident (BR x DP); it is read once per key tile.
  {
    const u16* qb = static_cast<const u16*>(p.q) + b * p.q_batch_stride;
#pragma unroll
    for (int it = 0; it < (BR * DP / 8 + NT - 1) / NT; ++it) {
      const int idx = tid + it * NT;
      if ((BR * DP / 8) % NT && idx >= BR * DP / 8) break;
      load_q_granule<BR, DP, D>(p, qb, sQ, idx, m0, rows_total, kvh);
    }
  }

  const int total = ntile * 2 * NCH;  // chunks streamed: per tile NCH of K then NCH of V
  auto load_chunk = [&](int gi) {
    if (gi < total) {
      const int j = t0 + gi / (2 * NCH);
      const int rem = gi % (2 * NCH);
      const bool isv = rem >= NCH;
      const int c = isv ? rem - NCH : rem;
      const u16* base = isv ? vbase : kbase;
      const long long rs = isv ? p.v_row_stride : p.k_row_stride;
      const u32 dst = sStage + (gi % STAGES) * STAGE_BYTES;
      if (PRIV) {
        const u32 slot = dst + warp * SLOT_BYTES;
#pragma unroll
        for (int it = 0; it < SLOT_BYTES / 16 / 32; ++it) {
          const int idx = lane + it * 32;
          int key, d;
          u32 off;
          if (isv) {  // all BC keys, the warp's VN columns of the chunk
            const int row = idx / VG, g = idx % VG;
            key = j * BC + row, d = c * KD + wn * VN + g * 8, off = vslice_off(row, g);
          } else {  // the warp's SN keys, all KD columns
            const int row = idx / (KD / 8), col = (idx % (KD / 8)) * 8;
            key = j * BC + wn * SN + row, d = c * KD + col, off = tile_off(row, col, SN);
          }
          const bool ok = key < p.Nkv && d < D;
          cp_async16(slot + off, ok ? base + key * rs + d : base, ok);
        }
        cp_async_commit();
        return;
      }
#pragma unroll
      for (int it = 0; it < (BC * KD / 8 + NT - 1) / NT; ++it) {
        const int idx = tid + it * NT;
        if ((BC * KD / 8) % NT && idx >= BC * KD / 8) break;
        const int row = idx / (KD / 8), col = (idx % (KD / 8)) * 8;
        const int key = j * BC + row, d = c * KD + col;
        const bool ok = key < p.Nkv && d < D;
        cp_async16(dst + tile_off(row, col, BC), ok ? base + key * rs + d : base, ok);
      }
    }
    cp_async_commit();
  };

  if (PRIV) cp_async_commit();  // Q alone: other warps read it, so it is waited for block-wide
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load_chunk(s);  // shared mode: the first carries Q
  if (PRIV) {
    cp_async_wait<STAGES - 1>();
    __syncthreads();
  }

  float o[NCH][MT][NV][4];
#pragma unroll
  for (int c = 0; c < NCH; ++c)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nv = 0; nv < NV; ++nv)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[c][mt][nv][e] = 0.f;
  float m_run[MT][2], l_run[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) m_run[mt][h] = NEG_INF, l_run[mt][h] = 0.f;

  // ldmatrix addresses: every tile base is 128-byte aligned and a fragment row's low 3 bits are
  // lane & 7, so the swizzled granule of k-step kk is the lane's granule XOR (kk & 3) * 2.
  const u32 aQ = sQ + (wm * RW + (lane & 15)) * 128 + (((lane >> 4) ^ (lane & 7)) << 4);
  const u32 aK = (PRIV ? warp * SLOT_BYTES : wn * SN * 128) + ((lane & 7) + (lane >> 4) * 8) * 128 +
                 ((((lane >> 3) & 1) ^ (lane & 7)) << 4);
  constexpr int KROWS = PRIV ? SN : BC;  // rows of the K tile the warp reads
  u32 aV[NV / 2];
#pragma unroll
  for (int n = 0; n < NV / 2; ++n) {
    const int vrow = (lane & 7) + ((lane >> 3) & 1) * 8;
    if (PRIV) {
      aV[n] = warp * SLOT_BYTES + vslice_off(vrow, n * 2 + (lane >> 4));
    } else {
      const int col = wn * VN + n * 16;  // 16-column pair of n8 tiles
      aV[n] = (col >> 6) * BC * 128 + vrow * 128 +
              (((((col >> 3) & 7) + (lane >> 4)) ^ (lane & 7)) << 4);
    }
  }
  constexpr int VROW_BYTES = PRIV ? VN * 2 : 128;

  int gi = 0;
  for (int jt = 0; jt < ntile; ++jt) {
    const int j = t0 + jt;
    float s[MT][NS][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int ns = 0; ns < NS; ++ns)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][ns][e] = 0.f;

          // S = Q K^T, accumulated over the D chunks.
#pragma unroll
    for (int c = 0; c < NCH; ++c, ++gi) {
      cp_async_wait<STAGES - 2>();
      if (PRIV)
        __syncwarp();
      else
        __syncthreads();
      load_chunk(gi + STAGES - 1);
      const u32 sk = sStage + (gi % STAGES) * STAGE_BYTES;
#pragma unroll
      for (int kk = 0; kk < KD / 16; ++kk) {
        u32 a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ldsm_x4(a[mt],
                  (aQ ^ ((kk & 3) << 5)) + ((c * KD + kk * 16) >> 6) * BR * 128 + mt * 16 * 128);
#pragma unroll
        for (int ns = 0; ns < NS; ns += 2) {
          u32 bf[4];
          ldsm_x4(bf, ((sk + aK) ^ ((kk & 3) << 5)) + (kk >> 2) * KROWS * 128 + ns * 8 * 128);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma(s[mt][ns], a[mt], bf[0], bf[1]);
            mma(s[mt][ns + 1], a[mt], bf[2], bf[3]);
          }
        }
      }
    }

    // Online softmax in exp2 form: s2 = s * scale * log2(e) (+ bias * log2(e)).
    const bool edge = (j + 1) * BC > p.Nkv || (FFPA_CAUSAL && (j + 1) * BC - 1 > r_lo + diag);
    const int key0 = j * BC + wn * SN + (lane & 3) * 2;  // key of this thread's first S column
    float mx[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = wm * RW + mt * 16 + (lane >> 2) + h * 8;
        const int r = srow[row];
        const int causal_lim = r + diag - key0;  // columns past it are masked
        const int kv_lim = p.Nkv - key0;
#if FFPA_BIAS
        const long long boff = b * p.bias_batch_stride + srow[BR + row] * p.bias_head_stride +
                               r * p.bias_row_stride + key0;
#endif
        float v = NEG_INF;
#pragma unroll
        for (int ns = 0; ns < NS; ++ns)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int kof = ns * 8 + e;
            float x = s[mt][ns][h * 2 + e] * p.scale_log2;
#if FFPA_BIAS
            if (kof < kv_lim) x += bias_at(p, boff + kof) * LOG2E;
#endif
            if (edge && (kof >= kv_lim || (FFPA_CAUSAL && kof > causal_lim))) x = NEG_INF;
            s[mt][ns][h * 2 + e] = x;
            v = fmaxf(v, x);
          }
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
        if ((lane & 3) == 0) red[wn * BR + row] = v;
        mx[mt][h] = v;
      }
    // Only the WN warps of one row group exchange row statistics and P.
    if (PRIV)
      named_sync(1 + wm, WN * 32);
    else
      __syncthreads();
    float al[MT][2];  // rescale of O, applied chunk by chunk in the PV pass
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#if FFPA_DROPOUT
      const int drow = wm * RW + mt * 16 + (lane >> 2) + (lane & 1) * 8;
      const u32 keep = dropout_keep_bits<NS>(
          p.dropout_seed,
          p.dropout_offset +
              (((unsigned long long)b * p.Hq + srow[BR + drow]) * p.Nq + srow[drow]) *
                  (unsigned long long)p.Nkv +
              key0 - (lane & 1) * 2,
          p.dropout_keep_min, lane);
#endif
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = wm * RW + mt * 16 + (lane >> 2) + h * 8;
        float v = mx[mt][h];
#pragma unroll
        for (int w = 0; w < WN; ++w) v = fmaxf(v, red[w * BR + row]);
        const float m_new = fmaxf(m_run[mt][h], v);
        const float base = m_new == NEG_INF ? 0.f : m_new;
        const float alpha = exp2f(m_run[mt][h] - base);
        m_run[mt][h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int ns = 0; ns < NS; ++ns) {
          float pr[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            pr[e] = exp2f(s[mt][ns][h * 2 + e] - base);
            sum += pr[e];
#if FFPA_DROPOUT
            if (!((keep >> ((ns * 2 + h) * 2 + e)) & 1)) pr[e] = 0.f;
#endif
          }
          const int col = wn * SN + ns * 8 + (lane & 3) * 2;
          const u32 v2 = pack2(pr[0], pr[1]);
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sP + tile_off(row, col, BR)), "r"(v2));
        }
        l_run[mt][h] = l_run[mt][h] * alpha + sum;
        al[mt][h] = alpha;
      }
    }
    if (PRIV) named_sync(1 + wm, WN * 32);  // P written (shared mode: the next chunk barrier)

    // O += P V, chunk by chunk; P is loaded into registers once after the first barrier.
    u32 pa[MT][KS][4];
#pragma unroll
    for (int c = 0; c < NCH; ++c, ++gi) {
      cp_async_wait<STAGES - 2>();
      if (PRIV)
        __syncwarp();
      else
        __syncthreads();
      load_chunk(gi + STAGES - 1);
      if (c == 0) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int ks = 0; ks < KS; ++ks)
            ldsm_x4(pa[mt][ks],
                    sP + tile_off(wm * RW + mt * 16 + (lane & 15), ks * 16 + (lane >> 4) * 8, BR));
      }
      const u32 sv = sStage + (gi % STAGES) * STAGE_BYTES;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nv = 0; nv < NV; ++nv)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[c][mt][nv][e] *= al[mt][e >> 1];
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int nv = 0; nv < NV; nv += 2) {
          u32 bf[4];
          ldsm_x4_t(bf, sv + aV[nv / 2] + ks * 16 * VROW_BYTES);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma(o[c][mt][nv], pa[mt][ks], bf[0], bf[1]);
            mma(o[c][mt][nv + 1], pa[mt][ks], bf[2], bf[3]);
          }
        }
    }
  }
  cp_async_wait<0>();

  // Row sums: quad, then across the WN warps of a row group.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = l_run[mt][h];
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      l_run[mt][h] = v;
    }
  __syncthreads();  // red's last readers (the final softmax) are done
  if ((lane & 3) == 0)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        red[wn * BR + wm * RW + mt * 16 + (lane >> 2) + h * 8] = l_run[mt][h];
  __syncthreads();

#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = wm * RW + mt * 16 + (lane >> 2) + h * 8;
      const int i = m0 + row;
      if (i >= rows_total) continue;
      float l = 0.f;
#pragma unroll
      for (int w = 0; w < WN; ++w) l += red[w * BR + row];
      const float inv = l > 0.f ? p.dropout_scale / l : 0.f;
      const float lse = l > 0.f ? (m_run[mt][h] + __log2f(l)) * LN2 : NEG_INF;
      const int hq = kvh * p.group + i / p.Nq, r = i % p.Nq;
      const long long lrow = ((long long)b * p.Hq + hq) * p.Nq + r;
#if FFPA_SPLIT
      const long long prow = (long long)split * p.B * p.Hq * p.Nq + lrow;
      float* orow = p.o_partial + prow * D;
      if (wn == 0 && (lane & 3) == 0) p.lse_partial[prow] = lse;
#else
      u16* orow =
          static_cast<u16*>(p.o) + b * p.o_batch_stride + hq * p.o_head_stride + r * p.o_row_stride;
      if (wn == 0 && (lane & 3) == 0) p.lse[lrow] = lse;
#endif
#pragma unroll
      for (int c = 0; c < NCH; ++c)
#pragma unroll
        for (int nv = 0; nv < NV; ++nv) {
          const int col = c * KD + wn * VN + nv * 8 + (lane & 3) * 2;
          if (col < D) {
            const float x0 = o[c][mt][nv][h * 2] * inv, x1 = o[c][mt][nv][h * 2 + 1] * inv;
#if FFPA_SPLIT
            *reinterpret_cast<float2*>(orow + col) = make_float2(x0, x1);
#else
            *reinterpret_cast<u32*>(orow + col) = pack2(x0, x1);
#endif
          }
        }
    }
}

// Split-KV merge: one block per (b, hq, row); lse = log sum_s exp(lse_s), o = sum_s w_s o_s.
extern "C" __global__ void __launch_bounds__(128) ffpa_merge_kernel(const FfpaFwdParams p) {
  using namespace ffpa_fwd;
  grid_dependency_wait();            // launched early on sm_90: the partials are the split kernel's
  const long long row = blockIdx.x;  // (b * Hq + hq) * Nq + r
  const long long rows = (long long)p.B * p.Hq * p.Nq;
  const int r = (int)(row % p.Nq);
  const int hq = (int)(row / p.Nq % p.Hq);
  const int b = (int)(row / p.Nq / p.Hq);
  const LseMerge m(p.lse_partial + row, rows, p.num_splits);
  if (threadIdx.x == 0) p.lse[row] = m.lse();
  u16* orow =
      static_cast<u16*>(p.o) + b * p.o_batch_stride + hq * p.o_head_stride + r * p.o_row_stride;
  for (int col = threadIdx.x * 4; col < D; col += 128 * 4) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    if (!m.none())
      for (int s = 0; s < p.num_splits; ++s) {
        const float w = m.weight(p.lse_partial[s * rows + row]);
        const float4 x = *reinterpret_cast<const float4*>(p.o_partial + (s * rows + row) * D + col);
        acc[0] += w * x.x, acc[1] += w * x.y, acc[2] += w * x.z, acc[3] += w * x.w;
      }
    uint2 out;
    out.x = pack2(acc[0], acc[1]);
    out.y = pack2(acc[2], acc[3]);
    *reinterpret_cast<uint2*>(orow + col) = out;
  }
}
