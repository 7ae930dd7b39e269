// --save-tensors: a row's inputs and each FFPA variant's outputs as float32 .npy files (fp16/bf16
// values are exact in float32) plus meta.json, so anyone can check ffpa-bench's output with their
// own tools.
#pragma once

#include <string>

#include "core/types.hpp"

namespace ffpa {

struct AttnTensors;

// Writes the row's inputs once into dir/<row>/, <row> = <case>_<pass>_<dtype>_<B>x<Hq>x<Hkv>x<Nq>x
// <Nkv>x<D> (when `inputs`: q, k, v, bias with a bias kind; for the backward also do and the
// forward's o, lse), and the outputs of `impl` (o, lse; or dq, dk, dv, dbias) with meta.json into
// dir/<row>.<impl>/, beside hard links to the inputs: every folder with a meta.json holds all a
// checker needs. Returns that folder.
std::string save_tensors(const std::string& dir, const AttnTensors&, Pass, const std::string& impl,
                         bool inputs);

}  // namespace ffpa
