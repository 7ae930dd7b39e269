// Variant "ffpa-bwd-sm90c": the Hopper backward on clusters of two blocks splitting D (wgmma),
// compiled by NVRTC at bind().
#include "variants/ffpa_bwd_sm90c.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/error.hpp"
#include "ffpa_bwd_sm90c_layout.h"
#include "tensors/tensors.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::bwd90c {
using namespace ffpa_family;
namespace {

// Registers ptxas needs besides the accumulators (descriptors, row table, P/dS temporaries), as
// for ffpa-bwd-sm90. A pre-filter only: refuse_spills() on ptxas's report decides.
constexpr int kRegisterOverhead = 48;

int padded(int D) {
  return padded_d(D, 256);  // four quarters, each on whole 64-column panels of shared memory
}
int quarter_panels(int D) {
  return padded(D) / 256;
}
// Columns of a warpgroup's quarter of D: bc = 64 keeps dK and dV key-major (N = the quarter, D
// rounded up to 64); with 32 keys they are transposed (M = the quarter, D padded to 256).
int quarter(int D, int bc) {
  return padded_d(D, bc == 64 ? 64 : 256) / 4;
}

}  // namespace

constexpr Knob<Config> kKnobs[] = {{"bc", &Config::bc},
                                   {"panels", &Config::panels},
                                   {"dqbuf", &Config::dqbuf},
                                   {"xbuf", &Config::xbuf},
                                   {"dqlag", &Config::dqlag}};

Support problem_check(const Problem& pr) {
  const int64_t D = pr.shape.D;
  if (D > kMaxD)
    return Support::no("D=" + std::to_string(D) +
                       ": ffpa-bwd-sm90c keeps dK and dV of a quarter of D in registers, D must "
                       "be at most " +
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
  const int D = static_cast<int>(pr.shape.D);
  Config c;
  // 64 keys where dK and dV fit in registers (D padded to 512); 32 up to 1024.
  c.bc = padded(D) <= 512 ? 64 : 32;
  // Two panels a group where they divide the quarter: fewer phase-1 barriers won on ffpa-bwd-sm90.
  const int np = quarter_panels(D);
  c.panels = np % 2 ? 1 : 2;
  // Two exchange buffers where they fit beside the tiles of D padded to 768 (227 KB: Hopper).
  c.xbuf = padded(D) <= 768 ? 2 : 1;
  // The last dQ chunk behind the next tile's exchange: on the H200 it won at D = 1024 (xbuf = 1:
  // +5 %) and was even with 0 at D = 320 and 512 (results/h200/2026-12-03g).
  c.dqlag = padded(D) > 768 ? 1 : 0;
  return c;
}

int smem_bytes(const Config& c, int D) {
  return ffpa_layout::bwd_sm90c_layout(padded(D), c.bc, c.xbuf).bytes;
}

int accumulator_registers(const Config& c, int D) {
  // dV and dK (2 x quarter x bc over 128 threads), then the larger of S and dP (phase 1: 2 x 64
  // x bc over 128) and the dQ chunks (64 x 64 over 128 each; two live at once only from 3 chunks
  // a warpgroup up; with dqlag, one chunk beside the exchanged S and dP sums, bc / 2)
  const int dq = 32 * (c.dqbuf == 2 && quarter_panels(D) >= 3 ? 2 : 1);
  return 2 * quarter(D, c.bc) * c.bc / 128 + std::max({c.bc, dq, c.dqlag ? c.bc / 2 + 32 : 0});
}

Support check(const Config& c, int D, int smem_limit) {
  auto s = [](int v) { return std::to_string(v); };
  if (D % 8 || D > kMaxD)
    return Support::no("D=" + s(D) +
                       ": ffpa-bwd-sm90c keeps dK and dV of a quarter of D in registers, D must "
                       "be a multiple of 8, at most " +
                       s(kMaxD));
  if (c.bc != 32 && c.bc != 64) return Support::no("bc is 32 or 64");
  if (c.dqbuf != 1 && c.dqbuf != 2) return Support::no("dqbuf is 1 or 2");
  if (c.xbuf != 1 && c.xbuf != 2) return Support::no("xbuf is 1 or 2");
  if (c.dqlag != 0 && c.dqlag != 1) return Support::no("dqlag is 0 or 1");
  if (c.dqlag == 1 && quarter_panels(D) < 2)
    return Support::no(
        "dqlag=1 defers the last of a warpgroup's dQ chunks behind the next tile: "
        "it needs two chunks (D padded to 256 above 256)");
  if (c.bc == 64 && D > 512)
    return Support::no("bc=64 needs D at most 512 (dK and dV of 64 keys and a quarter of D, " +
                       s(quarter(D, 64)) + " columns, would take " + s(quarter(D, 64)) +
                       " registers)");
  if (c.panels < 1 || quarter_panels(D) % c.panels)
    return Support::no("panels=" + s(c.panels) + " must divide " + s(quarter_panels(D)) +
                       " (the 64-column panels of a warpgroup's quarter of D)");
  return check_resources(smem_bytes(c, D), smem_limit, Config::threads(),
                         accumulator_registers(c, D) + kRegisterOverhead);
}

bool dq_tiled(int D) {
  // Past 512 the tiled reductions raised ptxas's allocation by ~40 registers: the bias and
  // dropout configurations spilled.
  return padded(D) <= 512;
}

int64_t dq_accum_floats(const Shape& s) {
  if (!dq_tiled(static_cast<int>(s.D))) return 0;
  const int64_t tiles = (s.group() * s.Nq + 63) / 64;
  return s.B * s.Hkv * tiles * (padded(static_cast<int>(s.D)) / 64) * 64 * 64;
}

std::vector<std::string> nvrtc_options(const Config& c, const bwd::Features& f) {
  // FFPA_BC, FFPA_PANELS, FFPA_DQBUF, FFPA_XBUF, FFPA_DQLAG
  std::vector<std::string> o = knob_defines(kKnobs, c);
  // dq_accum's layout (dq_accum_floats): tiled by quarters of that many columns, or row-major
  o.push_back(define("FFPA_DQ_TILED", dq_tiled(f.D) ? quarter(f.D, c.bc) : 0));
  const std::vector<std::string> fd = f.defines();
  o.insert(o.end(), fd.begin(), fd.end());
  return o;
}

nvrtc::Compiled compile(const Config& c, const bwd::Features& f) {
  return nvrtc::compile("ffpa_bwd_sm90c.cuh", nvrtc_options(c, f), "sm_90a");
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  if (Support s = needs_sm90(dev); !s.ok()) throw Unsupported(s.reason);
  if (Support s = problem_check(pr); !s.ok()) throw Unsupported(s.reason);
  const int D = static_cast<int>(pr.shape.D);
  if (Support s = check(c, D, dev.smem_per_block_optin); !s.ok()) throw Unsupported(s.reason);
  nvrtc::Compiled comp = compile(c, bwd::Features::of(pr));
  refuse_spills(comp, "ffpa_bwd_sm90c_kernel");
  return comp;
}

std::unique_ptr<Op> bind(const Problem& pr, const Config& c, const FfpaBwdParams& params,
                         const gpu::DeviceInfo& dev) {
  const nvrtc::Compiled comp = compile_for(pr, c, dev);
  // make_op's grid is ceil(Nkv / (Bc * cluster)) clusters of `cluster` blocks: with Bc = bc / 2
  // that is one cluster of two blocks per key tile of bc keys (the kernel's n0 = (x / 2) * bc).
  return bwd::make_op(pr, comp, "ffpa_bwd_sm90c_kernel", c.bc / 2, Config::threads(),
                      smem_bytes(c, static_cast<int>(pr.shape.D)), params, dev, Config::cluster,
                      dq_accum_floats(pr.shape));
}

}  // namespace ffpa::bwd90c

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
