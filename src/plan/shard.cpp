#include "plan/shard.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "core/files.hpp"

namespace ffpa {
namespace {

template <class T, class F>
std::string list(const std::vector<T>& v, F show) {
  std::string s;
  for (const T& x : v) s += (s.empty() ? "" : ",") + show(x);
  return s;
}

std::string sizes(const std::vector<int64_t>& v) {
  return list(v, [](int64_t x) { return std::to_string(x); });
}

}  // namespace

std::vector<int> longest_first(const Plan& plan) {
  std::vector<int> order(plan.items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return plan.items[a].flops > plan.items[b].flops; });
  return order;
}

std::vector<int> shard_assignment(const Plan& plan, int count) {
  std::vector<int> shard(plan.items.size(), 0);
  std::vector<double> load(static_cast<size_t>(std::max(count, 1)), 0.0);
  for (int i : longest_first(plan)) {
    const auto least = std::min_element(load.begin(), load.end());  // first of equal loads
    shard[i] = static_cast<int>(least - load.begin());
    *least += plan.items[i].flops;
  }
  return shard;
}

void keep_shard(Plan& plan, int index, int count) {
  const std::vector<int> shard = shard_assignment(plan, count);
  std::vector<PlanItem> kept;
  for (size_t i = 0; i < plan.items.size(); ++i)
    if (shard[i] == index) kept.push_back(std::move(plan.items[i]));
  plan.items = std::move(kept);
}

std::string run_flags(const PlanRequest& o, const RunSettings& s) {
  const TimingOptions& t = s.timing;
  auto same = [](const std::string& x) { return x; };
  return fmt::format(
      "fwd={} bwd={} case={} B={} H={} Hkv={} N={} Nq={} Nkv={} D={} dtype={} tune={} variant={} "
      "baseline={} timing={} min-samples={} max-noise={} min-time={} timeout={} seed={} check={}",
      o.fwd, o.bwd, list(o.cases, same), sizes(o.B), sizes(o.H), sizes(o.Hkv), sizes(o.N),
      sizes(o.Nq), sizes(o.Nkv), sizes(o.D), list(o.dtypes, [](Dtype d) { return to_string(d); }),
      to_string(s.tune), list(s.variants, same), to_string(s.baseline), t.cold ? "cold" : "hot",
      t.min_samples, t.max_noise, t.min_time, t.timeout, o.seed, s.check);
}

std::string config_hash(const std::string& path) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : read_input_file(path, kMaxConfigBytes)) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

PlanInfo plan_info(const Plan& plan) {
  PlanInfo p;
  p.config = plan.config_file;
  p.config_hash = plan.config_hash;
  p.flags = plan.flags;
  p.total = plan.total;
  p.shard = plan.shard;
  p.shards = plan.shards;
  for (const PlanItem& it : plan.items) p.items.push_back(it.index);
  return p;
}

}  // namespace ffpa
