// The Hopper decode backward (kernels/ffpa_bwd_decode_sm90.cuh) below the Variant interface: its
// configuration, what a configuration costs, the NVRTC options, and an Op bound to a filled
// FfpaBwdParams with TMA maps of K and V. Features, the preprocess and convert kernels and the Op
// are the sm80 backward's (bwd::Features, bwd::make_op).
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

namespace ffpa::bwd_decode90 {

// Knobs, as in configs/grids/ffpa-bwd-decode-sm90.json. A block holds every query row of a kv
// head's group (at most 16), a producer warp and `warps` consumer warps; the grid is one wave of
// blocks that share the heads' keys equally.
struct Config {
  int kb = 32;    // keys of a tile: 16, 32 or 64
  int slots = 4;  // ring slots, a K or a V tile each (2 to 8)
  int warps = 4;  // consumer warps: 4 or 8
  // 1: the kernel writes dK and dV; 2: it writes P and dS, a second kernel dK and dV from them
  // (each kernel's HBM stream then only reads or only writes)
  int passes = 1;

  static Config from_knobs(const Knobs&);  // missing knobs keep their defaults
  Knobs knobs() const;
  int threads() const { return (warps + 1) * 32; }
};

constexpr int kMaxRows = 16;  // query rows of a group (group x Nq) a block holds
constexpr int kMaxD = 1024;

// Whether the kernel handles the problem: group x Nq at most 16, D up to 1024.
Support problem_check(const Problem&);

// Query rows the kernel computes for `rows` (group x Nq): 8 or 16.
int computed_rows(int rows);

const std::vector<std::string>& knob_names();
Config default_config(const Problem&);
// Shared memory of a launch computing `nr` rows (computed_rows).
int smem_bytes(const Config&, int D, int nr);
// Whether the configuration can run D on a device of this shared-memory limit, for the fewest
// rows (8); rows_check() adds the problem's rows.
Support check(const Config&, int D, int smem_limit);
// check() for `nr` computed rows: their shared memory; 16 rows with four warps only (eight spill),
// and past D = 512 (dQ's accumulators take 128 registers a thread) with 16-key tiles only.
Support rows_check(const Config&, int D, int nr, int smem_limit);

std::vector<std::string> nvrtc_options(const Config&, const bwd::Features&, int nr);
nvrtc::Compiled compile(const Config&, const bwd::Features&, int nr);

// What bind() compiles for the problem on the device; needs no GPU. Throws Unsupported off
// Hopper, for a problem the kernel refuses, when the configuration does not fit or ptxas spilled.
nvrtc::Compiled compile_for(const Problem&, const Config&, const gpu::DeviceInfo&);

// Binds a compiled configuration to tensors described by `params` (as for bwd::bind). Throws
// Unsupported when dK or dV rows are not 16-byte aligned (the kernel stores 8 elements at once).
std::unique_ptr<Op> bind(const Problem&, const Config&, const FfpaBwdParams& params,
                         const gpu::DeviceInfo&);

}  // namespace ffpa::bwd_decode90

namespace ffpa {

// The "ffpa-bwd-decode-sm90" variant over this kernel (listed in runner/registry.cpp).
std::unique_ptr<Variant> make_ffpa_bwd_decode_sm90();

}  // namespace ffpa
