// Variant "ffpa-bwd-decode": the backward for few query rows (group x Nq at most 16) on CUDA cores,
// compiled by NVRTC at bind().
#include "variants/ffpa_bwd_decode.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "ffpa_bwd_decode_layout.h"
#include "tensors/tensors.hpp"
#include "variants/ffpa_fwd_sm80.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::bwd_decode {
using namespace ffpa_family;

constexpr Knob<Config> kKnobs[] = {{"kb", &Config::kb},
                                   {"stages", &Config::stages},
                                   {"splits", &Config::splits, false},
                                   {"blocks", &Config::blocks}};

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

Config default_config(const Problem& pr) {
  // 16-key tiles: the smallest stage, so that two blocks (16 warps) fit an SM at D = 512 with
  // three stages in flight; above D = 512 two stages (one block of 8 warps an SM).
  Config c;
  c.stages = pr.shape.D <= 512 ? 3 : 2;
  return c;
}

// For the check: every row of a group (16), so that a configuration fits whatever the problem.
int smem_bytes(const Config& c, int D) {
  return ffpa_layout::bwd_decode_layout(D, c.kb, c.stages, kMaxRows).bytes;
}

int resident_blocks(int smem, int regs, const gpu::DeviceInfo& dev) {
  int n = 2048 / Config::threads();
  n = std::min(n, (dev.smem_per_block_optin + 1024) / (smem + 1024));
  if (regs > 0 && dev.regs_per_sm > 0)
    n = std::min(n, dev.regs_per_sm / ((regs + 7) / 8 * 8 * Config::threads()));
  return std::max(n, 1);
}

int auto_splits(int64_t heads, int64_t tiles, int stages, int64_t slots) {
  int64_t best = 1, best_cost = -1;
  for (int64_t s = 1; s <= tiles; ++s) {
    const int64_t waves = (heads * s + slots - 1) / slots;
    const int64_t cost = waves * ((tiles + s - 1) / s + stages);
    if (best_cost < 0 || cost < best_cost) best = s, best_cost = cost;
    if (heads * s >= 64 * slots) break;  // far past a full GPU: only more fills and atomics
  }
  return static_cast<int>(best);
}

Support check(const Config& c, int D, int smem_limit) {
  if (D % 8 || D > kMaxD)
    return Support::no("D=" + std::to_string(D) +
                       ": ffpa-bwd-decode needs D a multiple of 8, at most " +
                       std::to_string(kMaxD));
  if (c.kb != 16 && c.kb != 32 && c.kb != 64) return Support::no("kb is 16, 32 or 64");
  if (c.stages != 2 && c.stages != 3) return Support::no("stages is 2 or 3");
  if (c.splits < 0) return Support::no("splits is 0 (auto) or a count of blocks");
  if (c.blocks < 0 || c.blocks > 3) return Support::no("blocks is 0 (by D), 1, 2 or 3");
  // dQ of a thread's (row, granule) pairs (16 x D / 8 / 256, 8 floats each), S and dP of its
  // rows (at most 16 each) and the granules of one key: at most ~128 at D = 512.
  return check_resources(smem_bytes(c, D), smem_limit, Config::threads(), 128);
}

std::vector<std::string> nvrtc_options(const Config& c, const bwd::Features& f, int rows) {
  std::vector<std::string> o = knob_defines(kKnobs, c);  // FFPA_KB, FFPA_STAGES, FFPA_BLOCKS
  const std::vector<std::string> fd = f.defines();
  o.insert(o.end(), fd.begin(), fd.end());
  o.push_back("-DFFPA_ROWS=" + std::to_string(rows));
  return o;
}

nvrtc::Compiled compile(const Config& c, const bwd::Features& f, int rows,
                        const std::string& arch) {
  return nvrtc::compile("ffpa_bwd_decode.cuh", nvrtc_options(c, f, rows), arch);
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  if (Support s = needs_sm80(dev); !s.ok()) throw Unsupported(s.reason);
  if (Support s = problem_check(pr); !s.ok()) throw Unsupported(s.reason);
  const int D = static_cast<int>(pr.shape.D);
  if (Support s = check(c, D, dev.smem_per_block_optin); !s.ok()) throw Unsupported(s.reason);
  nvrtc::Compiled comp =
      compile(c, bwd::Features::of(pr), static_cast<int>(pr.shape.group() * pr.shape.Nq),
              fwd::target_arch(dev));
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
  const auto& sh = pr.shape;
  // The launch asks for the problem's rows only (Q, dO, P, dS), often fewer than the check's 16.
  const int smem = ffpa_layout::bwd_decode_layout(static_cast<int>(sh.D), c.kb, c.stages,
                                                  static_cast<int>(sh.group() * sh.Nq))
                       .bytes;
  const int64_t tiles = (sh.Nkv + c.kb - 1) / c.kb;
  int64_t splits = c.splits;
  if (splits <= 0) {
    const auto it = comp.info.find("ffpa_bwd_decode_kernel");
    const int regs = it != comp.info.end() ? it->second.registers : 0;
    splits = auto_splits(sh.Hkv * sh.B, tiles, c.stages,
                         int64_t{dev.sm_count} * resident_blocks(smem, regs, dev));
  }
  splits = std::min(splits, tiles);
  // make_op's grid is ceil(Nkv / tile) x Hkv x B: the keys of a block as the tile gives x =
  // ceil(tiles / per_block) <= splits blocks; the kernel shares the tiles among gridDim.x.
  const int64_t per_block = (tiles + splits - 1) / splits;
  return bwd::make_op(pr, comp, "ffpa_bwd_decode_kernel", static_cast<int>(per_block * c.kb),
                      Config::threads(), smem, params, dev, 1, 0, /*main_waits=*/true);
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
