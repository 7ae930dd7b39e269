// The backward's preprocess and convert kernels, shared by ffpa_bwd.cuh (sm80+),
// ffpa_bwd_sm90.cuh and ffpa_bwd_sm90c.cuh: delta = rowsum(dO * O) with the dq_accum row zeroed
// before the main kernel, dq_accum (and the dbias workspace) to the output dtypes after it. Reads
// FFPA_D, FFPA_BF16, FFPA_BIAS, FFPA_DBIAS (0 when the main kernel has no dBias) and
// FFPA_DQ_TILED and FFPA_DQ_PARTS (the layout of dq_accum; 0 and 4 when not defined).
#pragma once

#include "ffpa_common.cuh"

#ifndef FFPA_DQ_TILED
#define FFPA_DQ_TILED 0
#endif
#ifndef FFPA_DQ_PARTS
#define FFPA_DQ_PARTS 4
#endif

namespace ffpa_bwd_aux {
constexpr int D = FFPA_D;

#if FFPA_DQ_TILED
// Offset in dq_accum of row (b, hq, r), columns col, col + 1 (col even), when it is tiled
// (ffpa-bwd-sm90c, FFPA_DQ_TILED = its warpgroup's part: D is split into FFPA_DQ_PARTS parts, 4
// quarters or 2 halves, of that many columns; otherwise dq_accum is contiguous [B, Hq, Nq, D]):
// per (b, kv head, query tile of 64 packed rows of the GQA group, part, 64-column chunk of the
// part) a 64 x 64 block in the order of an m64n64 wgmma accumulator: warp w, n8 group n, lane l,
// element e hold row 16 w + l / 4 + 8 (e / 2), column 8 n + 2 (l % 4) + e % 2. A warp then reduces
// one n8 group of its fragment as 512 contiguous bytes, with no lane exchange and no bounds check
// (rows past the group and columns past D land in the padding, which nothing reads).
constexpr int DQ = FFPA_DQ_TILED;
constexpr int QCHUNKS = (DQ + 63) / 64;  // 64-column chunks of a part
// The first float of the block of query tile `tile` and chunk `chunk` (part * QCHUNKS + its
// chunk) of kv head kvh.
__device__ __forceinline__ long long dq_block(const FfpaFwdParams& f, int b, int kvh, int tile,
                                              int chunk) {
  const int tiles = (f.group * f.Nq + 63) / 64;
  return ((((long long)b * f.Hkv + kvh) * tiles + tile) * (FFPA_DQ_PARTS * QCHUNKS) + chunk) * 4096;
}
__device__ __forceinline__ long long dq_offset(const FfpaFwdParams& f, int b, int hq, int r,
                                               int col) {
  const int kvh = hq / f.group, i = (hq - kvh * f.group) * f.Nq + r;
  const int qc = col % DQ, chunk = col / DQ * QCHUNKS + qc / 64;
  const int row = i & 63, c = qc & 63, lane = (row & 7) * 4 + ((c & 7) >> 1);
  return dq_block(f, b, kvh, i >> 6, chunk) + (((row >> 4) * 8 + (c >> 3)) * 32 + lane) * 4 +
         ((row >> 3) & 1) * 2;
}
#endif
}  // namespace ffpa_bwd_aux

// One warp per row (b, hq, r): delta = sum_d dO * O in fp32; the row of dq_accum is zeroed.
// A main kernel launched early (sm_90) may start as soon as every block of this one has: its
// loads of the inputs then overlap this kernel, and it waits for delta and the zeroed dq_accum.
extern "C" __global__ void __launch_bounds__(256) ffpa_bwd_pre_kernel(const FfpaBwdParams p) {
  using namespace ffpa_dev;
  using ffpa_bwd_aux::D;
  const FfpaFwdParams& f = p.fwd;
  launch_dependents();
  const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= (long long)f.B * f.Hq * f.Nq) return;
  const int r = (int)(row % f.Nq);
  const int hq = (int)(row / f.Nq % f.Hq);
  const int b = (int)(row / f.Nq / f.Hq);
  const u16* o = static_cast<const u16*>(f.o) + b * f.o_batch_stride + hq * f.o_head_stride +
                 r * f.o_row_stride;
  const u16* d = static_cast<const u16*>(p.dout) + b * p.do_batch_stride + hq * p.do_head_stride +
                 r * p.do_row_stride;
  float acc = 0.f;
  for (int c = lane * 8; c < D; c += 32 * 8) {
    const uint4 x = *reinterpret_cast<const uint4*>(o + c);
    const uint4 y = *reinterpret_cast<const uint4*>(d + c);
    const u32 xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
    for (int k = 0; k < 4; ++k)
      acc += to_f32((u16)(xs[k] & 0xffff)) * to_f32((u16)(ys[k] & 0xffff)) +
             to_f32((u16)(xs[k] >> 16)) * to_f32((u16)(ys[k] >> 16));
  }
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (lane == 0) p.delta[row] = acc;
#if FFPA_DQ_TILED
  for (int c = lane * 2; c < D; c += 64)
    *reinterpret_cast<float2*>(p.dq_accum + ffpa_bwd_aux::dq_offset(f, b, hq, r, c)) =
        make_float2(0.f, 0.f);
#else
  float4* dq = reinterpret_cast<float4*>(p.dq_accum + row * D);
  for (int c = lane; c < D / 4; c += 32) dq[c] = make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

// dq_accum (fp32, dq_offset's layout) to dq in the input dtype; the dbias workspace
// (modes 1, 2: contiguous in the bias's shape) to dbias in the bias's dtype. Launched early on
// sm_90: it waits for the main kernel.
extern "C" __global__ void __launch_bounds__(256) ffpa_bwd_convert_kernel(const FfpaBwdParams p) {
  using namespace ffpa_dev;
  using ffpa_bwd_aux::D;
  const FfpaFwdParams& f = p.fwd;
  grid_dependency_wait();
#if FFPA_DQ_TILED
  // By 64 x 64 blocks of dq_accum (16 KB each, contiguous in fragment order), a block's float4 k
  // x 256 + t by thread t: warp w's lane l holds rows 16 k + l / 4 (+ 8), the column pair 4 w + l
  // % 4. The stores to dq may alias dq_accum for all the compiler knows, so it issues no load
  // after a store before the store: each thread loads the next block's 64 bytes before it stores
  // this block's, and the block turns row-major in shared memory so that a warp stores a row's 64
  // columns at once. tools/ffpa_bwd_convert_sim.py checks this transcription's indexing.
  using namespace ffpa_bwd_aux;
  constexpr int PITCH = 36;  // u32 pairs of a row: a warp's 8 rows x 4 pairs on 32 banks
  __shared__ u32 sdq[64 * PITCH];
  const int t = threadIdx.x, w = t >> 5, l = t & 31;
  const int rows = f.group * f.Nq, tiles = (rows + 63) / 64, chunks = FFPA_DQ_PARTS * QCHUNKS;
  const int blocks = f.B * f.Hkv * tiles * chunks;  // dq_accum's floats / 4096
  float4 x[4];
  const auto load = [&](int blk) {
    const float4* src = reinterpret_cast<const float4*>(p.dq_accum) + (long long)blk * 1024 + t;
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] = src[k * 256];
  };
  int blk = blockIdx.x;
  if (blk < blocks) load(blk);
  for (; blk < blocks; blk += gridDim.x) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int row = 16 * k + (l >> 2), pair = 4 * w + (l & 3);
      sdq[row * PITCH + pair] = pack2(x[k].x, x[k].y);
      sdq[(row + 8) * PITCH + pair] = pack2(x[k].z, x[k].w);
    }
    __syncthreads();
    if (blk + (int)gridDim.x < blocks) load(blk + gridDim.x);
    const int chunk = blk % chunks, tile = blk / chunks % tiles, bh = blk / chunks / tiles;
    const int qc = (chunk % QCHUNKS) * 64 + 2 * l, col = chunk / QCHUNKS * DQ + qc;
    u16* out = static_cast<u16*>(p.dq) + (bh / f.Hkv) * p.dq_batch_stride + col;
    // Warp w stores rows w, w + 8, ..: their heads and positions by steps, one division.
    int i = tile * 64 + w, hq = bh % f.Hkv * f.group + i / f.Nq, r = i % f.Nq;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (i < rows && qc < DQ && col < D)
        *reinterpret_cast<u32*>(out + hq * p.dq_head_stride + r * p.dq_row_stride) =
            sdq[(8 * k + w) * PITCH + l];
      i += 8, r += 8;
      while (r >= f.Nq) r -= f.Nq, ++hq;
    }
    __syncthreads();
  }
#else
  const long long pairs = (long long)f.B * f.Hq * f.Nq * (D / 2);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < pairs;
       i += (long long)gridDim.x * blockDim.x) {
    const long long row = i / (D / 2);
    const int col = (int)(i % (D / 2)) * 2;
    const int r = (int)(row % f.Nq);
    const int hq = (int)(row / f.Nq % f.Hq);
    const int b = (int)(row / f.Nq / f.Hq);
    const float2 x = *reinterpret_cast<const float2*>(p.dq_accum + row * D + col);
    *reinterpret_cast<u32*>(static_cast<u16*>(p.dq) + b * p.dq_batch_stride +
                            hq * p.dq_head_stride + r * p.dq_row_stride + col) = pack2(x.x, x.y);
  }
#endif
#if FFPA_DBIAS == 1 || FFPA_DBIAS == 2
  const long long nb = FFPA_DBIAS == 1 ? (long long)f.Nkv : (long long)f.Nq * f.Nkv;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nb;
       i += (long long)gridDim.x * blockDim.x) {
    store_dbias(p, i, p.dbias_accum[i]);
  }
#endif
}
