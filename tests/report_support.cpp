#include "report_support.hpp"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <vector>

#include "support.hpp"

namespace ffpa::test {
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

}  // namespace

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
  res.plan = PlanInfo{
      "configs/default.json", "0123456789abcdef", "fwd=true bwd=true", 40, 1, 2, {0, 3, 7}};

  const Shape self{1, 32, 32, 8192, 8192, 512};
  const Shape cross{1, 32, 32, 1024, 8192, 512};
  const Shape decode{1, 32, 32, 1, 8192, 512};
  const Shape gqa{1, 32, 8, 8192, 8192, 512};
  const Shape odd{1, 8, 8, 8191, 8191, 512};
  const Shape big{1, 32, 32, 8192, 8192, 1024};
  const std::string sm90 = "ffpa-fwd-sm90", bwd = "ffpa-bwd-sm90";

  auto add = [&](Row r, std::optional<Measurement> f, std::vector<Measurement> b) {
    r.plan_index = static_cast<int>(res.rows.size());
    r.device = {"gpu-node", r.plan_index % 2};
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
    r.bias = BiasKind::key;
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
  const std::filesystem::path golden = source_dir() / "tests" / "golden" / name;
  if (const char* u = std::getenv("FFPA_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    write_file(golden, actual);
    WARN("rewrote " << golden.string());
    return;
  }
  const std::string expected = read_file(golden);
  if (expected != actual) {
    // Point at the first differing line; the whole text is too long to be useful.
    std::istringstream a(actual), e(expected);
    std::string la, le;
    int line = 1;
    while (std::getline(a, la) && std::getline(e, le) && la == le) ++line;
    FAIL(name << " differs at line " << line << "\n  expected: " << le << "\n  actual:   " << la);
  }
}

}  // namespace ffpa::test
