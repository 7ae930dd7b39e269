// Report layer: results JSON round trip and errors, atomic writes, markdown and CSV against
// goldens (FFPA_UPDATE_GOLDEN=1 rewrites them; do it only on purpose and review the diff), PNG
// structure and pixels (decoded here by an independent inflater), SVG, progress line.
#include <cairo.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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

// --- PNG and SVG (Cairo) ------------------------------------------------------------------------

namespace {

cairo_status_t read_bytes(void* closure, unsigned char* data, unsigned int length) {
  auto* in = static_cast<std::pair<const std::string*, size_t>*>(closure);
  if (in->second + length > in->first->size()) return CAIRO_STATUS_READ_ERROR;
  std::memcpy(data, in->first->data() + in->second, length);
  in->second += length;
  return CAIRO_STATUS_SUCCESS;
}

// A PNG read back by Cairo's decoder (independent of how it was written).
struct DecodedPng {
  int width = 0, height = 0;
  std::vector<uint32_t> px;  // 0xRRGGBB
  uint32_t at(int x, int y) const { return px[size_t(y) * width + x]; }
};

DecodedPng decode_png(const std::string& png) {
  REQUIRE(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  std::pair<const std::string*, size_t> in{&png, 0};
  cairo_surface_t* s = cairo_image_surface_create_from_png_stream(read_bytes, &in);
  REQUIRE(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS);
  cairo_surface_flush(s);
  DecodedPng img;
  img.width = cairo_image_surface_get_width(s);
  img.height = cairo_image_surface_get_height(s);
  const int stride = cairo_image_surface_get_stride(s);
  const unsigned char* data = cairo_image_surface_get_data(s);
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      uint32_t v;
      std::memcpy(&v, data + size_t(y) * stride + size_t(x) * 4, 4);
      img.px.push_back(v & 0xFFFFFF);
    }
  cairo_surface_destroy(s);
  return img;
}

bool dark(uint32_t c) {
  return ((c >> 16) & 255) < 128 && ((c >> 8) & 255) < 128 && (c & 255) < 128;
}

}  // namespace

TEST_CASE("chart PNG is valid and shows the bars", "[png]") {
  const Results res = sample_results();
  const Drawing d = chart_drawing(res);
  const std::string png = render_png(d);
  const DecodedPng img = decode_png(png);
  REQUIRE(img.width == d.width);
  REQUIRE(img.height == d.height);
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
  // Text is drawn: dark pixels outside every bar and axis line.
  size_t ink = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) ink += dark(img.at(x, y));
  CHECK(ink > 1000);

  test::TempDir dir;
  write_charts(dir.path(), "run", res);
  CHECK(test::read_file(dir.path() / "run_speedup.png") == png);
  CHECK(std::filesystem::exists(dir.path() / "run_sweep.png") == has_sweep(res));
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
  const DecodedPng img = decode_png(render_png(d));
  CHECK(img.at(unfused->x + unfused->w / 2, unfused->y + 1) == unfused->color);
}

TEST_CASE("chart SVG is a complete document with the drawing's size and bar colours", "[svg]") {
  Results res = sample_results();
  res.rows[0].case_name = "a<b&c";  // text becomes glyph outlines: nothing to escape
  const Drawing d = chart_drawing(res);
  const std::string svg = render_svg(d);
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find(fmt::format("width=\"{}pt\" height=\"{}pt\"", d.width, d.height)) !=
        std::string::npos);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("a<b") == std::string::npos);
  const Drawing::Item* self = d.find("bar:" + res.rows[0].key() + ":speedup");
  REQUIRE(self);
  // Cairo writes colours as percentages: rgb(29.803922%,47.058824%,65.882353%).
  const auto pct = [](uint32_t c, int shift) { return ((c >> shift) & 255) / 255.0 * 100; };
  CHECK(svg.find(fmt::format("fill:rgb({:.6f}%,{:.6f}%,{:.6f}%)", pct(self->color, 16),
                             pct(self->color, 8), pct(self->color, 0))) != std::string::npos);

  // Cairo numbers its glyph definitions per process, so a second rendering is not byte-equal.
  test::TempDir dir;
  write_charts(dir.path(), "run", res);
  CHECK(test::read_file(dir.path() / "run_speedup.svg").rfind("<?xml", 0) == 0);
}

TEST_CASE("the run chart shows the memory each implementation needed", "[png]") {
  const Results res = sample_results();
  const Drawing d = chart_drawing(res);
  const Row& r = res.rows[0];
  REQUIRE(r.ffpa);
  REQUIRE(!r.baselines.empty());
  const Drawing::Item* ffpa = d.find("mem:" + r.key() + ":" + r.ffpa->impl);
  const Drawing::Item* base = d.find("mem:" + r.key() + ":" + r.baselines[0].impl);
  REQUIRE(ffpa);
  REQUIRE(base);
  CHECK(ffpa->color != base->color);
  // Bar heights follow the peak memory each needed.
  const double ratio = double(r.baselines[0].peak_mem_bytes) / r.ffpa->peak_mem_bytes;
  CHECK(std::abs(double(base->h) / ffpa->h - ratio) < 0.05 * ratio + 0.05);
  const DecodedPng img = decode_png(render_png(d));
  CHECK(img.at(ffpa->x + ffpa->w / 2, ffpa->y + ffpa->h / 2) == ffpa->color);
}

TEST_CASE("a sweep over D draws TFLOPS against D, one line per implementation", "[png]") {
  Results res = sample_results();
  // Rows of other cases, or of the same case at another H and N, are not a sweep.
  Results plain = res;
  plain.rows = {res.rows[1], res.rows[1]};
  plain.rows[1].shape.Hq = plain.rows[1].shape.Hkv = 8;
  plain.rows[1].shape.Nq = plain.rows[1].shape.Nkv = 8191;
  CHECK_FALSE(has_sweep(plain));
  Results sweep;
  sweep.env = res.env;
  sweep.complete = true;
  for (int64_t D : {320, 512, 1024}) {
    Row r = res.rows[0];
    r.shape.D = D;
    r.ffpa->tflops = double(D) / 4;
    for (auto& b : r.baselines) b.tflops = 100;
    sweep.rows.push_back(r);
  }
  REQUIRE(has_sweep(sweep));
  const Drawing d = sweep_drawing(sweep);
  std::vector<const Drawing::Item*> ffpa;
  for (const auto& it : d.items)
    if (it.id.rfind("point:", 0) == 0 && it.id.find(":FFPA:") != std::string::npos)
      ffpa.push_back(&it);
  REQUIRE(ffpa.size() == 3);
  CHECK(ffpa[0]->x < ffpa[1]->x);  // left to right by D
  CHECK(ffpa[1]->x < ffpa[2]->x);
  CHECK(ffpa[0]->y > ffpa[1]->y);  // higher TFLOPS, higher on the page
  CHECK(ffpa[1]->y > ffpa[2]->y);
  size_t lines = 0;
  for (const auto& it : d.items)
    lines += it.kind == Drawing::Kind::line && it.color == ffpa[0]->color;
  CHECK(lines == 2);  // 320-512, 512-1024
  test::TempDir dir;
  write_charts(dir.path(), "run", sweep);
  CHECK(decode_png(test::read_file(dir.path() / "run_sweep.png")).width == d.width);
  CHECK(std::filesystem::exists(dir.path() / "run_sweep.svg"));
}

TEST_CASE("text is measured with the renderer's font and drawn where the drawing says", "[png]") {
  CHECK(text_length("") == 0);
  CHECK(text_length("I") > 0);
  CHECK(text_length("WWWW") > text_length("iiii"));
  CHECK(text_length("ab", 2) > text_length("ab"));
  Drawing d;
  d.width = 80;
  d.height = 40;
  d.text(4, 4, "WWW", 0x000000);
  const DecodedPng img = decode_png(render_png(d));
  size_t inside = 0, outside = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      if (!dark(img.at(x, y))) continue;
      const bool in_box =
          x >= 4 && x < 4 + text_length("WWW") + 1 && y >= 4 && y < 4 + text_height();
      (in_box ? inside : outside) += 1;
    }
  CHECK(inside > 10);
  CHECK(outside == 0);
}

// --- progress -----------------------------------------------------------------------------------

TEST_CASE("progress line", "[progress]") {
  CHECK(progress_line(3, 40, 65, 750, "self-attn fwd bf16") ==
        "[ 3/40]   5% elapsed 1:05, ETA 12:30 | self-attn fwd bf16");
  CHECK(progress_line(1, 5, 0, std::nan(""), "") == "[1/5]   0% elapsed 0:00, ETA --");
  CHECK(progress_line(5, 5, 3725, 0, "x") == "[5/5]  80% elapsed 1:02:05, ETA 0:00 | x");
}
