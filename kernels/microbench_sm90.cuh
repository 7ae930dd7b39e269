// Microbenchmarks behind design choices of the Hopper kernels (sm_90a, NVRTC); not a variant.
// tests/gpu_microbench_sm90.cpp launches them; docs/notes/microbench.md says what they answer.
//
// mb_exchange_kernel: the cluster exchange of ffpa-bwd-sm90c (xbuf = 2) alone. Both blocks of a
// cluster of two send FFPA_MB_NV float4 a thread to the same thread's slots of the other block
// (st.async completing on the receiver's mbarrier), optionally run `work` dependent FMAs a
// thread, then wait for the other block's stores and read one of them; two buffers and two
// mbarriers take turns. Thread 0 of each block writes the clock64 cycles of one exchange
// (averaged over `iters`). With work = 0 it measures the exchange's latency and throughput
// (FFPA_MB_NV x 4 KB a block and exchange); with work > 0, how much of it independent work hides.
// With red = 1 the work is `work` fp32 reductions a thread into global memory (`red.global.add`,
// 16 bytes each, a thread's own addresses, as ffpa-bwd-sm90c's dQ chunks issue them between the
// stores and the wait with dqlag): do they hide under the exchange, or compete for the SM's path
// out as the distributed shared memory stores do?
//
// mb_stream_kernel: HBM streaming alone, for ffpa-bwd-decode (reads K and V, writes dK and dV,
// 1 GB a decode row at D = 512, at ~3.2 TB/s): mode 0 reads `n` float4 (summed, one store a
// thread), mode 1 writes them, mode 2 copies src to dst (half the float4 each way, the decode
// kernel's mix). Does a stream that mixes reads and writes lose bandwidth against pure phases?
// FFPA_MB_NV is unused by it (the same module serves both kernels).
//
// mb_reduce_kernel: fp32 reductions into L2 the way ffpa-bwd-sm90c adds dQ (64 KB a block and
// query tile at D = 512, into rows other blocks add to as well). Every iteration a block adds
// 64 KB into tile (block + iteration) mod `tiles` of dst: mode 0 by red.global.add.v4.f32 with a
// warp's 32 lanes on 512 contiguous bytes (the kernel's fragment order), mode 1 by
// cp.reduce.async.bulk from shared memory (`chunk` bytes an operation, issued by one lane of
// each warp), mode 2 by plain 16-byte stores (the write traffic alone, no addition), mode 3 by
// red.global.add.v4.f32 with each lane on lines of its own (as mb_exchange_kernel's red = 1).
// Which way of adding is cheapest a byte, and is any near the store rate?
//
// mb_fence_kernel: what `fence.proxy.async.shared::cta` costs a thread whose global reductions
// are still in flight. ptxas compiles the fence to MEMBAR.ALL.CTA and FENCE.VIEW.ASYNC.S, and
// ffpa-bwd-sm90c with cp.async issued it at the top of every query tile, a few hundred cycles
// after the previous tile's dQ reductions. Every iteration a thread issues `reds` 16-byte
// red.global.add into lines of its own (L2-resident), spins `delay` cycles, then times the fence
// (fence = 1) or nothing (fence = 0) between two reads of clock64; thread 0 of each block writes
// the mean cycles. If the fence waits for the reductions, its cycles grow with `reds` and shrink
// with `delay`.
#pragma once

#include "tma.cuh"

namespace ffpa_mb {

using namespace ffpa_dev;

constexpr int NV = FFPA_MB_NV;  // float4 stores a thread and exchange
constexpr int NT = 256;
constexpr int BUF = NV * NT;  // float4 slots of one buffer

}  // namespace ffpa_mb

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(ffpa_mb::NT, 1)
    mb_exchange_kernel(long long* cycles, float* sink, float* red_buf, int iters, int work,
                       int red) {
  using namespace ffpa_mb;
  extern __shared__ __align__(16) unsigned char smem[];
  float4* buf = reinterpret_cast<float4*>(smem);
  const u32 bars = smem_u32(smem + 2 * BUF * 16);  // full[0], full[1]
  const int tid = threadIdx.x;
  const u32 rank = cluster_rank();
  if (tid == 0) {
    mbar_init(bars, 1);
    mbar_init(bars + 8, 1);
    mbar_init_fence();
  }
  cluster_sync();
  const u32 peer = map_rank(smem_u32(buf + tid), rank ^ 1);
  const u32 bar_peer = map_rank(bars, rank ^ 1);
  float acc = (float)tid;
  const long long t0 = clock64();
  for (int i = 0; i < iters; ++i) {
    const int b = i & 1;
#pragma unroll
    for (int n = 0; n < NV; ++n)
      st_async4(peer + (b * BUF + n * NT) * 16, acc, acc + 1.f, acc + 2.f, acc + 3.f,
                bar_peer + b * 8);
    if (red) {
      // 64 lines a thread in turn: the reductions stay in L2, like dQ's.
      float4* dst = reinterpret_cast<float4*>(red_buf) + (blockIdx.x * NT + tid) * 64;
      for (int w = 0; w < work; ++w)
        asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst + (w & 63)),
                     "f"(acc), "f"(acc), "f"(acc), "f"(acc)
                     : "memory");
    } else {
      for (int w = 0; w < work; ++w) acc = fmaf(acc, 0.999f, 0.5f);
    }
    if (tid == 0) mbar_expect_tx(bars + b * 8, BUF * 16);
    // Buffer b is written again (exchange i + 2) only after the other block has waited for
    // exchange i + 1, whose stores this thread issues after this read.
    mbar_wait_cluster(bars + b * 8, (i >> 1) & 1);
    acc += buf[b * BUF + tid].x * 1e-9f;
  }
  const long long t1 = clock64();
  if (tid == 0) cycles[blockIdx.x] = (t1 - t0) / (iters > 0 ? iters : 1);
  sink[blockIdx.x * NT + tid] = acc;
  cluster_sync();  // neither block exits while the other may still store into it
}

extern "C" __global__ void __launch_bounds__(256)
    mb_stream_kernel(const float4* src, float4* dst, long long n, int mode, float* sink) {
  // Four independent 16-byte accesses a thread in flight per step: enough bytes in flight to
  // cover the HBM latency with 8 blocks an SM.
  constexpr int U = 4;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.f;
  if (mode == 0) {
    for (long long i = first; i < n; i += U * stride) {
      float4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        v[u] = i + u * stride < n ? __ldcs(src + i + u * stride) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int u = 0; u < U; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }
  } else if (mode == 1) {
    const float4 v = make_float4(1.f, 2.f, 3.f, (float)first);
    for (long long i = first; i < n; i += U * stride)
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i + u * stride < n) __stcs(dst + i + u * stride, v);
  } else {
    const long long half = n / 2;
    for (long long i = first; i < half; i += U * stride) {
      float4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        v[u] =
            i + u * stride < half ? __ldcs(src + i + u * stride) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i + u * stride < half) __stcs(dst + i + u * stride, v[u]);
    }
  }
  sink[first] = acc;
}

extern "C" __global__ void __launch_bounds__(256)
    mb_reduce_kernel(float4* dst, int tiles, int iters, int mode, int chunk, long long* cycles) {
  constexpr int TILE = 4096;  // float4 a tile: 64 KB
  extern __shared__ __align__(128) float4 src[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < TILE; i += 256) src[i] = make_float4(1.f, 1.f, 1.f, 1.f);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const float4 v = make_float4(1.f, 1.f, 1.f, 1.f);
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    float4* t = dst + (long long)((blockIdx.x + it) % tiles) * TILE;
    if (mode == 1) {
      if (lane == 0) {
        const int per_warp = TILE * 16 / 8;  // bytes
        for (int o = 0; o < per_warp; o += chunk) {
          const int byte = warp * per_warp + o;
          asm volatile(
              "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
                  reinterpret_cast<char*>(t) + byte),
              "r"(ffpa_dev::smem_u32(src) + byte), "r"(chunk)
              : "memory");
        }
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        // The source is never rewritten: only bound the operations in flight.
        asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
      }
    } else if (mode == 3) {
#pragma unroll 4
      for (int j = 0; j < TILE / 256; ++j)
        asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(t + tid * 16 + j),
                     "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                     : "memory");
    } else {
#pragma unroll 4
      for (int j = 0; j < TILE / 256; ++j) {
        float4* a = t + j * 256 + tid;
        if (mode == 0)
          asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(a), "f"(v.x),
                       "f"(v.y), "f"(v.z), "f"(v.w)
                       : "memory");
        else
          *a = v;
      }
    }
  }
  if (mode == 1 && lane == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
  __syncthreads();
  const long long t1 = clock64();
  if (tid == 0) cycles[blockIdx.x] = (t1 - t0) / (iters > 0 ? iters : 1);
}

extern "C" __global__ void __launch_bounds__(256)
    mb_fence_kernel(float4* buf, int iters, int reds, int delay, int fence, long long* cycles) {
  const int tid = threadIdx.x;
  float4* mine = buf + ((long long)blockIdx.x * 256 + tid) * 8;
  long long total = 0;
  for (int i = 0; i < iters; ++i) {
    for (int r = 0; r < reds; ++r)
      asm volatile("red.global.add.v4.f32 [%0], {%1, %1, %1, %1};\n" ::"l"(mine + (r & 7)), "f"(1.f)
                   : "memory");
    const long long start = clock64();
    while (clock64() - start < delay) {
    }
    const long long t0 = clock64();
    if (fence) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    const long long t1 = clock64();
    total += t1 - t0;
    __syncthreads();
  }
  if (tid == 0) cycles[blockIdx.x] = total / (iters > 0 ? iters : 1);
}
