// The sm80+ split-D forward (kernels/ffpa_fwd.cuh) below the Variant interface: its
// configuration, what a configuration costs (shared memory, estimated registers), the NVRTC
// options it compiles with, and an Op bound to a filled FfpaFwdParams.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "gpu/cuda.hpp"
#include "gpu/nvrtc.hpp"
#include "params.h"
#include "variants/op.hpp"

namespace ffpa::fwd {

// Knobs of the kernel, as in configs/grids/ffpa-fwd-sm80.json.
struct Config {
  int Br = 64;     // query rows per block
  int Bc = 64;     // keys per tile
  int Wm = 2;      // warps along rows
  int Wn = 4;      // warps along key columns (QK) and D (PV)
  int Kd = 64;     // D chunk streamed through shared memory
  int stages = 4;  // cp.async pipeline depth
  int priv = 0;    // knob "private": each warp streams its own K/V slices (no block barriers)
  int splits = 0;  // split-KV count; 0 = enough to fill the GPU (decode)

  static Config from_knobs(const Knobs&);  // missing knobs keep their defaults
  Knobs knobs() const;
  int threads() const { return Wm * Wn * 32; }
};

// Query rows of a kv head (group x Nq) up to which a problem is decode: its default streams
// K and V in wider tiles.
constexpr int64_t kDecodeRows = 16;

// What the compiled kernel is specialised on besides the knobs.
struct Features {
  int D = 512;
  bool bf16 = true;
  int causal = 0;  // 0 none, 1 bottom-right, 2 top-left
  int bias = 0;    // 0 none, 1 fp32, 2 input dtype
  bool dropout = false;
  bool split = false;
  bool key_bias = false;  // the bias is one row of keys for every query ([1,1,1,Nkv]); sm90 only

  static Features of(const Problem&);
  // -DFFPA_D, _BF16, _CAUSAL, _BIAS, _DROPOUT: what every forward kernel reads.
  std::vector<std::string> defines() const;
};

const std::vector<std::string>& knob_names();
Config default_config(const Problem&);
int smem_bytes(const Config&, int D);
// Accumulator registers per thread (O + P fragments + S), the part that grows with the config.
int accumulator_registers(const Config&, int D);
// Whether the configuration can run D on a device of this shared-memory limit.
Support check(const Config&, int D, int smem_limit);
// The resolved split count for a problem on a device of `sm_count` multiprocessors.
int resolve_splits(const Config&, const Problem&, int sm_count);

std::vector<std::string> nvrtc_options(const Config&, const Features&);
// Compiles (or reads from the cubin cache) for arch ("sm_80", "sm_90a").
nvrtc::Compiled compile(const Config&, const Features&, const std::string& arch);
// The arch NVRTC compiles for on this device: sm_90a on Hopper, sm_XY elsewhere.
std::string target_arch(const gpu::DeviceInfo&);

// What bind() compiles for the problem on the device (checks, NVRTC or the cubin cache); needs no
// GPU. Throws Unsupported when the configuration does not fit or ptxas spilled registers.
nvrtc::Compiled compile_for(const Problem&, const Config&, const gpu::DeviceInfo&);

// Binds a compiled configuration to tensors described by `params` (strides, pointers, B, H, N, D,
// scale, causal, bias, dropout filled in; num_splits and the partial buffers are set here).
// Throws Unsupported when ptxas spilled registers for this configuration.
std::unique_ptr<Op> bind(const Problem&, const Config&, const FfpaFwdParams& params,
                         const gpu::DeviceInfo&);

}  // namespace ffpa::fwd

namespace ffpa {

// The "ffpa-fwd-sm80" variant over this kernel (listed in runner/registry.cpp).
std::unique_ptr<Variant> make_ffpa_fwd_sm80();

}  // namespace ffpa
