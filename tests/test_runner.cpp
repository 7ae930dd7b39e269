// Host-side runner logic: variant/baseline selection and the exemption of incomparable outputs.
#include <algorithm>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "ffpa_support.hpp"
#include "runner/runner.hpp"

using namespace ffpa;

TEST_CASE("variant selection rejects unknown names, baseline modes pick baselines", "[runner]") {
  const Registry reg = Registry::make();
  CHECK(selected_variants(reg, {}).size() == reg.variants.size());
  CHECK_THROWS_AS(selected_variants(reg, {"no-such-variant"}), InputError);
  CHECK(selected_baselines(reg, BaselineMode::none).empty());
  CHECK(selected_baselines(reg, BaselineMode::all).size() == reg.baselines.size());
  const auto cudnn = selected_baselines(reg, BaselineMode::cudnn);
  REQUIRE(cudnn.size() == 1);
  CHECK(cudnn[0]->id() == BaselineId::cudnn);
  CHECK(cudnn[0]->name() == "cudnn");
  const auto unfused = selected_baselines(reg, BaselineMode::unfused);
  REQUIRE(unfused.size() == 1);
  CHECK(unfused[0]->id() == BaselineId::unfused);
  CHECK(unfused[0]->name() == "unfused");
  for (BaselineMode m : {BaselineMode::best, BaselineMode::all, BaselineMode::none})
    CHECK_FALSE(single_baseline(m));
  // The name in results reads back as the baseline it came from.
  for (BaselineId id : {BaselineId::unfused, BaselineId::cudnn})
    CHECK(parse_baseline_id(to_string(id)) == id);
  CHECK_FALSE(parse_baseline_id("ffpa-fwd-sm80"));
}

TEST_CASE("incomparable outputs keep only the NaN/Inf scan, with the reason", "[runner]") {
  std::vector<TensorCheck> checks(3);
  checks[0] = {"o", 0.5, 0.1, 0.01, 0, false, ""};
  checks[1] = {"lse", 1e-6, 1e-7, 1e-5, 0, true, ""};
  checks[2] = {"dbias", 0, 0, 0, 12, false, ""};
  std::vector<Op::Unchecked> unchecked = {{"o", "other RNG", true}, {"dbias", "no engine", false}};
  exempt(unchecked, checks);
  CHECK(checks[0].pass);
  CHECK(checks[0].note == "not compared: other RNG");
  CHECK(checks[0].max_abs == 0);
  CHECK(checks[1].pass);
  CHECK(checks[1].note.empty());
  CHECK(checks[2].pass);
  CHECK(checks[2].note == "not computed: no engine");

  // A written but incomparable output still fails on NaN/Inf.
  std::vector<TensorCheck> nan_checks = {{"o", 0, 0, 0, 7, false, ""}};
  exempt({{"o", "other RNG", true}}, nan_checks);
  CHECK_FALSE(nan_checks[0].pass);
  CHECK(nan_checks[0].nonfinite == 7);
}

TEST_CASE("a tuning search always includes the variant's default configuration", "[runner]") {
  const Registry reg = Registry::make();
  const auto picked = selected_variants(reg, {"ffpa-bwd-sm90"});
  REQUIRE(picked.size() == 1);
  const Variant& v = *picked[0];
  const TuningCache cache;
  for (int D : {320, 512}) {
    INFO("D=" << D);
    const Problem p = test::compile_problem(D);
    const Knobs fallback = v.default_knobs(p);
    const Candidates c = candidates(v, p, Pass::bwd, TuneMode::fast, cache, test::h200());
    CHECK(c.source == "tuned");
    CHECK(std::count(c.knobs.begin(), c.knobs.end(), fallback) == 1);
    // D=320 has three 64-column panels per half: no point of the fast grid fits, the default does.
    const auto fits = std::count_if(c.knobs.begin(), c.knobs.end(), [&](const Knobs& k) {
      return v.supports(p, k, test::h200()).ok();
    });
    CHECK(fits >= 1);
    if (D == 320) CHECK(fits == 1);
  }
  CHECK(candidates(v, test::compile_problem(320), Pass::bwd, TuneMode::none, cache, test::h200())
            .knobs.size() == 1);
}
