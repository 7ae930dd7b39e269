// When to stop sampling and how to summarize the samples: host-only, so it is unit-tested without
// a GPU. The rule is nvbench's: at least `min_samples`, and once `min_time` seconds of GPU time
// are summed, stop as soon as the relative stdev is under `max_noise` percent, or when it has
// plateaued above it (an inherently noisy kernel never converges); a wall-clock `timeout` and a
// hard sample cap end everything else.
#pragma once

#include <cstdint>
#include <vector>

#include "core/results.hpp"
#include "timing/options.hpp"

namespace ffpa {

// Bounds host memory and the run time of very short kernels in hot mode.
constexpr int kMaxSamples = 100000;
// A sample counts as throttled when its SM clock is below this fraction of the default clock.
constexpr double kThrottleFraction = 0.75;

class SampleSet {
 public:
  // sm_clock_mhz = 0: not read.
  void add(double ms, double sm_clock_mhz);
  int count() const { return static_cast<int>(ms_.size()); }
  double total_s() const { return total_ms_ / 1e3; }
  // Relative standard deviation (stdev / mean, sample stdev), 0 below two samples.
  double rel_stdev() const;
  // Relative stdev after each of the last kNoiseWindow samples, in ring order (not by age).
  const std::vector<double>& noise_window() const { return window_; }
  const std::vector<double>& ms() const { return ms_; }
  const std::vector<double>& clocks() const { return clocks_; }

  static constexpr int kNoiseWindow = 512;

 private:
  std::vector<double> ms_, clocks_;
  double total_ms_ = 0;
  double mean_ = 0, m2_ = 0;  // Welford: the noise test runs after every sample
  std::vector<double> window_;
  int window_pos_ = 0;
};

enum class StopReason {
  none,       // keep sampling
  converged,  // noise under max_noise after min_samples and min_time
  plateau,    // noise stable above max_noise after min_samples and min_time
  timeout,    // wall clock ran out
  cap,        // max_samples reached
};

StopReason stop_reason(const TimingOptions&, const SampleSet&, double wall_s,
                       int max_samples = kMaxSamples);

// timed_out is set when the reason is timeout or cap: the noise target was not reached.
// default_clock_mhz = 0: throttling is not judged.
TimingStats summarize(const SampleSet&, int default_clock_mhz, StopReason);

}  // namespace ffpa
