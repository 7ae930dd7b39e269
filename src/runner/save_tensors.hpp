// --save-tensors: a row's inputs and the FFPA outputs as float32 .npy files (fp16/bf16 values are
// exact in float32) plus meta.json, so anyone can check ffpa-bench's output with their own tools.
#pragma once

#include <string>

#include "core/types.hpp"

namespace ffpa {

struct AttnTensors;

// Writes into dir/<case>_<pass>_<dtype>_<B>x<Hq>x<Hkv>x<Nq>x<Nkv>x<D>/: q, k, v, bias (with a
// mask), o, lse; for the backward also do, dq, dk, dv, dbias. `impl` names who wrote the outputs.
// Returns the directory written.
std::string save_tensors(const std::string& dir, const AttnTensors&, Pass, const std::string& impl);

}  // namespace ffpa
