// Variant "ffpa-bwd-sm90c": the Hopper backward on clusters of two blocks splitting D (wgmma),
// compiled by NVRTC at bind().
#include "variants/ffpa_bwd_sm90c.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/error.hpp"
#include "ffpa_bwd_sm90c_layout.h"
#include "gpu/tma.hpp"
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
// Columns of a warpgroup's quarter of D: bc = 64 keeps dK and dV key-major (N = the quarter, D
// rounded up to 64); with 32 keys they are transposed (M = the quarter, D padded to 256).
int quarter(int D, int bc) {
  return padded_d(D, bc == 64 ? 64 : 256) / 4;
}
// Columns of a warpgroup's half of D with cluster = 1 (D rounded up to 32: a whole k16 step of
// phase 1 in each half).
int half(int D) {
  return padded_d(D, 32) / 2;
}
// The widest half one block holds: dK and dV of 64 keys take 2 x 160 x 64 / 128 = 160
// accumulator registers a thread at D = 320; past it ptxas spills.
constexpr int kMaxHalf = 160;
// Columns of a warpgroup's part of D: a quarter, or with cluster = 1 a half.
int part(const Config& c, int D) {
  return c.cluster == 1 ? half(D) : quarter(D, c.bc);
}
// 64-column panels of a part in shared memory (each part starts on a panel of its own).
int part_panels(const Config& c, int D) {
  return (part(c, D) + 63) / 64;
}

}  // namespace

constexpr Knob<Config> kKnobs[] = {
    {"bc", &Config::bc},         {"panels", &Config::panels}, {"dqbuf", &Config::dqbuf},
    {"xbuf", &Config::xbuf},     {"dqlag", &Config::dqlag},   {"cluster", &Config::cluster},
    {"ksplit", &Config::ksplit}, {"tail", &Config::tail},     {"tma", &Config::tma}};

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
  // One block a key tile where it holds all of D: at D = 320 it took 30-41 % less time than the
  // cluster on every row of configs/default.json (results/h200/2026-12-05/bwd-d320-1024).
  if (c.bc == 64 && half(D) <= kMaxHalf) {
    c.cluster = 1;
    c.ksplit = 1;
  }
  // Phase 1 by keys in the cluster won only with a bias at D = 512 (-2.7 % time; +2.4 to +4.6 %
  // on the rows without one: results/h200/2026-12-05/bwd-default).
  if (c.cluster == 2 && c.bc == 64 && pr.bias != BiasKind::none) c.ksplit = 1;
  // In one block, a part's panels in one cp.async group (D = 320: 1-3 % less time than 1 a group),
  // but with dropout, which was even with 1 a group and spills with causal masking and a full
  // bias; in the cluster two a group where they divide (fewer phase-1 barriers won on
  // ffpa-bwd-sm90).
  const int np = part_panels(c, D);
  if (c.cluster == 1)
    c.panels = pr.dropout > 0 ? 1 : np;
  else
    c.panels = np % 2 ? 1 : 2;
  // Two exchange buffers where they fit beside the tiles of D padded to 768 (227 KB: Hopper).
  c.xbuf = c.cluster == 2 && padded(D) <= 768 ? 2 : 1;
  // The last dQ chunk behind the next tile's exchange: on the H200 it won at D = 1024 (xbuf = 1:
  // +5 %) and was even with 0 at D = 320 and 512 (results/h200/2026-12-03g).
  c.dqlag = padded(D) > 768 ? 1 : 0;
  return c;
}

int smem_bytes(const Config& c, int D) {
  return ffpa_layout::bwd_sm90c_layout(2 * part_panels(c, D) * 64, c.bc,
                                       c.cluster == 2 ? c.xbuf : 0)
      .bytes;
}

int accumulator_registers(const Config& c, int D) {
  // dV and dK (2 x part x bc over 128 threads), then the larger of S and dP (phase 1: 2 x 64 x bc
  // over 128, or half of that with ksplit: a warpgroup's keys) and the dQ chunks (64 x 64
  // over 128 each; two live at once only from 3 chunks a warpgroup up; with dqlag, one chunk
  // beside the exchanged S and dP sums, bc / 2)
  const int dq = 32 * (c.dqbuf == 2 && part_panels(c, D) >= 3 ? 2 : 1);
  const int sdp = c.bc / (c.ksplit ? 2 : 1);
  return 2 * part(c, D) * c.bc / 128 + std::max({sdp, dq, c.dqlag ? c.bc / 2 + 32 : 0});
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
  if (c.cluster != 1 && c.cluster != 2) return Support::no("cluster is 1 or 2");
  if (c.ksplit != 0 && c.ksplit != 1) return Support::no("ksplit is 0 or 1");
  if (c.tail != 0 && c.tail != 1) return Support::no("tail is 0 or 1");
  if (c.tma != 0 && c.tma != 1) return Support::no("tma is 0 or 1");
  if (c.ksplit == 1) {
    if (c.bc != 64)
      return Support::no("ksplit=1 gives each warpgroup 32 of 64 keys: bc must be 64");
    if (c.dqlag != 0) return Support::no("ksplit=1 does not defer a dQ chunk: dqlag must be 0");
    if (c.cluster == 2 && c.xbuf != 2)
      return Support::no(
          "ksplit=1 in a cluster needs xbuf=2 (the buffers take turns; one buffer would need a "
          "cluster barrier a tile)");
  }
  if (c.cluster == 1) {
    // One block holds all of D: the cluster's knobs would compile the same kernel.
    if (c.ksplit != 1) return Support::no("cluster=1 splits phase 1 by keys: ksplit must be 1");
    if (c.xbuf != 1)
      return Support::no("cluster=1 exchanges nothing: xbuf=2 would be the same kernel as 1");
    if (part(c, D) > kMaxHalf)
      return Support::no("cluster=1 needs D at most 320 (dK and dV of 64 keys and half of D, " +
                         s(part(c, D)) + " columns, would take " + s(2 * part(c, D)) +
                         " registers a thread)");
  }
  if (c.dqlag == 1 && part_panels(c, D) < 2)
    return Support::no(
        "dqlag=1 defers the last of a warpgroup's dQ chunks behind the next tile: "
        "it needs two chunks (D padded to 256 above 256)");
  if (c.bc == 64 && D > 512)
    return Support::no("bc=64 needs D at most 512 (dK and dV of 64 keys and a quarter of D, " +
                       s(quarter(D, 64)) + " columns, would take " + s(quarter(D, 64)) +
                       " registers)");
  if (c.panels < 1 || part_panels(c, D) % c.panels)
    return Support::no("panels=" + s(c.panels) + " must divide " + s(part_panels(c, D)) +
                       " (the 64-column panels of a warpgroup's part of D)");
  return check_resources(smem_bytes(c, D), smem_limit, Config::threads(),
                         accumulator_registers(c, D) + kRegisterOverhead);
}

bool dq_tiled(int D) {
  // Past 512 the tiled reductions raised ptxas's allocation by ~40 registers: the bias and
  // dropout configurations spilled.
  return padded(D) <= 512;
}

int64_t dq_accum_floats(const Config& c, const Shape& s) {
  const int D = static_cast<int>(s.D);
  if (!dq_tiled(D)) return 0;
  const int64_t tiles = (s.group() * s.Nq + 63) / 64;
  return s.B * s.Hkv * tiles * (2 * c.cluster * part_panels(c, D)) * 64 * 64;
}

std::vector<std::string> nvrtc_options(const Config& c, const bwd::Features& f) {
  // FFPA_BC, FFPA_PANELS, FFPA_DQBUF, FFPA_XBUF, FFPA_DQLAG, FFPA_CLUSTER, FFPA_KSPLIT, FFPA_TAIL,
  // FFPA_TMA
  std::vector<std::string> o = knob_defines(kKnobs, c);
  // dq_accum's layout (dq_accum_floats): tiled by parts of that many columns (4 quarters, or 2
  // halves with cluster = 1), or row-major
  o.push_back(define("FFPA_DQ_TILED", dq_tiled(f.D) ? part(c, f.D) : 0));
  o.push_back(define("FFPA_DQ_PARTS", 2 * c.cluster));
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
  // Not a tuning point that would time tail = 0 again (FFPA_TAIL compiles no pieces there).
  if (c.tail && pr.causal != Causal::none)
    throw Unsupported(
        "tail=1: causal key tiles differ in work, the last wave is not split (the same kernel "
        "as tail=0)");
  // A TMA box is 64 rows of one q head; cp.async loads each row from its own head.
  if (c.tma && pr.shape.group() > 1 && pr.shape.Nq % 64)
    throw Unsupported("tma=1: Nq=" + std::to_string(pr.shape.Nq) +
                      " is not a multiple of 64, so a query tile of the GQA group's packed rows "
                      "spans two q heads (one TMA box reads one)");
  nvrtc::Compiled comp = compile(c, bwd::Features::of(pr));
  refuse_spills(comp, "ffpa_bwd_sm90c_kernel");
  return comp;
}

std::unique_ptr<Op> bind(const Problem& pr, const Config& c, const FfpaBwdParams& params,
                         const gpu::DeviceInfo& dev) {
  const nvrtc::Compiled comp = compile_for(pr, c, dev);
  // make_op's grid is ceil(Nkv / (Bc * cluster)) clusters of `cluster` blocks: with Bc = bc /
  // cluster that is one cluster per key tile of bc keys (the kernel's n0 = (x / cluster) * bc).
  // The last wave's key tiles split by query tiles (never causal: compile_for).
  const auto& sh = pr.shape;
  const bwd::SplitTail tail{static_cast<int>((sh.group() * sh.Nq + 63) / 64), c.bc,
                            "ffpa_bwd_sm90c_merge_kernel"};
  // tma = 1: Q and dO in boxes of 64 rows and a 64-column panel.
  bwd::MainMaps maps;
  if (c.tma) {
    bwd::check_aligned(params);  // before the maps, which would fail on it with a RunError
    const FfpaFwdParams& f = params.fwd;
    const bool bf16 = pr.dtype == Dtype::bf16;
    maps.a = gpu::tma_rows_map(f.q, bf16, sh.D, sh.Nq, sh.Hq, sh.B, f.q_row_stride, f.q_head_stride,
                               f.q_batch_stride, 64);
    maps.b = gpu::tma_rows_map(params.dout, bf16, sh.D, sh.Nq, sh.Hq, sh.B, params.do_row_stride,
                               params.do_head_stride, params.do_batch_stride, 64);
  }
  return bwd::make_op(pr, comp, "ffpa_bwd_sm90c_kernel", c.bc / c.cluster, Config::threads(),
                      smem_bytes(c, static_cast<int>(sh.D)), params, dev, c.cluster,
                      dq_accum_floats(c, sh), false, c.tail ? &tail : nullptr, nullptr,
                      c.tma ? &maps : nullptr);
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
