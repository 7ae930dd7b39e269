// Variant "ffpa-bwd-sm80": the portable split-D backward (mma.sync), compiled by NVRTC at bind().
#include "variants/ffpa_bwd.hpp"

#include "runner/tensors.hpp"
#include "variants/ffpa_bwd_kernel.hpp"

namespace ffpa {
namespace {

// The properties bind() needs, of the current device.
gpu::DeviceInfo current_device() {
  gpu::DeviceInfo d;
  FFPA_CUDA(cudaGetDevice(&d.ordinal));
  FFPA_CUDA(cudaDeviceGetAttribute(&d.sm_major, cudaDevAttrComputeCapabilityMajor, d.ordinal));
  FFPA_CUDA(cudaDeviceGetAttribute(&d.sm_minor, cudaDevAttrComputeCapabilityMinor, d.ordinal));
  FFPA_CUDA(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, d.ordinal));
  FFPA_CUDA(cudaDeviceGetAttribute(&d.smem_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                   d.ordinal));
  return d;
}

class FfpaBwdSm80 : public Variant {
 public:
  std::string name() const override { return "ffpa-bwd-sm80"; }
  Pass pass() const override { return Pass::bwd; }
  std::vector<std::string> knob_names() const override { return bwd::knob_names(); }
  Knobs default_knobs(const Problem& p) const override { return bwd::default_config(p).knobs(); }

  Support supports(const Problem& p) const override {
    const auto& s = p.shape;
    if (s.D % 8 || s.D < 32 || s.D > 1024)
      return Support::no("D=" + std::to_string(s.D) + ": needs a multiple of 8 in 32..1024");
    if (s.Hkv <= 0 || s.Hq % s.Hkv) return Support::no("Hq must be a multiple of Hkv");
    if (s.group() * s.Nq > 0x7fffffffLL) return Support::no("group * Nq exceeds 2^31");
    if (s.B < 1 || s.Nq < 1 || s.Nkv < 1) return Support::no("empty problem");
    return Support::yes();
  }

  Support supports(const Problem& p, const Knobs& k, const gpu::DeviceInfo& d) const override {
    if (d.sm_major < 8) return Support::no("needs sm80+ (mma.sync bf16, cp.async)");
    const std::string why =
        bwd::check(bwd::Config::from_knobs(k), static_cast<int>(p.shape.D), d.smem_per_block_optin);
    return why.empty() ? Support::yes() : Support::no(why);
  }

  std::unique_ptr<Op> bind(const Problem& p, const Knobs& k, AttnTensors& t) override {
    return bwd::bind(p, bwd::Config::from_knobs(k), t.bwd_params(), current_device());
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_bwd_sm80() {
  return std::make_unique<FfpaBwdSm80>();
}

}  // namespace ffpa
