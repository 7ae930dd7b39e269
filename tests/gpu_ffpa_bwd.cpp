// The sm80+ split-D backward against the double-precision CPU reference on random data (random
// dO): self, cross, decode, GQA/MQA, causal both alignments, additive bias in every shape and
// dtype with dBias, dropout, odd lengths, B > 1, fp16 and bf16, D in {64, 320, 512, 1024}.
// Outputs are poisoned (NaN) before the run so an unwritten element fails. "[bench]" times the
// default cases with CUDA events.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "gpu/cuda.hpp"
#include "reference/cpu_reference.hpp"
#include "reference/reference.hpp"
#include "runner/tensors.hpp"
#include "variants/ffpa_bwd.hpp"
#include "variants/ffpa_bwd_kernel.hpp"
#include "variants/ffpa_fwd.hpp"

using namespace ffpa;

namespace {

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even (inputs are finite)
  return static_cast<uint16_t>(u >> 16);
}
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

struct Half {
  Dtype dt;
  uint16_t to(float f) const { return dt == Dtype::bf16 ? to_bf16(f) : to_fp16(f); }
  float from(uint16_t h) const { return dt == Dtype::bf16 ? from_bf16(h) : from_fp16(h); }
};

gpu::DeviceBuffer upload_half(const std::vector<double>& x, Half h) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = h.to(static_cast<float>(x[i]));
  gpu::DeviceBuffer d(bits.size() * 2);
  FFPA_CUDA(cudaMemcpy(d.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  return d;
}

// Random normal values rounded to the dtype; `exact` receives what the kernel will read.
gpu::DeviceBuffer upload_randn(int64_t n, Half h, std::mt19937& rng, double scale,
                               std::vector<double>& exact) {
  std::normal_distribution<float> nd(0.f, 1.f);
  exact.resize(static_cast<size_t>(n));
  for (auto& x : exact) x = h.from(h.to(nd(rng) * static_cast<float>(scale)));
  return upload_half(exact, h);
}

gpu::DeviceBuffer poisoned(size_t bytes) {
  gpu::DeviceBuffer d(bytes);
  FFPA_CUDA(cudaMemset(d.get(), 0xff, bytes));  // NaN in bf16, fp16 and fp32
  return d;
}

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

std::vector<double> download_half(const gpu::DeviceBuffer& d, Half h) {
  std::vector<uint16_t> bits(d.bytes() / 2);
  FFPA_CUDA(cudaMemcpy(bits.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  std::vector<double> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = h.from(bits[i]);
  return out;
}

Problem make(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nkv, int64_t D,
             Dtype dt = Dtype::bf16) {
  Problem p;
  p.case_name = "test";
  p.shape = {B, Hq, Hkv, Nq, Nkv, D};
  p.dtype = dt;
  p.seed = 1;
  return p;
}

std::string describe(const Problem& pr) {
  const auto& s = pr.shape;
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "D=%lld B=%lld Hq=%lld Hkv=%lld Nq=%lld Nkv=%lld causal=%s mask=%s/%s dropout=%g %s",
      (long long)s.D, (long long)s.B, (long long)s.Hq, (long long)s.Hkv, (long long)s.Nq,
      (long long)s.Nkv, to_string(pr.causal).c_str(), to_string(pr.mask).c_str(),
      to_string(pr.mask_dtype).c_str(), pr.dropout, to_string(pr.dtype).c_str());
  return buf;
}

// Runs the backward on the reference forward's o (rounded to the dtype) and lse, and compares dq,
// dk, dv (and dbias) with the double-precision reference.
void expect_close(const Problem& pr, std::optional<bwd::Config> cfg = std::nullopt) {
  const bwd::Config c = cfg ? *cfg : bwd::default_config(pr);
  const auto& s = pr.shape;
  const Half h{pr.dtype};
  std::mt19937 rng(static_cast<uint32_t>(pr.seed * 7919 + s.D * 31 + s.Nq * 7 + s.Nkv));
  HostAttnInputs in;
  in.dropout_seed = 0x1234abcd5678ef01ull;
  in.dropout_offset = 12345;
  const int64_t nq = s.B * s.Hq * s.Nq * s.D, nkv = s.B * s.Hkv * s.Nkv * s.D;
  gpu::DeviceBuffer q = upload_randn(nq, h, rng, 1.0, in.q);
  gpu::DeviceBuffer k = upload_randn(nkv, h, rng, 1.0, in.k);
  gpu::DeviceBuffer v = upload_randn(nkv, h, rng, 1.0, in.v);
  gpu::DeviceBuffer dout = upload_randn(nq, h, rng, 1.0, in.dout);
  gpu::DeviceBuffer bias, dbias;
  const bool fp32_bias = pr.mask_dtype == MaskDtype::fp32;
  if (pr.mask != MaskKind::none) {
    const int64_t n = pr.mask_elems();
    if (fp32_bias) {
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> b(static_cast<size_t>(n));
      in.bias.resize(b.size());
      for (size_t i = 0; i < b.size(); ++i) in.bias[i] = b[i] = nd(rng) * 0.25f;
      bias = gpu::DeviceBuffer(b.size() * 4);
      FFPA_CUDA(cudaMemcpy(bias.get(), b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    } else {
      bias = upload_randn(n, h, rng, 0.25, in.bias);
    }
    dbias = poisoned(static_cast<size_t>(n) * (fp32_bias ? 4 : 2));
  }
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
  f.q = q.get(), f.k = k.get(), f.v = v.get(), f.o = o.get(), f.lse = lse.as<float>();
  f.bias = bias.get();
  f.q_row_stride = f.o_row_stride = p.do_row_stride = p.dq_row_stride = s.D;
  f.q_head_stride = f.o_head_stride = p.do_head_stride = p.dq_head_stride = s.Nq * s.D;
  f.q_batch_stride = f.o_batch_stride = p.do_batch_stride = p.dq_batch_stride = s.Hq * s.Nq * s.D;
  f.k_row_stride = f.v_row_stride = p.dk_row_stride = p.dv_row_stride = s.D;
  f.k_head_stride = f.v_head_stride = p.dk_head_stride = p.dv_head_stride = s.Nkv * s.D;
  f.k_batch_stride = f.v_batch_stride = p.dk_batch_stride = p.dv_batch_stride = s.Hkv * s.Nkv * s.D;
  if (pr.mask != MaskKind::none) {
    f.bias_row_stride = pr.mask == MaskKind::key ? 0 : s.Nkv;
    f.bias_head_stride = pr.mask == MaskKind::full ? s.Nq * s.Nkv : 0;
    f.bias_batch_stride = pr.mask == MaskKind::full ? s.Hq * s.Nq * s.Nkv : 0;
  }
  f.bias_is_fp32 = fp32_bias;
  f.is_bf16 = pr.dtype == Dtype::bf16;
  f.B = static_cast<int>(s.B), f.Hq = static_cast<int>(s.Hq), f.Hkv = static_cast<int>(s.Hkv);
  f.Nq = static_cast<int>(s.Nq), f.Nkv = static_cast<int>(s.Nkv), f.D = static_cast<int>(s.D);
  f.group = static_cast<int>(s.group());
  f.scale = static_cast<float>(pr.scale());
  f.scale_log2 = static_cast<float>(pr.scale() * 1.4426950408889634);
  f.causal = pr.causal == Causal::bottom_right ? 1 : pr.causal == Causal::top_left ? 2 : 0;
  f.dropout_p = static_cast<float>(pr.dropout);
  f.dropout_scale = static_cast<float>(1.0 / (1.0 - pr.dropout));
  f.dropout_seed = in.dropout_seed;
  f.dropout_offset = in.dropout_offset;
  f.num_splits = 1;
  p.dout = dout.get();
  p.dq = dq.get(), p.dk = dk.get(), p.dv = dv.get(), p.dbias = dbias.get();

  const gpu::DeviceInfo dev = gpu::open_device(0);
  INFO(describe(pr) << " cfg=" << to_string(c.knobs()));
  REQUIRE(bwd::check(c, static_cast<int>(s.D), dev.smem_per_block_optin).empty());
  auto op = bwd::bind(pr, c, p, dev);
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
    CHECK(e.max_err < 8 * eps * std::max(1e-3, e.max_ref));
  };
  expect("dq", download_half(dq, h), ref.dq);
  expect("dk", download_half(dk, h), ref.dk);
  expect("dv", download_half(dv, h), ref.dv);
  if (pr.mask != MaskKind::none) {
    std::vector<double> got;
    if (fp32_bias) {
      std::vector<float> x(static_cast<size_t>(pr.mask_elems()));
      FFPA_CUDA(cudaMemcpy(x.data(), dbias.get(), dbias.bytes(), cudaMemcpyDeviceToHost));
      got.assign(x.begin(), x.end());
    } else {
      got = download_half(dbias, h);
    }
    expect("dbias", got, ref.dbias);
  }
}

constexpr std::array<int, 4> kDims = {64, 320, 512, 1024};
constexpr std::array<Dtype, 2> kTypes = {Dtype::bf16, Dtype::fp16};

}  // namespace

TEST_CASE("bwd self-attention, odd lengths, B > 1", "[gpu]") {
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      expect_close(make(2, 2, 2, 77, 77, D, dt));
      expect_close(make(1, 3, 3, 130, 130, D, dt));
    }
}

TEST_CASE("bwd cross-attention and decode (Nq = 1)", "[gpu]") {
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      expect_close(make(2, 2, 2, 45, 150, D, dt));
      expect_close(make(2, 4, 4, 1, 333, D, dt));
      expect_close(make(1, 8, 2, 1, 200, D, dt));  // decode GQA: 4 rows of one tile
    }
}

TEST_CASE("bwd GQA and MQA: dK/dV summed over the group inside the kernel", "[gpu]") {
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      expect_close(make(2, 8, 2, 50, 90, D, dt));
      expect_close(make(1, 6, 1, 45, 70, D, dt));
    }
}

TEST_CASE("bwd causal, both alignments, Nq < Nkv and Nq > Nkv", "[gpu]") {
  for (Dtype dt : kTypes)
    for (int D : kDims)
      for (Causal c : {Causal::bottom_right, Causal::top_left})
        for (auto [nq, nkv] : {std::pair{99, 99}, {40, 150}, {150, 40}, {1, 77}}) {
          Problem p = make(2, 4, 2, nq, nkv, D, dt);
          p.causal = c;
          expect_close(p);
        }
}

TEST_CASE("bwd additive bias: key, query_key and full shapes, fp32 and input dtype, dBias",
          "[gpu]") {
  for (Dtype dt : kTypes)
    for (int D : kDims)
      for (MaskKind m : {MaskKind::key, MaskKind::query_key, MaskKind::full})
        for (MaskDtype md : {MaskDtype::fp32, MaskDtype::input}) {
          Problem p = make(2, 4, 2, 37, 90, D, dt);
          p.mask = m;
          p.mask_dtype = md;
          expect_close(p);
        }
}

TEST_CASE("bwd dropout replays the forward's Philox stream", "[gpu]") {
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      Problem p = make(2, 2, 1, 60, 75, D, dt);
      p.dropout = 0.1;
      expect_close(p);
      Problem d = make(1, 4, 4, 1, 180, D, dt);
      d.dropout = 0.2;
      expect_close(d);
    }
}

TEST_CASE("bwd combinations: causal + bias + dropout + GQA", "[gpu]") {
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      Problem p = make(2, 4, 2, 70, 101, D, dt);
      p.causal = Causal::bottom_right;
      p.mask = MaskKind::key;
      p.dropout = 0.1;
      expect_close(p);
      p.causal = Causal::top_left;
      p.mask = MaskKind::full;
      p.mask_dtype = MaskDtype::input;
      expect_close(p);
    }
}

TEST_CASE("bwd tuning knobs: tiles, warps, row slices, chunks", "[gpu]") {
  const Problem p = make(2, 4, 2, 90, 110, 512);
  for (auto [br, bc, w, wr, kd] : {std::array{64, 32, 8, 4, 128},
                                   {64, 16, 8, 4, 64},
                                   {64, 32, 8, 2, 64},
                                   {32, 32, 8, 2, 64},
                                   {32, 16, 8, 2, 128},
                                   {64, 32, 8, 1, 64},
                                   {64, 16, 4, 2, 64}}) {
    const bwd::Config c{br, bc, w, wr, kd};
    INFO(to_string(c.knobs()));
    if (!bwd::check(c, 512, 227 * 1024).empty()) continue;  // the grid's supports() would drop it
    try {
      expect_close(p, c);
    } catch (const Unsupported& e) {  // ptxas spilled: a grid point the tuner skips
      WARN(e.what());
    }
  }
}

TEST_CASE("bwd through AttnTensors passes the runner's FA3-rule check", "[gpu]") {
  auto v = make_ffpa_bwd_sm80();
  Problem self = make(2, 8, 2, 333, 333, 512);
  self.causal = Causal::bottom_right;
  self.mask = MaskKind::key;
  Problem dec = make(1, 16, 4, 1, 3000, 320, Dtype::fp16);
  dec.dropout = 0.1;
  Problem big = make(1, 4, 4, 257, 300, 1024);
  big.mask = MaskKind::query_key;
  for (const Problem& p : {self, dec, big}) {
    INFO(describe(p));
    REQUIRE(v->supports(p).ok());
    AttnTensors t(p, Pass::bwd);
    const Reference ref = compute_reference(t, Pass::bwd);
    write_forward_outputs(t, ref);
    for (gpu::DeviceBuffer* b : {&t.dq, &t.dk, &t.dv, &t.dbias})
      if (*b) FFPA_CUDA(cudaMemset(b->get(), 0xff, b->bytes()));
    FFPA_CUDA(cudaDeviceSynchronize());
    auto op = v->bind(p, v->default_knobs(p), t);
    op->launch(nullptr);
    FFPA_CUDA(cudaDeviceSynchronize());
    const auto checks = check_outputs(t, ref, Pass::bwd);
    REQUIRE(checks.size() == (p.mask == MaskKind::none ? 3u : 4u));
    for (const TensorCheck& c : checks) {
      INFO(c.tensor << " max_abs=" << c.max_abs << " bound=" << c.bound << " rel_rms=" << c.rel_rms
                    << " nonfinite=" << c.nonfinite);
      CHECK(c.pass);
      CHECK(c.nonfinite == 0);
    }
  }
}

namespace {

// Forward (ffpa-fwd-sm80) for o and lse, then the backward timed with CUDA events.
void bench(const char* name, const Problem& pr, std::optional<bwd::Config> cfg = std::nullopt) {
  const bwd::Config c = cfg ? *cfg : bwd::default_config(pr);
  const gpu::DeviceInfo dev = gpu::open_device(0);
  if (auto why = bwd::check(c, static_cast<int>(pr.shape.D), dev.smem_per_block_optin);
      !why.empty()) {
    std::printf("%-10s %s %s: skipped (%s)\n", name, describe(pr).c_str(),
                to_string(c.knobs()).c_str(), why.c_str());
    return;
  }
  AttnTensors t(pr, Pass::bwd);
  auto fwd_variant = make_ffpa_fwd_sm80();
  {
    auto fwd_op = fwd_variant->bind(pr, fwd_variant->default_knobs(pr), t);
    fwd_op->launch(nullptr);
    FFPA_CUDA(cudaDeviceSynchronize());  // before its library is unloaded
  }
  std::unique_ptr<Op> op;
  try {
    op = bwd::bind(pr, c, t.bwd_params(), dev);
  } catch (const Unsupported& e) {
    std::printf("%-10s %s %s: unsupported (%s)\n", name, describe(pr).c_str(),
                to_string(c.knobs()).c_str(), e.what());
    return;
  }
  gpu::Stream st;
  for (int i = 0; i < 2; ++i) op->launch(st.get());
  st.sync();
  std::vector<float> ms;
  gpu::Event a, b;
  for (int i = 0; i < 5; ++i) {
    a.record(st.get());
    op->launch(st.get());
    b.record(st.get());
    st.sync();
    ms.push_back(b.since(a));
  }
  gpu::check_launch(name);
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  std::printf("%-10s %s %-30s %9.3f ms %7.1f TFLOPS  [%s]\n", name, describe(pr).c_str(),
              to_string(c.knobs()).c_str(), med, pr.flops(Pass::bwd) / (med * 1e9),
              op->includes().c_str());
}

}  // namespace

TEST_CASE("backward timings of the default cases", "[.][bench]") {
  const int N = 8192;
  for (int D : {512, 320, 1024}) {
    Problem self = make(1, 32, 32, N, N, D);
    bench("self", self);
    if (D != 512) continue;
    Problem causal = self;
    causal.causal = Causal::bottom_right;
    bench("causal", causal);
    bench("gqa", make(1, 32, 8, N, N, D));
    bench("cross", make(1, 32, 32, 1024, N, D));
    bench("decode", make(1, 32, 32, 1, N, D));
    Problem mask = self;
    mask.mask = MaskKind::key;
    bench("mask", mask);
    Problem drop = self;
    drop.dropout = 0.1;
    bench("dropout", drop);
  }
}

TEST_CASE("backward timings over a grid", "[.][sweep]") {
  const Problem self = make(1, 32, 32, 8192, 8192, 512);
  for (auto [br, bc, w, wr, kd] : {std::array{64, 32, 8, 4, 64},
                                   {64, 32, 8, 4, 128},
                                   {64, 32, 8, 2, 64},
                                   {64, 16, 8, 4, 64},
                                   {32, 32, 8, 2, 64},
                                   {32, 16, 8, 2, 64}})
    bench("sweep", self, bwd::Config{br, bc, w, wr, kd});
}
