// Variant "ffpa-bwd-sm90": the Hopper split-D backward (wgmma), compiled by NVRTC at bind().
#include "variants/ffpa_bwd_sm90.hpp"

#include <cstdint>
#include <utility>

#include "core/error.hpp"
#include "ffpa_bwd_sm90_layout.h"
#include "tensors/tensors.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::bwd90 {
using namespace ffpa_family;
namespace {

// Registers ptxas needs besides the accumulators (descriptors, row table, P/dS temporaries, the
// S and dP partials of phase 1), read off compiled configurations
// (tests/test_compile_ffpa_bwd_sm90): 41-66 at D = 512. A pre-filter only: refuse_spills() on
// ptxas's report decides.
constexpr int kRegisterOverhead = 48;

int padded(int D) {
  return padded_d(D, 128);
}

}  // namespace

constexpr Knob<Config> kKnobs[] = {{"panels", &Config::panels},
                                   {"split", &Config::split},
                                   {"pair", &Config::pair},
                                   {"dqbuf", &Config::dqbuf}};

Support problem_check(const Problem& pr) {
  const int64_t D = pr.shape.D;
  if (D > kMaxD)
    return Support::no("D=" + std::to_string(D) +
                       ": ffpa-bwd-sm90 keeps dK and dV in registers, D must be " + "at most " +
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

Config default_config(const Problem& pr) {
  Config c;  // one barrier per 64-column panel: phase 1 starts on the first one
  // D padded to 512: two panels a group, 73.4 ms against 78.9 at D=512 on the H200
  // (--tune fast, results/h200/2026-12-02c/default-tune): fewer barriers beat the earlier start.
  if (padded(static_cast<int>(pr.shape.D)) == 512) c.panels = 2;
  return c;
}

int smem_bytes(const Config& c, int D) {
  return ffpa_layout::bwd_sm90_layout(padded(D), c.split).bytes;
}

int accumulator_registers(const Config& c, int D) {
  // dV^T and dK^T (2 x DP/2 x 32 over 128 threads), the dQ chunks (64 x 64 over 128 each; two
  // live at once only from 3 chunks a warpgroup up)
  return padded(D) / 4 + 32 * (c.dqbuf == 2 && padded(D) / 128 >= 3 ? 2 : 1);
}

Support check(const Config& c, int D, int smem_limit) {
  auto s = [](int v) { return std::to_string(v); };
  if (D % 8 || D > kMaxD)
    return Support::no(
        "D=" + s(D) +
        ": ffpa-bwd-sm90 keeps dK and dV in registers, D must be a multiple of 8, at most " +
        s(kMaxD));
  if (c.split != 0 && c.split != 1) return Support::no("split is 0 or 1");
  if (c.pair != 0 && c.pair != 1) return Support::no("pair is 0 or 1");
  if (c.dqbuf != 1 && c.dqbuf != 2) return Support::no("dqbuf is 1 or 2");
  if (c.pair && c.split)
    return Support::no("pair needs split=0 (it borrows the block-synchronous exchange buffer)");
  if (c.panels < 1 || (padded(D) / 128) % c.panels)
    return Support::no("panels=" + s(c.panels) + " must divide " + s(padded(D) / 128) +
                       " (the 64-column panels of a warpgroup's half of D)");
  return check_resources(smem_bytes(c, D), smem_limit, Config::threads(),
                         accumulator_registers(c, D) + kRegisterOverhead);
}

std::vector<std::string> nvrtc_options(const Config& c, const bwd::Features& f) {
  // FFPA_PANELS, FFPA_SPLIT, FFPA_PAIR, FFPA_DQBUF
  std::vector<std::string> o = knob_defines(kKnobs, c);
  const std::vector<std::string> fd = f.defines();
  o.insert(o.end(), fd.begin(), fd.end());
  return o;
}

nvrtc::Compiled compile(const Config& c, const bwd::Features& f) {
  return nvrtc::compile("ffpa_bwd_sm90.cuh", nvrtc_options(c, f), "sm_90a");
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  if (Support s = needs_sm90(dev); !s.ok()) throw Unsupported(s.reason);
  if (Support s = problem_check(pr); !s.ok()) throw Unsupported(s.reason);
  const int D = static_cast<int>(pr.shape.D);
  if (Support s = check(c, D, dev.smem_per_block_optin); !s.ok()) throw Unsupported(s.reason);
  nvrtc::Compiled comp = compile(c, bwd::Features::of(pr));
  refuse_spills(comp, "ffpa_bwd_sm90_kernel");
  return comp;
}

std::unique_ptr<Op> bind(const Problem& pr, const Config& c, const FfpaBwdParams& params,
                         const gpu::DeviceInfo& dev) {
  const nvrtc::Compiled comp = compile_for(pr, c, dev);
  return bwd::make_op(pr, comp, "ffpa_bwd_sm90_kernel", Config::Bc, Config::threads(),
                      smem_bytes(c, static_cast<int>(pr.shape.D)), params, dev, c.pair ? 2 : 1);
}

}  // namespace ffpa::bwd90

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
