// Variant "ffpa-bwd-decode": the backward for few query rows (group x Nq at most 16) on CUDA cores,
// compiled by NVRTC at bind().
#include "variants/ffpa_bwd_decode.hpp"

#include <string>

#include "core/error.hpp"
#include "ffpa_bwd_decode_layout.h"
#include "tensors/tensors.hpp"
#include "variants/ffpa_fwd_sm80.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::bwd_decode {
using namespace ffpa_family;

constexpr Knob<Config> kKnobs[] = {{"kb", &Config::kb}};

Support problem_check(const Problem& pr) {
  const auto& s = pr.shape;
  if (s.group() * s.Nq > kMaxRows)
    return Support::no("group x Nq = " + std::to_string(s.group() * s.Nq) +
                       ": ffpa-bwd-decode holds every query row of a kv head's group in one "
                       "block, at most " +
                       std::to_string(kMaxRows));
  if (s.D > kMaxD)
    return Support::no("D=" + std::to_string(s.D) + ": ffpa-bwd-decode takes D up to " +
                       std::to_string(kMaxD));
  return Support::yes();
}

const std::vector<std::string>& knob_names() {
  static const std::vector<std::string> names = ffpa_family::knob_names(kKnobs);
  return names;
}

Config Config::from_knobs(const Knobs& k) {
  return read_knobs(kKnobs, k);
}

Knobs Config::knobs() const {
  return knobs_of(kKnobs, *this);
}

Config default_config(const Problem&) {
  return Config{};  // 32 keys: twice the blocks of 64, and room for D = 1024
}

int smem_bytes(const Config& c, int D) {
  return ffpa_layout::bwd_decode_layout(D, c.kb).bytes;
}

Support check(const Config& c, int D, int smem_limit) {
  if (D % 8 || D > kMaxD)
    return Support::no("D=" + std::to_string(D) +
                       ": ffpa-bwd-decode needs D a multiple of 8, at most " +
                       std::to_string(kMaxD));
  if (c.kb != 32 && c.kb != 64) return Support::no("kb is 32 or 64");
  // S and dP of a thread's rows (16 x kb / 128) and the granules of one key: few registers.
  return check_resources(smem_bytes(c, D), smem_limit, Config::threads(), 64);
}

std::vector<std::string> nvrtc_options(const Config& c, const bwd::Features& f) {
  std::vector<std::string> o = knob_defines(kKnobs, c);  // FFPA_KB
  const std::vector<std::string> fd = f.defines();
  o.insert(o.end(), fd.begin(), fd.end());
  return o;
}

nvrtc::Compiled compile(const Config& c, const bwd::Features& f, const std::string& arch) {
  return nvrtc::compile("ffpa_bwd_decode.cuh", nvrtc_options(c, f), arch);
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  if (Support s = needs_sm80(dev); !s.ok()) throw Unsupported(s.reason);
  if (Support s = problem_check(pr); !s.ok()) throw Unsupported(s.reason);
  const int D = static_cast<int>(pr.shape.D);
  if (Support s = check(c, D, dev.smem_per_block_optin); !s.ok()) throw Unsupported(s.reason);
  nvrtc::Compiled comp = compile(c, bwd::Features::of(pr), fwd::target_arch(dev));
  refuse_spills(comp, "ffpa_bwd_decode_kernel");
  return comp;
}

std::unique_ptr<Op> bind(const Problem& pr, const Config& c, const FfpaBwdParams& params,
                         const gpu::DeviceInfo& dev) {
  if (!aligned(params.dk, {params.dk_batch_stride, params.dk_head_stride, params.dk_row_stride},
               8) ||
      !aligned(params.dv, {params.dv_batch_stride, params.dv_head_stride, params.dv_row_stride}, 8))
    throw Unsupported(
        "ffpa-bwd-decode stores 8 elements of dK and dV at once: their rows and "
        "strides must be 16-byte aligned");
  const nvrtc::Compiled comp = compile_for(pr, c, dev);
  return bwd::make_op(pr, comp, "ffpa_bwd_decode_kernel", c.kb, Config::threads(),
                      smem_bytes(c, static_cast<int>(pr.shape.D)), params, dev);
}

}  // namespace ffpa::bwd_decode

namespace ffpa {
namespace {

struct BwdDecode {
  static constexpr const char* name = "ffpa-bwd-decode";
  static constexpr Pass pass = Pass::bwd;
  using Config = bwd_decode::Config;
  static constexpr auto knob_names = bwd_decode::knob_names;
  static constexpr auto default_config = bwd_decode::default_config;
  static constexpr auto check = bwd_decode::check;
  static constexpr auto compile = bwd_decode::compile_for;
  static constexpr auto problem_check = bwd_decode::problem_check;  // group x Nq <= 16
  static constexpr auto device_check = ffpa_family::needs_sm80;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return bwd_decode::bind(p, c, t.bwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_bwd_decode() {
  return std::make_unique<ffpa_family::FfpaVariant<BwdDecode>>();
}

}  // namespace ffpa
