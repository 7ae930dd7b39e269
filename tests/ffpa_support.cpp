#include "ffpa_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace ffpa::test {

Problem make(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nkv, int64_t D, Dtype dt) {
  Problem p;
  p.case_name = "test";
  p.shape = {B, Hq, Hkv, Nq, Nkv, D};
  p.dtype = dt;
  p.seed = 1;
  return p;
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

void check_clean(const nvrtc::Compiled& comp, std::initializer_list<const char*> kernels) {
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
  }
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
  const int64_t n = pr.mask_elems();
  if (pr.mask_dtype != MaskDtype::fp32) return upload_randn(n, h, rng, 0.25, exact);
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
  if (pr.mask != MaskKind::none) d.bias = upload_bias(pr, h, rng, in.bias);
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

FfpaFwdParams contiguous_params(const Problem& pr, const HostAttnInputs& in) {
  const auto& s = pr.shape;
  FfpaFwdParams p{};
  p.q_row_stride = p.o_row_stride = s.D;
  p.q_head_stride = p.o_head_stride = s.Nq * s.D;
  p.q_batch_stride = p.o_batch_stride = s.Hq * s.Nq * s.D;
  p.k_row_stride = p.v_row_stride = s.D;
  p.k_head_stride = p.v_head_stride = s.Nkv * s.D;
  p.k_batch_stride = p.v_batch_stride = s.Hkv * s.Nkv * s.D;
  if (pr.mask != MaskKind::none) {
    p.bias_row_stride = pr.mask == MaskKind::key ? 0 : s.Nkv;
    p.bias_head_stride = pr.mask == MaskKind::full ? s.Nq * s.Nkv : 0;
    p.bias_batch_stride = pr.mask == MaskKind::full ? s.Hq * s.Nq * s.Nkv : 0;
  }
  p.bias_is_fp32 = pr.mask_dtype == MaskDtype::fp32;
  p.is_bf16 = pr.dtype == Dtype::bf16;
  p.B = static_cast<int>(s.B), p.Hq = static_cast<int>(s.Hq), p.Hkv = static_cast<int>(s.Hkv);
  p.Nq = static_cast<int>(s.Nq), p.Nkv = static_cast<int>(s.Nkv), p.D = static_cast<int>(s.D);
  p.group = static_cast<int>(s.group());
  p.scale = static_cast<float>(pr.scale());
  p.scale_log2 = static_cast<float>(pr.scale() * 1.4426950408889634);
  p.causal = pr.causal == Causal::bottom_right ? 1 : pr.causal == Causal::top_left ? 2 : 0;
  p.dropout_p = static_cast<float>(pr.dropout);
  p.dropout_scale = static_cast<float>(1.0 / (1.0 - pr.dropout));
  p.dropout_seed = in.dropout_seed;
  p.dropout_offset = in.dropout_offset;
  return p;
}

}  // namespace ffpa::test
