// The one place that lists every FFPA variant and baseline the tool knows, and the selections
// of them a run makes (--variant, --baseline).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "report/options.hpp"
#include "variants/op.hpp"

namespace ffpa {

struct Registry {
  std::vector<std::unique_ptr<Variant>> variants;
  std::vector<std::unique_ptr<Baseline>> baselines;
  static Registry make();  // every registered variant and baseline
};

// Baselines that run for a mode ("best" and "all" run all of them).
std::vector<Baseline*> selected_baselines(const Registry&, BaselineMode);
// Variants selected by --variant (all when empty); throws InputError for an unknown name.
std::vector<Variant*> selected_variants(const Registry&, const std::vector<std::string>& names);

}  // namespace ffpa
