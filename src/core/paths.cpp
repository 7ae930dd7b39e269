#include "core/paths.hpp"

#include <cstdlib>
#include <filesystem>

namespace ffpa {

std::string find_data_path(const std::string& relative) {
  namespace fs = std::filesystem;
  // Only the shipped data (configs/...) is looked up beside the executable: a user's own relative
  // path that is missing must say so, not silently load another file of that name.
  const fs::path rel(relative);
  if (fs::exists(rel) || rel.is_absolute() || rel.empty() || *rel.begin() != "configs")
    return relative;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path dir = exe.parent_path(); dir.has_relative_path(); dir = dir.parent_path())
      if (fs::exists(dir / relative)) return (dir / relative).string();
  return relative;
}

std::string cache_root() {
  namespace fs = std::filesystem;
  // A relative XDG_CACHE_HOME (which the XDG spec says to ignore) is taken from the working
  // directory, for both caches alike: the documented GPU workflow uses XDG_CACHE_HOME=.cache.
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::absolute(x) / "ffpa-bench").lexically_normal().string();
  if (const char* h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "ffpa-bench").string();
  return {};
}

std::string grids_dir() {
  if (const char* env = std::getenv("FFPA_GRIDS_DIR")) return env;
  return find_data_path("configs/grids");
}

}  // namespace ffpa
