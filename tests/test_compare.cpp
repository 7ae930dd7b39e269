// compare(): the timing rule (threshold and noise band), failures, missing and new rows, and the
// exit code that CI relies on.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "core/files.hpp"
#include "report/compare.hpp"
#include "report/results_json.hpp"
#include "support.hpp"

using namespace ffpa;

namespace {

Measurement meas(const std::string& impl, double ms, double stdev) {
  Measurement m;
  m.impl = impl;
  m.kind = impl.rfind("ffpa", 0) == 0 ? "ffpa" : "baseline";
  m.status = Status::ok;
  m.timing.median_ms = m.timing.mean_ms = m.timing.min_ms = m.timing.max_ms = ms;
  m.timing.stdev_ms = stdev;
  m.timing.samples = 20;
  m.checked = true;
  m.checks = {{"o", 1e-3, 1e-4, 4e-3, 0, true}};
  return m;
}

Row row(const std::string& name, double ffpa_ms, double cudnn_ms, double stdev = 0.01) {
  Row r;
  r.case_name = name;
  r.shape = {1, 32, 32, 8192, 8192, 512};
  r.ffpa = meas("ffpa-fwd-sm90", ffpa_ms, stdev);
  r.baselines = {meas("cudnn", cudnn_ms, stdev)};
  return r;
}

Results run(std::vector<Row> rows) {
  Results res;
  res.env.gpu = "NVIDIA H200";
  res.env.git_commit = "abc1234";
  res.timing_mode = "cold";
  res.complete = true;
  res.rows = std::move(rows);
  return res;
}

const CompareEntry& entry(const CompareReport& rep, const std::string& case_name,
                          const std::string& kind) {
  for (const auto& e : rep.entries)
    if (e.key.rfind(case_name + "/", 0) == 0 && e.kind == kind) return e;
  FAIL("no entry for " << case_name << " " << kind);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("identical runs compare clean", "[compare]") {
  const Results base = run({row("self-attn", 10, 30), row("causal", 6, 16)});
  const CompareReport rep = compare(base, base, 5);
  REQUIRE(rep.entries.size() == 4);
  for (const auto& e : rep.entries) CHECK(e.verdict == Verdict::unchanged);
  CHECK(rep.errors() == 0);
  CHECK(rep.exit_code() == 0);
  CHECK(rep.warnings.empty());
  CHECK(render_compare_markdown(rep).find("**Result: clean** (0 errors): 4 unchanged.") !=
        std::string::npos);
}

TEST_CASE("identical files compare clean", "[compare]") {
  test::TempDir dir;
  Results res = run({row("self-attn", 11.42, 47.81, 0.0457), row("gqa", 10.92, 47.1, 0.04)});
  res.rows[1].shape.Hkv = 8;
  write_results_atomic(dir.path() / "a.json", res);
  write_results_atomic(dir.path() / "b.json", res);
  const CompareReport rep =
      compare(load_results(dir.path() / "a.json"), load_results(dir.path() / "b.json"), 5);
  CHECK(rep.exit_code() == 0);
  CHECK(rep.count(Verdict::unchanged) == 4);
}

// Results kept compressed (a repository's results/): read as the plain file; a corrupt or
// truncated stream is an input error naming the file.
TEST_CASE("gzip-compressed results files compare as the plain ones", "[compare]") {
  test::TempDir dir;
  const Results res = run({row("self-attn", 11.42, 47.81, 0.0457), row("causal", 6, 16)});
  write_results_atomic(dir.path() / "a.json", res);
  const std::string gz = (dir.path() / "a.json.gz").string();
  gzFile f = gzopen(gz.c_str(), "wb");
  REQUIRE(f != nullptr);
  const std::string text = read_input_file(dir.path() / "a.json");
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) ==
          static_cast<int>(text.size()));
  REQUIRE(gzclose(f) == Z_OK);
  const CompareReport rep = compare(load_results(dir.path() / "a.json"), load_results(gz), 5);
  CHECK(rep.exit_code() == 0);
  CHECK(rep.count(Verdict::unchanged) == 4);

  CHECK(read_input_file(gz) == text);
  std::string raw;
  {
    std::ifstream in(gz, std::ios::binary);
    raw.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  REQUIRE(raw.size() < text.size());
  // The limit holds for the inflated bytes, not only for the file's.
  CHECK_THROWS_WITH(read_input_file(gz, static_cast<int64_t>(raw.size())),
                    Catch::Contains("inflates past"));
  std::ofstream(dir.path() / "cut.json.gz", std::ios::binary) << raw.substr(0, raw.size() / 2);
  CHECK_THROWS_WITH(load_results(dir.path() / "cut.json.gz"),
                    Catch::Contains("cut.json.gz") && Catch::Contains("not a valid gzip file"));
}

TEST_CASE("FFPA slower beyond threshold and noise is a regression", "[compare]") {
  const CompareReport rep =
      compare(run({row("self-attn", 10, 30)}), run({row("self-attn", 11, 30)}), 5);
  const CompareEntry& e = entry(rep, "self-attn", "ffpa");
  CHECK(e.verdict == Verdict::slower);
  CHECK(e.error);
  CHECK(e.change_pct() == Approx(10));
  CHECK(e.allowed_ms == Approx(0.5));  // 5% of 10 ms beats 2 x (0.01 + 0.01)
  CHECK(rep.exit_code() == kExitRegression);
  const std::string md = render_compare_markdown(rep);
  CHECK(md.find("**Result: REGRESSION** (1 error): 1 slower, 1 unchanged.") != std::string::npos);
  CHECK(md.find("| 10.00 | 11.00 | +10.0% | ±5.0% | **slower** |") != std::string::npos);
}

TEST_CASE("a change under the threshold is unchanged even when quiet", "[compare]") {
  const CompareReport rep =
      compare(run({row("self-attn", 10, 30, 0.001)}), run({row("self-attn", 10.4, 30, 0.001)}), 5);
  CHECK(entry(rep, "self-attn", "ffpa").verdict == Verdict::unchanged);
  CHECK(rep.exit_code() == 0);
  // The threshold is the caller's: at 2% the same change is a regression.
  CHECK(compare(run({row("self-attn", 10, 30, 0.001)}), run({row("self-attn", 10.4, 30, 0.001)}), 2)
            .exit_code() == kExitRegression);
}

TEST_CASE("faster is reported, not an error", "[compare]") {
  const CompareReport rep =
      compare(run({row("self-attn", 10, 30)}), run({row("self-attn", 8, 30)}), 5);
  CHECK(entry(rep, "self-attn", "ffpa").verdict == Verdict::faster);
  CHECK(rep.exit_code() == 0);
}

TEST_CASE("a change inside the noise of both runs is clean", "[compare]") {
  // +8% is over the 5% threshold, but 2 x (0.5 + 0.5) ms = 2 ms of noise covers it.
  const CompareReport rep =
      compare(run({row("self-attn", 10, 30, 0.5)}), run({row("self-attn", 10.8, 30, 0.5)}), 5);
  const CompareEntry& e = entry(rep, "self-attn", "ffpa");
  CHECK(e.verdict == Verdict::noise);
  CHECK_FALSE(e.error);
  CHECK(e.allowed_ms == Approx(2.0));
  CHECK(rep.exit_code() == 0);
  // The same change with quiet runs is a regression; noise_k scales the band.
  CHECK(compare(run({row("self-attn", 10, 30, 0.01)}), run({row("self-attn", 10.8, 30, 0.01)}), 5)
            .exit_code() == kExitRegression);
  CHECK(
      compare(run({row("self-attn", 10, 30, 0.5)}), run({row("self-attn", 10.8, 30, 0.5)}), 5, 0.5)
          .exit_code() == kExitRegression);
}

TEST_CASE("a slower baseline is informational", "[compare]") {
  const CompareReport rep =
      compare(run({row("self-attn", 10, 30)}), run({row("self-attn", 10, 40)}), 5);
  const CompareEntry& e = entry(rep, "self-attn", "baseline");
  CHECK(e.verdict == Verdict::slower);
  CHECK_FALSE(e.error);
  CHECK(rep.exit_code() == 0);
  CHECK(render_compare_markdown(rep).find("slower (baseline, informational)") != std::string::npos);
}

TEST_CASE("a missing row is an error", "[compare]") {
  const CompareReport rep = compare(run({row("self-attn", 10, 30), row("causal", 6, 16)}),
                                    run({row("self-attn", 10, 30)}), 5);
  CHECK(entry(rep, "causal", "ffpa").verdict == Verdict::missing);
  CHECK(entry(rep, "causal", "ffpa").error);
  CHECK(entry(rep, "causal", "baseline").error);  // the whole row is gone
  CHECK(rep.exit_code() == kExitRegression);
}

TEST_CASE("a row that never ran in BASE may disappear", "[compare]") {
  Row r = row("causal", 6, 16);
  r.ffpa->status = Status::skipped;
  r.baselines[0].status = Status::skipped;
  const CompareReport rep =
      compare(run({row("self-attn", 10, 30), r}), run({row("self-attn", 10, 30)}), 5);
  CHECK(entry(rep, "causal", "ffpa").verdict == Verdict::missing);
  CHECK(rep.exit_code() == 0);
}

TEST_CASE("FFPA skipped or gone in NEW is an error, a baseline is not", "[compare]") {
  Row now = row("self-attn", 10, 30);
  now.ffpa->status = Status::skipped;
  now.ffpa->reason = "no config fits";
  CompareReport rep = compare(run({row("self-attn", 10, 30)}), run({now}), 5);
  CHECK(entry(rep, "self-attn", "ffpa").verdict == Verdict::skipped);
  CHECK(entry(rep, "self-attn", "ffpa").detail == "n/a (no config fits)");
  CHECK(rep.exit_code() == kExitRegression);

  now = row("self-attn", 10, 30);
  now.ffpa.reset();
  CHECK(compare(run({row("self-attn", 10, 30)}), run({now}), 5).exit_code() == kExitRegression);

  now = row("self-attn", 10, 30);
  now.baselines[0].status = Status::skipped;
  rep = compare(run({row("self-attn", 10, 30)}), run({now}), 5);
  CHECK(entry(rep, "self-attn", "baseline").verdict == Verdict::skipped);
  CHECK(rep.exit_code() == 0);

  now.baselines.clear();  // e.g. --baseline none
  rep = compare(run({row("self-attn", 10, 30)}), run({now}), 5);
  CHECK(entry(rep, "self-attn", "baseline").verdict == Verdict::missing);
  CHECK(rep.exit_code() == 0);
}

TEST_CASE("failed correctness in NEW is an error", "[compare]") {
  Row now = row("self-attn", 9, 30);
  now.ffpa->checks[0].max_abs = 0.5;
  now.ffpa->checks[0].pass = false;
  CompareReport rep = compare(run({row("self-attn", 10, 30)}), run({now}), 5);
  const CompareEntry& e = entry(rep, "self-attn", "ffpa");
  CHECK(e.verdict == Verdict::failed);
  CHECK(e.error);
  CHECK(e.detail == "FAIL (max err 5.0e-01 > 4.0e-03 on o)");
  CHECK(rep.exit_code() == kExitRegression);

  // A run failure of a baseline counts too.
  now = row("self-attn", 10, 30);
  now.baselines[0].status = Status::failed;
  now.baselines[0].reason = "CUDNN_STATUS_EXECUTION_FAILED";
  rep = compare(run({row("self-attn", 10, 30)}), run({now}), 5);
  CHECK(entry(rep, "self-attn", "baseline").verdict == Verdict::failed);
  CHECK(rep.exit_code() == kExitRegression);
}

TEST_CASE("new rows are listed, not errors", "[compare]") {
  const CompareReport rep = compare(run({row("self-attn", 10, 30)}),
                                    run({row("self-attn", 10, 30), row("gqa", 11, 31)}), 5);
  CHECK(entry(rep, "gqa", "ffpa").verdict == Verdict::added);
  CHECK(entry(rep, "gqa", "baseline").verdict == Verdict::added);
  CHECK(rep.exit_code() == 0);
  CHECK(render_compare_markdown(rep).find("2 new") != std::string::npos);
}

TEST_CASE("a measurement that now runs is reported", "[compare]") {
  Row base = row("self-attn", 10, 30);
  base.ffpa->status = Status::skipped;
  const CompareReport rep = compare(run({base}), run({row("self-attn", 10, 30)}), 5);
  CHECK(entry(rep, "self-attn", "ffpa").verdict == Verdict::recovered);
  CHECK(rep.exit_code() == 0);
}

TEST_CASE("the FFPA slot matches across a change of winning variant", "[compare]") {
  Row now = row("self-attn", 10, 30);
  now.ffpa->impl = "ffpa-fwd-sm80";
  const CompareReport rep = compare(run({row("self-attn", 10, 30)}), run({now}), 5);
  const CompareEntry& e = entry(rep, "self-attn", "ffpa");
  CHECK(e.verdict == Verdict::unchanged);
  CHECK(e.impl == "ffpa-fwd-sm80");
  CHECK(e.detail == "ffpa-fwd-sm90 -> ffpa-fwd-sm80");
  CHECK(rep.exit_code() == 0);
}

TEST_CASE("rows match by key: shape and dtype tell rows apart", "[compare]") {
  Row bf = row("self-attn", 10, 30), fp = row("self-attn", 20, 30);
  fp.dtype = Dtype::fp16;
  const CompareReport rep = compare(run({bf, fp}), run({fp, bf}), 5);  // order does not matter
  CHECK(rep.count(Verdict::unchanged) == 4);
  CHECK(rep.exit_code() == 0);
}

TEST_CASE("environment differences and duplicates are warned about", "[compare]") {
  Results base = run({row("self-attn", 10, 30)});
  Results now = run({row("self-attn", 10, 30), row("self-attn", 12, 30)});
  now.env.gpu = "NVIDIA H100";
  now.timing_mode = "hot";
  now.complete = false;
  const CompareReport rep = compare(base, now, 5);
  REQUIRE(rep.warnings.size() == 4);
  CHECK(rep.warnings[0] == "different GPUs: NVIDIA H200 vs NVIDIA H100");
  CHECK(rep.warnings[1] == "different timing modes: cold vs hot");
  CHECK(rep.warnings[2] == "NEW is a partial run");
  CHECK(rep.warnings[3].find("appears more than once in NEW") != std::string::npos);
  CHECK(rep.count(Verdict::unchanged) == 2);  // the first of the duplicates is compared
  CHECK(render_compare_markdown(rep).find("Warning: different GPUs") != std::string::npos);
}

TEST_CASE("a very noisy NEW run cannot hide a large regression", "[compare]") {
  // 2 x (0.01 + 100) ms of noise would allow anything; the band stops at kMaxNoisePct.
  const CompareReport rep =
      compare(run({row("self-attn", 10, 30, 0.01)}), run({row("self-attn", 30, 30, 100)}), 5);
  const CompareEntry& e = entry(rep, "self-attn", "ffpa");
  CHECK(e.verdict == Verdict::slower);
  CHECK(e.allowed_ms == Approx(10 * kMaxNoisePct / 100));
  CHECK(rep.exit_code() == kExitRegression);
  REQUIRE_FALSE(rep.warnings.empty());
  CHECK(rep.warnings[0].find("capped at ±25%") != std::string::npos);
}

TEST_CASE("a NEW measurement without a valid time fails, never reads as faster", "[compare]") {
  for (double bad : {0.0, -5.0, std::nan("")}) {
    INFO(bad);
    Results now = run({row("self-attn", 10, 30)});
    now.rows[0].ffpa->timing.median_ms = bad;
    const CompareReport rep = compare(run({row("self-attn", 10, 30)}), now, 5);
    const CompareEntry& e = entry(rep, "self-attn", "ffpa");
    CHECK(e.verdict == Verdict::failed);
    CHECK(e.detail == "no valid timing");
    CHECK(rep.exit_code() == kExitRegression);
  }
}

TEST_CASE("NEW rows that were not checked while BASE's were are warned about", "[compare]") {
  Results now = run({row("self-attn", 10, 30)});
  now.rows[0].ffpa->checked = false;
  now.rows[0].ffpa->checks.clear();
  const CompareReport rep = compare(run({row("self-attn", 10, 30)}), now, 5);
  REQUIRE(rep.warnings.size() == 1);
  CHECK(rep.warnings[0].find("NEW was not checked for correctness (BASE was)") !=
        std::string::npos);
}
