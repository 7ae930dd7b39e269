// Report layer: results JSON round trip and errors, atomic writes, markdown and CSV against
// goldens (FFPA_UPDATE_GOLDEN=1 rewrites them; do it only on purpose and review the diff), PNG
// structure and pixels (decoded here by an independent inflater), SVG, progress line.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "report/chart.hpp"
#include "report/csv.hpp"
#include "report/format.hpp"
#include "report/markdown.hpp"
#include "report/png.hpp"
#include "report/progress.hpp"
#include "report/results_json.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using namespace ffpa;

namespace {

Row make_row(const std::string& name, Pass pass, Dtype dtype, Shape shape,
             Causal causal = Causal::none) {
  Problem p;
  p.case_name = name;
  p.shape = shape;
  p.dtype = dtype;
  p.causal = causal;
  Row r;
  r.case_name = name;
  r.pass = pass;
  r.dtype = dtype;
  r.shape = shape;
  r.causal = causal;
  r.flops = p.flops(pass);
  return r;
}

Measurement timed(const Row& r, const std::string& impl, double ms, double rel_noise = 0.004) {
  Measurement m;
  m.impl = impl;
  m.kind = impl.rfind("ffpa", 0) == 0 ? "ffpa" : "baseline";
  m.status = Status::ok;
  m.timing.median_ms = ms;
  m.timing.mean_ms = ms * 1.001;
  m.timing.min_ms = ms * 0.995;
  m.timing.max_ms = ms * 1.012;
  m.timing.stdev_ms = ms * rel_noise;
  m.timing.samples = 10 + int(500 / ms) % 90;
  m.timing.total_gpu_s = m.timing.samples * ms / 1000;
  m.timing.sm_clock_mhz = 1980;
  m.tflops = r.flops / (ms * 1e9);
  m.peak_mem_bytes = int64_t(3) << 30;
  m.checked = true;
  const char* fwd[] = {"o", "lse"};
  const char* bwd[] = {"dq", "dk", "dv"};
  int i = 0;
  for (const char* t : r.pass == Pass::fwd ? std::vector<const char*>(fwd, fwd + 2)
                                           : std::vector<const char*>(bwd, bwd + 3)) {
    TensorCheck c;
    c.tensor = t;
    c.max_abs = 1.25e-3 * (1 + i);
    c.rel_rms = 2.5e-4;
    c.bound = 7.8125e-3;
    c.pass = true;
    if (i == 1 && m.impl == "cudnn") c.note = "not compared: other RNG stream";
    m.checks.push_back(c);
    ++i;
  }
  if (m.kind == "ffpa") {
    m.config = {{"Br", 64}, {"Bc", 64}, {"stages", 2}};
    m.config_source = "default";
    m.includes = r.pass == Pass::fwd ? "fwd" : "preprocess+dkdv+dq";
  }
  return m;
}

Measurement skipped(const std::string& impl, const std::string& reason) {
  Measurement m;
  m.impl = impl;
  m.kind = impl.rfind("ffpa", 0) == 0 ? "ffpa" : "baseline";
  m.status = Status::skipped;
  m.reason = reason;
  return m;
}

// A run shaped like the default sweep on the H200 with every kind of row the tables must render.
Results sample_results() {
  Results res;
  res.tool_version = "0.1.0";
  res.timing_mode = "cold";
  res.complete = true;
  Environment& e = res.env;
  e.gpu = "NVIDIA H200";
  e.arch = "sm_90a";
  e.sm_count = 132;
  e.sm_clock_mhz = 1980;
  e.memory_clock_mhz = 3201;
  e.l2_bytes = 62914560;
  e.memory_bytes = 150754820096;
  e.driver = "570.124.06";
  e.cuda_runtime = "12.8";
  e.cudnn = "9.19.0";
  e.git_commit = "4241b12";
  e.build_flags = "Release archs=90a";
  e.command_line = "ffpa-bench run --baseline best";
  e.started_at = "2026-12-02T10:00:00Z";
  e.host = "gpu-node-1";

  const Shape self{1, 32, 32, 8192, 8192, 512};
  const Shape cross{1, 32, 32, 1024, 8192, 512};
  const Shape decode{1, 32, 32, 1, 8192, 512};
  const Shape gqa{1, 32, 8, 8192, 8192, 512};
  const Shape odd{1, 8, 8, 8191, 8191, 512};
  const Shape big{1, 32, 32, 8192, 8192, 1024};
  const std::string sm90 = "ffpa-fwd-sm90", bwd = "ffpa-bwd-sm90";

  auto add = [&](Row r, std::optional<Measurement> f, std::vector<Measurement> b) {
    r.ffpa = std::move(f);
    r.baselines = std::move(b);
    res.rows.push_back(std::move(r));
  };
  for (Dtype dt : {Dtype::fp16, Dtype::bf16}) {
    Row r = make_row("self-attn", Pass::fwd, dt, self);
    add(r, timed(r, sm90, dt == Dtype::fp16 ? 11.42 : 11.82),
        {timed(r, "cudnn", 47.81), timed(r, "unfused", 16.0)});
  }
  {
    Row r = make_row("cross-attn", Pass::fwd, Dtype::bf16, cross);
    add(r, timed(r, sm90, 2.22), {timed(r, "cudnn", 5.98), timed(r, "unfused", 2.05)});
  }
  {
    Row r = make_row("decode-attn", Pass::fwd, Dtype::fp16, decode);
    add(r, skipped(sm90, "needs Nq >= 64"),
        {timed(r, "cudnn", 0.0934), timed(r, "unfused", 0.212)});
  }
  {
    Row r = make_row("decode-attn", Pass::fwd, Dtype::bf16, decode);
    add(r, timed(r, "ffpa-fwd-sm80", 0.0613),
        {timed(r, "cudnn", 0.0934), timed(r, "unfused", 0.212)});
  }
  {
    Row r = make_row("gqa", Pass::fwd, Dtype::bf16, gqa);
    add(r, timed(r, sm90, 10.92), {timed(r, "cudnn", 47.1), timed(r, "unfused", 15.7)});
  }
  {
    Row r = make_row("causal", Pass::fwd, Dtype::bf16, self, Causal::bottom_right);
    add(r, timed(r, sm90, 6.34), {timed(r, "cudnn", 21.9), timed(r, "unfused", 16.1)});
  }
  {
    Row r = make_row("attn-mask", Pass::fwd, Dtype::fp16, self);
    r.mask = MaskKind::key;
    Measurement f = timed(r, sm90, 12.9);
    f.status = Status::failed;
    f.reason = "wrong results";
    f.checks[0].max_abs = 0.03125;
    f.checks[0].pass = false;
    add(r, f, {timed(r, "cudnn", 49.2), timed(r, "unfused", 16.6)});
  }
  {
    Row r = make_row("dropout", Pass::fwd, Dtype::bf16, self);
    r.dropout = 0.1;
    add(r, timed(r, sm90, 13.6),
        {skipped("cudnn", "dropout | bias combination refused"), timed(r, "unfused", 17.4)});
  }
  {
    Row r = make_row("non-aligned", Pass::fwd, Dtype::bf16, odd);
    add(r, timed(r, sm90, 3.06), {timed(r, "cudnn", 11.9), timed(r, "unfused", 4.31)});
  }
  {
    Row r = make_row("self-attn", Pass::fwd, Dtype::bf16, big);
    Measurement c = timed(r, "cudnn", 190.5);
    c.timing.timed_out = true;
    add(r, std::nullopt, {c, timed(r, "unfused", 40.2)});
  }
  {
    Row r = make_row("self-attn", Pass::bwd, Dtype::bf16, self);
    Measurement u = timed(r, "unfused", 29.1);
    u.extra_mem_bytes = int64_t(17) << 29;  // 8.5 GiB of S/P
    u.peak_mem_bytes = int64_t(23) << 29;
    add(r, timed(r, bwd, 48.38),
        {skipped("cudnn", "hidden_dim should be ≤ 256 and a multiple of 8"), u});
  }
  {
    Row r = make_row("causal", Pass::bwd, Dtype::bf16, self, Causal::bottom_right);
    add(r, timed(r, bwd, 25.38),
        {skipped("cudnn", "hidden_dim should be ≤ 256 and a multiple of 8"),
         timed(r, "unfused", 17.2)});
  }
  {
    Row r = make_row("gqa", Pass::bwd, Dtype::bf16, gqa);
    Measurement u = skipped("unfused", "");
    u.status = Status::failed;
    u.reason = "cuBLASLt: \"CUBLAS_STATUS_ALLOC_FAILED\", workspace 2.1 GiB";
    add(r, timed(r, bwd, 46.16), {skipped("cudnn", "hidden_dim should be ≤ 256"), u});
  }
  {
    Row r = make_row("cross-attn", Pass::bwd, Dtype::bf16, cross);
    Measurement f = timed(r, bwd, 7.11, 0.03);
    f.timing.timed_out = true;
    f.timing.throttled_samples = 3;
    f.config_source = "tuned";
    add(r, f, {skipped("cudnn", "hidden_dim should be ≤ 256"), timed(r, "unfused", 4.02)});
  }
  return res;
}

void check_golden(const std::string& name, const std::string& actual) {
  const fs::path golden = test::source_dir() / "tests" / "golden" / name;
  if (const char* u = std::getenv("FFPA_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    test::write_file(golden, actual);
    WARN("rewrote " << golden.string());
    return;
  }
  const std::string expected = test::read_file(golden);
  if (expected != actual) {
    // Point at the first differing line; the whole text is too long to be useful.
    std::istringstream a(actual), e(expected);
    std::string la, le;
    int line = 1;
    while (std::getline(a, la) && std::getline(e, le) && la == le) ++line;
    FAIL(name << " differs at line " << line << "\n  expected: " << le << "\n  actual:   " << la);
  }
}

// --- JSON ---------------------------------------------------------------------------------------

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
  REQUIRE(a.rows.size() == b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    const Row &r = a.rows[i], &s = b.rows[i];
    REQUIRE(r.case_name == s.case_name);
    REQUIRE(r.pass == s.pass);
    REQUIRE(r.dtype == s.dtype);
    REQUIRE(r.shape == s.shape);
    REQUIRE(r.causal == s.causal);
    REQUIRE(r.mask == s.mask);
    REQUIRE(r.mask_dtype == s.mask_dtype);
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
  Results res = sample_results();
  res.complete = false;
  res.timing_mode = "hot";
  Row& r = res.rows[0];
  r.causal = Causal::top_left;
  r.mask = MaskKind::full;
  r.mask_dtype = MaskDtype::input;
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
  for (const Results& res : {sample_results(), odd_results()}) {
    const std::string text = to_json(res).dump(2);
    const Results back = results_from_json(nlohmann::json::parse(text), "mem.json");
    require_same(res, back);
    REQUIRE(to_json(back).dump(2) == text);
  }
}

TEST_CASE("results JSON names the bad field", "[json]") {
  const nlohmann::json good = to_json(sample_results());
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
  const nlohmann::json good = to_json(sample_results());
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
  std::string text = to_json(sample_results()).dump(1);
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
  Results res = sample_results();
  res.complete = false;
  res.rows.resize(3);
  write_results_atomic(out, res);
  require_same(load_results(out), res);

  res = sample_results();
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

// --- Markdown and CSV ---------------------------------------------------------------------------

TEST_CASE("markdown matches the goldens in every baseline mode", "[markdown]") {
  const Results res = sample_results();
  check_golden("report_best.md", render_markdown(res, BaselineMode::best));
  check_golden("report_cudnn.md", render_markdown(res, BaselineMode::cudnn));
  check_golden("report_unfused.md", render_markdown(res, BaselineMode::unfused));
  check_golden("report_all.md", render_markdown(res, BaselineMode::all));
  check_golden("report_none.md", render_markdown(res, BaselineMode::none));
}

TEST_CASE("markdown keeps the seed's table format", "[markdown]") {
  const Results res = sample_results();
  const std::string md = render_markdown(res, BaselineMode::best);
  CHECK(md.rfind("## Benchmark\n\nEnv: NVIDIA H200, B=1, N=8192 (also 8191), H=32 (also 8), "
                 "D=512 (also 1024).\n",
                 0) == 0);
  CHECK(md.find("### Forward Pass (ffpa-fwd-sm90, ffpa-fwd-sm80)\n") != std::string::npos);
  CHECK(md.find("### Backward Pass (ffpa-bwd-sm90)\n") != std::string::npos);
  CHECK(md.find("| Case | dtype | Nq/Nkv | FFPA / best baseline | TFLOPS | speedup |") !=
        std::string::npos);
  // 11.42 ms against the faster baseline (unfused, 16.00 ms): 385T / 275T, 1.40x.
  CHECK(md.find("| self-attn | fp16 | 8192/8192 | 11.42 / 16.00 ms (unfused) | 385T / 275T | "
                "1.40x |") != std::string::npos);
  CHECK(md.find("| causal (bottom-right) | bf16 |") != std::string::npos);
  CHECK(md.find("| non-aligned [H=8] | bf16 | 8191/8191 |") != std::string::npos);
  CHECK(md.find("| gqa [Hkv=8] |") != std::string::npos);
  CHECK(md.find(
            "| self-attn [D=1024] | bf16 | 8192/8192 | – / 40.20 ms (unfused) | – / 219T | – |") !=
        std::string::npos);
  CHECK(md.find("| n/a (needs Nq >= 64) / 0.0934 ms (cuDNN) |") != std::string::npos);
  CHECK(md.find("FAIL (max err 3.1e-02 > 7.8e-03 on o) / 16.60 ms (unfused)") != std::string::npos);
  CHECK(md.find("dropout \\| bias") != std::string::npos);  // '|' escaped in a cell
  CHECK(md.find("Partial") == std::string::npos);

  Results partial = res;
  partial.complete = false;
  CHECK(render_markdown(partial, BaselineMode::best).find("**Partial results**") !=
        std::string::npos);
  CHECK(render_markdown(res, BaselineMode::cudnn).find("| FFPA / cuDNN |") != std::string::npos);
  const std::string all = render_markdown(res, BaselineMode::all);
  CHECK(all.find("| Case | dtype | Nq/Nkv | FFPA | cuDNN | vs cuDNN | unfused | vs unfused |") !=
        std::string::npos);
  CHECK(render_markdown(res, BaselineMode::none)
            .find("| Case | dtype | Nq/Nkv | FFPA | TFLOPS |\n") != std::string::npos);
}

TEST_CASE("markdown of a run with one shape and of an empty run", "[markdown]") {
  Results res = sample_results();
  res.rows.resize(2);
  CHECK(render_markdown(res, BaselineMode::best)
            .find("Env: NVIDIA H200, B=1, N=8192, H=32, D=512.\n") != std::string::npos);
  res.rows.clear();
  const std::string md = render_markdown(res, BaselineMode::best);
  CHECK(md.find("Env: NVIDIA H200.\n") != std::string::npos);
  CHECK(md.find("###") == std::string::npos);
}

TEST_CASE("a search's trials survive JSON and are summed up in the details", "[json][markdown]") {
  Results res = sample_results();
  Measurement& f = *res.rows[0].ffpa;
  f.config = {{"Bc", 64}, {"stages", 4}};
  f.config_source = "tuned";
  f.trials = {{{{"Bc", 64}, {"stages", 4}}, 0.50, ""},
              {{{"Bc", 128}, {"stages", 4}}, 0, "ptxas spills 24 bytes"},
              {{{"Bc", 64}, {"stages", 2}}, 0.55, ""}};
  const std::string text = to_json(res).dump(2);
  const Results back = results_from_json(nlohmann::json::parse(text), "mem.json");
  require_same(res, back);
  CHECK_THAT(
      render_markdown(back, BaselineMode::best),
      Catch::Contains("Bc=64,stages=4 (tuned) [3 tried: 2 timed, 1 refused; runner-up +10.0%]"));

  // Files written before searches were recorded have no "trials".
  nlohmann::json old = to_json(sample_results());
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

TEST_CASE("a pass's other FFPA variants are listed under the chosen one", "[markdown][csv]") {
  Results res = sample_results();
  Row& r = res.rows[0];
  REQUIRE(r.ffpa);
  Measurement other = *r.ffpa;
  other.impl = "ffpa-fwd-sm80";
  other.timing.median_ms = 0.0777;
  r.ffpa_others.push_back(other);
  const std::string md = render_markdown(res, BaselineMode::best);
  const size_t details = md.find("### Details");
  REQUIRE(details != std::string::npos);
  const size_t chosen = md.find("| " + r.ffpa->impl + " |", details);
  const size_t second = md.find("| ffpa-fwd-sm80 | ok | 0.0777 |", details);
  CHECK(chosen != std::string::npos);
  CHECK(second != std::string::npos);
  CHECK(chosen < second);
  const auto lines = [](const std::string& t) { return std::count(t.begin(), t.end(), '\n'); };
  CHECK(lines(render_csv(res)) == lines(render_csv(sample_results())) + 1);
  CHECK(render_csv(res).find(",0.0777,") != std::string::npos);
}

namespace {

// RFC 4180 reader, to check the writer's quoting independently.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
        rows.back().back() += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        rows.back().back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\n') {
      rows.emplace_back(1);
    } else {
      rows.back().back() += c;
    }
  }
  REQUIRE_FALSE(quoted);
  if (rows.back().size() == 1 && rows.back()[0].empty()) rows.pop_back();
  return rows;
}

}  // namespace

TEST_CASE("CSV matches the golden and parses back", "[csv]") {
  const Results res = sample_results();
  const std::string csv = render_csv(res);
  check_golden("report.csv", csv);

  const auto rows = parse_csv(csv);
  const auto& head = rows.at(0);
  size_t lines = 0;
  for (const auto& r : res.rows)
    lines += (r.ffpa ? 1 : 0) + r.ffpa_others.size() + r.baselines.size();
  REQUIRE(rows.size() == 1 + lines);
  for (const auto& r : rows) REQUIRE(r.size() == head.size());
  const auto col = [&](const std::string& name) {
    const auto it = std::find(head.begin(), head.end(), name);
    REQUIRE(it != head.end());
    return size_t(it - head.begin());
  };
  // The gqa bwd unfused failure carries a comma and quotes in its reason.
  bool found = false;
  for (const auto& r : rows)
    if (r[col("case")] == "gqa" && r[col("pass")] == "bwd" && r[col("impl")] == "unfused") {
      found = true;
      CHECK(r[col("status")] == "failed");
      CHECK(r[col("reason")] == "cuBLASLt: \"CUBLAS_STATUS_ALLOC_FAILED\", workspace 2.1 GiB");
    }
  REQUIRE(found);
  // Exact numbers: the median written is the double stored.
  const auto& first = rows.at(1);
  CHECK(first[col("impl")] == "ffpa-fwd-sm90");
  CHECK(std::stod(first[col("median_ms")]) == res.rows[0].ffpa->timing.median_ms);
  CHECK(std::stod(first[col("speedup_vs_unfused")]) == 16.0 / 11.42);
  CHECK(first[col("config")] == "Br=64,Bc=64,stages=2");
}

TEST_CASE("CSV quoting", "[csv]") {
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(csv_field(" padded") == "\" padded\"");
  CHECK(csv_field("") == "");
}

TEST_CASE("number formats follow the seed", "[format]") {
  CHECK(format_ms(11.4249) == "11.42");
  CHECK(format_ms(0.29) == "0.29");
  CHECK(format_ms(0.0613) == "0.0613");
  CHECK(format_tflops(385.4) == "385T");
  CHECK(format_tflops(1.84) == "1.8T");
  CHECK(format_tflops(0.694) == "0.69T");
  CHECK(format_tflops(0.0042) == "0.0042T");
  CHECK(format_speedup(2.8966) == "2.90x");
  CHECK(format_bytes(int64_t(17) << 29) == "8.50 GiB");
  CHECK(format_bytes(int64_t(512) << 20) == "512 MiB");
  CHECK(format_duration(7.4) == "0:07");
  CHECK(format_duration(750) == "12:30");
  CHECK(format_duration(3723) == "1:02:03");
  CHECK(format_duration(-1) == "--");
}

// --- PNG and SVG --------------------------------------------------------------------------------

namespace {

uint32_t be32(const std::string& s, size_t at) {
  return uint32_t(uint8_t(s[at])) << 24 | uint32_t(uint8_t(s[at + 1])) << 16 |
         uint32_t(uint8_t(s[at + 2])) << 8 | uint8_t(s[at + 3]);
}

// A minimal inflater (stored and fixed-Huffman blocks), independent of the encoder.
class Inflater {
 public:
  explicit Inflater(const std::string& z) : z_(z) {}

  std::vector<uint8_t> run() {
    REQUIRE(z_.size() >= 6);
    const int cmf = uint8_t(z_[0]), flg = uint8_t(z_[1]);
    REQUIRE((cmf & 0x0F) == 8);
    REQUIRE((cmf * 256 + flg) % 31 == 0);
    REQUIRE((flg & 0x20) == 0);
    pos_ = 16;
    std::vector<uint8_t> out;
    for (bool last = false; !last;) {
      last = bits(1);
      const int type = bits(2);
      if (type == 0) {
        pos_ = (pos_ + 7) / 8 * 8;
        const uint32_t len = bits(16), nlen = bits(16);
        REQUIRE((len ^ 0xFFFF) == nlen);
        for (uint32_t i = 0; i < len; ++i) out.push_back(uint8_t(bits(8)));
      } else {
        REQUIRE(type == 1);  // the encoder uses the fixed code only
        fixed_block(out);
      }
    }
    pos_ = (pos_ + 7) / 8 * 8;
    REQUIRE(pos_ / 8 + 4 == z_.size());
    REQUIRE(be32(z_, pos_ / 8) == adler32(out.data(), out.size()));
    return out;
  }

 private:
  uint32_t bits(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i, ++pos_) {
      // Not REQUIRE: this runs per bit and would drown the assertion count.
      if (pos_ / 8 >= z_.size()) throw std::runtime_error("zlib stream ends early");
      v |= uint32_t((uint8_t(z_[pos_ / 8]) >> (pos_ % 8)) & 1) << i;
    }
    return v;
  }
  uint32_t code(int n) {  // Huffman codes are packed MSB first
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v = v << 1 | bits(1);
    return v;
  }
  int literal() {
    uint32_t c = code(7);
    if (c <= 0x17) return int(c) + 256;
    c = c << 1 | bits(1);
    if (c >= 0x30 && c <= 0xBF) return int(c) - 0x30;
    if (c >= 0xC0 && c <= 0xC7) return int(c) - 0xC0 + 280;
    c = c << 1 | bits(1);
    REQUIRE(c >= 0x190);
    REQUIRE(c <= 0x1FF);
    return int(c) - 0x190 + 144;
  }
  void fixed_block(std::vector<uint8_t>& out) {
    static const int lbase[] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static const int lextra[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    static const int dbase[] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                                33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                                1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    static const int dextra[] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    for (;;) {
      const int sym = literal();
      if (sym < 256) {
        out.push_back(uint8_t(sym));
        continue;
      }
      if (sym == 256) return;
      REQUIRE(sym <= 285);
      const int len = lbase[sym - 257] + int(bits(lextra[sym - 257]));
      const int dsym = int(code(5));
      REQUIRE(dsym < 30);
      const size_t dist = size_t(dbase[dsym]) + bits(dextra[dsym]);
      REQUIRE(dist <= out.size());
      REQUIRE(dist <= 32768);
      for (int i = 0; i < len; ++i) out.push_back(out[out.size() - dist]);
    }
  }

  const std::string& z_;
  size_t pos_ = 0;
};

struct DecodedPng {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  uint32_t at(int x, int y) const {
    const size_t i = (size_t(y) * width + x) * 3;
    return uint32_t(rgb[i]) << 16 | uint32_t(rgb[i + 1]) << 8 | rgb[i + 2];
  }
};

DecodedPng decode_png(const std::string& png) {
  REQUIRE(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  DecodedPng img;
  std::string idat;
  std::vector<std::string> order;
  for (size_t at = 8; at < png.size();) {
    REQUIRE(at + 12 <= png.size());
    const uint32_t len = be32(png, at);
    REQUIRE(at + 12 + len <= png.size());
    const std::string type = png.substr(at + 4, 4);
    const auto* typed = reinterpret_cast<const uint8_t*>(png.data() + at + 4);
    REQUIRE(be32(png, at + 8 + len) == crc32(typed, 4 + len));
    const std::string body = png.substr(at + 8, len);
    order.push_back(type);
    if (type == "IHDR") {
      REQUIRE(len == 13);
      img.width = int(be32(body, 0));
      img.height = int(be32(body, 4));
      REQUIRE(body.substr(8) == std::string("\x08\x02\x00\x00\x00", 5));
    } else if (type == "IDAT") {
      idat += body;
    }
    at += 12 + len;
  }
  REQUIRE(order.size() >= 3);
  REQUIRE(order.front() == "IHDR");
  REQUIRE(order.back() == "IEND");
  REQUIRE(img.width > 0);
  REQUIRE(img.height > 0);
  const std::vector<uint8_t> raw = Inflater(idat).run();
  const size_t stride = size_t(img.width) * 3;
  REQUIRE(raw.size() == (stride + 1) * img.height);
  for (int y = 0; y < img.height; ++y) {
    REQUIRE(raw[y * (stride + 1)] == 0);  // filter type None
    img.rgb.insert(img.rgb.end(), raw.begin() + y * (stride + 1) + 1,
                   raw.begin() + (y + 1) * (stride + 1));
  }
  return img;
}

}  // namespace

TEST_CASE("CRC-32 and Adler-32 match their check values", "[png]") {
  const std::string s = "123456789";
  CHECK(crc32(reinterpret_cast<const uint8_t*>(s.data()), s.size()) == 0xCBF43926u);
  const std::string w = "Wikipedia";
  CHECK(adler32(reinterpret_cast<const uint8_t*>(w.data()), w.size()) == 0x11E60398u);
}

TEST_CASE("zlib stream inflates back to its input", "[png]") {
  std::mt19937 rng(7);
  std::vector<uint8_t> data;
  for (int i = 0; i < 70000; ++i) data.push_back(uint8_t(rng() % 4));  // short repeats
  for (int i = 0; i < 40000; ++i) data.push_back(uint8_t(i % 251));    // long-distance repeats
  data.insert(data.end(), 1000, 0xAB);                                 // one long run
  for (int i = 0; i < 3000; ++i) data.push_back(uint8_t(rng()));       // incompressible
  const std::string z = zlib_compress(data);
  CHECK(Inflater(z).run() == data);
  CHECK(z.size() < data.size() / 2);
  CHECK(Inflater(zlib_compress({})).run().empty());
}

TEST_CASE("chart PNG is valid and shows the bars", "[png]") {
  const Results res = sample_results();
  const Drawing d = chart_drawing(res);
  const std::string png = encode_png(rasterize(d));
  const DecodedPng img = decode_png(png);
  REQUIRE(img.width == d.width);
  REQUIRE(img.height == d.height);
  REQUIRE(img.rgb == rasterize(d).rgb);
  CHECK(img.at(0, 0) == 0xFFFFFF);

  // Speedups: self-attn fp16 fwd 16.00 / 11.42 = 1.40x, causal bf16 fwd 16.1 / 6.34 = 2.54x.
  const Drawing::Item* self = d.find("bar:" + res.rows[0].key() + ":speedup");
  const Drawing::Item* causal = d.find("bar:" + res.rows[6].key() + ":speedup");
  REQUIRE(self);
  REQUIRE(causal);
  CHECK(img.at(self->x + self->w / 2, self->y + self->h / 2) == self->color);
  CHECK(img.at(causal->x + causal->w / 2, causal->y + causal->h / 2) == causal->color);
  CHECK(self->color != causal->color);  // fp16 and bf16
  CHECK(std::abs(double(causal->h) / self->h - (16.1 / 6.34) / (16.0 / 11.42)) < 0.02);
  // Bars stand on one axis per panel.
  CHECK(self->y + self->h == causal->y + causal->h);
  // No bar where there is no speedup: failed, skipped FFPA, no FFPA.
  CHECK(d.find("bar:" + res.rows[3].key() + ":speedup") == nullptr);
  CHECK(d.find("bar:" + res.rows[7].key() + ":speedup") == nullptr);
  CHECK(d.find("bar:" + res.rows[10].key() + ":speedup") == nullptr);
  // Some text is drawn in ink.
  size_t ink = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) ink += img.at(x, y) == 0x222222;
  CHECK(ink > 1000);

  test::TempDir dir;
  write_chart_png(dir.path() / "chart.png", res);
  CHECK(test::read_file(dir.path() / "chart.png") == png);
}

TEST_CASE("chart falls back to TFLOPS without FFPA rows", "[png]") {
  Results res = sample_results();
  for (auto& r : res.rows) r.ffpa.reset();
  const Drawing d = chart_drawing(res);
  const Drawing::Item* cudnn = d.find("bar:" + res.rows[0].key() + ":cudnn");
  const Drawing::Item* unfused = d.find("bar:" + res.rows[0].key() + ":unfused");
  REQUIRE(cudnn);
  REQUIRE(unfused);
  CHECK(cudnn->color != unfused->color);
  CHECK(unfused->h > cudnn->h);  // 275 vs 92 TFLOPS
  CHECK(d.find("bar:" + res.rows[0].key() + ":speedup") == nullptr);
  const DecodedPng img = decode_png(encode_png(rasterize(d)));
  CHECK(img.at(unfused->x + unfused->w / 2, unfused->y + 1) == unfused->color);
}

TEST_CASE("chart SVG carries the same bars", "[svg]") {
  Results res = sample_results();
  res.rows[0].case_name = "a<b&c";
  const Drawing d = chart_drawing(res);
  const std::string svg = to_svg(d);
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.size() > 7);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(svg.find("a&lt;b&amp;c") != std::string::npos);
  CHECK(svg.find("a<b") == std::string::npos);
  size_t bars = 0;
  for (size_t at = svg.find("id=\"bar:"); at != std::string::npos;
       at = svg.find("id=\"bar:", at + 1))
    ++bars;
  size_t expected = 0;
  for (const auto& it : d.items) expected += it.id.rfind("bar:", 0) == 0;
  CHECK(bars == expected);
  CHECK(expected == 11);  // rows with a speedup: 8 fwd, 3 bwd
  const Drawing::Item* self = d.find("bar:" + res.rows[0].key() + ":speedup");
  REQUIRE(self);
  CHECK(svg.find(fmt::format("x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#{:06x}\"",
                             self->x, self->y, self->w, self->h, self->color)) !=
        std::string::npos);
}

TEST_CASE("bitmap text is drawn where the drawing says", "[png]") {
  Drawing d;
  d.width = 40;
  d.height = 40;
  d.text(2, 2, "I", 0x000000);             // 'I': full-height stroke in column 2
  d.text(20, 30, "I", 0xFF0000, 1, true);  // vertical: the stroke becomes a row
  const Image img = rasterize(d);
  for (int row = 0; row < 7; ++row) CHECK(img.at(2 + 2, 2 + row) == 0x000000);
  CHECK(img.at(2 + 1, 2 + 3) == 0xFFFFFF);
  for (int row = 0; row < 7; ++row) CHECK(img.at(20 + row, 30 - 2 - 1) == 0xFF0000);
  CHECK(text_length("I") == 5);
  CHECK(text_length("ab") == 11);
  CHECK(text_length("≤") == 5);  // one glyph for one UTF-8 character
}

// --- progress -----------------------------------------------------------------------------------

TEST_CASE("progress line", "[progress]") {
  CHECK(progress_line(3, 40, 65, 750, "self-attn fwd bf16") ==
        "[ 3/40]   5% elapsed 1:05, ETA 12:30 | self-attn fwd bf16");
  CHECK(progress_line(1, 5, 0, std::nan(""), "") == "[1/5]   0% elapsed 0:00, ETA --");
  CHECK(progress_line(5, 5, 3725, 0, "x") == "[5/5]  80% elapsed 1:02:05, ETA 0:00 | x");
}
