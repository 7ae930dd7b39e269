// The Hopper wgmma forward (kernels/ffpa_fwd_sm90.cuh) below the Variant interface: its
// configuration, what a configuration costs, the NVRTC options it compiles with, and an Op bound to
// a filled FfpaFwdParams. Features (D, dtype, causal, bias, dropout) are the sm80 forward's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "gpu/cuda.hpp"
#include "gpu/nvrtc.hpp"
#include "params.h"
#include "variants/ffpa_fwd_sm80.hpp"
#include "variants/op.hpp"

namespace ffpa::fwd90 {

// Knobs of the kernel, as in configs/grids/ffpa-fwd-sm90.json. The block is fixed: 64 query rows,
// two warpgroups splitting D.
struct Config {
  int Bc = 64;     // keys per tile: 64 or 128
  int stages = 6;  // slots of the K/V ring, STAGES - 2 loaded ahead
  int panels = 1;  // 64-column panels of each half per slot (divides D padded to 128, / 128)
  int psmem = 0;   // 1: P through shared memory (PV reads it like Q), 16 registers fewer

  static Config from_knobs(const Knobs&);  // missing knobs keep their defaults
  Knobs knobs() const;
  static constexpr int threads() { return 256; }
};

constexpr int kMaxD = 512;  // O (64 x D/2 fp32 a warpgroup) lives in registers

// Whether the kernel handles the problem's D: a multiple of 8 up to 512.
Support problem_check(const Problem&);

const std::vector<std::string>& knob_names();
Config default_config(const Problem&);
int smem_bytes(const Config&, int D);
// smem_bytes plus what the features stage: the key tile's bias (one row, or a row per query) and
// keep bits. What a launch takes.
int block_smem(const Config&, const fwd::Features&);
// Accumulator registers per thread (O, S, P fragments), the part that grows with the config.
int accumulator_registers(const Config&, int D);
// Whether the configuration can run D on a device of this shared-memory limit.
Support check(const Config&, int D, int smem_limit);

std::vector<std::string> nvrtc_options(const Config&, const fwd::Features&);
// Compiles (or reads from the cubin cache) for sm_90a.
nvrtc::Compiled compile(const Config&, const fwd::Features&);

// What bind() compiles for the problem on the device; needs no GPU. Throws Unsupported off
// Hopper, when the configuration does not fit or ptxas spilled registers.
nvrtc::Compiled compile_for(const Problem&, const Config&, const gpu::DeviceInfo&);

// Binds a compiled configuration to tensors described by `params` (as for fwd::bind; no split-KV,
// the partial buffers are not used).
std::unique_ptr<Op> bind(const Problem&, const Config&, const FfpaFwdParams& params,
                         const gpu::DeviceInfo&);

}  // namespace ffpa::fwd90

namespace ffpa {

// The "ffpa-fwd-sm90" variant over this kernel (listed in runner/registry.cpp).
std::unique_ptr<Variant> make_ffpa_fwd_sm90();

}  // namespace ffpa
