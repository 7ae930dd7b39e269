// The --devices worker pool, driven by a test double of a worker (tests/fake_worker.cpp: the real
// protocol, plan and signal handling, no GPU, nothing measured).
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "gpu/cuda.hpp"
#include "plan/plan.hpp"
#include "plan/shard.hpp"
#include "report/results_json.hpp"
#include "runner/workers.hpp"
#include "support.hpp"

using namespace ffpa;

namespace {

// Sets an environment variable for one test; the workers inherit it.
struct Env {
  std::string name;
  Env(std::string n, const std::string& value) : name(std::move(n)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~Env() { ::unsetenv(name.c_str()); }
};

struct Recorder : PoolObserver {
  std::vector<int> started;  // plan indices in the order they were handed out
  std::vector<std::string> logs;
  int writes = 0;
  std::filesystem::path file;  // results written here after every row, as the tool does
  void on_start(int, const PlanItem& item, int, int, double, double) override {
    started.push_back(item.index);
  }
  void on_row(const Results& partial) override {
    ++writes;
    for (size_t i = 1; i < partial.rows.size(); ++i)
      REQUIRE(partial.rows[i - 1].plan_index < partial.rows[i].plan_index);  // plan order
    if (!file.empty()) write_results_atomic(file, partial);
  }
  void on_log(int device, const std::string& msg) override {
    logs.push_back(std::to_string(device) + ": " + msg);
  }
};

struct Setup {
  Options opts;
  Plan plan;
  WorkerLaunch launch;
  explicit Setup(const std::string& config = "configs/smoke.json",
                 std::vector<std::string> extra = {}) {
    const std::string path = (test::source_dir() / config).string();
    std::vector<std::string> args = {"fake", "--config", path};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    opts = *parse_cli(static_cast<int>(argv.size()), argv.data());
    plan = make_plan(opts, opts);
    launch = {FFPA_FAKE_WORKER, std::vector<std::string>(args.begin() + 1, args.end())};
  }
};

std::vector<int> indices(const Results& r) {
  std::vector<int> out;
  for (const Row& row : r.rows) out.push_back(row.plan_index);
  return out;
}

std::vector<int> plan_indices(const Plan& p) {
  std::vector<int> out;
  for (const PlanItem& it : p.items) out.push_back(it.index);
  return out;
}

int count_logs(const std::vector<std::string>& logs, const std::string& text) {
  return static_cast<int>(std::count_if(logs.begin(), logs.end(), [&](const std::string& l) {
    return l.find(text) != std::string::npos;
  }));
}

// Sends the test process SIGTERM, as `kill` would from outside, at the first row that finishes
// while device `busy` has a row.
struct Terminator : Recorder {
  int busy = 1;
  bool handed = false, sent = false;
  void on_start(int device, const PlanItem& item, int done, int total, double elapsed,
                double eta) override {
    Recorder::on_start(device, item, done, total, elapsed, eta);
    handed = handed || device == busy;
  }
  void on_row(const Results& partial) override {
    Recorder::on_row(partial);
    if (handed && !sent) {
      sent = true;
      ::kill(::getpid(), SIGTERM);
    }
  }
};

// Clears the signal this test process took, so that the tests after it run.
struct ClearInterrupt {
  ~ClearInterrupt() { set_interrupted(0); }
};

}  // namespace

TEST_CASE("pool: every row once, in plan order, rows handed out longest first", "[workers]") {
  Setup s;
  Recorder rec;
  const Results r = run_pool(s.plan, {0}, s.launch, rec);
  CHECK(r.complete);
  CHECK(indices(r) == plan_indices(s.plan));
  CHECK(rec.started == longest_first(s.plan));  // one worker: exactly the queue's order
  CHECK(rec.writes == static_cast<int>(s.plan.items.size()));
  REQUIRE(r.plan);
  CHECK(r.plan->total == static_cast<int>(s.plan.items.size()));
  CHECK(r.env.gpu == "Fake GPU");
  CHECK(r.env.command_line == s.opts.command_line);
  REQUIRE_FALSE(rec.logs.empty());
  CHECK_THAT(rec.logs[0], Catch::StartsWith("0: worker started, pid "));
  for (const Row& row : r.rows) {
    REQUIRE(row.ffpa);
    CHECK(row.ffpa->status == Status::skipped);  // the double measures nothing
    CHECK(row.device.index == 0);
  }
}

TEST_CASE("pool: four workers share the queue and give the rows of a one-worker run", "[workers]") {
  Setup s;
  test::TempDir dir;
  const auto trace = dir.path() / "trace";
  const Env t("FAKE_TRACE", trace.string());
  Recorder one, four;
  const Results a = run_pool(s.plan, {0}, s.launch, one);
  std::filesystem::remove(trace);
  four.file = dir.path() / "r.json";
  const Results b = run_pool(s.plan, {0, 1, 2, 3}, s.launch, four);
  REQUIRE(indices(b) == indices(a));
  for (size_t i = 0; i < a.rows.size(); ++i) {
    Row x = a.rows[i], y = b.rows[i];
    CHECK(y.device.index >= 0);
    CHECK(y.device.index < 4);
    x.device = y.device = {};
    CHECK(row_to_json(x) == row_to_json(y));
  }
  // The file written after the last row holds every row.
  CHECK(indices(load_results(four.file)) == indices(b));
  // Every device took rows.
  std::set<int> used;
  std::ifstream in(trace);
  for (int d, item; in >> d >> item;) used.insert(d);
  CHECK(used == std::set<int>{0, 1, 2, 3});
}

TEST_CASE("pool: a worker killed with SIGKILL fails its row, the others run the rest",
          "[workers]") {
  Setup s;
  const int victim = longest_first(s.plan)[3];
  const Env k("FAKE_KILL_ITEM", std::to_string(victim));
  Recorder rec;
  const Results r = run_pool(s.plan, {0, 1}, s.launch, rec);
  REQUIRE(indices(r) == plan_indices(s.plan));
  int failed = 0;
  for (const Row& row : r.rows) {
    if (row.plan_index != victim) {
      REQUIRE(row.ffpa);
      CHECK(row.ffpa->reason == "test double: nothing measured");
      continue;
    }
    ++failed;
    REQUIRE(row.baselines.size() == 1);
    CHECK(row.baselines[0].status == Status::failed);
    CHECK_THAT(row.baselines[0].reason, Catch::Contains("killed by signal 9 (SIGKILL)"));
    CHECK(row.device.index >= 0);
  }
  CHECK(failed == 1);
  CHECK(count_logs(rec.logs, "worker killed by signal 9") == 1);
}

TEST_CASE("pool: a lost CUDA context ends its worker after the row it reports", "[workers]") {
  Setup s;
  const int victim = longest_first(s.plan)[0];
  const Env k("FAKE_LOSE_ITEM", std::to_string(victim));
  Recorder rec;
  const Results r = run_pool(s.plan, {0, 1}, s.launch, rec);
  REQUIRE(indices(r) == plan_indices(s.plan));
  for (const Row& row : r.rows) {
    REQUIRE(row.ffpa);
    if (row.plan_index == victim) {
      CHECK(row.ffpa->status == Status::failed);
      CHECK(row.ffpa->reason == "CUDA context lost: test double");
    } else {
      CHECK(row.ffpa->status == Status::skipped);
    }
  }
  // The victim went first: its worker ran nothing else.
  int dev = -1;
  for (const Row& row : r.rows)
    if (row.plan_index == victim) dev = row.device.index;
  int on_victims_device = 0;
  for (const Row& row : r.rows) on_victims_device += row.device.index == dev;
  CHECK(on_victims_device == 1);
}

TEST_CASE("pool: an unreadable message fails its row and ends that worker", "[workers]") {
  Setup s;
  const int victim = longest_first(s.plan)[1];
  const Env k("FAKE_GARBLE_ITEM", std::to_string(victim));
  Recorder rec;
  const Results r = run_pool(s.plan, {0, 1}, s.launch, rec);
  REQUIRE(indices(r) == plan_indices(s.plan));
  for (const Row& row : r.rows) {
    if (row.plan_index != victim) {
      REQUIRE(row.ffpa);
      CHECK(row.ffpa->reason == "test double: nothing measured");
      continue;
    }
    CHECK_FALSE(row.ffpa);
    REQUIRE(row.baselines.size() == 1);
    CHECK(row.baselines[0].status == Status::failed);
    CHECK_THAT(row.baselines[0].reason, Catch::StartsWith("unreadable message from the worker"));
  }
}

TEST_CASE("pool: with its only worker gone the remaining rows say not run", "[workers]") {
  Setup s;
  const int victim = longest_first(s.plan)[2];
  const Env k("FAKE_KILL_ITEM", std::to_string(victim));
  test::TempDir dir;
  Recorder rec;
  rec.file = dir.path() / "r.json";
  const Results r = run_pool(s.plan, {5}, s.launch, rec);
  // The failed and "not run" rows are a results file compare and merge can read.
  CHECK(indices(load_results(rec.file)) == indices(r));
  REQUIRE(indices(r) == plan_indices(s.plan));
  int ran = 0, failed = 0, not_run = 0;
  for (const Row& row : r.rows) {
    if (row.ffpa) {
      ++ran;
      continue;
    }
    REQUIRE(row.baselines.size() == 1);
    if (row.baselines[0].status == Status::failed) {
      ++failed;
      CHECK(row.device.index == 5);
    } else {
      ++not_run;
      CHECK_THAT(row.baselines[0].reason, Catch::StartsWith("not run: no worker left"));
    }
  }
  CHECK(ran == 2);
  CHECK(failed == 1);
  CHECK(not_run == static_cast<int>(s.plan.items.size()) - 3);
}

TEST_CASE("pool: GPUs of different models are refused before any row", "[workers]") {
  Setup s;
  const Env g("FAKE_GPU_1", "Other GPU");
  Recorder rec;
  const InputError e = test::thrown([&] { run_pool(s.plan, {0, 1}, s.launch, rec); });
  CHECK(e.path() == "--devices");
  CHECK_THAT(e.reason(), Catch::Contains("cuda:0 Fake GPU, cuda:1 Other GPU"));
  CHECK(rec.started.empty());
}

TEST_CASE("pool: a shard's workers run the shard's rows", "[workers][shard]") {
  Setup s("configs/default.json", {"--shard", "1/3"});
  Recorder rec;
  const Results r = run_pool(s.plan, {0, 1}, s.launch, rec);
  CHECK(indices(r) == plan_indices(s.plan));
  REQUIRE(r.plan);
  CHECK(r.plan->shard == 1);
  CHECK(r.plan->shards == 3);
  CHECK(r.plan->items == plan_indices(s.plan));
}

TEST_CASE("pool: a worker that cannot start leaves its rows to the others", "[workers]") {
  Setup s;
  WorkerLaunch bad = s.launch;
  bad.program = "/nonexistent/ffpa-worker";
  Recorder rec;
  const Results r = run_pool(s.plan, {0}, bad, rec);
  REQUIRE(rec.logs.size() == 1);
  CHECK_THAT(rec.logs[0], Catch::Contains("cannot start /nonexistent/ffpa-worker"));
  REQUIRE(r.rows.size() == s.plan.items.size());
  for (const Row& row : r.rows) CHECK_FALSE(row.ffpa);
}

TEST_CASE("pool: ffpa-bench's own worker without a GPU says why and ends", "[workers]") {
  if (gpu::available()) {
    WARN(
        "a GPU is present: the worker would measure; docs/notes/scale_out.md lists the GPU checks");
    return;
  }
  Setup s;
  WorkerLaunch real = s.launch;
  real.program = FFPA_BENCH;
  Recorder rec;
  const Results r = run_pool(s.plan, {0}, real, rec);
  REQUIRE(r.rows.size() == s.plan.items.size());
  REQUIRE(rec.logs.size() >= 2);
  CHECK_THAT(rec.logs[1], Catch::StartsWith("0: no usable GPU"));
  const Measurement& m = r.rows[0].baselines.at(0);
  CHECK(m.status == Status::skipped);
  CHECK_THAT(m.reason, Catch::Contains("not run: no worker left (last: cuda:0 no usable GPU"));
}

TEST_CASE("pool: SIGTERM reaches the workers, the finished rows stay, the run is incomplete",
          "[workers][signal]") {
  // As ffpa-bench's main does: SIGINT/SIGTERM are taken by the signal thread, which forwards them.
  catch_interrupts();
  const ClearInterrupt clear;
  Setup s;
  // Device 1's rows would take a minute: only a forwarded signal ends its row in time.
  const Env fast("FAKE_ROW_MS_0", "20"), slow("FAKE_ROW_MS_1", "60000");
  Terminator rec;
  const Results r = run_pool(s.plan, {0, 1}, s.launch, rec);
  CHECK(interrupted() == SIGTERM);
  CHECK_FALSE(r.complete);
  REQUIRE_FALSE(r.rows.empty());
  CHECK(r.rows.size() < s.plan.items.size());
  for (const Row& row : r.rows) {  // finished rows only: none failed or "not run"
    REQUIRE(row.ffpa);
    CHECK(row.ffpa->reason == "test double: nothing measured");
    CHECK(row.device.index == 0);
    CHECK(row.baselines.empty());
  }
  CHECK(count_logs(rec.logs, "1: interrupted by SIGTERM") == 1);
  CHECK(count_logs(rec.logs, "1: worker exited with status 143") == 1);
  CHECK(count_logs(rec.logs, "1: worker killed") == 0);  // one signal, not a second one
}

TEST_CASE("pool: a signal before the first row starts no row", "[workers][signal]") {
  const ClearInterrupt clear;
  Setup s;
  set_interrupted(SIGINT);  // as if it arrived while the plan was being made
  Recorder rec;
  const Results r = run_pool(s.plan, {0, 1}, s.launch, rec);
  CHECK(r.rows.empty());
  CHECK_FALSE(r.complete);
  CHECK(rec.started.empty());
  CHECK(r.env.gpu == "Fake GPU");  // the workers said hello before they ended
}
