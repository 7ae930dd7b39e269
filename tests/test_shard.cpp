// --shard: the plan split (every item in exactly one shard, balanced, the same on every host), the
// longest-first order the --devices pool hands rows out in, and the plan record results keep.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <regex>
#include <sstream>

#include "cli/listing.hpp"
#include "cli/options.hpp"
#include "plan/plan.hpp"
#include "plan/shard.hpp"
#include "runner/registry.hpp"
#include "support.hpp"

using namespace ffpa;

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

// The plan numbers ("#", 1-based) of the rows of a --dry-run table, 0-based.
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

}  // namespace

TEST_CASE("shards partition the plan exactly, in --dry-run too", "[shard]") {
  const Registry reg = Registry::make();
  for (const std::string config : {"configs/smoke.json", "configs/default.json"})
    for (const auto& extra :
         {std::vector<std::string>{},
          std::vector<std::string>{"--D", "320,512,1024", "--N", "4096,8192"}}) {
      const Options o = options(config, extra);
      const Plan whole = plan_of(o);
      REQUIRE(whole.total == static_cast<int>(whole.items.size()));
      for (size_t i = 0; i < whole.items.size(); ++i) CHECK(whole.items[i].index == int(i));
      double biggest = 0;
      for (const PlanItem& it : whole.items) biggest = std::max(biggest, it.flops);
      for (int n = 1; n <= 8; ++n) {
        INFO(config << " N=" << n << " extra " << extra.size());
        std::vector<int> seen;
        std::vector<double> load;
        for (int i = 0; i < n; ++i) {
          const Plan part = plan_of(o, i, n);
          CHECK(part.total == whole.total);
          CHECK(part.shard == i);
          CHECK(part.shards == n);
          const std::string text = render_dry_run(part, reg);
          if (n > 1)
            CHECK_THAT(text,
                       Catch::Contains("(shard " + std::to_string(i) + "/" + std::to_string(n) +
                                       " of a plan of " + std::to_string(whole.total) + ")"));
          std::vector<int> held;
          double cost = 0;
          for (const PlanItem& it : part.items) {
            held.push_back(it.index);
            cost += it.flops;
            // Same item as in the whole plan.
            CHECK(it.flops == whole.items[it.index].flops);
            CHECK(it.problem.case_name == whole.items[it.index].problem.case_name);
          }
          CHECK(dry_run_items(text) == held);
          CHECK(std::is_sorted(held.begin(), held.end()));
          seen.insert(seen.end(), held.begin(), held.end());
          load.push_back(cost);
          CHECK(plan_of(o, i, n).items.size() == part.items.size());  // the same every time
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

TEST_CASE("more shards than items leaves the extra shards empty", "[shard]") {
  const Options o = options("configs/smoke.json");
  const int total = plan_of(o).total;
  CHECK(plan_of(o, total, total + 1).items.empty());
  CHECK(plan_of(o, total - 1, total + 1).items.size() == 1);
}

TEST_CASE("longest_first orders by FLOPs, ties in plan order", "[shard]") {
  const Plan p = plan_of(options("configs/smoke.json"));
  const std::vector<int> order = longest_first(p);
  REQUIRE(order.size() == p.items.size());
  for (size_t i = 1; i < order.size(); ++i) {
    const PlanItem& a = p.items[order[i - 1]];
    const PlanItem& b = p.items[order[i]];
    CHECK(a.flops >= b.flops);
    if (a.flops == b.flops) CHECK(order[i - 1] < order[i]);
  }
}

TEST_CASE("run_flags leaves out what does not change the rows", "[shard]") {
  const std::string base = plan_of(options("configs/smoke.json")).flags;
  CHECK(plan_of(options("configs/smoke.json", {"--out", "x", "--devices", "all", "-j", "3", "-v",
                                               "--tuning-cache", "t.json"}))
            .flags == base);
  CHECK(plan_of(options("configs/smoke.json"), 1, 2).flags == base);
  for (const auto& changed : {std::vector<std::string>{"--tune", "fast"},
                              {"--dtype", "bf16"},
                              {"--hot"},
                              {"--seed", "3"},
                              {"--no-check"},
                              {"--D", "320"},
                              {"--baseline", "cudnn"},
                              {"--max-noise", "1"},
                              {"--variant", "ffpa-fwd-sm80"},
                              {"--fwd"}})
    CHECK(plan_of(options("configs/smoke.json", changed)).flags != base);
}

TEST_CASE("the plan record names the config's bytes and the shard's items", "[shard]") {
  test::TempDir dir;
  const std::string text = test::read_file(test::source_dir() / "configs/smoke.json");
  test::write_file(dir.path() / "a.json", text);
  test::write_file(dir.path() / "b.json", text + "\n");
  Options a = options("configs/smoke.json");
  a.config = (dir.path() / "a.json").string();
  Options b = a;
  b.config = (dir.path() / "b.json").string();
  const Plan pa = plan_of(a, 1, 3);
  CHECK(pa.config_hash.size() == 16);
  CHECK(plan_of(a).config_hash == pa.config_hash);
  CHECK(plan_of(b).config_hash != pa.config_hash);  // one byte more

  const PlanInfo info = plan_info(pa);
  CHECK(info.config == pa.config_file);
  CHECK(info.config_hash == pa.config_hash);
  CHECK(info.flags == pa.flags);
  CHECK(info.total == pa.total);
  CHECK(info.shard == 1);
  CHECK(info.shards == 3);
  std::vector<int> items;
  for (const PlanItem& it : pa.items) items.push_back(it.index);
  CHECK(info.items == items);
}
