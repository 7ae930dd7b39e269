// The measurement harness, nvbench's method (ANCHORS.md "Timing the way nvbench does").
// Cold mode, per sample: flush L2, sync, hold the stream with a spin kernel, record start, launch,
// record stop, release the hold, read the SM clock, sync. The hold makes the GPU start the launch
// back to back with the start event, so host launch latency is not timed.
// Hot mode: no flush, no hold; samples are enqueued back to back in batches behind one untimed
// launch, each between its own pair of events, so the host stays ahead of the GPU.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/results.hpp"
#include "gpu/cuda.hpp"
#include "gpu/nvml.hpp"
#include "timing/options.hpp"
#include "timing/stats.hpp"

namespace ffpa {

class Timer {
 public:
  // Uses the current device (gpu::open_device selected it). Throws RunError if the flush buffer
  // or the pinned release flag cannot be allocated.
  Timer(const gpu::DeviceInfo&, const TimingOptions&);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Times `launch`, which must only enqueue work on the stream it is given (no synchronization:
  // in cold mode the stream is held while it runs). Warmup launches come first (at least one, so
  // that lazy module loading never happens behind a hold). Throws RunError on a failed launch or
  // when a launch did not return before the hold's safety timeout.
  TimingStats measure(const std::function<void(cudaStream_t)>& launch);
  // One launch between two events: no warmup, flush, hold or repeat (--profile, where a profiler
  // must capture exactly this launch). The statistics hold that one sample, marked timed_out.
  TimingStats once(const std::function<void(cudaStream_t)>& launch);
  cudaStream_t stream() const { return stream_.get(); }
  const SmClock& clock() const { return clock_; }

  // The hold kernel gives up after this long; a launch that takes longer to enqueue is an error.
  static constexpr double kHoldTimeoutS = 5.0;
  // Hot mode enqueues up to this many samples per synchronization, about kHotBatchMs of work.
  static constexpr int kMaxHotBatch = 64;
  static constexpr double kHotBatchMs = 10.0;

 private:
  struct Pinned;
  void sample_cold(const std::function<void(cudaStream_t)>& launch, SampleSet&);
  void sample_hot(const std::function<void(cudaStream_t)>& launch, SampleSet&, int batch);

  TimingOptions opts_;
  int default_clock_mhz_;
  gpu::Stream stream_;
  void* flush_buf_ = nullptr;  // raw cudaMalloc: harness memory is not the row's (memory_stats)
  size_t flush_bytes_ = 0;
  uint32_t flush_salt_ = 0;
  std::unique_ptr<Pinned> pinned_;
  std::vector<std::unique_ptr<gpu::Event>> events_;  // hot mode: one per sample boundary
  SmClock clock_;
};

}  // namespace ffpa
