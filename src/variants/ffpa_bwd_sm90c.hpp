// The Hopper cluster backward (kernels/ffpa_bwd_sm90c.cuh) below the Variant interface: its
// configuration, what a configuration costs, the NVRTC options it compiles with, and an Op bound to
// a filled FfpaBwdParams. Features, the preprocess and convert kernels and the Op are the sm80
// backward's (bwd::Features, bwd::make_op).
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

namespace ffpa::bwd90c {

// Knobs of the kernel, as in configs/grids/ffpa-bwd-sm90c.json. A cluster of two blocks of two
// warpgroups works on one key tile; each block owns half of D (padded to 256), each warpgroup a
// quarter; query tiles of 64 rows. With ksplit = 1 the warpgroups split the keys for S and dP
// (over their block's columns) instead of its columns, and exchange nothing in the block; with
// cluster = 1 (and ksplit = 1) one block holds the whole D, each warpgroup a half, and nothing is
// exchanged at all.
struct Config {
  int bc = 64;      // keys per key tile: 32 or 64 (64 only with D padded to at most 512)
  int panels = 1;   // 64-column panels of each part per Q/dO cp.async group (divides its panels)
  int dqbuf = 1;    // dQ chunk accumulators: 2 issues chunk c + 1 before reducing chunk c
  int xbuf = 2;     // exchange buffers: 2 take turns, 1 needs a cluster barrier a query tile
  int dqlag = 0;    // 1: a tile's last dQ chunk overlaps the next tile's cluster exchange
  int cluster = 2;  // blocks a key tile is split over: 2 (halves of D), or 1 (D at most 320)
  int ksplit = 0;   // 1: phase 1 split by keys between the warpgroups (needed by cluster = 1)
  int tail = 0;     // 1: the last wave's key tiles split by query range where plan_tail gains (off
                    // by default until measured on the GPU: docs/notes/ffpa_bwd_sm90c.md step 10)
  int tma = 0;      // 1: Q and dO by TMA, no proxy fence a query tile (each query tile in one q
                    // head; off by default until measured: docs/notes/ffpa_bwd_sm90c.md step 13)

  static Config from_knobs(const Knobs&);  // missing knobs keep their defaults
  Knobs knobs() const;
  static constexpr int threads() { return 256; }
};

constexpr int kMaxD = 1024;  // dK and dV of a quarter of D live in registers

// Whether the kernel handles the problem: D a multiple of 8 up to 1024.
Support problem_check(const Problem&);

const std::vector<std::string>& knob_names();
Config default_config(const Problem&);
int smem_bytes(const Config&, int D);
// Accumulator registers per thread (dK, dV, and dQ's chunk), the part that grows with D.
int accumulator_registers(const Config&, int D);
// Whether the configuration can run D on a device of this shared-memory limit.
Support check(const Config&, int D, int smem_limit);

// The dq_accum workspace in floats for D padded to at most 512: per batch, kv head, query tile of
// 64 packed rows of the GQA group, warpgroup's part of D (a quarter, or a half with cluster = 1)
// and 64-column chunk of the part, a 64 x 64 block in the order of the wgmma accumulator fragments
// (kernels/ffpa_bwd_aux.cuh, FFPA_DQ_TILED); 0 past 512 (row-major [B, Hq, Nq, D], bwd::make_op's
// default).
int64_t dq_accum_floats(const Config&, const Shape&);

std::vector<std::string> nvrtc_options(const Config&, const bwd::Features&);
// Compiles (or reads from the cubin cache) for sm_90a.
nvrtc::Compiled compile(const Config&, const bwd::Features&);

// What bind() compiles for the problem on the device; needs no GPU. Throws Unsupported off
// Hopper, for a problem the kernel refuses, when the configuration does not fit or ptxas spilled,
// and for a tuning point that cannot serve the problem (tail = 1 with causal masking, tma = 1
// where a query tile of packed GQA rows would span two q heads).
nvrtc::Compiled compile_for(const Problem&, const Config&, const gpu::DeviceInfo&);

// Binds a compiled configuration to tensors described by `params` (as for bwd::bind).
std::unique_ptr<Op> bind(const Problem&, const Config&, const FfpaBwdParams& params,
                         const gpu::DeviceInfo&);

}  // namespace ffpa::bwd90c

namespace ffpa {

// The "ffpa-bwd-sm90c" variant over this kernel (listed in runner/registry.cpp).
std::unique_ptr<Variant> make_ffpa_bwd_sm90c();

}  // namespace ffpa
