#include "report/progress.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "report/format.hpp"

namespace ffpa {

std::string progress_line(int i, int n, double elapsed_s, double eta_s, const std::string& what) {
  const int width = int(std::to_string(std::max(n, 0)).size());
  // Percent of items finished before this one.
  const int pct = n > 0 ? 100 * std::clamp(i - 1, 0, n) / n : 0;
  std::string line = fmt::format("[{:>{}}/{}] {:3}% elapsed {}, ETA {}", i, width, n, pct,
                                 format_duration(elapsed_s), format_duration(eta_s));
  if (!what.empty()) line += " | " + what;
  return line;
}

}  // namespace ffpa
