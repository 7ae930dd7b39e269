// Split-D flash-attention forward for Hopper (sm_90a): warpgroup MMA (wgmma), compiled at run time
// by NVRTC. Device code only: no standard headers. The configuration comes in as macros
// (src/variants/ffpa_fwd_sm90.cpp sets them):
//   FFPA_D        head dim (multiple of 8, at most 512)
//   FFPA_BC       keys per tile (64 or 128)
//   FFPA_STAGES   slots of the K/V ring (>= 3; STAGES - 2 are loaded ahead)
//   FFPA_PANELS   64-column panels of each half per slot (divides DP / 128)
//   FFPA_PSMEM    0: P stays in registers (PV is wgmma RS); 1: P goes through shared memory
//                 (PV is wgmma SS, A = P like Q): 16 registers fewer, room for a bias at D = 512
//   FFPA_BF16, FFPA_CAUSAL, FFPA_BIAS, FFPA_DROPOUT as in ffpa_fwd.cuh (no split-KV here)
//   FFPA_BIAS_ROWS 1: the bias is one row of keys for the whole block ([.., 1, Nkv] with no head
//                 or query stride); 64: a row per query row
//
// Layout of the work: a block is 64 rows of the packed (group * Nq) query rows of one kv head and
// two warpgroups. D is padded to DP (a multiple of 128) and split in halves: warpgroup w owns the
// DP/2 columns [w * DH, (w + 1) * DH) of Q, K, V and O.
//  - QK: warpgroup w computes the partial S_w = Q[:, half w] K[:, half w]^T with wgmma m64n64k16
//    (A = Q and B = K both from shared memory, K-major, 128-byte swizzle). The partials are
//    exchanged through shared memory and both warpgroups form S = S_w + S_other, the same bits in
//    both (fp32 addition commutes), so both compute the same softmax and the same P.
//  - bias and dropout are staged per key tile in shared memory by the whole block while the
//    tile's first QK wgmmas run (bias times log2 e; one keep bit per element, each Philox block
//    drawn once), so the softmax holds neither bias loads nor Philox state beside O.
//  - softmax in exp2 form in registers (the accumulator layout: rows of a quad), P converted in
//    registers to the A fragments of the PV wgmma (the m64nNk16 accumulator and the 16-bit
//    A-register layouts coincide on each 16-column slice).
//  - PV: O[:, half w] += P V[:, half w], wgmma m64n64k16 per 64-column panel (A = P from
//    registers, B = V from shared memory, MN-major, 128-byte swizzle).
// K and V stream through a ring of STAGES slots; a slot holds PPS 64-column panels of each half
// ([BC keys x 64] each), so a key tile is DP/128/PPS K slots then as many V slots. All 256 threads
// load with cp.async; one block barrier per slot.
//
// Shared panels use tile_off (ffpa_common.cuh): 128-byte rows, 16-byte granule XOR (row & 7). With
// every panel 1024-byte aligned this is the wgmma 128-byte swizzle (address bits 4..6 XOR bits
// 7..9). tools/ffpa_fwd_sm90_sim.py checks the descriptors and fragment maps below against it.
#pragma once

#include "ffpa_fwd_sm90_layout.h"
#include "wgmma.cuh"

namespace ffpa_fwd90 {

using namespace ffpa_dev;

constexpr int D = FFPA_D;
constexpr int BR = 64;
constexpr int BC = FFPA_BC;
constexpr int STAGES = FFPA_STAGES;
constexpr int NT = 256;
constexpr int DP = (D + 127) / 128 * 128;  // zero-filled past D
constexpr int DH = DP / 2;                 // columns of a warpgroup
constexpr int NP = DH / 64;                // 64-column panels of a warpgroup
constexpr int PPS = FFPA_PANELS;           // of them per slot
constexpr int NPS = NP / PPS;              // slots per half tile (K or V)
constexpr int NB = BC / 64;                // n64 pieces of S
constexpr int KS = BC / 16;                // k16 steps of PV
constexpr int LA = STAGES - 2;             // slots loaded ahead
constexpr int Q_PANEL = BR * 128;
constexpr int PANEL = BC * 128;
constexpr int SLOT_BYTES = 2 * PPS * PANEL;  // panel (h, pp) at (h * PPS + pp) * PANEL
constexpr bool PSMEM = FFPA_PSMEM;
constexpr int BIAS_ROWS = FFPA_BIAS ? FFPA_BIAS_ROWS : 0;
constexpr int B_STRIDE = BC + 4;  // floats a staged bias row: rows 4 banks apart
constexpr int KPT = BC / 4;       // keys a thread stages: 4 threads a row
constexpr ffpa_layout::FwdSm90 LAYOUT =
    ffpa_layout::fwd_sm90_layout(DP, BC, STAGES, PPS, PSMEM, BIAS_ROWS, FFPA_DROPOUT);
static_assert(BR == ffpa_layout::FwdSm90::kRows, "the layout's tile");
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

static_assert(D % 8 == 0 && D <= 512, "D: a multiple of 8, at most 512 (O lives in registers)");
static_assert(BC == 64 || BC == 128, "BC is 64 or 128");
static_assert(STAGES >= 3, "the ring needs a slot in use, one draining and one loading");
static_assert(NP % PPS == 0, "a slot holds a whole share of the half's panels");
static_assert((2 * PPS * BC * 8) % NT == 0, "whole 16-byte granules per thread");
static_assert(BIAS_ROWS == 0 || BIAS_ROWS == 1 || BIAS_ROWS == BR, "bias rows: 1 or BR");
static_assert(BR * 4 == NT, "staging: 4 threads a row");

// Before a slot is used: this thread's copies of it landed, they are made visible to the async
// proxy (wgmma reads shared memory through it), the wgmma group two slots back (the slot the
// next load overwrites) is complete, and every thread got there.
__device__ __forceinline__ void slot_sync() {
  cp_async_wait<LA - 1>();
  fence_proxy_async();
  wgmma_wait<1>();
  __syncthreads();
}

}  // namespace ffpa_fwd90

extern "C" __global__ void __launch_bounds__(ffpa_fwd90::NT, 1)
    ffpa_fwd_sm90_kernel(const FfpaFwdParams p) {
  using namespace ffpa_fwd90;
  const SmemBase sb = smem_base_1024();
  const u32 sQ = sb.addr;
  unsigned char* smem = sb.ptr;
  const u32 sSlot = sQ + LAYOUT.slots;
  float4* xbuf = reinterpret_cast<float4*>(smem + LAYOUT.x);
  const u32 sP = sQ + LAYOUT.p;  // 1024-aligned (the S partials' size is a multiple)
#if FFPA_BIAS
  float* sbias = reinterpret_cast<float*>(smem + LAYOUT.bias);
#endif
#if FFPA_DROPOUT
  u32* skeep = reinterpret_cast<u32*>(smem + LAYOUT.keep);  // BC / 32 words a row
#endif
  int* srow = reinterpret_cast<int*>(smem + LAYOUT.rows);

  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = tid >> 7, t128 = tid & 127, wq = t128 >> 5;  // warpgroup, warp in it
  const int rows_total = p.group * p.Nq;
  const int m0 = (gridDim.x - 1 - blockIdx.x) * BR;  // heaviest causal blocks first
  const int kvh = blockIdx.y;
  const int b = blockIdx.z;

  const auto [r_lo, diag, ntile] = block_span<BR, BC>(p, m0, rows_total);
  // Per-row query index and q head (the first slot barrier publishes them).
  if (tid < BR) {
    const int i = min(m0 + tid, rows_total - 1);
    srow[tid] = i % p.Nq;
    srow[BR + tid] = kvh * p.group + i / p.Nq;
  }

  const u16* kbase = static_cast<const u16*>(p.k) + b * p.k_batch_stride + kvh * p.k_head_stride;
  const u16* vbase = static_cast<const u16*>(p.v) + b * p.v_batch_stride + kvh * p.v_head_stride;

  // Q: BR x DP resident, 64-column panels of BR rows.
  {
    const u16* qb = static_cast<const u16*>(p.q) + b * p.q_batch_stride;
#pragma unroll 4
    for (int idx = tid; idx < BR * DP / 8; idx += NT)
      load_q_granule<BR, DP, D>(p, qb, sQ, idx, m0, rows_total, kvh);
  }

  // Slot gi of the stream: tile gi / (2 NPS); K slots cs = 0..NPS-1, then V slots. Panel
  // (h, pp) of slot cs holds columns h * DH + (cs * PPS + pp) * 64 .. + 63.
  const int total = ntile * 2 * NPS;
  auto load_slot = [&](int gi) {
    if (gi < total) {
      const int j = gi / (2 * NPS), rem = gi % (2 * NPS);
      const bool isv = rem >= NPS;
      const int cs = isv ? rem - NPS : rem;
      const u16* base = isv ? vbase : kbase;
      const long long rs = isv ? p.v_row_stride : p.k_row_stride;
      const u32 dst = sSlot + (gi % STAGES) * SLOT_BYTES;
#pragma unroll
      for (int it = 0; it < 2 * PPS * BC * 8 / NT; ++it) {
        const int idx = tid + it * NT;
        const int h = idx / (PPS * BC * 8), pp = idx / (BC * 8) % PPS, g = idx % (BC * 8);
        const int row = g >> 3, col = (g & 7) * 8;
        const int key = j * BC + row, d = h * DH + (cs * PPS + pp) * 64 + col;
        const bool ok = key < p.Nkv && d < D;
        cp_async16(dst + (h * PPS + pp) * PANEL + tile_off(row, col, BC),
                   ok ? base + key * rs + d : base, ok);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < LA; ++s) load_slot(s);  // the first group carries Q

#if FFPA_BIAS
  // A key bias (its head and row strides are 0) is staged by threads tid < BC, key j * BC + tid;
  // without causal masking it is loaded a whole tile ahead so that no thread waits on it (with
  // causal masking that register makes ptxas spill at D = 512).
  constexpr bool AHEAD = BIAS_ROWS == 1 && !FFPA_CAUSAL;
  auto key_bias = [&](int j) {
    const int key = j * BC + tid;
    return key < p.Nkv ? bias_at(p, b * p.bias_batch_stride + key) : 0.f;
  };
  float bias_next = AHEAD && tid < BC ? key_bias(0) : 0.f;
#endif

  // Bias and keep bits of key tile j into shared memory: thread tid stages keys
  // KPT * (tid % 4) .. + KPT - 1 of row tid / 4 (a key bias: key tid). Called after the tile's
  // first slot barrier (the previous tile's readers are past it) and read after the S exchange
  // barrier.
  auto stage = [&](int j) {
#if FFPA_BIAS || FFPA_DROPOUT
    const int row = tid >> 2, k0 = (tid & 3) * KPT, key0 = j * BC + k0;
    const int r = srow[row], hq = srow[BR + row];
#if FFPA_BIAS
    if (BIAS_ROWS == 1) {
      if (tid < BC) {
        sbias[tid] = (AHEAD ? bias_next : key_bias(j)) * LOG2E;
        if (AHEAD) bias_next = key_bias(j + 1);
      }
    } else {
      const long long boff =
          b * p.bias_batch_stride + hq * p.bias_head_stride + r * p.bias_row_stride + key0;
      float* dst = sbias + row * B_STRIDE + k0;
#pragma unroll
      for (int i = 0; i < KPT; ++i) dst[i] = key0 + i < p.Nkv ? bias_at(p, boff + i) * LOG2E : 0.f;
    }
#endif
#if FFPA_DROPOUT
    // Stream positions g .. g + KPT - 1 span KPT / 4 Philox blocks, one more when g % 4 != 0.
    const unsigned long long g =
        p.dropout_offset + (((unsigned long long)b * p.Hq + hq) * p.Nq + r) * p.Nkv + key0;
    const int o = (int)(g & 3);
    u32 bits = 0;
#pragma unroll
    for (int blk = 0; blk <= KPT / 4; ++blk) {
      if (blk == KPT / 4 && o == 0) break;
      const FfpaPhilox4 x = ffpa_philox_block(p.dropout_seed, (g >> 2) + blk);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int pos = blk * 4 + i - o;
        if (pos >= 0 && pos < KPT && x.x[i] >= p.dropout_keep_min) bits |= 1u << pos;
      }
    }
    if (KPT == 16)
      reinterpret_cast<unsigned short*>(skeep)[tid] = (unsigned short)bits;
    else
      skeep[tid] = bits;
#endif
#endif
  };

  float o[NP][8][4];
#pragma unroll
  for (int c = 0; c < NP; ++c)
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[c][n][e] = 0.f;
  float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.f, 0.f};
  const u32 qhalf = sQ + wg * NP * Q_PANEL;

  int gi = 0;
  for (int j = 0; j < ntile; ++j) {
    // S_w = Q[:, half w] K[:, half w]^T over the NP panels of the half.
    float s[NB][8][4];
#pragma unroll
    for (int cs = 0; cs < NPS; ++cs, ++gi) {
      slot_sync();
      load_slot(gi + LA);
      const u32 sk = sSlot + (gi % STAGES) * SLOT_BYTES + wg * PPS * PANEL;
      const u32 sq = opaque(qhalf + cs * PPS * Q_PANEL);
      wgmma_fence();
#pragma unroll
      for (int pp = 0; pp < PPS; ++pp)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int nb = 0; nb < NB; ++nb) {
            const u64 da = desc_k(sq + pp * Q_PANEL + kk * 32);
            const u64 db = desc_k(sk + pp * PANEL + nb * 64 * 128 + kk * 32);
            if (cs == 0 && pp == 0 && kk == 0)
              wgmma_first<0, 0>(s[nb], da, db);
            else
              wgmma<0, 0>(s[nb], da, db);
          }
      wgmma_commit();
      if (cs == 0) stage(j);
    }
    wgmma_wait<0>();
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) fence_acc(s[nb]);

    // S = S_0 + S_1 in both warpgroups: a thread swaps its registers with the same thread of the
    // other warpgroup (same lane, same warp: the same (row, column) positions).
    {
      float4* mine = xbuf + wg * (BC / 8) * 128 + t128;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int n = 0; n < 8; ++n)
          mine[(nb * 8 + n) * 128] =
              make_float4(s[nb][n][0], s[nb][n][1], s[nb][n][2], s[nb][n][3]);
      __syncthreads();
      const float4* other = xbuf + (1 - wg) * (BC / 8) * 128 + t128;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          const float4 x = other[(nb * 8 + n) * 128];
          s[nb][n][0] += x.x, s[nb][n][1] += x.y, s[nb][n][2] += x.z, s[nb][n][3] += x.w;
        }
    }

    // Online softmax in exp2 form: s2 = s * scale * log2(e) (+ bias * log2(e)).
    const bool edge = (j + 1) * BC > p.Nkv || (FFPA_CAUSAL && (j + 1) * BC - 1 > r_lo + diag);
    const int key0 = j * BC + (lane & 3) * 2;  // key of this thread's first S column
    u32 pa[KS][4];
    float al[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = wq * 16 + (lane >> 2) + h * 8;
      const int r = srow[row];
      const int causal_lim = r + diag - key0;  // columns past it are masked
      const int kv_lim = p.Nkv - key0;
#if FFPA_BIAS
      const float* brow = sbias + (BIAS_ROWS == 1 ? 0 : row) * B_STRIDE + (lane & 3) * 2;
#endif
      float v = NEG_INF;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int kof = nb * 64 + n * 8 + e;
            float x = s[nb][n][h * 2 + e] * p.scale_log2;
#if FFPA_BIAS
            x += brow[kof];
#endif
            if (edge && (kof >= kv_lim || (FFPA_CAUSAL && kof > causal_lim))) x = NEG_INF;
            s[nb][n][h * 2 + e] = x;
            v = fmaxf(v, x);
          }
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
      const float m_new = fmaxf(m_run[h], v);
      const float base = m_new == NEG_INF ? 0.f : m_new;
      const float alpha = exp2f(m_run[h] - base);
      m_run[h] = m_new;
      float sum = 0.f;
#if FFPA_DROPOUT
      // This thread's keep bits of the row, shifted so column 8 n + e of word w is bit 8 n + e.
      u32 keep[BC / 32];
#pragma unroll
      for (int w = 0; w < BC / 32; ++w) keep[w] = skeep[row * (BC / 32) + w] >> ((lane & 3) * 2);
#endif
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          float pr[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            pr[e] = exp2f(s[nb][n][h * 2 + e] - base);
            sum += pr[e];
          }
#if FFPA_DROPOUT
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (!((keep[nb * 2 + n / 4] >> ((n % 4) * 8 + e)) & 1)) pr[e] = 0.f;
#endif
          if (PSMEM) {
            // Both warpgroups hold the same P: warpgroup w stores the rows of h = w.
            if (h == wg)
              asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(
                               sP + tile_off(row, nb * 64 + n * 8 + (lane & 3) * 2, BR)),
                           "r"(pack2(pr[0], pr[1])));
          } else {
            // Columns 16 ks .. 16 ks + 15 are k16 step ks of PV: n8 group 2 ks gives A
            // registers 0 (row) and 1 (row + 8), group 2 ks + 1 registers 2 and 3.
            pa[nb * 4 + n / 2][(n & 1) * 2 + h] = pack2(pr[0], pr[1]);
          }
        }
      l_run[h] = l_run[h] * alpha + sum;
      al[h] = alpha;
    }

    // O += P V[:, half w], one n64 accumulator per panel; the wait above finished the previous
    // tile's PV, so O can be rescaled here.
#pragma unroll
    for (int c = 0; c < NP; ++c) {
      fence_acc(o[c]);
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[c][n][e] *= al[e >> 1];
      fence_acc(o[c]);
    }
    if (!PSMEM) fence_regs(pa);
#pragma unroll
    for (int cs = 0; cs < NPS; ++cs, ++gi) {
      slot_sync();
      load_slot(gi + LA);
      const u32 sv = sSlot + (gi % STAGES) * SLOT_BYTES + wg * PPS * PANEL;
      wgmma_fence();
#pragma unroll
      for (int pp = 0; pp < PPS; ++pp)
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          const u64 db = desc_mn(sv + pp * PANEL + ks * 16 * 128);
          if (PSMEM)  // the slot barrier above published P (and its proxy fence covered it)
            wgmma<0, 1>(o[cs * PPS + pp], desc_k(sP + (ks >> 2) * Q_PANEL + (ks & 3) * 32), db);
          else
            wgmma_rs(o[cs * PPS + pp], pa[ks], db);
        }
      wgmma_commit();
    }
    // Retire PV inside the iteration: a group left in flight across the back edge (or into the
    // epilogue) makes ptxas serialize every wgmma of the kernel (C7514/C7515).
    wgmma_wait<0>();
  }
#pragma unroll
  for (int c = 0; c < NP; ++c) fence_acc(o[c]);
  cp_async_wait<0>();

  // Both warpgroups hold the full row statistics; warpgroup 0 writes the LSE.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = wq * 16 + (lane >> 2) + h * 8;
    const int i = m0 + row;
    if (i >= rows_total) continue;
    const float inv = l > 0.f ? p.dropout_scale / l : 0.f;
    const float lse = l > 0.f ? (m_run[h] + __log2f(l)) * LN2 : NEG_INF;
    const int hq = kvh * p.group + i / p.Nq, r = i % p.Nq;
    const long long lrow = ((long long)b * p.Hq + hq) * p.Nq + r;
    u16* orow =
        static_cast<u16*>(p.o) + b * p.o_batch_stride + hq * p.o_head_stride + r * p.o_row_stride;
    if (wg == 0 && (lane & 3) == 0) p.lse[lrow] = lse;
#pragma unroll
    for (int c = 0; c < NP; ++c)
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const int col = wg * DH + c * 64 + n * 8 + (lane & 3) * 2;
        if (col < D)
          *reinterpret_cast<u32*>(orow + col) =
              pack2(o[c][n][h * 2] * inv, o[c][n][h * 2 + 1] * inv);
      }
  }
}
