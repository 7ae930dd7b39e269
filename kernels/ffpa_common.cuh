// Device helpers of the split-D kernels (ffpa_fwd.cuh, ffpa_bwd.cuh): shared-memory swizzle,
// cp.async, ldmatrix, mma.sync, dtype conversion, bias reads and the dropout pairing. Compiled by
// NVRTC as part of those kernels: no standard headers. Reads the macros FFPA_BF16 (1 bf16,
// 0 fp16), FFPA_BIAS (0 none, 1 fp32 bias, 2 bias in the input dtype) and FFPA_DROPOUT (0/1).
#pragma once

#include "params.h"
#if FFPA_DROPOUT
#include "philox.cuh"
#endif

namespace ffpa_dev {

typedef unsigned int u32;
typedef unsigned short u16;

#define NEG_INF __int_as_float(0xff800000u)

// Shared tiles are [rows][64] 16-bit pieces of 128-byte rows; the 16-byte granule is XOR-swizzled
// with the row so that ldmatrix (8 rows, same granule) and cp.async hit distinct banks.
__device__ __forceinline__ u32 tile_off(int row, int col, int rows) {
  return (u32)((((col >> 6) * rows + row) << 7) + ((((col >> 3) & 7) ^ (row & 7)) << 4) +
               ((col & 7) << 1));
}

__device__ __forceinline__ u32 smem_u32(const void* p) {
  u32 r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}

// The dynamic shared memory from its first 1024-byte boundary: its shared-window address and a
// generic pointer to it. The 128-byte swizzle of the tiles (ldmatrix, wgmma, TMA) is a function
// of absolute address bits 7..9, and __align__ on the extern array does not place the dynamic
// base there; every layout reserves the 1024 bytes this may skip.
struct SmemBase {
  u32 addr;
  unsigned char* ptr;
};
__device__ __forceinline__ SmemBase smem_base_1024() {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const u32 raw = smem_u32(smem_raw);
  const u32 addr = (raw + 1023u) & ~1023u;
  return {addr, smem_raw + (addr - raw)};
}

__device__ __forceinline__ void cp_async16(u32 dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
// A row's lse in the backward's base-2 form, P = exp2(S scale_log2 - l): lse log2(e), and +inf
// (P = 0) for a row that sees no key (lse = -inf): it has no gradient.
__device__ __forceinline__ float lse_log2(float lse) {
  return lse == NEG_INF ? __int_as_float(0x7f800000u) : lse * 1.4426950408889634f;
}
// The merge of n partial rows of one query row (split-KV pieces, each normalized by its own
// softmax): lse = log sum_s exp(lse_s), O = sum_s weight(lse_s) O_s. lse_s = -inf: a piece that
// saw no key (weight 0); all of them: the row saw none (lse -inf, O zero, `none()`).
struct LseMerge {
  float mx = NEG_INF, den = 0.f;
  // Piece s's lse at lse0[s * stride].
  __device__ LseMerge(const float* lse0, long long stride, int n) {
    for (int s = 0; s < n; ++s) mx = fmaxf(mx, lse0[s * stride]);
    if (!none())
      for (int s = 0; s < n; ++s) den += __expf(lse0[s * stride] - mx);
  }
  __device__ bool none() const { return mx == NEG_INF; }
  __device__ float lse() const { return none() ? NEG_INF : mx + __logf(den); }
  __device__ float weight(float lse_s) const { return __expf(lse_s - mx) / den; }
};
// Programmatic dependent launch (sm_90; no-ops before): a kernel launched with it
// (gpu::launch(..., early = true)) may start while the previous kernel of the stream still runs,
// once that kernel's blocks have all started or called launch_dependents(). It must call
// grid_dependency_wait() before it touches what the previous kernel writes or reads; the wait
// returns when that kernel has completed and its writes are visible.
__device__ __forceinline__ void grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// 4 bytes, for small tables that would otherwise be a load whose latency stalls the thread.
__device__ __forceinline__ void cp_async4(u32 dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
}
// A barrier over `threads` threads (a multiple of 32) of the block, with id 1..15 (0 is
// __syncthreads).
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrives on named barrier id without waiting (the producer side of a hand-off: the waiters call
// named_sync with the same count); orders this thread's earlier memory accesses before it.
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
// Waits until at most n cp.async groups are pending (n <= N; a constant once unrolled).
template <int N>
__device__ __forceinline__ void cp_async_wait_upto(int n) {
  if (n >= N)
    cp_async_wait<N>();
  else if constexpr (N > 0)
    cp_async_wait_upto<N - 1>(n);
}
// A 2-byte shared-memory store of the low half of v.
__device__ __forceinline__ void st_b16(u32 addr, u32 v) {
  asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"((u16)v));
}

// A 16-byte global store as one STG.128: a uint4 assignment may be split into 4-byte stores.
__device__ __forceinline__ void st_global_v4(void* dst, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// Two 8 x 8 matrices (lanes 0-15 give the rows' addresses).
__device__ __forceinline__ void ldsm_x2(u32 (&r)[2], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2_t(u32 (&r)[2], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

__device__ __forceinline__ void mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if FFPA_BF16
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
#endif
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats to the input dtype, lo in the low half.
__device__ __forceinline__ u32 pack2(float lo, float hi) {
  u32 r;
#if FFPA_BF16
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

__device__ __forceinline__ float to_f32(u16 h) {
#if FFPA_BF16
  return __uint_as_float(((u32)h) << 16);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
  return f;
#endif
}

__device__ __forceinline__ float bias_at(const FfpaFwdParams& p, long long off) {
#if FFPA_BIAS == 1
  return __ldg(static_cast<const float*>(p.bias) + off);
#elif FFPA_BIAS == 2
  return to_f32(__ldg(static_cast<const u16*>(p.bias) + off));
#else
  return 0.f;
#endif
}

#if FFPA_DROPOUT
// Zeroes the dropped ones of two consecutive stream positions g, g + 1 (one Philox block unless
// the pair straddles two). The backward uses it too, so it drops the forward's elements. kmin:
// ffpa_keep_min of the dropout probability.
__device__ __forceinline__ void dropout2(unsigned long long seed, unsigned long long g, u32 kmin,
                                         float (&pr)[2]) {
  FfpaDropoutStream st;
  st.init(seed);
  if (st.word(g) < kmin) pr[0] = 0.f;
  if (st.word(g + 1) < kmin) pr[1] = 0.f;
}

// Bit i: word i of a Philox block keeps its element.
__device__ __forceinline__ u32 kept_nibble(const FfpaPhilox4& r, u32 kmin) {
  return (u32)(r.x[0] >= kmin) | (u32)(r.x[1] >= kmin) << 1 | (u32)(r.x[2] >= kmin) << 2 |
         (u32)(r.x[3] >= kmin) << 3;
}

// Keep decisions of the stream positions 4c + o .. 4c + o + 3 (bit i: 4c + o + i; bits above 3
// undefined), o < 4: one Philox block, two when o > 0 (the four straddle a block boundary). kmin:
// ffpa_keep_min of the dropout probability; words are compared as integers. The caller passes o
// (the same for positions 8 apart) so it is computed once, not per slice: recomputed, it made
// ptxas spill in ffpa_fwd.cuh at D = 512.
__device__ __forceinline__ u32 keep4(unsigned long long seed, unsigned long long c, u32 o,
                                     u32 kmin) {
  u32 n = kept_nibble(ffpa_philox_block(seed, c), kmin) >> o;
  if (o) n |= kept_nibble(ffpa_philox_block(seed, c + 1), kmin) << (4 - o);
  return n;
}

// Lanes 2i and 2i + 1 hold two elements each of the same 4 consecutive keys (the even lane keys 0,
// 1, the odd lane 2, 3) in two places (two rows, or two 8-key groups): each draws keep4 of one
// place (the even lane the first) and hands the other the 2 decisions it needs, so a Philox block
// is computed once instead of by both lanes. Returns the lane's decisions: bits 0, 1 in the first
// place, bits 2, 3 in the second.
__device__ __forceinline__ u32 keep_pair_swap(u32 n, bool odd) {
  const u32 r = __shfl_xor_sync(0xffffffffu, odd ? n : n >> 2, 1) & 3u;
  return odd ? (r | (n & 12u)) : ((n & 3u) | r << 2);
}

// Keep bits of a thread's dropout elements in NS 8-column slices of one m16 mma tile: bit
// (ns * 2 + h) * 2 + e for row (lane >> 2) + 8h, column ns * 8 + 2 * (lane & 3) + e (the two
// places of keep_pair_swap are the rows h = 0, 1). g: stream position (offset + element) of this
// lane's row h = lane & 1 at column 4 * ((lane >> 1) & 1) of slice 0.
// The alignment test is hoisted out of the slices: aligned (o = 0: a dropout offset and Nkv that
// are multiples of 4, every benchmark row) each slice is one Philox block, four unrolled (enough
// independent blocks to fill the pipes), with no branch between them; otherwise (positions
// straddle two blocks) a rolled loop, so the rare case adds two Philox blocks of code, not 2 NS
// (ncu on the forward's dropout row: instruction fetch stalls 22 % of the samples, most after
// the per-slice branch of keep4). The nibbles are gathered first and swapped between the lane
// pair after the branch (a shuffle must not sit in a branch that lanes of different rows may
// take differently). UNROLL: aligned slices unrolled (1: one Philox block of code, for a draw
// off the hot path).
template <int NS, int UNROLL = 4>
__device__ __forceinline__ u32 dropout_keep_bits(unsigned long long seed, unsigned long long g,
                                                 u32 kmin, int lane) {
  static_assert(NS * 4 <= 32, "keep bits fit one register");
  const u32 o = (u32)g & 3;  // the same for every slice: they are 8 apart
  u32 nib = 0;
  if (o == 0) {
#pragma unroll UNROLL
    for (int ns = 0; ns < NS; ++ns)
      nib |= kept_nibble(ffpa_philox_block(seed, (g >> 2) + ns * 2), kmin) << (ns * 4);
  } else {
#pragma unroll 1
    for (int ns = 0; ns < NS; ++ns)
      nib |= (keep4(seed, (g + ns * 8) >> 2, o, kmin) & 15u) << (ns * 4);
  }
  u32 keep = 0;
#pragma unroll
  for (int ns = 0; ns < NS; ++ns)
    keep |= keep_pair_swap((nib >> (ns * 4)) & 15u, lane & 1) << (ns * 4);
  return keep;
}
#endif

// The query rows of a forward block (rows m0 .. m0 + BR - 1 of the group * Nq packed rows of one
// kv head) and the key tiles they see: all of Nkv, or up to the last key a causal row sees.
struct BlockSpan {
  int r_lo;   // the block's smallest query row (0 when it spans two q heads)
  int diag;   // row r sees keys k <= r + diag (causal)
  int tiles;  // key tiles of BC keys
};
template <int BR, int BC>
__device__ __forceinline__ BlockSpan block_span(const FfpaFwdParams& p, int m0, int rows_total) {
  const int i_hi = min(m0 + BR, rows_total) - 1;
  int r_lo = m0 % p.Nq, r_hi = i_hi % p.Nq;
  if (m0 / p.Nq != i_hi / p.Nq) r_lo = 0, r_hi = p.Nq - 1;
  const int diag = FFPA_CAUSAL == 1 ? p.Nkv - p.Nq : 0;
  int tiles = (p.Nkv + BC - 1) / BC;
  if (FFPA_CAUSAL) tiles = min(tiles, r_hi + diag < 0 ? 0 : (r_hi + diag) / BC + 1);
  return {r_lo, diag, tiles};
}

// Queues granule idx (8 elements) of the block's resident Q tile [BR x DP] in 64-column tiles
// (zero-filled past the rows and past D). qb: Q of the block's batch.
template <int BR, int DP, int D>
__device__ __forceinline__ void load_q_granule(const FfpaFwdParams& p, const u16* qb, u32 sQ,
                                               int idx, int m0, int rows_total, int kvh) {
  const int row = idx / (DP / 8), col = (idx % (DP / 8)) * 8;
  const int i = m0 + row;
  const bool ok = i < rows_total && col < D;
  const u16* src = qb;
  if (ok) {
    const int hq = kvh * p.group + i / p.Nq, r = i % p.Nq;
    src = qb + hq * p.q_head_stride + r * p.q_row_stride + col;
  }
  cp_async16(sQ + tile_off(row, col, BR), src, ok);
}

// Queues granule (row, col) of a backward key tile: K and V of key n0 + row into sK and sV at
// tile_off(row, col, BC) (zero-filled past Nkv and past D). kb, vb: K and V of the kv head.
template <int BC, int D>
__device__ __forceinline__ void load_kv_granule(const FfpaFwdParams& f, const u16* kb,
                                                const u16* vb, u32 sK, u32 sV, int row, int col,
                                                int n0) {
  const int key = n0 + row;
  const bool ok = key < f.Nkv && col < D;
  const u32 off = tile_off(row, col, BC);
  cp_async16(sK + off, ok ? kb + key * f.k_row_stride + col : kb, ok);
  cp_async16(sV + off, ok ? vb + key * f.v_row_stride + col : vb, ok);
}

// Q and dO of row i of the packed group * Nq rows of a backward query tile (past the rows: the
// batch's first row, never read). Computed once per row: the head and row come from a division by
// Nq.
struct QdoRow {
  const u16* q;
  const u16* o;
  bool ok;
};
__device__ __forceinline__ QdoRow qdo_row(const FfpaBwdParams& p, const u16* qb, const u16* ob,
                                          int i, int rows_total, int kvh) {
  const FfpaFwdParams& f = p.fwd;
  if (i >= rows_total) return {qb, ob, false};
  const int hq = kvh * f.group + i / f.Nq, r = i % f.Nq;
  return {qb + hq * f.q_head_stride + r * f.q_row_stride,
          ob + hq * p.do_head_stride + r * p.do_row_stride, true};
}

// Queues granule (row, col) of that row into sQ and sO at tile_off(row, col, BR), zero-filled
// past the rows and past D.
template <int BR, int D>
__device__ __forceinline__ void qdo_granule(QdoRow src, u32 sQ, u32 sO, int row, int col) {
  const bool ok = src.ok && col < D;
  const u32 off = tile_off(row, col, BR);
  cp_async16(sQ + off, ok ? src.q + col : src.q, ok);
  cp_async16(sO + off, ok ? src.o + col : src.o, ok);
}

// Queues granule (row, col) of a backward query tile starting at row m0. qb, ob: Q and dO of the
// block's batch.
template <int BR, int D>
__device__ __forceinline__ void load_qdo_granule(const FfpaBwdParams& p, const u16* qb,
                                                 const u16* ob, u32 sQ, u32 sO, int row, int col,
                                                 int m0, int rows_total, int kvh) {
  qdo_granule<BR, D>(qdo_row(p, qb, ob, m0 + row, rows_total, kvh), sQ, sO, row, col);
}

#if __CUDA_ARCH__ >= 900
// fp32 atomic add of four scaled neighbours (16-byte aligned): one vector reduction.
__device__ __forceinline__ void red_add4(float* dst, float4 v, float scale) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "f"(v.x * scale),
               "f"(v.y * scale), "f"(v.z * scale), "f"(v.w * scale)
               : "memory");
}
#endif

#if FFPA_DBIAS
// Element off of dBias, in the bias's dtype (FFPA_BIAS 1: fp32, 2: the input dtype).
__device__ __forceinline__ void store_dbias(const FfpaBwdParams& p, long long off, float g) {
#if FFPA_BIAS == 1
  static_cast<float*>(p.dbias)[off] = g;
#else
  static_cast<u16*>(p.dbias)[off] = (u16)(pack2(g, 0.f) & 0xffff);
#endif
}
#endif

#if FFPA_DBIAS >= 2
// dBias of element (q head hq, query row r, key) of batch b, g = dS: FFPA_DBIAS 2 ([1,1,Nq,Nkv])
// summed over batches and heads with fp32 atomics, 3 (full) stored: the element is one thread's.
__device__ __forceinline__ void put_dbias(const FfpaBwdParams& p, int b, int hq, int r, int key,
                                          float g) {
  const FfpaFwdParams& f = p.fwd;
#if FFPA_DBIAS == 2
  if (g != 0.f) atomicAdd(p.dbias_accum + (long long)r * f.Nkv + key, g);
#else
  store_dbias(p, b * f.bias_batch_stride + hq * f.bias_head_stride + r * f.bias_row_stride + key,
              g);
#endif
}
#endif

}  // namespace ffpa_dev
