#include "runner/runner.hpp"

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <thread>

#include "core/build_info.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/paths.hpp"
#include "gpu/nvml.hpp"
#include "gpu/nvrtc.hpp"
#include "gpu/nvtx.hpp"
#include "plan/shard.hpp"
#include "reference/reference.hpp"
#include "runner/save_tensors.hpp"
#include "tensors/tensors.hpp"
#include "timing/timer.hpp"
#include "tuning/cache.hpp"
#include "tuning/finals.hpp"
#include "tuning/grid.hpp"
#include "tuning/mode.hpp"

namespace ffpa {
namespace {

// A CUDA error that leaves the context unusable ends the sweep: later rows would only report it
// again. Returns the error text, or empty if the device is still healthy.
std::string sticky_error() {
  cudaGetLastError();
  const cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaSuccess) return {};
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

// On the stream the op runs on: a memset on the legacy stream is not ordered with a non-blocking
// stream and could land after the op's writes.
void poison_outputs(AttnTensors& t, Pass pass, cudaStream_t s) {
  // 0xFF bytes are NaN in fp16, bf16 and fp32: any element an implementation leaves unwritten
  // shows up as non-finite in the check.
  auto poison = [s](gpu::DeviceBuffer& b) {
    if (b) FFPA_CUDA(cudaMemsetAsync(b.get(), 0xFF, b.bytes(), s));
  };
  if (pass == Pass::fwd) {
    poison(t.o);
    poison(t.lse);
  } else {
    poison(t.dq);
    poison(t.dk);
    poison(t.dv);
    poison(t.dbias);
  }
}

// Starts measuring one implementation's memory: what it allocates on top of what is already held
// (tensors, reference buffers), plus the tensors it works on (the plan's count of them).
class MemoryWatch {
 public:
  explicit MemoryWatch(const PlanItem& item) : tensors_(item.tensor_bytes) {
    gpu::reset_peak_memory();
    base_ = gpu::memory_stats().current;
  }
  int64_t peak() const { return tensors_ + gpu::memory_stats().peak - base_; }

 private:
  int64_t tensors_, base_ = 0;
};

class Executor {
 public:
  Executor(const RunSettings& opts, const gpu::DeviceInfo& dev, RunObserver& obs)
      : opts_(opts),
        dev_(dev),
        obs_(obs),
        timer_(dev, opts.timing),
        tune_timer_(dev, search_timing(opts.timing)),
        cache_(TuningCache::load(opts.tuning_cache)) {
    if (!cache_.warning().empty()) obs_.on_log(0, cache_.warning());
  }

  Row run_item(const PlanItem& item, const std::vector<Variant*>& variants,
               const std::vector<Baseline*>& baselines) {
    const gpu::Range range(item_name(item));
    Row row = make_row(item);
    inputs_saved_ = false;
    std::unique_ptr<AttnTensors> tensors;
    std::unique_ptr<Reference> ref;
    try {
      tensors = std::make_unique<AttnTensors>(item.problem, item.pass);
      // The backward of every implementation starts from the same forward results: the fp32
      // reference's o (rounded to the input dtype) and lse.
      if (opts_.check || item.pass == Pass::bwd) {
        const Pass ref_pass = opts_.check ? item.pass : Pass::fwd;
        ref = std::make_unique<Reference>(compute_reference(*tensors, ref_pass));
        if (item.pass == Pass::bwd) write_forward_outputs(*tensors, *ref);
        if (!opts_.check) ref.reset();
      }
      // Inputs were filled and the reference computed on other streams: finish them before any
      // implementation runs on the timer's stream.
      FFPA_CUDA(cudaDeviceSynchronize());
    } catch (const RunError& e) {
      skip_all(row, variants, baselines,
               std::string("inputs or reference do not fit: ") + e.what());
      return row;
    }
    // The row shows the fastest passing variant, unless one failed: a wrong kernel must not hide
    // behind a right one. The others stay in the row.
    std::vector<Measurement> ms;
    for (Variant* v : variants)
      if (v->pass() == item.pass) ms.push_back(run_variant(*v, item, *tensors, ref.get()));
    size_t pick = 0;
    for (size_t i = 1; i < ms.size(); ++i)
      if (ms[pick].status != Status::failed &&
          (ms[i].status == Status::failed || better(ms[i], ms[pick])))
        pick = i;
    for (size_t i = 0; i < ms.size(); ++i)
      if (i == pick)
        row.ffpa = std::move(ms[i]);
      else
        row.ffpa_others.push_back(std::move(ms[i]));
    for (Baseline* b : baselines)
      row.baselines.push_back(run_baseline(*b, item, *tensors, ref.get()));
    return row;
  }

  // Compiles the plan's configurations in parallel before the first row, when there is a cubin
  // cache for bind() to read them from.
  void warm_up(const Plan& plan, const std::vector<Variant*>& variants) {
    if (nvrtc::cache_dir().empty()) return;
    const int threads = compiler_threads(opts_.jobs);
    const auto t0 = std::chrono::steady_clock::now();
    const auto done = precompile(plan, variants, opts_.tune, cache_, dev_, threads);
    if (done.empty()) return;
    int refused = 0;
    for (const auto& c : done) refused += !c.result.ok();
    log(0, "compiled " + std::to_string(done.size()) + " kernel configurations on " +
               std::to_string(threads) + " threads in " +
               std::to_string(static_cast<int>(seconds_since(t0) + 0.5)) + " s (" +
               std::to_string(refused) + " refused)");
  }

 private:
  static bool better(const Measurement& a, const Measurement& b) {
    if (a.status != Status::ok) return false;
    if (b.status != Status::ok) return true;
    return a.timing.median_ms < b.timing.median_ms;
  }

  static void skip_all(Row& row, const std::vector<Variant*>& variants,
                       const std::vector<Baseline*>& baselines, const std::string& reason) {
    for (Variant* v : variants) {
      if (v->pass() != row.pass) continue;
      Measurement m;
      m.impl = v->name();
      m.kind = "ffpa";
      m.reason = reason;
      if (row.ffpa)
        row.ffpa_others.push_back(std::move(m));
      else
        row.ffpa = std::move(m);
    }
    for (Baseline* b : baselines) {
      Measurement m;
      m.impl = b->name();
      m.kind = "baseline";
      m.reason = reason;
      row.baselines.push_back(std::move(m));
    }
  }

  void log(int level, const std::string& msg) {
    if (opts_.verbose >= level) obs_.on_log(level, msg);
  }

  // One untimed launch into poisoned outputs is checked against the reference, or scanned for
  // NaN/Inf under --no-check (and, for --save-tensors, each FFPA variant's outputs are saved under
  // its own name); then timing.
  void check_and_time(Op& op, const PlanItem& item, AttnTensors& t, const Reference* ref,
                      Measurement& m) {
    const cudaStream_t s = timer_.stream();
    const std::string launch_name =
        m.impl + (m.config.empty() ? "" : " [" + to_string(m.config) + "]");
    const auto launch = [&](cudaStream_t st) {
      const gpu::Range range(launch_name);
      op.launch(st);
    };
    if (opts_.profile) {
      // One launch, nothing around it: the profiler's capture of this row is exactly this.
      m.timing = timer_.once(launch);
      finish(op, item, m, nullptr);
      return;
    }
    poison_outputs(t, item.pass, s);
    op.launch(s);
    gpu::check_launch(m.impl.c_str());
    FFPA_CUDA(cudaStreamSynchronize(s));
    m.checks = ref ? check_outputs(t, *ref, item.pass) : scan_outputs(t, item.pass);
    exempt(op.unchecked(), m.checks);
    m.checked = ref != nullptr;
    if (!opts_.save_tensors.empty() && m.kind == "ffpa") {
      log(0, "saved " + m.impl + "'s tensors to " +
                 save_tensors(opts_.save_tensors, t, item.pass, m.impl, !inputs_saved_));
      inputs_saved_ = true;
    }
    m.timing = timer_.measure(launch);
    finish(op, item, m, ref);
  }

  static void finish(const Op& op, const PlanItem& item, Measurement& m, const Reference* ref) {
    m.tflops = item.flops / (m.timing.median_ms * 1e9);
    m.extra_mem_bytes = op.extra_bytes();
    m.includes = op.includes();
    const bool finite = std::all_of(m.checks.begin(), m.checks.end(),
                                    [](const TensorCheck& c) { return c.nonfinite == 0; });
    m.status = Status::failed;
    if (ref && !m.correct())
      m.reason = "correctness check failed";
    else if (!finite)
      m.reason = "non-finite outputs (NaN/Inf)";
    else if (!std::isfinite(m.timing.median_ms) || m.timing.median_ms <= 0)
      m.reason = "the timer returned no valid median";
    else
      m.status = Status::ok;
  }

  Measurement run_variant(Variant& v, const PlanItem& item, AttnTensors& t, const Reference* ref) {
    const gpu::Range range(v.name());
    check_interrupted();
    Measurement m;
    m.impl = v.name();
    m.kind = "ffpa";
    const Problem& p = item.problem;
    if (Support s = v.supports(p); !s.ok()) {
      m.reason = s.reason;
      return m;
    }
    const MemoryWatch mem(item);
    const CacheKey key = make_cache_key(dev_, v.name(), p, item.pass);
    const auto [candidates, source] = ffpa::candidates(v, p, item.pass, opts_.tune, cache_, dev_);
    m.config_source = source;
    if (source == "default")
      for (const auto& why : cache_.stale(key)) log(1, v.name() + ": " + why);

    std::string first_reject;
    std::unique_ptr<Op> best_op;
    Knobs best_knobs;
    const bool search = candidates.size() > 1;
    auto reject = [&](const Knobs& k, const std::string& why) {
      log(1, v.name() + " [" + to_string(k) + "] " + why);
      if (first_reject.empty()) first_reject = to_string(k) + ": " + why;
      if (search) m.trials.push_back({k, 0, why});
    };
    // Runs f, a bind or a timing of k: false with `why` when k is refused or fails; a sticky CUDA
    // error ends the row.
    auto attempt = [&](const Knobs& k, std::string& why, const std::function<void()>& f) {
      try {
        f();
        return true;
      } catch (const Unsupported& e) {
        why = e.what();
      } catch (const RunError& e) {
        if (auto err = sticky_error(); !err.empty())
          throw RunError(v.name() + " [" + to_string(k) + "]: " + e.what());
        why = std::string("failed: ") + e.what();
      }
      return false;
    };
    auto bind = [&](const Knobs& k, std::string& why) {
      std::unique_ptr<Op> op;
      attempt(k, why, [&] { op = v.bind(p, k, t, dev_); });
      return op;
    };
    // k bound and timed by the search's timer: its statistics, or nullopt with `why`.
    auto time = [&](const Knobs& k, const std::string& stage,
                    std::string& why) -> std::optional<TimingStats> {
      auto op = bind(k, why);
      TimingStats st;
      if (!op || !attempt(k, why, [&] {
            st = tune_timer_.measure([&](cudaStream_t s) { op->launch(s); });
          }))
        return std::nullopt;
      log(1, v.name() + " [" + to_string(k) + "] " + stage + std::to_string(st.median_ms) + " ms");
      return st;
    };
    for (const Knobs& k : candidates) {
      check_interrupted();  // abandons the row; what earlier searches stored is on disk
      if (Support fit = v.supports(p, k, dev_); !fit.ok()) {
        reject(k, fit.reason);
        continue;
      }
      const gpu::Range config_range(v.name() + " [" + to_string(k) + "]");
      std::string why;
      if (!search) {
        best_op = bind(k, why);
        if (!best_op) reject(k, why);
        best_knobs = k;
        break;
      }
      if (auto st = time(k, "", why))
        m.trials.push_back({k, st->median_ms, "", st->sm_clock_mhz});
      else
        reject(k, why);
    }
    if (search) {
      if (auto winner = run_finals(v, m.trials, time)) {
        best_knobs = m.trials[*winner].config;
        std::string why;
        best_op = bind(best_knobs, why);
        if (!best_op) first_reject = to_string(best_knobs) + ": " + why;
      }
    }
    if (!best_op) {
      m.reason = "no configuration fits: " + first_reject;
      return m;
    }
    m.config = best_knobs;
    try {
      check_and_time(*best_op, item, t, ref, m);
    } catch (const RunError& e) {
      m.status = Status::failed;
      m.reason = e.what();
      if (auto err = sticky_error(); !err.empty())
        throw RunError(v.name() + " [" + to_string(best_knobs) + "]: " + err);
    }
    m.peak_mem_bytes = mem.peak();
    if (opts_.tune != TuneMode::none && m.status == Status::ok) {
      // Saved after every search: a sweep that is killed keeps what it found.
      cache_.store(key, best_knobs, m.timing.median_ms);
      try {
        if (const std::string note = cache_.save(); !note.empty()) log(0, note);
      } catch (const RunError& e) {
        // The row stands; the entry stays pending and the next search's save retries it.
        log(0, std::string("tuning cache not saved: ") + e.what());
      }
    }
    return m;
  }

  // The search's finals (tuning/finals.hpp): the fastest trials of the first pass timed again in
  // alternation, each bound for its turn (one op's memory at a time). Returns the winner's index
  // in `trials`, none if nothing was timed. A finalist that fails now loses its trial.
  using TimeFn =
      std::function<std::optional<TimingStats>(const Knobs&, const std::string&, std::string&)>;
  std::optional<size_t> run_finals(const Variant& v, std::vector<Trial>& trials,
                                   const TimeFn& time) {
    std::vector<double> first;
    for (const Trial& tr : trials) first.push_back(tr.reason.empty() ? tr.median_ms : 0);
    const std::vector<size_t> entrants = finalists(first, kFinalists);
    if (entrants.empty()) return std::nullopt;
    if (entrants.size() == 1) return entrants[0];
    std::vector<std::vector<double>> rounds(entrants.size());
    std::vector<bool> out(entrants.size(), false);
    for (size_t e : final_order(entrants.size(), kFinalRounds)) {
      if (out[e]) continue;
      check_interrupted();
      Trial& tr = trials[entrants[e]];
      const gpu::Range range(v.name() + " [" + to_string(tr.config) + "] final");
      std::string why;
      if (auto st = time(tr.config, "final: ", why)) {
        rounds[e].push_back(st->median_ms);
        continue;
      }
      log(1, v.name() + " [" + to_string(tr.config) + "] " + why);
      tr.reason = "failed in the finals: " + why;
      tr.median_ms = 0;
      out[e] = true;
      rounds[e].clear();
    }
    for (size_t e = 0; e < entrants.size(); ++e)
      if (!out[e])
        trials[entrants[e]].final_ms =
            std::accumulate(rounds[e].begin(), rounds[e].end(), 0.0) / rounds[e].size();
    const size_t w = final_winner(rounds);
    if (out[w]) return std::nullopt;
    return entrants[w];
  }

  Measurement run_baseline(Baseline& b, const PlanItem& item, AttnTensors& t,
                           const Reference* ref) {
    const gpu::Range range(b.name());
    check_interrupted();
    Measurement m;
    m.impl = b.name();
    m.kind = "baseline";
    if (Support s = b.supports(item.problem, item.pass); !s.ok()) {
      m.reason = s.reason;
      return m;
    }
    const MemoryWatch mem(item);
    // Refusals and allocations that do not fit (bind) skip the row; a failure while running fails
    // it.
    std::unique_ptr<Op> op;
    try {
      op = b.bind(item.problem, item.pass, t);
    } catch (const Unsupported& e) {
      m.reason = e.what();
    } catch (const RunError& e) {
      if (auto err = sticky_error(); !err.empty()) throw RunError(b.name() + ": " + err);
      m.reason = e.what();
    }
    if (op) {
      try {
        check_and_time(*op, item, t, ref, m);
      } catch (const RunError& e) {
        m.status = Status::failed;
        m.reason = e.what();
        if (auto err = sticky_error(); !err.empty()) throw RunError(b.name() + ": " + err);
      }
    }
    m.peak_mem_bytes = mem.peak();
    return m;
  }

  const RunSettings& opts_;
  const gpu::DeviceInfo& dev_;
  RunObserver& obs_;
  Timer timer_;
  Timer tune_timer_;
  TuningCache cache_;
  bool inputs_saved_ = false;  // --save-tensors: the row's inputs are written once
};

std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string host_name() {
  char host[256] = {};
  return gethostname(host, sizeof host - 1) == 0 ? host : "";
}

}  // namespace

Row make_row(const PlanItem& item) {
  Row r;
  r.plan_index = item.index;
  const Problem& p = item.problem;
  r.case_name = p.case_name;
  r.pass = item.pass;
  r.dtype = p.dtype;
  r.shape = p.shape;
  r.causal = p.causal;
  r.bias = p.bias;
  r.bias_dtype = p.bias_dtype;
  r.dropout = p.dropout;
  r.flops = item.flops;
  return r;
}

Measurement whole_row(Status status, std::string reason) {
  Measurement m;
  m.impl = "all";
  m.kind = "baseline";
  m.status = status;
  m.reason = std::move(reason);
  return m;
}

void exempt(const std::vector<Op::Unchecked>& unchecked, std::vector<TensorCheck>& checks) {
  for (const Op::Unchecked& u : unchecked)
    for (TensorCheck& c : checks) {
      if (c.tensor != u.tensor) continue;
      c.note = (u.written ? "not compared: " : "not computed: ") + u.why;
      if (!u.written) c.nonfinite = 0;
      c.max_abs = c.rel_rms = c.bound = 0;
      c.pass = c.nonfinite == 0;
    }
}

Grid variant_grid(const Variant& v) {
  Grid grid = load_variant_grid(v.name(), grids_dir());
  if (Support same = check_grid_matches(grid, v.knob_names()); !same.ok())
    throw InputError(grid.file, "/knobs", same.reason);
  return grid;
}

Candidates candidates(const Variant& v, const Problem& p, Pass pass, TuneMode tune,
                      const TuningCache& cache, const gpu::DeviceInfo& dev) {
  if (tune == TuneMode::none) {
    if (auto hit = cache.find(make_cache_key(dev, v.name(), p, pass)))
      return {{hit->knobs}, "cache"};
    return {{v.default_knobs(p)}, "default"};
  }
  const Grid grid = variant_grid(v);
  // The default configuration always competes: a grid whose points all refuse a shape (panels
  // that do not divide D=320's three) must not leave the row without a configuration, and a tuned
  // row is never slower than the untuned one.
  std::vector<Knobs> points = grid_points(grid, tune);
  const Knobs fallback = v.default_knobs(p);
  if (std::find(points.begin(), points.end(), fallback) == points.end()) points.push_back(fallback);
  return {points, "tuned"};
}

int compiler_threads(int jobs) {
  return jobs > 0 ? jobs : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::vector<CompileOutcome> precompile(const Plan& plan, const std::vector<Variant*>& variants,
                                       TuneMode tune, const TuningCache& cache,
                                       const gpu::DeviceInfo& dev, int threads) {
  struct Job {
    Variant* variant;
    CompileOutcome out;
  };
  std::vector<Job> jobs;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const PlanItem& item = plan.items[i];
    for (Variant* v : variants) {
      if (v->pass() != item.pass || !v->supports(item.problem).ok()) continue;
      Candidates c = candidates(*v, item.problem, item.pass, tune, cache, dev);
      std::vector<std::string> sources(c.knobs.size(), c.source);
      // A stand-in device (--compile-only) matches no cache entry by name and driver: compile
      // what any GPU of its arch stored, which a later run there will load.
      if (tune == TuneMode::none && dev.driver_version == 0)
        for (Knobs& k : cache.for_arch(make_cache_key(dev, v->name(), item.problem, item.pass)))
          if (std::find(c.knobs.begin(), c.knobs.end(), k) == c.knobs.end()) {
            c.knobs.push_back(std::move(k));
            sources.push_back("cache");
          }
      for (size_t n = 0; n < c.knobs.size(); ++n)
        if (v->supports(item.problem, c.knobs[n], dev).ok())
          jobs.push_back({v, {v->name(), static_cast<int>(i), c.knobs[n], sources[n], {}, 0}});
    }
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j; !interrupted() && (j = next++) < jobs.size();) {
      CompileOutcome& out = jobs[j].out;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        out.result = jobs[j].variant->compile(plan.items[out.item].problem, out.knobs, dev);
      } catch (const std::exception& e) {
        out.result = Support::no(e.what());
      }
      out.seconds = seconds_since(t0);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int>(threads, static_cast<int>(jobs.size())); ++t)
    pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  std::vector<CompileOutcome> out;
  for (size_t j = 0; j < std::min(next.load(), jobs.size()); ++j)
    out.push_back(std::move(jobs[j].out));
  return out;
}

Environment describe_environment(const gpu::DeviceInfo& dev, const Registry& reg,
                                 const std::string& command_line) {
  Environment env;
  env.gpu = dev.name;
  env.arch = dev.arch();
  env.sm_count = dev.sm_count;
  env.sm_clock_mhz = dev.max_clock_mhz;
  env.memory_clock_mhz = dev.memory_clock_mhz;
  env.l2_bytes = dev.l2_bytes;
  env.memory_bytes = dev.global_mem_bytes;
  // The kernel driver's own version when NVML answers, plus the CUDA version it supports.
  const std::string nvidia = nvidia_driver_version();
  env.driver = (nvidia.empty() ? "" : nvidia + ", ") + "CUDA " + version_string(dev.driver_version);
  env.cuda_runtime = version_string(dev.runtime_version);
  env.cudnn = "not loaded";
  for (const auto& b : reg.baselines)
    if (b->id() == BaselineId::cudnn && !b->version().empty()) env.cudnn = b->version();
  env.git_commit = build_commit();
  env.build_flags = build_flags();
  env.command_line = command_line;
  env.started_at = utc_now();
  env.host = host_name();
  return env;
}

struct Session::Impl {
  Impl(const RunSettings& opts, const gpu::DeviceInfo& dev, Registry& reg, RunObserver& obs)
      : exec(opts, dev, obs),
        variants(selected_variants(reg, opts.variants)),
        baselines(selected_baselines(reg, opts.baseline)),
        device{host_name(), dev.ordinal} {}
  Executor exec;
  std::vector<Variant*> variants;
  std::vector<Baseline*> baselines;
  DeviceRef device;
  std::string lost;  // set once the CUDA context is unusable
};

Session::Session(const Plan& plan, const gpu::DeviceInfo& dev, Registry& reg, RunObserver& obs)
    : impl_(std::make_unique<Impl>(plan.settings, dev, reg, obs)) {
  impl_->exec.warm_up(plan, impl_->variants);
}

Session::~Session() = default;

const std::string& Session::lost() const {
  return impl_->lost;
}

Row Session::run(const PlanItem& item) {
  Row row = make_row(item);
  if (!impl_->lost.empty()) {
    row.baselines.push_back(whole_row(Status::skipped, "not run: " + impl_->lost));
  } else {
    try {
      row = impl_->exec.run_item(item, impl_->variants, impl_->baselines);
    } catch (const RunError& e) {
      impl_->lost = std::string("CUDA context lost: ") + e.what();
      row = make_row(item);
      row.baselines.push_back(whole_row(Status::failed, impl_->lost));
    }
  }
  row.device = impl_->device;
  return row;
}

Results start_results(const Plan& plan, Environment env) {
  Results results;
  results.tool_version = tool_version();
  results.env = std::move(env);
  const RunSettings& opts = plan.settings;
  results.timing_mode = opts.profile ? "profile" : opts.timing.cold ? "cold" : "hot";
  results.plan = plan_info(plan);
  return results;
}

Results run_plan(const Plan& plan, const gpu::DeviceInfo& dev, Registry& reg, RunObserver& obs) {
  Results results = start_results(plan, describe_environment(dev, reg, plan.settings.command_line));
  Session session(plan, dev, reg, obs);
  const auto t0 = std::chrono::steady_clock::now();
  const int total = static_cast<int>(plan.items.size());
  for (int i = 0; i < total && !interrupted(); ++i) {
    const PlanItem& item = plan.items[i];
    const double elapsed = seconds_since(t0);
    const double eta = i == 0 ? -1.0 : elapsed / i * (total - i);
    obs.on_item(i, total, item, elapsed, eta);
    try {
      results.rows.push_back(session.run(item));
    } catch (const Interrupted&) {
      break;  // the row is abandoned; the finished ones are already written
    }
    obs.on_row(results);
  }
  results.complete = !interrupted();
  return results;
}

}  // namespace ffpa
