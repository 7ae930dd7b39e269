// Flash-attention backward for few query rows (decode: the group's rows, group x Nq, at most 16),
// on CUDA cores, sm_80 and later; compiled at run time by NVRTC. Device code only: no standard
// headers. Launched as ffpa_bwd.cuh is: ffpa_bwd_pre_kernel and ffpa_bwd_convert_kernel
// (ffpa_bwd_aux.cuh) around ffpa_bwd_decode_kernel.
//
// Why: with one query row the tensor-core backwards run one query tile per key tile, mostly
// empty (1 of 64 rows), and the work is a stream: read K and V once, write dK and dV once. Here a
// block takes KB keys of one kv head and batch with every query row of the group, which fits in
// shared memory, so dK and dV are complete in the block (no atomics, GQA summed inside) and the
// grid has Nkv / KB x Hkv x B blocks to fill the SMs.
//
// The configuration comes in as macros (src/variants/ffpa_bwd_decode.cpp sets them):
//   FFPA_D   head dim (a multiple of 8, at most 1024)
//   FFPA_KB  keys of a block: 32 or 64
//   FFPA_BF16, FFPA_CAUSAL, FFPA_BIAS, FFPA_DBIAS, FFPA_DROPOUT as in ffpa_bwd.cuh
//
// Per block (128 threads): K, V of its keys and Q, dO of the group's rows into shared memory
// (cp.async, zero past the rows, keys and D); S and dP (thread: one key, rows w, w + 128 / KB,
// ...: a warp reads 32 keys' granules and broadcasts the rows'); P, dS per element into shared
// memory (masks, bias, dropout with the forward's Philox elements, dBias); dV, dK per key and
// 8-column granule (lanes on consecutive granules: coalesced 16-byte stores); dQ per row and
// granule, added to dq_accum with fp32 atomics.
#pragma once

#include "ffpa_bwd_aux.cuh"
#include "ffpa_bwd_decode_layout.h"
#include "ffpa_common.cuh"

namespace ffpa_bwd_dec {

using namespace ffpa_dev;

constexpr int D = FFPA_D;
constexpr int KB = FFPA_KB;
constexpr int R = ffpa_layout::BwdDecode::kRows;
constexpr int NT = ffpa_layout::BwdDecode::kThreads;
constexpr int G = D / 8;         // 16-byte granules of a row
constexpr int RT = R * KB / NT;  // rows of a thread in S and dP
constexpr ffpa_layout::BwdDecode LAYOUT = ffpa_layout::bwd_decode_layout(D, KB);
constexpr int DS = LAYOUT.stride;
constexpr float LOG2E = 1.4426950408889634f;
#define POS_INF __int_as_float(0x7f800000u)

static_assert(D % 8 == 0 && D <= 1024, "D: a multiple of 8, at most 1024");
static_assert(KB == 32 || KB == 64, "32 or 64 keys a block");

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

}  // namespace ffpa_bwd_dec

extern "C" __global__ void __launch_bounds__(ffpa_bwd_dec::NT)
    ffpa_bwd_decode_kernel(const FfpaBwdParams p) {
  using namespace ffpa_bwd_dec;
  const FfpaFwdParams& f = p.fwd;
  extern __shared__ __align__(16) unsigned char smem[];
  const u16* sK = reinterpret_cast<const u16*>(smem + LAYOUT.k);
  const u16* sV = reinterpret_cast<const u16*>(smem + LAYOUT.v);
  const u16* sQ = reinterpret_cast<const u16*>(smem + LAYOUT.q);
  const u16* sO = reinterpret_cast<const u16*>(smem + LAYOUT.o);
  float* sPd = reinterpret_cast<float*>(smem + LAYOUT.pd);  // [R][KB]
  float* sDs = reinterpret_cast<float*>(smem + LAYOUT.ds);
  float* sRow = reinterpret_cast<float*>(smem + LAYOUT.rows);  // lse * log2(e) [R], delta [R]

  const int tid = threadIdx.x;
  const int n0 = blockIdx.x * KB, kvh = blockIdx.y, b = blockIdx.z;
  const int rows = f.group * f.Nq;                       // the host refuses more than R
  const int diag = FFPA_CAUSAL == 1 ? f.Nkv - f.Nq : 0;  // row r sees keys k <= r + diag
  // Packed row i: q head kvh * group + i / Nq, query row i % Nq.
  auto hq_of = [&](int i) { return kvh * f.group + i / f.Nq; };

  {
    const u16* kb = static_cast<const u16*>(f.k) + b * f.k_batch_stride + kvh * f.k_head_stride;
    const u16* vb = static_cast<const u16*>(f.v) + b * f.v_batch_stride + kvh * f.v_head_stride;
    for (int idx = tid; idx < KB * G; idx += NT) {
      const int row = idx / G, g = idx % G, key = n0 + row;
      const bool ok = key < f.Nkv;
      const u32 off = (row * DS + g * 8) * 2;
      cp_async16(smem_u32(smem + LAYOUT.k + off), ok ? kb + key * f.k_row_stride + g * 8 : kb, ok);
      cp_async16(smem_u32(smem + LAYOUT.v + off), ok ? vb + key * f.v_row_stride + g * 8 : vb, ok);
    }
    const u16* qb = static_cast<const u16*>(f.q) + b * f.q_batch_stride;
    const u16* ob = static_cast<const u16*>(p.dout) + b * p.do_batch_stride;
    for (int idx = tid; idx < R * G; idx += NT) {
      const int i = idx / G, g = idx % G;
      const bool ok = i < rows;
      const int hq = hq_of(i), r = i % f.Nq;
      const u32 off = (i * DS + g * 8) * 2;
      const u16* q = qb + hq * f.q_head_stride + r * f.q_row_stride + g * 8;
      const u16* o = ob + hq * p.do_head_stride + r * p.do_row_stride + g * 8;
      cp_async16(smem_u32(smem + LAYOUT.q + off), ok ? q : qb, ok);
      cp_async16(smem_u32(smem + LAYOUT.o + off), ok ? o : ob, ok);
    }
    cp_async_commit();
    if (tid < R) {
      float l = POS_INF, dl = 0.f;
      if (tid < rows) {
        const long long lrow = ((long long)b * f.Hq + hq_of(tid)) * f.Nq + tid % f.Nq;
        const float x = f.lse[lrow];
        if (x != NEG_INF) l = x * LOG2E;  // a row that sees no key has no gradient
        dl = p.delta[lrow];
      }
      sRow[tid] = l;
      sRow[R + tid] = dl;
    }
    cp_async_wait<0>();
    __syncthreads();
  }

  // S and dP of key kk and the thread's rows i0 + j (NT / KB) (warp-uniform: a warp's lanes are
  // 32 keys of the same rows, so the rows' granules are broadcast).
  {
    const int kk = tid % KB, i0 = tid / KB;
    float s[RT], dp[RT];
#pragma unroll
    for (int j = 0; j < RT; ++j) s[j] = dp[j] = 0.f;
    const uint4* kr = reinterpret_cast<const uint4*>(sK + kk * DS);
    const uint4* vr = reinterpret_cast<const uint4*>(sV + kk * DS);
#pragma unroll 2
    for (int g = 0; g < G; ++g) {
      float k8[8], v8[8];
      unpack8(kr[g], k8);
      unpack8(vr[g], v8);
#pragma unroll
      for (int j = 0; j < RT; ++j) {
        const int i = i0 + j * (NT / KB);
        if (i >= rows) break;
        float q8[8], o8[8];
        unpack8(reinterpret_cast<const uint4*>(sQ + i * DS)[g], q8);
        unpack8(reinterpret_cast<const uint4*>(sO + i * DS)[g], o8);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          s[j] = fmaf(q8[e], k8[e], s[j]);
          dp[j] = fmaf(o8[e], v8[e], dp[j]);
        }
      }
    }
    // P, dS of the elements (masked: past Nkv, causal; a row past the group or without
    // gradient has P = 0).
    const int key = n0 + kk;
#pragma unroll
    for (int j = 0; j < RT; ++j) {
      const int i = i0 + j * (NT / KB);  // < R: RT rows NT / KB apart
      float pr = 0.f, pd = 0.f, ds = 0.f;
      if (i < rows && key < f.Nkv) {
        const int hq = hq_of(i), r = i % f.Nq;
        const bool masked = FFPA_CAUSAL && key > r + diag;
        float x = s[j] * f.scale_log2 - sRow[i];
#if FFPA_BIAS
        x += bias_at(f, b * f.bias_batch_stride + hq * f.bias_head_stride +
                            (long long)r * f.bias_row_stride + key) *
             LOG2E;
#endif
        pr = masked ? 0.f : exp2f(x);
        pd = pr;
#if FFPA_DROPOUT
        FfpaDropoutStream st;
        st.init(f.dropout_seed);
        const unsigned long long g =
            f.dropout_offset + (((unsigned long long)b * f.Hq + hq) * f.Nq + r) * f.Nkv + key;
        pd = st.uniform(g) > f.dropout_p ? pr * f.dropout_scale : 0.f;
        ds = pd * dp[j] - pr * sRow[R + i];
#else
        ds = pr * (dp[j] - sRow[R + i]);
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
  if (tid < KB && n0 + tid < f.Nkv) {
    float c = 0.f;
    for (int i = 0; i < rows; ++i) c += sDs[i * KB + tid];
    atomicAdd(p.dbias_accum + n0 + tid, c);
  }
#endif

  // dV = Pd^T dO and dK = scale dS^T Q of key kk, granule g: complete here (every row of the
  // group is in the block).
  {
    u16* dkb = static_cast<u16*>(p.dk) + b * p.dk_batch_stride + kvh * p.dk_head_stride;
    u16* dvb = static_cast<u16*>(p.dv) + b * p.dv_batch_stride + kvh * p.dv_head_stride;
    for (int idx = tid; idx < KB * G; idx += NT) {
      const int kk = idx / G, g = idx % G, key = n0 + kk;
      if (key >= f.Nkv) continue;
      float dk[8], dv[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) dk[e] = dv[e] = 0.f;
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
  }

  // dQ of row i, granule g: this block's keys' share, added to dq_accum ([B, Hq, Nq, D]).
  for (int idx = tid; idx < rows * G; idx += NT) {
    const int i = idx / G, g = idx % G;
    float dq[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) dq[e] = 0.f;
    for (int kk = 0; kk < KB; ++kk) {
      const float ds = sDs[i * KB + kk];
      float k8[8];
      unpack8(reinterpret_cast<const uint4*>(sK + kk * DS)[g], k8);
#pragma unroll
      for (int e = 0; e < 8; ++e) dq[e] = fmaf(ds, k8[e], dq[e]);
    }
    float* dst = p.dq_accum + (((long long)b * f.Hq + hq_of(i)) * f.Nq + i % f.Nq) * D + g * 8;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (dq[e] != 0.f) atomicAdd(dst + e, dq[e] * f.scale);
  }
}
