// Variant "ffpa-fwd-sm90ws": the warp-specialized Hopper forward (TMA producer, two wgmma
// consumers), compiled by NVRTC at bind().
#include "variants/ffpa_fwd_sm90ws.hpp"

#include "runner/tensors.hpp"
#include "variants/ffpa_fwd_sm90ws_kernel.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa {
namespace {

struct Fwd90ws {
  static constexpr const char* name = "ffpa-fwd-sm90ws";
  static constexpr Pass pass = Pass::fwd;
  using Config = fwd90ws::Config;
  static constexpr auto knob_names = fwd90ws::knob_names;
  static constexpr auto default_config = fwd90ws::default_config;
  static constexpr auto check = fwd90ws::check;
  static constexpr auto compile = fwd90ws::compile_for;
  static constexpr auto problem_check = fwd90ws::problem_check;  // 72 <= D <= 512, 128+ rows
  static constexpr auto device_check = ffpa_family::needs_sm90;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return fwd90ws::bind(p, c, t.fwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_fwd_sm90ws() {
  return std::make_unique<ffpa_family::FfpaVariant<Fwd90ws>>();
}

}  // namespace ffpa
