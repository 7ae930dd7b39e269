// Host-side runner logic: variant/baseline selection and the exemption of incomparable outputs.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "runner/runner.hpp"

using namespace ffpa;

TEST_CASE("variant selection rejects unknown names; baseline modes pick baselines", "[runner]") {
  const Registry reg = Registry::make();
  CHECK(selected_variants(reg, {}).size() == reg.variants.size());
  CHECK_THROWS_AS(selected_variants(reg, {"no-such-variant"}), InputError);
  CHECK(selected_baselines(reg, BaselineMode::none).empty());
  CHECK(selected_baselines(reg, BaselineMode::all).size() == reg.baselines.size());
  const auto cudnn = selected_baselines(reg, BaselineMode::cudnn);
  REQUIRE(cudnn.size() == 1);
  CHECK(cudnn[0]->name() == "cudnn");
  const auto unfused = selected_baselines(reg, BaselineMode::unfused);
  REQUIRE(unfused.size() == 1);
  CHECK(unfused[0]->name() == "unfused");
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
