// The decode forward (kernels/ffpa_fwd_decode.cuh) below the Variant interface: its
// configuration, what a configuration costs, the NVRTC options, and an Op bound to a filled
// FfpaFwdParams with TMA maps of K and V. Features are the sm80 forward's (fwd::Features).
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

namespace ffpa::fwd_decode {

// Knobs, as in configs/grids/ffpa-fwd-decode.json. The block is fixed: every query row of a kv
// head's group (at most 16), a producer warp and four consumer warps; the grid is one wave of
// blocks that share the heads' keys equally.
struct Config {
  int kb = 64;    // keys of a tile: 32 or 64
  int slots = 4;  // ring slots, a K or a V tile each (2 to 8)

  static Config from_knobs(const Knobs&);  // missing knobs keep their defaults
  Knobs knobs() const;
  static constexpr int threads() { return 160; }
};

constexpr int kMaxRows = 16;  // query rows of a group (group x Nq) a block holds
constexpr int kMaxD = 1024;

// Whether the kernel handles the problem: group x Nq at most 16, D up to 1024.
Support problem_check(const Problem&);

const std::vector<std::string>& knob_names();
Config default_config(const Problem&);
int smem_bytes(const Config&, int D);
// Whether the configuration can run D on a device of this shared-memory limit.
Support check(const Config&, int D, int smem_limit);

std::vector<std::string> nvrtc_options(const Config&, const fwd::Features&);
nvrtc::Compiled compile(const Config&, const fwd::Features&);

// What bind() compiles for the problem on the device; needs no GPU. Throws Unsupported off
// Hopper, for a problem the kernel refuses, when the configuration does not fit or ptxas spilled.
nvrtc::Compiled compile_for(const Problem&, const Config&, const gpu::DeviceInfo&);

std::unique_ptr<Op> bind(const Problem&, const Config&, const FfpaFwdParams& params,
                         const gpu::DeviceInfo&);

}  // namespace ffpa::fwd_decode

namespace ffpa {

// The "ffpa-fwd-decode" variant over this kernel (listed in runner/registry.cpp).
std::unique_ptr<Variant> make_ffpa_fwd_decode();

}  // namespace ffpa
