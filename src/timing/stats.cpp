#include "timing/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ffpa {

void SampleSet::add(double ms, double sm_clock_mhz) {
  ms_.push_back(ms);
  clocks_.push_back(sm_clock_mhz);
  total_ms_ += ms;
  const double delta = ms - mean_;
  mean_ += delta / static_cast<double>(ms_.size());
  m2_ += delta * (ms - mean_);
  const double noise = rel_stdev();
  if (static_cast<int>(window_.size()) < kNoiseWindow) {
    window_.push_back(noise);
  } else {
    window_[window_pos_] = noise;
    window_pos_ = (window_pos_ + 1) % kNoiseWindow;
  }
}

double SampleSet::rel_stdev() const {
  const size_t n = ms_.size();
  if (n < 2 || mean_ <= 0) return 0;
  return std::sqrt(m2_ / static_cast<double>(n - 1)) / mean_;
}

StopReason stop_reason(const TimingOptions& opts, const SampleSet& s, double wall_s,
                       int max_samples) {
  const int n = s.count();
  if (n == 0) return StopReason::none;
  if (n >= opts.min_samples && s.total_s() >= opts.min_time) {
    const double noise = s.rel_stdev();
    if (noise * 100.0 <= opts.max_noise) return StopReason::converged;
    // nvbench: when the noise of the last samples varies by less than 5% around its current
    // value, more samples will not bring it under the target.
    const auto& w = s.noise_window();
    if (static_cast<int>(w.size()) > 64 && n % 16 == 0 && noise > 0) {
      double sq = 0;
      for (double x : w) sq += (x - noise) * (x - noise);
      const double spread = std::sqrt(sq / static_cast<double>(w.size() - 1)) / noise;
      if (spread < 0.05) return StopReason::plateau;
    }
  }
  if (n >= max_samples) return StopReason::cap;
  if (wall_s >= opts.timeout) return StopReason::timeout;
  return StopReason::none;
}

TimingStats summarize(const SampleSet& s, int default_clock_mhz, StopReason why) {
  TimingStats t;
  t.samples = s.count();
  t.timed_out = why == StopReason::timeout || why == StopReason::cap;
  if (t.samples == 0) return t;
  std::vector<double> v = s.ms();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  t.median_ms = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  t.min_ms = v.front();
  t.max_ms = v.back();
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  t.mean_ms = sum / static_cast<double>(n);
  if (n > 1) {
    double sq = 0;
    for (double x : v) sq += (x - t.mean_ms) * (x - t.mean_ms);
    t.stdev_ms = std::sqrt(sq / static_cast<double>(n - 1));
  }
  t.total_gpu_s = sum / 1e3;

  double clock_sum = 0;
  int read = 0;
  for (double c : s.clocks()) {
    if (c <= 0) continue;  // not read for this sample
    clock_sum += c;
    ++read;
    if (default_clock_mhz > 0 && c < kThrottleFraction * default_clock_mhz) ++t.throttled_samples;
  }
  t.sm_clock_mhz = read ? clock_sum / read : 0;
  return t;
}

}  // namespace ffpa
