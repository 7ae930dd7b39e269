// Seeded standard-normal fill (fill.cu): a pure function of (seed, index), so every GPU and
// every run produce the same tensor.
#pragma once

#include <cuda_runtime.h>

#include "unfused/kernels.hpp"

namespace ffpa {

// dst[i] = scale * N(0,1) sample i of stream `seed` (Philox4x32-10 + Box-Muller).
void fill_randn(void* dst, Elem, long long n, unsigned long long seed, float scale, cudaStream_t);

// splitmix64: derives independent seeds (one per tensor, one for dropout) from the problem seed.
unsigned long long mix_seed(unsigned long long seed, unsigned long long salt);

}  // namespace ffpa
