// Variant "ffpa-fwd-decode": the forward for few query rows (group x Nq at most 16) on Hopper
// (TMA ring, mma.sync), compiled by NVRTC at bind().
#include "variants/ffpa_fwd_decode.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "ffpa_fwd_decode_layout.h"
#include "gpu/tma.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::fwd_decode {
using namespace ffpa_family;
namespace {

constexpr const char* kKernel = "ffpa_fwd_decode_kernel";
constexpr const char* kMerge = "ffpa_fwd_decode_merge_kernel";
using L = ffpa_layout::FwdDecode;

class DecodeOp : public Op {
 public:
  DecodeOp(nvrtc::Library lib, const FfpaFwdParams& p, FfpaTmaDesc tk, FfpaTmaDesc tv,
           int64_t total, int64_t vis, int kb, int smem, int sm_count)
      : lib_(std::move(lib)), p_(p), tk_(tk), tv_(tv), smem_(smem) {
    fn_ = lib_.kernel(kKernel);
    merge_ = lib_.kernel(kMerge);
    FFPA_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn_),
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, smem_));
    const int64_t blocks = ffpa_layout::decode_blocks(
        total, kb,
        gpu::resident(reinterpret_cast<const void*>(fn_), Config::threads(), smem_, 1, sm_count));
    p_.num_splits = static_cast<int>(blocks);
    const int64_t heads = int64_t{p_.B} * p_.Hkv;
    const int64_t rows =
        heads * ffpa_layout::decode_head_slots(total, p_.num_splits, vis) * L::kRows;
    opart_ = gpu::DeviceBuffer(static_cast<size_t>(rows * p_.D) * sizeof(float));
    lpart_ = gpu::DeviceBuffer(static_cast<size_t>(rows) * sizeof(float));
    p_.o_partial = opart_.as<float>();
    p_.lse_partial = lpart_.as<float>();
    grid_ = launch_grid(blocks, 1, 1);
    merge_grid_ = launch_grid(heads * p_.group * p_.Nq, 1, 1);
  }

  void launch(cudaStream_t s) override {
    void* args[] = {&p_, &tk_, &tv_};
    gpu::launch(reinterpret_cast<const void*>(fn_), grid_, dim3(Config::threads()),
                static_cast<size_t>(smem_), s, args);
    void* margs[] = {&p_};
    gpu::launch(reinterpret_cast<const void*>(merge_), merge_grid_, dim3(128), 0, s, margs, true);
  }
  int64_t extra_bytes() const override {
    return static_cast<int64_t>(opart_.bytes() + lpart_.bytes());
  }
  std::string includes() const override {
    return "forward (TMA ring; " + std::to_string(p_.num_splits) +
           " blocks share the heads' keys) + merge (chained by programmatic dependent launch)";
  }

 private:
  nvrtc::Library lib_;
  FfpaFwdParams p_;
  FfpaTmaDesc tk_, tv_;
  int smem_;
  dim3 grid_, merge_grid_;
  gpu::DeviceBuffer opart_, lpart_;
  cudaKernel_t fn_ = nullptr, merge_ = nullptr;
};

constexpr Knob<Config> kKnobs[] = {{"kb", &Config::kb}, {"slots", &Config::slots}};

}  // namespace

Support problem_check(const Problem& pr) {
  const auto& s = pr.shape;
  if (s.group() * s.Nq > kMaxRows)
    return Support::no("group x Nq = " + std::to_string(s.group() * s.Nq) +
                       ": ffpa-fwd-decode holds every query row of a kv head's group in one "
                       "block, at most " +
                       std::to_string(kMaxRows));
  if (s.D > kMaxD)
    return Support::no("D=" + std::to_string(s.D) + ": ffpa-fwd-decode takes D up to " +
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

int smem_bytes(const Config& c, int D) {
  return ffpa_layout::fwd_decode_layout(padded_d(D, 64), c.kb, c.slots).bytes;
}

Config default_config(const Problem& pr) {
  // 64-key tiles where three slots of them fit (up to D = 512), else 32; then as many slots as
  // fit, at most 6: the bytes in flight an SM that hide HBM's latency.
  const int D = static_cast<int>(pr.shape.D);
  const int limit = 227 * 1024;
  Config c{64, 3};
  if (smem_bytes(c, D) > limit) c.kb = 32;
  c.slots = 2;
  while (c.slots < 6 && smem_bytes(Config{c.kb, c.slots + 1}, D) <= limit) ++c.slots;
  return c;
}

Support check(const Config& c, int D, int smem_limit) {
  auto s = [](int v) { return std::to_string(v); };
  if (D % 8 || D > kMaxD)
    return Support::no("D=" + s(D) + ": ffpa-fwd-decode needs a multiple of 8, at most " +
                       s(kMaxD));
  if (c.kb != 32 && c.kb != 64) return Support::no("kb is 32 or 64");
  if (c.slots < 2 || c.slots > 8) return Support::no("slots is 2 to 8");
  // O of 16 rows x D / 4 columns a consumer thread (D / 8 floats), S and P fragments.
  return check_resources(smem_bytes(c, D), smem_limit, Config::threads(),
                         padded_d(D, 64) / 8 + 3 * c.kb / 8 + 48);
}

std::vector<std::string> nvrtc_options(const Config& c, const fwd::Features& f) {
  std::vector<std::string> o = knob_defines(kKnobs, c);  // FFPA_KB, FFPA_SLOTS
  const std::vector<std::string> fd = f.defines();
  o.insert(o.end(), fd.begin(), fd.end());
  return o;
}

nvrtc::Compiled compile(const Config& c, const fwd::Features& f) {
  return nvrtc::compile("ffpa_fwd_decode.cuh", nvrtc_options(c, f), "sm_90a");
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  if (Support s = needs_sm90(dev); !s.ok()) throw Unsupported(s.reason);
  if (Support s = problem_check(pr); !s.ok()) throw Unsupported(s.reason);
  const int D = static_cast<int>(pr.shape.D);
  if (Support s = check(c, D, dev.smem_per_block_optin); !s.ok()) throw Unsupported(s.reason);
  nvrtc::Compiled comp = compile(c, fwd::Features::of(pr));
  refuse_spills(comp, kKernel);
  return comp;
}

std::unique_ptr<Op> bind(const Problem& pr, const Config& c, const FfpaFwdParams& params,
                         const gpu::DeviceInfo& dev) {
  nvrtc::Compiled comp = compile_for(pr, c, dev);
  // 16-byte cp.async of Q rows and TMA boxes of K/V rows, 4-byte O stores.
  if (!qkvo_aligned(params, 2))
    throw Unsupported("q/k/v need 16-byte aligned rows and strides in multiples of 8 elements");
  const auto& sh = pr.shape;
  const int64_t rows = sh.B * sh.Hkv * sh.group() * sh.Nq;
  if (rows > 0x7fffffff) throw Unsupported("merge grid: B x Hq x Nq exceeds 2^31");
  FfpaFwdParams p = params;
  p.keep_mask = nullptr;
  const bool bf16 = pr.dtype == Dtype::bf16;
  const FfpaTmaDesc tk = gpu::tma_rows_map(p.k, bf16, sh.D, sh.Nkv, sh.Hkv, sh.B, p.k_row_stride,
                                           p.k_head_stride, p.k_batch_stride, c.kb);
  const FfpaTmaDesc tv = gpu::tma_rows_map(p.v, bf16, sh.D, sh.Nkv, sh.Hkv, sh.B, p.v_row_stride,
                                           p.v_head_stride, p.v_batch_stride, c.kb);
  const int64_t vis = decode_visible_keys(pr);
  return std::make_unique<DecodeOp>(nvrtc::Library(comp.cubin), p, tk, tv, sh.B * sh.Hkv * vis, vis,
                                    c.kb, smem_bytes(c, static_cast<int>(sh.D)), dev.sm_count);
}

}  // namespace ffpa::fwd_decode

namespace ffpa {
namespace {

struct FwdDecode {
  static constexpr const char* name = "ffpa-fwd-decode";
  static constexpr Pass pass = Pass::fwd;
  using Config = fwd_decode::Config;
  static constexpr auto knob_names = fwd_decode::knob_names;
  static constexpr auto default_config = fwd_decode::default_config;
  static constexpr auto check = fwd_decode::check;
  static constexpr auto compile = fwd_decode::compile_for;
  static constexpr auto problem_check = fwd_decode::problem_check;  // group x Nq <= 16
  static constexpr auto device_check = ffpa_family::needs_sm90;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return fwd_decode::bind(p, c, t.fwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_fwd_decode() {
  return std::make_unique<ffpa_family::FfpaVariant<FwdDecode>>();
}

}  // namespace ffpa
