// merge: shards' results files back into one (report/merge), through the library, the results
// JSON and tools/merge-shards.sh; what it refuses, and older files without a plan record.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "plan/plan.hpp"
#include "plan/shard.hpp"
#include "report/merge.hpp"
#include "report/results_json.hpp"
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

Plan plan_of(Options o, int shard = 0, int shards = 1) {
  o.shard = shard;
  o.shards = shards;
  return make_plan(o, o);
}

// A results file as a run of `plan` would write it; rows made up (this tests bookkeeping, not
// measurements).
Results fake_results(const Plan& plan) {
  Results r;
  r.tool_version = "0.1.0";
  r.env.gpu = "NVIDIA H200";
  r.env.host = "node1";
  r.timing_mode = "cold";
  r.plan = plan_info(plan);
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
    m.timing.median_ms = m.timing.mean_ms = m.timing.min_ms = m.timing.max_ms =
        1.0 + it.index / 7.0;
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
    const fs::path f = dir / ("shard" + std::to_string(i) + ".json");
    write_results_atomic(f, fake_results(plan_of(o, i, shards)));
    out.push_back({f.string(), load_results(f)});
  }
  return out;
}

std::string dump(const Results& r) {
  return to_json(r).dump(1);
}

// A tuning cache with one entry, as a shard's run saves it.
void save_one(const std::string& path, int64_t D, double ms) {
  gpu::DeviceInfo d;
  d.name = "NVIDIA H200";
  d.sm_major = 9;
  d.driver_version = 13000;
  Problem p;
  p.shape = {1, 32, 32, 8192, 8192, D};
  TuningCache c = TuningCache::load(path);
  c.store(make_cache_key(d, "ffpa-fwd-sm90", p, Pass::fwd), {{"Br", 64}}, ms);
  c.save();
}

}  // namespace

TEST_CASE("shards merge into the file an unsharded run of the same rows writes", "[merge]") {
  test::TempDir dir;
  for (const std::string config : {"configs/smoke.json", "configs/default.json"}) {
    const Options o = options(config);
    const Results whole = fake_results(plan_of(o));
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
  const Results whole = fake_results(plan_of(o));
  const int n = 3;
  for (int i = 0; i < n; ++i) {
    const fs::path shard = dir.path() / ("shard-" + std::to_string(i));
    write_results_atomic(shard / "ffpa_NVIDIA_H200_results.json", fake_results(plan_of(o, i, n)));
    save_one((shard / "tuning.json").string(), 320 + i, 2.0 - i * 0.5);
  }
  const auto merge = [&] {
    const std::string cmd = "FFPA_BENCH=" FFPA_BENCH " sh " +
                            (test::source_dir() / "tools/merge-shards.sh").string() + " " +
                            dir.path().string() + " >/dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  REQUIRE(merge() == 0);
  CHECK(dump(load_results(dir.path() / "merged/results.json")) == dump(whole));
  CHECK(fs::exists(dir.path() / "merged/ffpa_NVIDIA_H200_speedup.md"));
  CHECK(fs::exists(dir.path() / "merged/ffpa_NVIDIA_H200_results.csv"));
  CHECK(TuningCache::load((dir.path() / "merged/tuning.json").string()).size() == n);
  fs::remove(dir.path() / "merged/results.json");
  // A shard's tuning cache unusable: exit 2 before anything is written.
  const std::string cache = test::read_file(dir.path() / "shard-2/tuning.json");
  test::write_file(dir.path() / "shard-2/tuning.json", "{");
  CHECK(merge() == 2);
  CHECK_FALSE(fs::exists(dir.path() / "merged/results.json"));
  test::write_file(dir.path() / "shard-2/tuning.json", cache);
  // A shard missing: exit 2, nothing merged.
  fs::remove_all(dir.path() / "shard-1");
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
  SECTION("nothing to merge") {
    CHECK(test::thrown([&] { merge_results({}, false); }).path() == "IN.json");
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
  mixed([](Results& r) { r.plan->flags = plan_of(options("configs/smoke.json", {"--hot"})).flags; },
        "/plan/flags");
  // Another plan size is never one run.
  std::vector<ResultsFile> parts = shard_files(o, 2, dir.path());
  parts[1].results.plan->total += 1;
  CHECK(test::thrown([&] { merge_results(parts, true); }).path() == "/plan/total");
}

TEST_CASE("results files written before shards load without plan, plan index and device",
          "[merge][json]") {
  const Results r = fake_results(plan_of(options("configs/smoke.json")));
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
}

TEST_CASE("a plan record merge could not trust is refused on reading", "[merge][json]") {
  const Results r = fake_results(plan_of(options("configs/smoke.json"), 1, 2));
  REQUIRE(r.plan->items.size() >= 2);
  const auto refused = [&](auto change) {
    nlohmann::json j = to_json(r);
    change(j);
    return test::thrown([&] { results_from_json(j, "bad.json"); }).path();
  };
  CHECK(refused([](nlohmann::json& j) { j["plan"]["shard"] = 2; }) == "/plan/shard");
  CHECK(refused([](nlohmann::json& j) { j["plan"]["shards"] = 0; }) == "/plan/shard");
  CHECK(refused([](nlohmann::json& j) { j["plan"]["total"] = -1; }) == "/plan/total");
  CHECK(refused([&](nlohmann::json& j) { j["plan"]["items"][0] = r.plan->total; }) ==
        "/plan/items/0");
  CHECK(refused([](nlohmann::json& j) { j["plan"]["items"][1] = j["plan"]["items"][0]; }) ==
        "/plan/items/1");
  CHECK(refused([](nlohmann::json& j) { j["plan"]["items"][0] = "3"; }) == "/plan/items/0");
  CHECK(refused([](nlohmann::json& j) { j["plan"]["extra"] = 1; }) == "/plan/extra");
  CHECK(refused([](nlohmann::json& j) { j["rows"][0]["plan_index"] = -2; }) ==
        "/rows/0/plan_index");
  CHECK(refused([](nlohmann::json& j) { j["rows"][0]["device"]["gpu"] = 0; }) ==
        "/rows/0/device/gpu");
  CHECK(refused([](nlohmann::json& j) { j["rows"][0]["device"]["index"] = "0"; }) ==
        "/rows/0/device/index");
  // A plan record of null reads as none.
  nlohmann::json j = to_json(r);
  j["plan"] = nullptr;
  CHECK_FALSE(results_from_json(j, "null.json").plan);
}
