// The Hopper wgmma forward (ffpa-fwd-sm90) against the double-precision CPU reference on random
// data: self, cross, GQA/MQA, lengths 1, 7, 127, 1000, head dims 64..512 (D padded to 128 inside),
// both dtypes, causal both alignments, bias and dropout at D <= 384, every ring depth. Outputs are
// poisoned (NaN) before the run so an unwritten element fails; the tolerances are gpu_ffpa_fwd's.
// "[bench]" times B=1 H=32 N=8192 with CUDA events. Needs an sm_90 GPU: elsewhere every case
// warns and returns.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ffpa_support.hpp"
#include "gpu/cuda.hpp"
#include "reference/cpu_reference.hpp"
#include "reference/reference.hpp"
#include "runner/tensors.hpp"
#include "variants/ffpa_fwd_sm90.hpp"
#include "variants/ffpa_fwd_sm90_kernel.hpp"

using namespace ffpa;
using namespace ffpa::test;

namespace {

bool hopper() {
  static const bool yes = gpu::open_device(0).sm_major == 9;
  if (!yes) WARN("not an sm_90 GPU: ffpa-fwd-sm90 is not tested here");
  return yes;
}

struct Outcome {
  double max_err = 0, max_ref = 0, rel_l2 = 0, lse_err = 0;
  int64_t unwritten = 0;  // NaN left from the poison, or -inf lse where a key was visible
  // Where O is off by more than the max-error tolerance: a first-run diagnosis. LSE depends on QK
  // only, O on PV too: a bad O with a good LSE points at the V descriptor or the P fragments.
  int64_t bad = 0, first_bad = -1;
  int64_t bad_col64[64] = {}, bad_row16[16] = {};  // by column % 64 and query row % 16
};

// bf16 keeps 8 mantissa bits (fp16 11): P and O are rounded once each.
double eps_of(const Problem& pr) {
  return pr.dtype == Dtype::bf16 ? 1.0 / 256 : 1.0 / 2048;
}

std::string histogram(const int64_t* v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    if (v[i]) out += std::to_string(i) + ":" + std::to_string(v[i]) + " ";
  return out;
}

Outcome run_case(const Problem& pr, const fwd90::Config& cfg) {
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

  const gpu::DeviceInfo dev = gpu::open_device(0);
  REQUIRE(fwd90::check(cfg, static_cast<int>(s.D), dev.smem_per_block_optin).empty());
  auto op = fwd90::bind(pr, cfg, p, dev);
  gpu::Stream stream;
  op->launch(stream.get());
  gpu::check_launch("ffpa_fwd_sm90");
  stream.sync();

  std::vector<uint16_t> ob(static_cast<size_t>(nq));
  std::vector<float> lb(static_cast<size_t>(nlse));
  FFPA_CUDA(cudaMemcpy(ob.data(), o.get(), o.bytes(), cudaMemcpyDeviceToHost));
  FFPA_CUDA(cudaMemcpy(lb.data(), lse.get(), lse.bytes(), cudaMemcpyDeviceToHost));

  const HostAttnOutputs ref = cpu_attention(pr, in);
  Outcome r;
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

void expect_close(const Problem& pr, std::optional<fwd90::Config> cfg = std::nullopt) {
  const fwd90::Config c = cfg ? *cfg : fwd90::default_config(pr);
  INFO("D=" << pr.shape.D << " Nq=" << pr.shape.Nq << " Nkv=" << pr.shape.Nkv
            << " Hq=" << pr.shape.Hq << " Hkv=" << pr.shape.Hkv << " B=" << pr.shape.B
            << " causal=" << to_string(pr.causal) << " mask=" << to_string(pr.mask) << "/"
            << to_string(pr.mask_dtype) << " dropout=" << pr.dropout << " " << to_string(pr.dtype)
            << " cfg=" << to_string(c.knobs()));
  const Outcome r = run_case(pr, c);
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

}  // namespace

TEST_CASE("sm90: smallest case first (one block, one key tile, D=128)", "[gpu]") {
  if (!hopper()) return;
  expect_close(make(1, 1, 1, 64, 64, 128));
}

TEST_CASE("sm90: self-attention, lengths 1, 7, 127, 1000, D 320 and 512, both dtypes", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : {Dtype::bf16, Dtype::fp16})
    for (int D : {320, 512})
      for (int n : {1, 7, 127, 1000}) expect_close(make(1, n == 1000 ? 1 : 2, 1, n, n, D, dt));
  expect_close(make(2, 2, 2, 200, 200, 512));  // B > 1
}

TEST_CASE("sm90: head dims 64..512, padded to whole 128-column halves", "[gpu]") {
  if (!hopper()) return;
  for (int D : {64, 136, 256, 384, 448, 504}) expect_close(make(1, 2, 2, 150, 150, D));
}

TEST_CASE("sm90: cross-attention and decode rows", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
    expect_close(make(1, 2, 2, 70, 333, 512, dt));
    expect_close(make(1, 2, 2, 333, 70, 320, dt));
    expect_close(make(2, 3, 3, 1, 1000, 512, dt));
    expect_close(make(1, 2, 2, 7, 127, 320, dt));
  }
}

TEST_CASE("sm90: GQA and MQA read the kv head h / group", "[gpu]") {
  if (!hopper()) return;
  expect_close(make(2, 8, 2, 100, 130, 512));
  expect_close(make(1, 6, 1, 45, 90, 320, Dtype::fp16));
  expect_close(make(1, 8, 1, 1, 300, 512));  // 8 q heads of one row in one block
}

TEST_CASE("sm90: causal, both alignments, skipping masked tiles", "[gpu]") {
  if (!hopper()) return;
  for (Causal c : {Causal::bottom_right, Causal::top_left})
    for (auto [nq, nkv] : {std::pair{200, 200}, {70, 300}, {300, 70}, {1, 150}})
      for (int D : {320, 512}) {
        Problem p = make(1, 4, 2, nq, nkv, D);
        p.causal = c;
        expect_close(p);
      }
}

TEST_CASE("sm90: bias and dropout at D <= 384", "[gpu]") {
  if (!hopper()) return;
  for (MaskKind m : {MaskKind::key, MaskKind::query_key, MaskKind::full})
    for (MaskDtype md : {MaskDtype::fp32, MaskDtype::input}) {
      Problem p = make(2, 4, 2, 90, 140, 320);
      p.mask = m;
      p.mask_dtype = md;
      expect_close(p);
    }
  Problem p = make(2, 2, 1, 100, 130, 384);
  p.dropout = 0.1;
  expect_close(p);
  p.causal = Causal::bottom_right;
  p.mask = MaskKind::key;
  p.shape.D = 320;
  expect_close(p);
}

TEST_CASE("sm90: ring depths, key tiles and slot widths", "[gpu]") {
  if (!hopper()) return;
  // The configurations test_sm90_compile proves spill-free.
  const Problem p = make(1, 2, 2, 190, 250, 512);
  for (int st : {4, 6, 7, 8}) expect_close(p, fwd90::Config{64, st});
  const Problem p320 = make(1, 2, 2, 190, 250, 320);
  for (int st : {3, 5}) expect_close(p320, fwd90::Config{64, st});
  const Problem small = make(1, 2, 2, 190, 250, 128);  // Bc=128 fits the registers below D=256
  for (int st : {3, 4}) expect_close(small, fwd90::Config{128, st});
  expect_close(p, fwd90::Config{64, 4, 2});     // slots of 2 panels a half
  expect_close(p320, fwd90::Config{64, 3, 3});  // of 3 panels (the whole half)
}

// The same cases with P through shared memory (knob psmem): if one path fails on a GPU and the
// other passes, the failure is in the P fragments (RS) or in the P tile (SS).
TEST_CASE("sm90: P through shared memory (psmem=1)", "[gpu]") {
  if (!hopper()) return;
  auto psmem = [](const Problem& p) {  // one-panel slots: two-panel ones leave no room for P
    return fwd90::Config{64, p.shape.D <= 384 ? 8 : 6, 1, 1};
  };
  for (Dtype dt : {Dtype::bf16, Dtype::fp16})
    for (int D : {320, 512}) {
      const Problem self = make(1, 2, 1, 127, 127, D, dt);
      expect_close(self, psmem(self));
      const Problem cross = make(1, 8, 2, 70, 333, D, dt);
      expect_close(cross, psmem(cross));
    }
  Problem c = make(1, 4, 2, 200, 200, 512);
  c.causal = Causal::bottom_right;
  expect_close(c, psmem(c));
}

TEST_CASE("sm90: the variant through AttnTensors passes the runner's FA3-rule check", "[gpu]") {
  if (!hopper()) return;
  auto v = make_ffpa_fwd_sm90();
  Problem self = make(2, 8, 2, 333, 333, 512);
  self.causal = Causal::bottom_right;
  Problem cross = make(1, 16, 4, 5, 3000, 320);
  cross.mask = MaskKind::key;
  for (const Problem& p : {self, cross}) {
    REQUIRE(v->supports(p).ok());
    AttnTensors t(p, Pass::fwd);
    FFPA_CUDA(cudaMemset(t.o.get(), 0xff, t.o.bytes()));
    FFPA_CUDA(cudaMemset(t.lse.get(), 0xff, t.lse.bytes()));
    auto op = v->bind(p, v->default_knobs(p), t);
    op->launch(nullptr);
    FFPA_CUDA(cudaDeviceSynchronize());
    const Reference ref = compute_reference(t, Pass::fwd);
    const auto checks = check_outputs(t, ref, Pass::fwd);
    REQUIRE(checks.size() == 2);
    expect_passed(checks);
  }
}

namespace {

// Large-problem inputs: a random block tiled over the buffer (random, never zeros, cheap to make).
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

void bench(const char* name, const Problem& pr, const fwd90::Config& c) {
  const auto& s = pr.shape;
  std::mt19937 rng(7);
  gpu::DeviceBuffer q = big_random(s.B * s.Hq * s.Nq * s.D, rng);
  gpu::DeviceBuffer k = big_random(s.B * s.Hkv * s.Nkv * s.D, rng);
  gpu::DeviceBuffer v = big_random(s.B * s.Hkv * s.Nkv * s.D, rng);
  gpu::DeviceBuffer o(static_cast<size_t>(s.B * s.Hq * s.Nq * s.D) * 2);
  gpu::DeviceBuffer lse(static_cast<size_t>(s.B * s.Hq * s.Nq) * 4);
  FfpaFwdParams p = contiguous_params(pr, HostAttnInputs{});
  p.q = q.get(), p.k = k.get(), p.v = v.get(), p.o = o.get(), p.lse = lse.as<float>();
  const gpu::DeviceInfo dev = gpu::open_device(0);
  std::unique_ptr<Op> op;
  try {
    op = fwd90::bind(pr, c, p, dev);
  } catch (const Unsupported& e) {
    std::printf("%-8s D=%4lld %s: unsupported (%s)\n", name, (long long)s.D,
                to_string(c.knobs()).c_str(), e.what());
    return;
  }
  const double med = median_ms(*op, 3, 10, name);
  std::printf("%-8s D=%4lld Nq=%5lld Nkv=%5lld Hq=%lld Hkv=%lld %-18s %8.3f ms %7.1f TFLOPS\n",
              name, (long long)s.D, (long long)s.Nq, (long long)s.Nkv, (long long)s.Hq,
              (long long)s.Hkv, to_string(c.knobs()).c_str(), med,
              pr.flops(Pass::fwd) / (med * 1e9));
}

}  // namespace

TEST_CASE("sm90 forward timings", "[.][bench]") {
  if (!hopper()) return;
  const int N = 8192;
  for (int D : {512, 320}) {
    const Problem self = make(1, 32, 32, N, N, D);
    bench("self", self, fwd90::default_config(self));
    if (D != 512) {
      bench("panels", self, fwd90::Config{64, 3, 3});
      continue;
    }
    for (int st : {4, 8}) bench("stages", self, fwd90::Config{64, st});
    bench("panels", self, fwd90::Config{64, 4, 2});
    bench("psmem", self, fwd90::Config{64, 6, 1, 1});
    Problem causal = self;
    causal.causal = Causal::bottom_right;
    bench("causal", causal, fwd90::default_config(causal));
    bench("gqa", make(1, 32, 8, N, N, D), fwd90::default_config(self));
  }
}
