// cuDNN fused SDPA against the double-precision host reference (reference/cpu_reference.hpp), for
// small shapes of every case kind. Tolerances are eps(dtype)-scaled bounds on the largest
// reference value; every case also checks that the reference of a *different* problem (the
// feature removed, or the other causal alignment) lies outside them, so a feature that cuDNN
// silently ignored could not pass. Dropout rows are not comparable element-wise (cuDNN's Philox
// stream differs from ours): there the LSE (taken before dropout) is compared, and O is checked
// for being finite, changed by dropout, and reproducible for the same seed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "baselines/cudnn/cudnn_sdpa.hpp"
#include "gpu/cuda.hpp"
#include "reference/cpu_reference.hpp"
#include "reference/reference.hpp"
#include "tensors/tensors.hpp"

using namespace ffpa;

namespace {

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(man, -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(man + 1024, exp - 25);
  return sign ? -v : v;
}

double bf16_to_double(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

enum class Host { f16, bf16, f32 };

Host io_type(const Problem& p) {
  return p.dtype == Dtype::bf16 ? Host::bf16 : Host::f16;
}
Host bias_type(const Problem& p) {
  return p.bias_dtype == BiasDtype::fp32 ? Host::f32 : io_type(p);
}

std::vector<double> fetch(const gpu::DeviceBuffer& b, Host t) {
  std::vector<double> out;
  if (!b) return out;
  if (t == Host::f32) {
    std::vector<float> f(b.bytes() / 4);
    FFPA_CUDA(cudaMemcpy(f.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
    out.assign(f.begin(), f.end());
    return out;
  }
  std::vector<uint16_t> h(b.bytes() / 2);
  FFPA_CUDA(cudaMemcpy(h.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
  out.resize(h.size());
  for (size_t i = 0; i < h.size(); ++i)
    out[i] = t == Host::bf16 ? bf16_to_double(h[i]) : half_to_double(h[i]);
  return out;
}

std::vector<uint8_t> raw(const gpu::DeviceBuffer& b) {
  std::vector<uint8_t> r(b.bytes());
  FFPA_CUDA(cudaMemcpy(r.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
  return r;
}

HostAttnInputs host_inputs(const AttnTensors& t, bool with_dout) {
  HostAttnInputs in;
  in.q = fetch(t.q, io_type(t.problem));
  in.k = fetch(t.k, io_type(t.problem));
  in.v = fetch(t.v, io_type(t.problem));
  if (t.problem.bias != BiasKind::none) in.bias = fetch(t.bias, bias_type(t.problem));
  if (with_dout) in.dout = fetch(t.dout, io_type(t.problem));
  in.dropout_seed = t.dropout_seed;
  in.dropout_offset = t.dropout_offset;
  return in;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// Largest |a - b|; NaN/Inf anywhere in `a` is reported as infinity.
double max_err(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    m = std::max(m, std::abs(a[i] - b[i]));
  }
  return m;
}

double eps(const Problem& p) {
  return p.dtype == Dtype::bf16 ? 1.0 / 256 : 1.0 / 2048;
}

struct Tol {
  double o, lse;
};
// O: a few output roundings plus P rounded to the input dtype; gradients go through two more
// low-precision products (dP, dS).
Tol tolerances(const Problem& p, const HostAttnOutputs& ref) {
  return {3 * eps(p) * max_abs(ref.o) + 1e-5, 2e-3 * std::max(1.0, max_abs(ref.lse))};
}
double grad_tol(const Problem& p, const std::vector<double>& ref) {
  return 8 * eps(p) * max_abs(ref) + 1e-5;
}

// The bench's own --check: FA3's rule against the GPU fp32 reference. `skip` names a tensor the
// op did not produce.
void check_rule(const AttnTensors& t, Pass pass, const std::string& skip = {}) {
  const Reference ref = compute_reference(t, pass);
  for (const TensorCheck& c : check_outputs(t, ref, pass)) {
    if (c.tensor == skip) continue;
    INFO("FA3 rule on " << c.tensor << ": max_abs " << c.max_abs << ", bound " << c.bound
                        << ", non-finite " << c.nonfinite);
    CHECK(c.pass);
  }
}

cudaStream_t stream() {
  static gpu::Stream s;
  return s.get();
}

void run(Op& op) {
  op.launch(stream());
  FFPA_CUDA(cudaStreamSynchronize(stream()));
}

Problem make(const char* name, Dtype dt, Shape s) {
  Problem p;
  p.case_name = name;
  p.dtype = dt;
  p.shape = s;
  p.seed = 7;
  return p;
}

// The forward of p against the reference, and the reference of `other` (a problem that must be
// told apart) against the output. Returns the reference for the backward.
HostAttnOutputs check_fwd(const Problem& p, AttnTensors& t, const Problem* other = nullptr) {
  auto b = make_cudnn_baseline();
  auto op = b->bind(p, Pass::fwd, t);
  run(*op);
  const HostAttnInputs in = host_inputs(t, false);
  const HostAttnOutputs ref = cpu_attention(p, in);
  const Tol tol = tolerances(p, ref);
  const auto o = fetch(t.o, io_type(p)), lse = fetch(t.lse, Host::f32);
  INFO(p.case_name << " " << to_string(p.dtype) << " fwd via " << op->includes());
  std::printf("%s %s fwd: %s\n", p.case_name.c_str(), to_string(p.dtype).c_str(),
              op->includes().c_str());
  CHECK(max_err(o, ref.o) <= tol.o);
  CHECK(max_err(lse, ref.lse) <= tol.lse);
  check_rule(t, Pass::fwd);
  if (other) {
    const HostAttnOutputs alt = cpu_attention(*other, in);
    INFO("the check must tell this apart from " << other->case_name);
    CHECK(max_err(alt.o, ref.o) > 2 * tol.o);
  }
  return ref;
}

// Forward (for O and LSE) then backward, gradients against the reference.
void check_bwd(const Problem& p) {
  AttnTensors t(p, Pass::bwd);
  auto b = make_cudnn_baseline();
  run(*b->bind(p, Pass::fwd, t));
  auto op = b->bind(p, Pass::bwd, t);
  run(*op);
  const HostAttnOutputs ref = cpu_attention(p, host_inputs(t, true));
  INFO(p.case_name << " " << to_string(p.dtype) << " bwd via " << op->includes());
  std::printf("%s %s bwd, bias %s/%s: %s\n", p.case_name.c_str(), to_string(p.dtype).c_str(),
              to_string(p.bias).c_str(), to_string(p.bias_dtype).c_str(), op->includes().c_str());
  CHECK(max_err(fetch(t.dq, io_type(p)), ref.dq) <= grad_tol(p, ref.dq));
  CHECK(max_err(fetch(t.dk, io_type(p)), ref.dk) <= grad_tol(p, ref.dk));
  CHECK(max_err(fetch(t.dv, io_type(p)), ref.dv) <= grad_tol(p, ref.dv));
  const bool dbias = op->includes().rfind("dQ, dK, dV, dBias", 0) == 0;
  check_rule(t, Pass::bwd, dbias ? "" : "dbias");
  if (p.bias == BiasKind::none) return;
  if (dbias)
    CHECK(max_err(fetch(t.dbias, bias_type(p)), ref.dbias) <= grad_tol(p, ref.dbias));
  else
    WARN("cuDNN computed no dBias: " << op->includes());
}

std::string why_unsupported(const Problem& p, Pass pass) {
  AttnTensors t(p, pass);
  auto b = make_cudnn_baseline();
  try {
    if (pass == Pass::bwd) run(*b->bind(p, Pass::fwd, t));
    b->bind(p, pass, t);
  } catch (const Unsupported& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("cuDNN reports the version it loaded", "[gpu][cudnn]") {
  auto b = make_cudnn_baseline();
  REQUIRE(b->supports(make("self", Dtype::bf16, {1, 2, 2, 64, 64, 64}), Pass::fwd).ok());
  std::printf("cuDNN loaded: %s\n", b->version().c_str());
  CHECK(!b->version().empty());
}

TEST_CASE("cuDNN forward matches the reference", "[gpu][cudnn]") {
  const Dtype dt = GENERATE(Dtype::bf16, Dtype::fp16);
  SECTION("self") {
    Problem p = make("self", dt, {1, 4, 4, 192, 192, 128});
    AttnTensors t(p, Pass::fwd);
    check_fwd(p, t);
  }
  SECTION("B>1, D=64") {
    Problem p = make("batch", dt, {3, 2, 2, 128, 128, 64});
    AttnTensors t(p, Pass::fwd);
    check_fwd(p, t);
  }
  SECTION("cross") {
    Problem p = make("cross", dt, {1, 4, 4, 64, 320, 128});
    AttnTensors t(p, Pass::fwd);
    check_fwd(p, t);
  }
  SECTION("decode") {
    Problem p = make("decode", dt, {2, 8, 2, 1, 500, 128});
    AttnTensors t(p, Pass::fwd);
    check_fwd(p, t);
  }
  SECTION("gqa") {
    Problem p = make("gqa", dt, {1, 8, 2, 128, 128, 128});
    AttnTensors t(p, Pass::fwd);
    check_fwd(p, t);
  }
  SECTION("non-aligned") {
    Problem p = make("non-aligned", dt, {1, 4, 1, 127, 255, 64});
    AttnTensors t(p, Pass::fwd);
    check_fwd(p, t);
  }
  SECTION("causal, both alignments") {
    for (Causal c : {Causal::bottom_right, Causal::top_left}) {
      Problem p = make("causal", dt, {1, 4, 4, 96, 224, 128});
      p.causal = c;
      Problem other = p;
      other.case_name = "the other alignment";
      other.causal = c == Causal::top_left ? Causal::bottom_right : Causal::top_left;
      AttnTensors t(p, Pass::fwd);
      check_fwd(p, t, &other);
    }
  }
  SECTION("causal square") {
    Problem p = make("causal square", dt, {2, 2, 2, 200, 200, 64});
    p.causal = Causal::bottom_right;
    Problem other = p;
    other.case_name = "no bias";
    other.causal = Causal::none;
    AttnTensors t(p, Pass::fwd);
    check_fwd(p, t, &other);
  }
  SECTION("additive bias, each shape and dtype") {
    for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
      for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input}) {
        Problem p = make("bias", dt, {2, 4, 2, 128, 192, 128});
        p.bias = m;
        p.bias_dtype = md;
        p.bias_scale = 1.0;
        Problem other = p;
        other.case_name = "no bias";
        other.bias = BiasKind::none;
        AttnTensors t(p, Pass::fwd);
        check_fwd(p, t, &other);
      }
  }
  SECTION("bottom-right causal with a key bias") {
    Problem p = make("causal+bias", dt, {1, 2, 2, 64, 192, 64});
    p.causal = Causal::bottom_right;
    p.bias = BiasKind::key;
    p.bias_scale = 1.0;
    Problem other = p;
    other.case_name = "top-left";
    other.causal = Causal::top_left;
    AttnTensors t(p, Pass::fwd);
    check_fwd(p, t, &other);
  }
  SECTION("D=256 and D=512") {
    for (int64_t d : {256, 512}) {
      Problem p = make("large D", dt, {1, 2, 2, 128, 128, d});
      AttnTensors t(p, Pass::fwd);
      check_fwd(p, t);
    }
  }
}

TEST_CASE("cuDNN dropout: not comparable element-wise (different RNG stream)", "[gpu][cudnn]") {
  Problem p = make("dropout", Dtype::bf16, {1, 4, 4, 128, 256, 128});
  p.dropout = 0.1;
  AttnTensors t(p, Pass::fwd);
  auto b = make_cudnn_baseline();
  auto op = b->bind(p, Pass::fwd, t);
  run(*op);
  const auto o1 = raw(t.o);
  Problem plain = p;
  plain.dropout = 0;
  const HostAttnOutputs ref = cpu_attention(plain, host_inputs(t, false));
  const Tol tol = tolerances(p, ref);
  const auto o = fetch(t.o, Host::bf16);
  // The LSE is taken before dropout: it is comparable.
  CHECK(max_err(fetch(t.lse, Host::f32), ref.lse) <= tol.lse);
  CHECK(max_err(o, ref.o) < INFINITY);
  CHECK(max_err(o, ref.o) > 2 * tol.o);  // dropout changed the output
  run(*op);
  CHECK(raw(t.o) == o1);  // same seed and offset: same output
  t.dropout_seed += 1;
  run(*b->bind(p, Pass::fwd, t));
  CHECK(raw(t.o) != o1);

  AttnTensors tb(p, Pass::bwd);
  run(*b->bind(p, Pass::fwd, tb));
  auto bwd = b->bind(p, Pass::bwd, tb);
  run(*bwd);
  const auto dq1 = fetch(tb.dq, Host::bf16);
  CHECK(max_err(dq1, std::vector<double>(dq1.size(), 0.0)) < INFINITY);
  run(*bwd);
  CHECK(fetch(tb.dq, Host::bf16) == dq1);
}

TEST_CASE("cuDNN backward matches the reference at D <= 256", "[gpu][cudnn]") {
  const Dtype dt = GENERATE(Dtype::bf16, Dtype::fp16);
  SECTION("self") {
    check_bwd(make("self", dt, {1, 4, 4, 128, 128, 128}));
  }
  SECTION("B>1, cross, D=64") {
    check_bwd(make("cross", dt, {2, 2, 2, 64, 192, 64}));
  }
  SECTION("gqa") {
    check_bwd(make("gqa", dt, {1, 8, 2, 128, 128, 128}));
  }
  SECTION("non-aligned") {
    check_bwd(make("non-aligned", dt, {1, 4, 1, 127, 127, 64}));
  }
  SECTION("causal, both alignments") {
    for (Causal c : {Causal::bottom_right, Causal::top_left}) {
      Problem p = make("causal", dt, {1, 2, 2, 64, 192, 128});
      p.causal = c;
      check_bwd(p);
    }
  }
  SECTION("bias with dBias") {
    for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
      for (BiasDtype md : {BiasDtype::input, BiasDtype::fp32}) {
        Problem p = make("bias", dt, {2, 2, 2, 128, 128, 64});
        p.bias = m;
        p.bias_dtype = md;
        try {
          check_bwd(p);
        } catch (const Unsupported& e) {
          WARN("cuDNN refused " << to_string(m) << " bias backward: " << e.what());
        }
      }
  }
  SECTION("D=256") {
    check_bwd(make("D256", dt, {1, 2, 2, 128, 128, 256}));
  }
}

TEST_CASE("cuDNN refuses the backward above D=256 with a reason", "[gpu][cudnn]") {
  const std::string why =
      why_unsupported(make("D512", Dtype::bf16, {1, 2, 2, 128, 128, 512}), Pass::bwd);
  std::printf("D=512 backward: %s\n", why.c_str());
  CHECK(why.find("hidden_dim") != std::string::npos);
}

TEST_CASE("a built graph is cached per problem and pass", "[gpu][cudnn]") {
  Problem p = make("cache", Dtype::bf16, {1, 2, 2, 64, 64, 64});
  auto b = make_cudnn_baseline();
  const int64_t estimate = b->extra_bytes(p, Pass::bwd);
  AttnTensors t(p, Pass::bwd);
  run(*b->bind(p, Pass::fwd, t));
  auto op = b->bind(p, Pass::bwd, t);
  // Once built, the baseline reports the graph's own workspace, the same the op holds.
  CHECK(b->extra_bytes(p, Pass::bwd) == op->extra_bytes());
  std::printf("bwd workspace: estimate %lld, actual %lld\n", static_cast<long long>(estimate),
              static_cast<long long>(op->extra_bytes()));
}

double median_ms(Op& op) {
  for (int i = 0; i < 3; ++i) op.launch(stream());
  gpu::Event start, stop;
  std::vector<float> ms;
  for (int i = 0; i < 10; ++i) {
    start.record(stream());
    op.launch(stream());
    stop.record(stream());
    FFPA_CUDA(cudaStreamSynchronize(stream()));
    ms.push_back(stop.since(start));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Timing sanity check against ANCHORS.md (bf16, B=1, H=32, N=8192): run explicitly with "[perf]".
TEST_CASE("cuDNN timing at N=8192", "[.][perf]") {
  for (auto [d, pass] : {std::pair<int64_t, Pass>{512, Pass::fwd},
                         {128, Pass::fwd},
                         {128, Pass::bwd},
                         {256, Pass::bwd}}) {
    for (Causal c : {Causal::none, Causal::bottom_right}) {
      Problem p = make("perf", Dtype::bf16, {1, 32, 32, 8192, 8192, d});
      p.causal = c;
      AttnTensors t(p, pass);
      auto b = make_cudnn_baseline();
      if (pass == Pass::bwd) run(*b->bind(p, Pass::fwd, t));
      auto op = b->bind(p, pass, t);
      const double med = median_ms(*op);
      std::printf("PERF cudnn %s D=%lld causal=%s: median %.3f ms = %.1f TFLOPS (%s)\n",
                  to_string(pass).c_str(), static_cast<long long>(d), to_string(c).c_str(), med,
                  p.flops(pass) / (med * 1e9), op->includes().c_str());
    }
  }
}
