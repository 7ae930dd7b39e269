#include "variants/registry.hpp"

namespace ffpa {

std::vector<std::unique_ptr<Variant>> make_variants() {
  std::vector<std::unique_ptr<Variant>> v;
  return v;
}

std::vector<std::unique_ptr<Baseline>> make_baselines() {
  std::vector<std::unique_ptr<Baseline>> b;
  return b;
}

}  // namespace ffpa
