// Variant "ffpa-bwd-sm90": the Hopper split-D backward (wgmma), compiled by NVRTC at bind().
#include "variants/ffpa_bwd_sm90.hpp"

#include "tensors/tensors.hpp"
#include "variants/ffpa_bwd_sm90_kernel.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa {
namespace {

struct Bwd90 {
  static constexpr const char* name = "ffpa-bwd-sm90";
  static constexpr Pass pass = Pass::bwd;
  using Config = bwd90::Config;
  static constexpr auto knob_names = bwd90::knob_names;
  static constexpr auto default_config = bwd90::default_config;
  static constexpr auto check = bwd90::check;
  static constexpr auto compile = bwd90::compile_for;
  static constexpr auto problem_check = bwd90::problem_check;  // D <= 512
  static constexpr auto device_check = ffpa_family::needs_sm90;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return bwd90::bind(p, c, t.bwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_bwd_sm90() {
  return std::make_unique<ffpa_family::FfpaVariant<Bwd90>>();
}

}  // namespace ffpa
