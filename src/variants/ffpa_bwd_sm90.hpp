// The Hopper wgmma backward (kernels/ffpa_bwd_sm90.cuh) below the Variant interface: its
// configuration, what a configuration costs, the NVRTC options it compiles with, and an Op bound to
// a filled FfpaBwdParams. Features are the sm80 backward's (bwd::Features); the preprocess and
// convert kernels and the Op (workspaces, launches) are shared with it (bwd::make_op).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "gpu/cuda.hpp"
#include "gpu/nvrtc.hpp"
#include "params.h"
#include "variants/ffpa_bwd_sm80.hpp"
#include "variants/op.hpp"

namespace ffpa::bwd90 {

// Knobs of the kernel, as in configs/grids/ffpa-bwd-sm90.json. The block is fixed: 32 keys, query
// tiles of 64 rows, two warpgroups splitting D.
struct Config {
  int panels = 1;  // 64-column panels of each half per Q/dO cp.async group (divides DP / 128)
  int split = 0;   // 1: warpgroups load and guard their own halves (warpgroup barriers)
  int pair = 0;    // 1 (split 0): clusters of 2 blocks sum dQ before reducing (half the atomics)
  int dqbuf = 1;   // dQ chunk accumulators: 2 issues chunk c + 1 before reducing chunk c

  static Config from_knobs(const Knobs&);  // missing knobs keep their defaults
  Knobs knobs() const;
  static constexpr int threads() { return 256; }
  static constexpr int Bc = 32;
};

constexpr int kMaxD = 512;  // dK and dV (D x 32 fp32 a warpgroup each) live in registers

// Empty when the kernel handles the problem: D a multiple of 8 up to 512.
Support problem_check(const Problem&);

const std::vector<std::string>& knob_names();
Config default_config(const Problem&);
int smem_bytes(const Config&, int D);
// Accumulator registers per thread (dK, dV, and dQ's chunk), the part that grows with D.
int accumulator_registers(const Config&, int D);
// Whether the configuration can run D on a device of this shared-memory limit.
Support check(const Config&, int D, int smem_limit);

std::vector<std::string> nvrtc_options(const Config&, const bwd::Features&);
// Compiles (or reads from the cubin cache) for sm_90a.
nvrtc::Compiled compile(const Config&, const bwd::Features&);

// What bind() compiles for the problem on the device; needs no GPU. Throws Unsupported off
// Hopper, for a problem the kernel refuses, when the configuration does not fit or ptxas spilled.
nvrtc::Compiled compile_for(const Problem&, const Config&, const gpu::DeviceInfo&);

// Binds a compiled configuration to tensors described by `params` (as for bwd::bind).
std::unique_ptr<Op> bind(const Problem&, const Config&, const FfpaBwdParams& params,
                         const gpu::DeviceInfo&);

}  // namespace ffpa::bwd90

namespace ffpa {

// The "ffpa-bwd-sm90" variant over this kernel (listed in runner/registry.cpp).
std::unique_ptr<Variant> make_ffpa_bwd_sm90();

}  // namespace ffpa
