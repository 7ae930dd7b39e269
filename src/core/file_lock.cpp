#include "core/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace ffpa {

FileLock::FileLock(const std::string& path) {
  const std::string lock = path + ".lock";
  const std::filesystem::path dir = std::filesystem::path(lock).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw RunError("cannot open " + lock + ": " + std::strerror(errno));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw RunError("cannot lock " + lock + ": " + why);
  }
}

FileLock::~FileLock() {
  ::close(fd_);  // releases the lock
}

}  // namespace ffpa
