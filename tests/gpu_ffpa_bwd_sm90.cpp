// The Hopper wgmma backward (ffpa-bwd-sm90) against the double-precision CPU reference on random
// data (random dO, the reference forward's o and lse): self, cross, decode, GQA/MQA, causal both
// alignments (Nq < Nkv and Nq > Nkv), lengths 1, 7, 127, 1000, B > 1, D 64..512 (padded to 128
// inside), both dtypes, dropout, additive bias in every shape and dtype with dBias, every panel
// grouping, split warpgroups, pairs of blocks, two dQ accumulators. Outputs are poisoned (NaN)
// before the run so an unwritten element fails; the tolerances are gpu_ffpa_bwd's
// (expect_backward_close). "[bench]" times B=1 H=32 N=8192 against ffpa-bwd-sm80 with CUDA events.
// Needs an sm_90 GPU: elsewhere every case warns and returns.
#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "ffpa_support.hpp"
#include "gpu/cuda.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_bwd_sm80.hpp"
#include "variants/ffpa_bwd_sm90.hpp"

using namespace ffpa;
using namespace ffpa::test;

namespace {

bool hopper() {
  static const bool yes = gpu::open_device(0).sm_major == 9;
  if (!yes) WARN("not an sm_90 GPU: ffpa-bwd-sm90 is not tested here");
  return yes;
}

void expect_close(const Problem& pr, std::optional<bwd90::Config> cfg = std::nullopt) {
  const bwd90::Config c = cfg ? *cfg : bwd90::default_config(pr);
  expect_backward_close(
      pr, to_string(c.knobs()), [&](const FfpaBwdParams& p, const gpu::DeviceInfo& dev) {
        REQUIRE(bwd90::check(c, static_cast<int>(pr.shape.D), dev.smem_per_block_optin).ok());
        return bwd90::bind(pr, c, p, dev);
      });
}

constexpr Dtype kTypes[] = {Dtype::bf16, Dtype::fp16};

}  // namespace

TEST_CASE("bwd90: smallest case first (one key tile, one query tile, D=128)", "[gpu]") {
  if (!hopper()) return;
  expect_close(make(1, 1, 1, 64, 32, 128));
}

TEST_CASE("bwd90: self-attention, lengths 1, 7, 127, 1000, D 64, 320, 512, B > 1", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512}) {
      for (int n : {1, 7, 127, 1000}) expect_close(make(1, n == 1000 ? 1 : 2, 1, n, n, D, dt));
      expect_close(make(2, 2, 2, 77, 77, D, dt));  // B > 1
    }
}

TEST_CASE("bwd90: head dims 64..512, padded to whole 128-column halves", "[gpu]") {
  if (!hopper()) return;
  for (int D : {72, 128, 136, 256, 384, 504}) expect_close(make(1, 2, 2, 100, 90, D));
}

TEST_CASE("bwd90: cross-attention and decode (Nq = 1)", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512}) {
      expect_close(make(2, 2, 2, 45, 150, D, dt));
      expect_close(make(2, 4, 4, 1, 333, D, dt));
      expect_close(make(1, 8, 2, 1, 200, D, dt));  // decode GQA: 4 rows of one query tile
    }
}

TEST_CASE("bwd90: GQA and MQA, dK/dV summed over the group inside the kernel", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512}) {
      expect_close(make(2, 8, 2, 50, 90, D, dt));
      expect_close(make(1, 6, 1, 45, 70, D, dt));
    }
}

TEST_CASE("bwd90: causal, both alignments, Nq < Nkv and Nq > Nkv", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512})
      for (Causal c : {Causal::bottom_right, Causal::top_left})
        for (auto [nq, nkv] : {std::pair{99, 99}, {40, 150}, {150, 40}, {1, 77}, {1000, 1000}}) {
          Problem p = make(2, 4, 2, nq, nkv, D, dt);
          if (nq == 1000) p.shape.B = 1, p.shape.Hq = 2, p.shape.Hkv = 1;
          p.causal = c;
          expect_close(p);
        }
}

TEST_CASE("bwd90: dropout replays the forward's Philox stream", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512}) {
      Problem p = make(2, 2, 1, 60, 75, D, dt);
      p.dropout = 0.1;
      expect_close(p);
      Problem d = make(1, 4, 4, 1, 180, D, dt);
      d.dropout = 0.2;
      expect_close(d);
      Problem c = make(2, 4, 2, 127, 99, D, dt);
      c.causal = Causal::top_left;
      c.dropout = 0.1;
      expect_close(c);
    }
}

TEST_CASE("bwd90: additive bias: key, query_key and full shapes, fp32 and input dtype, dBias",
          "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512})
      for (const Problem& p : bias_problems(D, dt)) expect_close(p);
}

TEST_CASE("bwd90: combinations: causal + bias + dropout + GQA, under every knob", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512}) {
      Problem p = make(2, 4, 2, 70, 101, D, dt);
      p.causal = Causal::bottom_right;
      p.bias = BiasKind::key;
      p.dropout = 0.1;
      expect_close(p);
      for (const bwd90::Config& c :
           {bwd90::Config{1, 1}, bwd90::Config{1, 0, 1}, bwd90::Config{1, 0, 0, 2}})
        expect_close(p, c);
      p.causal = Causal::top_left;
      p.bias = BiasKind::full;
      p.bias_dtype = BiasDtype::input;
      expect_close(p);
      p.bias = BiasKind::query_key;
      expect_close(p, bwd90::Config{1, 1});
    }
}

TEST_CASE("bwd90: every panel grouping", "[gpu]") {
  if (!hopper()) return;
  for (auto [D, panels] : {std::pair{512, 2}, {512, 4}, {320, 3}, {504, 2}}) {
    Problem p = make(2, 4, 2, 90, 110, D);
    p.causal = Causal::bottom_right;
    expect_close(p, bwd90::Config{panels, 0});
  }
}

TEST_CASE("bwd90: split warpgroups (split=1)", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512}) {
      for (int panels : {1, 2, 3}) {
        if ((D + 127) / 128 % panels) continue;
        expect_close(make(2, 2, 2, 77, 77, D, dt), bwd90::Config{panels, 1});
      }
      expect_close(make(1, 4, 2, 300, 300, D, dt), bwd90::Config{1, 1});  // GQA, 19 query tiles
      expect_close(make(2, 4, 4, 1, 333, D, dt), bwd90::Config{1, 1});
      for (Causal c : {Causal::bottom_right, Causal::top_left})
        for (auto [nq, nkv] : {std::pair{150, 40}, {40, 150}, {333, 333}}) {
          Problem p = make(1, 4, 2, nq, nkv, D, dt);
          p.causal = c;
          expect_close(p, bwd90::Config{1, 1});
        }
      Problem d = make(2, 2, 1, 160, 75, D, dt);
      d.dropout = 0.1;
      expect_close(d, bwd90::Config{1, 1});
    }
}

TEST_CASE("bwd90: pairs of blocks summing dQ (pair=1)", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512}) {
      expect_close(make(2, 2, 2, 77, 77, D, dt), bwd90::Config{1, 0, 1});  // 3 key tiles: 4 blocks
      expect_close(make(1, 4, 2, 300, 300, D, dt), bwd90::Config{1, 0, 1});
      expect_close(make(2, 4, 4, 1, 333, D, dt), bwd90::Config{1, 0, 1});
      expect_close(make(1, 2, 1, 45, 20, D, dt), bwd90::Config{1, 0, 1});  // one key tile
      for (Causal c : {Causal::bottom_right, Causal::top_left})
        for (auto [nq, nkv] : {std::pair{150, 40}, {40, 150}, {333, 333}}) {
          Problem p = make(1, 4, 2, nq, nkv, D, dt);
          p.causal = c;
          expect_close(p, bwd90::Config{1, 0, 1});
        }
      Problem d = make(2, 2, 1, 160, 75, D, dt);
      d.dropout = 0.1;
      expect_close(d, bwd90::Config{1, 0, 1});
    }
}

TEST_CASE("bwd90: two dQ accumulators (dqbuf=2)", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512})
      for (int pair : {0, 1}) {
        const bwd90::Config c{1, 0, pair, 2};
        expect_close(make(2, 2, 2, 77, 77, D, dt), c);
        Problem p = make(1, 4, 2, 150, 40, D, dt);
        p.causal = Causal::bottom_right;
        expect_close(p, c);
      }
}

TEST_CASE("bwd90: the variant through AttnTensors passes the runner's FA3-rule check", "[gpu]") {
  if (!hopper()) return;
  auto v = make_ffpa_bwd_sm90();
  Problem self = make(2, 8, 2, 333, 333, 512);
  self.causal = Causal::bottom_right;
  const Problem dec = make(1, 16, 4, 1, 3000, 320, Dtype::fp16);
  const Problem odd = make(1, 4, 4, 257, 300, 136);
  expect_backward_variant_passes(*v, {self, dec, odd});
}

namespace {

void bench90(const char* name, const Problem& pr, const bwd90::Config& c) {
  const std::string which = "sm90 " + to_string(c.knobs());
  bench_backward(name, pr, which, [&](AttnTensors& t, const gpu::DeviceInfo& dev) {
    return bwd90::bind(pr, c, t.bwd_params(), dev);
  });
}

}  // namespace

TEST_CASE("sm90 backward timings", "[.][bench]") {
  if (!hopper()) return;
  const int N = 8192;
  for (int D : {512, 320}) {
    const Problem self = make(1, 32, 32, N, N, D);
    bench90("self", self, bwd90::default_config(self));
    bench_backward("self", self, "sm80 default", [&](AttnTensors& t, const gpu::DeviceInfo& dev) {
      return bwd::bind(self, bwd::default_config(self), t.bwd_params(), dev);
    });
    if (D != 512) {
      bench90("panels", self, bwd90::Config{3, 0});
      for (int panels : {1, 3}) bench90("split", self, bwd90::Config{panels, 1});
      bench90("pair", self, bwd90::Config{1, 0, 1});
      bench90("dqbuf", self, bwd90::Config{1, 0, 0, 2});
      continue;
    }
    for (int panels : {1, 4}) bench90("panels", self, bwd90::Config{panels, 0});
    for (int panels : {1, 2, 4}) bench90("split", self, bwd90::Config{panels, 1});
    for (int panels : {1, 2, 4}) bench90("pair", self, bwd90::Config{panels, 0, 1});
    for (int pair : {0, 1}) bench90("dqbuf", self, bwd90::Config{2, 0, pair, 2});
    Problem causal = self;
    causal.causal = Causal::bottom_right;
    bench90("causal", causal, bwd90::default_config(causal));
    bench90("causal", causal, bwd90::Config{1, 1});
    bench90("causal", causal, bwd90::Config{1, 0, 1});
    bench90("gqa", make(1, 32, 8, N, N, D), bwd90::default_config(self));
    bench90("cross", make(1, 32, 32, 1024, N, D), bwd90::default_config(self));
    bench90("decode", make(1, 32, 32, 1, N, D), bwd90::default_config(self));
  }
  Problem drop = make(1, 32, 32, N, N, 512);
  drop.dropout = 0.1;
  bench90("dropout", drop, bwd90::default_config(drop));
  bench_backward("dropout", drop, "sm80 default", [&](AttnTensors& t, const gpu::DeviceInfo& dev) {
    return bwd::bind(drop, bwd::default_config(drop), t.bwd_params(), dev);
  });
}
