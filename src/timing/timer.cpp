#include "timing/timer.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/clock.hpp"
#include "timing/kernels.hpp"

namespace ffpa {
namespace {

// The few NVML entry points used, declared here: no NVML header or library at build time.
using nvml_ret = int;
using nvml_dev = void*;
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

struct Nvml {
  nvml_ret (*init)() = nullptr;
  nvml_ret (*by_pci)(const char*, nvml_dev*) = nullptr;
  nvml_ret (*clock)(nvml_dev, int, unsigned*) = nullptr;
  nvml_ret (*driver)(char*, unsigned) = nullptr;  // optional
  std::string error;  // why NVML is unusable; empty when it loaded and initialized

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = "libnvidia-ml.so.1 not loadable";
      return;
    }
    init = reinterpret_cast<decltype(init)>(dlsym(lib, "nvmlInit_v2"));
    by_pci = reinterpret_cast<decltype(by_pci)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock = reinterpret_cast<decltype(clock)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    driver = reinterpret_cast<decltype(driver)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
    if (!init || !by_pci || !clock) {
      error = "NVML lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or nvmlDeviceGetClockInfo";
    } else if (const nvml_ret r = init(); r != 0) {
      error = "nvmlInit_v2 failed (" + std::to_string(r) + ")";
    }
    // The library stays loaded and initialized for the life of the process.
  }
};

const Nvml& nvml() {
  static const Nvml n;
  return n;
}

}  // namespace

std::string nvidia_driver_version() {
  const Nvml& n = nvml();
  char buf[96] = {};
  if (!n.error.empty() || !n.driver || n.driver(buf, sizeof buf) != 0) return {};
  return buf;
}

SmClock::SmClock(int ordinal) {
  const Nvml& n = nvml();
  if (!n.error.empty()) {
    why_not_ = n.error;
    return;
  }
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) != cudaSuccess) {
    cudaGetLastError();
    why_not_ = "PCI bus id of device " + std::to_string(ordinal) + " unknown";
    return;
  }
  nvml_dev d = nullptr;
  if (const nvml_ret r = n.by_pci(bus, &d); r != 0) {
    why_not_ = std::string("NVML does not know device ") + bus + " (" + std::to_string(r) + ")";
    return;
  }
  unsigned mhz = 0;
  if (const nvml_ret r = n.clock(d, kNvmlClockSm, &mhz); r != 0) {
    why_not_ = "NVML cannot read the SM clock (" + std::to_string(r) + ")";
    return;
  }
  device_ = d;
}

SmClock::~SmClock() = default;

unsigned SmClock::read() const {
  if (!device_) return 0;
  unsigned mhz = 0;
  return nvml().clock(device_, kNvmlClockSm, &mhz) == 0 ? mhz : 0;
}

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
