// Facts about this build, generated at build time (cmake/build_info.cmake, cmake/embed.cmake).
#pragma once

#include <cstdint>
#include <string>
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
// FNV-1a over every embedded file's name and text: part of the tuning-cache keys.
uint64_t kernel_source_hash();
// main_file and the embedded files its `#include "..."` lines name, transitively (whatever #if
// surrounds them), sorted. Throws RunError if main_file is not embedded.
std::vector<std::string> kernel_source_files(std::string_view main_file);
// FNV-1a over kernel_source_files(main_file), names and texts: part of the cubin-cache
// key, so a change to one kernel family leaves the other families' cubins valid.
uint64_t kernel_source_hash(std::string_view main_file);

}  // namespace ffpa
