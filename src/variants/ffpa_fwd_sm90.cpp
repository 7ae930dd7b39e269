// Variant "ffpa-fwd-sm90": the Hopper split-D forward (wgmma), compiled by NVRTC at bind().
#include "variants/ffpa_fwd_sm90.hpp"

#include "tensors/tensors.hpp"
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
  static constexpr auto problem_check = fwd90::problem_check;  // D <= 512
  static constexpr auto device_check = ffpa_family::needs_sm90;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return fwd90::bind(p, c, t.fwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_fwd_sm90() {
  return std::make_unique<ffpa_family::FfpaVariant<Fwd90>>();
}

}  // namespace ffpa
