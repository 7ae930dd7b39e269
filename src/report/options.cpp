#include "report/options.hpp"

#include <algorithm>

namespace ffpa {

std::string to_string(BaselineMode m) {
  switch (m) {
    case BaselineMode::best:
      return "best";
    case BaselineMode::cudnn:
      return "cudnn";
    case BaselineMode::unfused:
      return "unfused";
    case BaselineMode::none:
      return "none";
    case BaselineMode::all:
      return "all";
  }
  return "?";
}

std::optional<BaselineMode> parse_baseline_mode(const std::string& s) {
  for (BaselineMode m : {BaselineMode::best, BaselineMode::cudnn, BaselineMode::unfused,
                         BaselineMode::none, BaselineMode::all})
    if (to_string(m) == s) return m;
  return std::nullopt;
}

std::optional<BaselineId> single_baseline(BaselineMode m) {
  if (m == BaselineMode::cudnn) return BaselineId::cudnn;
  if (m == BaselineMode::unfused) return BaselineId::unfused;
  return std::nullopt;
}

bool ReportOptions::wants(const std::string& format) const {
  return std::find(formats.begin(), formats.end(), format) != formats.end();
}

}  // namespace ffpa
