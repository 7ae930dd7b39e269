// Element access by run-time element type, for the nvcc-built pointwise and reference kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "unfused/kernels.hpp"

namespace ffpa {

__device__ __forceinline__ float load_elem(const void* p, Elem e, long long i) {
  switch (e) {
    case Elem::f32:
      return static_cast<const float*>(p)[i];
    case Elem::f16:
      return __half2float(static_cast<const __half*>(p)[i]);
    default:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

__device__ __forceinline__ void store_elem(void* p, Elem e, long long i, float v) {
  switch (e) {
    case Elem::f32:
      static_cast<float*>(p)[i] = v;
      break;
    case Elem::f16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    default:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
  }
}

}  // namespace ffpa
