// Host entry points of the timing kernels (kernels.cu). Each only enqueues on the stream;
// the caller checks the launch (gpu::check_launch).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ffpa::timing_kernels {

// Writes `bytes` of `buf` (16-byte aligned, size a multiple of 16) so that whatever the next
// launch reads comes from device memory, not L2.
void flush(void* buf, size_t bytes, uint32_t salt, cudaStream_t);

// One thread spins until *release (host memory, mapped) is non-zero or `timeout_ns` passed; in
// the latter case it sets *timed_out. Keeps the GPU busy while the host enqueues a sample so that
// the sample's events do not include host launch latency.
void hold(const volatile int* release, volatile int* timed_out, uint64_t timeout_ns, cudaStream_t);

// A kernel of known duration: `blocks` blocks each spin for `ns` nanoseconds of %globaltimer.
void spin(uint64_t ns, int blocks, cudaStream_t);

// Sums `bytes` of `buf` (16-byte aligned, size a multiple of 16) into *sink: a read whose time
// depends on where the data is (L2 or device memory).
void read(const void* buf, size_t bytes, float* sink, cudaStream_t);

}  // namespace ffpa::timing_kernels
