// The warp-specialized Hopper forward (kernels/ffpa_fwd_sm90ws.cuh) below the Variant interface:
// its configuration, what a configuration costs, the NVRTC options, and an Op bound to a filled
// FfpaFwdParams with TMA maps of K and V.
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

namespace ffpa::fwd90ws {

// Knobs, as in configs/grids/ffpa-fwd-sm90ws.json. The block: 64 query rows (128 with rows = 1),
// a producer warpgroup and two consumer warpgroups, key blocks of 64.
struct Config {
  int slots = 16;    // 8 KB slots of the K/V rings (even: a ring per consumer)
  int cluster = 1;   // CTAs sharing each K/V panel by TMA multicast (1 or 2)
  int psmem = 0;     // 1: a consumer's own PV reads P from shared memory too (no P registers)
  int seesaw = 1;    // 1: consumers half a key-block pair apart; 0: in lock-step
  int oddpanel = 0;  // the consumer that owns a CTA's odd O panel (D = 320: 3 | 2 or 2 | 3)
  int lead = 0;      // 1 (seesaw): consumer 0 issues a pair's QK before it waits for the last P_1
  int ahead = 0;     // 1 (dropout): keep bits drawn a block ahead, under held PV groups
  int kmask = 0;     // 1 (dropout): keep bits drawn by a launch of their own before the forward
                     // into a mask (B Hq Nq Nkv / 8 bytes of workspace) the consumers read
  int qknext = 0;    // 1 (lock-step): the next pair's QK issued before this pair's PVs, its softmax
                     // run under them
  int tail = 0;      // 1: the last wave's units split by key range where plan_tail gains (off by
                     // default until measured on the GPU: docs/notes/ffpa_fwd_sm90ws.md step 9)
  int rows = 0;      // 1 (D <= 320, lock-step): 128 query rows a CTA, 64 and all of O's columns a
                     // consumer, one K/V ring read by both
  int pingpong = 0;  // 1 (rows = 1): the consumers take turns at the tensor pipe, QK and PV

  static Config from_knobs(const Knobs&);  // missing knobs keep their defaults
  Knobs knobs() const;
  static constexpr int threads() { return 384; }
};

constexpr int kMinD = 72;       // two O panels: one per consumer
constexpr int kMaxD = 1024;     // Q (64 x D) in shared memory beside the ring
constexpr int kMaxRowsD = 320;  // rows = 1: 64 rows of the whole O in a consumer's registers

// CTAs per query block: O (64 x D/2 fp32 a consumer) lives in registers up to D = 512; past it
// two CTAs split O's columns, each computing the whole S.
inline int splits(int D) {
  return D > 512 ? 2 : 1;
}

// Whether the kernel handles the problem: D and enough query rows.
Support problem_check(const Problem&);

const std::vector<std::string>& knob_names();
Config default_config(const Problem&);
int smem_bytes(const Config&, int D);
// Whether the configuration can run D on a device of this shared-memory limit.
Support check(const Config&, int D, int smem_limit);

std::vector<std::string> nvrtc_options(const Config&, const fwd::Features&);
nvrtc::Compiled compile(const Config&, const fwd::Features&);

// What bind() compiles for the problem on the device; needs no GPU. Throws Unsupported off
// Hopper, when the configuration does not fit the problem or ptxas spilled registers.
nvrtc::Compiled compile_for(const Problem&, const Config&, const gpu::DeviceInfo&);

std::unique_ptr<Op> bind(const Problem&, const Config&, const FfpaFwdParams& params,
                         const gpu::DeviceInfo&);

}  // namespace ffpa::fwd90ws

namespace ffpa {

// The "ffpa-fwd-sm90ws" variant over this kernel (listed in runner/registry.cpp).
std::unique_ptr<Variant> make_ffpa_fwd_sm90ws();

}  // namespace ffpa
