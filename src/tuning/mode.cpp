#include "tuning/mode.hpp"

#include <algorithm>

namespace ffpa {

std::string to_string(TuneMode m) {
  switch (m) {
    case TuneMode::none:
      return "none";
    case TuneMode::fast:
      return "fast";
    case TuneMode::max:
      return "max";
  }
  return "?";
}

std::optional<TuneMode> parse_tune_mode(const std::string& s) {
  for (TuneMode m : {TuneMode::none, TuneMode::fast, TuneMode::max})
    if (to_string(m) == s) return m;
  return std::nullopt;
}

TimingOptions search_timing(TimingOptions t) {
  t.min_samples = 3;
  t.min_time = 0.05;
  t.max_noise = 2.0;
  t.timeout = std::min(t.timeout, 3.0);
  t.warmup = 1;
  return t;
}

}  // namespace ffpa
