// The Hopper wgmma forward (ffpa-fwd-sm90) against the double-precision CPU reference on random
// data: self, cross, GQA/MQA, lengths 1, 7, 127, 1000, head dims 64..512 (D padded to 128 inside),
// both dtypes, causal both alignments, bias and dropout, every ring depth. Outputs are
// poisoned (NaN) before the run so an unwritten element fails; the tolerances are gpu_ffpa_fwd's.
// "[bench]" times B=1 H=32 N=8192 with CUDA events. Needs an sm_90 GPU: elsewhere every case
// warns and returns.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ffpa_support.hpp"
#include "gpu/cuda.hpp"
#include "reference/cpu_reference.hpp"
#include "reference/reference.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_fwd_sm90.hpp"

using namespace ffpa;
using namespace ffpa::test;

namespace {

bool hopper() {
  static const bool yes = gpu::open_device(0).sm_major == 9;
  if (!yes) WARN("not an sm_90 GPU: ffpa-fwd-sm90 is not tested here");
  return yes;
}

void expect_close(const Problem& pr, std::optional<fwd90::Config> cfg = std::nullopt) {
  const fwd90::Config c = cfg ? *cfg : fwd90::default_config(pr);
  expect_forward_close(
      pr, to_string(c.knobs()), [&](const FfpaFwdParams& p, const gpu::DeviceInfo& dev) {
        REQUIRE(fwd90::check(c, static_cast<int>(pr.shape.D), dev.smem_per_block_optin).ok());
        return fwd90::bind(pr, c, p, dev);
      });
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

// Bias and dropout are staged per key tile in shared memory (the offset 12345 and Nkv = 130 put
// the 4-key Philox blocks off the tile grid). D=512 runs them with the default ring (2-panel slots
// for a key bias, 1-panel ones for a bias tile or causal + bias).
TEST_CASE("sm90: bias and dropout, D 320 and 512", "[gpu]") {
  if (!hopper()) return;
  for (int D : {320, 512})
    for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
      for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input}) {
        Problem p = make(2, 4, 2, 90, 140, D);
        p.bias = m;
        p.bias_dtype = md;
        expect_close(p);
      }
  for (int D : {384, 512}) {
    Problem p = make(2, 4, 2, 100, 130, D);  // GQA + dropout
    p.dropout = 0.1;
    expect_close(p);
    p.causal = Causal::bottom_right;
    p.bias = BiasKind::key;
    expect_close(p);
    p.causal = Causal::top_left;
    p.bias = BiasKind::full;
    p.bias_dtype = BiasDtype::input;
    expect_close(p);
  }
  Problem p = make(1, 2, 2, 190, 250, 128);  // Bc=128: 32 keep bits a staging thread
  p.dropout = 0.2;
  p.bias = BiasKind::query_key;
  expect_close(p, fwd90::Config{128, 3});
  p = make(1, 2, 2, 1000, 1000, 512, Dtype::fp16);
  p.dropout = 0.1;
  p.bias = BiasKind::key;
  expect_close(p);
}

TEST_CASE("sm90: ring depths, key tiles and slot widths", "[gpu]") {
  if (!hopper()) return;
  // The configurations test_compile_ffpa_fwd_sm90 proves spill-free.
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
  cross.bias = BiasKind::key;
  expect_forward_variant_passes(*v, {self, cross});
}

namespace {

void bench(const char* name, const Problem& pr, const fwd90::Config& c) {
  bench_forward(name, pr, to_string(c.knobs()),
                [&](const FfpaFwdParams& p, const gpu::DeviceInfo& dev) {
                  return fwd90::bind(pr, c, p, dev);
                });
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
