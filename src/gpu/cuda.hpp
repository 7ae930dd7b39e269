// Small RAII owners of CUDA resources and the error check every CUDA call goes through.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace ffpa::gpu {

[[noreturn]] void fail(cudaError_t err, const char* expr, const char* file, int line);

#define FFPA_CUDA(expr)                                                                    \
  do {                                                                                     \
    cudaError_t ffpa_err_ = (expr);                                                        \
    if (ffpa_err_ != cudaSuccess) ::ffpa::gpu::fail(ffpa_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// Throws RunError after a launch that did not start or a kernel that faulted.
void check_launch(const char* what);

// Whether a usable GPU is present (false on CI machines: no driver, or no device).
bool available();

// Launches kernel `fn` on `s` with `smem` bytes of dynamic shared memory. early: by programmatic
// dependent launch (sm_90 and later only): the kernel may start before the previous kernel of the
// stream has completed, once that one's blocks have all started or called
// griddepcontrol.launch_dependents, and it must execute griddepcontrol.wait
// (kernels/ffpa_common.cuh: grid_dependency_wait) before it touches anything that kernel writes or
// reads. Saves a launch's latency between kernels that depend on each other. cluster > 0: blocks
// in clusters of that many along x (the launch attribute; 0: none).
void launch(const void* fn, dim3 grid, dim3 block, size_t smem, cudaStream_t s, void** args,
            bool early = false, unsigned cluster = 0);

// How many CTAs of fn (cluster <= 1), or clusters of `cluster` CTAs (compiled in with
// __cluster_dims__ or launched with the attribute), are resident at once on `sm_count`
// multiprocessors of the current device (fewer than it has: a share of them, as tests assume).
int64_t resident(const void* fn, int threads, size_t smem, unsigned cluster, int sm_count);

// Device-memory accounting over every DeviceBuffer: what the tool itself holds, and the peak since
// the last reset. Library-internal allocations (cuDNN, cuBLAS handles) are not seen here.
struct MemoryStats {
  int64_t current = 0;
  int64_t peak = 0;
};
MemoryStats memory_stats();
void reset_peak_memory();

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void release();
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void sync() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t s) const;
  // Milliseconds from start to this event; both must have completed.
  float since(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t global_mem_bytes = 0;
  int smem_per_block_optin = 0;
  int regs_per_sm = 0;
  int max_clock_mhz = 0;  // default (boost) SM clock reported by the driver
  int memory_clock_mhz = 0;
  int memory_bus_bits = 0;
  int driver_version = 0;   // cudaDriverGetVersion
  int runtime_version = 0;  // cudaRuntimeGetVersion
  std::string arch() const { return "sm_" + std::to_string(sm_major) + std::to_string(sm_minor); }
};

// Devices the runtime sees (CUDA_VISIBLE_DEVICES applies), without selecting one. Throws
// RunError ("no usable GPU: " and why) when there is none.
int device_count();

// Selects the device and reads its properties; throws RunError without a usable GPU.
DeviceInfo open_device(int ordinal);

// The properties that decide compilation (arch, multiprocessors, opt-in shared memory) of a GPU
// named by its arch, for compiling without one: sm_80 (A100), sm_86 (RTX 3090), sm_89 (RTX 4090),
// sm_90a (H100/H200). Empty name when the arch is not one of these.
DeviceInfo known_device(const std::string& arch);
std::vector<std::string> known_archs();

}  // namespace ffpa::gpu
