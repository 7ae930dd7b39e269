// Variant "ffpa-bwd-sm90c": the Hopper backward on clusters of two blocks splitting D (wgmma),
// compiled by NVRTC at bind().
#include "variants/ffpa_bwd_sm90c.hpp"

#include "runner/tensors.hpp"
#include "variants/ffpa_bwd_sm90c_kernel.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa {
namespace {

struct Bwd90c {
  static constexpr const char* name = "ffpa-bwd-sm90c";
  static constexpr Pass pass = Pass::bwd;
  using Config = bwd90c::Config;
  static constexpr auto knob_names = bwd90c::knob_names;
  static constexpr auto default_config = bwd90c::default_config;
  static constexpr auto check = bwd90c::check;
  static constexpr auto compile = bwd90c::compile_for;
  static constexpr auto problem_check = bwd90c::problem_check;  // D <= 1024
  static constexpr auto device_check = ffpa_family::needs_sm90;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return bwd90c::bind(p, c, t.bwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_bwd_sm90c() {
  return std::make_unique<ffpa_family::FfpaVariant<Bwd90c>>();
}

}  // namespace ffpa
