// Variant "ffpa-fwd-sm80": the portable split-D forward (mma.sync), compiled by NVRTC at bind().
#include "variants/ffpa_fwd.hpp"

#include "tensors/tensors.hpp"
#include "variants/ffpa_fwd_kernel.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa {
namespace {

struct Fwd {
  static constexpr const char* name = "ffpa-fwd-sm80";
  static constexpr Pass pass = Pass::fwd;
  using Config = fwd::Config;
  static constexpr auto knob_names = fwd::knob_names;
  static constexpr auto default_config = fwd::default_config;
  static constexpr auto check = fwd::check;
  static constexpr auto compile = fwd::compile_for;
  static constexpr auto problem_check = ffpa_family::any_problem;
  static constexpr auto device_check = ffpa_family::needs_sm80;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return fwd::bind(p, c, t.fwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_fwd_sm80() {
  return std::make_unique<ffpa_family::FfpaVariant<Fwd>>();
}

}  // namespace ffpa
