// Double-precision attention forward and backward on the host: the ground truth for small shapes,
// itself tested against the independent PyTorch oracle (testdata/oracle).
#pragma once

#include <cstdint>
#include <vector>

#include "core/types.hpp"

namespace ffpa {

struct HostAttnInputs {
  std::vector<double> q, k, v;  // [B,Hq,Nq,D], [B,Hkv,Nkv,D], [B,Hkv,Nkv,D]
  std::vector<double> bias;     // in the problem's bias shape; empty without a bias
  std::vector<double> dout;     // [B,Hq,Nq,D]; empty: forward only
  uint64_t dropout_seed = 0, dropout_offset = 0;
};

// o [B,Hq,Nq,D], lse [B,Hq,Nq]; with dout also dq, dk, dv (summed over each GQA group) and dbias
// (reduced to the bias shape). A row that sees no key has o = 0, lse = -inf and no gradient.
struct HostAttnOutputs {
  std::vector<double> o, lse, dq, dk, dv, dbias;
};

HostAttnOutputs cpu_attention(const Problem&, const HostAttnInputs&);

// Index of bias element (b, h, i, j) in the problem's bias shape.
int64_t bias_index(const Problem&, int64_t b, int64_t h, int64_t i, int64_t j);
// Number of keys row i sees: keys [0, result) are visible (may be <= 0: none).
int64_t visible_keys(const Problem&, int64_t i);

}  // namespace ffpa
