// Seeded random-normal fill: each thread turns one Philox block (4 words) into 4 normals.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/cuda.hpp"
#include "philox.cuh"
#include "tensors/fill.hpp"

namespace ffpa {
namespace {

__device__ __forceinline__ void put(void* dst, Elem e, long long i, float v) {
  switch (e) {
    case Elem::f32:
      static_cast<float*>(dst)[i] = v;
      break;
    case Elem::f16:
      static_cast<__half*>(dst)[i] = __float2half_rn(v);
      break;
    default:
      static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(v);
      break;
  }
}

__global__ void randn_kernel(void* dst, Elem e, long long n, unsigned long long seed, float scale) {
  const long long blocks = (n + 3) / 4;
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < blocks;
       q += static_cast<long long>(gridDim.x) * blockDim.x) {
    const FfpaPhilox4 r = ffpa_philox_block(seed, static_cast<unsigned long long>(q));
    float z[4];
    for (int k = 0; k < 4; k += 2) {
      // u in (0, 1]: the log is finite.
      const float rad = sqrtf(-2.f * logf(ffpa_uniform(r.x[k])));
      float s, c;
      sincospif(2.f * ffpa_uniform(r.x[k + 1]), &s, &c);
      z[k] = rad * c;
      z[k + 1] = rad * s;
    }
    for (int k = 0; k < 4 && 4 * q + k < n; ++k) put(dst, e, 4 * q + k, scale * z[k]);
  }
}

}  // namespace

void fill_randn(void* dst, Elem e, long long n, unsigned long long seed, float scale,
                cudaStream_t st) {
  if (n == 0) return;
  const long long blocks = (n + 4 * 256 - 1) / (4 * 256);
  randn_kernel<<<static_cast<unsigned>(blocks < 8192 ? blocks : 8192), 256, 0, st>>>(dst, e, n,
                                                                                     seed, scale);
  gpu::check_launch("fill_randn");
}

unsigned long long mix_seed(unsigned long long seed, unsigned long long salt) {
  unsigned long long z = seed + (salt + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace ffpa
