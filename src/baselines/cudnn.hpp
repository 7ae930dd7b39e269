// cuDNN fused SDPA (cudnn-frontend graph API) as a baseline. The implementation lives in its own
// library (ffpa_cudnn) because the frontend bundles its own nlohmann/json; this header stays free
// of cudnn_frontend so any translation unit may include it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "variants/op.hpp"

namespace ffpa {

std::unique_ptr<Baseline> make_cudnn_baseline();

namespace cudnn {

// Cache key of one cuDNN graph: everything that changes the graph (shape, dtypes, causal
// alignment, bias shape and dtype, dropout probability, pass, dBias output) and nothing that only
// changes the data (seed, bias scale, case name).
std::string graph_key(const Problem&, Pass, bool with_dbias);

// The bias tensor as cuDNN sees it: [1|B, 1|Hq, 1|Nq, Nkv], contiguous in that shape.
std::array<int64_t, 4> bias_dims(const Problem&);

// "9.19.0" from cudnnGetVersion()'s 91900 (cuDNN 9 encoding: major*10000 + minor*100 + patch).
std::string version_string(size_t cudnn_get_version);

// One way of expressing a problem to cuDNN. bind() tries the direct one first and the equivalent
// ones only when cuDNN refuses it (or, for the key bias backward, gets it wrong).
struct Formulation {
  bool dbias = false;     // also compute dBias (backward with a bias)
  bool band = false;      // bottom-right causal as a top-left band with right bound Nkv - Nq
  bool expand_q = false;  // key bias declared [1,1,Nq,Nkv] with a zero row stride
};

// For tests: binds exactly one formulation, bypassing the cache. Throws Unsupported on refusal.
std::unique_ptr<Op> bind_formulation(const Problem&, Pass, AttnTensors&, const Formulation&);

// Why the cuDNN library cannot be loaded (dlopen's message), or empty when it is loaded.
std::string load_error();

}  // namespace cudnn
}  // namespace ffpa
