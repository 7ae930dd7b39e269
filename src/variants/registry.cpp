#include "variants/registry.hpp"

#include "baselines/unfused.hpp"

#include "baselines/cudnn.hpp"

namespace ffpa {

std::vector<std::unique_ptr<Variant>> make_variants() {
  std::vector<std::unique_ptr<Variant>> v;
  return v;
}

std::vector<std::unique_ptr<Baseline>> make_baselines() {
  std::vector<std::unique_ptr<Baseline>> b;
  b.push_back(make_unfused_baseline());
  b.push_back(make_cudnn_baseline());
  return b;
}

}  // namespace ffpa
