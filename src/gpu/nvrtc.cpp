#include "gpu/nvrtc.hpp"

#include <nvrtc.h>
#include <openssl/evp.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/paths.hpp"
#include "gpu/cuda.hpp"

namespace ffpa::nvrtc {
namespace fs = std::filesystem;

namespace {

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS)
    throw RunError(std::string("NVRTC ") + what + ": " + nvrtcGetErrorString(r));
}

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  h ^= 0xff;  // separator: ("ab","c") and ("a","bc") differ
  h *= 1099511628211ull;
  return h;
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// SHA-256 (OpenSSL) of a cache file's bytes: a truncated, garbled or swapped cubin is caught
// before the driver loads it.
std::string sha256(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr) != 1)
    throw RunError("SHA-256 failed");
  std::string hex;
  char b[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", md[i]);
    hex += b;
  }
  return hex;
}

// The manifest of an entry: "cubin <bytes> <sha256>" and "log <bytes> <sha256>" lines.
std::string manifest(const std::string& cubin, const std::string& log) {
  return "cubin " + std::to_string(cubin.size()) + " " + sha256(cubin) + "\nlog " +
         std::to_string(log.size()) + " " + sha256(log) + "\n";
}

// The first failure to write the cache (empty: none), for --compile-only to report.
std::mutex g_write_error_mu;
std::string g_write_error;

void note_write_error(const std::string& why) {
  const std::lock_guard<std::mutex> lock(g_write_error_mu);
  if (g_write_error.empty()) g_write_error = why;
}

// Threads asking for the same key wait for the first one, then read its cubin from the cache:
// each configuration is compiled once even when a parallel precompile and bind() meet.
class InFlight {
 public:
  explicit InFlight(std::string key) : key_(std::move(key)) {
    std::unique_lock<std::mutex> lock(mu());
    cv().wait(lock, [&] { return keys().count(key_) == 0; });
    keys().insert(key_);
  }
  ~InFlight() {
    {
      const std::lock_guard<std::mutex> lock(mu());
      keys().erase(key_);
    }
    cv().notify_all();
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::condition_variable& cv() {
    static std::condition_variable c;
    return c;
  }
  static std::set<std::string>& keys() {
    static std::set<std::string> k;
    return k;
  }
  std::string key_;
};

}  // namespace

PtxasInfo parse_ptxas(const std::string& log) {
  PtxasInfo out;
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex props(R"(Function properties for ([A-Za-z_0-9]+))");
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::istringstream in(log);
  std::string line, cur;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry) || std::regex_search(line, m, props)) {
      cur = m[1];
      out[cur];
    } else if (!cur.empty() && std::regex_search(line, m, frame)) {
      auto& k = out[cur];
      k.stack_bytes = std::stoi(m[1]);
      k.spill_stores = std::stoi(m[2]);
      k.spill_loads = std::stoi(m[3]);
    } else if (!cur.empty() && std::regex_search(line, m, used)) {
      out[cur].registers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) out[cur].static_smem = std::stoi(m[1]);
    }
  }
  return out;
}

std::string cache_write_error() {
  const std::lock_guard<std::mutex> lock(g_write_error_mu);
  return g_write_error;
}

std::string version() {
  int major = 0, minor = 0;
  check(nvrtcVersion(&major, &minor), "version");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string cache_dir() {
  const std::string root = cache_root();
  return root.empty() ? root : (fs::path(root) / "cubins").string();
}

Compiled compile(const std::string& main_file, const std::vector<std::string>& options,
                 const std::string& arch) {
  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "-std=c++17", "--use_fast_math",
                                   "--ptxas-options=-v"};
  opts.insert(opts.end(), options.begin(), options.end());

  uint64_t h = 1469598103934665603ull;
  h = fnv1a(h, std::to_string(kernel_source_hash(main_file)));
  h = fnv1a(h, version());
  h = fnv1a(h, main_file);
  for (const auto& o : opts) h = fnv1a(h, o);
  char key[17];
  std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(h));

  const InFlight one_at_a_time(key);
  const std::string dir = cache_dir();
  fs::path cubin_path, log_path, sum_path;
  if (!dir.empty()) {
    cubin_path = fs::path(dir) / (std::string(key) + ".cubin");
    log_path = fs::path(dir) / (std::string(key) + ".log");
    sum_path = fs::path(dir) / (std::string(key) + ".sha256");
    std::error_code ec;
    // An entry counts only when its manifest (written last) matches the cubin and the log; any
    // other state is compiled again and replaced.
    if (fs::exists(sum_path, ec)) {
      Compiled c;
      c.cubin = read_all(cubin_path);
      c.log = read_all(log_path);
      if (read_all(sum_path) == manifest(c.cubin, c.log) && !c.cubin.empty()) {
        c.info = parse_ptxas(c.log);
        c.cached = true;
        return c;
      }
    }
  }

  const std::string src = "#include \"" + main_file + "\"\n";
  std::vector<const char*> names, texts;
  const auto files = embedded_files();
  for (const auto& f : files) {
    names.push_back(f.name);
    texts.push_back(f.text);
  }
  nvrtcProgram prog = nullptr;
  check(nvrtcCreateProgram(&prog, src.c_str(), "ffpa_rtc.cu", static_cast<int>(names.size()),
                           texts.data(), names.data()),
        "create program");
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && log.back() == '\0') log.pop_back();
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    std::string all;
    for (const auto& o : opts) all += " " + o;
    throw RunError("NVRTC failed to compile " + main_file + " (" + nvrtcGetErrorString(r) +
                   ") with" + all + ":\n" + log);
  }
  size_t n = 0;
  check(nvrtcGetCUBINSize(prog, &n), "cubin size");
  Compiled c;
  c.cubin.resize(n);
  check(nvrtcGetCUBIN(prog, c.cubin.data()), "get cubin");
  nvrtcDestroyProgram(&prog);
  c.log = std::move(log);
  c.info = parse_ptxas(c.log);

  // A cache that cannot be written only costs time in a run; --compile-only reports it.
  if (!dir.empty()) {
    try {
      write_file_atomic(cubin_path, c.cubin);
      write_file_atomic(log_path, c.log);
      write_file_atomic(sum_path, manifest(c.cubin, c.log));  // last: the entry is complete
    } catch (const RunError& e) {
      note_write_error(e.what());
    }
  }
  return c;
}

Library::Library(const std::string& cubin) {
  FFPA_CUDA(cudaLibraryLoadData(&lib_, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
}

Library::~Library() {
  if (lib_) cudaLibraryUnload(lib_);
}

Library::Library(Library&& o) noexcept : lib_(std::exchange(o.lib_, nullptr)) {}

Library& Library::operator=(Library&& o) noexcept {
  if (this != &o) {
    if (lib_) cudaLibraryUnload(lib_);
    lib_ = std::exchange(o.lib_, nullptr);
  }
  return *this;
}

cudaKernel_t Library::kernel(const char* name) const {
  cudaKernel_t k = nullptr;
  const cudaError_t err = cudaLibraryGetKernel(&k, lib_, name);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw RunError(std::string("kernel ") + name +
                   " not found in the compiled library: " + cudaGetErrorString(err));
  }
  return k;
}

}  // namespace ffpa::nvrtc
