// Everything the command line can say. Parsed by cli/cli.cpp; the settings each module owns
// (PlanRequest and RunSettings in plan/, TimingOptions in timing/, TuneMode in tuning/,
// ReportOptions and BaselineMode in report/) are filled here and handed down by main.
#pragma once

#include <optional>
#include <string>

#include "plan/plan.hpp"
#include "report/options.hpp"

namespace ffpa {

enum class Command { run, compare, report };

struct Options : PlanRequest, RunSettings, ReportOptions {
  Command command = Command::run;

  // run
  std::string out = "ffpa-out";
  int device = 0;
  bool list = false;
  bool dry_run = false;
  std::string compile_only;  // arch to compile the run's configurations for, empty: off

  // compare
  std::string base_file, new_file;
  double threshold = 5.0;             // percent
  bool allow_different_gpus = false;  // else runs of two GPUs are refused (exit 2)

  // report
  std::string report_file;
};

// Parses argv. Throws InputError (exit 2) naming the flag and the reason. `--help` and
// `--version` print and return nullopt (exit 0).
std::optional<Options> parse_cli(int argc, const char* const* argv);

}  // namespace ffpa
