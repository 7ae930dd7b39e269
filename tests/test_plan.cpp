#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <limits>

#include "baselines/unfused.hpp"
#include "cases/cases.hpp"
#include "core/error.hpp"
#include "plan/plan.hpp"
#include "support.hpp"
#include "tuning/cache.hpp"

using namespace ffpa;
using test::thrown;

namespace {

// Pairs by walking the mask, the definition the closed form must match.
double brute_pairs(int64_t nq, int64_t nkv, Causal causal) {
  const int64_t shift = causal == Causal::bottom_right ? nkv - nq : 0;
  double n = 0;
  for (int64_t r = 0; r < nq; ++r)
    for (int64_t k = 0; k < nkv; ++k) n += causal == Causal::none || k <= r + shift;
  return n;
}

Problem problem(int64_t nq, int64_t nkv, Causal causal) {
  Problem p;
  p.shape = {2, 6, 3, nq, nkv, 40};
  p.causal = causal;
  return p;
}

const char* kTwoCases = R"({
  "defaults": {"B": 1, "H": 8, "N": 256, "D": 64, "dtypes": ["fp16", "bf16"]},
  "cases": [
    {"name": "plain"},
    {"name": "biased", "Hkv": "H/2", "Nq": "N-1", "bias": "query_key", "bias_dtype": "input",
     "causal": "bottom_right"}
  ]
})";

struct Fixture {
  test::TempDir dir;
  PlanRequest opts;
  Fixture() {
    test::write_file(dir.path() / "two.json", kTwoCases);
    opts.config = (dir.path() / "two.json").string();
  }
};

}  // namespace

TEST_CASE("pairs and FLOPs match a brute-force count", "[plan][flops]") {
  const int64_t lengths[][2] = {{1, 1},   {1, 9},   {9, 1},    {7, 7},    {5, 13},   {13, 5},
                                {64, 64}, {1, 200}, {100, 37}, {37, 100}, {128, 129}};
  for (const auto& [nq, nkv] : lengths)
    for (Causal c : {Causal::none, Causal::bottom_right, Causal::top_left}) {
      if (c == Causal::bottom_right && nq > nkv) continue;  // rejected by the loader
      INFO("Nq=" << nq << " Nkv=" << nkv << " causal=" << to_string(c));
      const Problem p = problem(nq, nkv, c);
      const double pairs = brute_pairs(nq, nkv, c);
      CHECK(p.pairs() == pairs);
      CHECK(p.flops(Pass::fwd) == 4.0 * 2 * 6 * 40 * pairs);
      CHECK(p.flops(Pass::bwd) == 2.5 * p.flops(Pass::fwd));
    }
  // The two alignments differ as soon as Nq != Nkv.
  CHECK(problem(5, 13, Causal::bottom_right).pairs() == 5 * 8 + 15);
  CHECK(problem(5, 13, Causal::top_left).pairs() == 15);
  CHECK(problem(13, 5, Causal::top_left).pairs() == 15 + 8 * 5);
  CHECK(problem(1, 8192, Causal::bottom_right).pairs() == 8192);
  CHECK(problem(8192, 8192, Causal::bottom_right).pairs() == 8192.0 * 8193 / 2);
}

TEST_CASE("the default plan: eight cases, two dtypes, two passes", "[plan]") {
  PlanRequest o;
  o.config = (test::source_dir() / "configs" / "default.json").string();
  const Plan plan = make_plan(o);
  CHECK(plan.config_file == o.config);
  REQUIRE(plan.items.size() == 8 * 2 * 2);
  const PlanItem& self = plan.items[0];
  CHECK(self.problem.case_name == "self-attn");
  CHECK(self.problem.dtype == Dtype::fp16);
  CHECK(self.pass == Pass::fwd);
  CHECK(self.flops == 4.0 * 32 * 512 * 8192.0 * 8192);
  CHECK(plan.items[1].pass == Pass::bwd);
  CHECK(plan.items[1].flops == 2.5 * self.flops);
  CHECK(plan.items[2].problem.dtype == Dtype::bf16);
  CHECK(plan.items[4].problem.case_name == "cross-attn");
  const PlanItem& causal = plan.items[16];
  CHECK(causal.problem.case_name == "causal");
  CHECK(causal.flops == 4.0 * 32 * 512 * (8192.0 * 8193 / 2));
  for (const PlanItem& item : plan.items) {
    INFO(item.problem.case_name);
    CHECK(item.tensor_bytes == item.problem.io_bytes(item.pass));
  }
}

TEST_CASE("the plan keeps the run settings, the tuning cache path resolved", "[plan]") {
  PlanRequest o;
  o.config = (test::source_dir() / "configs" / "default.json").string();
  RunSettings s;
  s.tune = TuneMode::fast;
  s.baseline = BaselineMode::unfused;
  s.timing.min_samples = 42;
  const Plan plan = make_plan(o, s);
  CHECK(plan.settings.tune == TuneMode::fast);
  CHECK(plan.settings.baseline == BaselineMode::unfused);
  CHECK(plan.settings.timing.min_samples == 42);
  CHECK(plan.settings.tuning_cache == default_tuning_cache_path());
  s.tuning_cache = "/tmp/given.json";
  CHECK(make_plan(o, s).settings.tuning_cache == "/tmp/given.json");
}

TEST_CASE("plan order: sweep point, then case, then dtype, then fwd before bwd", "[plan]") {
  Fixture f;
  f.opts.N = {256, 512};
  f.opts.D = {64, 128};
  const Plan plan = make_plan(f.opts);
  REQUIRE(plan.items.size() == 4 * 2 * 2 * 2);
  const int64_t points[4][2] = {{256, 64}, {256, 128}, {512, 64}, {512, 128}};  // N outer, D inner
  size_t i = 0;
  for (const auto& [n, d] : points)
    for (const char* name : {"plain", "biased"})
      for (Dtype dtype : {Dtype::fp16, Dtype::bf16})
        for (Pass pass : {Pass::fwd, Pass::bwd}) {
          INFO("item " << i);
          const PlanItem& item = plan.items[i++];
          CHECK(item.problem.case_name == name);
          CHECK(item.problem.dtype == dtype);
          CHECK(item.pass == pass);
          CHECK(item.problem.shape.D == d);
          CHECK(item.problem.shape.Nkv == n);
          CHECK(item.problem.shape.Nq == (std::string(name) == "plain" ? n : n - 1));
        }
}

TEST_CASE("plan selection: passes, cases, dtypes", "[plan]") {
  Fixture f;
  f.opts.bwd = false;
  Plan plan = make_plan(f.opts);
  REQUIRE(plan.items.size() == 4);
  for (const PlanItem& item : plan.items) CHECK(item.pass == Pass::fwd);

  f.opts.fwd = false;
  f.opts.bwd = true;
  f.opts.dtypes = {Dtype::bf16};
  f.opts.cases = {"biased", "plain"};  // command-line order wins
  plan = make_plan(f.opts);
  REQUIRE(plan.items.size() == 2);
  CHECK(plan.items[0].problem.case_name == "biased");
  CHECK(plan.items[1].problem.case_name == "plain");
  for (const PlanItem& item : plan.items) {
    CHECK(item.pass == Pass::bwd);
    CHECK(item.problem.dtype == Dtype::bf16);
  }

  f.opts.cases = {"plain", "nope"};
  const InputError e = thrown([&] { make_plan(f.opts); });
  CHECK(e.where() == "command line");
  CHECK(e.path() == "--case");
  CHECK_THAT(e.reason(), Catch::Contains("unknown case \"nope\""));
  CHECK_THAT(e.reason(), Catch::Contains(": plain, biased)"));
}

TEST_CASE("plan sweeps: B, H and forced Hkv, Nq, Nkv", "[plan]") {
  Fixture f;
  f.opts.dtypes = {Dtype::fp16};
  f.opts.fwd = false;
  f.opts.B = {1, 3};
  f.opts.H = {8, 16};
  f.opts.Hkv = {2};
  f.opts.Nq = {1, 64};
  f.opts.Nkv = {300};
  const Plan plan = make_plan(f.opts);
  REQUIRE(plan.items.size() == 2 * 2 * 2 * 2);
  size_t i = 0;
  for (int64_t b : {1, 3})
    for (int64_t h : {8, 16})
      for (int64_t nq : {1, 64})
        for (int c = 0; c < 2; ++c) {
          const Shape& s = plan.items[i++].problem.shape;
          CHECK(s == Shape{b, h, 2, nq, 300, 64});
        }

  f.opts.Hkv = {3};
  const InputError e = thrown([&] { make_plan(f.opts); });
  CHECK(e.path() == "--Hkv");
  CHECK_THAT(e.reason(), Catch::Contains("Hkv=3 does not divide Hq=8"));

  f.opts.Hkv.clear();
  f.opts.Nq = {400};
  const InputError causal = thrown([&] { make_plan(f.opts); });
  CHECK(causal.path() == "--Nq");
  CHECK_THAT(causal.reason(), Catch::Contains("case \"biased\""));
}

TEST_CASE("plan: sweep values the cases cannot take are blamed on their flags", "[plan]") {
  Fixture f;
  f.opts.D = {64, 100};
  const InputError e = thrown([&] { make_plan(f.opts); });
  CHECK(e.where() == "command line");
  CHECK(e.path() == "--D");
  CHECK_THAT(e.reason(), Catch::Contains("D=100"));
  CHECK_THAT(e.reason(), Catch::Contains(f.opts.config + " /cases/0/D"));

  f.opts.D.clear();
  f.opts.H = {6};  // "biased" needs H/2 to divide... it does; and 6 heads are fine
  CHECK(make_plan(f.opts).items.size() == 8);
  f.opts.H = {7};
  CHECK(thrown([&] { make_plan(f.opts); }).path() == "--H");

  // An error the file has at its own defaults stays the file's.
  test::write_file(f.dir.path() / "bad.json",
                   R"({"defaults": {"B": 1, "H": 8, "N": 256, "D": 100, "dtypes": ["bf16"]},
                       "cases": [{"name": "a"}]})");
  f.opts.config = (f.dir.path() / "bad.json").string();
  f.opts.H = {16};
  CHECK(thrown([&] { make_plan(f.opts); }).path() == "/cases/0/D");

  f.opts.H.clear();
  f.opts.config = (f.dir.path() / "missing.json").string();
  CHECK(thrown([&] { make_plan(f.opts); }).path() == "--config");
}

TEST_CASE("plan: a sweep beyond the limit is refused before it is built", "[plan]") {
  Fixture f;
  for (int64_t i = 1; i <= 200; ++i) {
    f.opts.B.push_back(i);
    f.opts.H.push_back(2 * i);
  }
  for (int64_t n = 8; n <= 1600; n += 8) f.opts.N.push_back(n);
  const InputError e = thrown([&] { make_plan(f.opts); });
  CHECK(e.where() == "command line");
  CHECK(e.path() == "--B/--H/--N");
  CHECK_THAT(e.reason(), Catch::Contains("more than 100000 measurements"));
}

TEST_CASE("plan: a relative config outside configs/ is not looked up elsewhere", "[plan]") {
  Fixture f;
  f.opts.config = "no/such/dir/two.json";
  const InputError e = thrown([&] { make_plan(f.opts); });
  CHECK(e.path() == "--config");
  CHECK_THAT(e.reason(), Catch::Contains("no/such/dir/two.json: cannot open"));
}

TEST_CASE("unfused memory does not overflow at the largest lengths", "[plan]") {
  Problem p;
  p.shape = {1, 32, 32, 2147483647, 2147483647, 512};
  p.dtype = Dtype::bf16;
  CHECK(unfused_extra_bytes(p, Pass::fwd) == std::numeric_limits<int64_t>::max());
  p.shape = {1, 32, 32, 8192, 8192, 512};
  CHECK(unfused_extra_bytes(p, Pass::fwd) > int64_t{32} * 8192 * 8192 * 2);
}

TEST_CASE("tensor bytes", "[plan]") {
  Problem p;
  p.shape = {2, 8, 4, 100, 300, 64};
  p.dtype = Dtype::bf16;
  const int64_t q = 2 * 8 * 100 * 64 * 2, kv = 2 * 4 * 300 * 64 * 2, lse = 2 * 8 * 100 * 4;
  CHECK(tensor_bytes(p, Pass::fwd) == 2 * q + 2 * kv + lse);
  CHECK(tensor_bytes(p, Pass::bwd) == 4 * q + 4 * kv + lse);
  p.bias = BiasKind::query_key;
  const int64_t bias32 = 100 * 300 * 4;
  CHECK(tensor_bytes(p, Pass::fwd) == 2 * q + 2 * kv + lse + bias32);
  CHECK(tensor_bytes(p, Pass::bwd) == 4 * q + 4 * kv + lse + 2 * bias32);
  p.bias = BiasKind::full;
  p.bias_dtype = BiasDtype::input;
  CHECK(tensor_bytes(p, Pass::fwd) == 2 * q + 2 * kv + lse + 2 * 8 * 100 * 300 * 2);
  for (Pass pass : {Pass::fwd, Pass::bwd}) CHECK(tensor_bytes(p, pass) == p.io_bytes(pass));
}

TEST_CASE("plan seeds: shared across dtypes, passes and variants, distinct across cases",
          "[plan]") {
  Fixture f;
  Plan plan = make_plan(f.opts);
  REQUIRE(plan.items.size() == 8);
  for (size_t i = 0; i < 4; ++i) CHECK(plan.items[i].problem.seed == plan.items[0].problem.seed);
  for (size_t i = 4; i < 8; ++i) CHECK(plan.items[i].problem.seed == plan.items[4].problem.seed);
  CHECK(plan.items[0].problem.seed != plan.items[4].problem.seed);
  CHECK(plan.items[0].problem.seed == case_seed(0, "plain"));
  f.opts.seed = 1234;
  CHECK(make_plan(f.opts).items[0].problem.seed == case_seed(1234, "plain"));
  CHECK(case_seed(1234, "plain") != case_seed(0, "plain"));
}
