#include "runner/registry.hpp"

#include <algorithm>

#include "baselines/cudnn/cudnn_sdpa.hpp"
#include "baselines/unfused.hpp"
#include "core/error.hpp"
#include "variants/ffpa_bwd_decode.hpp"
#include "variants/ffpa_bwd_decode_sm90.hpp"
#include "variants/ffpa_bwd_sm80.hpp"
#include "variants/ffpa_bwd_sm90.hpp"
#include "variants/ffpa_bwd_sm90c.hpp"
#include "variants/ffpa_fwd_decode.hpp"
#include "variants/ffpa_fwd_sm80.hpp"
#include "variants/ffpa_fwd_sm90.hpp"
#include "variants/ffpa_fwd_sm90ws.hpp"

namespace ffpa {
namespace {

std::vector<std::unique_ptr<Variant>> make_variants() {
  std::vector<std::unique_ptr<Variant>> v;
  v.push_back(make_ffpa_fwd_sm80());
  v.push_back(make_ffpa_fwd_sm90());
  v.push_back(make_ffpa_fwd_sm90ws());
  v.push_back(make_ffpa_fwd_decode());
  v.push_back(make_ffpa_bwd_sm80());
  v.push_back(make_ffpa_bwd_sm90());
  v.push_back(make_ffpa_bwd_sm90c());
  v.push_back(make_ffpa_bwd_decode());
  v.push_back(make_ffpa_bwd_decode_sm90());
  return v;
}

std::vector<std::unique_ptr<Baseline>> make_baselines() {
  std::vector<std::unique_ptr<Baseline>> b;
  b.push_back(make_unfused_baseline());
  b.push_back(make_cudnn_baseline());
  return b;
}

}  // namespace

Registry Registry::make() {
  return {make_variants(), make_baselines()};
}

std::vector<Baseline*> selected_baselines(const Registry& reg, BaselineMode mode) {
  std::vector<Baseline*> out;
  const std::optional<BaselineId> only = single_baseline(mode);
  for (const auto& b : reg.baselines) {
    const bool take = mode == BaselineMode::best || mode == BaselineMode::all || b->id() == only;
    if (take) out.push_back(b.get());
  }
  return out;
}

std::vector<Variant*> selected_variants(const Registry& reg,
                                        const std::vector<std::string>& names) {
  std::vector<Variant*> out;
  for (const auto& v : reg.variants)
    if (names.empty() || std::find(names.begin(), names.end(), v->name()) != names.end())
      out.push_back(v.get());
  for (const auto& n : names) {
    const bool known = std::any_of(reg.variants.begin(), reg.variants.end(),
                                   [&](const auto& v) { return v->name() == n; });
    if (!known) {
      std::string valid;
      for (const auto& v : reg.variants) valid += (valid.empty() ? "" : ", ") + v->name();
      throw InputError(
          "command line", "--variant",
          "unknown variant '" + n + "' (registered: " + (valid.empty() ? "none" : valid) + ")");
    }
  }
  return out;
}

}  // namespace ffpa
