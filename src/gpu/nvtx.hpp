// NVTX ranges in the "ffpa-bench" domain (nvtx3, header-only, from the CUDA toolkit), so that
// `nsys profile` and `ncu --nvtx` show every case, variant, configuration and timed launch under
// the name the results give it. Without a profiler attached a range costs a few nanoseconds.
#pragma once

#include <string>

namespace ffpa::gpu {

// A range from construction to destruction, on the calling thread.
class Range {
 public:
  explicit Range(const std::string& name);
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};

}  // namespace ffpa::gpu
