#include "variants/registry.hpp"

#include "baselines/unfused.hpp"

#include "baselines/cudnn.hpp"
#include "variants/ffpa_bwd.hpp"
#include "variants/ffpa_bwd_sm90.hpp"
#include "variants/ffpa_bwd_sm90c.hpp"
#include "variants/ffpa_fwd.hpp"
#include "variants/ffpa_fwd_sm90.hpp"
#include "variants/ffpa_fwd_sm90ws.hpp"

namespace ffpa {

std::vector<std::unique_ptr<Variant>> make_variants() {
  std::vector<std::unique_ptr<Variant>> v;
  v.push_back(make_ffpa_fwd_sm80());
  v.push_back(make_ffpa_fwd_sm90());
  v.push_back(make_ffpa_fwd_sm90ws());
  v.push_back(make_ffpa_bwd_sm80());
  v.push_back(make_ffpa_bwd_sm90());
  v.push_back(make_ffpa_bwd_sm90c());
  return v;
}

std::vector<std::unique_ptr<Baseline>> make_baselines() {
  std::vector<std::unique_ptr<Baseline>> b;
  b.push_back(make_unfused_baseline());
  b.push_back(make_cudnn_baseline());
  return b;
}

}  // namespace ffpa
