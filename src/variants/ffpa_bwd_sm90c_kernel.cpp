#include "variants/ffpa_bwd_sm90c_kernel.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::bwd90c {
using namespace ffpa_family;
namespace {

// Registers ptxas needs besides the accumulators (descriptors, row table, P/dS temporaries), as
// for ffpa-bwd-sm90. A pre-filter only: refuse_spills() on ptxas's report decides.
constexpr int kRegisterOverhead = 48;

int padded(int D) {
  return padded_d(D, 256);  // four 64-column quarters
}
int quarter_panels(int D) {
  return padded(D) / 256;
}

}  // namespace

constexpr Knob<Config> kKnobs[] = {
    {"bc", &Config::bc}, {"panels", &Config::panels}, {"dqbuf", &Config::dqbuf}};

std::string problem_check(const Problem& pr) {
  const int64_t D = pr.shape.D;
  if (D > kMaxD)
    return "D=" + std::to_string(D) + ": ffpa-bwd-sm90c keeps dK and dV of a quarter of D in " +
           "registers, D must be at most " + std::to_string(kMaxD);
  return {};
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
  return c;
}

int smem_bytes(const Config& c, int D) {
  // alignment slack, K and V, Q and dO (each the block's half of D), P^T and dS^T, the exchange,
  // two row tables, the dropout keep bits from the other block
  const int dc = padded(D) / 2;
  return 1024 + 2 * c.bc * dc * 2 + 2 * 64 * dc * 2 + 2 * c.bc * 64 * 2 +
         2 * (c.bc / 8) * 128 * 16 + 2 * 64 * 8 + Config::threads() * 4;
}

int accumulator_registers(const Config& c, int D) {
  // dV^T and dK^T (2 x DP/4 x bc over 128 threads), then the larger of S and dP (phase 1: 2 x 64
  // x bc over 128) and the dQ chunks (64 x 64 over 128 each; two live at once only from 3 chunks
  // a warpgroup up)
  const int dq = 32 * (c.dqbuf == 2 && quarter_panels(D) >= 3 ? 2 : 1);
  return padded(D) * c.bc / 256 + std::max(c.bc, dq);
}

std::string check(const Config& c, int D, int smem_limit) {
  auto s = [](int v) { return std::to_string(v); };
  if (D % 8 || D > kMaxD)
    return "D=" + s(D) +
           ": ffpa-bwd-sm90c keeps dK and dV of a quarter of D in registers, D must be a multiple "
           "of 8, at most " +
           s(kMaxD);
  if (c.bc != 32 && c.bc != 64) return "bc is 32 or 64";
  if (c.dqbuf != 1 && c.dqbuf != 2) return "dqbuf is 1 or 2";
  if (c.bc == 64 && padded(D) > 512)
    return "bc=64 needs D padded to 256 at most 512 (dK and dV of 64 keys and a quarter of D, " +
           s(padded(D) / 4) + " columns, would take " + s(padded(D) / 4) + " registers)";
  if (c.panels < 1 || quarter_panels(D) % c.panels)
    return "panels=" + s(c.panels) + " must divide " + s(quarter_panels(D)) +
           " (the 64-column panels of a warpgroup's quarter of D)";
  return check_resources(smem_bytes(c, D), smem_limit, Config::threads(),
                         accumulator_registers(c, D) + kRegisterOverhead);
}

std::vector<std::string> nvrtc_options(const Config& c, const bwd::Features& f) {
  const auto d = define;
  return {d("FFPA_D", f.D),       d("FFPA_BC", c.bc),       d("FFPA_PPG", c.panels),
          d("FFPA_DQB", c.dqbuf), d("FFPA_BF16", f.bf16),   d("FFPA_CAUSAL", f.causal),
          d("FFPA_BIAS", f.bias), d("FFPA_DBIAS", f.dbias), d("FFPA_DROPOUT", f.dropout)};
}

nvrtc::Compiled compile(const Config& c, const bwd::Features& f) {
  return nvrtc::compile("ffpa_bwd_sm90c.cuh", nvrtc_options(c, f), "sm_90a");
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  if (auto why = needs_sm90(dev); !why.empty()) throw Unsupported(why);
  if (auto why = problem_check(pr); !why.empty()) throw Unsupported(why);
  const int D = static_cast<int>(pr.shape.D);
  if (auto why = check(c, D, dev.smem_per_block_optin); !why.empty()) throw Unsupported(why);
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
                      smem_bytes(c, static_cast<int>(pr.shape.D)), params, dev, Config::cluster);
}

}  // namespace ffpa::bwd90c
