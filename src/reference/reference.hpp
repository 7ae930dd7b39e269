// GPU reference for --check: unfused attention with fp32 GEMMs (never TF32) and fp32 softmax,
// plus the same computation in the input dtype ("lowprec") for FA3's correctness rule
// (ANCHORS.md): max|out - ref_fp32| <= 2 * max|ref_lowprec - ref_fp32| + atol.
// Works in chunks of query rows so that score memory stays bounded (~1 GiB per buffer).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/results.hpp"
#include "gpu/cuda.hpp"
#include "tensors/tensors.hpp"
#include "unfused/kernels.hpp"

namespace ffpa {

struct Reference {
  Pass pass = Pass::fwd;
  // fp32, in the layouts of AttnTensors; dq, dk, dv, dbias only for the backward.
  gpu::DeviceBuffer o, lse, dq, dk, dv, dbias;
  std::map<std::string, double> lowprec_err;  // max|ref_lowprec - ref_fp32| per tensor name
};

// Runs both references on the tensors' inputs (and dout for bwd). Throws RunError on failure.
Reference compute_reference(const AttnTensors&, Pass);

// o and lse for the forward; dq, dk, dv (and dbias with a bias) for the backward.
std::vector<TensorCheck> check_outputs(const AttnTensors&, const Reference&, Pass);

// Without a reference (--no-check): counts each output's NaN and infinite elements, so that
// "NaN/Inf fails a row" holds all the same.
std::vector<TensorCheck> scan_outputs(const AttnTensors&, Pass);

// Copies the reference o (rounded to the input dtype) and lse into the tensors' forward outputs,
// so a backward can run on consistent forward results.
void write_forward_outputs(AttnTensors&, const Reference&);

// Host copy of n device elements, widened to double.
std::vector<double> download(const void* dev, Elem, int64_t n);

// Uniforms of elements [0, n) of the dropout stream (seed, offset), computed on the GPU.
std::vector<float> dropout_uniforms_gpu(int64_t n, uint64_t seed, uint64_t offset);

}  // namespace ffpa
