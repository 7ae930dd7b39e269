// ffpa-bench: benchmark and autotune FFPA attention kernels against cuDNN and unfused attention.
// Data flows one way: CLI -> plan -> runner -> results -> report.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/listing.hpp"
#include "cli/options.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/interrupt.hpp"
#include "core/paths.hpp"
#include "gpu/nvrtc.hpp"
#include "plan/plan.hpp"
#include "report/chart.hpp"
#include "report/compare.hpp"
#include "report/csv.hpp"
#include "report/format.hpp"
#include "report/markdown.hpp"
#include "report/progress.hpp"
#include "report/results_json.hpp"
#include "runner/runner.hpp"
#include "tuning/cache.hpp"

namespace fs = std::filesystem;
using namespace ffpa;

namespace {

constexpr int kExitNoGpu = 3;

std::string file_stem(const std::string& gpu) {
  std::string s;
  for (char c : gpu) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return "ffpa_" + s;
}

// Checks, without creating anything, that the directory named by `flag` exists or can be created
// and written: a bad one is bad input (exit 2), found before any GPU work.
void check_output_dir(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  while (!ec && !fs::exists(p, ec) && p.has_relative_path()) p = p.parent_path();
  if (ec) throw InputError("command line", flag, "cannot use " + dir + ": " + ec.message());
  if (!fs::is_directory(p, ec))
    throw InputError("command line", flag,
                     p.string() == fs::absolute(dir).string()
                         ? dir + " exists and is not a directory"
                         : "cannot create " + dir + ": " + p.string() + " is not a directory");
  if (::access(p.c_str(), W_OK | X_OK) != 0)
    throw InputError("command line", flag, "cannot write into " + p.string() + ": " + errno_text());
}

// The directory named by `flag`, checked and created.
fs::path output_dir(const std::string& dir, const std::string& flag) {
  check_output_dir(dir, flag);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError("command line", flag, "cannot create " + dir + ": " + ec.message());
  return dir;
}

// Markdown, CSV and charts into dir; returns the markdown for stdout.
std::string write_reports(const Results& r, BaselineMode baseline, const ReportOptions& o,
                          const fs::path& dir) {
  const std::string stem = file_stem(r.env.gpu);
  const std::string md = render_markdown(r, baseline);
  if (o.wants("md")) write_file_atomic(dir / (stem + "_speedup.md"), md);
  if (o.wants("csv")) write_file_atomic(dir / (stem + "_results.csv"), render_csv(r));
  if (o.wants("png")) write_charts(dir, stem, r);
  return md;
}

class ConsoleObserver : public RunObserver {
 public:
  ConsoleObserver(fs::path json, bool write_json)
      : json_(std::move(json)), write_json_(write_json) {}
  void on_item(int index, int total, const PlanItem& item, double elapsed, double eta) override {
    std::cerr << progress_line(index + 1, total, elapsed, eta, item_name(item)) << std::endl;
  }
  void on_row(const Results& partial) override {
    if (write_json_) write_results_atomic(json_, partial);
  }
  void on_log(int, const std::string& msg) override { std::cerr << "  " << msg << std::endl; }

 private:
  fs::path json_;
  bool write_json_;
};

// The exit status after a signal, with a line saying what was kept.
int stopped(const std::string& kept) {
  const int sig = interrupted();
  std::cerr << "ffpa-bench: stopped by " << signal_name(sig) << "; " << kept << "\n";
  return interrupt_exit_code(sig);
}

// Fills the cubin cache for another machine's arch (or checks for spills in CI) without a GPU.
int compile_only(const Plan& plan, const std::vector<Variant*>& variants, const std::string& arch) {
  const RunSettings& run = plan.settings;
  const gpu::DeviceInfo dev = gpu::known_device(arch);
  const std::string dir = nvrtc::cache_dir();
  if (dir.empty())
    throw InputError("environment", "XDG_CACHE_HOME", "neither it nor HOME is set: no cubin cache");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    throw InputError(
        "environment", "XDG_CACHE_HOME",
        "cannot use " + dir + " as the cubin cache: " + (ec ? ec.message() : "not a directory"));
  const TuningCache cache = TuningCache::load(run.tuning_cache);
  if (!cache.warning().empty()) std::cerr << "ffpa-bench: warning: " << cache.warning() << "\n";
  const int threads = compiler_threads(run.jobs);
  const auto t0 = std::chrono::steady_clock::now();
  const auto done = precompile(plan, variants, run.tune, cache, dev, threads);
  const double s = seconds_since(t0);
  int failed = 0;
  std::cout << render_compiled(plan, done, dev.name + " into " + dir, s, run.verbose, failed);
  if (interrupted())
    return stopped(std::to_string(done.size()) + " configurations compiled and cached");
  if (done.empty())
    throw InputError(
        "command line", "--compile-only",
        "nothing to compile for " + arch + ": " + nothing_compiled(plan, variants, dev));
  if (const std::string err = nvrtc::cache_write_error(); !err.empty()) {
    std::cerr << "ffpa-bench: the cubin cache was not filled: " << err << "\n";
    return 1;
  }
  return failed ? 1 : 0;
}

int run(const Options& opts) {
  const Plan plan = make_plan(opts, opts);
  Registry reg = Registry::make();
  // Everything the flags name is checked before a device is opened or anything is compiled.
  const std::vector<Variant*> variants = selected_variants(reg, opts.variants);
  if (opts.tune != TuneMode::none)
    for (const Variant* v : variants) variant_grid(*v);
  if (opts.list) {
    std::cout << render_list(plan, reg, grids_dir());
    return 0;
  }
  if (opts.dry_run) {
    std::cout << render_dry_run(plan, reg);
    return 0;
  }
  if (!opts.compile_only.empty()) return compile_only(plan, variants, opts.compile_only);
  check_output_dir(opts.out, "--out");
  if (!opts.save_tensors.empty()) check_output_dir(opts.save_tensors, "--save-tensors");
  TuningCache::load(plan.settings.tuning_cache);  // InputError when the path cannot be read
  gpu::DeviceInfo dev;
  try {
    dev = gpu::open_device(opts.device);
  } catch (const RunError& e) {
    std::cerr << "ffpa-bench: " << e.what()
              << "\n  (--list, --dry-run, --compile-only, compare and report work without a "
                 "GPU)\n";
    return kExitNoGpu;
  }
  const fs::path out = output_dir(opts.out, "--out");
  const fs::path json = out / (file_stem(dev.name) + "_results.json");
  ConsoleObserver obs(json, opts.wants("json"));
  const Results results = run_plan(plan, dev, reg, obs);
  if (opts.wants("json")) write_results_atomic(json, results);
  std::cout << write_reports(results, opts.baseline, opts, out);
  if (interrupted())
    return stopped(std::to_string(results.rows.size()) + " of " +
                   std::to_string(plan.items.size()) + " rows kept in " + out.string() +
                   ", the tuning cache in " + plan.settings.tuning_cache);
  const int failed = failed_measurements(results);
  if (failed) std::cerr << "ffpa-bench: " << failed << " measurement(s) failed\n";
  return failed ? 1 : 0;
}

int compare_cmd(const Options& opts) {
  const Results base = load_results(opts.base_file);
  const Results now = load_results(opts.new_file);
  // Timings of two GPUs are not comparable: a gate that says "clean" would be meaningless.
  if (base.env.gpu != now.env.gpu && !opts.allow_different_gpus)
    throw InputError(opts.new_file, "/env/gpu",
                     "GPU \"" + now.env.gpu + "\" differs from BASE's \"" + base.env.gpu +
                         "\" (--allow-different-gpus compares anyway)");
  const CompareReport rep = compare(base, now, opts.threshold);
  std::cout << render_compare_markdown(rep);
  return rep.exit_code();
}

int report_cmd(const Options& opts) {
  const Results r = load_results(opts.report_file);
  // Without --out the reports go next to the results file they are rendered from.
  const fs::path parent = fs::path(opts.report_file).parent_path();
  const fs::path dir = !opts.out.empty() ? output_dir(opts.out, "--out")
                       : parent.empty()  ? fs::path(".")
                                         : parent;
  std::cout << write_reports(r, opts.baseline, opts, dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  catch_interrupts();
  try {
    const auto opts = parse_cli(argc, argv);
    if (!opts) return 0;
    switch (opts->command) {
      case Command::run:
        return run(*opts);
      case Command::compare:
        return compare_cmd(*opts);
      case Command::report:
        return report_cmd(*opts);
    }
  } catch (const InputError& e) {
    std::cerr << "ffpa-bench: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "ffpa-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
