// The decode backward (kernels/ffpa_bwd_decode.cuh) below the Variant interface: its
// configuration, what it costs, the NVRTC options it compiles with, and an Op bound to a filled
// FfpaBwdParams. Features, the preprocess and convert kernels and the Op are the sm80 backward's
// (bwd::Features, bwd::make_op).
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

namespace ffpa::bwd_decode {

// Knobs of the kernel, as in configs/grids/ffpa-bwd-decode.json: a block of 128 threads takes
// `kb` keys of one kv head with every query row of its group.
struct Config {
  int kb = 32;  // keys of a block: 32 or 64

  static Config from_knobs(const Knobs&);  // missing knobs keep their defaults
  Knobs knobs() const;
  static constexpr int threads() { return 128; }
};

constexpr int kMaxRows = 16;  // query rows of a group (group x Nq) a block holds
constexpr int kMaxD = 1024;

// Whether the kernel handles the problem: group x Nq at most 16, D a multiple of 8 up to 1024.
Support problem_check(const Problem&);

const std::vector<std::string>& knob_names();
Config default_config(const Problem&);
int smem_bytes(const Config&, int D);
// Whether the configuration can run D on a device of this shared-memory limit.
Support check(const Config&, int D, int smem_limit);

std::vector<std::string> nvrtc_options(const Config&, const bwd::Features&);
// Compiles (or reads from the cubin cache) for `arch`.
nvrtc::Compiled compile(const Config&, const bwd::Features&, const std::string& arch);

// What bind() compiles for the problem on the device; needs no GPU. Throws Unsupported for a
// problem the kernel refuses, when the configuration does not fit or ptxas spilled.
nvrtc::Compiled compile_for(const Problem&, const Config&, const gpu::DeviceInfo&);

// Binds a compiled configuration to tensors described by `params` (as for bwd::bind). Throws
// Unsupported when dK or dV rows are not 16-byte aligned (the kernel stores 8 elements at once).
std::unique_ptr<Op> bind(const Problem&, const Config&, const FfpaBwdParams& params,
                         const gpu::DeviceInfo&);

}  // namespace ffpa::bwd_decode

namespace ffpa {

// The "ffpa-bwd-decode" variant over this kernel (listed in runner/registry.cpp).
std::unique_ptr<Variant> make_ffpa_bwd_decode();

}  // namespace ffpa
