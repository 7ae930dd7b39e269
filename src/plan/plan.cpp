#include "plan/plan.hpp"

#include <algorithm>

#include "cases/cases.hpp"
#include "core/error.hpp"
#include "core/paths.hpp"
#include "plan/shard.hpp"
#include "tuning/cache.hpp"

namespace ffpa {
namespace {

// Sweep values in the order they nest, outermost first; an empty list keeps the file's default
// (B, H, N, D) or the case's own field (Hkv, Nq, Nkv).
std::vector<SweepPoint> sweep_points(const PlanRequest& o, const SweepPoint& defaults) {
  std::vector<SweepPoint> points = {defaults};
  auto expand = [&points](const std::vector<int64_t>& values, auto set) {
    if (values.empty()) return;
    std::vector<SweepPoint> next;
    for (const SweepPoint& p : points)
      for (int64_t v : values) {
        SweepPoint q = p;
        set(q, v);
        next.push_back(q);
      }
    points = std::move(next);
  };
  expand(o.B, [](SweepPoint& p, int64_t v) { p.B = v; });
  expand(o.H, [](SweepPoint& p, int64_t v) { p.H = v; });
  expand(o.Hkv, [](SweepPoint& p, int64_t v) { p.Hkv = v; });
  expand(o.N, [](SweepPoint& p, int64_t v) { p.N = v; });
  expand(o.Nq, [](SweepPoint& p, int64_t v) { p.Nq = v; });
  expand(o.Nkv, [](SweepPoint& p, int64_t v) { p.Nkv = v; });
  expand(o.D, [](SweepPoint& p, int64_t v) { p.D = v; });
  return points;
}

std::vector<const CaseSpec*> select_cases(const PlanRequest& o, const CaseFile& cf) {
  std::vector<const CaseSpec*> out;
  if (o.cases.empty()) {
    for (const CaseSpec& c : cf.cases) out.push_back(&c);
    return out;
  }
  for (const std::string& name : o.cases) {
    const CaseSpec* c = cf.find(name);
    if (c == nullptr) {
      std::string valid;
      for (const auto& n : cf.names()) valid += (valid.empty() ? "" : ", ") + n;
      throw InputError("command line", "--case",
                       "unknown case \"" + name + "\" (cases in " + cf.file + ": " + valid + ")");
    }
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

// The sweep flags given, as "--B/--N", for messages about what they caused.
std::string sweep_flags(const PlanRequest& o) {
  std::string flags;
  for (const auto& [name, values] :
       {std::pair<const char*, const std::vector<int64_t>*>{"--B", &o.B},
        {"--H", &o.H},
        {"--Hkv", &o.Hkv},
        {"--N", &o.N},
        {"--Nq", &o.Nq},
        {"--Nkv", &o.Nkv},
        {"--D", &o.D}})
    if (!values->empty()) flags += (flags.empty() ? "" : "/") + std::string(name);
  return flags;
}

// Refuses a sweep too large to run before its points are built.
void check_sweep_size(const PlanRequest& o, size_t cases, size_t dtypes) {
  __int128 n = static_cast<__int128>(cases) * dtypes * (o.fwd + o.bwd);
  for (const auto* v : {&o.B, &o.H, &o.Hkv, &o.N, &o.Nq, &o.Nkv, &o.D})
    n *= std::max<size_t>(1, v->size());
  if (n > kMaxPlanItems)
    throw InputError("command line", sweep_flags(o),
                     "the sweep has more than " + std::to_string(kMaxPlanItems) +
                         " measurements; split it into several runs");
}

// A case that resolves with the file's own B, H, N, D but not at the swept point fails because of
// the sweep flags: the error names them, the file and field stay in the reason.
Problem resolve(const PlanRequest& o, const CaseFile& cf, const CaseSpec& c,
                const SweepPoint& point, Dtype dtype) {
  try {
    return resolve_case(cf, c, point, dtype, o.seed);
  } catch (const InputError& e) {
    if (e.where() != cf.file || (o.B.empty() && o.H.empty() && o.N.empty() && o.D.empty())) throw;
    SweepPoint own = cf.defaults;
    own.Hkv = point.Hkv;
    own.Nq = point.Nq;
    own.Nkv = point.Nkv;
    try {
      resolve_case(cf, c, own, dtype, o.seed);
    } catch (const InputError&) {
      throw e;
    }
    throw InputError("command line", sweep_flags(o),
                     e.reason() + " (" + cf.file + " " + e.path() + ")");
  }
}

}  // namespace

std::string item_name(const PlanItem& item) {
  const Problem& p = item.problem;
  return p.case_name + " " + to_string(item.pass) + " " + to_string(p.dtype) +
         " D=" + std::to_string(p.shape.D) + " N=" + std::to_string(p.shape.Nq) + "/" +
         std::to_string(p.shape.Nkv);
}

int64_t tensor_bytes(const Problem& p, Pass pass) {
  const Shape& s = p.shape;
  const int64_t e = dtype_bytes(p.dtype);
  const int64_t q = s.B * s.Hq * s.Nq * s.D * e;     // q, o, dO, dq
  const int64_t kv = s.B * s.Hkv * s.Nkv * s.D * e;  // k, v, dk, dv
  const int64_t lse = s.B * s.Hq * s.Nq * 4;
  const int64_t bias = p.bias_elems() * (p.bias_dtype == BiasDtype::fp32 ? 4 : e);  // bias, dbias
  const int64_t fwd = 2 * q + 2 * kv + lse + bias;
  return pass == Pass::fwd ? fwd : fwd + 2 * q + 2 * kv + bias;
}

Plan make_plan(const PlanRequest& o, RunSettings settings) {
  const std::string config = find_data_path(o.config);
  const CaseFile cf = load_case_file(config);
  const std::vector<const CaseSpec*> cases = select_cases(o, cf);
  size_t dtypes = o.dtypes.size();
  if (o.dtypes.empty())
    for (const CaseSpec* c : cases) dtypes = std::max(dtypes, c->dtypes.size());
  check_sweep_size(o, cases.size(), dtypes);
  std::vector<Pass> passes;
  if (o.fwd) passes.push_back(Pass::fwd);
  if (o.bwd) passes.push_back(Pass::bwd);

  Plan plan;
  plan.config_file = config;
  plan.config_hash = config_hash(config);
  plan.flags = run_flags(o, settings);
  if (settings.tuning_cache.empty()) settings.tuning_cache = default_tuning_cache_path();
  plan.settings = std::move(settings);
  for (const SweepPoint& point : sweep_points(o, cf.defaults))
    for (const CaseSpec* c : cases)
      for (Dtype dtype : o.dtypes.empty() ? c->dtypes : o.dtypes) {
        const Problem problem = resolve(o, cf, *c, point, dtype);
        for (Pass pass : passes) {
          PlanItem item;
          item.index = static_cast<int>(plan.items.size());
          item.problem = problem;
          item.pass = pass;
          item.flops = problem.flops(pass);
          item.tensor_bytes = tensor_bytes(problem, pass);
          plan.items.push_back(std::move(item));
        }
      }
  plan.total = static_cast<int>(plan.items.size());
  plan.shard = o.shard;
  plan.shards = o.shards;
  if (o.shards > 1) keep_shard(plan, o.shard, o.shards);
  return plan;
}

}  // namespace ffpa
