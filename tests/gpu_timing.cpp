// The timing harness on a real GPU: a kernel of known duration, the L2 flush, memory accounting.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>

#include "gpu/cuda.hpp"
#include "timing/kernels.hpp"
#include "timing/timer.hpp"

using namespace ffpa;

namespace {

const gpu::DeviceInfo& device() {
  static const gpu::DeviceInfo d = gpu::open_device(0);
  return d;
}

TimingOptions quick(bool cold) {
  TimingOptions o;
  o.cold = cold;
  o.min_samples = 20;
  o.max_noise = 0.5;
  o.min_time = 0.02;
  o.timeout = 10;
  return o;
}

void print(const char* what, const TimingStats& t) {
  std::printf("%-28s median %.4f ms  min %.4f  max %.4f  stdev %.2f%%  n=%d  clock %.0f MHz%s\n",
              what, t.median_ms, t.min_ms, t.max_ms, 100 * t.rel_stdev(), t.samples, t.sm_clock_mhz,
              t.timed_out ? "  (timed out)" : "");
}

}  // namespace

TEST_CASE("a kernel of known duration measures as such", "[gpu][timing]") {
  Timer timer(device(), quick(true));
  Timer hot(device(), quick(false));
  for (const uint64_t ns : {20'000ull, 200'000ull, 2'000'000ull}) {
    const double want_ms = ns / 1e6;
    auto launch = [&](cudaStream_t s) { timing_kernels::spin(ns, device().sm_count, s); };
    const TimingStats cold = timer.measure(launch);
    const TimingStats warm = hot.measure(launch);
    char label[64];
    std::snprintf(label, sizeof label, "spin %.3f ms cold", want_ms);
    print(label, cold);
    std::snprintf(label, sizeof label, "spin %.3f ms hot", want_ms);
    print(label, warm);
    INFO("spin of " << want_ms << " ms");
    // Spin loops end on the first timer tick past the target; launch ramp adds a few us
    // (2.7 us measured on the H200 for 132 blocks).
    CHECK(cold.median_ms >= want_ms * 0.99);
    CHECK(cold.median_ms <= want_ms * 1.03 + 0.006);
    CHECK(warm.median_ms >= want_ms * 0.99);
    CHECK(warm.median_ms <= want_ms * 1.03 + 0.006);
    CHECK(cold.samples >= 20);
    CHECK(cold.min_ms <= cold.median_ms);
    CHECK(cold.max_ms >= cold.median_ms);
    CHECK(cold.total_gpu_s >= 0.02);
    CHECK_FALSE(cold.timed_out);
  }
}

TEST_CASE("the SM clock is read when NVML is there", "[gpu][timing]") {
  Timer timer(device(), quick(true));
  const TimingStats t =
      timer.measure([](cudaStream_t s) { timing_kernels::spin(100'000, device().sm_count, s); });
  if (!timer.clock().available()) {
    WARN("SM clock not readable: " << timer.clock().why_not());
    CHECK(t.sm_clock_mhz == 0);
    return;
  }
  std::printf("SM clock %.0f MHz (default %d MHz), %d of %d samples throttled\n", t.sm_clock_mhz,
              device().max_clock_mhz, t.throttled_samples, t.samples);
  CHECK(t.sm_clock_mhz > 0);
  CHECK(t.sm_clock_mhz <= device().max_clock_mhz * 1.1);
}

TEST_CASE("the L2 flush makes a small read come from memory", "[gpu][timing]") {
  // A quarter of L2: fits (hot) but must be re-read from device memory after a flush (cold).
  const size_t bytes = static_cast<size_t>(device().l2_bytes / 4) / 16 * 16;
  gpu::DeviceBuffer buf(bytes), sink(sizeof(float));
  FFPA_CUDA(cudaMemset(buf.get(), 1, bytes));
  auto launch = [&](cudaStream_t s) {
    timing_kernels::read(buf.get(), bytes, sink.as<float>(), s);
  };
  Timer cold(device(), quick(true));
  Timer hot(device(), quick(false));
  const TimingStats c = cold.measure(launch);
  const TimingStats h = hot.measure(launch);
  print("read L2/4 cold", c);
  print("read L2/4 hot", h);
  CHECK(c.median_ms > 1.15 * h.median_ms);
}

TEST_CASE("a throwing launch does not leave the stream held", "[gpu][timing]") {
  Timer timer(device(), quick(true));
  int calls = 0;
  auto launch = [&](cudaStream_t s) {
    if (++calls == 3) throw RunError("launch failed on purpose");
    timing_kernels::spin(10'000, 1, s);
  };
  CHECK_THROWS_AS(timer.measure(launch), RunError);  // warmup 3: the third warmup throws
  TimingOptions o = quick(true);
  o.warmup = 1;
  Timer t2(device(), o);
  calls = 0;
  CHECK_THROWS_AS(t2.measure(launch), RunError);  // throws inside the held region (2nd sample)
  // The hold was released: the stream drains well before the hold's 5 s safety timeout.
  const auto t0 = std::chrono::steady_clock::now();
  FFPA_CUDA(cudaStreamSynchronize(t2.stream()));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0);
  // And the timer still works.
  const TimingStats t = t2.measure([](cudaStream_t s) { timing_kernels::spin(10'000, 1, s); });
  CHECK(t.samples >= 20);
}

TEST_CASE("device memory accounting follows DeviceBuffer", "[gpu][timing]") {
  (void)device();
  const int64_t base = gpu::memory_stats().current;
  gpu::reset_peak_memory();
  CHECK(gpu::memory_stats().peak == base);
  {
    gpu::DeviceBuffer a(64 << 20);
    CHECK(gpu::memory_stats().current == base + (64 << 20));
    {
      gpu::DeviceBuffer b(32 << 20);
      CHECK(gpu::memory_stats().current == base + (96 << 20));
    }
    CHECK(gpu::memory_stats().current == base + (64 << 20));
    gpu::DeviceBuffer moved = std::move(a);
    CHECK(gpu::memory_stats().current == base + (64 << 20));
  }
  CHECK(gpu::memory_stats().current == base);
  CHECK(gpu::memory_stats().peak == base + (96 << 20));
  gpu::reset_peak_memory();
  CHECK(gpu::memory_stats().peak == base);

  // The harness's own buffers (L2 flush) are not the row's memory.
  Timer timer(device(), quick(true));
  CHECK(gpu::memory_stats().current == base);
  CHECK(gpu::memory_stats().peak == base);
}
