#include "report/merge.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"

namespace ffpa {
namespace {

constexpr size_t kListed = 20;  // longer lists end in "... and N more"

std::string listing(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < kListed; ++i) s += "\n  " + items[i];
  if (items.size() > kListed) s += fmt::format("\n  ... and {} more", items.size() - kListed);
  return s;
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& x : items) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The fields that must agree for shards to be one run; `what` names them in the message.
void check_same(const ResultsFile& first, const ResultsFile& f, bool allow_mixed) {
  const PlanInfo& a = *first.results.plan;
  const PlanInfo& b = *f.results.plan;
  if (a.total != b.total)
    throw InputError(f.file, "/plan/total",
                     fmt::format("a plan of {} items, {} has {}: not shards of one plan", b.total,
                                 first.file, a.total));
  if (allow_mixed) return;
  const struct {
    const char* path;
    std::string mine, theirs;
  } fields[] = {{"/tool_version", f.results.tool_version, first.results.tool_version},
                {"/env/git_commit", f.results.env.git_commit, first.results.env.git_commit},
                {"/env/gpu", f.results.env.gpu, first.results.env.gpu},
                {"/timing_mode", f.results.timing_mode, first.results.timing_mode},
                {"/plan/config_hash", b.config_hash, a.config_hash},
                {"/plan/flags", b.flags, a.flags}};
  for (const auto& x : fields)
    if (x.mine != x.theirs)
      throw InputError(f.file, x.path,
                       fmt::format("\"{}\" differs from \"{}\" in {} (--allow-mixed merges anyway)",
                                   x.mine, x.theirs, first.file));
}

}  // namespace

Results merge_results(std::vector<ResultsFile> inputs, bool allow_mixed) {
  if (inputs.empty()) throw InputError("command line", "IN.json", "no results files to merge");
  for (const ResultsFile& f : inputs)
    if (!f.results.plan)
      throw InputError(f.file, "/plan",
                       "missing: the file predates --shard and cannot be placed in a plan");
  // Shard order; copied out of the optionals first (GCC 12 warns about them inside a sort).
  std::vector<std::pair<int, size_t>> order;
  for (size_t i = 0; i < inputs.size(); ++i) order.push_back({inputs[i].results.plan->shard, i});
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ResultsFile> sorted;
  for (const auto& [shard, i] : order) sorted.push_back(std::move(inputs[i]));
  inputs = std::move(sorted);
  for (const ResultsFile& f : inputs) check_same(inputs.front(), f, allow_mixed);

  const int total = inputs.front().results.plan->total;
  std::map<int, std::string> owner;  // plan index -> the file (and row) holding it
  std::vector<const Row*> rows(static_cast<size_t>(total), nullptr);
  std::vector<std::string> duplicate, missing;
  for (const ResultsFile& f : inputs)
    for (size_t i = 0; i < f.results.rows.size(); ++i) {
      const Row& r = f.results.rows[i];
      const std::string where = fmt::format("{} /rows/{} ({})", f.file, i, r.key());
      if (r.plan_index < 0 || r.plan_index >= total)
        throw InputError(f.file, fmt::format("/rows/{}/plan_index", i),
                         fmt::format("{} is not an item of a plan of {}", r.plan_index, total));
      auto [it, fresh] = owner.emplace(r.plan_index, where);
      if (!fresh) {
        duplicate.push_back(
            fmt::format("plan item {}: {} and {}", r.plan_index, it->second, where));
        continue;
      }
      rows[r.plan_index] = &r;
    }

  // Who was to hold each missing item: a shard file without that row, or a shard with no file.
  std::map<int, std::string> expected;
  std::set<int> shards_seen;
  for (const ResultsFile& f : inputs) {
    const PlanInfo& p = *f.results.plan;
    shards_seen.insert(p.shard);
    for (int i : p.items)
      expected.emplace(i, fmt::format("{} (shard {}/{}{})", f.file, p.shard, p.shards,
                                      f.results.complete ? "" : ", interrupted"));
  }
  for (int i = 0; i < total; ++i) {
    if (rows[i]) continue;
    auto e = expected.find(i);
    missing.push_back(fmt::format(
        "plan item {}: {}", i,
        e != expected.end() ? "not in " + e->second : std::string("no input holds its shard")));
  }
  const int shards = inputs.front().results.plan->shards;
  std::vector<std::string> absent;
  for (int s = 0; s < shards; ++s)
    if (!shards_seen.count(s)) absent.push_back(fmt::format("{}/{}", s, shards));
  if (!duplicate.empty() || !missing.empty()) {
    std::string why;
    if (!duplicate.empty())
      why += fmt::format("{} duplicate row(s):{}", duplicate.size(), listing(duplicate));
    if (!missing.empty())
      why += fmt::format("{}{} missing row(s){}:{}", why.empty() ? "" : "\n", missing.size(),
                         absent.empty() ? "" : " (no file for shard " + join(absent) + ")",
                         listing(missing));
    throw InputError("merge", "/rows", why);
  }

  const ResultsFile& first = inputs.front();
  Results out;
  out.schema_version = first.results.schema_version;
  out.tool_version = first.results.tool_version;
  out.env = first.results.env;
  out.timing_mode = first.results.timing_mode;
  PlanInfo plan = *first.results.plan;
  plan.shard = 0;
  plan.shards = 1;
  plan.items.resize(static_cast<size_t>(total));
  std::iota(plan.items.begin(), plan.items.end(), 0);
  out.plan = plan;
  out.complete = std::all_of(inputs.begin(), inputs.end(),
                             [](const ResultsFile& f) { return f.results.complete; });
  for (const Row* r : rows) out.rows.push_back(*r);
  return out;
}

}  // namespace ffpa
