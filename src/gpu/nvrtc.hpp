// Run-time compilation of the embedded kernel sources (kernels/*.cuh, *.h) with NVRTC, an on-disk
// cubin cache, and loading through the runtime's library API (cudaLibrary_t), so the binary needs
// no driver library at link time and starts on machines without a GPU.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace ffpa::nvrtc {

// What ptxas reported for one kernel (--ptxas-options=-v).
struct KernelInfo {
  int registers = 0;
  int spill_stores = 0;  // bytes
  int spill_loads = 0;   // bytes
  int stack_bytes = 0;
  int static_smem = 0;  // bytes
};
using PtxasInfo = std::map<std::string, KernelInfo>;  // by kernel (extern "C") name

// Parses the ptxas -v part of an NVRTC log.
PtxasInfo parse_ptxas(const std::string& log);

struct Compiled {
  std::string cubin;
  std::string log;  // NVRTC/ptxas log of the compile that produced the cubin
  PtxasInfo info;
  bool cached = false;  // read from the disk cache
};

// Compiles a translation unit that includes the embedded file `main_file`, for `arch` ("sm_80",
// "sm_90a"), with extra NVRTC options (e.g. "-DFFPA_D=512"). Every embedded file can be included.
// Results are cached under cache_dir() keyed by kernel_source_hash(main_file), the options, the
// arch and the NVRTC version: <key>.cubin, <key>.log and <key>.sha256 (sizes and SHA-256 of both,
// written last); an entry whose files do not match it is compiled again and replaced. Thread-safe;
// a key being compiled by another thread is waited for, not compiled twice. Throws RunError with
// the log when compilation fails.
Compiled compile(const std::string& main_file, const std::vector<std::string>& options,
                 const std::string& arch);

// cache_root()/cubins; empty: no cache.
std::string cache_dir();

// The first failure to write a cache entry in this process (disk full, not a directory), or empty.
std::string cache_write_error();

// NVRTC's version, "major.minor".
std::string version();

// A loaded cubin (cudaLibraryLoadData); unloaded on destruction.
class Library {
 public:
  explicit Library(const std::string& cubin);
  ~Library();
  Library(Library&& o) noexcept;
  Library& operator=(Library&& o) noexcept;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // Throws RunError if the library has no such kernel.
  cudaKernel_t kernel(const char* name) const;

 private:
  cudaLibrary_t lib_ = nullptr;
};

}  // namespace ffpa::nvrtc
