// Reduction and stream kernels of the GPU reference (kernels.cu).
#pragma once

#include <cuda_runtime.h>

#include "unfused/kernels.hpp"

namespace ffpa {

struct CompareStats {
  unsigned int max_abs_bits;     // float bits of max|out - ref| (non-negative: ordered as uint)
  unsigned int max_ref_bits;     // float bits of max|ref| over finite ref
  double sum_d2, sum_r2;         // sum (out - ref)^2 and sum ref^2 over finite pairs
  unsigned long long nonfinite;  // NaN outputs, and infinities the reference does not have
};

// Accumulates into *stats (device memory, zeroed by the caller). A null ref compares with zeros:
// nonfinite then counts every NaN and infinity of out.
void compare(const void* out, Elem, const float* ref, long long n, CompareStats* stats,
             cudaStream_t);
void dropout_uniforms(float* out, long long n, unsigned long long seed, unsigned long long offset,
                      cudaStream_t);

}  // namespace ffpa
