#include "core/paths.hpp"

#include <cstdlib>
#include <filesystem>

namespace ffpa {

std::string find_data_path(const std::string& relative) {
  namespace fs = std::filesystem;
  if (fs::exists(relative) || fs::path(relative).is_absolute()) return relative;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path dir = exe.parent_path(); dir.has_relative_path(); dir = dir.parent_path())
      if (fs::exists(dir / relative)) return (dir / relative).string();
  return relative;
}

std::string grids_dir() {
  if (const char* env = std::getenv("FFPA_GRIDS_DIR")) return env;
  return find_data_path("configs/grids");
}

}  // namespace ffpa
