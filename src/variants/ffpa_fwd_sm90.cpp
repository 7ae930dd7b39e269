// Variant "ffpa-fwd-sm90": the Hopper split-D forward (wgmma), compiled by NVRTC at bind().
#include "variants/ffpa_fwd_sm90.hpp"

#include <string>

#include "runner/tensors.hpp"
#include "variants/ffpa_fwd_sm90_kernel.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa {
namespace {

struct Fwd90 {
  static constexpr const char* name = "ffpa-fwd-sm90";
  static constexpr Pass pass = Pass::fwd;
  using Config = fwd90::Config;
  static constexpr auto knob_names = fwd90::knob_names;
  static constexpr auto default_config = fwd90::default_config;
  static constexpr auto check = fwd90::check;
  static constexpr auto compile = fwd90::compile_for;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return fwd90::bind(p, c, t.fwd_params(), d);
  }
};

// The family's support surface narrowed to what this kernel handles: Hopper, D <= 512, bias and
// dropout up to D = 384.
class Fwd90Variant : public ffpa_family::FfpaVariant<Fwd90> {
 public:
  Support supports(const Problem& p) const override {
    if (Support s = FfpaVariant::supports(p); !s.ok()) return s;
    const std::string why = fwd90::problem_check(p);
    return why.empty() ? Support::yes() : Support::no(why);
  }
  Support supports(const Problem& p, const Knobs& k, const gpu::DeviceInfo& d) const override {
    if (d.sm_major != 9) return Support::no("ffpa-fwd-sm90 needs sm_90 (wgmma)");
    return FfpaVariant::supports(p, k, d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_fwd_sm90() {
  return std::make_unique<Fwd90Variant>();
}

}  // namespace ffpa
