// How long and how carefully one measurement samples; filled by the command line (--cold/--hot,
// --min-samples, --max-noise, --min-time, --timeout) and by the tuning search's shorter policy.
#pragma once

namespace ffpa {

struct TimingOptions {
  bool cold = true;  // flush L2 and hold the stream before each sample
  int min_samples = 10;
  double max_noise = 0.5;  // target relative stdev, percent
  double min_time = 0.5;   // seconds of GPU time before the noise target may stop sampling
  double timeout = 15.0;   // seconds per measurement, wall clock
  int warmup = 3;
};

}  // namespace ffpa
