// Flash-attention forward for few query rows (decode: a kv head's group x Nq rows, at most 16) on
// sm_90: TMA loads through an mbarrier ring, mma.sync m16n8k16; compiled at run time by NVRTC.
// Device code only: no standard headers.
//
// Why: a decode row reads K and V once and does ~1 FLOP a byte, so its speed is the rate at which
// K and V stream from HBM. ffpa-fwd-sm80's split-KV blocks stream them with cp.async and a block
// barrier per chunk (78 % of the H100's HBM rate at D = 320, 89 % at D = 512 under ncu). Here a
// producer warp keeps `SLOTS` tiles in flight through TMA while four consumer warps compute, and
// no barrier stands between a tile's arrival and its use but its own mbarrier.
//
// Work (ffpa_fwd_decode_layout.h): the keys of every (batch, kv head) lie end to end and the grid
// (the blocks resident at once, one wave) takes equal shares of them, so every SM streams the
// same number of keys whatever the head count. A share is one or more segments (a head's keys
// within it); each segment ends with a partial O and LSE of its head's rows, and
// ffpa_fwd_decode_merge_kernel (launched after it, chained by programmatic dependent launch)
// combines a head's segments.
//
// The configuration comes in as macros (src/variants/ffpa_fwd_decode.cpp sets them):
//   FFPA_D       head dim (a multiple of 8, at most 1024)
//   FFPA_KB      keys of a tile: 32 or 64
//   FFPA_SLOTS   ring slots (a K or a V tile each), at least 2
//   FFPA_BF16, FFPA_CAUSAL, FFPA_BIAS, FFPA_DROPOUT as in ffpa_fwd.cuh
//
// A block: warp 4 (lane 0) is the producer: for each tile of its segments in turn, K then V into
// the next slot (all of D: dp / 64 boxes of KB keys x 64 columns, 128-byte swizzle), once the
// consumers have released it. Consumer warp w:
//  - S = Q K^T of the tile's keys w KB / 4 .. (w + 1) KB / 4 over all of D (Q from shared memory,
//    loaded at each segment's start: the rows differ by head); then it releases the K slot;
//  - the row maxima of the four key slices meet in shared memory (a named barrier), P = exp2(S -
//    m) (masked: past the segment, causal; bias, dropout as ffpa_fwd.cuh) goes to shared memory
//    as 16-bit and a second named barrier publishes it;
//  - O[:, w DP / 4 .. (w + 1) DP / 4) += P V over all the tile's keys; then it releases the V slot.
//  Rows past the group's (Q rows of zero) are computed and never stored.
#pragma once

#include "ffpa_decode_ring.cuh"

namespace ffpa_fwd_dec {

using namespace ffpa_dev;
using namespace ffpa_decode;

constexpr int D = FFPA_D;
constexpr int DP = (D + 63) / 64 * 64;
constexpr int KB = FFPA_KB;
constexpr int SLOTS = FFPA_SLOTS;
constexpr int R = ffpa_layout::FwdDecode::kRows;
constexpr int NW = ffpa_layout::FwdDecode::kWarps;
constexpr int NT = ffpa_layout::FwdDecode::kThreads;
constexpr int NC = NW * 32;  // consumer threads
constexpr int SN = KB / NW;  // S columns (keys) of a warp
constexpr int NS = SN / 8;
constexpr int VN = DP / NW;  // O columns of a warp
constexpr int NV = VN / 8;
constexpr int KS = KB / 16;  // k16 steps of PV
FFPA_LAYOUT_FN ffpa_layout::FwdDecode layout() {
  return ffpa_layout::fwd_decode_layout(DP, KB, SLOTS);
}
constexpr int SLOT = layout().slot;
constexpr int OFF_Q = layout().q, OFF_P = layout().p, OFF_RED = layout().red;
constexpr int OFF_BARS = layout().bars;
constexpr int BAR_TILE = 1;  // named barrier of the consumer warps (0 is __syncthreads)
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

static_assert(D % 8 == 0 && D <= 1024, "D: a multiple of 8, at most 1024");
static_assert(KB == 32 || KB == 64, "32 or 64 keys a tile");
static_assert(SLOTS >= 2, "two ring slots at least");
static_assert(VN % 16 == 0, "a warp's O columns are whole 16-column pairs");

}  // namespace ffpa_fwd_dec

extern "C" __global__ void __launch_bounds__(ffpa_fwd_dec::NT, 1)
    ffpa_fwd_decode_kernel(const __grid_constant__ FfpaFwdParams p,
                           const __grid_constant__ FfpaTmaDesc tk,
                           const __grid_constant__ FfpaTmaDesc tv) {
  using namespace ffpa_fwd_dec;
  const SmemBase sb = smem_base_1024();
  const u32 base = sb.addr;
  unsigned char* smem = sb.ptr;
  const u32 sQ = base + OFF_Q, sP = base + OFF_P;
  float* red = reinterpret_cast<float*>(smem + OFF_RED);
  const RingBars<SLOTS> ring{base + OFF_BARS};

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rows = p.group * p.Nq;  // the host refuses more than R
  const long long vis = visible_keys(p);
  const long long total = (long long)p.B * p.Hkv * vis;
  const long long x0 = ffpa_layout::decode_start(total, gridDim.x, blockIdx.x);
  const long long x1 = ffpa_layout::decode_start(total, gridDim.x, blockIdx.x + 1);

  ring.init(NW);  // released by lane 0 of each consumer warp

  if (warp == NW) {
    // The producer (ffpa_decode_ring.cuh).
    if (lane == 0) produce<KB, DP, SLOTS>(p, tk, tv, base, ring, x0, x1, vis);
    return;
  }

  // ldmatrix addresses (as ffpa_fwd.cuh's, for one 16-row tile): every tile base is 128-byte
  // aligned and a fragment row's low 3 bits are lane & 7, so the swizzled granule of k-step kk is
  // the lane's granule XOR (kk & 3) * 2.
  const u32 aQ = sQ + (lane & 15) * 128 + (((lane >> 4) ^ (lane & 7)) << 4);
  const u32 aK = warp * SN * 128 + ((lane & 7) + (lane >> 4) * 8) * 128 +
                 ((((lane >> 3) & 1) ^ (lane & 7)) << 4);
  u32 aV[NV / 2];
#pragma unroll
  for (int n = 0; n < NV / 2; ++n) {
    const int vrow = (lane & 7) + ((lane >> 3) & 1) * 8;
    const int col = warp * VN + n * 16;  // 16-column pair of n8 tiles
    aV[n] =
        (col >> 6) * KB * 128 + vrow * 128 + (((((col >> 3) & 7) + (lane >> 4)) ^ (lane & 7)) << 4);
  }
  const int diag = FFPA_CAUSAL == 1 ? p.Nkv - p.Nq : 0;  // row r sees keys k <= r + diag
  const int head_slots = ffpa_layout::decode_head_slots(total, gridDim.x, vis);

  int n = 0;  // ring item of the next tile's K
  for (long long x = x0; x < x1;) {
    const Segment g = segment_at(p, x, x1, vis);
    x = g.hh * vis + g.hi;
    // Q of the segment's head (rows past the group and columns past D zero). The barrier before
    // it: every warp is past the previous segment's reads of sQ and red.
    named_sync(BAR_TILE, NC);
    {
      const u16* qb = static_cast<const u16*>(p.q) + g.b * p.q_batch_stride;
      for (int idx = tid; idx < R * DP / 8; idx += NC)
        load_q_granule<R, DP, D>(p, qb, sQ, idx, 0, rows, g.kvh);
      cp_async_commit();
      cp_async_wait<0>();
    }
    named_sync(BAR_TILE, NC);

    float o[NV][4];
#pragma unroll
    for (int nv = 0; nv < NV; ++nv)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[nv][e] = 0.f;
    float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.f, 0.f};
    // Rows of this thread's S and O fragments (past the group: the last row's head and query
    // index, so that bias reads stay inside the tensor).
    int rq[2], hq[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = min((lane >> 2) + h * 8, rows - 1);
      rq[h] = i % p.Nq;
      hq[h] = g.kvh * p.group + i / p.Nq;
    }

    for (int k = g.lo; k < g.hi; k += KB, n += 2) {
      // S = Q K^T over all of D, the warp's SN keys.
      const int sk_slot = n % SLOTS;
      mbar_wait(ring.full(sk_slot), (n / SLOTS) & 1);
      const u32 sk = base + sk_slot * SLOT;
      float s[NS][4];
#pragma unroll
      for (int ns = 0; ns < NS; ++ns)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[ns][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        u32 a[4];
        ldsm_x4(a, (aQ ^ ((kk & 3) << 5)) + (kk >> 2) * R * 128);
        if (NS == 1) {
          u32 bf[2];
          ldsm_x2(bf, ((sk + aK) ^ ((kk & 3) << 5)) + (kk >> 2) * KB * 128);
          mma(s[0], a, bf[0], bf[1]);
        } else {
#pragma unroll
          for (int ns = 0; ns + 1 < NS; ns += 2) {
            u32 bf[4];
            ldsm_x4(bf, ((sk + aK) ^ ((kk & 3) << 5)) + (kk >> 2) * KB * 128 + ns * 8 * 128);
            mma(s[ns], a, bf[0], bf[1]);
            mma(s[ns + 1], a, bf[2], bf[3]);
          }
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(ring.empty(sk_slot));

      // Online softmax in exp2 form: s2 = s scale log2(e) (+ bias log2(e)); keys past the
      // segment's end (the next block's, or past Nkv) and causal ones masked.
      const int key0 = k + warp * SN + (lane & 3) * 2;  // key of this thread's first S column
      const int lim = g.hi - key0;
      float mx[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = (lane >> 2) + h * 8;
        const int causal_lim = rq[h] + diag - key0;
#if FFPA_BIAS
        const long long boff = g.b * p.bias_batch_stride + hq[h] * p.bias_head_stride +
                               rq[h] * p.bias_row_stride + key0;
#endif
        float v = NEG_INF;
#pragma unroll
        for (int ns = 0; ns < NS; ++ns)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int kof = ns * 8 + e;
            float xs = s[ns][h * 2 + e] * p.scale_log2;
#if FFPA_BIAS
            if (kof < lim) xs += bias_at(p, boff + kof) * LOG2E;
#endif
            if (kof >= lim || (FFPA_CAUSAL && kof > causal_lim)) xs = NEG_INF;
            s[ns][h * 2 + e] = xs;
            v = fmaxf(v, xs);
          }
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
        if ((lane & 3) == 0) red[warp * R + row] = v;
        mx[h] = v;
      }
      named_sync(BAR_TILE, NC);
#if FFPA_DROPOUT
      // The thread draws the keep bits of its lane pair's rows (dropout_keep_bits): lane & 1
      // selects row (lane >> 2) + 8 (lane & 1), two keys to the left.
      const int dh = lane & 1;  // selected, not indexed: a local array indexed at run time
                                // would live on the stack
      const u32 keep = dropout_keep_bits<NS>(
          p.dropout_seed,
          p.dropout_offset +
              (((unsigned long long)g.b * p.Hq + (dh ? hq[1] : hq[0])) * p.Nq +
               (dh ? rq[1] : rq[0])) *
                  (unsigned long long)p.Nkv +
              key0 - dh * 2,
          p.dropout_keep_min, lane);
#endif
      float al[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = (lane >> 2) + h * 8;
        float v = mx[h];
#pragma unroll
        for (int w = 0; w < NW; ++w) v = fmaxf(v, red[w * R + row]);
        const float m_new = fmaxf(m_run[h], v);
        const float mb = m_new == NEG_INF ? 0.f : m_new;
        const float alpha = exp2f(m_run[h] - mb);
        m_run[h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int ns = 0; ns < NS; ++ns) {
          float pr[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            pr[e] = exp2f(s[ns][h * 2 + e] - mb);
            sum += pr[e];
#if FFPA_DROPOUT
            if (!((keep >> ((ns * 2 + h) * 2 + e)) & 1)) pr[e] = 0.f;
#endif
          }
          const int col = warp * SN + ns * 8 + (lane & 3) * 2;
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sP + tile_off(row, col, R)),
                       "r"(pack2(pr[0], pr[1])));
        }
        l_run[h] = l_run[h] * alpha + sum;
        al[h] = alpha;
      }
      named_sync(BAR_TILE, NC);  // P of every key slice written

      // O += P V: the warp's VN columns, all KB keys.
      u32 pa[KS][4];
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
        ldsm_x4(pa[ks], sP + tile_off(lane & 15, ks * 16 + (lane >> 4) * 8, R));
#pragma unroll
      for (int nv = 0; nv < NV; ++nv)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[nv][e] *= al[e >> 1];
      const int sv_slot = (n + 1) % SLOTS;
      mbar_wait(ring.full(sv_slot), ((n + 1) / SLOTS) & 1);
      const u32 sv = base + sv_slot * SLOT;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int nv = 0; nv < NV; nv += 2) {
          u32 bf[4];
          ldsm_x4_t(bf, sv + aV[nv / 2] + ks * 16 * 128);
          mma(o[nv], pa[ks], bf[0], bf[1]);
          mma(o[nv + 1], pa[ks], bf[2], bf[3]);
        }
      __syncwarp();
      if (lane == 0) mbar_arrive(ring.empty(sv_slot));
    }

    // The segment's partial rows: row sums over the quad, then over the four key slices (every
    // warp is past its last reads of red: the tile's second barrier).
    if (x >= x1) launch_dependents();  // the merge kernel may start its blocks (it waits)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = l_run[h];
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      if ((lane & 3) == 0) red[warp * R + (lane >> 2) + h * 8] = v;
    }
    named_sync(BAR_TILE, NC);
    const long long slot0 =
        g.hh * head_slots + blockIdx.x -
        ffpa_layout::decode_block_of(total, gridDim.x, g.hh * vis);  // this segment's slot
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = (lane >> 2) + h * 8;
      if (row >= rows) continue;
      float l = 0.f;
#pragma unroll
      for (int w = 0; w < NW; ++w) l += red[w * R + row];
      const float inv = l > 0.f ? p.dropout_scale / l : 0.f;
      const long long prow = slot0 * R + row;
      if (warp == 0 && (lane & 3) == 0)
        p.lse_partial[prow] = l > 0.f ? (m_run[h] + __log2f(l)) * LN2 : NEG_INF;
      float* orow = p.o_partial + prow * D;
#pragma unroll
      for (int nv = 0; nv < NV; ++nv) {
        const int col = warp * VN + nv * 8 + (lane & 3) * 2;
        if (col < D)
          *reinterpret_cast<float2*>(orow + col) =
              make_float2(o[nv][h * 2] * inv, o[nv][h * 2 + 1] * inv);
      }
    }
  }
}

// A head's segments merged (launched after the forward, chained by programmatic dependent launch):
// a block per (head, row), x = hh x rows + i; lse = log sum_s exp(lse_s), O = sum_s w_s O_s.
extern "C" __global__ void __launch_bounds__(128)
    ffpa_fwd_decode_merge_kernel(const __grid_constant__ FfpaFwdParams p) {
  using namespace ffpa_fwd_dec;
  grid_dependency_wait();
  const int rows = p.group * p.Nq;
  const long long hh = blockIdx.x / rows;
  const int i = (int)(blockIdx.x % rows);
  const int blocks = p.num_splits;  // the forward's grid
  const long long vis = visible_keys(p);
  const long long total = (long long)p.B * p.Hkv * vis;
  const int lo = ffpa_layout::decode_block_of(total, blocks, hh * vis);
  const int hi = ffpa_layout::decode_block_of(total, blocks, (hh + 1) * vis - 1);
  const long long prow0 = hh * ffpa_layout::decode_head_slots(total, blocks, vis) * R + i;
  const LseMerge m(p.lse_partial + prow0, R, hi - lo + 1);
  const int kvh = (int)(hh % p.Hkv), b = (int)(hh / p.Hkv);
  const int hq = kvh * p.group + i / p.Nq, r = i % p.Nq;
  if (threadIdx.x == 0) p.lse[((long long)b * p.Hq + hq) * p.Nq + r] = m.lse();
  u16* orow =
      static_cast<u16*>(p.o) + b * p.o_batch_stride + hq * p.o_head_stride + r * p.o_row_stride;
  for (int col = threadIdx.x * 2; col < D; col += 256) {
    float a0 = 0.f, a1 = 0.f;
    if (!m.none())
      for (int s = 0; s <= hi - lo; ++s) {
        const long long prow = prow0 + s * R;
        const float wt = m.weight(p.lse_partial[prow]);
        const float2 v = *reinterpret_cast<const float2*>(p.o_partial + prow * D + col);
        a0 += wt * v.x, a1 += wt * v.y;
      }
    *reinterpret_cast<u32*>(orow + col) = pack2(a0, a1);
  }
}
