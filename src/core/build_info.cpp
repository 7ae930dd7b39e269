#include "core/build_info.hpp"

#include <string>

#include "core/error.hpp"

namespace ffpa {

extern const EmbeddedFile kEmbeddedFiles[];
extern const size_t kEmbeddedFileCount;

std::vector<EmbeddedFile> embedded_files() {
  return {kEmbeddedFiles, kEmbeddedFiles + kEmbeddedFileCount};
}

std::string_view embedded_source(std::string_view name) {
  for (size_t i = 0; i < kEmbeddedFileCount; ++i)
    if (name == kEmbeddedFiles[i].name) return kEmbeddedFiles[i].text;
  throw RunError("kernel source '" + std::string(name) + "' is not embedded in this build");
}

uint64_t kernel_source_hash() {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // separator, so ("ab","c") != ("a","bc")
  };
  for (size_t i = 0; i < kEmbeddedFileCount; ++i) {
    mix(kEmbeddedFiles[i].name);
    mix(kEmbeddedFiles[i].text);
  }
  return h;
}

}  // namespace ffpa
