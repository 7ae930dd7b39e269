// Pointwise passes of unfused attention: one block per query row, 16-byte vector accesses, fp32
// math. Memory-bound, so each score element is read once and written once where possible.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "unfused/kernels.hpp"
#include "unfused/elem.cuh"
#include "gpu/cuda.hpp"
#include "philox.cuh"

namespace ffpa {
namespace {

constexpr int kThreads = 256;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float to_f(float x) {
  return x;
}
__device__ __forceinline__ float to_f(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_f(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <class T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// VEC elements of T in one 16-byte access.
template <class T>
struct Vec {
  static constexpr int N = 16 / sizeof(T);
  union {
    uint4 raw;
    T e[N];
  };
  __device__ __forceinline__ void load(const T* p) { raw = *reinterpret_cast<const uint4*>(p); }
  __device__ __forceinline__ void store(T* p) const { *reinterpret_cast<uint4*>(p) = raw; }
};

__device__ __forceinline__ int visible(const RowGeometry& g, int i) {
  long long nv = g.Nkv;
  if (g.causal == 1) nv = static_cast<long long>(i) + g.Nkv - g.Nq + 1;
  if (g.causal == 2) nv = static_cast<long long>(i) + 1;
  return static_cast<int>(nv < 0 ? 0 : nv > g.Nkv ? g.Nkv : nv);
}

template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // smem may still be read by a previous reduction
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = smem[0];
  for (int w = 1; w < kThreads / 32; ++w) v = kMax ? fmaxf(v, smem[w]) : v + smem[w];
  return v;
}

struct RowPos {
  long long row;  // global row
  long long b;
  int h, i;
};
__device__ __forceinline__ RowPos row_pos(const RowGeometry& g, long long local) {
  RowPos r;
  r.row = g.row0 + local;
  r.i = static_cast<int>(r.row % g.Nq);
  const long long bh = r.row / g.Nq;
  r.h = static_cast<int>(bh % g.Hq);
  r.b = bh / g.Hq;
  return r;
}

// Probabilities of one score element x (already exp(x - max)) times 1/sum, with dropout.
template <class T>
__device__ __forceinline__ void write_probs(const SoftmaxFwdArgs& a, T* srow, T* pdrow,
                                            long long elem0, int j0, const float* x, float inv,
                                            FfpaDropoutStream& ds) {
  constexpr int V = Vec<T>::N;
  Vec<T> out, outd;
  const float keep_scale = a.drop.p > 0 ? 1.f / (1.f - a.drop.p) : 1.f;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float p = x[k] * inv;
    float pd = p;
    if (a.drop.p > 0 && j0 + k < a.g.Nkv)
      pd = ds.uniform(a.drop.offset + elem0 + j0 + k) > a.drop.p ? p * keep_scale : 0.f;
    out.e[k] = from_f<T>(a.drop_into_s ? pd : p);
    if (pdrow) outd.e[k] = from_f<T>(pd);
  }
  out.store(srow + j0);
  if (pdrow) outd.store(pdrow + j0);
}

// The whole row held in registers: CHUNKS vectors per thread, row read once.
template <class T, int CHUNKS>
__global__ void __launch_bounds__(kThreads) softmax_fwd_regs(SoftmaxFwdArgs a) {
  constexpr int V = Vec<T>::N;
  __shared__ float smem[kThreads / 32];
  const RowPos rp = row_pos(a.g, blockIdx.x);
  const int nv = visible(a.g, rp.i);
  T* srow = static_cast<T*>(a.s) + blockIdx.x * a.g.ld;
  T* pdrow = a.pd ? static_cast<T*>(a.pd) + blockIdx.x * a.g.ld : nullptr;
  const long long bias0 = rp.b * a.bias_b + rp.h * a.bias_h + rp.i * a.bias_r;
  float x[CHUNKS][V];
  float m = -INFINITY;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int j0 = (c * kThreads + threadIdx.x) * V;
    if (j0 < nv) {
      Vec<T> in;
      in.load(srow + j0);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int j = j0 + k;
        float v = -INFINITY;
        if (j < nv) {
          v = to_f(in.e[k]);
          if (a.bias) v += load_elem(a.bias, a.bias_elem, bias0 + j);
        }
        x[c][k] = v;
        m = fmaxf(m, v);
      }
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) x[c][k] = -INFINITY;
    }
  }
  m = block_reduce<true>(m, smem);
  float sum = 0;
  const float mb = m == -INFINITY ? 0.f : m * kLog2e;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
    for (int k = 0; k < V; ++k) {
      x[c][k] = exp2f(fmaf(x[c][k], kLog2e, -mb));
      sum += x[c][k];
    }
  sum = block_reduce<false>(sum, smem);
  const float inv = sum > 0 ? 1.f / sum : 0.f;
  if (threadIdx.x == 0) a.lse[rp.row] = sum > 0 ? m + logf(sum) : -INFINITY;
  FfpaDropoutStream ds;
  ds.init(a.drop.seed);
  const long long elem0 = rp.row * a.g.Nkv;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int j0 = (c * kThreads + threadIdx.x) * V;
    if (j0 < a.g.Nkv) write_probs<T>(a, srow, pdrow, elem0, j0, x[c], inv, ds);
  }
}

// Rows too long for registers: an online max/sum pass, then a normalizing pass.
template <class T>
__global__ void __launch_bounds__(kThreads) softmax_fwd_loop(SoftmaxFwdArgs a) {
  constexpr int V = Vec<T>::N;
  __shared__ float smem[kThreads / 32];
  const RowPos rp = row_pos(a.g, blockIdx.x);
  const int nv = visible(a.g, rp.i);
  T* srow = static_cast<T*>(a.s) + blockIdx.x * a.g.ld;
  T* pdrow = a.pd ? static_cast<T*>(a.pd) + blockIdx.x * a.g.ld : nullptr;
  const long long bias0 = rp.b * a.bias_b + rp.h * a.bias_h + rp.i * a.bias_r;
  auto value = [&](const Vec<T>& in, int j0, int k) {
    float v = to_f(in.e[k]);
    if (a.bias) v += load_elem(a.bias, a.bias_elem, bias0 + j0 + k);
    return v;
  };
  float m = -INFINITY, l = 0;
  for (int j0 = threadIdx.x * V; j0 < nv; j0 += kThreads * V) {
    Vec<T> in;
    in.load(srow + j0);
    for (int k = 0; k < V && j0 + k < nv; ++k) {
      const float v = value(in, j0, k);
      if (v > m) {
        l = l * exp2f((m - v) * kLog2e) + 1.f;
        m = v;
      } else {
        l += exp2f((v - m) * kLog2e);
      }
    }
  }
  const float mrow = block_reduce<true>(m, smem);
  l = m == -INFINITY ? 0.f : l * exp2f((m - mrow) * kLog2e);
  const float sum = block_reduce<false>(l, smem);
  const float inv = sum > 0 ? 1.f / sum : 0.f;
  if (threadIdx.x == 0) a.lse[rp.row] = sum > 0 ? mrow + logf(sum) : -INFINITY;
  FfpaDropoutStream ds;
  ds.init(a.drop.seed);
  const long long elem0 = rp.row * a.g.Nkv;
  for (int j0 = threadIdx.x * V; j0 < a.g.Nkv; j0 += kThreads * V) {
    float x[V];
    Vec<T> in;
    if (j0 < nv) in.load(srow + j0);
    for (int k = 0; k < V; ++k)
      x[k] = j0 + k < nv ? exp2f((value(in, j0, k) - mrow) * kLog2e) : 0.f;
    write_probs<T>(a, srow, pdrow, elem0, j0, x, inv, ds);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) softmax_bwd_kernel(SoftmaxBwdArgs a) {
  constexpr int V = Vec<T>::N;
  __shared__ float smem[kThreads / 32];
  const RowPos rp = row_pos(a.g, blockIdx.x);
  const int nv = visible(a.g, rp.i);
  // delta = rowsum(dO * O)
  const T* orow = static_cast<const T*>(a.o) + rp.row * a.D;
  const T* drow = static_cast<const T*>(a.dout) + rp.row * a.D;
  float delta = 0;
  if (a.D % V == 0) {
    for (int d0 = threadIdx.x * V; d0 < a.D; d0 += kThreads * V) {
      Vec<T> x, y;
      x.load(orow + d0);
      y.load(drow + d0);
#pragma unroll
      for (int k = 0; k < V; ++k) delta += to_f(x.e[k]) * to_f(y.e[k]);
    }
  } else {
    for (int d = threadIdx.x; d < a.D; d += kThreads) delta += to_f(orow[d]) * to_f(drow[d]);
  }
  delta = block_reduce<false>(delta, smem);
  const T* prow = static_cast<const T*>(a.p) + blockIdx.x * a.g.ld;
  T* dsrow = static_cast<T*>(a.ds) + blockIdx.x * a.g.ld;
  T* pdrow = a.drop.p > 0 ? static_cast<T*>(a.pd) + blockIdx.x * a.g.ld : nullptr;
  const float keep_scale = a.drop.p > 0 ? 1.f / (1.f - a.drop.p) : 1.f;
  const long long elem0 = rp.row * a.g.Nkv;
  FfpaDropoutStream dstream;
  dstream.init(a.drop.seed);
  constexpr int U = 4;  // vectors loaded per thread before any is stored (in-place dS)
  for (int base = threadIdx.x * V; base < a.g.Nkv; base += U * kThreads * V) {
    Vec<T> p[U], dp[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j0 = base + u * kThreads * V;
      if (j0 < nv) {
        p[u].load(prow + j0);
        dp[u].load(dsrow + j0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j0 = base + u * kThreads * V;
      if (j0 >= a.g.Nkv) continue;
      Vec<T> out, pd;
      float ds[V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int j = j0 + k;
        float pv = 0, dpv = 0, mult = 1.f;
        if (j < nv) {
          pv = to_f(p[u].e[k]);
          dpv = to_f(dp[u].e[k]);
        }
        if (a.drop.p > 0 && j < a.g.Nkv)
          mult = dstream.uniform(a.drop.offset + elem0 + j) > a.drop.p ? keep_scale : 0.f;
        ds[k] = j < nv ? pv * (dpv * mult - delta) : 0.f;
        out.e[k] = from_f<T>(ds[k]);
        if (pdrow) pd.e[k] = from_f<T>(pv * mult);
      }
      out.store(dsrow + j0);
      if (pdrow) pd.store(pdrow + j0);
      if (a.dbias_full)
        for (int k = 0; k < V && j0 + k < a.g.Nkv; ++k)
          store_elem(a.dbias_full, a.dbias_elem, elem0 + j0 + k, ds[k]);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    column_sums_kernel(const T* x, long long rows, long long cols, long long ld, long long row0,
                       long long mod, long long rows_per_block, float* acc, long long ld_acc) {
  constexpr int V = Vec<T>::N;
  const long long c0 = (static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x) * V;
  if (c0 >= cols) return;
  const long long r0 = blockIdx.y * rows_per_block;
  const long long r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  float s[V] = {};
  for (long long r = r0; r < r1; ++r) {
    Vec<T> v;
    v.load(x + r * ld + c0);
#pragma unroll
    for (int k = 0; k < V; ++k) s[k] += to_f(v.e[k]);
    const long long dst = (row0 + r) % mod;
    if (r + 1 == r1 || (row0 + r + 1) % mod != dst) {
      for (int k = 0; k < V && c0 + k < cols; ++k) atomicAdd(acc + dst * ld_acc + c0 + k, s[k]);
#pragma unroll
      for (int k = 0; k < V; ++k) s[k] = 0;
    }
  }
}

__global__ void copy_rows_kernel(const float* acc, long long rows, long long cols, long long ld,
                                 void* out, Elem e) {
  const long long n = rows * cols;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    store_elem(out, e, i, acc[(i / cols) * ld + i % cols]);
}

__global__ void convert_kernel(const void* src, Elem se, void* dst, Elem de, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    store_elem(dst, de, i, load_elem(src, se, i));
}

template <class T>
void softmax_fwd_t(const SoftmaxFwdArgs& a, cudaStream_t st) {
  constexpr int per = kThreads * Vec<T>::N;
  const dim3 grid(static_cast<unsigned>(a.g.rows));
  if (a.g.Nkv <= per)
    softmax_fwd_regs<T, 1><<<grid, kThreads, 0, st>>>(a);
  else if (a.g.Nkv <= 2 * per)
    softmax_fwd_regs<T, 2><<<grid, kThreads, 0, st>>>(a);
  else if (a.g.Nkv <= 4 * per)
    softmax_fwd_regs<T, 4><<<grid, kThreads, 0, st>>>(a);
  else if (a.g.Nkv <= 8 * per)
    softmax_fwd_regs<T, 8><<<grid, kThreads, 0, st>>>(a);
  else
    softmax_fwd_loop<T><<<grid, kThreads, 0, st>>>(a);
}

unsigned grid_for(long long n) {
  const long long b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

}  // namespace

void softmax_fwd(const SoftmaxFwdArgs& a, cudaStream_t st) {
  if (a.g.rows == 0) return;
  switch (a.elem) {
    case Elem::f32:
      softmax_fwd_t<float>(a, st);
      break;
    case Elem::f16:
      softmax_fwd_t<__half>(a, st);
      break;
    case Elem::bf16:
      softmax_fwd_t<__nv_bfloat16>(a, st);
      break;
  }
  gpu::check_launch("softmax_fwd");
}

void softmax_bwd(const SoftmaxBwdArgs& a, cudaStream_t st) {
  if (a.g.rows == 0) return;
  const dim3 grid(static_cast<unsigned>(a.g.rows));
  switch (a.elem) {
    case Elem::f32:
      softmax_bwd_kernel<float><<<grid, kThreads, 0, st>>>(a);
      break;
    case Elem::f16:
      softmax_bwd_kernel<__half><<<grid, kThreads, 0, st>>>(a);
      break;
    case Elem::bf16:
      softmax_bwd_kernel<__nv_bfloat16><<<grid, kThreads, 0, st>>>(a);
      break;
  }
  gpu::check_launch("softmax_bwd");
}

void column_sums(const void* x, Elem e, long long rows, long long cols, long long ld,
                 long long row0, long long mod, float* acc, long long ld_acc, cudaStream_t st) {
  if (rows == 0 || cols == 0) return;
  const int V = 16 / elem_bytes(e);
  const long long bx = (cols + static_cast<long long>(kThreads) * V - 1) / (kThreads * V);
  // Enough row splits for ~4 blocks per SM in total, with at least 32 rows per block.
  long long splits = (4 * 132 + bx - 1) / bx;
  if (splits > (rows + 31) / 32) splits = (rows + 31) / 32;
  if (splits > 65535) splits = 65535;
  if (splits < 1) splits = 1;
  const long long rpb = (rows + splits - 1) / splits;
  const dim3 grid(static_cast<unsigned>(bx), static_cast<unsigned>((rows + rpb - 1) / rpb));
  switch (e) {
    case Elem::f32:
      column_sums_kernel<<<grid, kThreads, 0, st>>>(static_cast<const float*>(x), rows, cols, ld,
                                                    row0, mod, rpb, acc, ld_acc);
      break;
    case Elem::f16:
      column_sums_kernel<<<grid, kThreads, 0, st>>>(static_cast<const __half*>(x), rows, cols, ld,
                                                    row0, mod, rpb, acc, ld_acc);
      break;
    case Elem::bf16:
      column_sums_kernel<<<grid, kThreads, 0, st>>>(static_cast<const __nv_bfloat16*>(x), rows,
                                                    cols, ld, row0, mod, rpb, acc, ld_acc);
      break;
  }
  gpu::check_launch("column_sums");
}

void copy_rows(const float* acc, long long rows, long long cols, long long ld_acc, void* out,
               Elem e, cudaStream_t st) {
  if (rows * cols == 0) return;
  copy_rows_kernel<<<grid_for(rows * cols), kThreads, 0, st>>>(acc, rows, cols, ld_acc, out, e);
  gpu::check_launch("copy_rows");
}

void convert(const void* src, Elem se, void* dst, Elem de, long long n, cudaStream_t st) {
  if (n == 0) return;
  convert_kernel<<<grid_for(n), kThreads, 0, st>>>(src, se, dst, de, n);
  gpu::check_launch("convert");
}

}  // namespace ffpa
