// Reading input files with a size limit and writing output files atomically: every file the tool
// reads or writes goes through here, so that errors name the file and the reason the same way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ffpa {

// Case matrices, grids and tuning caches are small; results files grow with rows (a few KiB each,
// a sweep at the plan's limit stays under kMaxInputBytes).
constexpr int64_t kMaxConfigBytes = int64_t{16} << 20;
constexpr int64_t kMaxInputBytes = int64_t{1} << 30;

// The bytes of a regular file of at most max_bytes; a gzip file (results kept compressed) is
// inflated. Throws InputError(path, "/", reason) for a missing or unreadable file, a directory or
// other non-regular file, one that is too large (or inflates past max_bytes), or a corrupt gzip
// stream.
std::string read_input_file(const std::filesystem::path&, int64_t max_bytes = kMaxInputBytes);

// Writes to a temporary file in the same directory, fsyncs it, renames it over `path` and fsyncs
// the directory: readers (and an interrupted sweep) see the old or the new file, never half of one.
// Creates missing parent directories. Throws RunError on a file system failure.
void write_file_atomic(const std::filesystem::path&, std::string_view bytes);

// strerror(errno).
std::string errno_text();

}  // namespace ffpa
