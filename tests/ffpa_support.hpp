// Helpers shared by the ffpa kernel tests (test_compile_ffpa_*, gpu_ffpa_*): problems, 16-bit
// conversions, device uploads, contiguous kernel parameters and the forward and backward checks
// against the CPU reference.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/results.hpp"
#include "core/types.hpp"
#include "gpu/cuda.hpp"
#include "gpu/nvrtc.hpp"
#include "params.h"
#include "reference/cpu_reference.hpp"
#include "support.hpp"
#include "variants/op.hpp"

namespace ffpa::test {

// A problem of the kernel tests (seed 1).
Problem make(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nkv, int64_t D,
             Dtype dt = Dtype::bf16);
// The bias tests' problems: every bias shape (key, query_key, full) in fp32 and in the input
// dtype, GQA, B = 2, 37 x 90.
std::vector<Problem> bias_problems(int D, Dtype dt);
// The compile tests' problem: 32 heads of 8192 x 8192.
Problem compile_problem(int D, Causal causal = Causal::none);
// What the compile tests check configurations against (no GPU needed).
gpu::DeviceInfo h200();

// Compiles in a private cache directory, so the compiler really runs.
struct FreshCache {
  TempDir dir;
  FreshCache();
  ~FreshCache();
};

// A compiled cubin with ptxas reports for `kernels`: 1..255 registers, no spills, no stack frame,
// and at most `fences` GPU-wide memory barriers (MEMBAR.ALL.GPU) in each kernel's SASS. One at a
// kernel's start or end is a cluster barrier's release; one a loop iteration (an arrival or fence
// at cluster or GPU scope) shows as many, and waits for every memory access in flight each time
// (ffpa-fwd-sm90ws with cluster = 2 had 66 and ran three times slower). A kernel that publishes
// generic stores to another block inside its loop needs them: its test says how many.
void check_clean(const nvrtc::Compiled&, std::initializer_list<const char*> kernels,
                 int fences = 2);

// SASS instructions of `kernel` in the cubin whose mnemonic starts with `opcode` (e.g.
// "MEMBAR.ALL.GPU"), read with nvdisasm (FFPA_NVDISASM).
int sass_count(const nvrtc::Compiled&, const std::string& kernel, const std::string& opcode);

uint16_t to_bf16(float);  // round to nearest even (inputs are finite)

// Conversions to and from the problem's 16-bit dtype.
struct Half {
  Dtype dt;
  uint16_t to(float f) const;
  float from(uint16_t h) const;
};

gpu::DeviceBuffer upload_half(const std::vector<double>& x, Half h);
// Random inputs of the problem, drawn from rng in this order: q, k, v, dO (with_dout), the bias
// (when the problem has one). `in` receives what the kernels read and fixed dropout seeds.
struct DeviceInputs {
  gpu::DeviceBuffer q, k, v, dout, bias;
};
DeviceInputs upload_inputs(const Problem&, std::mt19937& rng, bool with_dout, HostAttnInputs& in);
std::vector<double> download_half(const gpu::DeviceBuffer& d, Half h);
gpu::DeviceBuffer poisoned(size_t bytes);  // NaN in bf16, fp16 and fp32

// Median time of `iters` launches on a fresh stream (CUDA events) after `warmup` untimed ones, ms.
double median_ms(Op& op, int warmup, int iters, const char* name);

// Every output check passed, with finite values only.
void expect_passed(const std::vector<TensorCheck>& checks);

// Forward parameters of contiguous [B, H, N, D] tensors and a contiguous bias of the problem's
// shape: strides, sizes, scale, causal, dropout (the seeds of `in`); pointers are left null.
FfpaFwdParams contiguous_params(const Problem&, const HostAttnInputs& in);

// One forward launch on random inputs into poisoned outputs (bind makes the op from the
// parameters), checked against the double CPU reference: every O and LSE element written,
// rel. L2 < 2 eps, max error < 4 eps * max(1, max|ref|), LSE within 2e-3 (eps: 1/256 bf16,
// 1/2048 fp16: P and O are rounded once each). A failure says where O is off, by column % 64 and
// query row % 16 (LSE depends on QK only, O on PV too). `config` describes the configuration.
using BindForward =
    std::function<std::unique_ptr<Op>(const FfpaFwdParams&, const gpu::DeviceInfo&)>;
void expect_forward_close(const Problem&, const std::string& config, const BindForward& bind);

// The variant bound through AttnTensors (as the runner binds it) into poisoned outputs passes the
// runner's FA3-rule check against the GPU fp32 reference, for each problem.
void expect_forward_variant_passes(Variant&, const std::vector<Problem>&);
// The same for the backward: o and lse from the reference, dq, dk, dv (and dbias) poisoned.
void expect_backward_variant_passes(Variant&, const std::vector<Problem>&);

// "D=.. B=.. Hq=.. Hkv=.. Nq=.. Nkv=.. causal=.. bias=../.. dropout=.. dtype" of a problem.
std::string describe(const Problem&);

// One backward op (bind makes it from the parameters) launched twice (the workspaces are re-zeroed
// inside launch()) on random inputs with random dO, the CPU reference forward's o (rounded to the
// dtype) and lse, into poisoned outputs; dq, dk, dv (and dbias) are checked against the double
// CPU reference: every element written, rel. L2 < 3 eps, max error < 8 eps * max(1e-2, max|ref|).
// `config` describes the configuration.
using BindBackward =
    std::function<std::unique_ptr<Op>(const FfpaBwdParams&, const gpu::DeviceInfo&)>;
void expect_backward_close(const Problem&, const std::string& config, const BindBackward& bind);

// Fills o and lse with ffpa-fwd-sm80 (its default configuration), binds the backward op
// (bind; an Unsupported is printed as the row and skipped) and prints its median time over CUDA
// events and TFLOPS: "name problem config ms TFLOPS [includes]".
using BindBackwardTensors =
    std::function<std::unique_ptr<Op>(AttnTensors&, const gpu::DeviceInfo&)>;
void bench_backward(const char* name, const Problem&, const std::string& config,
                    const BindBackwardTensors& bind);

// Times a forward configuration on random B x H x N x D inputs (CUDA events, median of 10 after
// 3 warm-ups) and prints its TFLOPS, or why bind refused it.
void bench_forward(const char* name, const Problem&, const std::string& config,
                   const BindForward& bind);

// Large-problem bf16 inputs: a random block tiled over the buffer (random, never zeros, cheap).
gpu::DeviceBuffer big_random(int64_t n, std::mt19937& rng);

}  // namespace ffpa::test
