// What the report shows and writes; filled by the command line (--baseline, --format).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/types.hpp"

namespace ffpa {

// best: run cuDNN and unfused, show the faster per row (labelled); all: show both columns.
// The run reads it too: it decides which baselines are measured.
enum class BaselineMode { best, cudnn, unfused, none, all };

std::string to_string(BaselineMode);
std::optional<BaselineMode> parse_baseline_mode(const std::string&);
// The one baseline the modes cudnn and unfused measure; nullopt for best, all and none.
std::optional<BaselineId> single_baseline(BaselineMode);

struct ReportOptions {
  std::vector<std::string> formats = {"md", "json", "csv", "png"};
  bool wants(const std::string& format) const;
};

}  // namespace ffpa
