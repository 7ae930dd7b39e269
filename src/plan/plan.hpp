// Case matrix + selection + run settings -> the list of measurements to make and how to make
// them. Pure host code: --dry-run prints this without touching the GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "report/options.hpp"
#include "timing/options.hpp"
#include "tuning/mode.hpp"

namespace ffpa {

// Which rows: the case file, the cases, the passes, sweeps and overrides (filled by the CLI).
struct PlanRequest {
  bool fwd = true;
  bool bwd = true;
  std::vector<std::string> cases;  // empty: every case of the config
  std::string config = "configs/default.json";
  // Sweep variables (empty: the config's defaults). B, H, N, D feed the case expressions;
  // Hkv, Nq, Nkv force that field in every case.
  std::vector<int64_t> B, H, Hkv, N, Nq, Nkv, D;
  std::vector<Dtype> dtypes;  // empty: each case's own
  uint64_t seed = 0;
};

// How every row is run (filled by the CLI); the runner reads nothing else.
struct RunSettings {
  TuneMode tune = TuneMode::none;
  std::vector<std::string> variants;  // empty: every registered variant
  BaselineMode baseline = BaselineMode::best;
  TimingOptions timing;
  bool check = true;
  std::string save_tensors;  // directory for .npy dumps, empty: off
  std::string tuning_cache;  // empty: default_tuning_cache_path(), resolved by make_plan
  int jobs = 0;              // compiler threads, 0: one per core
  int verbose = 0;
  // One launch per implementation, inside NVTX ranges, for a profiler (nsys, ncu): no search, no
  // correctness check, no warmup or repeats.
  bool profile = false;
  std::string command_line;  // as typed, recorded in the results
};

struct PlanItem {
  Problem problem;
  Pass pass = Pass::fwd;
  double flops = 0;
  int64_t tensor_bytes = 0;  // inputs + outputs the tool allocates for this item
};

struct Plan {
  std::string config_file;
  std::vector<PlanItem> items;
  RunSettings settings;
};

// How progress lines and NVTX ranges name an item: "self-attn fwd bf16 D=512 N=8192/8192".
std::string item_name(const PlanItem&);

// Bytes of the tensors the tool allocates for one pass: q, k, v, o, lse and the bias, plus dO,
// dq, dk, dv and dbias for the backward.
int64_t tensor_bytes(const Problem&, Pass);

// The most measurements one run plans; a larger sweep is refused (InputError) before it is built.
constexpr int64_t kMaxPlanItems = 100000;

// Loads request.config, applies the case selection, sweeps and overrides, validates the result
// and keeps the settings (the tuning cache path resolved). Throws InputError naming the file /
// JSON path / flag on anything invalid; an error that only the sweep values (--B, --H, --N, --D)
// cause names those flags.
Plan make_plan(const PlanRequest&, RunSettings settings = {});

}  // namespace ffpa
