// Unfused attention, the strong baseline above D = 256: cuBLASLt GEMMs around one fused pointwise
// pass per direction, with O(B*Hq*Nq*Nkv) score memory (reported, skipped when it does not fit).
#pragma once

#include <cstdint>
#include <memory>

#include "variants/op.hpp"

namespace ffpa {

std::unique_ptr<Baseline> make_unfused_baseline();

// Device memory the unfused baseline allocates beyond the problem's tensors for one pass; at most
// INT64_MAX (meaningful where the baseline supports the problem).
int64_t unfused_extra_bytes(const Problem&, Pass);

}  // namespace ffpa
