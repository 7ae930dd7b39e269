// Comparison of an output against the fp32 reference, and the raw dropout stream (for tests).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/cuda.hpp"
#include "philox.cuh"
#include "reference/reference_kernels.hpp"
#include "unfused/elem.cuh"

namespace ffpa {
namespace {

__global__ void compare_kernel(const void* out, Elem e, const float* ref, long long n,
                               CompareStats* st) {
  float max_abs = 0, max_ref = 0;
  double d2 = 0, r2 = 0;
  unsigned long long bad = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float o = load_elem(out, e, i), r = ref ? ref[i] : 0.0f;  // no ref: NaN/Inf scan
    if (isnan(o)) {
      ++bad;
    } else if (isinf(o) || isinf(r) || isnan(r)) {
      if (o != r) ++bad;  // an infinity only matches the same infinity
    } else {
      const float d = fabsf(o - r);
      max_abs = fmaxf(max_abs, d);
      max_ref = fmaxf(max_ref, fabsf(r));
      d2 += static_cast<double>(d) * d;
      r2 += static_cast<double>(r) * r;
    }
  }
  for (int s = 16; s > 0; s >>= 1) {
    max_abs = fmaxf(max_abs, __shfl_xor_sync(0xffffffffu, max_abs, s));
    max_ref = fmaxf(max_ref, __shfl_xor_sync(0xffffffffu, max_ref, s));
    d2 += __shfl_xor_sync(0xffffffffu, d2, s);
    r2 += __shfl_xor_sync(0xffffffffu, r2, s);
    bad += __shfl_xor_sync(0xffffffffu, bad, s);
  }
  if (threadIdx.x % 32 == 0) {
    atomicMax(&st->max_abs_bits, __float_as_uint(max_abs));
    atomicMax(&st->max_ref_bits, __float_as_uint(max_ref));
    atomicAdd(&st->sum_d2, d2);
    atomicAdd(&st->sum_r2, r2);
    if (bad) atomicAdd(&st->nonfinite, bad);
  }
}

__global__ void uniforms_kernel(float* out, long long n, unsigned long long seed,
                                unsigned long long offset) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    out[i] = ffpa_dropout_uniform(seed, offset, static_cast<unsigned long long>(i));
}

unsigned grid_for(long long n) {
  const long long b = (n + 255) / 256;
  return static_cast<unsigned>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

}  // namespace

void compare(const void* out, Elem e, const float* ref, long long n, CompareStats* st,
             cudaStream_t s) {
  if (n == 0) return;
  compare_kernel<<<grid_for(n), 256, 0, s>>>(out, e, ref, n, st);
  gpu::check_launch("compare");
}

void dropout_uniforms(float* out, long long n, unsigned long long seed, unsigned long long offset,
                      cudaStream_t s) {
  if (n == 0) return;
  uniforms_kernel<<<grid_for(n), 256, 0, s>>>(out, n, seed, offset);
  gpu::check_launch("dropout_uniforms");
}

}  // namespace ffpa
