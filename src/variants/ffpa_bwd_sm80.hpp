// The sm80+ split-D backward (kernels/ffpa_bwd.cuh) below the Variant interface: its
// configuration, what a configuration costs (shared memory, estimated registers), the NVRTC
// options it compiles with, and an Op bound to a filled FfpaBwdParams.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "gpu/cuda.hpp"
#include "gpu/nvrtc.hpp"
#include "params.h"
#include "variants/op.hpp"

namespace ffpa::bwd {

// Knobs of the kernel, as in configs/grids/ffpa-bwd-sm80.json.
struct Config {
  int Br = 64;    // query rows per tile
  int Bc = 32;    // keys per block (dK/dV rows held in registers)
  int warps = 8;  // half compute S, half dP; all share dV, dK, dQ by 16-column blocks of D
  int Wr = 4;     // phase 1: each half splits [Br x Bc] into Wr row slices
  int Kd = 64;    // D chunk of the Q/dO cp.async groups

  static Config from_knobs(const Knobs&);  // missing knobs keep their defaults
  Knobs knobs() const;
  int threads() const { return warps * 32; }
};

// What the compiled kernel is specialised on besides the knobs.
struct Features {
  int D = 512;
  bool bf16 = true;
  int causal = 0;  // 0 none, 1 bottom-right, 2 top-left
  int bias = 0;    // 0 none, 1 fp32, 2 input dtype
  int dbias = 0;   // 0 none, 1 key [1,1,1,Nkv], 2 query_key [1,1,Nq,Nkv], 3 full [B,Hq,Nq,Nkv]
  bool dropout = false;

  static Features of(const Problem&);
  // -DFFPA_D, _BF16, _CAUSAL, _BIAS, _DBIAS, _DROPOUT: what every backward kernel reads.
  std::vector<std::string> defines() const;
};

const std::vector<std::string>& knob_names();
Config default_config(const Problem&);
int smem_bytes(const Config&, int D);
// fp32 registers a thread holds for dK, dV and the phase-1 S/dP slice: the part that grows.
int accumulator_registers(const Config&, int D);
// Whether the configuration can run D on a device of this shared-memory limit.
Support check(const Config&, int D, int smem_limit);

std::vector<std::string> nvrtc_options(const Config&, const Features&);
// Compiles (or reads from the cubin cache) for arch ("sm_80", "sm_90a").
nvrtc::Compiled compile(const Config&, const Features&, const std::string& arch);

// What bind() compiles for the problem on the device (checks, NVRTC or the cubin cache); needs no
// GPU. Throws Unsupported when the configuration does not fit or ptxas spilled registers.
nvrtc::Compiled compile_for(const Problem&, const Config&, const gpu::DeviceInfo&);

// Binds a compiled configuration to tensors described by `params` (fwd part as for the forward,
// with o and lse of the forward; dout, dq, dk, dv, dbias and their strides). dbias is given exactly
// when the problem has a bias, with the bias's shape, dtype and strides. Workspaces (delta,
// dq_accum, dbias_accum) are allocated here. Throws Unsupported when ptxas spilled or the tensors
// are misaligned.
std::unique_ptr<Op> bind(const Problem&, const Config&, const FfpaBwdParams& params,
                         const gpu::DeviceInfo&);

// bind() after the compile, shared with the sm90 backward (bwd90::bind): checks the tensors'
// alignment, allocates the workspaces and wraps ffpa_bwd_pre_kernel, `main_kernel` (one block per
// Bc keys, kv head and batch, the key tiles rounded up to a multiple of `cluster`; `threads`,
// `smem` bytes of dynamic shared memory) and ffpa_bwd_convert_kernel of `comp` in an Op.
// `dq_floats`: the dq_accum workspace when the kernels use their own layout of it (0: [B, Hq, Nq,
// D]). `main_waits`: the main kernel calls grid_dependency_wait (kernels/ffpa_common.cuh)
// before it reads delta or touches dq_accum, so on sm_90 it is launched early, its first loads
// overlapping the preprocess. On sm_90 the convert kernel is always launched early (it waits).
// Throws Unsupported when the tensors are misaligned.
// `tail` (not null): the main kernel runs the last wave's key tiles split by query range where
// ffpa_family::plan_tail gains (FfpaBwdParams::split_from; the pieces in a plane of the grid past
// the batches): `steps` query tiles a key tile of `keys` keys, `merge` the kernel that sums the
// pieces' dK and dV after it.
struct SplitTail {
  int steps = 0;
  int keys = 0;
  const char* merge = nullptr;
};
// Throws Unsupported unless q, k, v, o and dO have 16-byte aligned rows and strides (cp.async,
// vector loads, TMA maps) and dq, dk, dv 4-byte aligned pairs: make_op's first check, for a
// bind() that encodes tensor maps before it.
void check_aligned(const FfpaBwdParams& params);
// `maps` (not null): the main kernel takes two TMA maps after the params, a then b (K and V for
// the decode kernels, Q and dO for ffpa-bwd-sm90c with tma = 1).
struct MainMaps {
  FfpaTmaDesc a, b;
};
// `stream` (not null): the main kernel is one wave of blocks sharing `keys` keys
// (ffpa_fwd_decode_layout.h's decode_blocks with `kb`) in place of make_op's grid. With `writes` (a
// kernel name) the main kernel leaves P and dS in a workspace of `pds_bytes` (params.pds) and
// `writes` makes dK and dV from them after it: a grid of one wave of `writes_threads`-thread blocks
// over the B x Hkv heads (y), `writes_smem` bytes of shared memory each, taking TMA maps of dK and
// dV (tdk, tdv) after the params.
struct StreamKeys {
  FfpaTmaDesc tdk, tdv;
  int64_t keys = 0;
  int kb = 0;
  const char* writes = nullptr;
  int writes_threads = 0, writes_smem = 0;
  int64_t pds_bytes = 0;
};
std::unique_ptr<Op> make_op(const Problem&, const nvrtc::Compiled& comp, const char* main_kernel,
                            int Bc, int threads, int smem, const FfpaBwdParams& params,
                            const gpu::DeviceInfo&, int cluster = 1, int64_t dq_floats = 0,
                            bool main_waits = false, const SplitTail* tail = nullptr,
                            const StreamKeys* stream = nullptr, const MainMaps* maps = nullptr);

}  // namespace ffpa::bwd

namespace ffpa {

// The "ffpa-bwd-sm80" variant over this kernel (listed in runner/registry.cpp).
std::unique_ptr<Variant> make_ffpa_bwd_sm80();

}  // namespace ffpa
