// Stopping rule and statistics of the timing harness (host only).
#include <catch2/catch.hpp>

#include <cmath>

#include "timing/stats.hpp"

using namespace ffpa;

namespace {

TimingOptions opts(int min_samples, double max_noise, double min_time, double timeout) {
  TimingOptions o;
  o.min_samples = min_samples;
  o.max_noise = max_noise;
  o.min_time = min_time;
  o.timeout = timeout;
  return o;
}

// Alternates mean*(1 - a) and mean*(1 + a): relative stdev ~ a.
void add_alternating(SampleSet& s, int n, double mean, double a, double clock = 0) {
  for (int i = 0; i < n; ++i) s.add(mean * (i % 2 ? 1 + a : 1 - a), clock);
}

}  // namespace

TEST_CASE("no samples never stop, even past the timeout", "[timing]") {
  SampleSet s;
  CHECK(stop_reason(opts(10, 0.5, 0.0, 1.0), s, 100.0) == StopReason::none);
}

TEST_CASE("stop needs min_samples", "[timing]") {
  const TimingOptions o = opts(10, 0.5, 0.0, 100.0);
  SampleSet s;
  for (int i = 0; i < 9; ++i) s.add(1.0, 0);
  CHECK(stop_reason(o, s, 0.1) == StopReason::none);
  s.add(1.0, 0);
  CHECK(stop_reason(o, s, 0.1) == StopReason::converged);
}

TEST_CASE("stop needs min_time of summed GPU time", "[timing]") {
  const TimingOptions o = opts(3, 0.5, 0.05, 100.0);  // 50 ms
  SampleSet s;
  for (int i = 0; i < 49; ++i) s.add(1.0, 0);  // 49 ms, noiseless
  CHECK(stop_reason(o, s, 0.1) == StopReason::none);
  s.add(1.0, 0);
  CHECK(s.total_s() == Approx(0.05));
  CHECK(stop_reason(o, s, 0.1) == StopReason::converged);
}

TEST_CASE("stop needs noise under max_noise", "[timing]") {
  SampleSet s;
  add_alternating(s, 20, 1.0, 0.01);  // ~1% relative stdev
  CHECK(s.rel_stdev() == Approx(0.01).epsilon(0.05));
  CHECK(stop_reason(opts(10, 0.5, 0.0, 100.0), s, 0.1) == StopReason::none);
  CHECK(stop_reason(opts(10, 2.0, 0.0, 100.0), s, 0.1) == StopReason::converged);
}

TEST_CASE("timeout stops a noisy measurement and marks it", "[timing]") {
  const TimingOptions o = opts(10, 0.5, 0.0, 2.0);
  SampleSet s;
  add_alternating(s, 20, 1.0, 0.05);
  CHECK(stop_reason(o, s, 1.9) == StopReason::none);
  CHECK(stop_reason(o, s, 2.0) == StopReason::timeout);
  CHECK(summarize(s, 0, StopReason::timeout).timed_out);
  CHECK_FALSE(summarize(s, 0, StopReason::converged).timed_out);
}

TEST_CASE("timeout stops before min_samples", "[timing]") {
  SampleSet s;
  s.add(3000.0, 0);
  CHECK(stop_reason(opts(10, 0.5, 0.5, 2.0), s, 3.0) == StopReason::timeout);
}

TEST_CASE("a converged measurement is not reported as timed out", "[timing]") {
  SampleSet s;
  for (int i = 0; i < 10; ++i) s.add(1.0, 0);
  CHECK(stop_reason(opts(10, 0.5, 0.0, 1.0), s, 5.0) == StopReason::converged);
}

TEST_CASE("hard sample cap", "[timing]") {
  const TimingOptions o = opts(10, 0.0, 0.0, 1e9);  // target unreachable
  SampleSet s;
  add_alternating(s, 99, 1.0, 0.05);
  CHECK(stop_reason(o, s, 0.0, 100) == StopReason::none);
  s.add(1.0, 0);
  CHECK(stop_reason(o, s, 0.0, 100) == StopReason::cap);
  CHECK(summarize(s, 0, StopReason::cap).timed_out);
}

TEST_CASE("noise that plateaus above the target stops sampling", "[timing]") {
  const TimingOptions o = opts(10, 0.5, 0.0, 1e9);
  SampleSet s;
  // Stable ~5% noise: after the window fills, its spread around the current noise is tiny.
  StopReason why = StopReason::none;
  int n = 0;
  while (why == StopReason::none && n < 5000) {
    s.add(1.0 + (n % 2 ? 0.05 : -0.05), 0);
    ++n;
    why = stop_reason(o, s, 0.0);
  }
  CHECK(why == StopReason::plateau);
  CHECK(n > 64);
  CHECK(n < 5000);
  CHECK_FALSE(summarize(s, 0, why).timed_out);
}

TEST_CASE("noise that is still falling fast is no plateau", "[timing]") {
  const TimingOptions o = opts(10, 0.5, 0.0, 1e9);
  SampleSet s;
  add_alternating(s, 100, 1.0, 0.05);
  // Exact samples after noisy ones: the noise falls from ~5% to ~2.9% over the window.
  for (int n = 100; n < 300; ++n) {
    s.add(1.0, 0);
    REQUIRE(stop_reason(o, s, 0.0) == StopReason::none);
  }
  CHECK(s.rel_stdev() > 0.02);
}

TEST_CASE("summary statistics", "[timing]") {
  SampleSet s;
  for (double ms : {4.0, 1.0, 3.0, 2.0}) s.add(ms, 0);
  const TimingStats t = summarize(s, 0, StopReason::converged);
  CHECK(t.samples == 4);
  CHECK(t.median_ms == Approx(2.5));
  CHECK(t.mean_ms == Approx(2.5));
  CHECK(t.min_ms == 1.0);
  CHECK(t.max_ms == 4.0);
  CHECK(t.stdev_ms == Approx(std::sqrt(5.0 / 3.0)));  // sample stdev
  CHECK(t.total_gpu_s == Approx(0.010));
  CHECK(t.rel_stdev() == Approx(std::sqrt(5.0 / 3.0) / 2.5));
  CHECK(s.rel_stdev() == Approx(t.rel_stdev()));

  s.add(10.0, 0);
  CHECK(summarize(s, 0, StopReason::converged).median_ms == 3.0);  // odd count
}

TEST_CASE("summary of one sample and of none", "[timing]") {
  SampleSet s;
  CHECK(summarize(s, 1980, StopReason::timeout).samples == 0);
  s.add(7.0, 1980);
  const TimingStats t = summarize(s, 1980, StopReason::timeout);
  CHECK(t.median_ms == 7.0);
  CHECK(t.stdev_ms == 0.0);
  CHECK(t.timed_out);
}

TEST_CASE("SM clock: mean over read samples, throttled below 75% of the default", "[timing]") {
  SampleSet s;
  s.add(1.0, 1980);
  s.add(1.0, 1485);  // exactly 75%: not throttled
  s.add(1.0, 1484);
  s.add(1.0, 0);  // not read: neither averaged nor throttled
  TimingStats t = summarize(s, 1980, StopReason::converged);
  CHECK(t.sm_clock_mhz == Approx((1980.0 + 1485 + 1484) / 3));
  CHECK(t.throttled_samples == 1);
  t = summarize(s, 0, StopReason::converged);  // default clock unknown
  CHECK(t.throttled_samples == 0);

  SampleSet none;
  none.add(1.0, 0);
  CHECK(summarize(none, 1980, StopReason::converged).sm_clock_mhz == 0);
}
