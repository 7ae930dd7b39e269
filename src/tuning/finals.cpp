#include "tuning/finals.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace ffpa {

std::vector<size_t> finalists(const std::vector<double>& first_ms, size_t count) {
  std::vector<size_t> timed;
  for (size_t i = 0; i < first_ms.size(); ++i)
    if (first_ms[i] > 0) timed.push_back(i);
  std::stable_sort(timed.begin(), timed.end(),
                   [&](size_t a, size_t b) { return first_ms[a] < first_ms[b]; });
  if (timed.size() > count) timed.resize(count);
  return timed;
}

std::vector<size_t> final_order(size_t entrants, int rounds) {
  std::vector<size_t> order;
  if (entrants < 2) return order;
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < entrants; ++i) order.push_back(r % 2 == 0 ? i : entrants - 1 - i);
  return order;
}

size_t final_winner(const std::vector<std::vector<double>>& rounds_ms) {
  auto mean = [](const std::vector<double>& v) {
    return v.empty() ? std::numeric_limits<double>::infinity()
                     : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  };
  size_t best = 0;
  for (size_t i = 1; i < rounds_ms.size(); ++i)
    if (mean(rounds_ms[i]) < mean(rounds_ms[best])) best = i;
  return best;
}

}  // namespace ffpa
