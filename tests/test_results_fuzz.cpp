// Mangled results files must either load or fail with an InputError that points somewhere; what
// loads must compare and render without another exception, and compare must never call a
// measurement without a valid time faster, slower or unchanged.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.hpp"
#include "mangler.hpp"
#include "report/compare.hpp"
#include "report/csv.hpp"
#include "report/markdown.hpp"
#include "report/results_json.hpp"
#include "support.hpp"

using namespace ffpa;

namespace {

// A committed H200 run with FFPA and both baselines on every row.
const char* kRun = "results/h200/2026-12-02c/fwd-mask-dropout/ffpa_NVIDIA_H200_results.json";

bool located(const InputError& e) {
  const std::string& p = e.path();
  return !p.empty() && (p[0] == '/' || p.rfind("line ", 0) == 0);
}

bool timed(Verdict v) {
  return v == Verdict::slower || v == Verdict::faster || v == Verdict::noise ||
         v == Verdict::unchanged;
}

}  // namespace

TEST_CASE("mangled results files load or raise InputError; what loads compares", "[json][fuzz]") {
  const std::string original = test::read_file(test::source_dir() / kRun);
  const Results base = parse_results(original, "base.json");
  REQUIRE(compare(base, base, 5).exit_code() == 0);

  test::Mangler mangle(20261203, {"\"zz\": 1, ", "\"median_ms\": 0.001, ", "\"samples\": -3, ",
                                  "\"pass\": true, ", "\"nonfinite\": 5, ", "\"status\": \"ok\", ",
                                  "\"stdev_ms\": \"inf\", ", "\"gpu\": \"A100\", "});
  int loaded = 0, rejected = 0, json_errors = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string text = mangle(original);
    try {
      const Results now = parse_results(text, "fuzz.json");
      ++loaded;
      for (const CompareReport& rep : {compare(base, now, 5), compare(now, base, 5)}) {
        for (const CompareEntry& e : rep.entries)
          if (timed(e.verdict)) {
            INFO(e.key << " " << e.impl << " " << to_string(e.verdict));
            CHECK((std::isfinite(e.base_ms) && e.base_ms > 0));
            CHECK((std::isfinite(e.new_ms) && e.new_ms > 0));
            CHECK((std::isfinite(e.allowed_ms) && e.allowed_ms > 0));
          }
        CHECK_FALSE(render_compare_markdown(rep).empty());
      }
      CHECK_FALSE(render_markdown(now, BaselineMode::all).empty());
      CHECK_FALSE(render_csv(now).empty());
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
  CHECK(loaded > 50);
  CHECK(rejected - json_errors > 300);
  CHECK(json_errors > 200);
}
