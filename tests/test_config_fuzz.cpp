// Mangled variants of configs/default.json must either load or fail with an InputError that points
// somewhere: never another exception, never a crash.
#include <catch2/catch.hpp>

#include "cases/cases.hpp"
#include "core/error.hpp"
#include "mangler.hpp"
#include "support.hpp"

using namespace ffpa;

namespace {

bool located(const InputError& e) {
  const std::string& p = e.path();
  return !p.empty() && (p[0] == '/' || p.rfind("line ", 0) == 0 || p.rfind("--", 0) == 0);
}

}  // namespace

TEST_CASE("mangled configs load or raise InputError, nothing else", "[cases][fuzz]") {
  const std::string original = test::read_file(test::source_dir() / "configs" / "default.json");
  REQUIRE(parse_case_file(original, "default.json").cases.size() == 8);

  test::Mangler mangle(
      20261202, {"\"zz\": 1, ", "\"name\": \"dup\", ", "\"Hkv\": 3, ", "\"causal\": \"top_left\", ",
                 "\"dropout\": 1, ", "\"bias_scale\": 0.5, ", "\"dtypes\": [], "});
  int loaded = 0, rejected = 0, json_errors = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::string text = mangle(original);
    try {
      const CaseFile cf = parse_case_file(text, "fuzz.json");
      ++loaded;
      // What loads must also resolve at another sweep point without surprises.
      SweepPoint p = cf.defaults;
      p.N = 1 + static_cast<int64_t>(i % 5000);
      p.D = 8 * (1 + i % 130);
      for (const CaseSpec& c : cf.cases) {
        try {
          const Problem pr = resolve_case(cf, c, p, c.dtypes.front(), i);
          CHECK(pr.shape.Hq % pr.shape.Hkv == 0);
          CHECK(pr.shape.Nq > 0);
          CHECK(pr.flops(Pass::fwd) >= 0);
        } catch (const InputError& e) {
          if (!located(e)) FAIL_CHECK("unlocated error: " << e.what());
        }
      }
    } catch (const InputError& e) {
      ++rejected;
      json_errors += e.path().rfind("line ", 0) == 0;
      CHECK(e.where() == "fuzz.json");
      if (!located(e)) FAIL_CHECK("unlocated error: " << e.what() << "\n" << text);
    } catch (const std::exception& e) {
      FAIL_CHECK("unexpected " << typeid(e).name() << ": " << e.what() << "\n" << text);
    }
  }
  INFO("loaded " << loaded << ", rejected " << rejected << " (" << json_errors << " invalid JSON)");
  // The mangler must exercise both the JSON parser and the validator, and leave some files valid.
  CHECK(loaded > 50);
  CHECK(rejected - json_errors > 500);
  CHECK(json_errors > 500);
}
