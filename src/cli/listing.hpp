// Text for --list and --dry-run: everything they show is known without a GPU.
#pragma once

#include <string>

#include "cli/options.hpp"
#include "plan/plan.hpp"
#include "runner/runner.hpp"

namespace ffpa {

std::string render_list(const Plan&, const Registry&, const std::string& grids_dir);
std::string render_dry_run(const Plan&, const Registry&, const Options&);

}  // namespace ffpa
