// The one place that lists every FFPA variant and baseline the tool knows.
#pragma once

#include <memory>
#include <vector>

#include "variants/op.hpp"

namespace ffpa {

std::vector<std::unique_ptr<Variant>> make_variants();
std::vector<std::unique_ptr<Baseline>> make_baselines();

}  // namespace ffpa
