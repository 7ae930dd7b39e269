// Kernels of the timing harness (src/timing/): L2 flush, stream hold, and two kernels of known
// behaviour (a timed spin and a plain read) that the harness is tested against.
#include <cstdint>

#include "timing/kernels.hpp"

namespace ffpa::timing_kernels {
namespace {

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void flush_kernel(uint4* buf, size_t n, uint32_t salt) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = make_uint4(salt, static_cast<uint32_t>(i), salt ^ 0x9e3779b9u, 0);
}

__global__ void hold_kernel(const volatile int* release, volatile int* timed_out,
                            uint64_t timeout_ns) {
  const uint64_t start = globaltimer();
  while (!*release) {
    if (globaltimer() - start > timeout_ns) {
      *timed_out = 1;
      return;
    }
  }
}

__global__ void spin_kernel(uint64_t ns) {
  const uint64_t start = globaltimer();
  while (globaltimer() - start < ns) {
  }
}

__global__ void read_kernel(const uint4* buf, size_t n, float* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  uint32_t acc = 0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // Practically never true, but the compiler cannot know: the loads stay.
  if (acc == 0x7fc00001u) *sink = __uint_as_float(acc);
}

int grid_for(size_t n, int threads) {
  int dev = 0, sms = 1;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const size_t want = (n + threads - 1) / threads;
  const size_t cap = static_cast<size_t>(sms) * 8;
  return static_cast<int>(want < cap ? (want > 0 ? want : 1) : cap);
}

}  // namespace

void flush(void* buf, size_t bytes, uint32_t salt, cudaStream_t s) {
  const size_t n = bytes / sizeof(uint4);
  flush_kernel<<<grid_for(n, 256), 256, 0, s>>>(static_cast<uint4*>(buf), n, salt);
}

void hold(const volatile int* release, volatile int* timed_out, uint64_t timeout_ns,
          cudaStream_t s) {
  hold_kernel<<<1, 1, 0, s>>>(release, timed_out, timeout_ns);
}

void spin(uint64_t ns, int blocks, cudaStream_t s) {
  spin_kernel<<<blocks, 32, 0, s>>>(ns);
}

void read(const void* buf, size_t bytes, float* sink, cudaStream_t s) {
  const size_t n = bytes / sizeof(uint4);
  read_kernel<<<grid_for(n, 256), 256, 0, s>>>(static_cast<const uint4*>(buf), n, sink);
}

}  // namespace ffpa::timing_kernels
