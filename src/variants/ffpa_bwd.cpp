// Variant "ffpa-bwd-sm80": the portable split-D backward (mma.sync), compiled by NVRTC at bind().
#include "variants/ffpa_bwd.hpp"

#include "tensors/tensors.hpp"
#include "variants/ffpa_bwd_kernel.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa {
namespace {

struct Bwd {
  static constexpr const char* name = "ffpa-bwd-sm80";
  static constexpr Pass pass = Pass::bwd;
  using Config = bwd::Config;
  static constexpr auto knob_names = bwd::knob_names;
  static constexpr auto default_config = bwd::default_config;
  static constexpr auto check = bwd::check;
  static constexpr auto compile = bwd::compile_for;
  static constexpr auto problem_check = ffpa_family::any_problem;
  static constexpr auto device_check = ffpa_family::needs_sm80;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return bwd::bind(p, c, t.bwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_bwd_sm80() {
  return std::make_unique<ffpa_family::FfpaVariant<Bwd>>();
}

}  // namespace ffpa
