// Variant "ffpa-fwd-sm80": the portable split-D forward (mma.sync), compiled by NVRTC at bind().
#include "variants/ffpa_fwd_sm80.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "ffpa_fwd_sm80_layout.h"
#include "tensors/tensors.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::fwd {
using namespace ffpa_family;
namespace {

// Registers ptxas needs besides the accumulators (addresses, loop state, softmax temporaries),
// read off compiled configurations.
constexpr int kRegisterOverhead = 40;

class FwdOp : public Op {
 public:
  // early_merge: the merge kernel is launched early (sm_90, gpu::launch); it waits.
  FwdOp(nvrtc::Library lib, const FfpaFwdParams& p, dim3 grid, int threads, int smem,
        bool early_merge, gpu::DeviceBuffer opart, gpu::DeviceBuffer lpart)
      : lib_(std::move(lib)),
        p_(p),
        grid_(grid),
        threads_(threads),
        smem_(smem),
        early_merge_(early_merge),
        opart_(std::move(opart)),
        lpart_(std::move(lpart)) {
    fwd_ = lib_.kernel("ffpa_fwd_kernel");
    FFPA_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(fwd_),
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, smem_));
    if (p_.num_splits > 1) merge_ = lib_.kernel("ffpa_merge_kernel");
  }

  void launch(cudaStream_t s) override {
    void* args[] = {&p_};
    FFPA_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(fwd_), grid_, dim3(threads_), args,
                               static_cast<size_t>(smem_), s));
    if (merge_) {
      const long long rows = static_cast<long long>(p_.B) * p_.Hq * p_.Nq;
      gpu::launch(reinterpret_cast<const void*>(merge_), dim3(static_cast<unsigned>(rows)),
                  dim3(128), 0, s, args, early_merge_);
    }
  }
  int64_t extra_bytes() const override {
    return static_cast<int64_t>(opart_.bytes() + lpart_.bytes());
  }
  std::string includes() const override {
    return merge_ ? "split-KV forward (" + std::to_string(p_.num_splits) + " splits) + merge" +
                        (early_merge_ ? " (chained by programmatic dependent launch)" : "")
                  : "forward";
  }

 private:
  nvrtc::Library lib_;
  FfpaFwdParams p_;
  dim3 grid_;
  int threads_, smem_;
  bool early_merge_;
  gpu::DeviceBuffer opart_, lpart_;
  cudaKernel_t fwd_ = nullptr, merge_ = nullptr;
};

}  // namespace

// The grid file's spelling; the kernel reads each as FFPA_<NAME> (splits: the host resolves it).
constexpr Knob<Config> kKnobs[] = {{"Br", &Config::Br},        {"Bc", &Config::Bc},
                                   {"Wm", &Config::Wm},        {"Wn", &Config::Wn},
                                   {"Kd", &Config::Kd},        {"stages", &Config::stages},
                                   {"private", &Config::priv}, {"splits", &Config::splits, false}};

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

Features Features::of(const Problem& pr) {
  Features f;
  f.D = static_cast<int>(pr.shape.D);
  f.bf16 = pr.dtype == Dtype::bf16;
  f.causal = causal_code(pr);
  f.bias = bias_code(pr);
  f.dropout = pr.dropout > 0;
  f.key_bias = pr.bias == BiasKind::key;
  return f;
}

std::vector<std::string> Features::defines() const {
  return define_all({{"FFPA_D", D},
                     {"FFPA_BF16", bf16},
                     {"FFPA_CAUSAL", causal},
                     {"FFPA_BIAS", bias},
                     {"FFPA_DROPOUT", dropout}});
}

Config default_config(const Problem& pr) {
  Config c;  // Br=64, Bc=64, 2x4 warps, Kd=64, 4 stages: spill-free with every feature at D<=512
  const bool decode = pr.shape.group() * pr.shape.Nq <= kDecodeRows;
  if (pr.shape.D > 512) {
    c.Br = 32;  // O stays at (Br/Wm)*(D/Wn)/32 = 128 registers a thread
    // Wider chunks halve the barriers per tile: +18% at D=1024 (at D=512, +3% but ptxas spills
    // with a bias or causal+dropout).
    if (pr.shape.D % 128 == 0) c.Kd = 128, c.stages = 3;
    // Decode streams K and V once: a fourth stage keeps more bytes in flight (D = 1024 on an
    // H100: 0.366 ms against 0.379 with 3, the unfused baseline 0.373; docs/notes/ffpa_fwd.md).
    if (pr.shape.D % 128 == 0 && decode) c.stages = 4;
  } else if (decode) {
    // Decode streams K and V once (split-KV): 128-key tiles halve the tiles a block walks, and
    // their barriers and softmax steps (more splits did not help). At D = 320 on an H100 0.139 ms
    // against 0.151 for the fast grid's best (Bc = 64); at D = 512 within 1 % of the best point
    // (docs/notes/ffpa_fwd.md).
    c.Br = 32, c.Bc = 128, c.Kd = 128;
  }
  return c;
}

int smem_bytes(const Config& c, int D) {
  return ffpa_layout::fwd_sm80_layout(D, c.Br, c.Bc, c.Wm, c.Wn, c.Kd, c.stages, c.priv).total;
}

int accumulator_registers(const Config& c, int D) {
  const int rw = c.Br / c.Wm;
  return rw * padded_d(D, c.Kd) / c.Wn / 32 + rw * c.Bc / 64 + rw * (c.Bc / c.Wn) / 32;
}

Support check(const Config& c, int D, int smem_limit) {
  auto s = [](int v) { return std::to_string(v); };
  if (c.Br <= 0 || c.Bc <= 0 || c.Wm <= 0 || c.Wn <= 0 || c.Kd <= 0 || c.splits < 0)
    return Support::no("knobs must be positive");
  if (c.threads() > 1024) return Support::no(s(c.threads()) + " threads exceed 1024");
  if (c.Br % (16 * c.Wm)) return Support::no("Br=" + s(c.Br) + " is not a multiple of 16*Wm");
  if (c.Bc % 64 || c.Kd % 64)
    return Support::no("Bc and Kd must be multiples of 64 (swizzled 64-col tiles)");
  if ((c.Bc / c.Wn) % 16) return Support::no("Bc/Wn must be a multiple of 16");
  if ((c.Kd / c.Wn) % 16) return Support::no("Kd/Wn must be a multiple of 16");
  if (c.stages < 2) return Support::no("stages must be at least 2");
  if (c.priv != 0 && c.priv != 1) return Support::no("private is 0 or 1");
  // Slices of 16 and 32 columns are the ones verified on the GPU.
  if (c.priv && (c.Kd / c.Wn > 32 || (c.Bc * c.Kd / 8 / c.Wn) % 32))
    return Support::no("private slices need Kd/Wn <= 32 and whole 16-byte granules per lane");
  return check_resources(smem_bytes(c, D), smem_limit, c.threads(),
                         accumulator_registers(c, D) + kRegisterOverhead);
}

int resolve_splits(const Config& c, const Problem& pr, int sm_count) {
  const auto& sh = pr.shape;
  const int64_t tiles = (sh.Nkv + c.Bc - 1) / c.Bc;
  int64_t s = c.splits;
  if (s == 0) {
    const int64_t blocks = (sh.group() * sh.Nq + c.Br - 1) / c.Br * sh.Hkv * sh.B;
    s = std::max<int64_t>(1, sm_count / blocks);  // one block a multiprocessor
  }
  return static_cast<int>(std::clamp<int64_t>(s, 1, std::min<int64_t>(tiles, 64)));
}

std::vector<std::string> nvrtc_options(const Config& c, const Features& f) {
  std::vector<std::string> o = knob_defines(kKnobs, c);
  const std::vector<std::string> fd = f.defines();
  o.insert(o.end(), fd.begin(), fd.end());
  o.push_back(define("FFPA_SPLIT", f.split));
  return o;
}

nvrtc::Compiled compile(const Config& c, const Features& f, const std::string& arch) {
  return nvrtc::compile("ffpa_fwd.cuh", nvrtc_options(c, f), arch);
}

std::string target_arch(const gpu::DeviceInfo& d) {
  return d.arch() + (d.sm_major == 9 && d.sm_minor == 0 ? "a" : "");
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  const int D = static_cast<int>(pr.shape.D);
  if (Support s = check(c, D, dev.smem_per_block_optin); !s.ok()) throw Unsupported(s.reason);
  Features f = Features::of(pr);
  f.split = resolve_splits(c, pr, dev.sm_count) > 1;
  nvrtc::Compiled comp = compile(c, f, target_arch(dev));
  refuse_spills(comp, "ffpa_fwd_kernel");
  return comp;
}

std::unique_ptr<Op> bind(const Problem& pr, const Config& c, const FfpaFwdParams& params,
                         const gpu::DeviceInfo& dev) {
  const int D = static_cast<int>(pr.shape.D);
  nvrtc::Compiled comp = compile_for(pr, c, dev);
  // 16-byte cp.async of Q/K/V rows, 4-byte O stores (8-byte after a split-KV merge).
  if (!qkvo_aligned(params, 4))
    throw Unsupported("q/k/v need 16-byte aligned rows and strides in multiples of 8 elements");
  FfpaFwdParams p = params;
  p.num_splits = resolve_splits(c, pr, dev.sm_count);

  gpu::DeviceBuffer opart, lpart;
  const bool split = p.num_splits > 1;
  if (split) {
    const size_t rows = static_cast<size_t>(p.num_splits) * p.B * p.Hq * p.Nq;
    opart = gpu::DeviceBuffer(rows * D * sizeof(float));
    lpart = gpu::DeviceBuffer(rows * sizeof(float));
    p.o_partial = opart.as<float>();
    p.lse_partial = lpart.as<float>();
  }
  const auto& sh = pr.shape;
  if (split && sh.B * sh.Hq * sh.Nq > 0x7fffffff)
    throw Unsupported("split-KV merge grid: B*Hq*Nq exceeds 2^31");
  const dim3 grid =
      launch_grid((sh.group() * sh.Nq + c.Br - 1) / c.Br, sh.Hkv, sh.B * p.num_splits);
  // Programmatic dependent launch needs sm_90 (the cubins are compiled for the device's arch).
  return std::make_unique<FwdOp>(nvrtc::Library(comp.cubin), p, grid, c.threads(), smem_bytes(c, D),
                                 dev.sm_major >= 9, std::move(opart), std::move(lpart));
}

}  // namespace ffpa::fwd

namespace ffpa {
namespace {

struct Fwd {
  static constexpr const char* name = "ffpa-fwd-sm80";
  static constexpr Pass pass = Pass::fwd;
  using Config = fwd::Config;
  static constexpr auto knob_names = fwd::knob_names;
  static constexpr auto default_config = fwd::default_config;
  static constexpr auto check = fwd::check;
  static constexpr auto compile = fwd::compile_for;
  static constexpr auto problem_check = ffpa_family::any_problem;
  static constexpr auto device_check = ffpa_family::needs_sm80;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return fwd::bind(p, c, t.fwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_fwd_sm80() {
  return std::make_unique<ffpa_family::FfpaVariant<Fwd>>();
}

}  // namespace ffpa
