// --shard (the plan split), merge of shard results and of tuning caches, the file lock.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <numeric>
#include <regex>
#include <set>
#include <thread>

#include "cli/listing.hpp"
#include "core/error.hpp"
#include "core/file_lock.hpp"
#include "plan/plan.hpp"
#include "plan/shard.hpp"
#include "report/merge.hpp"
#include "report/results_json.hpp"
#include "runner/runner.hpp"
#include "support.hpp"
#include "tuning/cache.hpp"

using namespace ffpa;
namespace fs = std::filesystem;

namespace {

Options options(const std::string& config, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"ffpa-bench", "--config",
                                   (test::source_dir() / config).string()};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return *parse_cli(static_cast<int>(argv.size()), argv.data());
}

Options sharded(Options o, int shard, int shards) {
  o.shard = shard;
  o.shards = shards;
  return o;
}

// The plan numbers ("#", 1-based) of the rows of a --dry-run table.
std::vector<int> dry_run_items(const std::string& text) {
  std::vector<int> out;
  static const std::regex row(R"(^\| (\d+) \|)");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) out.push_back(std::stoi(m[1]) - 1);
  }
  return out;
}

// A results file as a run of `plan` would write it; rows made up (this tests bookkeeping, not
// measurements).
Results fake_results(const Plan& plan, const Options& o) {
  Results r;
  r.tool_version = "0.1.0";
  r.env.gpu = "NVIDIA H200";
  r.env.host = "node1";
  r.timing_mode = "cold";
  r.plan = plan_info(plan, o);
  r.complete = true;
  for (const PlanItem& it : plan.items) {
    Row row;
    row.plan_index = it.index;
    row.device = {"node" + std::to_string(it.index % 3), it.index % 8};
    row.case_name = it.problem.case_name;
    row.pass = it.pass;
    row.dtype = it.problem.dtype;
    row.shape = it.problem.shape;
    row.flops = it.flops;
    Measurement m;
    m.impl = "ffpa-fwd-sm90";
    m.kind = "ffpa";
    m.status = Status::ok;
    m.timing.median_ms = m.timing.mean_ms = 1.0 + it.index / 7.0;
    m.timing.samples = 10;
    m.tflops = it.flops / (m.timing.median_ms * 1e9);
    row.ffpa = m;
    r.rows.push_back(row);
  }
  return r;
}

// Shard files written and read back, as merge gets them.
std::vector<ResultsFile> shard_files(const Options& o, int shards, const fs::path& dir) {
  std::vector<ResultsFile> out;
  for (int i = 0; i < shards; ++i) {
    const Options so = sharded(o, i, shards);
    const fs::path f = dir / ("shard" + std::to_string(i) + ".json");
    write_results_atomic(f, fake_results(make_plan(so), so));
    out.push_back({f.string(), load_results(f)});
  }
  return out;
}

std::string dump(const Results& r) {
  return to_json(r).dump(1);
}

gpu::DeviceInfo h200() {
  gpu::DeviceInfo d;
  d.name = "NVIDIA H200";
  d.sm_major = 9;
  d.driver_version = 13000;
  return d;
}

CacheKey key(int64_t D) {
  Problem p;
  p.shape = {1, 32, 32, 8192, 8192, D};
  return make_cache_key(h200(), "ffpa-fwd-sm90", p, Pass::fwd);
}

void save_one(const std::string& path, int64_t D, int64_t knob, double ms) {
  TuningCache c = TuningCache::load(path);
  c.store(key(D), {{"Br", knob}}, ms);
  c.save();
}

}  // namespace

TEST_CASE("shards partition the plan exactly, in --dry-run too", "[shard]") {
  const Registry reg = Registry::make();
  for (const std::string config : {"configs/smoke.json", "configs/default.json"})
    for (const auto& extra :
         {std::vector<std::string>{},
          std::vector<std::string>{"--D", "320,512,1024", "--N", "4096,8192"}}) {
      const Options o = options(config, extra);
      const Plan whole = make_plan(o);
      REQUIRE(whole.total == static_cast<int>(whole.items.size()));
      double biggest = 0;
      for (const PlanItem& it : whole.items) biggest = std::max(biggest, it.flops);
      for (int n = 1; n <= 8; ++n) {
        INFO(config << " N=" << n << " extra " << extra.size());
        std::vector<int> seen;
        std::vector<double> load;
        for (int i = 0; i < n; ++i) {
          const Options so = sharded(o, i, n);
          const Plan part = make_plan(so);
          CHECK(part.total == whole.total);
          const std::vector<int> shown = dry_run_items(render_dry_run(part, reg, so));
          std::vector<int> held;
          double cost = 0;
          for (const PlanItem& it : part.items) {
            held.push_back(it.index);
            cost += it.flops;
            // Same item as in the whole plan.
            CHECK(it.flops == whole.items[it.index].flops);
            CHECK(it.problem.case_name == whole.items[it.index].problem.case_name);
          }
          CHECK(shown == held);
          CHECK(std::is_sorted(held.begin(), held.end()));
          seen.insert(seen.end(), held.begin(), held.end());
          load.push_back(cost);
          CHECK(make_plan(so).items.size() == part.items.size());  // the same every time
        }
        std::sort(seen.begin(), seen.end());
        std::vector<int> all(whole.items.size());
        std::iota(all.begin(), all.end(), 0);
        CHECK(seen == all);  // every item in exactly one shard
        // Greedy longest-first: no shard is more than one item above another.
        const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
        CHECK(*hi - *lo <= biggest);
      }
    }
}

TEST_CASE("longest_first orders by FLOPs, ties in plan order", "[shard]") {
  const Plan p = make_plan(options("configs/smoke.json"));
  const std::vector<int> order = longest_first(p);
  REQUIRE(order.size() == p.items.size());
  for (size_t i = 1; i < order.size(); ++i) {
    const PlanItem& a = p.items[order[i - 1]];
    const PlanItem& b = p.items[order[i]];
    CHECK(a.flops >= b.flops);
    if (a.flops == b.flops) CHECK(order[i - 1] < order[i]);
  }
}

TEST_CASE("command line: --shard and --devices", "[shard][cli]") {
  const Options o = options("configs/smoke.json", {"--shard", "2/5", "--devices", "0,3"});
  CHECK(o.shard == 2);
  CHECK(o.shards == 5);
  CHECK(o.devices == std::vector<int>{0, 3});
  CHECK(options("configs/smoke.json", {"--devices", "all"}).all_devices);
  const auto error = [](std::vector<std::string> args) {
    return test::thrown([&] { options("configs/smoke.json", args); });
  };
  for (const auto& bad : {"5/5", "-1/4", "1", "a/4", "1/0", "1/", "/4"})
    CHECK(error({"--shard", bad}).path() == "--shard");
  CHECK(error({"--devices", "0,0"}).path() == "--devices");
  CHECK(error({"--devices", "x"}).path() == "--devices");
  CHECK(error({"--devices", "0", "--device", "1"}).where() == "command line");
  // A worker's own device replaces the list.
  const Options w = options("configs/smoke.json", {"--devices", "all", "--worker", "3"});
  CHECK(w.worker);
  CHECK(w.device == 3);
  CHECK_FALSE(w.all_devices);
}

TEST_CASE("merge on the command line", "[merge][cli]") {
  const char* argv[] = {"ffpa-bench", "merge",          "out.json", "a.json",
                        "b.json",     "--allow-mixed",  "--caches", "c1.json",
                        "c2.json",    "--tuning-cache", "t.json"};
  const Options o = *parse_cli(11, argv);
  CHECK(o.command == Command::merge);
  CHECK(o.merge_out == "out.json");
  CHECK(o.merge_in == std::vector<std::string>{"a.json", "b.json"});
  CHECK(o.merge_caches == std::vector<std::string>{"c1.json", "c2.json"});
  CHECK(o.tuning_cache == "t.json");
  CHECK(o.allow_mixed);
  const char* alone[] = {"ffpa-bench", "merge", "out.json"};
  CHECK(test::thrown([&] { parse_cli(3, alone); }).where() == "command line");
}

TEST_CASE("shards merge into the file an unsharded run of the same rows writes", "[merge]") {
  test::TempDir dir;
  for (const std::string config : {"configs/smoke.json", "configs/default.json"}) {
    const Options o = options(config);
    const Results whole = fake_results(make_plan(o), o);
    for (int n : {1, 2, 3, 5, 8}) {
      INFO(config << " N=" << n);
      std::vector<ResultsFile> parts = shard_files(o, n, dir.path());
      std::reverse(parts.begin(), parts.end());  // the order given does not matter
      const Results merged = merge_results(parts, false);
      CHECK(dump(merged) == dump(whole));
      // And through a file.
      write_results_atomic(dir.path() / "merged.json", merged);
      CHECK(dump(load_results(dir.path() / "merged.json")) == dump(whole));
    }
  }
}

TEST_CASE("tools/merge-shards.sh merges a sharded run's directory", "[merge][tools]") {
  test::TempDir dir;
  const Options o = options("configs/smoke.json");
  const Results whole = fake_results(make_plan(o), o);
  const int n = 3;
  for (int i = 0; i < n; ++i) {
    const Options so = sharded(o, i, n);
    const fs::path shard = dir.path() / ("shard-" + std::to_string(i));
    write_results_atomic(shard / "ffpa_NVIDIA_H200_results.json", fake_results(make_plan(so), so));
    save_one((shard / "tuning.json").string(), 320 + i, 64, 2.0 - i * 0.5);
  }
  const auto merge = [&] {
    const std::string cmd = "FFPA_BENCH=" FFPA_BENCH_BIN " sh " +
                            (test::source_dir() / "tools/merge-shards.sh").string() + " " +
                            dir.path().string() + " >/dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  REQUIRE(merge() == 0);
  CHECK(dump(load_results(dir.path() / "merged/results.json")) == dump(whole));
  CHECK(fs::exists(dir.path() / "merged/ffpa_NVIDIA_H200_speedup.md"));
  CHECK(TuningCache::load((dir.path() / "merged/tuning.json").string()).size() == n);
  // A shard missing: exit 2, nothing merged over the old file.
  fs::remove_all(dir.path() / "shard-1");
  fs::remove(dir.path() / "merged/results.json");
  CHECK(merge() == 2);
  CHECK_FALSE(fs::exists(dir.path() / "merged/results.json"));
}

TEST_CASE("merge refuses duplicate and missing rows with a list", "[merge]") {
  test::TempDir dir;
  const Options o = options("configs/smoke.json");
  std::vector<ResultsFile> parts = shard_files(o, 4, dir.path());

  SECTION("a shard given twice") {
    parts.push_back(parts[1]);
    const InputError e = test::thrown([&] { merge_results(parts, false); });
    CHECK(e.path() == "/rows");
    CHECK_THAT(e.reason(), Catch::Contains("duplicate row(s)"));
    CHECK_THAT(e.reason(), Catch::Contains(parts[1].file));
  }
  SECTION("a shard missing") {
    const int lost = static_cast<int>(parts[2].results.rows.size());
    parts.erase(parts.begin() + 2);
    const InputError e = test::thrown([&] { merge_results(parts, false); });
    CHECK_THAT(e.reason(), Catch::Contains(std::to_string(lost) + " missing row(s)"));
    CHECK_THAT(e.reason(), Catch::Contains("no file for shard 2/4"));
  }
  SECTION("an interrupted shard") {
    const Row gone = parts[3].results.rows.back();
    parts[3].results.rows.pop_back();
    parts[3].results.complete = false;
    const InputError e = test::thrown([&] { merge_results(parts, true); });
    CHECK_THAT(e.reason(), Catch::Contains("1 missing row(s)"));
    CHECK_THAT(e.reason(), Catch::Contains(fmt::format("plan item {}: not in {} (shard 3/4, "
                                                       "interrupted)",
                                                       gone.plan_index, parts[3].file)));
  }
  SECTION("a row of no plan item") {
    parts[0].results.rows[0].plan_index = 100000;
    CHECK(test::thrown([&] { merge_results(parts, false); }).path() == "/rows/0/plan_index");
  }
  SECTION("a file without a plan record") {
    parts[1].results.plan.reset();
    CHECK(test::thrown([&] { merge_results(parts, false); }).path() == "/plan");
  }
}

TEST_CASE("merge refuses mixed versions, GPUs, configs and flags unless told", "[merge]") {
  test::TempDir dir;
  const Options o = options("configs/smoke.json");
  const auto mixed = [&](auto change, const std::string& path) {
    std::vector<ResultsFile> parts = shard_files(o, 3, dir.path());
    change(parts[2].results);
    const InputError e = test::thrown([&] { merge_results(parts, false); });
    CHECK(e.where() == parts[2].file);
    CHECK(e.path() == path);
    CHECK_THAT(e.reason(), Catch::Contains("--allow-mixed"));
    CHECK(merge_results(parts, true).rows.size() ==
          static_cast<size_t>(parts[0].results.plan->total));
  };
  mixed([](Results& r) { r.tool_version = "0.2.0"; }, "/tool_version");
  mixed([](Results& r) { r.env.git_commit = "0123abc"; }, "/env/git_commit");
  mixed([](Results& r) { r.env.gpu = "NVIDIA A100-SXM4-80GB"; }, "/env/gpu");
  mixed([](Results& r) { r.timing_mode = "hot"; }, "/timing_mode");
  mixed([](Results& r) { r.plan->config_hash = "0000000000000000"; }, "/plan/config_hash");
  mixed(
      [](Results& r) {
        r.plan->flags = run_flags(options("configs/smoke.json", {"--tune", "fast"}));
      },
      "/plan/flags");
  // Another plan size is never one run.
  std::vector<ResultsFile> parts = shard_files(o, 2, dir.path());
  parts[1].results.plan->total += 1;
  CHECK(test::thrown([&] { merge_results(parts, true); }).path() == "/plan/total");
}

TEST_CASE("results files written before shards load without plan, plan index and device",
          "[merge][json]") {
  const Options o = options("configs/smoke.json");
  const Results r = fake_results(make_plan(o), o);
  nlohmann::json j = to_json(r);
  j.erase("plan");
  for (auto& row : j["rows"]) {
    row.erase("plan_index");
    row.erase("device");
  }
  const Results old = results_from_json(j, "old.json");
  CHECK_FALSE(old.plan);
  CHECK(old.rows.at(0).plan_index == -1);
  CHECK(old.rows.at(0).device.index == -1);
  // Such a file cannot be placed in a plan.
  CHECK(test::thrown([&] { merge_results({{"old.json", old}}, true); }).path() == "/plan");
  // A plan record that names a shard outside its count is refused on reading.
  j = to_json(r);
  j["plan"]["shard"] = 4;
  j["plan"]["shards"] = 4;
  CHECK(test::thrown([&] { results_from_json(j, "bad.json"); }).path() == "/plan/shard");
}

TEST_CASE("run_flags leaves out what does not change the rows", "[shard]") {
  const std::string base = run_flags(options("configs/smoke.json"));
  CHECK(run_flags(options("configs/smoke.json", {"--out", "x", "--shard", "1/2", "--devices", "all",
                                                 "-j", "3", "-v"})) == base);
  for (const auto& changed : {std::vector<std::string>{"--tune", "fast"},
                              {"--dtype", "bf16"},
                              {"--hot"},
                              {"--seed", "3"},
                              {"--no-check"},
                              {"--D", "320"},
                              {"--baseline", "cudnn"},
                              {"--max-noise", "1"}})
    CHECK(run_flags(options("configs/smoke.json", changed)) != base);
}

TEST_CASE("tuning caches merge to the fastest entry per key", "[merge][tuning]") {
  test::TempDir dir;
  const std::string a = (dir.path() / "a.json").string(), b = (dir.path() / "b.json").string(),
                    out = (dir.path() / "out" / "t.json").string();
  save_one(a, 320, 64, 2.0);
  save_one(a, 512, 64, 3.0);
  save_one(b, 512, 128, 2.5);  // faster than a's
  save_one(b, 1024, 32, 9.0);
  save_one(out, 320, 16, 1.5);                        // the target's own, faster than a's
  CHECK(TuningCache::merge_files(out, {a, b}) == 3);  // 512 from a, then b's faster; 1024
  const TuningCache m = TuningCache::load(out);
  CHECK(m.size() == 3);
  CHECK(m.find(key(320))->ms == 1.5);
  CHECK(m.find(key(512))->knobs == Knobs{{"Br", 128}});
  CHECK(m.find(key(1024))->ms == 9.0);
  CHECK(TuningCache::merge_files(out, {a, b}) == 0);

  test::write_file(dir.path() / "bad.json", "{not json");
  const std::string before = test::read_file(out);
  const InputError e = test::thrown([&] {
    TuningCache::merge_files(out, {a, (dir.path() / "bad.json").string()});
  });
  CHECK(e.where() == (dir.path() / "bad.json").string());
  CHECK(test::read_file(out) == before);  // nothing written
  CHECK(test::thrown([&] {
          TuningCache::merge_files(out, {(dir.path() / "nope.json").string()});
        }).reason() == "no such tuning cache");
}

TEST_CASE("a tuning-cache save waits for the lock and keeps the holder's entries", "[tuning]") {
  test::TempDir dir;
  const std::string path = (dir.path() / "t.json").string();
  const std::string other = (dir.path() / "other.json").string();
  std::future<void> saved;
  {
    const FileLock held(path);
    saved = std::async(std::launch::async, [&] { save_one(path, 512, 64, 3.0); });
    CHECK(saved.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    CHECK_FALSE(fs::exists(path));
    // The holder writes an entry meanwhile; the waiting save must merge with it, not replace it.
    save_one(other, 320, 16, 1.0);
    fs::copy_file(other, path);
  }
  saved.get();
  const TuningCache c = TuningCache::load(path);
  CHECK(c.find(key(512)));
  CHECK(c.find(key(320)));
}
