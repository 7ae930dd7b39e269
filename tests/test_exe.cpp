// ffpa-bench as a user runs it, without a GPU: the exit codes and messages of bad input, caches
// that cannot be trusted, and SIGINT/SIGTERM during a run (compiling here; a GPU sweep stops at
// the same checks).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <thread>

#include "gpu/cuda.hpp"
#include "plan/plan.hpp"
#include "runner/runner.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using ffpa::test::read_file;
using ffpa::test::TempDir;
using ffpa::test::write_file;

namespace {

const char* kOk =
    R"({"defaults":{"B":1,"H":8,"N":256,"D":64,"dtypes":["bf16"]},"cases":[{"name":"a"}]})";

// A committed run on the H200: every row passes its check.
const char* kResults = "results/h200/2026-12-03/default-tune/ffpa_NVIDIA_H200_results.json";

struct Proc {
  pid_t pid = -1;
  fs::path log;  // stdout and stderr
};

// Starts ffpa-bench in `dir` with `env` added ("NAME=value"), its output going to a file; with
// `vmem` bytes of address space at most when given (ulimit -v).
Proc start(const fs::path& dir, const std::vector<std::string>& args,
           const std::vector<std::string>& env = {}, rlim_t vmem = 0) {
  Proc p;
  p.log = dir / ("out." + std::to_string(::getpid()) + "." + std::to_string(std::rand()));
  p.pid = fork();
  REQUIRE(p.pid >= 0);
  if (p.pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(120);
    const int fd = ::open(p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(121);
    dup2(fd, 1);
    dup2(fd, 2);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    const rlimit limit{vmem, vmem};
    if (vmem && setrlimit(RLIMIT_AS, &limit) != 0) _exit(123);
    std::vector<char*> argv = {const_cast<char*>(FFPA_BENCH)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(FFPA_BENCH, argv.data());
    _exit(122);
  }
  return p;
}

struct Done {
  int rc = -1;
  std::string out;
};

Done wait_for(const Proc& p) {
  int status = 0;
  REQUIRE(waitpid(p.pid, &status, 0) == p.pid);
  Done d;
  d.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  d.out = read_file(p.log);
  return d;
}

Done run(const fs::path& dir, const std::vector<std::string>& args,
         const std::vector<std::string>& env = {}) {
  return wait_for(start(dir, args, env));
}

#define CHECK_RUN(d, code, text)                \
  do {                                          \
    INFO((d).out);                              \
    CHECK((d).rc == (code));                    \
    CHECK_THAT((d).out, Catch::Contains(text)); \
  } while (0)

size_t count_files(const fs::path& dir, const std::string& suffix) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& f : fs::recursive_directory_iterator(dir, ec)) {
    const std::string name = f.path().filename().string();
    n += name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
  return n;
}

size_t count_containing(const fs::path& dir, const std::string& part) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& f : fs::recursive_directory_iterator(dir, ec))
    n += f.path().filename().string().find(part) != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("bad input is exit 2 before any device is looked for", "[exe]") {
  TempDir t;
  write_file(t.path() / "cfg/ok.json", kOk);
  write_file(t.path() / "afile", "x");
  CHECK_RUN(run(t.path(), {"--variant", "bogus", "--fwd"}), 2, "--variant: unknown variant");
  CHECK_RUN(run(t.path(), {"--variant", "bogus", "--list"}), 2, "--variant: unknown variant");
  CHECK_RUN(run(t.path(), {"--out", "afile", "--fwd", "--case", "self-attn"}), 2,
            "--out: afile exists and is not a directory");
  CHECK_RUN(run(t.path(), {"--config", "cfg", "--dry-run"}), 2, "cfg: is a directory");
  CHECK_RUN(run(t.path(), {"--config", "/dev/zero", "--dry-run"}), 2, "larger than 16 MiB");
  CHECK_RUN(run(t.path(), {"--config", "cfg/ok.json", "--tuning-cache", "cfg", "--fwd"}), 2,
            "cfg: /: is a directory");
}

TEST_CASE("input files too large for their kind or for the memory are exit 2", "[exe]") {
  TempDir t;
  fs::copy_file(fs::path(FFPA_SOURCE_DIR) / kResults, t.path() / "base.json");
  // Tuning caches are read up to 16 MiB, as case files and grids.
  write_file(t.path() / "big.json", std::string(17 << 20, ' '));
  CHECK_RUN(
      run(t.path(), {"--config", (fs::path(FFPA_SOURCE_DIR) / "configs/default.json").string(),
                     "--case", "self-attn", "--fwd", "--no-bwd", "--dtype", "bf16", "--variant",
                     "ffpa-fwd-sm80", "--compile-only", "sm_90a", "--tuning-cache", "big.json"}),
      2, "big.json: /: larger than 16 MiB");
  // Results files may be up to 1 GiB: one that does not fit in the address space is bad input
  // named by its path, not std::bad_alloc.
  CHECK_RUN(wait_for(start(t.path(), {"compare", "base.json", "/dev/zero"}, {}, rlim_t{1} << 30)),
            2, "/dev/zero: /: does not fit in the memory available");
}

TEST_CASE("without a GPU a run is exit 3, says what works, and leaves nothing behind", "[exe]") {
  if (ffpa::gpu::available()) return;  // it would run
  TempDir t;
  write_file(t.path() / "cfg/ok.json", kOk);
  CHECK_RUN(run(t.path(), {"--config", "cfg/ok.json", "--fwd"}), 3, "--compile-only");
  CHECK_FALSE(fs::exists(t.path() / "ffpa-out"));
}

TEST_CASE("a dry run with --tune checks the grids", "[exe]") {
  TempDir t;
  write_file(t.path() / "g/ffpa-fwd-sm80.json", "{\"variant\": ");
  const Done d =
      run(t.path(), {"--dry-run", "--tune", "fast", "--fwd", "--variant", "ffpa-fwd-sm80"},
          {"FFPA_GRIDS_DIR=g"});
  CHECK_RUN(d, 2, "ffpa-fwd-sm80.json");
}

TEST_CASE("the dry run's memory figures do not overflow", "[exe]") {
  TempDir t;
  const Done d = run(t.path(), {"--case", "self-attn", "--fwd", "--dtype", "bf16", "--N",
                                "2147483647", "--dry-run"});
  INFO(d.out);
  CHECK(d.rc == 0);
  CHECK(d.out.find("-1") == std::string::npos);  // no negative MiB
  CHECK_THAT(d.out, Catch::Contains("unfused n/a"));
  const Done none = run(t.path(), {"--baseline", "none", "--case", "self-attn", "--fwd", "--dtype",
                                   "bf16", "--dry-run"});
  CHECK_RUN(none, 0, "largest item needs 1025.0 MiB.");
}

TEST_CASE("report: --out is the flag's, the default is beside the results", "[exe]") {
  TempDir t;
  write_file(t.path() / "afile", "x");
  const fs::path results = fs::path(FFPA_SOURCE_DIR) / kResults;
  REQUIRE(fs::exists(results));
  fs::copy_file(results, t.path() / "r.json");
  CHECK_RUN(run(t.path(), {"report", "r.json", "--out", "afile"}), 2,
            "--out: afile exists and is not a directory");
  CHECK_RUN(run(t.path(), {"report", "r.json", "--out", "afile/sub"}), 2, "--out: cannot create");
  const Done d = run(t.path(), {"report", "r.json", "--out", "ffpa-out", "--format", "md"});
  INFO(d.out);
  CHECK(d.rc == 0);
  CHECK(count_files(t.path() / "ffpa-out", "_speedup.md") == 1);
  CHECK(count_files(t.path(), "_speedup.md") == 1);  // not beside r.json as well
}

TEST_CASE("sharded, pooled and merged runs: bad input is exit 2, no GPU is exit 3", "[exe]") {
  TempDir t;
  write_file(t.path() / "cfg/ok.json", kOk);
  write_file(t.path() / "afile", "x");
  CHECK_RUN(run(t.path(), {"--config", "cfg/ok.json", "--dry-run", "--shard", "1/2"}), 0,
            "(shard 1/2 of a plan of 2)");
  CHECK_RUN(run(t.path(), {"--config", "cfg/ok.json", "--dry-run", "--shard", "2/2"}), 2,
            "--shard: I = 2 must be below N = 2");
  CHECK_RUN(run(t.path(), {"--config", "cfg/ok.json", "--devices", "1,1"}), 2,
            "--devices: device 1 listed twice");
  CHECK_RUN(run(t.path(), {"--config", "cfg/ok.json", "--devices", "0", "--out", "afile"}), 2,
            "--out: afile exists and is not a directory");
  if (!ffpa::gpu::available()) {
    CHECK_RUN(run(t.path(), {"--config", "cfg/ok.json", "--devices", "all"}), 3, "no usable GPU: ");
    CHECK_FALSE(fs::exists(t.path() / "ffpa-out"));
  }

  // A results file from before --shard cannot be placed in a plan.
  fs::copy_file(fs::path(FFPA_SOURCE_DIR) / kResults, t.path() / "r.json");
  CHECK_RUN(run(t.path(), {"merge", "out.json", "r.json"}), 2, "r.json: /plan: missing");
  CHECK_RUN(run(t.path(), {"merge", "out.json", "none.json"}), 2, "none.json: /: cannot open");
  CHECK_RUN(run(t.path(), {"merge", "r.json", "r.json"}), 2, "OUT.json: is also an input");
  CHECK_RUN(run(t.path(), {"merge", "afile/out.json", "r.json"}), 2,
            "OUT.json: afile exists and is not a directory");
  CHECK_FALSE(fs::exists(t.path() / "out.json"));
}

TEST_CASE("compare refuses runs of different GPUs unless asked", "[exe]") {
  TempDir t;
  const fs::path results = fs::path(FFPA_SOURCE_DIR) / kResults;
  std::string text = read_file(results);
  const std::string gpu = "\"gpu\": \"";
  const size_t at = text.find(gpu);
  REQUIRE(at != std::string::npos);
  text.insert(at + gpu.size(), "Other ");
  write_file(t.path() / "base.json", read_file(results));
  write_file(t.path() / "other.json", text);
  CHECK_RUN(run(t.path(), {"compare", "base.json", "other.json"}), 2,
            "other.json: /env/gpu: GPU \"Other ");
  CHECK_RUN(run(t.path(), {"compare", "base.json", "other.json", "--allow-different-gpus"}), 0,
            "Warning: different GPUs");
  CHECK_RUN(run(t.path(), {"compare", "base.json", "."}), 2, ".: /: is a directory");
}

TEST_CASE("compile-only fails when nothing compiles or nothing can be cached", "[exe]") {
  TempDir t;
  write_file(t.path() / "cfg/ok.json", kOk);
  write_file(t.path() / "afile", "x");
  const std::vector<std::string> sm90 = {"--config",      "cfg/ok.json",    "--fwd",
                                         "--dtype",       "bf16",           "--variant",
                                         "ffpa-fwd-sm90", "--compile-only", "sm_80"};
  CHECK_RUN(run(t.path(), sm90, {"XDG_CACHE_HOME=xdg"}), 2,
            "--compile-only: nothing to compile for sm_80: ffpa-fwd-sm90: ");
  const std::vector<std::string> one = {
      "--config",      "cfg/ok.json",    "--fwd", "--dtype", "bf16", "--variant",
      "ffpa-fwd-sm80", "--compile-only", "sm_80", "-j",      "1"};
  CHECK_RUN(run(t.path(), one, {"XDG_CACHE_HOME=afile"}), 2, "XDG_CACHE_HOME: cannot use");

  // An entry that cannot be written (here a directory stands where its cubin goes; a full disk
  // fails the same way) is exit 1, not "Compiled ... 0 refused" and exit 0.
  CHECK_RUN(run(t.path(), one, {"XDG_CACHE_HOME=xdg"}), 0, "Compiled 1 kernel configurations");
  const fs::path dir = t.path() / "xdg/ffpa-bench/cubins";
  std::vector<fs::path> cubins;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().extension() == ".cubin") cubins.push_back(f.path());
  REQUIRE(cubins.size() == 1);
  fs::remove_all(dir);
  fs::create_directories(cubins[0]);
  CHECK_RUN(run(t.path(), one, {"XDG_CACHE_HOME=xdg"}), 1, "the cubin cache was not filled");
  CHECK(count_containing(dir, ".tmp") == 0);
}

TEST_CASE("compile-only warns about a bad tuning cache and compiles what its arch stored",
          "[exe]") {
  TempDir t;
  write_file(t.path() / "cfg/ok.json", kOk);
  const std::vector<std::string> env = {"XDG_CACHE_HOME=xdg"};
  std::vector<std::string> args = {
      "--config",       "cfg/ok.json",    "--fwd", "--dtype", "bf16", "--variant",
      "ffpa-fwd-sm80",  "--compile-only", "sm_80", "-j",      "1",    "-v",
      "--tuning-cache", "tuning.json"};
  write_file(t.path() / "tuning.json", "{\"schema\": 99, \"entries\": []}");
  CHECK_RUN(run(t.path(), args, env), 0, "warning: tuning.json: unusable tuning cache");

  // What an A100 run stored (another configuration than the default) is compiled for sm_80.
  using namespace ffpa;
  PlanRequest o;
  o.config = (t.path() / "cfg/ok.json").string();
  o.bwd = false;
  const Plan plan = make_plan(o);
  const Registry reg = Registry::make();
  const Variant* v = selected_variants(reg, {"ffpa-fwd-sm80"}).front();
  gpu::DeviceInfo a100 = gpu::known_device("sm_80");
  a100.name = "NVIDIA A100-SXM4-80GB";
  a100.driver_version = 12040;
  const Problem& p = plan.items.front().problem;
  Knobs tuned;
  for (const Knobs& k : grid_points(variant_grid(*v), TuneMode::fast))
    if (k != v->default_knobs(p) && v->supports(p, k, a100).ok()) tuned = k;
  REQUIRE_FALSE(tuned.empty());
  fs::remove(t.path() / "tuning.json");
  TuningCache cache = TuningCache::load((t.path() / "tuning.json").string());
  cache.store(make_cache_key(a100, v->name(), p, Pass::fwd), tuned, 1.0);
  cache.save();
  const Done d = run(t.path(), args, env);
  CHECK_RUN(d, 0, "Compiled 2 kernel configurations");
  CHECK_THAT(d.out, Catch::Contains("| " + to_string(tuned) + " | cache | ok |"));
}

TEST_CASE("a cubin cache entry that does not match its manifest is compiled again", "[exe]") {
  TempDir t;
  write_file(t.path() / "cfg/ok.json", kOk);
  const std::vector<std::string> one = {
      "--config",  "cfg/ok.json",    "--fwd",          "--dtype", "bf16",
      "--variant", "ffpa-fwd-sm80",  "--compile-only", "sm_80",   "-j",
      "1",         "--tuning-cache", "none.json"};
  const std::vector<std::string> env = {"XDG_CACHE_HOME=xdg"};
  CHECK_RUN(run(t.path(), one, env), 0, "Compiled 1 kernel configurations");
  const fs::path dir = t.path() / "xdg/ffpa-bench/cubins";
  fs::path cubin;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().extension() == ".cubin") cubin = f.path();
  REQUIRE_FALSE(cubin.empty());
  const std::string good = read_file(cubin);
  fs::path log = cubin;
  log.replace_extension(".log");
  write_file(cubin, "garbage");
  write_file(log, "0 bytes stack frame, 64 bytes spill stores, 64 bytes spill loads");
  CHECK_RUN(run(t.path(), one, env), 0, "0 refused");
  CHECK(read_file(cubin) == good);
  CHECK(read_file(log).find("64 bytes spill") == std::string::npos);  // ptxas's log, not ours
  CHECK(count_containing(dir, ".tmp") == 0);
}

TEST_CASE("SIGINT during --compile-only keeps what was compiled and exits 130", "[exe][signal]") {
  TempDir t;
  write_file(t.path() / "cfg/ok.json", kOk);
  // --tune max: dozens of configurations, one compiler thread; plenty of time to interrupt.
  const std::vector<std::string> args = {"--config", "cfg/ok.json",    "--fwd",         "--dtype",
                                         "bf16",     "--variant",      "ffpa-fwd-sm80", "--tune",
                                         "max",      "--compile-only", "sm_80",         "-j",
                                         "1",        "--tuning-cache", "none.json"};
  const fs::path dir = t.path() / "xdg/ffpa-bench/cubins";
  for (int sig : {SIGINT, SIGTERM}) {
    INFO(sig);
    fs::remove_all(t.path() / "xdg");
    const Proc p = start(t.path(), args, {"XDG_CACHE_HOME=xdg"});
    const auto t0 = std::chrono::steady_clock::now();
    while (count_files(dir, ".sha256") == 0 &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(count_files(dir, ".sha256") > 0);
    kill(p.pid, sig);
    const Done d = wait_for(p);
    CHECK_RUN(d, 128 + sig, sig == SIGINT ? "stopped by SIGINT" : "stopped by SIGTERM");
    CHECK_THAT(d.out, Catch::Contains("configurations compiled and cached"));
    // Every entry is whole: no temporary left, each cubin with its log and manifest.
    CHECK(count_containing(dir, ".tmp") == 0);
    CHECK(count_files(dir, ".cubin") == count_files(dir, ".sha256"));
    CHECK(count_files(dir, ".log") == count_files(dir, ".sha256"));
  }
}

TEST_CASE("a second SIGINT quits at once", "[exe][signal]") {
  TempDir t;
  write_file(t.path() / "cfg/ok.json", kOk);
  const std::vector<std::string> args = {"--config", "cfg/ok.json",    "--fwd",         "--dtype",
                                         "bf16",     "--variant",      "ffpa-fwd-sm80", "--tune",
                                         "max",      "--compile-only", "sm_80",         "-j",
                                         "1",        "--tuning-cache", "none.json"};
  const Proc p = start(t.path(), args, {"XDG_CACHE_HOME=xdg"});
  const auto t0 = std::chrono::steady_clock::now();
  while (count_containing(t.path() / "xdg", "ffpa-bench") == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(p.pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto before = std::chrono::steady_clock::now();
  kill(p.pid, SIGINT);
  const Done d = wait_for(p);
  CHECK_RUN(d, 130, "interrupted twice");
  CHECK(std::chrono::steady_clock::now() - before < std::chrono::seconds(2));
}
