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

// Knobs of the kernel, as in configs/grids/ffpa-bwd-decode.json: a block of 256 threads takes
// every query row of one kv head's group and a range of its keys, streamed in tiles of `kb` keys
// with `stages` tiles in flight; `splits` blocks share a head's keys (0: chosen at bind, see
// auto_splits).
struct Config {
  int kb = 16;     // keys of a tile: 16, 32 or 64
  int stages = 2;  // tiles in flight (cp.async stages): 2 or 3
  int splits = 0;  // blocks a (kv head, batch): 0 = auto_splits, else at most one a tile
  // Blocks an SM the kernel's registers are budgeted for (its launch bounds): 1 to 3, 0 = by D
  // (2 up to D = 512, else 1). 3 trades registers (at most 85) for a third block's warps.
  int blocks = 0;

  static Config from_knobs(const Knobs&);  // missing knobs keep their defaults
  Knobs knobs() const;
  static constexpr int threads() { return 256; }
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

// Blocks of one SM at once: shared memory (the per-SM pool is the opt-in limit plus the 1 KiB a
// block reserves), registers (`regs` a thread, 0: unknown, not counted) and threads (2048).
int resident_blocks(int smem, int regs, const gpu::DeviceInfo&);

// Blocks a (kv head, batch) when `heads` (Hkv x B) heads of `tiles` tiles each run on `slots`
// (SMs x resident_blocks) block slots: the fewest splits among those of the least cost, counted in
// tile times of one slot: waves (ceil(heads x splits / slots)) x (tiles of a block + `stages`, the
// pipeline's fill). A block streams its keys, so it does not need many blocks to hide latency,
// only to fill the GPU: a wave that is only partly full leaves SMs idle while the rest finish.
int auto_splits(int64_t heads, int64_t tiles, int stages, int64_t slots);

// rows: the group's query rows (group x Nq, 1 to 16), FFPA_ROWS: with fewer rows than the S
// phase's row groups the idle groups split D (a cubin per row count).
std::vector<std::string> nvrtc_options(const Config&, const bwd::Features&, int rows);
// Compiles (or reads from the cubin cache) for `arch`.
nvrtc::Compiled compile(const Config&, const bwd::Features&, int rows, const std::string& arch);

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
