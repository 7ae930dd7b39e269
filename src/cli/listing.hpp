// Text for --list, --dry-run and --compile-only: everything they show is known without a GPU.
#pragma once

#include <string>

#include "plan/plan.hpp"
#include "runner/runner.hpp"

namespace ffpa {

std::string render_list(const Plan&, const Registry&, const std::string& grids_dir);
// The plan with its settings, and what each item runs and needs.
std::string render_dry_run(const Plan&, const Registry&);
// Why no configuration of the plan compiles for dev: each variant's refusals, one per reason.
std::string nothing_compiled(const Plan&, const std::vector<Variant*>&, const gpu::DeviceInfo&);
// Summary of a --compile-only run (every configuration with -v); `failed` counts the default or
// cached configurations that were refused, the ones a run would have used.
std::string render_compiled(const Plan&, const std::vector<CompileOutcome>&,
                            const std::string& target, double seconds, int verbose, int& failed);

}  // namespace ffpa
