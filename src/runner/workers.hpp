// --devices: one worker process per GPU. The pool process hands rows out from one queue, longest
// (most FLOPs) first, and keeps the results in plan order; it never opens a GPU itself. A worker
// that crashes or meets a sticky CUDA error ends alone: its current row fails with the reason and
// the other workers take the rest of the queue.
//
// Workers are fresh processes (exec, not fork: a CUDA context does not survive fork) of the same
// executable with the pool's arguments plus `--worker N`. They talk JSON lines: the pool writes
// {"warm"} and {"item": I} to the worker's fd 3 and closes it to stop the worker; the worker
// writes {"hello": env}, {"ready"}, {"row": row}, {"log": text} and {"error": text}
// to its fd 4; after an error it gets no more rows (it sends one before the row that lost its
// CUDA context, then ends). Warm-up (compiling the plan's kernels into the shared cubin cache) runs
// on the first worker alone, then on the others, which then find their cubins compiled.
//
// SIGINT and SIGTERM: workers run in a process group of their own and get the pool's signals
// forwarded (core/interrupt.hpp). A worker stops at its next safe point and ends without sending
// the row it was in; the pool keeps the rows finished, hands out no more and returns them
// (complete = false), as a one-GPU run does.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/results.hpp"
#include "plan/plan.hpp"
#include "runner/registry.hpp"

namespace ffpa {

// How to start a worker: `program` `args`... --worker N.
struct WorkerLaunch {
  std::string program;
  std::vector<std::string> args;
};

class PoolObserver {
 public:
  virtual ~PoolObserver() = default;
  // Row `item` was handed to the worker on `device`; `done` rows of `total` are finished.
  virtual void on_start(int device, const PlanItem& item, int done, int total, double elapsed_s,
                        double eta_s) {}
  // After a row finished (the partial results hold every finished row, in plan order).
  virtual void on_row(const Results& partial) = 0;
  virtual void on_log(int device, const std::string& message) {}
};

// Runs the plan on one worker per device. Throws InputError (after stopping the workers) when the
// devices are GPUs of different models: a results file, its tables and the tuning cache describe
// one model. Rows no worker was left to run say "not run" with the reason.
Results run_pool(const Plan&, const std::vector<int>& devices, const WorkerLaunch&, PoolObserver&);

// The worker's end of the pool's pipes: fd 3 in, fd 4 out.
class WorkerChannel {
 public:
  WorkerChannel();
  ~WorkerChannel();
  void hello(const Environment&);
  bool wait_warm();  // false when the pool has gone
  void ready();
  std::optional<int> next_item();  // the plan index of the next row; nullopt: stop
  void row(const Row&);
  void log(const std::string&);    // a diagnostic the session chose to show (-v levels applied)
  void error(const std::string&);  // and this worker ends: the pool hands it nothing more

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A `--worker N` process: opens device N, then runs the rows the pool sends (Session; the tuning
// cache is saved after every search). Returns the exit code: 0, 1 after a lost CUDA context, 3
// without the GPU, 130/143 after SIGINT/SIGTERM.
int run_worker(const Plan&, int device, Registry&);

}  // namespace ffpa
