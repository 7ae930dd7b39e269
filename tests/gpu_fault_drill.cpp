// Fault drill: a variant whose kernel traps on the second of three rows. The sweep must keep the
// first row in the results file, fail the second naming the variant and its configuration, mark
// the third not run, and count as failed (ffpa-bench exits 1 on it). And a tuned sweep that gets
// SIGINT after its first row keeps that row and the configuration its search stored.
#include <catch2/catch.hpp>

#include <csignal>

#include "core/interrupt.hpp"
#include "core/results.hpp"
#include "ffpa_support.hpp"
#include "plan/plan.hpp"
#include "report/results_json.hpp"
#include "runner/registry.hpp"
#include "runner/runner.hpp"

namespace ffpa::test {
void launch_trap(cudaStream_t);
}

using namespace ffpa;

namespace {

// ffpa-fwd-sm80, except that its launches trap on the problem named "trap".
class TrapOp : public Op {
 public:
  TrapOp(std::unique_ptr<Op> inner, bool trap) : inner_(std::move(inner)), trap_(trap) {}
  void launch(cudaStream_t s) override {
    inner_->launch(s);
    if (trap_) test::launch_trap(s);
  }

 private:
  std::unique_ptr<Op> inner_;
  bool trap_;
};

class TrapVariant : public Variant {
 public:
  explicit TrapVariant(std::unique_ptr<Variant> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return "fault-drill"; }
  Pass pass() const override { return inner_->pass(); }
  std::vector<std::string> knob_names() const override { return inner_->knob_names(); }
  Knobs default_knobs(const Problem& p) const override { return inner_->default_knobs(p); }
  Support supports(const Problem& p) const override { return inner_->supports(p); }
  Support supports(const Problem& p, const Knobs& k, const gpu::DeviceInfo& d) const override {
    return inner_->supports(p, k, d);
  }
  Support compile(const Problem& p, const Knobs& k, const gpu::DeviceInfo& d) const override {
    return inner_->compile(p, k, d);
  }
  std::unique_ptr<Op> bind(const Problem& p, const Knobs& k, AttnTensors& t,
                           const gpu::DeviceInfo& d) override {
    return std::make_unique<TrapOp>(inner_->bind(p, k, t, d), p.case_name == "trap");
  }

 private:
  std::unique_ptr<Variant> inner_;
};

// Writes the results after every row, as ffpa-bench does; with `signal`, raises it (through the
// interrupt flag SIGINT sets) once the first row is written.
class FileObserver : public RunObserver {
 public:
  explicit FileObserver(std::filesystem::path file, int signal = 0)
      : file_(std::move(file)), signal_(signal) {}
  void on_row(const Results& partial) override {
    write_results_atomic(file_, partial);
    if (signal_) set_interrupted(signal_);
  }

 private:
  std::filesystem::path file_;
  int signal_;
};

Plan three_rows(const std::vector<std::string>& names) {
  Plan plan;
  for (const std::string& name : names) {
    PlanItem item;
    item.index = static_cast<int>(plan.items.size());
    item.problem = test::make(1, 4, 4, 256, 256, 128);
    item.problem.case_name = name;
    item.pass = Pass::fwd;
    item.flops = item.problem.flops(Pass::fwd);
    item.tensor_bytes = tensor_bytes(item.problem, Pass::fwd);
    plan.items.push_back(item);
  }
  // As build_plan numbers them: the results reader checks every row against the plan.
  plan.total = static_cast<int>(plan.items.size());
  return plan;
}

}  // namespace

// First: after the trap this process has no usable CUDA context.
TEST_CASE("a signal mid-sweep keeps the finished rows and what the searches found", "[fault]") {
  test::FreshCache cache;
  Registry reg;
  for (auto& v : Registry::make().variants)
    if (v->name() == "ffpa-fwd-sm80") reg.variants.push_back(std::move(v));
  REQUIRE(reg.variants.size() == 1);
  Plan plan = three_rows({"first", "second", "third"});
  RunSettings& opts = plan.settings;
  opts.baseline = BaselineMode::none;
  opts.tune = TuneMode::fast;
  opts.tuning_cache = (cache.dir.path() / "tuning.json").string();
  const gpu::DeviceInfo dev = gpu::open_device(0);
  const auto file = cache.dir.path() / "results.json";
  FileObserver obs(file, SIGINT);
  const Results res = run_plan(plan, dev, reg, obs);
  set_interrupted(0);

  CHECK_FALSE(res.complete);
  REQUIRE(res.rows.size() == 1);
  REQUIRE(res.rows[0].ffpa);
  CHECK(res.rows[0].ffpa->status == Status::ok);
  CHECK(res.rows[0].ffpa->config_source == "tuned");
  CHECK(load_results(file).rows.size() == 1);
  // Saved by the search itself, before the signal.
  const TuningCache saved = TuningCache::load(opts.tuning_cache);
  CHECK(saved.warning().empty());
  const CacheKey key = make_cache_key(dev, "ffpa-fwd-sm80", plan.items[0].problem, Pass::fwd);
  REQUIRE(saved.find(key));
  CHECK(saved.find(key)->knobs == res.rows[0].ffpa->config);
}

TEST_CASE("a kernel that traps mid-sweep fails its row, keeps the rows before, names itself",
          "[fault]") {
  test::FreshCache cache;
  Registry reg;
  for (auto& v : Registry::make().variants)
    if (v->name() == "ffpa-fwd-sm80")
      reg.variants.push_back(std::make_unique<TrapVariant>(std::move(v)));
  REQUIRE(reg.variants.size() == 1);

  Plan plan = three_rows({"before", "trap", "after"});
  RunSettings& opts = plan.settings;
  opts.baseline = BaselineMode::none;
  opts.tuning_cache = (cache.dir.path() / "tuning.json").string();
  const gpu::DeviceInfo dev = gpu::open_device(0);
  const auto file = cache.dir.path() / "results.json";
  FileObserver obs(file);
  const Results res = run_plan(plan, dev, reg, obs);

  const Results disk = load_results(file);
  REQUIRE(disk.rows.size() == 3);
  REQUIRE(disk.rows[0].ffpa);
  CHECK(disk.rows[0].ffpa->status == Status::ok);
  const Knobs knobs = reg.variants[0]->default_knobs(plan.items[1].problem);
  REQUIRE(disk.rows[1].baselines.size() == 1);
  const Measurement& lost = disk.rows[1].baselines[0];
  CHECK(lost.status == Status::failed);
  CHECK_THAT(lost.reason,
             Catch::Contains("CUDA context lost: fault-drill [" + to_string(knobs) + "]"));
  REQUIRE(disk.rows[2].baselines.size() == 1);
  CHECK_THAT(disk.rows[2].baselines[0].reason, Catch::StartsWith("not run: CUDA context lost"));
  // The file on disk is the last row's partial write (complete is set by the caller at the end).
  CHECK(res.complete);
  CHECK(failed_measurements(disk) == 1);
}
