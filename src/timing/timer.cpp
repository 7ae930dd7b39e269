#include "timing/timer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/clock.hpp"
#include "timing/kernels.hpp"

namespace ffpa {

// Two ints in mapped pinned host memory: the hold's release flag and its timed-out report.
struct Timer::Pinned {
  int* host = nullptr;
  int* dev = nullptr;
  Pinned() {
    FFPA_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&host), 2 * sizeof(int),
                            cudaHostAllocMapped | cudaHostAllocPortable));
    FFPA_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), host, 0));
    host[0] = 1;
    host[1] = 0;
  }
  ~Pinned() { cudaFreeHost(host); }
  volatile int& release() { return *static_cast<volatile int*>(host); }
  volatile int& timed_out() { return *static_cast<volatile int*>(host + 1); }
};

Timer::Timer(const gpu::DeviceInfo& dev, const TimingOptions& opts)
    : opts_(opts),
      default_clock_mhz_(dev.max_clock_mhz),
      pinned_(std::make_unique<Pinned>()),
      clock_(dev.ordinal) {
  // Twice the L2: its replacement is not strict LRU, one L2-sized pass leaves lines resident.
  flush_bytes_ = static_cast<size_t>(std::max<int64_t>(dev.l2_bytes, 1 << 20)) * 2;
  flush_bytes_ = (flush_bytes_ + 15) / 16 * 16;
  if (cudaMalloc(&flush_buf_, flush_bytes_) != cudaSuccess) {
    cudaGetLastError();
    flush_buf_ = nullptr;
    throw RunError("cannot allocate the " + std::to_string(flush_bytes_ >> 20) +
                   " MiB L2 flush buffer");
  }
  for (int i = 0; i <= kMaxHotBatch; ++i) events_.push_back(std::make_unique<gpu::Event>());
}

Timer::~Timer() {
  pinned_->release() = 1;
  cudaStreamSynchronize(stream_.get());
  cudaFree(flush_buf_);
}

TimingStats Timer::measure(const std::function<void(cudaStream_t)>& launch) {
  const auto t0 = std::chrono::steady_clock::now();
  const cudaStream_t s = stream_.get();
  for (int i = 0; i < std::max(1, opts_.warmup); ++i) {
    launch(s);
    gpu::check_launch("warmup launch");
  }
  stream_.sync();

  SampleSet samples;
  StopReason why = StopReason::none;
  while (why == StopReason::none) {
    if (opts_.cold) {
      sample_cold(launch, samples);
    } else {
      // About kHotBatchMs of work per synchronization; one sample first, to learn the duration.
      int batch = 1;
      if (samples.count() > 0) {
        const double mean_ms = samples.total_s() * 1e3 / samples.count();
        batch = static_cast<int>(std::clamp(kHotBatchMs / std::max(mean_ms, 1e-6), 1.0,
                                            static_cast<double>(kMaxHotBatch)));
      }
      sample_hot(launch, samples, std::min(batch, kMaxSamples - samples.count()));
    }
    why = stop_reason(opts_, samples, seconds_since(t0));
  }
  return summarize(samples, default_clock_mhz_, why);
}

TimingStats Timer::once(const std::function<void(cudaStream_t)>& launch) {
  const cudaStream_t s = stream_.get();
  events_[0]->record(s);
  launch(s);
  gpu::check_launch("profiled launch");
  events_[1]->record(s);
  const unsigned mhz = clock_.read();
  stream_.sync();
  SampleSet samples;
  samples.add(events_[1]->since(*events_[0]), mhz);
  return summarize(samples, default_clock_mhz_, StopReason::cap);
}

void Timer::sample_cold(const std::function<void(cudaStream_t)>& launch, SampleSet& samples) {
  const cudaStream_t s = stream_.get();
  timing_kernels::flush(flush_buf_, flush_bytes_, ++flush_salt_, s);
  gpu::check_launch("L2 flush");
  stream_.sync();

  Pinned& p = *pinned_;
  p.release() = 0;
  p.timed_out() = 0;
  timing_kernels::hold(p.dev, p.dev + 1, static_cast<uint64_t>(kHoldTimeoutS * 1e9), s);
  // Released however this scope ends: a throwing launch must not leave the GPU spinning.
  struct Release {
    Pinned& p;
    ~Release() { p.release() = 1; }
  };
  const gpu::Event& start = *events_[0];
  const gpu::Event& stop = *events_[1];
  {
    Release guard{p};
    gpu::check_launch("stream hold");
    start.record(s);
    launch(s);
    gpu::check_launch("timed launch");
    stop.record(s);
  }
  const unsigned mhz = clock_.read();  // while the timed launch runs
  stream_.sync();
  if (p.timed_out())
    throw RunError("the launch took more than " + std::to_string(static_cast<int>(kHoldTimeoutS)) +
                   " s to enqueue while the stream was held: it must not synchronize");
  samples.add(stop.since(start), mhz);
}

void Timer::sample_hot(const std::function<void(cudaStream_t)>& launch, SampleSet& samples,
                       int batch) {
  const cudaStream_t s = stream_.get();
  // The untimed lead launch keeps the GPU busy while the host enqueues the timed ones.
  launch(s);
  gpu::check_launch("lead launch");
  events_[0]->record(s);
  for (int i = 0; i < batch; ++i) {
    launch(s);
    gpu::check_launch("timed launch");
    events_[i + 1]->record(s);
  }
  const unsigned mhz = clock_.read();
  stream_.sync();
  for (int i = 0; i < batch; ++i) samples.add(events_[i + 1]->since(*events_[i]), mhz);
}

}  // namespace ffpa
