#include "core/build_info.hpp"

#include <set>
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

namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void mix(std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // separator, so ("ab","c") != ("a","bc")
  }
};

// Adds name and the embedded files its `#include "..."` lines name, transitively (whatever
// #if surrounds them: a superset of what a compile reads), to seen.
void include_closure(std::string_view name, std::set<std::string>& seen) {
  if (!seen.insert(std::string(name)).second) return;
  const std::string_view text = embedded_source(name);
  for (size_t pos = text.find("#include"); pos != std::string_view::npos;
       pos = text.find("#include", pos + 8)) {
    const size_t open = text.find_first_not_of(" \t", pos + 8);
    if (open == std::string_view::npos || text[open] != '"') continue;
    const size_t close = text.find('"', open + 1);
    if (close == std::string_view::npos) break;
    const std::string_view inc = text.substr(open + 1, close - open - 1);
    for (size_t i = 0; i < kEmbeddedFileCount; ++i)
      if (inc == kEmbeddedFiles[i].name) include_closure(inc, seen);
  }
}

}  // namespace

uint64_t kernel_source_hash() {
  Fnv f;
  for (size_t i = 0; i < kEmbeddedFileCount; ++i) {
    f.mix(kEmbeddedFiles[i].name);
    f.mix(kEmbeddedFiles[i].text);
  }
  return f.h;
}

std::vector<std::string> kernel_source_files(std::string_view main_file) {
  std::set<std::string> files;
  include_closure(main_file, files);
  return {files.begin(), files.end()};
}

uint64_t kernel_source_hash(std::string_view main_file) {
  Fnv f;
  for (const std::string& name : kernel_source_files(main_file)) {  // sorted by name
    f.mix(name);
    f.mix(embedded_source(name));
  }
  return f.h;
}

}  // namespace ffpa
