// Everything the command line can say. Parsed by cli/cli.cpp; read by plan, runner and main.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/types.hpp"

namespace ffpa {

enum class Command { run, compare, report };
enum class TuneMode { none, fast, max };
// best: run cuDNN and unfused, show the faster per row (labelled); all: show both columns.
enum class BaselineMode { best, cudnn, unfused, none, all };

std::string to_string(TuneMode);
std::string to_string(BaselineMode);

struct TimingOptions {
  bool cold = true;  // flush L2 and hold the stream before each sample
  int min_samples = 10;
  double max_noise = 0.5;  // target relative stdev, percent
  double min_time = 0.5;   // seconds of GPU time before the noise target may stop sampling
  double timeout = 15.0;   // seconds per measurement, wall clock
  int warmup = 3;
};

struct Options {
  Command command = Command::run;

  // run
  bool fwd = true;
  bool bwd = true;
  std::vector<std::string> cases;  // empty: every case of the config
  std::string config = "configs/default.json";
  // Sweep variables (empty: the config's defaults). B, H, N, D feed the case expressions;
  // Hkv, Nq, Nkv force that field in every case.
  std::vector<int64_t> B, H, Hkv, N, Nq, Nkv, D;
  std::vector<Dtype> dtypes;  // empty: each case's own
  TuneMode tune = TuneMode::none;
  std::vector<std::string> variants;  // empty: every registered variant
  BaselineMode baseline = BaselineMode::best;
  TimingOptions timing;
  uint64_t seed = 0;
  std::string out = "ffpa-out";  // report: empty, the results file's directory
  std::string tuning_cache;      // empty: default_tuning_cache_path()
  bool check = true;
  std::vector<std::string> formats = {"md", "json", "csv", "png"};
  int device = 0;
  bool list = false;
  bool dry_run = false;
  std::string compile_only;  // arch to compile the run's configurations for, empty: off
  int jobs = 0;              // compiler threads, 0: one per core
  int verbose = 0;
  std::string save_tensors;  // directory for .npy dumps, empty: off

  // compare
  std::string base_file, new_file;
  double threshold = 5.0;             // percent
  bool allow_different_gpus = false;  // else runs of two GPUs are refused (exit 2)

  // report
  std::string report_file;

  std::string command_line;  // as typed, recorded in the results
};

// Parses argv. Throws InputError (exit 2) naming the flag and the reason. `--help` and
// `--version` print and return nullopt (exit 0).
std::optional<Options> parse_cli(int argc, const char* const* argv);

}  // namespace ffpa
