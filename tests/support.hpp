// Helpers shared by the test binaries: paths, temporary directories, oracle .npy loading.
#pragma once

#include <filesystem>
#include <string>

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

}  // namespace ffpa::test
