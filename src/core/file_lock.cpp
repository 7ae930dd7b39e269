#include "core/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.hpp"
#include "core/files.hpp"

namespace ffpa {

FileLock::FileLock(const std::string& path) {
  const std::string lock = path + ".lock";
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw RunError("cannot open " + lock + ": " + errno_text());
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const std::string why = errno_text();
    ::close(fd_);
    throw RunError("cannot lock " + lock + ": " + why);
  }
}

FileLock::~FileLock() {
  ::close(fd_);  // releases the lock
}

}  // namespace ffpa
