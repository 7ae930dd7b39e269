// Executes a plan on the GPU: for each item, every selected FFPA variant (tuned over its grid) and
// baseline is bound, checked against the fp32 reference and timed. Rows are handed to the
// observer as they finish; the runner never formats text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/results.hpp"
#include "gpu/cuda.hpp"
#include "plan/plan.hpp"
#include "runner/registry.hpp"
#include "tuning/cache.hpp"
#include "tuning/grid.hpp"
#include "variants/op.hpp"

namespace ffpa {

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // Before item `index` (0-based) of `total` starts; eta_s < 0 when not yet known.
  virtual void on_item(int index, int total, const PlanItem&, double elapsed_s, double eta_s) {}
  // After a row finished (the partial results hold every finished row, this one last).
  virtual void on_row(const Results& partial) = 0;
  // Diagnostics: level 1 = -v (e.g. rejected grid points), 2 = -vv.
  virtual void on_log(int level, const std::string& message) {}
};

// Environment of this process: GPU, clocks, driver, runtime, cuDNN loaded, build, command line.
Environment describe_environment(const gpu::DeviceInfo&, const Registry&,
                                 const std::string& command_line);

// Outputs an op declares incomparable keep only the NaN/Inf scan (when written), with the reason.
void exempt(const std::vector<Op::Unchecked>&, std::vector<TensorCheck>&);

// The configurations tried for a variant on a problem: with --tune none the cached best (source
// "cache") or the variant's default ("default"); otherwise the mode's grid points ("tuned").
// Throws InputError for a grid file that is invalid or does not match the variant.
struct Candidates {
  std::vector<Knobs> knobs;
  std::string source;
};
Candidates candidates(const Variant&, const Problem&, Pass, TuneMode, const TuningCache&,
                      const gpu::DeviceInfo&);

// The grid of a variant for --tune, checked against its knobs; throws InputError naming the file.
Grid variant_grid(const Variant&);

// One configuration compiled ahead of a run.
struct CompileOutcome {
  std::string variant;
  int item = 0;  // index into the plan's items
  Knobs knobs;
  std::string source;  // as Candidates::source
  Support result;      // no: refused after compiling (ptxas spills) or the compiler failed
  double seconds = 0;
};

// --jobs, or one compiler thread per core when it is 0.
int compiler_threads(int jobs);

// Compiles every configuration a run of the plan would bind on this device (those supports()
// accepts) on `threads` threads, so that the run's bind() calls read the cubin cache. Needs no
// GPU: the device may come from gpu::known_device(). After SIGINT/SIGTERM no new compile starts:
// the outcomes are those finished.
std::vector<CompileOutcome> precompile(const Plan&, const std::vector<Variant*>&, TuneMode,
                                       const TuningCache&, const gpu::DeviceInfo&, int threads);

// Runs every item of the plan with the plan's settings.
Results run_plan(const Plan&, const gpu::DeviceInfo&, Registry&, RunObserver&);

}  // namespace ffpa
