// Results JSON (report/results_json): round trip of every field, errors that name the bad field,
// what the loader refuses, and atomic writes.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <limits>

#include "core/error.hpp"
#include "core/files.hpp"
#include "report/markdown.hpp"
#include "report/results_json.hpp"
#include "report_support.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using namespace ffpa;

namespace {

void require_same(const TimingStats& a, const TimingStats& b) {
  REQUIRE(a.median_ms == b.median_ms);
  REQUIRE(a.mean_ms == b.mean_ms);
  REQUIRE(a.min_ms == b.min_ms);
  REQUIRE(a.max_ms == b.max_ms);
  REQUIRE(a.stdev_ms == b.stdev_ms);
  REQUIRE(a.samples == b.samples);
  REQUIRE(a.total_gpu_s == b.total_gpu_s);
  REQUIRE(a.timed_out == b.timed_out);
  REQUIRE(a.sm_clock_mhz == b.sm_clock_mhz);
  REQUIRE(a.throttled_samples == b.throttled_samples);
}

bool same_double(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

void require_same(const Measurement& a, const Measurement& b) {
  REQUIRE(a.impl == b.impl);
  REQUIRE(a.kind == b.kind);
  REQUIRE(a.status == b.status);
  REQUIRE(a.reason == b.reason);
  REQUIRE(a.config == b.config);
  REQUIRE(a.config_source == b.config_source);
  REQUIRE(a.trials.size() == b.trials.size());
  for (size_t i = 0; i < a.trials.size(); ++i) {
    REQUIRE(a.trials[i].config == b.trials[i].config);
    REQUIRE(a.trials[i].median_ms == b.trials[i].median_ms);
    REQUIRE(a.trials[i].reason == b.trials[i].reason);
    REQUIRE(a.trials[i].sm_clock_mhz == b.trials[i].sm_clock_mhz);
    REQUIRE(a.trials[i].final_ms == b.trials[i].final_ms);
  }
  require_same(a.timing, b.timing);
  REQUIRE(a.tflops == b.tflops);
  REQUIRE(a.peak_mem_bytes == b.peak_mem_bytes);
  REQUIRE(a.extra_mem_bytes == b.extra_mem_bytes);
  REQUIRE(a.includes == b.includes);
  REQUIRE(a.checked == b.checked);
  REQUIRE(a.checks.size() == b.checks.size());
  for (size_t i = 0; i < a.checks.size(); ++i) {
    const TensorCheck &x = a.checks[i], &y = b.checks[i];
    REQUIRE(x.tensor == y.tensor);
    REQUIRE(same_double(x.max_abs, y.max_abs));
    REQUIRE(same_double(x.rel_rms, y.rel_rms));
    REQUIRE(same_double(x.bound, y.bound));
    REQUIRE(x.nonfinite == y.nonfinite);
    REQUIRE(x.pass == y.pass);
    REQUIRE(x.note == y.note);
  }
}

void require_same(const Results& a, const Results& b) {
  REQUIRE(a.schema_version == b.schema_version);
  REQUIRE(a.tool_version == b.tool_version);
  REQUIRE(a.timing_mode == b.timing_mode);
  REQUIRE(a.complete == b.complete);
  const Environment &x = a.env, &y = b.env;
  REQUIRE(x.gpu == y.gpu);
  REQUIRE(x.arch == y.arch);
  REQUIRE(x.sm_count == y.sm_count);
  REQUIRE(x.sm_clock_mhz == y.sm_clock_mhz);
  REQUIRE(x.memory_clock_mhz == y.memory_clock_mhz);
  REQUIRE(x.l2_bytes == y.l2_bytes);
  REQUIRE(x.memory_bytes == y.memory_bytes);
  REQUIRE(x.driver == y.driver);
  REQUIRE(x.cuda_runtime == y.cuda_runtime);
  REQUIRE(x.cudnn == y.cudnn);
  REQUIRE(x.git_commit == y.git_commit);
  REQUIRE(x.build_flags == y.build_flags);
  REQUIRE(x.command_line == y.command_line);
  REQUIRE(x.started_at == y.started_at);
  REQUIRE(x.host == y.host);
  REQUIRE(a.plan == b.plan);
  REQUIRE(a.rows.size() == b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    const Row &r = a.rows[i], &s = b.rows[i];
    REQUIRE(r.plan_index == s.plan_index);
    REQUIRE(r.device == s.device);
    REQUIRE(r.case_name == s.case_name);
    REQUIRE(r.pass == s.pass);
    REQUIRE(r.dtype == s.dtype);
    REQUIRE(r.shape == s.shape);
    REQUIRE(r.causal == s.causal);
    REQUIRE(r.bias == s.bias);
    REQUIRE(r.bias_dtype == s.bias_dtype);
    REQUIRE(r.dropout == s.dropout);
    REQUIRE(r.flops == s.flops);
    REQUIRE(r.ffpa.has_value() == s.ffpa.has_value());
    if (r.ffpa) require_same(*r.ffpa, *s.ffpa);
    REQUIRE(r.ffpa_others.size() == s.ffpa_others.size());
    for (size_t k = 0; k < r.ffpa_others.size(); ++k)
      require_same(r.ffpa_others[k], s.ffpa_others[k]);
    REQUIRE(r.baselines.size() == s.baselines.size());
    for (size_t k = 0; k < r.baselines.size(); ++k) require_same(r.baselines[k], s.baselines[k]);
  }
}

// Every field away from its default, doubles that print badly, non-finite error figures.
Results odd_results() {
  Results res = test::sample_results();
  res.complete = false;
  res.timing_mode = "hot";
  res.plan.reset();  // a file written before the plan record: null
  Row& r = res.rows[0];
  r.plan_index = -1;  // and a row that does not know its plan item or device
  r.device = {};
  r.causal = Causal::top_left;
  r.bias = BiasKind::full;
  r.bias_dtype = BiasDtype::input;
  r.dropout = 0.1 + 0.2;
  r.flops = 1.0 / 3.0 * 1e15;
  Measurement& m = *r.ffpa;
  m.timing.median_ms = 1.0 / 3.0;
  m.timing.mean_ms = 5e-324;  // smallest denormal
  m.timing.min_ms = 0.1;
  m.timing.max_ms = std::numeric_limits<double>::max();
  m.timing.stdev_ms = std::nextafter(1.0, 2.0);
  m.timing.timed_out = true;
  m.timing.throttled_samples = 7;
  m.tflops = 385.123456789012345;
  m.extra_mem_bytes = int64_t(1) << 40;
  m.checks[0].max_abs = std::numeric_limits<double>::quiet_NaN();
  m.checks[0].bound = std::numeric_limits<double>::infinity();
  m.checks[0].rel_rms = -std::numeric_limits<double>::infinity();
  m.checks[0].nonfinite = 12345678901;
  m.checks[0].pass = false;
  m.reason = "tab\there, quote \" and ünïcode";
  Measurement other = m;  // a second variant of the pass, kept beside the chosen one
  other.impl = "ffpa-fwd-sm80";
  other.timing.median_ms = 0.5;
  r.ffpa_others.push_back(other);
  return res;
}

}  // namespace

TEST_CASE("results JSON round trip keeps every field exactly", "[json]") {
  for (const Results& res : {test::sample_results(), odd_results()}) {
    const std::string text = to_json(res).dump(2);
    const Results back = results_from_json(nlohmann::json::parse(text), "mem.json");
    require_same(res, back);
    REQUIRE(to_json(back).dump(2) == text);
  }
}

namespace {

// `j` (a file of the current schema) as the previous schema wrote it: the bias was "mask".
nlohmann::json as_mask_schema(nlohmann::json j) {
  j["schema_version"] = kResultsSchemaVersionMaskKeys;
  for (auto& row : j["rows"]) {
    row["mask"] = row["bias"];
    row["mask_dtype"] = row["bias_dtype"];
    row.erase("bias");
    row.erase("bias_dtype");
  }
  return j;
}

}  // namespace

TEST_CASE("results JSON of the current schema says bias and round-trips", "[json]") {
  REQUIRE(kResultsSchemaVersion == 2);
  const Results res = odd_results();  // a full bias in the input dtype
  const nlohmann::json j = to_json(res);
  CHECK(j["schema_version"] == kResultsSchemaVersion);
  CHECK(j["rows"][0]["bias"] == "full");
  CHECK(j["rows"][0]["bias_dtype"] == "input");
  CHECK_FALSE(j["rows"][0].contains("mask"));
  CHECK_FALSE(j["rows"][0].contains("mask_dtype"));
  test::TempDir dir;
  const fs::path file = dir.path() / "new.json";
  test::write_file(file, j.dump(1));
  const Results back = load_results(file);
  require_same(res, back);
  REQUIRE(to_json(back) == j);
}

TEST_CASE("results JSON of the previous schema (mask keys) is read and upgraded", "[json]") {
  const auto error_of = [](const nlohmann::json& j) {
    const InputError e = test::thrown([&] { results_from_json(j, "run.json"); });
    return e.path() + ": " + e.reason();
  };
  for (const Results& res : {test::sample_results(), odd_results()}) {
    const nlohmann::json current = to_json(res);
    const nlohmann::json old = as_mask_schema(current);
    const Results back = results_from_json(old, "old.json");
    CHECK(back.schema_version == kResultsSchemaVersion);  // upgraded in memory
    require_same(res, back);
    REQUIRE(to_json(back) == current);  // and written back in the current schema
  }
  // Each version has its own spelling: the other one is an unknown key.
  nlohmann::json mixed = as_mask_schema(to_json(test::sample_results()));
  mixed["schema_version"] = kResultsSchemaVersion;
  CHECK(error_of(mixed) == "/rows/0/mask: unknown key");
  mixed = to_json(test::sample_results());
  mixed["schema_version"] = kResultsSchemaVersionMaskKeys;
  CHECK(error_of(mixed) == "/rows/0/bias: unknown key");

  // Every results file committed under results/ is of the previous version.
  const fs::path committed = test::source_dir() / "results" / "h200" / "2026-12-03" /
                             "default-tune" / "ffpa_NVIDIA_H200_results.json";
  const nlohmann::json raw = nlohmann::json::parse(test::read_file(committed));
  REQUIRE(raw["schema_version"] == kResultsSchemaVersionMaskKeys);
  const Results loaded = load_results(committed);
  REQUIRE(loaded.rows.size() == raw["rows"].size());
  bool some_bias = false;
  for (size_t i = 0; i < loaded.rows.size(); ++i) {
    CHECK(to_string(loaded.rows[i].bias) == raw["rows"][i]["mask"].get<std::string>());
    CHECK(to_string(loaded.rows[i].bias_dtype) == raw["rows"][i]["mask_dtype"].get<std::string>());
    some_bias = some_bias || loaded.rows[i].bias != BiasKind::none;
  }
  CHECK(some_bias);  // its attn-mask rows carry a key bias
  const Results again = results_from_json(to_json(loaded), "again.json");
  require_same(loaded, again);
}

TEST_CASE("results JSON names the bad field", "[json]") {
  const nlohmann::json good = to_json(test::sample_results());
  const auto error_of = [](const nlohmann::json& j) {
    try {
      results_from_json(j, "run.json");
    } catch (const InputError& e) {
      REQUIRE(e.where() == "run.json");
      return e.path() + ": " + e.reason();
    }
    FAIL("no InputError");
    return std::string();
  };
  REQUIRE_NOTHROW(results_from_json(good, "run.json"));

  nlohmann::json j = good;
  j["rows"][3]["ffpa"]["timing"].erase("median_ms");
  REQUIRE(error_of(j) == "/rows/3/ffpa/timing/median_ms: missing");

  j = good;
  j["rows"][0]["dtype"] = "fp8";
  REQUIRE(error_of(j) == "/rows/0/dtype: unknown value \"fp8\"");

  j = good;
  j["rows"][1]["baselines"][1]["timing"]["samples"] = 1.5;
  REQUIRE(error_of(j) == "/rows/1/baselines/1/timing/samples: expected an integer");

  j = good;
  j["rows"][0]["ffpa"]["config"][0] = "Br=64";
  REQUIRE(error_of(j) == "/rows/0/ffpa/config/0: expected [name, integer]");

  j = good;
  j["env"] = 3;
  REQUIRE(error_of(j) == "/env: expected an object");

  j = good;
  j["schema_version"] = kResultsSchemaVersion + 1;
  j.erase("rows");  // the version is reported, not the first incompatible field
  REQUIRE(error_of(j) == "/schema_version: unsupported schema_version " +
                             std::to_string(kResultsSchemaVersion + 1) + " (this build reads " +
                             std::to_string(kResultsSchemaVersion - 1) + " and " +
                             std::to_string(kResultsSchemaVersion) + ")");
  j = good;
  j["schema_version"] = kResultsSchemaVersion - 2;  // only the previous version is read
  j.erase("rows");
  REQUIRE(error_of(j) == "/schema_version: unsupported schema_version " +
                             std::to_string(kResultsSchemaVersion - 2) + " (this build reads " +
                             std::to_string(kResultsSchemaVersion - 1) + " and " +
                             std::to_string(kResultsSchemaVersion) + ")");

  j = good;
  j.erase("schema_version");
  REQUIRE(error_of(j) == "/schema_version: missing");

  REQUIRE(error_of(nlohmann::json::array()) == "/: expected an object");
}

TEST_CASE("load_results reports unreadable and malformed files", "[json]") {
  test::TempDir dir;
  const fs::path bad = dir.path() / "bad.json";
  test::write_file(bad, "{\"schema_version\": 1,");
  try {
    load_results(bad);
    FAIL("no InputError");
  } catch (const InputError& e) {
    REQUIRE(e.where() == bad.string());
    REQUIRE(e.path() == "line 1, column 22");
    REQUIRE(e.reason().rfind("invalid JSON", 0) == 0);
  }
  REQUIRE_THROWS_AS(load_results(dir.path() / "absent.json"), InputError);
  const InputError d = test::thrown([&] { load_results(dir.path()); });
  CHECK(d.reason() == "is a directory, not a file");
}

TEST_CASE("the results loader refuses what it cannot trust", "[json]") {
  const nlohmann::json good = to_json(test::sample_results());
  REQUIRE(good["rows"][0]["ffpa"]["status"] == "ok");
  REQUIRE(good["rows"][0]["ffpa"]["checks"][0]["pass"] == true);
  const auto error_of = [](const nlohmann::json& j) {
    const InputError e = test::thrown([&] { results_from_json(j, "run.json"); });
    return e.path() + ": " + e.reason();
  };
  const std::string timing = "/rows/0/ffpa/timing/";
  for (const nlohmann::json bad :
       {nlohmann::json(0), nlohmann::json(-5), nlohmann::json("nan"), nlohmann::json("inf")}) {
    INFO(bad.dump());
    nlohmann::json j = good;
    j["rows"][0]["ffpa"]["timing"]["median_ms"] = bad;
    CHECK(error_of(j) == timing + "median_ms: an ok measurement needs a positive, finite median");
  }
  nlohmann::json j = good;
  j["rows"][0]["ffpa"]["timing"]["stdev_ms"] = "inf";
  CHECK(error_of(j) == timing + "stdev_ms: an ok measurement needs a finite, non-negative value");
  j = good;
  j["rows"][0]["ffpa"]["timing"]["samples"] = -3;
  CHECK(error_of(j) == timing + "samples: an ok measurement needs at least one sample");
  j = good;
  j["rows"][0]["ffpa"]["checks"][0]["nonfinite"] = 5;
  CHECK(error_of(j) == "/rows/0/ffpa/checks/0/pass: true with 5 non-finite values");
  j = good;
  j["rows"][0]["ffpa"]["checks"][0]["max_abs"] = "nan";
  CHECK(error_of(j) == "/rows/0/ffpa/checks/0/pass: true with a non-finite error");
  j = good;
  j["rows"][0]["ffpa"]["peak_mem_bytes"] = 18446744073709551616.0;  // 2^64
  CHECK(error_of(j) == "/rows/0/ffpa/peak_mem_bytes: integer out of range");
  j = good;
  j["rows"][0]["ffpa"]["timing"]["median_msec"] = 1.0;
  CHECK(error_of(j) == timing + "median_msec: unknown key");
  j = good;
  j["env"]["gpus"] = "x";
  CHECK(error_of(j) == "/env/gpus: unknown key");
}

TEST_CASE("a duplicate key in a results file is refused where it is", "[json]") {
  test::TempDir dir;
  const fs::path file = dir.path() / "dup.json";
  std::string text = to_json(test::sample_results()).dump(1);
  const std::string median = "\"median_ms\":";
  const size_t at = text.find(median);
  REQUIRE(at != std::string::npos);
  text.insert(at, median + " 0.001, ");
  test::write_file(file, text);
  const InputError e = test::thrown([&] { load_results(file); });
  CHECK_THAT(e.path(), Catch::StartsWith("/rows/0/") && Catch::EndsWith("/timing/median_ms"));
  CHECK(e.reason() == "duplicate key");
}

TEST_CASE("write_results_atomic replaces the file and leaves no temporary", "[json]") {
  test::TempDir dir;
  const fs::path out = dir.path() / "sub" / "results.json";
  Results res = test::sample_results();
  res.complete = false;
  res.rows.resize(3);
  write_results_atomic(out, res);
  require_same(load_results(out), res);

  res = test::sample_results();
  write_results_atomic(out, res);
  require_same(load_results(out), res);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(out.parent_path())) {
    ++files;
    REQUIRE(e.path().filename() == "results.json");
  }
  REQUIRE(files == 1);
}

TEST_CASE("a failed atomic write throws RunError and cleans up", "[json]") {
  test::TempDir dir;
  // The target is a directory: the rename fails after the temporary was written.
  const fs::path target = dir.path() / "taken";
  fs::create_directories(target / "inner");
  REQUIRE_THROWS_AS(write_file_atomic(target, "data"), RunError);
  for (const auto& e : fs::directory_iterator(dir.path())) REQUIRE(e.path() == target);
  // The parent is a regular file: nothing can be created.
  test::write_file(dir.path() / "file", "x");
  REQUIRE_THROWS_AS(write_file_atomic(dir.path() / "file" / "out.json", "data"), RunError);
}

TEST_CASE("a search's trials survive JSON and are summed up in the details", "[json][markdown]") {
  Results res = test::sample_results();
  Measurement& f = *res.rows[0].ffpa;
  f.config = {{"Bc", 64}, {"stages", 4}};
  f.config_source = "tuned";
  f.trials = {{{{"Bc", 64}, {"stages", 4}}, 0.50, "", 1980},
              {{{"Bc", 128}, {"stages", 4}}, 0, "ptxas spills 24 bytes"},
              {{{"Bc", 64}, {"stages", 2}}, 0.55, "", 1750}};
  const std::string text = to_json(res).dump(2);
  const Results back = results_from_json(nlohmann::json::parse(text), "mem.json");
  require_same(res, back);
  CHECK_THAT(
      render_markdown(back, BaselineMode::best),
      Catch::Contains("Bc=64,stages=4 (tuned) [3 tried: 2 timed, 1 refused; runner-up +10.0%]"));

  // With finals, their means decide the runner-up's margin, not the first pass.
  f.trials[0].final_ms = 0.54;
  f.trials[2].final_ms = 0.52;
  const Results finals = results_from_json(to_json(res), "finals.json");
  require_same(res, finals);
  CHECK_THAT(render_markdown(finals, BaselineMode::best),
             Catch::Contains("[3 tried: 2 timed, 1 refused; finals of 2; runner-up +3.8%]"));

  // Files written before the finals have trials without a clock or a final time.
  nlohmann::json before = to_json(res);
  for (auto& tr : before["rows"][0]["ffpa"]["trials"]) {
    tr.erase("sm_clock_mhz");
    tr.erase("final_ms");
  }
  const Results older = results_from_json(before, "older.json");
  CHECK(older.rows[0].ffpa->trials[0].median_ms == 0.50);
  CHECK(older.rows[0].ffpa->trials[0].final_ms == 0);
  CHECK(older.rows[0].ffpa->trials[2].sm_clock_mhz == 0);

  // Files written before searches were recorded have no "trials".
  nlohmann::json old = to_json(test::sample_results());
  for (auto& row : old["rows"])
    if (row["ffpa"].is_object()) row["ffpa"].erase("trials");
  const Results loaded = results_from_json(old, "old.json");
  REQUIRE(loaded.rows[0].ffpa);
  CHECK(loaded.rows[0].ffpa->trials.empty());
  nlohmann::json bad = to_json(res);
  bad["rows"][0]["ffpa"]["trials"][1]["median_ms"] = "slow";
  CHECK_THROWS_WITH(results_from_json(bad, "bad.json"),
                    Catch::Contains("/rows/0/ffpa/trials/1/median_ms"));
}
