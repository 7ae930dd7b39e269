// Variant "ffpa-bwd-decode-sm90": the backward for few query rows (group x Nq at most 16) on
// Hopper (TMA ring, mma.sync), compiled by NVRTC at bind().
#include "variants/ffpa_bwd_decode_sm90.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "ffpa_bwd_decode_sm90_layout.h"
#include "gpu/tma.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::bwd_decode90 {
using namespace ffpa_family;
namespace {

constexpr const char* kKernel = "ffpa_bwd_decode_sm90_kernel";
constexpr const char* kWrites = "ffpa_bwd_decode_sm90_writes_kernel";
constexpr Knob<Config> kKnobs[] = {{"kb", &Config::kb},
                                   {"slots", &Config::slots},
                                   {"warps", &Config::warps},
                                   {"passes", &Config::passes}};

int problem_rows(const Problem& pr) {
  return computed_rows(static_cast<int>(pr.shape.group() * pr.shape.Nq));
}

}  // namespace

Support problem_check(const Problem& pr) {
  const auto& s = pr.shape;
  if (s.group() * s.Nq > kMaxRows)
    return Support::no("group x Nq = " + std::to_string(s.group() * s.Nq) +
                       ": ffpa-bwd-decode-sm90 holds every query row of a kv head's group in one "
                       "block, at most " +
                       std::to_string(kMaxRows));
  if (s.D > kMaxD)
    return Support::no("D=" + std::to_string(s.D) + ": ffpa-bwd-decode-sm90 takes D up to " +
                       std::to_string(kMaxD));
  return Support::yes();
}

int computed_rows(int rows) {
  return rows <= 8 ? 8 : 16;
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

int smem_bytes(const Config& c, int D, int nr) {
  return ffpa_layout::bwd_decode_sm90_layout(padded_d(D, 64), c.kb, c.slots, nr, c.warps).bytes;
}

Config default_config(const Problem& pr) {
  // 16-key tiles in 4 slots, with 8 consumer warps where D splits into their parts (else 4): the
  // best point or within 3 % of it in every decode row the tuner timed on an H100 (D 320, 512,
  // 1024; results/h100/2026-12-06h), where 32-key tiles in as many slots as fit ran 2-5 % slower.
  // Fewer slots where 4 do not fit.
  const int D = static_cast<int>(pr.shape.D), nr = problem_rows(pr);
  const int limit = 227 * 1024;
  Config c{16, 4, 8};
  if (!rows_check(c, D, nr, limit).ok()) c.warps = 4;
  while (c.slots > 2 && !rows_check(c, D, nr, limit).ok()) --c.slots;
  return c;
}

Support check(const Config& c, int D, int smem_limit) {
  auto s = [](int v) { return std::to_string(v); };
  if (D % 8 || D > kMaxD)
    return Support::no("D=" + s(D) + ": ffpa-bwd-decode-sm90 needs a multiple of 8, at most " +
                       s(kMaxD));
  if (c.kb != 16 && c.kb != 32 && c.kb != 64) return Support::no("kb is 16, 32 or 64");
  if (c.slots < 2 || c.slots > 8) return Support::no("slots is 2 to 8");
  if (c.warps != 4 && c.warps != 8) return Support::no("warps is 4 or 8");
  if (c.passes != 1 && c.passes != 2) return Support::no("passes is 1 or 2");
  // The warps of a key block (16 keys) split D in parts of whole k16 steps.
  const int parts = c.warps * 16 / c.kb;
  if (parts > 1 && padded_d(D, 64) / parts % 16)
    return Support::no("D=" + s(D) + " (" + s(padded_d(D, 64)) + " padded) does not split into " +
                       s(parts) + " parts of whole 16-column steps (kb=" + s(c.kb) +
                       ", warps=" + s(c.warps) + ")");
  // dQ^T of 8 rows x D / warps columns a consumer thread, a chunk's 32 accumulators, the S/dP
  // fragments and addresses.
  return check_resources(smem_bytes(c, D, 8), smem_limit, c.threads(),
                         padded_d(D, 64) * 4 / c.warps / 16 + 96);
}

Support rows_check(const Config& c, int D, int nr, int smem_limit) {
  if (Support s = check(c, D, smem_limit); !s.ok()) return s;
  if (nr == 16 && c.warps == 8)
    return Support::no(
        "16 query rows with 8 warps: ptxas spills beside the exchange of D's "
        "parts (4 warps serve 16 rows)");
  if (nr == 16 && D > 512 && c.kb != 16)
    return Support::no(
        "16 query rows past D = 512 with 4 warps: dQ takes 128 registers a thread, "
        "and kb=" +
        std::to_string(c.kb) + " spills beside them (kb=16 does not)");
  return check_resources(smem_bytes(c, D, nr), smem_limit, c.threads(), 0);
}

std::vector<std::string> nvrtc_options(const Config& c, const bwd::Features& f, int nr) {
  std::vector<std::string> o = knob_defines(kKnobs, c);  // FFPA_KB, FFPA_SLOTS, ...
  const std::vector<std::string> fd = f.defines();
  o.insert(o.end(), fd.begin(), fd.end());
  o.push_back("-DFFPA_NR=" + std::to_string(nr));
  return o;
}

nvrtc::Compiled compile(const Config& c, const bwd::Features& f, int nr) {
  return nvrtc::compile("ffpa_bwd_decode_sm90.cuh", nvrtc_options(c, f, nr), "sm_90a");
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  if (Support s = needs_sm90(dev); !s.ok()) throw Unsupported(s.reason);
  if (Support s = problem_check(pr); !s.ok()) throw Unsupported(s.reason);
  const int D = static_cast<int>(pr.shape.D), nr = problem_rows(pr);
  if (Support s = rows_check(c, D, nr, dev.smem_per_block_optin); !s.ok())
    throw Unsupported(s.reason + " (" + std::to_string(nr) + " query rows computed)");
  nvrtc::Compiled comp = compile(c, bwd::Features::of(pr), nr);
  refuse_spills(comp, kKernel);
  if (c.passes == 2) refuse_spills(comp, kWrites);
  return comp;
}

std::unique_ptr<Op> bind(const Problem& pr, const Config& c, const FfpaBwdParams& params,
                         const gpu::DeviceInfo& dev) {
  if (!aligned(params.dk, {params.dk_batch_stride, params.dk_head_stride, params.dk_row_stride},
               8) ||
      !aligned(params.dv, {params.dv_batch_stride, params.dv_head_stride, params.dv_row_stride}, 8))
    throw Unsupported(
        "ffpa-bwd-decode-sm90 stores 8 elements of dK and dV at once: their rows and strides "
        "must be 16-byte aligned");
  const nvrtc::Compiled comp = compile_for(pr, c, dev);
  const auto& sh = pr.shape;
  const FfpaFwdParams& f = params.fwd;
  const bool bf16 = pr.dtype == Dtype::bf16;
  const int D = static_cast<int>(sh.D), nr = problem_rows(pr);
  // A [B, Hkv, Nkv, D] tensor's map in boxes of `box` keys.
  const auto keys_map = [&](const void* t, int64_t row, int64_t head, int64_t batch, int box) {
    return gpu::tma_rows_map(t, bf16, sh.D, sh.Nkv, sh.Hkv, sh.B, row, head, batch, box);
  };
  bwd::MainMaps maps;
  maps.a = keys_map(f.k, f.k_row_stride, f.k_head_stride, f.k_batch_stride, c.kb);
  maps.b = keys_map(f.v, f.v_row_stride, f.v_head_stride, f.v_batch_stride, c.kb);
  bwd::StreamKeys stream;
  stream.keys = sh.B * sh.Hkv * decode_visible_keys(pr);
  stream.kb = c.kb;
  if (c.passes == 2) {
    stream.writes = kWrites;
    stream.writes_threads = c.warps * 32;
    // Boxes of 16 keys: a warp's key block.
    stream.tdk = keys_map(params.dk, params.dk_row_stride, params.dk_head_stride,
                          params.dk_batch_stride, 16);
    stream.tdv = keys_map(params.dv, params.dv_row_stride, params.dv_head_stride,
                          params.dv_batch_stride, 16);
    stream.writes_smem =
        ffpa_layout::bwd_decode_sm90_writes_layout(padded_d(D, 64), nr, c.warps).bytes;
    // Two 16-bit values (P, dS) of each computed row, key and head.
    stream.pds_bytes = sh.B * sh.Hkv * sh.Nkv * nr * 4;
  }
  return bwd::make_op(pr, comp, kKernel, c.kb, c.threads(), smem_bytes(c, D, nr), params, dev, 1, 0,
                      /*main_waits=*/true, nullptr, &stream, &maps);
}

}  // namespace ffpa::bwd_decode90

namespace ffpa {
namespace {

struct BwdDecodeSm90 {
  static constexpr const char* name = "ffpa-bwd-decode-sm90";
  static constexpr Pass pass = Pass::bwd;
  using Config = bwd_decode90::Config;
  static constexpr auto knob_names = bwd_decode90::knob_names;
  static constexpr auto default_config = bwd_decode90::default_config;
  static constexpr auto check = bwd_decode90::check;
  static constexpr auto compile = bwd_decode90::compile_for;
  static constexpr auto problem_check = bwd_decode90::problem_check;  // group x Nq <= 16
  static constexpr auto device_check = ffpa_family::needs_sm90;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return bwd_decode90::bind(p, c, t.bwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_bwd_decode_sm90() {
  return std::make_unique<ffpa_family::FfpaVariant<BwdDecodeSm90>>();
}

}  // namespace ffpa
