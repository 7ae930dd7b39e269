// How hard the tuner searches (--tune) and how it times the configurations it ranks.
#pragma once

#include <optional>
#include <string>

#include "timing/options.hpp"

namespace ffpa {

// none: the cached best or the variant's default; fast / max: the grid's fast subset / every point.
enum class TuneMode { none, fast, max };

std::string to_string(TuneMode);
std::optional<TuneMode> parse_tune_mode(const std::string&);

// Grid points are ranked with a short measurement derived from the run's timing; the winner is
// then re-timed with the run's own.
TimingOptions search_timing(TimingOptions run);

}  // namespace ffpa
