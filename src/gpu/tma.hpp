// TMA tensor maps (cuTensorMapEncodeTiled), encoded on the host for the kernels that load through
// the tensor-memory accelerator. The driver function is looked up at run time through the
// runtime's entry-point query, so the binary links no driver library.
#pragma once

#include <cstdint>

#include "params.h"

namespace ffpa::gpu {

// A [B, H, N, D] tensor of 16-bit elements (strides in elements), read in boxes of `box_rows`
// rows of 64 columns with the 128-byte swizzle the wgmma descriptors expect; boxes past N or D
// are zero-filled. The base and strides must be 16-byte aligned (RunError otherwise).
FfpaTmaDesc tma_rows_map(const void* base, bool bf16, int64_t D, int64_t N, int64_t H, int64_t B,
                         int64_t row_stride, int64_t head_stride, int64_t batch_stride,
                         int box_rows);

}  // namespace ffpa::gpu
