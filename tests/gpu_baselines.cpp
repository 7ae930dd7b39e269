// GPU tests of the reference and the unfused baseline: over random small and odd shapes of every
// case kind, the fp32 GPU reference agrees with the CPU double reference, the unfused baseline
// passes FA3's rule against the GPU reference, and the GPU dropout stream equals the host's.
// "[perf]" (hidden) times the unfused baseline at the default large-D shape.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "baselines/unfused.hpp"
#include "philox.cuh"
#include "reference/cpu_reference.hpp"
#include "reference/reference.hpp"
#include "tensors/tensors.hpp"
#include "unfused/kernels.hpp"
#include "unfused/lt_gemm.hpp"

using namespace ffpa;

namespace {

Elem in_elem(const Problem& p) {
  return p.dtype == Dtype::bf16 ? Elem::bf16 : Elem::f16;
}
Elem bias_elem(const Problem& p) {
  return p.bias_dtype == BiasDtype::fp32 ? Elem::f32 : in_elem(p);
}

struct Kind {
  const char* name;
  Causal causal = Causal::none;
  BiasKind bias = BiasKind::none;
  BiasDtype bias_dtype = BiasDtype::fp32;
  double dropout = 0;
  int group = 1;  // Hq / Hkv; 0 = MQA (Hkv = 1)
  int shape = 0;  // 0 self (Nq = Nkv), 1 cross (Nq < Nkv), 2 decode (Nq = 1), 3 Nq > Nkv
};

const Kind kKinds[] = {
    {"self"},
    {"cross", Causal::none, BiasKind::none, BiasDtype::fp32, 0, 1, 1},
    {"decode", Causal::none, BiasKind::none, BiasDtype::fp32, 0, 1, 2},
    {"gqa", Causal::none, BiasKind::none, BiasDtype::fp32, 0, 4},
    {"mqa", Causal::none, BiasKind::none, BiasDtype::fp32, 0, 0, 1},
    {"causal bottom-right", Causal::bottom_right},
    {"causal bottom-right Nq>Nkv", Causal::bottom_right, BiasKind::none, BiasDtype::fp32, 0, 2, 3},
    {"causal top-left cross", Causal::top_left, BiasKind::none, BiasDtype::fp32, 0, 1, 1},
    {"key bias fp32", Causal::none, BiasKind::key},
    {"key bias input dtype gqa", Causal::none, BiasKind::key, BiasDtype::input, 0, 2, 1},
    {"query_key bias", Causal::none, BiasKind::query_key, BiasDtype::fp32, 0, 1, 1},
    {"full bias causal", Causal::bottom_right, BiasKind::full, BiasDtype::input},
    {"dropout", Causal::none, BiasKind::none, BiasDtype::fp32, 0.1},
    {"dropout gqa causal key bias", Causal::bottom_right, BiasKind::key, BiasDtype::fp32, 0.3, 2,
     1},
};

Problem random_problem(const Kind& k, Dtype dt, std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  static const int kD[] = {16, 33, 40, 64, 72, 96, 128, 136, 200};
  Problem p;
  p.case_name = k.name;
  p.dtype = dt;
  p.causal = k.causal;
  p.bias = k.bias;
  p.bias_dtype = k.bias_dtype;
  p.dropout = k.dropout;
  p.seed = static_cast<uint64_t>(rng());
  Shape& s = p.shape;
  s.B = pick(1, 2);
  s.Hkv = k.group == 0 ? 1 : pick(1, 2);
  s.Hq = k.group == 0 ? pick(2, 4) : s.Hkv * k.group;
  s.D = kD[pick(0, 8)];
  const int n = pick(1, 90);
  s.Nq = s.Nkv = n;
  if (k.shape == 1) {
    s.Nq = pick(1, 40);
    s.Nkv = s.Nq + pick(1, 100);
  } else if (k.shape == 2) {
    s.Nq = 1;
    s.Nkv = pick(20, 300);
  } else if (k.shape == 3) {
    s.Nkv = pick(1, 40);
    s.Nq = s.Nkv + pick(1, 30);
  }
  return p;
}

std::string describe(const Problem& p) {
  const Shape& s = p.shape;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s B=%lld Hq=%lld Hkv=%lld Nq=%lld Nkv=%lld D=%lld seed=%llu",
                p.case_name.c_str(), to_string(p.dtype).c_str(), (long long)s.B, (long long)s.Hq,
                (long long)s.Hkv, (long long)s.Nq, (long long)s.Nkv, (long long)s.D,
                (unsigned long long)p.seed);
  return buf;
}

HostAttnInputs host_inputs(const AttnTensors& t, bool bwd) {
  const Problem& p = t.problem;
  HostAttnInputs in;
  in.q = download(t.q.get(), in_elem(p), t.q_elems());
  in.k = download(t.k.get(), in_elem(p), t.kv_elems());
  in.v = download(t.v.get(), in_elem(p), t.kv_elems());
  if (p.bias != BiasKind::none) in.bias = download(t.bias.get(), bias_elem(p), p.bias_elems());
  if (bwd) in.dout = download(t.dout.get(), in_elem(p), t.q_elems());
  in.dropout_seed = t.dropout_seed;
  in.dropout_offset = t.dropout_offset;
  return in;
}

// max |gpu - cpu| relative to max |cpu|; infinities must match exactly.
double rel_err(const gpu::DeviceBuffer& dev, const std::vector<double>& cpu) {
  const std::vector<double> g = download(dev.get(), Elem::f32, static_cast<int64_t>(cpu.size()));
  double m = 0, scale = 1e-6;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (std::isinf(cpu[i])) {
      if (g[i] != cpu[i]) return INFINITY;
      continue;
    }
    if (!std::isfinite(g[i])) return INFINITY;
    m = std::max(m, std::fabs(g[i] - cpu[i]));
    scale = std::max(scale, std::fabs(cpu[i]));
  }
  return m / scale;
}

void require_pass(const std::vector<TensorCheck>& checks, size_t expected) {
  REQUIRE(checks.size() == expected);
  for (const TensorCheck& c : checks) {
    INFO(c.tensor << ": max_abs " << c.max_abs << " bound " << c.bound << " rel_rms " << c.rel_rms
                  << " nonfinite " << c.nonfinite);
    CHECK(c.pass);
  }
}

}  // namespace

TEST_CASE("GPU dropout stream equals the host generator bit for bit", "[gpu][philox]") {
  const std::pair<uint64_t, uint64_t> streams[] = {
      {42, 0}, {2024, 4}, {4886718345ull, 13}, {0xfedcba9876543210ull, (1ull << 33) + 3}};
  for (const auto& [seed, off] : streams) {
    const int64_t n = 100003;
    const std::vector<float> g = dropout_uniforms_gpu(n, seed, off);
    int64_t diff = 0;
    for (int64_t e = 0; e < n; ++e)
      diff += g[e] != ffpa_dropout_uniform(seed, off, static_cast<unsigned long long>(e));
    CHECK(diff == 0);
  }
}

TEST_CASE("tensors: seeded normal inputs, NaN-poisoned outputs, dropout stream from the seed",
          "[gpu][tensors]") {
  Problem p;
  p.shape = {2, 4, 2, 300, 301, 64};
  p.bias = BiasKind::query_key;
  p.bias_scale = 0.25;
  p.seed = 5;
  AttnTensors a(p, Pass::bwd), b(p, Pass::bwd);
  const std::vector<double> q = download(a.q.get(), Elem::bf16, a.q_elems());
  double mean = 0, sq = 0;
  for (double x : q) {
    mean += x;
    sq += x * x;
  }
  mean /= q.size();
  const double sd = std::sqrt(sq / q.size() - mean * mean);
  CHECK(std::fabs(mean) < 0.01);
  CHECK(std::fabs(sd - 1.0) < 0.01);
  CHECK(q == download(b.q.get(), Elem::bf16, b.q_elems()));  // same seed, same data
  CHECK(q != download(a.dout.get(), Elem::bf16, a.q_elems()));
  const std::vector<double> k = download(a.k.get(), Elem::bf16, a.kv_elems());
  CHECK(k != download(a.v.get(), Elem::bf16, a.kv_elems()));
  const std::vector<double> bias = download(a.bias.get(), Elem::f32, p.bias_elems());
  double bsq = 0;
  for (double x : bias) bsq += x * x;
  CHECK(std::sqrt(bsq / bias.size()) == Approx(0.25).epsilon(0.05));
  for (const gpu::DeviceBuffer* o : {&a.o, &a.dq, &a.dk, &a.dv})
    for (double x : download(o->get(), Elem::bf16, 16)) CHECK(std::isnan(x));
  CHECK(a.dropout_seed == b.dropout_seed);
  Problem other = p;
  other.seed = 6;
  AttnTensors c(other, Pass::fwd);
  CHECK(c.dropout_seed != a.dropout_seed);
  CHECK(q != download(c.q.get(), Elem::bf16, c.q_elems()));
  CHECK(!c.dout);

  const FfpaBwdParams bp = a.bwd_params();
  CHECK(bp.fwd.bias_row_stride == 301);
  CHECK(bp.fwd.bias_head_stride == 0);
  CHECK(bp.fwd.group == 2);
  CHECK(bp.fwd.k_batch_stride == 2 * 301 * 64);
  CHECK(bp.dq_head_stride == 300 * 64);
  CHECK(bp.fwd.dropout_seed == a.dropout_seed);
}

TEST_CASE("GPU reference matches the CPU reference, unfused passes FA3's rule", "[gpu][unfused]") {
  std::mt19937 rng(20261202);
  auto unfused = make_unfused_baseline();
  for (const Kind& kind : kKinds)
    for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
      const Problem p = random_problem(kind, dt, rng);
      INFO(describe(p));
      const bool biased = p.bias != BiasKind::none;
      // Forward.
      AttnTensors tf(p, Pass::fwd);
      const HostAttnOutputs cf = cpu_attention(p, host_inputs(tf, false));
      const Reference rf = compute_reference(tf, Pass::fwd);
      CHECK(rel_err(rf.o, cf.o) < 2e-5);
      CHECK(rel_err(rf.lse, cf.lse) < 2e-6);
      REQUIRE(unfused->supports(p, Pass::fwd).ok());
      {
        const int64_t before = gpu::memory_stats().current;
        auto op = unfused->bind(p, Pass::fwd, tf);
        CHECK(gpu::memory_stats().current - before == op->extra_bytes());
        op->launch(nullptr);
        FFPA_CUDA(cudaDeviceSynchronize());
        require_pass(check_outputs(tf, rf, Pass::fwd), 2);
      }
      // Backward.
      AttnTensors tb(p, Pass::bwd);
      const HostAttnOutputs cb = cpu_attention(p, host_inputs(tb, true));
      const Reference rb = compute_reference(tb, Pass::bwd);
      CHECK(rel_err(rb.o, cb.o) < 2e-5);
      CHECK(rel_err(rb.dq, cb.dq) < 5e-5);
      CHECK(rel_err(rb.dk, cb.dk) < 5e-5);
      CHECK(rel_err(rb.dv, cb.dv) < 5e-5);
      if (biased) CHECK(rel_err(rb.dbias, cb.dbias) < 5e-5);
      write_forward_outputs(tb, rb);
      const int64_t before = gpu::memory_stats().current;
      auto op = unfused->bind(p, Pass::bwd, tb);
      CHECK(gpu::memory_stats().current - before == op->extra_bytes());
      for (int rep = 0; rep < 2; ++rep) {  // a launch must not depend on the previous one
        op->launch(nullptr);
        FFPA_CUDA(cudaDeviceSynchronize());
        require_pass(check_outputs(tb, rb, Pass::bwd), biased ? 4 : 3);
      }
    }
}

TEST_CASE("long rows: register and looping softmax paths, chunk boundaries", "[gpu][unfused]") {
  auto unfused = make_unfused_baseline();
  for (int64_t nkv : {2100, 5000, 17000}) {
    Problem p;
    p.case_name = "long";
    p.shape = {1, 2, 1, 3, nkv, 16};
    p.causal = Causal::bottom_right;
    p.bias = BiasKind::key;
    p.dropout = 0.2;
    p.seed = static_cast<uint64_t>(nkv);
    INFO(describe(p));
    AttnTensors t(p, Pass::bwd);
    const HostAttnOutputs c = cpu_attention(p, host_inputs(t, true));
    const Reference r = compute_reference(t, Pass::bwd);
    CHECK(rel_err(r.o, c.o) < 2e-5);
    CHECK(rel_err(r.lse, c.lse) < 2e-6);
    CHECK(rel_err(r.dq, c.dq) < 5e-5);
    CHECK(rel_err(r.dk, c.dk) < 5e-5);
    CHECK(rel_err(r.dv, c.dv) < 5e-5);
    CHECK(rel_err(r.dbias, c.dbias) < 5e-5);
    auto op = unfused->bind(p, Pass::bwd, t);
    op->launch(nullptr);
    FFPA_CUDA(cudaDeviceSynchronize());
    require_pass(check_outputs(t, r, Pass::bwd), 4);
  }
}

TEST_CASE("check_outputs fails a wrong, a NaN and an unwritten output", "[gpu][reference]") {
  Problem p;
  p.shape = {1, 2, 2, 40, 50, 64};
  p.seed = 11;
  AttnTensors t(p, Pass::fwd);
  const Reference r = compute_reference(t, Pass::fwd);
  // Nothing written yet: the NaN poison fails.
  for (const TensorCheck& c : check_outputs(t, r, Pass::fwd)) {
    CHECK_FALSE(c.pass);
    CHECK(c.nonfinite > 0);
  }
  write_forward_outputs(t, r);
  for (const TensorCheck& c : check_outputs(t, r, Pass::fwd)) CHECK(c.pass);
  CHECK(r.lowprec_err.at("o") > 0);
  // One element off by a few times the bound.
  const uint16_t big = 0x4000;  // 2.0 in bf16
  FFPA_CUDA(cudaMemcpy(t.o.as<char>() + 2 * 77, &big, 2, cudaMemcpyHostToDevice));
  CHECK_FALSE(check_outputs(t, r, Pass::fwd)[0].pass);
  const uint16_t nan = 0x7fc0;
  FFPA_CUDA(cudaMemcpy(t.o.as<char>() + 2 * 77, &nan, 2, cudaMemcpyHostToDevice));
  const TensorCheck c = check_outputs(t, r, Pass::fwd)[0];
  CHECK_FALSE(c.pass);
  CHECK(c.nonfinite == 1);
}

// Median milliseconds of `f` over 10 launches after 2 warmups, on the legacy stream.
template <class F>
double median_ms(F&& f) {
  cudaEvent_t a, b;
  FFPA_CUDA(cudaEventCreate(&a));
  FFPA_CUDA(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    FFPA_CUDA(cudaEventRecord(a, nullptr));
    f();
    FFPA_CUDA(cudaEventRecord(b, nullptr));
    FFPA_CUDA(cudaEventSynchronize(b));
    float x = 0;
    FFPA_CUDA(cudaEventElapsedTime(&x, a, b));
    if (i >= 2) ms.push_back(x);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

Problem timing_problem(const char* name) {
  Problem p;
  p.case_name = name;
  p.shape = {1, 32, 32, 8192, 8192, 512};
  p.dtype = Dtype::bf16;
  return p;
}

// The brief's timing shape: bf16, B=1, H=32, N=8192, D=512. Also checks the result there, which
// exercises the reference's chunking at scale.
TEST_CASE("unfused timing at D=512, N=8192", "[.][perf]") {
  auto unfused = make_unfused_baseline();
  for (Pass pass : {Pass::fwd, Pass::bwd}) {
    const Problem p = timing_problem("self");
    AttnTensors t(p, pass);
    const Reference r = compute_reference(t, pass);
    if (pass == Pass::bwd) write_forward_outputs(t, r);
    auto op = unfused->bind(p, pass, t);
    op->launch(nullptr);
    FFPA_CUDA(cudaDeviceSynchronize());
    const auto checks = check_outputs(t, r, pass);
    for (const TensorCheck& c : checks)
      std::printf("check %s %s: max_abs %.3g bound %.3g rel_rms %.3g %s\n", to_string(pass).c_str(),
                  c.tensor.c_str(), c.max_abs, c.bound, c.rel_rms, c.pass ? "ok" : "FAIL");
    require_pass(checks, pass == Pass::fwd ? 2 : 3);
  }
  // Timings of the default cases' features at the same shape.
  struct Variant {
    const char* name;
    Causal causal;
    BiasKind bias;
    double dropout;
    int64_t hkv;
  };
  const Variant vs[] = {{"self", Causal::none, BiasKind::none, 0, 32},
                        {"gqa", Causal::none, BiasKind::none, 0, 8},
                        {"causal", Causal::bottom_right, BiasKind::none, 0, 32},
                        {"key-bias", Causal::none, BiasKind::key, 0, 32},
                        {"dropout", Causal::none, BiasKind::none, 0.1, 32}};
  for (const Variant& v : vs)
    for (Pass pass : {Pass::fwd, Pass::bwd}) {
      Problem p = timing_problem(v.name);
      p.causal = v.causal;
      p.bias = v.bias;
      p.dropout = v.dropout;
      p.shape.Hkv = v.hkv;
      AttnTensors t(p, pass);
      auto op = unfused->bind(p, pass, t);
      const double ms = median_ms([&] { op->launch(nullptr); });
      std::printf("unfused %-8s %s bf16 D=512 N=8192 H=32: %.3f ms, %.1f TFLOPS, extra %.2f GiB\n",
                  v.name, to_string(pass).c_str(), ms, p.flops(pass) / (ms * 1e9),
                  op->extra_bytes() / double(1 << 30));
    }
}

// Where the forward's time goes: each stage alone, same buffers and plans as the baseline.
TEST_CASE("unfused forward stages at D=512, N=8192", "[.][perf]") {
  const Problem p = timing_problem("self");
  AttnTensors t(p, Pass::fwd);
  const int64_t N = 8192, D = 512, H = 32;
  gpu::DeviceBuffer s(H * N * N * 2), ws(kGemmWorkspaceBytes);
  auto desc = [&](int64_t M, int64_t n, int64_t K, bool tb, int64_t lda, int64_t sa, int64_t ldb,
                  int64_t sb, int64_t ldc, int64_t sc) {
    GemmDesc d;
    d.M = M, d.N = n, d.K = K, d.batch = H, d.trans_b = tb;
    d.lda = lda, d.ldb = ldb, d.ldc = ldc, d.stride_a = sa, d.stride_b = sb, d.stride_c = sc;
    return d;
  };
  const GemmTuneArgs qa{t.q.get(), t.k.get(), s.get(), 1.f, 0.f};
  Gemm qk(desc(N, N, D, true, D, N * D, D, N * D, N, N * N), ws.get(), kGemmWorkspaceBytes, &qa);
  const GemmTuneArgs pa{s.get(), t.v.get(), t.o.get(), 1.f, 0.f};
  Gemm pv(desc(N, D, N, false, N, N * N, D, N * D, D, N * D), ws.get(), kGemmWorkspaceBytes, &pa);
  SoftmaxFwdArgs a{};
  a.g = RowGeometry{0, H * N, N, static_cast<int>(H), static_cast<int>(N), static_cast<int>(N), 0};
  a.elem = Elem::bf16;
  a.s = s.get();
  a.lse = t.lse.as<float>();
  const double g1 = median_ms([&] { qk.run(t.q.get(), t.k.get(), s.get(), 0.04f, 0.f, nullptr); });
  const double sm = median_ms([&] { softmax_fwd(a, nullptr); });
  a.drop = DropoutArgs{0.1f, 1, 0};
  a.drop_into_s = 1;
  const double smd = median_ms([&] { softmax_fwd(a, nullptr); });
  const double g2 = median_ms([&] { pv.run(s.get(), t.v.get(), t.o.get(), 1.f, 0.f, nullptr); });
  gpu::DeviceBuffer dp(H * N * N * 2);
  FFPA_CUDA(cudaMemset(dp.get(), 0, dp.bytes()));
  SoftmaxBwdArgs ba{};
  ba.g = a.g;
  ba.elem = Elem::bf16;
  ba.p = s.get();
  ba.ds = dp.get();
  ba.o = t.o.get();
  ba.dout = t.q.get();  // any [rows, D] data: only the traffic matters here
  ba.D = static_cast<int>(D);
  const double bw = median_ms([&] { softmax_bwd(ba, nullptr); });
  std::printf("stage dS pass (backward) %.3f ms (%.2f TB/s)\n", bw, 3.0 * H * N * N * 2 / bw / 1e9);
  const double gemm_tf = 2.0 * H * N * N * D / 1e9;
  const double bytes = 2.0 * H * N * N * 2;
  std::printf(
      "stage QK^T GEMM %.3f ms (%.0f TFLOPS); softmax %.3f ms (%.2f TB/s), with dropout "
      "%.3f ms; PV GEMM %.3f ms (%.0f TFLOPS)\n",
      g1, gemm_tf / g1, sm, bytes / sm / 1e9, smd, g2, gemm_tf / g2);
}
