// Everything the command line can say. Parsed by cli/cli.cpp; the settings each module owns
// (PlanRequest and RunSettings in plan/, TimingOptions in timing/, TuneMode in tuning/,
// ReportOptions and BaselineMode in report/) are filled here and handed down by main.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "report/options.hpp"

namespace ffpa {

enum class Command { run, compare, report, merge };

struct Options : PlanRequest, RunSettings, ReportOptions {
  Command command = Command::run;

  // run
  std::string out = "ffpa-out";
  int device = 0;
  // --devices: one worker process per listed GPU; empty: this process runs on `device`.
  std::vector<int> devices;
  bool all_devices = false;  // --devices all
  bool worker = false;       // internal: a --devices worker on `device` (runner/workers.hpp)
  bool list = false;
  bool dry_run = false;
  std::string compile_only;  // arch to compile the run's configurations for, empty: off

  // compare
  std::string base_file, new_file;
  double threshold = 5.0;             // percent
  bool allow_different_gpus = false;  // else runs of two GPUs are refused (exit 2)

  // report
  std::string report_file;

  // merge OUT.json IN.json...
  std::string merge_out;
  std::vector<std::string> merge_in;
  std::vector<std::string> merge_caches;  // tuning caches merged into tuning_cache
  bool allow_mixed = false;  // merge files of other tool versions, GPUs, configs or flags
};

// Parses argv. Throws InputError (exit 2) naming the flag and the reason. `--help` and
// `--version` print and return nullopt (exit 0).
std::optional<Options> parse_cli(int argc, const char* const* argv);

}  // namespace ffpa
