#include "report/results_json.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json_strict.hpp"

namespace ffpa {
namespace {

using nlohmann::json;

json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json to_json(const Knobs& knobs) {
  json a = json::array();
  for (const auto& [k, v] : knobs) a.push_back(json::array({k, v}));
  return a;
}

json to_json(const TimingStats& t) {
  return {{"median_ms", num(t.median_ms)},
          {"mean_ms", num(t.mean_ms)},
          {"min_ms", num(t.min_ms)},
          {"max_ms", num(t.max_ms)},
          {"stdev_ms", num(t.stdev_ms)},
          {"samples", t.samples},
          {"total_gpu_s", num(t.total_gpu_s)},
          {"timed_out", t.timed_out},
          {"sm_clock_mhz", num(t.sm_clock_mhz)},
          {"throttled_samples", t.throttled_samples}};
}

json to_json(const TensorCheck& c) {
  return {{"tensor", c.tensor},    {"max_abs", num(c.max_abs)}, {"rel_rms", num(c.rel_rms)},
          {"bound", num(c.bound)}, {"nonfinite", c.nonfinite},  {"pass", c.pass},
          {"note", c.note}};
}

json to_json(const Trial& t) {
  return {{"config", to_json(t.config)},
          {"median_ms", num(t.median_ms)},
          {"reason", t.reason},
          {"sm_clock_mhz", num(t.sm_clock_mhz)},
          {"final_ms", num(t.final_ms)}};
}

json to_json(const Measurement& m) {
  json checks = json::array(), trials = json::array();
  for (const auto& c : m.checks) checks.push_back(to_json(c));
  for (const auto& t : m.trials) trials.push_back(to_json(t));
  return {{"impl", m.impl},
          {"kind", m.kind},
          {"status", to_string(m.status)},
          {"reason", m.reason},
          {"config", to_json(m.config)},
          {"config_source", m.config_source},
          {"trials", trials},
          {"timing", to_json(m.timing)},
          {"tflops", num(m.tflops)},
          {"peak_mem_bytes", m.peak_mem_bytes},
          {"extra_mem_bytes", m.extra_mem_bytes},
          {"includes", m.includes},
          {"checked", m.checked},
          {"checks", checks}};
}

json to_json(const Row& r) {
  json baselines = json::array(), others = json::array();
  for (const auto& b : r.baselines) baselines.push_back(to_json(b));
  for (const auto& m : r.ffpa_others) others.push_back(to_json(m));
  const Shape& s = r.shape;
  return {{"plan_index", r.plan_index},
          {"device", {{"host", r.device.host}, {"index", r.device.index}}},
          {"case", r.case_name},
          {"pass", to_string(r.pass)},
          {"dtype", to_string(r.dtype)},
          {"shape",
           {{"B", s.B}, {"Hq", s.Hq}, {"Hkv", s.Hkv}, {"Nq", s.Nq}, {"Nkv", s.Nkv}, {"D", s.D}}},
          {"causal", to_string(r.causal)},
          {"bias", to_string(r.bias)},
          {"bias_dtype", to_string(r.bias_dtype)},
          {"dropout", num(r.dropout)},
          {"flops", num(r.flops)},
          {"ffpa", r.ffpa ? to_json(*r.ffpa) : json(nullptr)},
          {"ffpa_others", others},
          {"baselines", baselines}};
}

json to_json(const Environment& e) {
  return {{"gpu", e.gpu},
          {"arch", e.arch},
          {"sm_count", e.sm_count},
          {"sm_clock_mhz", e.sm_clock_mhz},
          {"memory_clock_mhz", e.memory_clock_mhz},
          {"l2_bytes", e.l2_bytes},
          {"memory_bytes", e.memory_bytes},
          {"driver", e.driver},
          {"cuda_runtime", e.cuda_runtime},
          {"cudnn", e.cudnn},
          {"git_commit", e.git_commit},
          {"build_flags", e.build_flags},
          {"command_line", e.command_line},
          {"started_at", e.started_at},
          {"host", e.host}};
}

// Reads one object's fields, naming the JSON pointer of whatever is wrong.
class Reader {
 public:
  Reader(const json& obj, std::string ptr, const std::string& file)
      : obj_(obj), ptr_(std::move(ptr)), file_(file) {
    if (!obj_.is_object()) fail(shown(ptr_), "expected an object");
  }

  // A key this schema does not have is a typo or a file from another tool: refused, not ignored.
  void only(std::initializer_list<const char*> keys) const {
    for (const auto& [key, value] : obj_.items())
      if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; }))
        fail(path(key), "unknown key");
  }

  [[noreturn]] void fail(const std::string& ptr, const std::string& why) const {
    throw InputError(file_, ptr, why);
  }
  std::string path(const std::string& key) const { return ptr_ + "/" + key; }

  const json& at(const std::string& key) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) fail(path(key), "missing");
    return *it;
  }
  bool has(const std::string& key) const { return obj_.contains(key); }
  Reader object(const std::string& key) const { return Reader(at(key), path(key), file_); }
  std::string str(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_string()) fail(path(key), "expected a string");
    return v.get<std::string>();
  }
  double dbl(const std::string& key) const {
    const json& v = at(key);
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
    }
    fail(path(key), "expected a number");
  }
  int64_t i64(const std::string& key) const {
    const json& v = at(key);
    // The parser stores integers beyond 64 bits as doubles.
    if (v.is_number_float() && std::abs(v.get<double>()) >= 0x1p63)
      fail(path(key), "integer out of range");
    if (!v.is_number_integer()) fail(path(key), "expected an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
      fail(path(key), "integer out of range");
    return v.get<int64_t>();
  }
  int i32(const std::string& key) const {
    const int64_t v = i64(key);
    if (v < INT32_MIN || v > INT32_MAX) fail(path(key), "integer out of range");
    return static_cast<int>(v);
  }
  bool boolean(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_boolean()) fail(path(key), "expected true or false");
    return v.get<bool>();
  }
  template <class E>
  E enumeration(const std::string& key, std::optional<E> (*parse)(const std::string&)) const {
    const std::string s = str(key);
    if (auto e = parse(s)) return *e;
    fail(path(key), "unknown value \"" + s + "\"");
  }
  const json& array(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_array()) fail(path(key), "expected an array");
    return v;
  }
  const std::string& file() const { return file_; }

 private:
  const json& obj_;
  std::string ptr_;
  const std::string& file_;
};

Knobs knobs_from(const Reader& r, const std::string& key) {
  Knobs knobs;
  const json& a = r.array(key);
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string p = r.path(key) + "/" + std::to_string(i);
    const json& kv = a[i];
    if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string() || !kv[1].is_number_integer())
      r.fail(p, "expected [name, integer]");
    knobs.emplace_back(kv[0].get<std::string>(), kv[1].get<int64_t>());
  }
  return knobs;
}

TimingStats timing_from(const Reader& r) {
  r.only({"median_ms", "mean_ms", "min_ms", "max_ms", "stdev_ms", "samples", "total_gpu_s",
          "timed_out", "sm_clock_mhz", "throttled_samples"});
  TimingStats t;
  t.median_ms = r.dbl("median_ms");
  t.mean_ms = r.dbl("mean_ms");
  t.min_ms = r.dbl("min_ms");
  t.max_ms = r.dbl("max_ms");
  t.stdev_ms = r.dbl("stdev_ms");
  t.samples = r.i32("samples");
  t.total_gpu_s = r.dbl("total_gpu_s");
  t.timed_out = r.boolean("timed_out");
  t.sm_clock_mhz = r.dbl("sm_clock_mhz");
  t.throttled_samples = r.i32("throttled_samples");
  return t;
}

TensorCheck check_from(const Reader& r) {
  r.only({"tensor", "max_abs", "rel_rms", "bound", "nonfinite", "pass", "note"});
  TensorCheck c;
  c.tensor = r.str("tensor");
  c.max_abs = r.dbl("max_abs");
  c.rel_rms = r.dbl("rel_rms");
  c.bound = r.dbl("bound");
  c.nonfinite = r.i64("nonfinite");
  c.pass = r.boolean("pass");
  if (r.has("note")) c.note = r.str("note");
  if (c.nonfinite < 0) r.fail(r.path("nonfinite"), "negative count " + std::to_string(c.nonfinite));
  // A pass is only believable with finite errors; NaN/Inf fails a check.
  if (c.pass && c.nonfinite > 0)
    r.fail(r.path("pass"), "true with " + std::to_string(c.nonfinite) + " non-finite values");
  if (c.pass && (!std::isfinite(c.max_abs) || !std::isfinite(c.rel_rms)))
    r.fail(r.path("pass"), "true with a non-finite error");
  return c;
}

// What compare and report divide by and rank: an ok measurement without a positive, finite median
// and a finite, non-negative spread is a broken timer, not a fast kernel.
void check_timing(const Reader& r, const TimingStats& t) {
  const Reader tr = r.object("timing");
  if (!std::isfinite(t.median_ms) || t.median_ms <= 0)
    tr.fail(tr.path("median_ms"), "an ok measurement needs a positive, finite median");
  for (const auto& [key, v] : {std::pair<const char*, double>{"mean_ms", t.mean_ms},
                               {"min_ms", t.min_ms},
                               {"max_ms", t.max_ms},
                               {"stdev_ms", t.stdev_ms}})
    if (!std::isfinite(v) || v < 0)
      tr.fail(tr.path(key), "an ok measurement needs a finite, non-negative value");
  if (t.samples < 1) tr.fail(tr.path("samples"), "an ok measurement needs at least one sample");
}

Measurement measurement_from(const Reader& r) {
  r.only({"impl", "kind", "status", "reason", "config", "config_source", "trials", "timing",
          "tflops", "peak_mem_bytes", "extra_mem_bytes", "includes", "checked", "checks"});
  Measurement m;
  m.impl = r.str("impl");
  m.kind = r.str("kind");
  if (m.kind != "ffpa" && m.kind != "baseline")
    r.fail(r.path("kind"), "expected \"ffpa\" or \"baseline\"");
  m.status = r.enumeration("status", parse_status);
  m.reason = r.str("reason");
  m.config = knobs_from(r, "config");
  m.config_source = r.str("config_source");
  if (r.has("trials")) {  // absent in files written before searches were recorded
    const json& trials = r.array("trials");
    for (size_t i = 0; i < trials.size(); ++i) {
      const Reader t(trials[i], r.path("trials/" + std::to_string(i)), r.file());
      t.only({"config", "median_ms", "reason", "sm_clock_mhz", "final_ms"});
      Trial tr{knobs_from(t, "config"), t.dbl("median_ms"), t.str("reason")};
      // Absent in files written before the finals (2026-12-07).
      if (t.has("sm_clock_mhz")) tr.sm_clock_mhz = t.dbl("sm_clock_mhz");
      if (t.has("final_ms")) tr.final_ms = t.dbl("final_ms");
      m.trials.push_back(tr);
    }
  }
  m.timing = timing_from(r.object("timing"));
  if (m.status == Status::ok) check_timing(r, m.timing);
  if (m.timing.samples < 0) r.fail(r.path("timing/samples"), "negative count");
  m.tflops = r.dbl("tflops");
  m.peak_mem_bytes = r.i64("peak_mem_bytes");
  m.extra_mem_bytes = r.i64("extra_mem_bytes");
  m.includes = r.str("includes");
  m.checked = r.boolean("checked");
  const json& checks = r.array("checks");
  for (size_t i = 0; i < checks.size(); ++i)
    m.checks.push_back(
        check_from(Reader(checks[i], r.path("checks/" + std::to_string(i)), r.file())));
  return m;
}

// `version` is the file's schema_version: kResultsSchemaVersionMaskKeys spelled the bias
// "mask" and "mask_dtype"; the current schema spells it "bias" and "bias_dtype".
Row row_from(const Reader& r, int version) {
  const bool old_keys = version == kResultsSchemaVersionMaskKeys;
  const char* const bias_key = old_keys ? "mask" : "bias";
  const char* const bias_dtype_key = old_keys ? "mask_dtype" : "bias_dtype";
  r.only({"plan_index", "device", "case", "pass", "dtype", "shape", "causal", bias_key,
          bias_dtype_key, "dropout", "flops", "ffpa", "ffpa_others", "baselines"});
  Row row;
  // Both absent in files written before shards and worker pools; -1 stands for "not known".
  if (r.has("plan_index")) {
    row.plan_index = r.i32("plan_index");
    if (row.plan_index < -1) r.fail(r.path("plan_index"), "negative plan index");
  }
  if (r.has("device")) {
    const Reader d = r.object("device");
    d.only({"host", "index"});
    row.device = {d.str("host"), d.i32("index")};
    if (row.device.index < -1) d.fail(d.path("index"), "negative device index");
  }
  row.case_name = r.str("case");
  row.pass = r.enumeration("pass", parse_pass);
  row.dtype = r.enumeration("dtype", parse_dtype);
  const Reader s = r.object("shape");
  s.only({"B", "Hq", "Hkv", "Nq", "Nkv", "D"});
  row.shape = {s.i64("B"), s.i64("Hq"), s.i64("Hkv"), s.i64("Nq"), s.i64("Nkv"), s.i64("D")};
  row.causal = r.enumeration("causal", parse_causal);
  row.bias = r.enumeration(bias_key, parse_bias_kind);
  row.bias_dtype = r.enumeration(bias_dtype_key, parse_bias_dtype);
  row.dropout = r.dbl("dropout");
  row.flops = r.dbl("flops");
  const json& ffpa = r.at("ffpa");
  if (!ffpa.is_null()) row.ffpa = measurement_from(Reader(ffpa, r.path("ffpa"), r.file()));
  if (r.has("ffpa_others")) {  // absent in files written before it existed
    const json& others = r.array("ffpa_others");
    for (size_t i = 0; i < others.size(); ++i)
      row.ffpa_others.push_back(measurement_from(
          Reader(others[i], r.path("ffpa_others/" + std::to_string(i)), r.file())));
  }
  const json& baselines = r.array("baselines");
  for (size_t i = 0; i < baselines.size(); ++i)
    row.baselines.push_back(
        measurement_from(Reader(baselines[i], r.path("baselines/" + std::to_string(i)), r.file())));
  return row;
}

Environment env_from(const Reader& r) {
  r.only({"gpu", "arch", "sm_count", "sm_clock_mhz", "memory_clock_mhz", "l2_bytes", "memory_bytes",
          "driver", "cuda_runtime", "cudnn", "git_commit", "build_flags", "command_line",
          "started_at", "host"});
  Environment e;
  e.gpu = r.str("gpu");
  e.arch = r.str("arch");
  e.sm_count = r.i32("sm_count");
  e.sm_clock_mhz = r.i32("sm_clock_mhz");
  e.memory_clock_mhz = r.i32("memory_clock_mhz");
  e.l2_bytes = r.i64("l2_bytes");
  e.memory_bytes = r.i64("memory_bytes");
  e.driver = r.str("driver");
  e.cuda_runtime = r.str("cuda_runtime");
  e.cudnn = r.str("cudnn");
  e.git_commit = r.str("git_commit");
  e.build_flags = r.str("build_flags");
  e.command_line = r.str("command_line");
  e.started_at = r.str("started_at");
  e.host = r.str("host");
  return e;
}

json to_json(const PlanInfo& p) {
  return {
      {"config", p.config}, {"config_hash", p.config_hash}, {"flags", p.flags}, {"total", p.total},
      {"shard", p.shard},   {"shards", p.shards},           {"items", p.items}};
}

PlanInfo plan_from(const Reader& r) {
  r.only({"config", "config_hash", "flags", "total", "shard", "shards", "items"});
  PlanInfo p;
  p.config = r.str("config");
  p.config_hash = r.str("config_hash");
  p.flags = r.str("flags");
  p.total = r.i32("total");
  p.shard = r.i32("shard");
  p.shards = r.i32("shards");
  if (p.total < 0) r.fail(r.path("total"), "negative plan size");
  if (p.shards < 1 || p.shard < 0 || p.shard >= p.shards)
    r.fail(r.path("shard"), "shard " + std::to_string(p.shard) + " of " + std::to_string(p.shards) +
                                " does not exist");
  // merge indexes rows by these: each must be an item of the plan, listed once, in order.
  const json& items = r.array("items");
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string at = r.path("items/" + std::to_string(i));
    if (!items[i].is_number_integer()) r.fail(at, "expected an integer");
    const int64_t v = items[i].get<int64_t>();
    if (v < 0 || v >= p.total)
      r.fail(at, std::to_string(v) + " is not an item of a plan of " + std::to_string(p.total));
    if (!p.items.empty() && v <= p.items.back()) r.fail(at, "items must ascend");
    p.items.push_back(static_cast<int>(v));
  }
  return p;
}

}  // namespace

nlohmann::json to_json(const Results& res) {
  json rows = json::array();
  for (const auto& r : res.rows) rows.push_back(to_json(r));
  // Always the current schema: the keys below are its keys, whatever version a file read back had.
  return {{"schema_version", kResultsSchemaVersion},
          {"tool_version", res.tool_version},
          {"complete", res.complete},
          {"timing_mode", res.timing_mode},
          {"env", to_json(res.env)},
          {"plan", res.plan ? to_json(*res.plan) : json(nullptr)},
          {"rows", rows}};
}

nlohmann::json row_to_json(const Row& r) {
  return to_json(r);
}

Row row_from_json(const nlohmann::json& j, const std::string& where) {
  return row_from(Reader(j, "", where), kResultsSchemaVersion);
}

nlohmann::json env_to_json(const Environment& e) {
  return to_json(e);
}

Environment env_from_json(const nlohmann::json& j, const std::string& where) {
  return env_from(Reader(j, "", where));
}

Results results_from_json(const nlohmann::json& j, const std::string& file) {
  const Reader r(j, "", file);
  Results res;
  // The version is checked before anything else so a newer file fails on its version, not on
  // whichever field changed.
  // Files of the previous version (the bias spelled "mask") are read too, and upgraded in memory.
  const int version = r.i32("schema_version");
  if (version != kResultsSchemaVersion && version != kResultsSchemaVersionMaskKeys)
    r.fail("/schema_version", "unsupported schema_version " + std::to_string(version) +
                                  " (this build reads " +
                                  std::to_string(kResultsSchemaVersionMaskKeys) + " and " +
                                  std::to_string(kResultsSchemaVersion) + ")");
  res.schema_version = kResultsSchemaVersion;
  r.only({"schema_version", "tool_version", "complete", "timing_mode", "env", "plan", "rows"});
  res.tool_version = r.str("tool_version");
  res.complete = r.boolean("complete");
  res.timing_mode = r.str("timing_mode");
  res.env = env_from(r.object("env"));
  if (r.has("plan") && !r.at("plan").is_null()) res.plan = plan_from(r.object("plan"));
  const json& rows = r.array("rows");
  for (size_t i = 0; i < rows.size(); ++i)
    res.rows.push_back(row_from(Reader(rows[i], "/rows/" + std::to_string(i), file), version));
  return res;
}

Results parse_results(const std::string& text, const std::string& file) {
  // The strict parser refuses duplicate keys (a second "median_ms" must not win silently).
  return results_from_json(parse_json_strict(text, file), file);
}

Results load_results(const std::filesystem::path& path) {
  return parse_results(read_input_file(path), path.string());
}

void write_results_atomic(const std::filesystem::path& path, const Results& res) {
  // Replace rather than throw on invalid UTF-8: a library's error text must not lose the run.
  write_file_atomic(path, to_json(res).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace ffpa
