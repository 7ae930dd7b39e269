// CLI options + case matrix -> the list of measurements to make. Pure host code: --dry-run prints
// this without touching the GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/options.hpp"
#include "core/types.hpp"

namespace ffpa {

struct PlanItem {
  Problem problem;
  Pass pass = Pass::fwd;
  double flops = 0;
  int64_t tensor_bytes = 0;   // inputs + outputs the tool allocates for this item
  int64_t unfused_bytes = 0;  // extra memory the unfused baseline needs (S/P etc.)
};

struct Plan {
  std::string config_file;
  std::vector<PlanItem> items;
};

// Bytes of the tensors the tool allocates for one pass: q, k, v, o, lse and the bias, plus dO,
// dq, dk, dv and dbias for the backward.
int64_t tensor_bytes(const Problem&, Pass);

// The most measurements one run plans; a larger sweep is refused (InputError) before it is built.
constexpr int64_t kMaxPlanItems = 100000;

// Loads opts.config, applies the CLI's case selection, sweeps and overrides, validates the result.
// Throws InputError naming the file / JSON path / flag on anything invalid; an error that only the
// sweep values (--B, --H, --N, --D) cause names those flags.
Plan make_plan(const Options&);

}  // namespace ffpa
