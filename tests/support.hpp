// Helpers shared by the test binaries: paths, temporary directories, oracle .npy loading.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "core/error.hpp"

namespace ffpa::test {

std::filesystem::path source_dir();
// ../shared/testdata (oracle, Philox vectors); FFPA_TESTDATA in the environment overrides it.
std::filesystem::path testdata_dir();
// A fresh, empty directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};
std::string read_file(const std::filesystem::path&);
void write_file(const std::filesystem::path&, const std::string&);

// The InputError f() throws; fails the test when it throws nothing.
template <class F>
InputError thrown(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  }
  FAIL("expected an InputError");
  throw std::logic_error("unreachable");
}

}  // namespace ffpa::test
