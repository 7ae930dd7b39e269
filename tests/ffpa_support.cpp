#include "ffpa_support.hpp"

#include <catch2/catch.hpp>

#include "philox.cuh"
#include "reference/reference.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_fwd_sm80.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

namespace ffpa::test {

Problem make(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nkv, int64_t D, Dtype dt) {
  Problem p;
  p.case_name = "test";
  p.shape = {B, Hq, Hkv, Nq, Nkv, D};
  p.dtype = dt;
  p.seed = 1;
  return p;
}

std::vector<Problem> bias_problems(int D, Dtype dt) {
  std::vector<Problem> out;
  for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
    for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input}) {
      Problem p = make(2, 4, 2, 37, 90, D, dt);
      p.bias = m;
      p.bias_dtype = md;
      out.push_back(p);
    }
  return out;
}

Problem compile_problem(int D, Causal causal) {
  Problem p;
  p.shape = {1, 32, 32, 8192, 8192, D};
  p.causal = causal;
  return p;
}

gpu::DeviceInfo h200() {
  gpu::DeviceInfo d;
  d.sm_major = 9;
  d.sm_count = 132;
  d.smem_per_block_optin = 227 * 1024;
  return d;
}

FreshCache::FreshCache() {
  setenv("XDG_CACHE_HOME", dir.path().c_str(), 1);
}
FreshCache::~FreshCache() {
  unsetenv("XDG_CACHE_HOME");
}

void check_clean(const nvrtc::Compiled& comp, std::initializer_list<const char*> kernels,
                 int fences) {
  CHECK_FALSE(comp.cubin.empty());
  for (const char* k : kernels) {
    const auto it = comp.info.find(k);
    INFO(k << "\n" << comp.log);
    REQUIRE(it != comp.info.end());
    CHECK(it->second.registers > 0);
    CHECK(it->second.registers <= 255);
    CHECK(it->second.spill_stores == 0);
    CHECK(it->second.spill_loads == 0);
    CHECK(it->second.stack_bytes == 0);
    CHECK(sass_count(comp, k, "MEMBAR.ALL.GPU") <= fences);
  }
}

namespace {

// How often each SASS mnemonic occurs in each function of the cubin (nvdisasm), by function name.
// Compile tests check the same cubin more than once (each kernel of a module, a cached compile):
// one disassembly a cubin.
using SassCounts = std::map<std::string, std::map<std::string, int>>;
const SassCounts& sass_of(const std::string& cubin) {
  static std::mutex mu;
  static std::map<size_t, SassCounts> memo;
  const size_t key = std::hash<std::string>{}(cubin);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  TempDir dir;
  const std::string path = (dir.path() / "k.cubin").string();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
    REQUIRE(out.good());
  }
  const std::string cmd = std::string("'") + FFPA_NVDISASM + "' -c '" + path + "' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  REQUIRE(pipe);
  // A function starts at its ".text.NAME:" label; an instruction line reads
  // "/*0850*/  [@P0] OPCODE ...".
  SassCounts fns;
  std::map<std::string, int>* fn = nullptr;
  std::string head;  // the start of the output, for a failure's message
  char buf[4096];
  while (fgets(buf, sizeof buf, pipe.get())) {
    const std::string line = buf;
    if (head.size() < 2000) head += line;
    if (line.rfind(".text.", 0) == 0) {
      fn = &fns[line.substr(6, line.find(':') - 6)];
      continue;
    }
    if (!fn) continue;
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      if (w.rfind("/*", 0) == 0 || w[0] == '@') continue;
      if (w[0] != '.' && w.find(':') == std::string::npos) ++(*fn)[w];
      break;
    }
  }
  INFO("nvdisasm output:\n" << head);
  REQUIRE(!fns.empty());
  return memo.emplace(key, std::move(fns)).first->second;
}

}  // namespace

int sass_count(const nvrtc::Compiled& comp, const std::string& kernel, const std::string& opcode) {
  const auto& fns = sass_of(comp.cubin);
  const auto it = fns.find(kernel);
  INFO("kernel " << kernel << " in the cubin's SASS");
  REQUIRE(it != fns.end());
  int n = 0;
  for (const auto& [op, count] : it->second)
    if (op.rfind(opcode, 0) == 0) n += count;
  return n;
}

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

namespace {

float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t to_fp16(float f) {  // round to nearest even; |f| stays well inside the normal range
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  uint32_t mant = u & 0x7fffff;
  if (exp <= 0) {  // subnormal half
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}
float from_fp16(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v = exp == 0    ? std::ldexp(static_cast<float>(mant), -24)
            : exp == 31 ? (mant ? NAN : INFINITY)
                        : std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return (h & 0x8000) ? -v : v;
}

}  // namespace

uint16_t Half::to(float f) const {
  return dt == Dtype::bf16 ? to_bf16(f) : to_fp16(f);
}
float Half::from(uint16_t h) const {
  return dt == Dtype::bf16 ? from_bf16(h) : from_fp16(h);
}

gpu::DeviceBuffer upload_half(const std::vector<double>& x, Half h) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = h.to(static_cast<float>(x[i]));
  gpu::DeviceBuffer d(bits.size() * 2);
  FFPA_CUDA(cudaMemcpy(d.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  return d;
}

namespace {

// Random normal values rounded to the dtype; `exact` receives what the kernel will read.
gpu::DeviceBuffer upload_randn(int64_t n, Half h, std::mt19937& rng, double scale,
                               std::vector<double>& exact) {
  std::normal_distribution<float> nd(0.f, 1.f);
  exact.resize(static_cast<size_t>(n));
  for (auto& x : exact) x = h.from(h.to(nd(rng) * static_cast<float>(scale)));
  return upload_half(exact, h);  // a dtype value converts back to its own bits
}

// The problem's additive bias (fp32 or the input dtype), random normal * 0.25; `exact` as above.
gpu::DeviceBuffer upload_bias(const Problem& pr, Half h, std::mt19937& rng,
                              std::vector<double>& exact) {
  const int64_t n = pr.bias_elems();
  if (pr.bias_dtype != BiasDtype::fp32) return upload_randn(n, h, rng, 0.25, exact);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> b(static_cast<size_t>(n));
  exact.resize(b.size());
  for (size_t i = 0; i < b.size(); ++i) exact[i] = b[i] = nd(rng) * 0.25f;
  gpu::DeviceBuffer d(b.size() * 4);
  FFPA_CUDA(cudaMemcpy(d.get(), b.data(), b.size() * 4, cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

DeviceInputs upload_inputs(const Problem& pr, std::mt19937& rng, bool with_dout,
                           HostAttnInputs& in) {
  const auto& s = pr.shape;
  const Half h{pr.dtype};
  in.dropout_seed = 0x1234abcd5678ef01ull;
  in.dropout_offset = 12345;
  const int64_t nq = s.B * s.Hq * s.Nq * s.D, nkv = s.B * s.Hkv * s.Nkv * s.D;
  DeviceInputs d;
  d.q = upload_randn(nq, h, rng, 1.0, in.q);
  d.k = upload_randn(nkv, h, rng, 1.0, in.k);
  d.v = upload_randn(nkv, h, rng, 1.0, in.v);
  if (with_dout) d.dout = upload_randn(nq, h, rng, 1.0, in.dout);
  if (pr.bias != BiasKind::none) d.bias = upload_bias(pr, h, rng, in.bias);
  return d;
}

std::vector<double> download_half(const gpu::DeviceBuffer& d, Half h) {
  std::vector<uint16_t> bits(d.bytes() / 2);
  FFPA_CUDA(cudaMemcpy(bits.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  std::vector<double> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = h.from(bits[i]);
  return out;
}

gpu::DeviceBuffer poisoned(size_t bytes) {
  gpu::DeviceBuffer d(bytes);
  FFPA_CUDA(cudaMemset(d.get(), 0xff, bytes));
  return d;
}

void expect_passed(const std::vector<TensorCheck>& checks) {
  for (const TensorCheck& c : checks) {
    INFO(c.tensor << " max_abs=" << c.max_abs << " bound=" << c.bound << " rel_rms=" << c.rel_rms
                  << " nonfinite=" << c.nonfinite);
    CHECK(c.pass);
    CHECK(c.nonfinite == 0);
  }
}

double median_ms(Op& op, int warmup, int iters, const char* name) {
  gpu::Stream st;
  for (int i = 0; i < warmup; ++i) op.launch(st.get());
  st.sync();
  std::vector<float> ms;
  gpu::Event a, b;
  for (int i = 0; i < iters; ++i) {
    a.record(st.get());
    op.launch(st.get());
    b.record(st.get());
    st.sync();
    ms.push_back(b.since(a));
  }
  gpu::check_launch(name);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void bench_forward(const char* name, const Problem& pr, const std::string& config,
                   const BindForward& bind) {
  const auto& s = pr.shape;
  std::mt19937 rng(7);
  gpu::DeviceBuffer q = big_random(s.B * s.Hq * s.Nq * s.D, rng);
  gpu::DeviceBuffer k = big_random(s.B * s.Hkv * s.Nkv * s.D, rng);
  gpu::DeviceBuffer v = big_random(s.B * s.Hkv * s.Nkv * s.D, rng);
  gpu::DeviceBuffer o(static_cast<size_t>(s.B * s.Hq * s.Nq * s.D) * 2);
  gpu::DeviceBuffer lse(static_cast<size_t>(s.B * s.Hq * s.Nq) * 4);
  FfpaFwdParams p = contiguous_params(pr, HostAttnInputs{});
  p.q = q.get(), p.k = k.get(), p.v = v.get(), p.o = o.get(), p.lse = lse.as<float>();
  // A bias in the input dtype (random like the inputs), in the problem's broadcast shape.
  REQUIRE((pr.bias == BiasKind::none || pr.bias_dtype == BiasDtype::input));
  gpu::DeviceBuffer bias;
  if (pr.bias != BiasKind::none) {
    bias = big_random(pr.bias_elems(), rng);
    p.bias = bias.get();
  }
  std::unique_ptr<Op> op;
  try {
    op = bind(p, gpu::open_device(0));
  } catch (const Unsupported& e) {
    std::printf("%-8s D=%4lld %s: unsupported (%s)\n", name, (long long)s.D, config.c_str(),
                e.what());
    return;
  }
  const double med = median_ms(*op, 3, 10, name);
  std::printf("%-8s D=%4lld Nq=%5lld Nkv=%5lld Hq=%lld Hkv=%lld %-18s %8.3f ms %7.1f TFLOPS\n",
              name, (long long)s.D, (long long)s.Nq, (long long)s.Nkv, (long long)s.Hq,
              (long long)s.Hkv, config.c_str(), med, pr.flops(Pass::fwd) / (med * 1e9));
}

void bench_backward(const char* name, const Problem& pr, const std::string& config,
                    const BindBackwardTensors& bind) {
  const gpu::DeviceInfo dev = gpu::open_device(0);
  AttnTensors t(pr, Pass::bwd);
  auto fwd_variant = make_ffpa_fwd_sm80();
  {
    auto fwd_op = fwd_variant->bind(pr, fwd_variant->default_knobs(pr), t, dev);
    fwd_op->launch(nullptr);
    FFPA_CUDA(cudaDeviceSynchronize());  // before its library is unloaded
  }
  std::unique_ptr<Op> op;
  try {
    op = bind(t, dev);
  } catch (const Unsupported& e) {
    std::printf("%-10s %s %s: unsupported (%s)\n", name, describe(pr).c_str(), config.c_str(),
                e.what());
    return;
  }
  const double med = median_ms(*op, 2, 5, name);
  std::printf("%-10s %s %-30s %9.3f ms %7.1f TFLOPS  [%s]\n", name, describe(pr).c_str(),
              config.c_str(), med, pr.flops(Pass::bwd) / (med * 1e9), op->includes().c_str());
}

FfpaFwdParams contiguous_params(const Problem& pr, const HostAttnInputs& in) {
  const auto& s = pr.shape;
  FfpaFwdParams p{};
  p.q_row_stride = p.o_row_stride = s.D;
  p.q_head_stride = p.o_head_stride = s.Nq * s.D;
  p.q_batch_stride = p.o_batch_stride = s.Hq * s.Nq * s.D;
  p.k_row_stride = p.v_row_stride = s.D;
  p.k_head_stride = p.v_head_stride = s.Nkv * s.D;
  p.k_batch_stride = p.v_batch_stride = s.Hkv * s.Nkv * s.D;
  if (pr.bias != BiasKind::none) {
    p.bias_row_stride = pr.bias == BiasKind::key ? 0 : s.Nkv;
    p.bias_head_stride = pr.bias == BiasKind::full ? s.Nq * s.Nkv : 0;
    p.bias_batch_stride = pr.bias == BiasKind::full ? s.Hq * s.Nq * s.Nkv : 0;
  }
  p.bias_is_fp32 = pr.bias_dtype == BiasDtype::fp32;
  p.is_bf16 = pr.dtype == Dtype::bf16;
  p.B = static_cast<int>(s.B), p.Hq = static_cast<int>(s.Hq), p.Hkv = static_cast<int>(s.Hkv);
  p.Nq = static_cast<int>(s.Nq), p.Nkv = static_cast<int>(s.Nkv), p.D = static_cast<int>(s.D);
  p.group = static_cast<int>(s.group());
  p.scale = static_cast<float>(pr.scale());
  p.scale_log2 = static_cast<float>(pr.scale() * 1.4426950408889634);
  p.causal = pr.causal == Causal::bottom_right ? 1 : pr.causal == Causal::top_left ? 2 : 0;
  p.dropout_keep_min = ffpa_keep_min(static_cast<float>(pr.dropout));
  p.dropout_scale = static_cast<float>(1.0 / (1.0 - pr.dropout));
  p.dropout_seed = in.dropout_seed;
  p.dropout_offset = in.dropout_offset;
  return p;
}

namespace {

struct ForwardOutcome {
  double max_err = 0, max_ref = 0, rel_l2 = 0, lse_err = 0;
  int64_t unwritten = 0;  // NaN left from the poison, or -inf lse where a key was visible
  // Where O is off by more than the max-error tolerance: a first-run diagnosis. LSE depends on QK
  // only, O on PV too: a bad O with a good LSE points at the V descriptor or the P fragments.
  int64_t bad = 0, first_bad = -1;
  int64_t bad_col64[64] = {}, bad_row16[16] = {};  // by column % 64 and query row % 16
};

double eps_of(const Problem& pr) {
  return pr.dtype == Dtype::bf16 ? 1.0 / 256 : 1.0 / 2048;
}

std::string histogram(const int64_t* v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    if (v[i]) out += std::to_string(i) + ":" + std::to_string(v[i]) + " ";
  return out;
}

ForwardOutcome run_forward(const Problem& pr, const BindForward& bind) {
  const auto& s = pr.shape;
  const Half h{pr.dtype};
  std::mt19937 rng(static_cast<uint32_t>(pr.seed * 7919 + s.D * 31 + s.Nq));
  HostAttnInputs in;
  const DeviceInputs d = upload_inputs(pr, rng, false, in);
  const int64_t nq = s.B * s.Hq * s.Nq * s.D;
  const int64_t nlse = s.B * s.Hq * s.Nq;
  gpu::DeviceBuffer o = poisoned(static_cast<size_t>(nq) * 2);
  gpu::DeviceBuffer lse = poisoned(static_cast<size_t>(nlse) * 4);

  FfpaFwdParams p = contiguous_params(pr, in);
  p.q = d.q.get(), p.k = d.k.get(), p.v = d.v.get(), p.o = o.get(), p.lse = lse.as<float>();
  p.bias = d.bias.get();

  auto op = bind(p, gpu::open_device(0));
  gpu::Stream stream;
  op->launch(stream.get());
  gpu::check_launch("ffpa forward");
  stream.sync();

  std::vector<uint16_t> ob(static_cast<size_t>(nq));
  std::vector<float> lb(static_cast<size_t>(nlse));
  FFPA_CUDA(cudaMemcpy(ob.data(), o.get(), o.bytes(), cudaMemcpyDeviceToHost));
  FFPA_CUDA(cudaMemcpy(lb.data(), lse.get(), lse.bytes(), cudaMemcpyDeviceToHost));

  const HostAttnOutputs ref = cpu_attention(pr, in);
  ForwardOutcome r;
  double d2 = 0, r2 = 0;
  double ref_max = 0;
  for (int64_t i = 0; i < nq; ++i) ref_max = std::max(ref_max, std::abs(ref.o[i]));
  const double tol = 4 * eps_of(pr) * std::max(1.0, ref_max);
  for (int64_t i = 0; i < nq; ++i) {
    const double x = h.from(ob[i]);
    if (std::isnan(x)) {
      ++r.unwritten;
      continue;
    }
    const double e = std::abs(x - ref.o[i]);
    if (e >= tol) {
      if (r.bad++ == 0) r.first_bad = i;
      ++r.bad_col64[i % s.D % 64];
      ++r.bad_row16[i / s.D % s.Nq % 16];
    }
    r.max_err = std::max(r.max_err, e);
    r.max_ref = std::max(r.max_ref, std::abs(ref.o[i]));
    d2 += e * e;
    r2 += ref.o[i] * ref.o[i];
  }
  for (int64_t i = 0; i < nlse; ++i) {
    const double x = lb[i], y = ref.lse[i];
    if (std::isnan(x) || (std::isinf(x) != std::isinf(y))) {
      ++r.unwritten;
      continue;
    }
    if (!std::isinf(y)) r.lse_err = std::max(r.lse_err, std::abs(x - y));
  }
  r.rel_l2 = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
  return r;
}

}  // namespace

void expect_forward_close(const Problem& pr, const std::string& config, const BindForward& bind) {
  INFO("D=" << pr.shape.D << " Nq=" << pr.shape.Nq << " Nkv=" << pr.shape.Nkv
            << " Hq=" << pr.shape.Hq << " Hkv=" << pr.shape.Hkv << " B=" << pr.shape.B
            << " causal=" << to_string(pr.causal) << " bias=" << to_string(pr.bias) << "/"
            << to_string(pr.bias_dtype) << " dropout=" << pr.dropout << " " << to_string(pr.dtype)
            << " cfg=" << config);
  const ForwardOutcome r = run_forward(pr, bind);
  INFO("max_err=" << r.max_err << " max_ref=" << r.max_ref << " rel_l2=" << r.rel_l2
                  << " lse_err=" << r.lse_err);
  INFO("O elements off: " << r.bad << " (first at flat index " << r.first_bad
                          << "); by column % 64: " << histogram(r.bad_col64, 64)
                          << "; by query row % 16: " << histogram(r.bad_row16, 16));
  CHECK(r.unwritten == 0);
  const double eps = eps_of(pr);
  CHECK(r.rel_l2 < 2 * eps);
  CHECK(r.max_err < 4 * eps * std::max(1.0, r.max_ref));
  CHECK(r.lse_err < 2e-3);
}

void expect_forward_variant_passes(Variant& v, const std::vector<Problem>& problems) {
  for (const Problem& p : problems) {
    REQUIRE(v.supports(p).ok());
    AttnTensors t(p, Pass::fwd);
    FFPA_CUDA(cudaMemset(t.o.get(), 0xff, t.o.bytes()));
    FFPA_CUDA(cudaMemset(t.lse.get(), 0xff, t.lse.bytes()));
    auto op = v.bind(p, v.default_knobs(p), t, gpu::open_device(0));
    op->launch(nullptr);
    FFPA_CUDA(cudaDeviceSynchronize());
    const Reference ref = compute_reference(t, Pass::fwd);
    const auto checks = check_outputs(t, ref, Pass::fwd);
    REQUIRE(checks.size() == 2);
    expect_passed(checks);
  }
}

void expect_backward_variant_passes(Variant& v, const std::vector<Problem>& problems) {
  for (const Problem& p : problems) {
    INFO(describe(p));
    REQUIRE(v.supports(p).ok());
    AttnTensors t(p, Pass::bwd);
    const Reference ref = compute_reference(t, Pass::bwd);
    write_forward_outputs(t, ref);
    for (gpu::DeviceBuffer* b : {&t.dq, &t.dk, &t.dv, &t.dbias})
      if (*b) FFPA_CUDA(cudaMemset(b->get(), 0xff, b->bytes()));
    FFPA_CUDA(cudaDeviceSynchronize());
    auto op = v.bind(p, v.default_knobs(p), t, gpu::open_device(0));
    op->launch(nullptr);
    FFPA_CUDA(cudaDeviceSynchronize());
    const auto checks = check_outputs(t, ref, Pass::bwd);
    REQUIRE(checks.size() == (p.bias == BiasKind::none ? 3u : 4u));
    expect_passed(checks);
  }
}

gpu::DeviceBuffer big_random(int64_t n, std::mt19937& rng) {
  const int64_t block = 1 << 22;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> b(static_cast<size_t>(std::min(n, block)));
  for (auto& x : b) x = to_bf16(nd(rng));
  gpu::DeviceBuffer d(static_cast<size_t>(n) * 2);
  for (int64_t i = 0; i < n; i += block)
    FFPA_CUDA(cudaMemcpy(d.as<uint16_t>() + i, b.data(), std::min(block, n - i) * 2,
                         cudaMemcpyHostToDevice));
  return d;
}

namespace {

struct Error {
  double max_err = 0, max_ref = 0, rel_l2 = 0;
  int64_t unwritten = 0;  // NaN left from the poison (or any non-finite value)
};

Error compare(const std::vector<double>& got, const std::vector<double>& ref) {
  Error r;
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++r.unwritten;
      continue;
    }
    const double e = std::abs(got[i] - ref[i]);
    r.max_err = std::max(r.max_err, e);
    r.max_ref = std::max(r.max_ref, std::abs(ref[i]));
    d2 += e * e;
    r2 += ref[i] * ref[i];
  }
  r.rel_l2 = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
  return r;
}

}  // namespace

std::string describe(const Problem& pr) {
  const auto& s = pr.shape;
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "D=%lld B=%lld Hq=%lld Hkv=%lld Nq=%lld Nkv=%lld causal=%s bias=%s/%s dropout=%g %s",
      (long long)s.D, (long long)s.B, (long long)s.Hq, (long long)s.Hkv, (long long)s.Nq,
      (long long)s.Nkv, to_string(pr.causal).c_str(), to_string(pr.bias).c_str(),
      to_string(pr.bias_dtype).c_str(), pr.dropout, to_string(pr.dtype).c_str());
  return buf;
}

void expect_backward_close(const Problem& pr, const std::string& config, const BindBackward& bind) {
  const auto& s = pr.shape;
  const Half h{pr.dtype};
  std::mt19937 rng(static_cast<uint32_t>(pr.seed * 7919 + s.D * 31 + s.Nq * 7 + s.Nkv));
  HostAttnInputs in;
  const DeviceInputs d = upload_inputs(pr, rng, true, in);
  const int64_t nq = s.B * s.Hq * s.Nq * s.D, nkv = s.B * s.Hkv * s.Nkv * s.D;
  gpu::DeviceBuffer dbias;
  const bool fp32_bias = pr.bias_dtype == BiasDtype::fp32;
  if (pr.bias != BiasKind::none)
    dbias = poisoned(static_cast<size_t>(pr.bias_elems()) * (fp32_bias ? 4 : 2));
  const HostAttnOutputs ref = cpu_attention(pr, in);
  gpu::DeviceBuffer o = upload_half(ref.o, h);
  std::vector<float> lse_f(ref.lse.begin(), ref.lse.end());
  gpu::DeviceBuffer lse(lse_f.size() * 4);
  FFPA_CUDA(cudaMemcpy(lse.get(), lse_f.data(), lse.bytes(), cudaMemcpyHostToDevice));
  gpu::DeviceBuffer dq = poisoned(static_cast<size_t>(nq) * 2);
  gpu::DeviceBuffer dk = poisoned(static_cast<size_t>(nkv) * 2);
  gpu::DeviceBuffer dv = poisoned(static_cast<size_t>(nkv) * 2);

  FfpaBwdParams p{};
  FfpaFwdParams& f = p.fwd;
  f = contiguous_params(pr, in);
  f.q = d.q.get(), f.k = d.k.get(), f.v = d.v.get(), f.o = o.get(), f.lse = lse.as<float>();
  f.bias = d.bias.get();
  f.num_splits = 1;
  p.do_row_stride = p.dq_row_stride = f.q_row_stride;
  p.do_head_stride = p.dq_head_stride = f.q_head_stride;
  p.do_batch_stride = p.dq_batch_stride = f.q_batch_stride;
  p.dk_row_stride = p.dv_row_stride = f.k_row_stride;
  p.dk_head_stride = p.dv_head_stride = f.k_head_stride;
  p.dk_batch_stride = p.dv_batch_stride = f.k_batch_stride;
  p.dout = d.dout.get();
  p.dq = dq.get(), p.dk = dk.get(), p.dv = dv.get(), p.dbias = dbias.get();

  const gpu::DeviceInfo dev = gpu::open_device(0);
  INFO(describe(pr) << " cfg=" << config);
  auto op = bind(p, dev);
  gpu::Stream stream;
  op->launch(stream.get());
  gpu::check_launch("ffpa_bwd");
  stream.sync();
  // A second launch must give the same result: the workspaces are re-zeroed inside launch().
  op->launch(stream.get());
  gpu::check_launch("ffpa_bwd");
  stream.sync();

  // bf16 keeps 8 mantissa bits (fp16 11): P and dS are rounded once each before their GEMMs.
  const double eps = pr.dtype == Dtype::bf16 ? 1.0 / 256 : 1.0 / 2048;
  auto expect = [&](const char* name, const std::vector<double>& got,
                    const std::vector<double>& want) {
    const Error e = compare(got, want);
    INFO(name << ": max_err=" << e.max_err << " max_ref=" << e.max_ref << " rel_l2=" << e.rel_l2
              << " unwritten=" << e.unwritten);
    CHECK(e.unwritten == 0);
    CHECK(e.rel_l2 < 3 * eps);
    // A gradient that is zero through cancellation (one visible key: dS = P(dP - delta) with
    // P = 1) keeps the fp32 rounding of dP and delta, ~1e-5 here: the floor sits above it.
    CHECK(e.max_err < 8 * eps * std::max(1e-2, e.max_ref));
  };
  expect("dq", download_half(dq, h), ref.dq);
  expect("dk", download_half(dk, h), ref.dk);
  expect("dv", download_half(dv, h), ref.dv);
  if (pr.bias != BiasKind::none) {
    std::vector<double> got;
    if (fp32_bias) {
      std::vector<float> x(static_cast<size_t>(pr.bias_elems()));
      FFPA_CUDA(cudaMemcpy(x.data(), dbias.get(), dbias.bytes(), cudaMemcpyDeviceToHost));
      got.assign(x.begin(), x.end());
    } else {
      got = download_half(dbias, h);
    }
    expect("dbias", got, ref.dbias);
  }
}

}  // namespace ffpa::test
