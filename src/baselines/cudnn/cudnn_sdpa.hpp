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

// The bias buffer's shape, contiguous: [1|B, 1|Hq, 1|Nq, Nkv].
std::array<int64_t, 4> bias_dims(const Problem&);

// "9.19.0" from cudnnGetVersion()'s 91900 (cuDNN 9 encoding: major*10000 + minor*100 + patch).
std::string version_string(size_t cudnn_get_version);

// Why the cuDNN library cannot be loaded (dlopen's message), or empty when it is loaded.
std::string load_error();

}  // namespace cudnn
}  // namespace ffpa
