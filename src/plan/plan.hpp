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
  int index = 0;  // position in the whole plan: --shard keeps it, results and merge order by it
  Problem problem;
  Pass pass = Pass::fwd;
  double flops = 0;
  int64_t tensor_bytes = 0;   // inputs + outputs the tool allocates for this item
  int64_t unfused_bytes = 0;  // extra memory the unfused baseline needs (S/P etc.)
};

struct Plan {
  std::string config_file;
  int total = 0;  // items of the whole plan; more than items.size() for a shard
  int shard = 0, shards = 1;
  std::vector<PlanItem> items;
};

// Bytes of the tensors the tool allocates for one pass: q, k, v, o, lse and the bias, plus dO,
// dq, dk, dv and dbias for the backward.
int64_t tensor_bytes(const Problem&, Pass);

// Loads opts.config, applies the CLI's case selection, sweeps and overrides, validates the result,
// and keeps the items of opts.shard.
// Throws InputError naming the file / JSON path / flag on anything invalid.
Plan make_plan(const Options&);

}  // namespace ffpa
