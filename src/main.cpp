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
#include "core/error.hpp"
#include "core/paths.hpp"
#include "gpu/nvrtc.hpp"
#include "plan/plan.hpp"
#include "report/chart.hpp"
#include "report/compare.hpp"
#include "report/csv.hpp"
#include "report/format.hpp"
#include "report/markdown.hpp"
#include "report/merge.hpp"
#include "report/progress.hpp"
#include "report/results_json.hpp"
#include "runner/runner.hpp"
#include "runner/workers.hpp"
#include "tuning/cache.hpp"

namespace fs = std::filesystem;
using namespace ffpa;

namespace {

constexpr int kExitNoGpu = 3;

bool wants(const Options& o, const std::string& format) {
  return std::find(o.formats.begin(), o.formats.end(), format) != o.formats.end();
}

std::string file_stem(const std::string& gpu) {
  std::string s;
  for (char c : gpu) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return "ffpa_" + s;
}

fs::path results_path(const fs::path& dir, const std::string& gpu) {
  return dir / (file_stem(gpu) + "_results.json");
}

// Markdown, CSV and chart next to the results JSON; returns the markdown for stdout.
std::string write_reports(const Results& r, const Options& o, const fs::path& dir) {
  fs::create_directories(dir);
  const std::string stem = file_stem(r.env.gpu);
  const std::string md = render_markdown(r, o.baseline);
  if (wants(o, "md")) write_file_atomic(dir / (stem + "_speedup.md"), md);
  if (wants(o, "csv")) write_file_atomic(dir / (stem + "_results.csv"), render_csv(r));
  if (wants(o, "png")) {
    write_chart_png(dir / (stem + "_speedup.png"), r);
    write_chart_svg(dir / (stem + "_speedup.svg"), r);
  }
  return md;
}

class ConsoleObserver : public RunObserver {
 public:
  ConsoleObserver(fs::path json, bool write_json)
      : json_(std::move(json)), write_json_(write_json) {}
  void on_item(int index, int total, const PlanItem& item, double elapsed, double eta) override {
    const std::string what =
        fmt::format("{} {} {} D={} N={}/{}", item.problem.case_name, to_string(item.pass),
                    to_string(item.problem.dtype), item.problem.shape.D, item.problem.shape.Nq,
                    item.problem.shape.Nkv);
    std::cerr << progress_line(index + 1, total, elapsed, eta, what) << std::endl;
  }
  void on_row(const Results& partial) override {
    if (write_json_) write_results_atomic(json_, partial);
  }
  void on_log(int, const std::string& msg) override { std::cerr << "  " << msg << std::endl; }

 private:
  fs::path json_;
  bool write_json_;
};

// Progress of a --devices pool: which worker took which row, each worker's diagnostics.
class PoolConsole : public PoolObserver {
 public:
  PoolConsole(fs::path out, bool write_json) : out_(std::move(out)), write_json_(write_json) {}
  void on_start(int device, const PlanItem& item, int done, int total, double elapsed,
                double eta) override {
    const std::string what =
        fmt::format("cuda:{} {} {} {} D={} N={}/{}", device, item.problem.case_name,
                    to_string(item.pass), to_string(item.problem.dtype), item.problem.shape.D,
                    item.problem.shape.Nq, item.problem.shape.Nkv);
    std::cerr << progress_line(done + 1, total, elapsed, eta, what) << std::endl;
  }
  void on_row(const Results& partial) override {
    if (write_json_) write_results_atomic(results_path(out_, partial.env.gpu), partial);
  }
  void on_log(int device, const std::string& msg) override {
    std::cerr << "  cuda:" << device << ": " << msg << std::endl;
  }

 private:
  fs::path out_;
  bool write_json_;
};

// Fills the cubin cache for another machine's arch (or checks for spills in CI) without a GPU.
int compile_only(const Plan& plan, Registry& reg, const Options& opts) {
  const gpu::DeviceInfo dev = gpu::known_device(opts.compile_only);
  const TuningCache cache = TuningCache::load(
      opts.tuning_cache.empty() ? default_tuning_cache_path() : opts.tuning_cache);
  const int threads = compiler_threads(opts.jobs);
  const auto t0 = std::chrono::steady_clock::now();
  const auto done =
      precompile(plan, selected_variants(reg, opts.variants), opts.tune, cache, dev, threads);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int failed = 0;
  std::cout << render_compiled(plan, done, dev.name + " into " + nvrtc::cache_dir(), s,
                               opts.verbose, failed);
  return failed ? 1 : 0;
}

// Writes the results and reports; exit 1 when a measurement failed.
int finish_run(const Results& results, const Options& opts) {
  if (wants(opts, "json")) write_results_atomic(results_path(opts.out, results.env.gpu), results);
  std::cout << write_reports(results, opts, opts.out);
  int failed = 0;
  for (const Row& row : results.rows) {
    if (row.ffpa && (row.ffpa->status == Status::failed || correctness_failed(*row.ffpa))) ++failed;
    for (const auto& b : row.baselines)
      failed += b.status == Status::failed || correctness_failed(b);
  }
  if (failed) std::cerr << "ffpa-bench: " << failed << " measurement(s) failed\n";
  return failed ? 1 : 0;
}

void no_gpu(const std::string& why) {
  std::cerr << "ffpa-bench: " << why
            << "\n  (--list, --dry-run, compare, report and merge work without a GPU)\n";
}

// --devices: the devices asked for, checked against those present; empty without a GPU.
std::vector<int> pool_devices(const Options& opts) {
  const int present = gpu::device_count();
  if (present == 0) return {};
  std::vector<int> devices = opts.devices;
  if (opts.all_devices)
    for (int d = 0; d < present; ++d) devices.push_back(d);
  for (int d : devices)
    if (d >= present)
      throw InputError("command line", "--devices",
                       fmt::format("device {} does not exist ({} present)", d, present));
  return devices;
}

int run_on_devices(const Plan& plan, const Options& opts, const std::vector<std::string>& args) {
  const std::vector<int> devices = pool_devices(opts);
  if (devices.empty()) {
    no_gpu("no usable GPU for --devices");
    return kExitNoGpu;
  }
  fs::create_directories(opts.out);
  // Workers run this very executable: the pool and its workers are one build.
  const WorkerLaunch launch{fs::read_symlink("/proc/self/exe").string(), args};
  PoolConsole console(opts.out, wants(opts, "json"));
  return finish_run(run_pool(plan, opts, devices, launch, console), opts);
}

int run(const Options& opts, const std::vector<std::string>& args) {
  Plan plan = make_plan(opts);
  Registry reg = Registry::make();
  if (opts.worker) return run_worker(plan, opts, reg);
  if (opts.list) {
    std::cout << render_list(plan, reg, grids_dir());
    return 0;
  }
  if (opts.dry_run) {
    std::cout << render_dry_run(plan, reg, opts);
    return 0;
  }
  if (!opts.compile_only.empty()) return compile_only(plan, reg, opts);
  if (!opts.devices.empty() || opts.all_devices) return run_on_devices(plan, opts, args);
  gpu::DeviceInfo dev;
  try {
    dev = gpu::open_device(opts.device);
  } catch (const RunError& e) {
    no_gpu(e.what());
    return kExitNoGpu;
  }
  fs::create_directories(opts.out);
  ConsoleObserver obs(results_path(opts.out, dev.name), wants(opts, "json"));
  return finish_run(run_plan(plan, opts, dev, reg, obs), opts);
}

int compare_cmd(const Options& opts) {
  const Results base = load_results(opts.base_file);
  const Results now = load_results(opts.new_file);
  const CompareReport rep = compare(base, now, opts.threshold);
  std::cout << render_compare_markdown(rep);
  return rep.exit_code();
}

int merge_cmd(const Options& opts) {
  const fs::path out(opts.merge_out);
  std::vector<ResultsFile> inputs;
  std::error_code ec;
  for (const std::string& f : opts.merge_in) {
    if (fs::equivalent(f, out, ec))
      throw InputError("command line", "OUT.json",
                       "is also an input (" + f + "): merging must not overwrite a shard");
    inputs.push_back({f, load_results(f)});
  }
  const Results merged = merge_results(std::move(inputs), opts.allow_mixed);
  write_results_atomic(out, merged);
  const fs::path dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  std::cout << write_reports(merged, opts, dir);
  std::cerr << fmt::format("ffpa-bench: merged {} rows from {} files into {}\n", merged.rows.size(),
                           opts.merge_in.size(), out.string());
  if (!opts.merge_caches.empty()) {
    const std::string cache =
        opts.tuning_cache.empty() ? default_tuning_cache_path() : opts.tuning_cache;
    const int changed = TuningCache::merge_files(cache, opts.merge_caches);
    std::cerr << fmt::format("ffpa-bench: {} tuning-cache entries added or made faster in {}\n",
                             changed, cache);
  }
  return 0;
}

int report_cmd(const Options& opts) {
  const Results r = load_results(opts.report_file);
  const fs::path dir =
      opts.out == "ffpa-out" ? fs::path(opts.report_file).parent_path() : fs::path(opts.out);
  std::cout << write_reports(r, opts, dir.empty() ? fs::path(".") : dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto opts = parse_cli(argc, argv);
    if (!opts) return 0;
    switch (opts->command) {
      case Command::run:
        return run(*opts, std::vector<std::string>(argv + 1, argv + argc));
      case Command::merge:
        return merge_cmd(*opts);
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
