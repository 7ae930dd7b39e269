#include "core/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include "core/error.hpp"

namespace ffpa {

std::string errno_text() {
  return std::strerror(errno);
}

namespace {

// The inflated bytes of a gzip file (results kept compressed in a repository), at most max_bytes.
std::string gunzip(const std::string& gz, const std::string& file, int64_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw InputError(file, "/", "cannot inflate");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      const std::string why = z.msg ? z.msg : "truncated";
      inflateEnd(&z);
      throw InputError(file, "/", "not a valid gzip file: " + why);
    }
    const size_t n = sizeof buf - z.avail_out;
    if (static_cast<int64_t>(out.size() + n) > max_bytes) {
      inflateEnd(&z);
      throw InputError(
          file, "/",
          "inflates past " + std::to_string(max_bytes >> 20) + " MiB; not an input file");
    }
    out.append(buf, n);
    if (rc == Z_OK && n == 0 && z.avail_in == 0) {  // the input ended inside the stream
      inflateEnd(&z);
      throw InputError(file, "/", "not a valid gzip file: truncated");
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace

std::string read_input_file(const std::filesystem::path& path, int64_t max_bytes) {
  const std::string file = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(file, "/", "cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw InputError(file, "/", "cannot read: " + why);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw InputError(file, "/", "is a directory, not a file");
  }
  // Devices and pipes (/dev/zero) may never end: only their first max_bytes are read.
  std::string text;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = errno_text();
      ::close(fd);
      throw InputError(file, "/", "cannot read: " + why);
    }
    if (n == 0) break;
    if (static_cast<int64_t>(text.size()) + n > max_bytes) {
      ::close(fd);
      throw InputError(
          file, "/", "larger than " + std::to_string(max_bytes >> 20) + " MiB; not an input file");
    }
    try {
      text.append(buf, static_cast<size_t>(n));
    } catch (const std::bad_alloc&) {
      // Under a memory limit (ulimit -v) a file below max_bytes may still not fit.
      ::close(fd);
      throw InputError(file, "/",
                       "does not fit in the memory available (" +
                           std::to_string(text.size() >> 20) + " MiB read)");
    }
  }
  ::close(fd);
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b)
    return gunzip(text, file, max_bytes);
  return text;
}

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
