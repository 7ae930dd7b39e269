#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "cli/options.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "gpu/cuda.hpp"

namespace ffpa {
namespace {

constexpr const char* kWhere = "command line";
constexpr int64_t kMaxSize = (int64_t{1} << 31) - 1;
const std::vector<std::string> kFormats = {"md", "json", "csv", "png"};

[[noreturn]] void fail(const std::string& flag, const std::string& reason) {
  throw InputError(kWhere, flag, reason);
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Shell-quotes what needs it, so the recorded command line can be pasted back.
std::string quote(const std::string& arg) {
  if (arg.empty()) return "''";
  bool plain = true;
  for (char c : arg)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./=,:+@%", c));
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Values of a list option: repeated flags, space-separated and comma-separated forms all count.
std::vector<std::string> split(const std::vector<std::string>& raw, const std::string& flag) {
  std::vector<std::string> out;
  for (const auto& r : raw) {
    size_t start = 0;
    while (true) {
      const size_t comma = r.find(',', start);
      const std::string item = r.substr(start, comma == std::string::npos ? comma : comma - start);
      if (item.empty()) fail(flag, "empty item in \"" + r + "\"");
      out.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

template <class T>
std::optional<T> parse_int(const std::string& s) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty() || s[0] == '+' || s[0] == '-')
    return std::nullopt;
  return v;
}

bool is_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<int64_t> sizes(const std::vector<std::string>& raw, const std::string& flag) {
  std::vector<int64_t> out;
  for (const auto& item : split(raw, flag)) {
    auto v = parse_int<int64_t>(item);
    if (!v && is_digits(item))
      fail(flag, item + " is too large (at most " + std::to_string(kMaxSize) + ")");
    if (!v || *v <= 0) fail(flag, "\"" + item + "\" is not a positive integer");
    if (*v > kMaxSize)
      fail(flag, item + " is too large (at most " + std::to_string(kMaxSize) + ")");
    for (int64_t seen : out)
      if (seen == *v) fail(flag, "duplicate value " + item);
    out.push_back(*v);
  }
  return out;
}

double number(const std::string& s, const std::string& flag, double min, bool min_inclusive) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
    fail(flag, "\"" + s + "\" is not a number");
  if (v < min || (!min_inclusive && v == min)) {
    std::ostringstream bound;
    bound << (min_inclusive ? ">= " : "> ") << min;
    fail(flag, s + " must be " + bound.str());
  }
  return v;
}

int64_t integer(const std::string& s, const std::string& flag, int64_t min, int64_t max) {
  auto v = parse_int<int64_t>(s);
  if (!v && is_digits(s))
    fail(flag, s + " is out of range " + std::to_string(min) + ".." + std::to_string(max));
  if (!v) fail(flag, "\"" + s + "\" is not a non-negative integer");
  if (*v < min || *v > max)
    fail(flag, s + " is out of range " + std::to_string(min) + ".." + std::to_string(max));
  return *v;
}

std::vector<std::string> formats(const std::vector<std::string>& raw, const std::string& flag) {
  std::vector<std::string> out;
  for (const auto& f : split(raw, flag)) {
    if (std::find(kFormats.begin(), kFormats.end(), f) == kFormats.end())
      fail(flag, "unknown format \"" + f + "\" (valid: " + join(kFormats) + ")");
    if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  }
  return out;
}

// CLI11 reports its own errors as text; the user-facing error must still name a flag (or the
// argument it could not place), as it appears on the command line.
std::pair<std::string, std::string> flag_and_reason(const CLI::ParseError& e,
                                                    const std::vector<std::string>& args) {
  std::string msg = e.what();
  auto position = [&args](const std::string& w) {
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i] == w || args[i].rfind(w + "=", 0) == 0) return i;
    return args.size();
  };
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    // Extras come in CLI11's order; report the first one the user typed.
    std::istringstream extras(msg.substr(msg.find(": ") + 2));
    std::string best;
    for (std::string w; extras >> w;)
      if (best.empty() || position(w) < position(best)) best = w;
    if (!best.empty()) return {best, msg};
  }
  std::istringstream words(msg);
  std::vector<std::string> all;
  for (std::string w; words >> w;) {
    while (!w.empty() && std::strchr(":,.'\"", w.back())) w.pop_back();
    while (!w.empty() && std::strchr("'\"", w.front())) w.erase(0, 1);
    if (!w.empty()) all.push_back(w);
  }
  std::string flag = all.empty() ? "arguments" : all.front();  // "NEW.json is required"
  for (const auto& w : all)
    if (w.size() > 1 && w[0] == '-') {
      flag = w;
      break;
    }
  if (flag[0] != '-') {
    // Some messages use the bare option name ("list was given a disallowed flag override").
    for (const std::string& dashed : {"--" + flag, "-" + flag})
      if (position(dashed) < args.size()) flag = dashed;
  }
  if (msg.rfind(flag + ": ", 0) == 0) msg.erase(0, flag.size() + 2);
  // CLI11's wording for the two mistakes it catches that users make most.
  if (msg.find("disallowed flag override") != std::string::npos) msg = "takes no value";
  if (msg.find("At Most 1 required") != std::string::npos) msg = "given more than once";
  return {flag, msg};
}

// A flag is on or off; "--list=no" would read as a typo for something else.
CLI::Option* flag(CLI::App& app, const std::string& name, const std::string& help) {
  return app.add_flag(name, help)->disable_flag_override();
}

struct Parser {
  CLI::App app;
  std::vector<std::string> args;  // without the program name

  explicit Parser(const std::string& description, const std::string& name)
      : app(description, name) {
    app.set_version_flag("--version",
                         std::string("ffpa-bench ") + tool_version() + " (" + build_commit() + ")");
  }

  // Returns false after --help or --version (already printed).
  bool parse() {
    std::vector<const char*> argv = {app.get_name().c_str()};
    for (const auto& a : args) argv.push_back(a.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::Success& e) {
      app.exit(e);
      return false;
    } catch (const CLI::ParseError& e) {
      const auto [name, reason] = flag_and_reason(e, args);
      fail(name, reason);
    }
    return true;
  }
};

std::optional<Options> parse_run(Options o, std::vector<std::string> args) {
  Parser p(
      "Benchmarks and autotunes FFPA large-head-dim attention against cuDNN and unfused attention.",
      "ffpa-bench");
  p.args = std::move(args);
  CLI::App& app = p.app;
  app.footer(
      "Subcommands:\n"
      "  run (default)                      this help\n"
      "  compare BASE.json NEW.json         compare two result files (--threshold PCT)\n"
      "  report RESULTS.json                render tables/plots from a result file\n"
      "Examples:\n"
      "  ffpa-bench --fwd --bwd --tune max\n"
      "  ffpa-bench --case causal --N 16384\n"
      "  ffpa-bench --D 320,512 --N 8192,16384 --dtype bf16\n");

  auto* fwd = flag(app, "--fwd", "measure the forward pass (alone: forward only)");
  auto* bwd = flag(app, "--bwd", "measure the backward pass (alone: backward only)");
  auto* no_fwd = flag(app, "--no-fwd", "skip the forward pass");
  auto* no_bwd = flag(app, "--no-bwd", "skip the backward pass");
  std::vector<std::string> cases, B, H, Hkv, N, Nq, Nkv, D, variants, fmts;
  std::string dtype, tune, baseline, min_samples, max_noise, min_time, timeout, seed, device, jobs;
  app.add_option("--case", cases, "cases to run, comma list or repeated (default: all)")
      ->type_name("LIST");
  app.add_option("--config", o.config, "case matrix file")
      ->capture_default_str()
      ->type_name("FILE");
  app.add_option("--B", B, "batch sizes to sweep")->type_name("LIST");
  app.add_option("--H", H, "head counts to sweep")->type_name("LIST");
  app.add_option("--Hkv", Hkv, "force the KV head count of every case")->type_name("LIST");
  app.add_option("--N", N, "sequence lengths to sweep")->type_name("LIST");
  app.add_option("--Nq", Nq, "force the query length of every case")->type_name("LIST");
  app.add_option("--Nkv", Nkv, "force the key/value length of every case")->type_name("LIST");
  app.add_option("--D", D, "head dimensions to sweep")->type_name("LIST");
  app.add_option("--dtype", dtype, "fp16|bf16|both (default: each case's own)")->type_name("NAME");
  app.add_option("--tune", tune, "none|fast|max (default: none)")->type_name("MODE");
  app.add_option("--variant", variants, "FFPA variants to run (default: all)")
      ->type_name("NAME...");
  app.add_option("--baseline", baseline, "best|cudnn|unfused|none|all (default: best)")
      ->type_name("MODE");
  auto* cold = flag(app, "--cold", "flush L2 before each sample (default)");
  auto* hot = flag(app, "--hot", "do not flush L2");
  app.add_option("--min-samples", min_samples, "samples per measurement, at least (default: 10)")
      ->type_name("N");
  app.add_option("--max-noise", max_noise, "target relative stdev in percent (default: 0.5)")
      ->type_name("PCT");
  app.add_option("--min-time", min_time, "GPU seconds before the noise target applies (0.5)")
      ->type_name("S");
  app.add_option("--timeout", timeout, "wall-clock seconds per measurement (default: 15)")
      ->type_name("S");
  app.add_option("--seed", seed, "input and dropout seed (default: 0)")->type_name("N");
  app.add_option("--out", o.out, "output directory")->capture_default_str()->type_name("DIR");
  auto* tuning_cache =
      app.add_option("--tuning-cache", o.tuning_cache,
                     "tuning cache file (default: $XDG_CACHE_HOME/ffpa-bench/tuning.json, else "
                     "~/.cache/ffpa-bench/tuning.json)")
          ->type_name("FILE");
  auto* check = flag(app, "--check", "check results against a reference (default)");
  auto* no_check = flag(app, "--no-check", "skip the correctness check");
  app.add_option("--format", fmts, "outputs: md,json,csv,png (default: all)")->type_name("LIST");
  app.add_option("--device", device, "CUDA device index (default: 0)")->type_name("N");
  auto* list = flag(app, "--list", "list cases, variants and baselines, then exit");
  auto* dry_run = flag(app, "--dry-run", "print the plan without touching the GPU");
  auto* compile_only =
      app.add_option("--compile-only", o.compile_only,
                     "compile the run's kernel configurations for ARCH (" +
                         join(gpu::known_archs()) + ") into the cubin cache, without a GPU")
          ->type_name("ARCH");
  app.add_option("-j,--jobs", jobs, "compiler threads (default: one per core)")->type_name("N");
  auto* verbose = flag(app, "-v,--verbose", "more output (repeatable)");
  auto* save_tensors =
      app.add_option("--save-tensors", o.save_tensors,
                     "dump each row's inputs and each FFPA variant's outputs as .npy into DIR")
          ->type_name("DIR");
  auto* profile = flag(app, "--profile",
                       "launch each implementation once, inside NVTX ranges, for nsys or ncu "
                       "(no search, check or repeats)");
  cold->excludes(hot);
  // One mode at a time: --list and --dry-run print and exit, --compile-only compiles.
  list->excludes(dry_run);
  list->excludes(compile_only);
  dry_run->excludes(compile_only);
  check->excludes(no_check);
  fwd->excludes(no_fwd);
  bwd->excludes(no_bwd);

  if (!p.parse()) return std::nullopt;

  // An empty value is a mistake (an unset shell variable), never "off" or "the default".
  for (const CLI::Option* opt : {tuning_cache, compile_only, save_tensors})
    if (opt->count() > 0 && opt->as<std::string>().empty()) fail(opt->get_name(), "empty value");

  if (*fwd || *bwd) {
    o.fwd = fwd->count() > 0;
    o.bwd = bwd->count() > 0;
  }
  if (*no_fwd) o.fwd = false;
  if (*no_bwd) o.bwd = false;
  if (!o.fwd && !o.bwd) fail("--no-fwd", "--no-fwd with --no-bwd leaves nothing to measure");

  for (const auto& c : split(cases, "--case"))
    if (std::find(o.cases.begin(), o.cases.end(), c) == o.cases.end()) o.cases.push_back(c);
  if (o.config.empty()) fail("--config", "empty file name");
  o.B = sizes(B, "--B");
  o.H = sizes(H, "--H");
  o.Hkv = sizes(Hkv, "--Hkv");
  o.N = sizes(N, "--N");
  o.Nq = sizes(Nq, "--Nq");
  o.Nkv = sizes(Nkv, "--Nkv");
  o.D = sizes(D, "--D");

  if (!dtype.empty()) {
    if (dtype == "both")
      o.dtypes = {Dtype::fp16, Dtype::bf16};
    else if (auto d = parse_dtype(dtype))
      o.dtypes = {*d};
    else
      fail("--dtype", "unknown dtype \"" + dtype + "\" (valid: fp16, bf16, both)");
  }
  if (!tune.empty()) {
    const auto mode = parse_tune_mode(tune);
    if (!mode) fail("--tune", "unknown mode \"" + tune + "\" (valid: none, fast, max)");
    o.tune = *mode;
  }
  if (!baseline.empty()) {
    const auto mode = parse_baseline_mode(baseline);
    if (!mode)
      fail("--baseline",
           "unknown baseline \"" + baseline + "\" (valid: best, cudnn, unfused, none, all)");
    o.baseline = *mode;
  }
  for (const auto& v : split(variants, "--variant"))
    if (std::find(o.variants.begin(), o.variants.end(), v) == o.variants.end())
      o.variants.push_back(v);

  if (*hot) o.timing.cold = false;
  if (!min_samples.empty())
    o.timing.min_samples = static_cast<int>(integer(min_samples, "--min-samples", 1, 1000000));
  if (!max_noise.empty()) o.timing.max_noise = number(max_noise, "--max-noise", 0, false);
  if (!min_time.empty()) o.timing.min_time = number(min_time, "--min-time", 0, true);
  if (!timeout.empty()) o.timing.timeout = number(timeout, "--timeout", 0, false);
  if (!seed.empty()) {
    auto s = parse_int<uint64_t>(seed);
    if (!s) fail("--seed", "\"" + seed + "\" is not a non-negative 64-bit integer");
    o.seed = *s;
  }
  if (o.out.empty()) fail("--out", "empty directory name");
  if (*no_check) o.check = false;
  if (!fmts.empty()) o.formats = formats(fmts, "--format");
  if (!device.empty()) o.device = static_cast<int>(integer(device, "--device", 0, 1023));
  o.list = list->count() > 0;
  o.dry_run = dry_run->count() > 0;
  if (!o.compile_only.empty() && gpu::known_device(o.compile_only).name.empty())
    fail("--compile-only",
         "unknown arch \"" + o.compile_only + "\" (valid: " + join(gpu::known_archs()) + ")");
  if (!jobs.empty()) o.jobs = static_cast<int>(integer(jobs, "--jobs", 1, 1024));
  o.verbose = static_cast<int>(verbose->count());
  if (*profile) {
    if (o.tune != TuneMode::none)
      fail("--profile",
           "launches each implementation once and cannot search: drop --tune " + to_string(o.tune));
    if (*check)
      fail("--profile",
           "runs without the correctness check (its launches would be profiled "
           "too): drop --check");
    o.profile = true;
    o.check = false;
  }
  return o;
}

std::optional<Options> parse_compare(Options o, std::vector<std::string> args) {
  Parser p(
      "Compares two result files row by row; a change counts when it exceeds both runs' "
      "noise and the threshold.",
      "ffpa-bench compare");
  p.args = std::move(args);
  std::string threshold;
  p.app.add_option("BASE.json", o.base_file, "baseline results")->required();
  p.app.add_option("NEW.json", o.new_file, "new results")->required();
  p.app.add_option("--threshold", threshold, "smallest change reported, percent (default: 5)")
      ->type_name("PCT");
  auto* other_gpus = flag(p.app, "--allow-different-gpus",
                          "compare runs of two different GPUs (refused otherwise)");
  auto* verbose = flag(p.app, "-v,--verbose", "more output (repeatable)");
  if (!p.parse()) return std::nullopt;
  if (!threshold.empty()) o.threshold = number(threshold, "--threshold", 0, true);
  o.allow_different_gpus = other_gpus->count() > 0;
  o.verbose = static_cast<int>(verbose->count());
  return o;
}

std::optional<Options> parse_report(Options o, std::vector<std::string> args) {
  Parser p("Renders tables and plots from a result file.", "ffpa-bench report");
  p.args = std::move(args);
  std::vector<std::string> fmts;
  o.out.clear();
  p.app.add_option("RESULTS.json", o.report_file, "result file")->required();
  auto* out = p.app.add_option("--out", o.out, "output directory (default: RESULTS.json's)")
                  ->type_name("DIR");
  p.app.add_option("--format", fmts, "outputs: md,csv,png (default: all)")->type_name("LIST");
  auto* verbose = flag(p.app, "-v,--verbose", "more output (repeatable)");
  if (!p.parse()) return std::nullopt;
  if (out->count() > 0 && o.out.empty()) fail("--out", "empty directory name");
  // The results JSON is report's input: rewriting it is not a rendering.
  o.formats = {"md", "csv", "png"};
  if (!fmts.empty()) o.formats = formats(fmts, "--format");
  if (std::find(o.formats.begin(), o.formats.end(), "json") != o.formats.end())
    fail("--format", "json is report's input, not an output (valid: md, csv, png)");
  o.verbose = static_cast<int>(verbose->count());
  return o;
}

}  // namespace

std::optional<Options> parse_cli(int argc, const char* const* argv) {
  Options o;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + quote(argv[i]);

  const std::string first = args.empty() ? "" : args.front();
  if (first == "compare" || first == "report" || first == "run") args.erase(args.begin());
  if (first == "compare") {
    o.command = Command::compare;
    return parse_compare(std::move(o), std::move(args));
  }
  if (first == "report") {
    o.command = Command::report;
    return parse_report(std::move(o), std::move(args));
  }
  return parse_run(std::move(o), std::move(args));
}

}  // namespace ffpa
