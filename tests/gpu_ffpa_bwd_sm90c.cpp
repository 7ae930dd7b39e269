// The Hopper cluster backward (ffpa-bwd-sm90c) against the double-precision CPU reference on
// random data (random dO, the reference forward's o and lse; FA3's rule via
// expect_backward_close): self, cross, decode, GQA/MQA, causal both alignments (Nq < Nkv and
// Nq > Nkv), lengths 1, 7, 127, 300, B > 1, D 64..1024 (split into quarters over the two blocks
// of a cluster), both dtypes, dropout, additive bias in every shape and dtype with dBias
// (added by one block of the two), every knob; and phase 1 split by keys (ksplit = 1), in the
// cluster and in one block a key tile (cluster = 1, D up to 320), over the same cases; Q and dO
// by TMA (tma = 1). Outputs are
// poisoned (NaN) before the run so an unwritten element fails. "[bench]" times B=1 H=32 N=8192
// against ffpa-bwd-sm90 with CUDA events. Needs an sm_90 GPU: elsewhere every case warns and
// returns.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <utility>

#include "ffpa_support.hpp"
#include "gpu/cuda.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_bwd_sm90.hpp"
#include "variants/ffpa_bwd_sm90c.hpp"

using namespace ffpa;
using namespace ffpa::test;

namespace {

bool hopper() {
  static const bool yes = gpu::open_device(0).sm_major == 9;
  if (!yes) WARN("not an sm_90 GPU: ffpa-bwd-sm90c is not tested here");
  return yes;
}

// sms: the multiprocessors the tail plan assumes (the device's by default); fewer make a small
// problem end with a partial wave the plan splits.
void expect_close(const Problem& pr, std::optional<bwd90c::Config> cfg = std::nullopt,
                  int sms = 0) {
  bwd90c::Config c = cfg ? *cfg : bwd90c::default_config(pr);
  if (sms && !cfg) c.tail = 1;  // the split under test (off by default)
  expect_backward_close(
      pr, to_string(c.knobs()) + (sms ? " sms=" + std::to_string(sms) : ""),
      [&](const FfpaBwdParams& p, const gpu::DeviceInfo& dev) {
        REQUIRE(bwd90c::check(c, static_cast<int>(pr.shape.D), dev.smem_per_block_optin).ok());
        gpu::DeviceInfo d = dev;
        if (sms) d.sm_count = sms;
        return bwd90c::bind(pr, c, p, d);
      });
}

constexpr Dtype kTypes[] = {Dtype::bf16, Dtype::fp16};
constexpr int kDims[] = {64, 320, 512, 576, 1024};

}  // namespace

TEST_CASE("bwd90c: smallest case first (one key tile, one query tile, D=128)", "[gpu]") {
  if (!hopper()) return;
  expect_close(make(1, 1, 1, 64, 64, 128));
}

TEST_CASE("bwd90c: self-attention, lengths 1, 7, 127, 300, D 64..1024, B > 1", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      for (int n : {1, 7, 127, 300}) expect_close(make(1, 2, 1, n, n, D, dt));
      expect_close(make(2, 2, 2, 77, 77, D, dt));  // B > 1
    }
}

TEST_CASE("bwd90c: head dims 72..1016: quarters of 16..112 columns (bc = 64), padded past 512",
          "[gpu]") {
  if (!hopper()) return;
  for (int D : {72, 136, 200, 384, 448, 520, 1016}) expect_close(make(1, 2, 2, 100, 90, D));
}

TEST_CASE("bwd90c: cross-attention and decode (Nq = 1)", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      expect_close(make(2, 2, 2, 45, 150, D, dt));
      expect_close(make(2, 4, 4, 1, 333, D, dt));
      expect_close(make(1, 8, 2, 1, 200, D, dt));  // decode GQA: 4 rows of one query tile
    }
}

TEST_CASE("bwd90c: GQA and MQA, dK/dV summed over the group inside the kernel", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      expect_close(make(2, 8, 2, 50, 90, D, dt));
      expect_close(make(1, 6, 1, 45, 70, D, dt));
    }
}

TEST_CASE("bwd90c: causal, both alignments, Nq < Nkv and Nq > Nkv", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : kDims)
      for (Causal c : {Causal::bottom_right, Causal::top_left})
        for (auto [nq, nkv] : {std::pair{99, 99}, {40, 150}, {150, 40}, {1, 77}, {400, 400}}) {
          Problem p = make(2, 4, 2, nq, nkv, D, dt);
          if (nq == 400) p.shape.B = 1, p.shape.Hq = 2, p.shape.Hkv = 1;
          p.causal = c;
          expect_close(p);
        }
}

TEST_CASE("bwd90c: dropout replays the forward's Philox stream", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      if (dt == Dtype::fp16 && D != 512) continue;  // the dtype does not touch the Philox path
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

TEST_CASE("bwd90c: additive bias: key, query_key and full shapes, fp32 and input dtype, dBias",
          "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 512, 1024}) {  // 320 and 576: in the combinations below
      if (dt == Dtype::fp16 && D != 512) continue;
      for (const Problem& p : bias_problems(D, dt)) expect_close(p);
    }
}

TEST_CASE("bwd90c: combinations: causal + bias + dropout + GQA", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      if (dt == Dtype::fp16 && D != 512) continue;
      Problem p = make(2, 4, 2, 70, 101, D, dt);
      p.causal = Causal::bottom_right;
      p.bias = BiasKind::key;
      p.dropout = 0.1;
      expect_close(p);
      p.causal = Causal::top_left;
      p.bias = BiasKind::full;
      p.bias_dtype = BiasDtype::input;
      expect_close(p);
      p.bias = BiasKind::query_key;
      expect_close(p, bwd90c::Config{32, 1, 1, D > 768 ? 1 : 2});
      if (D <= 768) expect_close(p, bwd90c::Config{32, 1, 1, 1});  // barrier A
      if (D > 256) {  // the last dQ chunk behind the next tile's exchange, both buffer counts
        bwd90c::Config lag = bwd90c::default_config(p);
        lag.dqlag = 1;
        expect_close(p, lag);
        p.bias = BiasKind::key;
        lag.xbuf = 1;
        expect_close(p, lag);
      }
    }
}

TEST_CASE("bwd90c: every knob (bc, panels, dqbuf, xbuf, dqlag) at D = 320, 512, 576, 1024",
          "[gpu]") {
  if (!hopper()) return;
  for (int D : {320, 512, 576, 1024}) {
    Problem p = make(2, 4, 2, 70, 101, D);
    p.causal = Causal::bottom_right;
    const int np = (D + 255) / 256;  // 64-column panels of a quarter
    for (int bc : {32, 64})
      for (int panels : {1, 2, 4})
        for (int dqbuf : {1, 2}) {
          for (int xbuf : {1, 2})
            for (int dqlag : {0, 1}) {
              const bwd90c::Config c{bc, panels, dqbuf, xbuf, dqlag};
              if (np % panels || (bc == 64 && np > 2) || (dqbuf == 2 && np < 3) ||
                  (xbuf == 2 && np > 3) || (dqlag && np < 2))
                continue;
              expect_close(p, c);
            }
        }
  }
}

namespace {
// Phase 1 split by keys (ksplit = 1): in one block a key tile (cluster = 1, xbuf = 1) or in the
// cluster (xbuf = 2).
bwd90c::Config ksplit(int cluster, int panels = 1) {
  bwd90c::Config c;
  c.ksplit = 1;
  c.cluster = cluster;
  c.xbuf = cluster == 1 ? 1 : 2;
  c.panels = panels;
  return c;
}
}  // namespace

TEST_CASE("bwd90c: phase 1 by keys (ksplit = 1), one block or a cluster: every case", "[gpu]") {
  if (!hopper()) return;
  for (int cl : {1, 2})
    for (Dtype dt : kTypes)
      for (int D : {64, 72, 200, 320, 448, 512}) {
        const bwd90c::Config k = ksplit(cl);
        if (!bwd90c::check(k, D, 227 * 1024).ok()) continue;  // cluster = 1: D at most 320
        if (dt == Dtype::fp16 && D != 320) continue;  // the dtype touches the loads and stores only
        for (int n : {1, 7, 127, 300}) expect_close(make(1, 2, 1, n, n, D, dt), k);
        expect_close(make(2, 2, 2, 77, 77, D, dt), k);   // B > 1
        expect_close(make(2, 2, 2, 45, 150, D, dt), k);  // cross
        expect_close(make(1, 8, 2, 1, 200, D, dt), k);   // decode GQA
        expect_close(make(2, 8, 2, 50, 90, D, dt), k);   // GQA
        expect_close(make(1, 6, 1, 45, 70, D, dt), k);   // MQA
        for (Causal c : {Causal::bottom_right, Causal::top_left})
          for (auto [nq, nkv] : {std::pair{99, 99}, {40, 150}, {150, 40}, {1, 77}}) {
            Problem p = make(2, 4, 2, nq, nkv, D, dt);
            p.causal = c;
            expect_close(p, k);
          }
      }
  for (int cl : {1, 2})
    for (int D : {200, 320, 512})  // more than one Q/dO group a tile
      for (int panels : {2, 3})
        if (bwd90c::check(ksplit(cl, panels), D, 227 * 1024).ok()) {
          Problem p = make(2, 4, 2, 70, 101, D);
          p.causal = Causal::bottom_right;
          expect_close(p, ksplit(cl, panels));
        }
}

TEST_CASE("bwd90c: phase 1 by keys (ksplit = 1): dropout, bias with dBias, many tiles", "[gpu]") {
  if (!hopper()) return;
  for (int cl : {1, 2})
    for (Dtype dt : kTypes)
      for (int D : {64, 320, 512}) {
        const bwd90c::Config k = ksplit(cl);
        if (!bwd90c::check(k, D, 227 * 1024).ok()) continue;
        if (dt == Dtype::fp16 && D != 320) continue;
        Problem p = make(2, 2, 1, 60, 75, D, dt);
        p.dropout = 0.1;
        expect_close(p, k);
        Problem c = make(2, 4, 2, 127, 99, D, dt);
        c.causal = Causal::top_left;
        c.dropout = 0.1;
        expect_close(c, k);
        for (const Problem& b : bias_problems(D, dt)) expect_close(b, k);
        Problem all = make(2, 4, 2, 70, 101, D, dt);
        all.causal = Causal::bottom_right;
        all.bias = BiasKind::key;
        all.dropout = 0.1;
        expect_close(all, k);
        all.bias = BiasKind::full;
        all.bias_dtype = BiasDtype::input;
        expect_close(all, k);
      }
  for (int cl : {1, 2}) {
    Problem many = make(2, 4, 2, 333, 333, cl == 1 ? 320 : 512);
    expect_close(many, ksplit(cl));
    many.causal = Causal::bottom_right;
    expect_close(many, ksplit(cl));
  }
}

// The last wave split by query range (tail): a few assumed multiprocessors leave two units (key
// tiles) in the last wave, each split into pieces whose dK and dV the merge sums: in a cluster
// and in one block (D = 320), the transposed dK/dV of 32-key tiles (D = 1024), GQA with B > 1,
// dropout with a key bias (dBias column sums) and a full bias (dBias per element); tail = 0 on
// the same problems.
TEST_CASE("bwd90c: the last wave's key tiles split by query range (tail)", "[gpu]") {
  if (!hopper()) return;
  // Units, the last wave's, pieces (ffpa_family::plan_tail over the assumed clusters):
  for (Dtype dt : kTypes) {
    expect_close(make(1, 2, 2, 1000, 1000, 512, dt), std::nullopt, 10);  // 32, 2, 2
    expect_close(make(1, 4, 2, 500, 600, 320, dt), std::nullopt, 9);     // 20, 2, 4 (one block)
    expect_close(make(1, 2, 2, 640, 200, 1024, dt), std::nullopt, 8);    // 14, 2, 2 (bc = 32)
    expect_close(make(2, 8, 2, 100, 500, 512, dt), std::nullopt, 10);    // 32, 2, 2 (GQA)
  }
  for (BiasKind m : {BiasKind::key, BiasKind::full}) {
    Problem p = make(1, 2, 2, 640, 400, 512);  // 14, 2, 2
    p.bias = m;
    p.dropout = 0.1;
    expect_close(p, std::nullopt, 8);
    bwd90c::Config c = bwd90c::default_config(p);
    c.tail = 0;
    expect_close(p, c, 8);
  }
}

namespace {
// Q and dO by TMA (tma = 1) on the problem's default configuration, or on `c`.
void expect_close_tma(const Problem& pr, std::optional<bwd90c::Config> c = std::nullopt,
                      int sms = 0) {
  bwd90c::Config t = c ? *c : bwd90c::default_config(pr);
  t.tma = 1;
  if (sms) t.tail = 1;
  expect_close(pr, t, sms);
}
}  // namespace

// Q and dO by TMA: boxes of 64 rows of one q head (GQA groups with Nq a multiple of 64; any Nq
// without a group, rows past it zero-filled), columns past D zero-filled (D 72, 136, 320, 576),
// one to four Q/dO groups a tile (panels), both block counts (cluster = 1 at D = 320), 32-key
// tiles (D = 1024), the tail's pieces, dropout, every bias shape (D 512 and 1024), causal both
// alignments.
TEST_CASE("bwd90c: Q and dO by TMA (tma = 1)", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : kDims) {
      for (int n : {1, 127}) expect_close_tma(make(1, 2, 2, n, n, D, dt));
      expect_close_tma(make(2, 2, 2, 77, 77, D, dt));   // B > 1
      if (dt == Dtype::fp16 && D != 512) continue;      // the dtype does not touch the loads
      expect_close_tma(make(2, 8, 2, 128, 90, D, dt));  // GQA: 4 q heads of 2 tiles each
      expect_close_tma(make(1, 6, 1, 64, 70, D, dt));   // MQA
      expect_close_tma(make(2, 4, 4, 1, 333, D, dt));   // decode
      expect_close_tma(make(2, 2, 2, 45, 150, D, dt));  // cross
    }
  for (int D : {64, 512, 1024})
    for (Causal c : {Causal::bottom_right, Causal::top_left})
      for (auto [nq, nkv] : {std::pair{99, 99}, {40, 150}, {192, 128}}) {
        Problem p = make(1, 4, nq % 64 ? 4 : 2, nq, nkv, D);
        p.causal = c;
        expect_close_tma(p);
      }
  for (int D : {72, 136, 1016}) expect_close_tma(make(1, 2, 2, 100, 90, D));
  for (int D : {320, 512, 1024}) {
    Problem p = make(2, 4, 4, 70, 101, D);
    p.dropout = 0.1;
    expect_close_tma(p);
    // One block a key tile with a bias (D = 320) spills with the maps: bind refuses it.
    if (D == 320) continue;
    for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full}) {
      p.bias = m;
      p.causal = m == BiasKind::full ? Causal::top_left : Causal::none;
      expect_close_tma(p);
    }
  }
  // Every Q/dO group count: panels 1, 2 and 4 where they divide a quarter's panels.
  for (int D : {512, 1024})
    for (int panels : {1, 2, 4}) {
      const Problem p = make(2, 8, 2, 128, 101, D);
      bwd90c::Config c = bwd90c::default_config(p);
      c.panels = panels;
      if (bwd90c::check(c, D, 227 * 1024).ok()) expect_close_tma(p, c);
    }
  // The tail's pieces (as in the tail case above).
  expect_close_tma(make(1, 2, 2, 1000, 1000, 512), std::nullopt, 10);
  expect_close_tma(make(2, 8, 2, 128, 500, 512), std::nullopt, 10);
  expect_close_tma(make(1, 4, 2, 512, 600, 320), std::nullopt, 9);
}

TEST_CASE("bwd90c: many query tiles and key tiles (GQA, causal, B > 1)", "[gpu]") {
  if (!hopper()) return;
  for (int D : {512, 1024}) {
    Problem p = make(2, 4, 2, 333, 333, D);
    expect_close(p);
    p.causal = Causal::bottom_right;
    expect_close(p);
  }
}

TEST_CASE("bwd90c: the variant through AttnTensors passes the runner's FA3-rule check", "[gpu]") {
  if (!hopper()) return;
  auto v = make_ffpa_bwd_sm90c();
  Problem self = make(2, 8, 2, 333, 333, 512);
  self.causal = Causal::bottom_right;
  const Problem dec = make(1, 16, 4, 1, 3000, 320, Dtype::fp16);
  const Problem odd = make(1, 4, 4, 257, 300, 136);
  const Problem big = make(1, 2, 1, 200, 260, 1024);
  expect_backward_variant_passes(*v, {self, dec, odd, big});
}

namespace {

void bench90c(const char* name, const Problem& pr, const bwd90c::Config& c) {
  bench_backward(name, pr, "sm90c " + to_string(c.knobs()),
                 [&](AttnTensors& t, const gpu::DeviceInfo& dev) {
                   return bwd90c::bind(pr, c, t.bwd_params(), dev);
                 });
}
void bench90(const char* name, const Problem& pr) {
  bench_backward(name, pr, "sm90 default", [&](AttnTensors& t, const gpu::DeviceInfo& dev) {
    return bwd90::bind(pr, bwd90::default_config(pr), t.bwd_params(), dev);
  });
}

}  // namespace

TEST_CASE("sm90c backward timings", "[.][bench]") {
  if (!hopper()) return;
  const int N = 8192;
  for (int D : {512, 320}) {
    const Problem self = make(1, 32, 32, N, N, D);
    bench90("self", self);
    for (int bc : {32, 64})
      for (int panels : {1, 2})
        for (int xbuf : {1, 2}) bench90c("self", self, bwd90c::Config{bc, panels, 1, xbuf});
    Problem causal = self;
    causal.causal = Causal::bottom_right;
    bench90("causal", causal);
    bench90c("causal", causal, bwd90c::default_config(causal));
    const Problem gqa = make(1, 32, 8, N, N, D);
    bench90("gqa", gqa);
    bench90c("gqa", gqa, bwd90c::default_config(gqa));
  }
  // Phase 1 by keys against the cluster's default, alternated: in the cluster at D = 512 and
  // 320, in one block a key tile at D = 320 and 256.
  for (int D : {512, 320, 256}) {
    Problem causal = make(1, 32, 32, N, N, D);
    causal.causal = Causal::bottom_right;
    const std::pair<const char*, Problem> rows[] = {
        {"self", make(1, 32, 32, N, N, D)}, {"causal", causal}, {"gqa", make(1, 32, 8, N, N, D)}};
    for (int rep = 0; rep < 2; ++rep)
      for (const auto& [name, p] : rows) {
        bench90c(name, p, bwd90c::default_config(p));
        for (int cl : {2, 1})
          if (bwd90c::check(ksplit(cl), D, 227 * 1024).ok()) bench90c(name, p, ksplit(cl));
      }
  }

  const Problem big = make(1, 32, 32, N, N, 1024);
  for (int panels : {1, 2, 4})
    for (int dqbuf : {1, 2}) bench90c("D=1024", big, bwd90c::Config{32, panels, dqbuf, 1});
}
