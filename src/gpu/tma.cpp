#include "gpu/tma.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"

namespace ffpa::gpu {
namespace {

static_assert(sizeof(FfpaTmaDesc) == sizeof(CUtensorMap) && alignof(FfpaTmaDesc) == 64,
              "FfpaTmaDesc mirrors CUtensorMap");

using EncodeTiled = decltype(&cuTensorMapEncodeTiled);

EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || !f)
      throw RunError("the CUDA driver has no cuTensorMapEncodeTiled (TMA needs driver 12.0+)");
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

}  // namespace

FfpaTmaDesc tma_rows_map(const void* base, bool bf16, int64_t D, int64_t N, int64_t H, int64_t B,
                         int64_t row_stride, int64_t head_stride, int64_t batch_stride,
                         int box_rows) {
  if (reinterpret_cast<uintptr_t>(base) % 16 || row_stride % 8 || head_stride % 8 ||
      batch_stride % 8)
    throw RunError(
        "TMA map: the base must be 16-byte aligned and the strides multiples of 8 "
        "elements (callers check this first)");
  // A dimension of extent 1 still needs a stride TMA accepts.
  const auto stride = [](int64_t s, int64_t fallback) { return (s > 0 ? s : fallback) * 2; };
  const cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)N, (cuuint64_t)H, (cuuint64_t)B};
  const cuuint64_t strides[3] = {(cuuint64_t)stride(row_stride, D),
                                 (cuuint64_t)stride(head_stride, N * row_stride),
                                 (cuuint64_t)stride(batch_stride, H * head_stride)};
  const cuuint32_t box[4] = {64, (cuuint32_t)box_rows, 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult r = encode_tiled()(
      &map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
      const_cast<void*>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw RunError("cuTensorMapEncodeTiled refused the tensor (error " + std::to_string(r) + ")");
  FfpaTmaDesc d;
  static_assert(sizeof d == sizeof map);
  __builtin_memcpy(&d, &map, sizeof d);
  return d;
}

}  // namespace ffpa::gpu
