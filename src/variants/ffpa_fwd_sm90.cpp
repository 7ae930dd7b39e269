// Variant "ffpa-fwd-sm90": the Hopper split-D forward (wgmma), compiled by NVRTC at bind().
#include "variants/ffpa_fwd_sm90.hpp"

#include <cstdint>

#include "core/error.hpp"
#include "ffpa_fwd_sm90_layout.h"
#include "tensors/tensors.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::fwd90 {
using namespace ffpa_family;
namespace {

// Registers ptxas needs besides the accumulators (addresses, descriptors, softmax temporaries),
// read off compiled configurations: the defaults use 244-253 for 160-176 accumulator registers,
// and Bc=128 at D=320 (192 + 70 > 255) spills.
constexpr int kRegisterOverhead = 70;

class Fwd90Op : public Op {
 public:
  Fwd90Op(nvrtc::Library lib, const FfpaFwdParams& p, dim3 grid, int smem)
      : lib_(std::move(lib)), p_(p), grid_(grid), smem_(smem) {
    fwd_ = lib_.kernel("ffpa_fwd_sm90_kernel");
    FFPA_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(fwd_),
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, smem_));
  }

  void launch(cudaStream_t s) override {
    void* args[] = {&p_};
    FFPA_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(fwd_), grid_, dim3(Config::threads()),
                               args, static_cast<size_t>(smem_), s));
  }
  std::string includes() const override { return "forward (wgmma)"; }

 private:
  nvrtc::Library lib_;
  FfpaFwdParams p_;
  dim3 grid_;
  int smem_;
  cudaKernel_t fwd_ = nullptr;
};

int padded(int D) {
  return padded_d(D, 128);
}

}  // namespace

constexpr Knob<Config> kKnobs[] = {{"Bc", &Config::Bc},
                                   {"stages", &Config::stages},
                                   {"panels", &Config::panels},
                                   {"psmem", &Config::psmem}};

Support problem_check(const Problem& pr) {
  const int64_t D = pr.shape.D;
  if (D > kMaxD)
    return Support::no("D=" + std::to_string(D) +
                       ": ffpa-fwd-sm90 keeps O in registers, D must be at most " +
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
  Config c;  // Bc=64
  if (pr.shape.D <= 384) {
    c.stages = 8;
  } else if (pr.bias == BiasKind::query_key || pr.bias == BiasKind::full ||
             (pr.bias != BiasKind::none && pr.causal != Causal::none)) {
    // A bias tile (17 KB) leaves no room for 4 slots of 2 panels; with a key bias and causal
    // masking 2-panel slots spill 40-52 bytes.
    c.stages = 6;
  } else {  // D padded to 512: 4 panels a half
    // Two panels a slot halve the block barriers per tile: 321 TFLOPS at D=512 on the H200 against
    // 264 with 6 one-panel slots (--tune fast, results/h200/2026-12-02b/fwd-sm90-tune).
    c.stages = 4;
    c.panels = 2;
  }
  return c;
}

int smem_bytes(const Config& c, int D) {
  return ffpa_layout::fwd_sm90_layout(padded(D), c.Bc, c.stages, c.panels, c.psmem, 0, false).bytes;
}

int block_smem(const Config& c, const fwd::Features& f) {
  const int bias_rows = f.bias == 0 ? 0 : f.key_bias ? 1 : 64;
  return ffpa_layout::fwd_sm90_layout(padded(f.D), c.Bc, c.stages, c.panels, c.psmem, bias_rows,
                                      f.dropout)
      .bytes;
}

int accumulator_registers(const Config& c, int D) {
  // O (64 x D/2 over 128 threads), S, P fragments
  return padded(D) / 4 + c.Bc / 2 + (c.psmem ? 0 : c.Bc / 4);
}

Support check(const Config& c, int D, int smem_limit) {
  auto s = [](int v) { return std::to_string(v); };
  if (c.Bc != 64 && c.Bc != 128) return Support::no("Bc must be 64 or 128");
  if (c.stages < 3)
    return Support::no("stages must be at least 3 (one slot in use, one draining, one loading)");
  if (c.psmem != 0 && c.psmem != 1) return Support::no("psmem is 0 or 1");
  if (c.panels < 1 || (padded(D) / 128) % c.panels)
    return Support::no("panels=" + s(c.panels) + " must divide " + s(padded(D) / 128) +
                       " (the 64-column panels of a warpgroup's half of D)");
  if (D % 8 || D > kMaxD)
    return Support::no("D=" + s(D) +
                       ": ffpa-fwd-sm90 keeps O in registers, D must be a multiple of 8, at most " +
                       s(kMaxD));
  return check_resources(smem_bytes(c, D), smem_limit, Config::threads(),
                         accumulator_registers(c, D) + kRegisterOverhead);
}

std::vector<std::string> nvrtc_options(const Config& c, const fwd::Features& f) {
  std::vector<std::string> o = knob_defines(kKnobs, c);  // FFPA_BC, _STAGES, _PANELS, _PSMEM
  const std::vector<std::string> fd = f.defines();
  o.insert(o.end(), fd.begin(), fd.end());
  o.push_back(define("FFPA_BIAS_ROWS", f.bias == 0 ? 0 : f.key_bias ? 1 : 64));
  return o;
}

nvrtc::Compiled compile(const Config& c, const fwd::Features& f) {
  return nvrtc::compile("ffpa_fwd_sm90.cuh", nvrtc_options(c, f), "sm_90a");
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  if (Support s = needs_sm90(dev); !s.ok()) throw Unsupported(s.reason);
  if (Support s = problem_check(pr); !s.ok()) throw Unsupported(s.reason);
  const int D = static_cast<int>(pr.shape.D);
  if (Support s = check(c, D, dev.smem_per_block_optin); !s.ok()) throw Unsupported(s.reason);
  const fwd::Features f = fwd::Features::of(pr);
  if (const int smem = block_smem(c, f); smem > dev.smem_per_block_optin)
    throw Unsupported("needs " + std::to_string(smem) +
                      " bytes of shared memory with the staged bias and dropout bits, the device "
                      "allows " +
                      std::to_string(dev.smem_per_block_optin));
  nvrtc::Compiled comp = compile(c, f);
  refuse_spills(comp, "ffpa_fwd_sm90_kernel");
  return comp;
}

std::unique_ptr<Op> bind(const Problem& pr, const Config& c, const FfpaFwdParams& params,
                         const gpu::DeviceInfo& dev) {
  nvrtc::Compiled comp = compile_for(pr, c, dev);
  // 16-byte cp.async of Q/K/V rows, 4-byte O stores.
  if (!qkvo_aligned(params, 2))
    throw Unsupported("q/k/v need 16-byte aligned rows and strides in multiples of 8 elements");
  FfpaFwdParams p = params;
  p.num_splits = 1;
  p.o_partial = nullptr;
  p.lse_partial = nullptr;
  const auto& sh = pr.shape;
  const dim3 grid = launch_grid((sh.group() * sh.Nq + 63) / 64, sh.Hkv, sh.B);
  return std::make_unique<Fwd90Op>(nvrtc::Library(comp.cubin), p, grid,
                                   block_smem(c, fwd::Features::of(pr)));
}

}  // namespace ffpa::fwd90

namespace ffpa {
namespace {

struct Fwd90 {
  static constexpr const char* name = "ffpa-fwd-sm90";
  static constexpr Pass pass = Pass::fwd;
  using Config = fwd90::Config;
  static constexpr auto knob_names = fwd90::knob_names;
  static constexpr auto default_config = fwd90::default_config;
  static constexpr auto check = fwd90::check;
  static constexpr auto compile = fwd90::compile_for;
  static constexpr auto problem_check = fwd90::problem_check;  // D <= 512
  static constexpr auto device_check = ffpa_family::needs_sm90;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return fwd90::bind(p, c, t.fwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_fwd_sm90() {
  return std::make_unique<ffpa_family::FfpaVariant<Fwd90>>();
}

}  // namespace ffpa
