#include "core/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace ffpa {
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RunError("cannot create " + dir.string() + ": " + ec.message());

  // pid + counter keep concurrent writers (threads or processes) off each other's temp file.
  static std::atomic<unsigned> counter{0};
  const fs::path tmp = dir / ("." + path.filename().string() + ".tmp." + std::to_string(getpid()) +
                              "." + std::to_string(counter++));
  const auto fail = [&](const std::string& what) {
    const std::string why = errno_text();
    fs::remove(tmp, ec);
    throw RunError(what + ": " + why);
  };

  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create " + tmp.string());
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      fail("cannot write " + tmp.string());
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("cannot fsync " + tmp.string());
  }
  if (::close(fd) != 0) fail("cannot close " + tmp.string());
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    fail("cannot rename " + tmp.string() + " to " + path.string());
  // The rename is durable only once the directory entry is.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace ffpa
