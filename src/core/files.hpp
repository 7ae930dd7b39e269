// Writing files so that readers never see half of one.
#pragma once

#include <filesystem>
#include <string_view>

namespace ffpa {

// Writes to a temporary file in the same directory, fsyncs it, renames it over `path` and fsyncs
// the directory: readers (and an interrupted sweep) see the old or the new file, never half of one.
// Creates missing parent directories. Throws RunError on a file system failure.
void write_file_atomic(const std::filesystem::path&, std::string_view bytes);

}  // namespace ffpa
