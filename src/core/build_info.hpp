// Facts about this build, generated at build time (cmake/build_info.cmake, cmake/embed.cmake).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ffpa {

const char* build_commit();
const char* build_flags();
const char* tool_version();

// NVRTC kernel sources embedded from kernels/*.cuh and kernels/*.h, by file name.
struct EmbeddedFile {
  const char* name;
  const char* text;
};
std::vector<EmbeddedFile> embedded_files();
// Throws RunError if no such file was embedded.
std::string_view embedded_source(std::string_view name);
// FNV-1a over every embedded file's name and text: part of the tuning-cache and cubin-cache keys.
uint64_t kernel_source_hash();

}  // namespace ffpa
