// ffpa-bench: benchmark and autotune FFPA attention kernels against cuDNN and unfused attention.
// Data flows one way: CLI -> plan -> runner -> results -> report.
#include <fmt/format.h>

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

// Markdown, CSV and charts next to the results JSON; returns the markdown for stdout.
std::string write_reports(const Results& r, BaselineMode baseline, const ReportOptions& o,
                          const fs::path& dir) {
  fs::create_directories(dir);
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

// Fills the cubin cache for another machine's arch (or checks for spills in CI) without a GPU.
int compile_only(const Plan& plan, Registry& reg, const std::string& arch) {
  const RunSettings& run = plan.settings;
  const gpu::DeviceInfo dev = gpu::known_device(arch);
  const TuningCache cache = TuningCache::load(run.tuning_cache);
  const int threads = compiler_threads(run.jobs);
  const auto t0 = std::chrono::steady_clock::now();
  const auto done =
      precompile(plan, selected_variants(reg, run.variants), run.tune, cache, dev, threads);
  const double s = seconds_since(t0);
  int failed = 0;
  std::cout << render_compiled(plan, done, dev.name + " into " + nvrtc::cache_dir(), s, run.verbose,
                               failed);
  return failed ? 1 : 0;
}

int run(const Options& opts) {
  const Plan plan = make_plan(opts, opts);
  Registry reg = Registry::make();
  if (opts.list) {
    std::cout << render_list(plan, reg, grids_dir());
    return 0;
  }
  if (opts.dry_run) {
    std::cout << render_dry_run(plan, reg);
    return 0;
  }
  if (!opts.compile_only.empty()) return compile_only(plan, reg, opts.compile_only);
  gpu::DeviceInfo dev;
  try {
    dev = gpu::open_device(opts.device);
  } catch (const RunError& e) {
    std::cerr << "ffpa-bench: " << e.what()
              << "\n  (--list, --dry-run, compare and report work without a GPU)\n";
    return kExitNoGpu;
  }
  const fs::path out = opts.out;
  fs::create_directories(out);
  const fs::path json = out / (file_stem(dev.name) + "_results.json");
  ConsoleObserver obs(json, opts.wants("json"));
  const Results results = run_plan(plan, dev, reg, obs);
  if (opts.wants("json")) write_results_atomic(json, results);
  std::cout << write_reports(results, opts.baseline, opts, out);
  int failed = 0;
  for (const Row& row : results.rows) {
    if (row.ffpa && (row.ffpa->status == Status::failed || correctness_failed(*row.ffpa))) ++failed;
    for (const auto& b : row.baselines)
      failed += b.status == Status::failed || correctness_failed(b);
  }
  if (failed) std::cerr << "ffpa-bench: " << failed << " measurement(s) failed\n";
  return failed ? 1 : 0;
}

int compare_cmd(const Options& opts) {
  const Results base = load_results(opts.base_file);
  const Results now = load_results(opts.new_file);
  const CompareReport rep = compare(base, now, opts.threshold);
  std::cout << render_compare_markdown(rep);
  return rep.exit_code();
}

int report_cmd(const Options& opts) {
  const Results r = load_results(opts.report_file);
  const fs::path dir =
      opts.out == "ffpa-out" ? fs::path(opts.report_file).parent_path() : fs::path(opts.out);
  std::cout << write_reports(r, opts.baseline, opts, dir.empty() ? fs::path(".") : dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
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
