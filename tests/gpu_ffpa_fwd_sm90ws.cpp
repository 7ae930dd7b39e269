// The warp-specialized Hopper forward (ffpa-fwd-sm90ws) against the double-precision CPU reference
// on random data: self, cross, GQA/MQA, odd lengths (the TMA zero-fill and the masked tail block),
// an odd number of key blocks (the last pair's second block masked out), head dims 72..1024 (an odd
// panel count splits O 3|2; past 512 two CTAs split it), both dtypes, causal both alignments,
// B > 1, every ring depth and both cluster sizes. Outputs are poisoned (NaN) before the run so an
// unwritten element fails. "[bench]" times B=1 H=32 N=8192. Needs an sm_90 GPU: elsewhere every
// case warns and returns.
#include <catch2/catch.hpp>

#include <optional>

#include "ffpa_support.hpp"
#include "fwd90ws_cases.hpp"
#include "gpu/cuda.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_fwd_sm90ws.hpp"

using namespace ffpa;
using namespace ffpa::test;

namespace {

bool hopper() {
  static const bool yes = gpu::open_device(0).sm_major == 9;
  if (!yes) WARN("not an sm_90 GPU: ffpa-fwd-sm90ws is not tested here");
  return yes;
}

// sms: the multiprocessors the tail plan assumes (the device's by default); fewer make a small
// problem end with a partial wave the plan splits.
void expect_close(const Problem& pr, std::optional<fwd90ws::Config> cfg = std::nullopt,
                  int sms = 0) {
  fwd90ws::Config c = cfg ? *cfg : fwd90ws::default_config(pr);
  if (sms && !cfg) c.tail = 1;  // the split under test (off by default)
  expect_forward_close(
      pr, to_string(c.knobs()) + (sms ? " sms=" + std::to_string(sms) : ""),
      [&](const FfpaFwdParams& p, const gpu::DeviceInfo& dev) {
        REQUIRE(fwd90ws::problem_check(pr).ok());
        REQUIRE(fwd90ws::check(c, static_cast<int>(pr.shape.D), dev.smem_per_block_optin).ok());
        gpu::DeviceInfo d = dev;
        if (sms) d.sm_count = sms;
        return fwd90ws::bind(pr, c, p, d);
      });
}

}  // namespace

TEST_CASE("sm90ws: smallest case first (one block, one key pair, D=128)", "[gpu]") {
  if (!hopper()) return;
  expect_close(make(1, 1, 1, 128, 128, 128), fwd90ws::Config{8, 1});
  expect_close(make(1, 1, 1, 128, 128, 128), fwd90ws::Config{8, 2});
}

TEST_CASE("sm90ws: self-attention, lengths 128, 129, 200, 1000, D 320 and 512, both dtypes",
          "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : {Dtype::bf16, Dtype::fp16})
    for (int D : {320, 512})
      for (int n : {128, 129, 200, 1000}) {
        const Problem p = make(1, n == 1000 ? 1 : 2, 1, n, n, D, dt);
        expect_close(p, fwd90ws::Config{18, 1});
        expect_close(p, fwd90ws::Config{18, 2});
      }
  expect_close(make(2, 2, 2, 300, 300, 512));  // B > 1
}

TEST_CASE("sm90ws: head dims 72..512 (panels split between the consumers)", "[gpu]") {
  if (!hopper()) return;
  for (int D : {72, 128, 136, 256, 384, 448, 504}) expect_close(make(1, 2, 2, 150, 150, D));
}

TEST_CASE("sm90ws: cross-attention, odd key-block counts", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
    expect_close(make(1, 2, 2, 130, 333, 512, dt));  // 6 key blocks, the last partial
    expect_close(make(1, 2, 2, 333, 70, 320, dt));   // 2 key blocks
    expect_close(make(1, 2, 2, 200, 64, 512, dt));   // 1 key block: the pair's second masked
    expect_close(make(2, 3, 3, 128, 1000, 512, dt));
  }
}

TEST_CASE("sm90ws: GQA and MQA read the kv head h / group", "[gpu]") {
  if (!hopper()) return;
  expect_close(make(2, 8, 2, 100, 130, 512));
  expect_close(make(1, 6, 1, 45, 90, 320, Dtype::fp16));
  expect_close(make(1, 8, 1, 16, 300, 512));  // 8 q heads of 16 rows: 128 packed rows
}

TEST_CASE("sm90ws: causal, both alignments, fully masked rows", "[gpu]") {
  if (!hopper()) return;
  for (Causal c : {Causal::bottom_right, Causal::top_left})
    for (auto [nq, nkv] : {std::pair{200, 200}, {130, 300}, {300, 70}, {1000, 1000}})
      for (int D : {320, 512}) {
        Problem p = make(1, 4, 2, nq, nkv, D);
        p.causal = c;
        expect_close(p);
      }
}

TEST_CASE("sm90ws: ring depths and cluster sizes", "[gpu]") {
  if (!hopper()) return;
  const Problem p = make(1, 2, 2, 390, 450, 512);
  // 8: consumer 1's ring exactly holds its 4 V panels of a block.
  for (int slots : {8, 10, 12, 16, 18})
    for (int cl : {1, 2}) expect_close(p, fwd90ws::Config{slots, cl});
  const Problem p320 = make(1, 2, 2, 390, 450, 320);
  for (int slots : {4, 6, 18}) expect_close(p320, fwd90ws::Config{slots, 2});
}

// Both protocols of the consumers, whatever the default of the problem: the seesaw (row maxima one
// way, the rare second move of the maximum) and lock-step, with masking, a bias and dropout.
TEST_CASE("sm90ws: seesaw and lock-step", "[gpu]") {
  if (!hopper()) return;
  for (int seesaw : {0, 1}) {
    INFO("seesaw=" << seesaw);
    Problem p = make(1, 4, 2, 333, 517, 512);
    p.causal = Causal::bottom_right;
    p.bias = BiasKind::key;
    p.dropout = 0.1;
    // With dropout drawn in the softmax the seesaw takes P from shared memory: consumer 1
    // holding P_0 in registers through its softmax spills (ptxas, 24 bytes), and bind() would
    // refuse it. Drawn ahead (under held PV groups), P from registers or sP.
    expect_close(p, fwd90ws::Config{16, 1, seesaw, seesaw});
    for (int psmem : {0, 1}) expect_close(p, fwd90ws::Config{16, 1, psmem, seesaw, 0, 0, 1});
    // 7 key blocks: the last pair's second is empty.
    Problem d = make(2, 4, 2, 300, 400, 320, Dtype::fp16);
    d.dropout = 0.2;
    expect_close(d, fwd90ws::Config{6, 1, 0, seesaw, 0, 0, 1});  // consumer 0's ring: 3 V panels
    d.causal = Causal::top_left;
    expect_close(d, fwd90ws::Config{16, 1, 0, seesaw, 1, 0, 1});
    expect_close(d, fwd90ws::Config{16, 1, seesaw, seesaw, 1});
    expect_close(make(2, 2, 1, 300, 700, 320, Dtype::fp16), fwd90ws::Config{16, 1, 0, seesaw});
    expect_close(make(2, 2, 1, 300, 700, 320, Dtype::fp16), fwd90ws::Config{16, 1, 1, seesaw});
    Problem q = make(1, 2, 2, 200, 390, 1024);
    q.causal = Causal::top_left;
    expect_close(q, fwd90ws::Config{10, 1, 0, seesaw});
  }
}

// The odd O panel of D = 320 (and of each CTA at D = 576) with consumer 1: it then holds 3 panels
// of O and its ring 3 V panels of a block.
TEST_CASE("sm90ws: the odd O panel to consumer 1 (oddpanel=1)", "[gpu]") {
  if (!hopper()) return;
  for (int seesaw : {0, 1}) {
    INFO("seesaw=" << seesaw);
    for (int psmem : {0, 1})
      for (Dtype dt : {Dtype::bf16, Dtype::fp16})
        expect_close(make(2, 4, 2, 300, 700, 320, dt), fwd90ws::Config{16, 1, psmem, seesaw, 1});
    expect_close(make(1, 2, 2, 390, 450, 320), fwd90ws::Config{6, 2, 0, seesaw, 1});
    expect_close(make(1, 2, 2, 200, 390, 576), fwd90ws::Config{10, 1, 0, seesaw, 1});
    Problem p = make(1, 4, 2, 333, 517, 320);
    p.causal = Causal::top_left;
    expect_close(p, fwd90ws::Config{16, 1, 0, seesaw, 1});
    p.causal = Causal::bottom_right;
    p.bias = BiasKind::key;
    p.dropout = 0.1;
    expect_close(p, fwd90ws::Config{16, 1, 1, seesaw, 1});
  }
}

// Consumer 0 leading (the next pair's QK before consumer 1's P_1): its ring's other order (V of
// block 2t - 1 after K of block 2t, the last odd block's V after the loop), with one pair, with
// none (causal rows that see no key), odd block counts, the odd O panel either way, dropout
// drawn ahead, and two CTAs a query block.
TEST_CASE("sm90ws: consumer 0 leads (lead=1)", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
    expect_close(make(2, 4, 2, 333, 517, 512, dt), fwd90ws::Config{16, 1, 0, 1, 0, 1});
    expect_close(make(1, 2, 2, 129, 100, 512, dt), fwd90ws::Config{16, 1, 1, 1, 0, 1});
  }
  for (int odd : {0, 1})
    expect_close(make(1, 4, 2, 300, 400, 320), fwd90ws::Config{16, 1, 0, 1, odd, 1});
  expect_close(make(1, 2, 2, 200, 333, 128), fwd90ws::Config{4, 1, 0, 1, 0, 1});
  for (Causal c : {Causal::bottom_right, Causal::top_left}) {
    Problem p = make(1, 4, 2, 400, 300, 512);
    p.causal = c;
    expect_close(p, fwd90ws::Config{16, 1, 0, 1, 0, 1});
  }
  Problem d = make(2, 4, 2, 300, 453, 512);
  d.dropout = 0.1;
  d.bias = BiasKind::key;
  for (int psmem : {0, 1}) expect_close(d, fwd90ws::Config{16, 1, psmem, 1, 0, 1, 1});
  // Drawn in the softmax beside a bias, leading spills (P from sP too); from the keep mask it
  // does not.
  fwd90ws::Config km{16, 1, 1, 1, 0, 1, 0};
  km.kmask = 1;
  expect_close(d, km);
  expect_close(make(1, 2, 2, 200, 390, 1024), fwd90ws::Config{10, 1, 0, 1, 0, 1});
}

// Past D = 512 two CTAs split O's columns (the last one's panels partly past D at 576 and 968),
// each computing the whole S from a 128 KB Q.
TEST_CASE("sm90ws: D 520..1024, O split over two CTAs", "[gpu]") {
  if (!hopper()) return;
  for (int D : {520, 576, 640, 968, 1024}) expect_close(make(1, 2, 2, 150, 150, D));
  for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
    expect_close(make(2, 4, 2, 129, 333, 1024, dt));
    expect_close(make(1, 2, 2, 333, 64, 1024, dt));
  }
  for (Causal c : {Causal::bottom_right, Causal::top_left}) {
    Problem p = make(1, 4, 2, 300, 200, 1024);
    p.causal = c;
    expect_close(p);
  }
  Problem p = make(2, 4, 2, 100, 130, 1024);
  p.dropout = 0.1;
  p.bias = BiasKind::query_key;
  expect_close(p);
  for (int slots : {8, 10}) expect_close(make(1, 2, 2, 200, 390, 1024), fwd90ws::Config{slots, 1});
  expect_close(make(1, 2, 2, 200, 390, 768), fwd90ws::Config{8, 1, 1});
}

// Bias in every shape and dtype (read from global memory in the softmax) and dropout (the
// offset 12345 and Nkv = 130 put the 4-key Philox blocks off the block grid).
TEST_CASE("sm90ws: bias and dropout, D 320 and 512", "[gpu]") {
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
  Problem p = make(1, 2, 2, 1000, 1000, 512, Dtype::fp16);
  p.dropout = 0.1;
  p.bias = BiasKind::key;
  expect_close(p);
  // A cluster of two, P through shared memory, lock-step (the seesaw spills with dropout drawn
  // in its softmax beside a bias).
  expect_close(p, fwd90ws::Config{18, 2, 1, 0});
}

// The keep bits drawn before the forward into the mask (kmask): both protocols, the lengths off
// the tile grid (an odd key-block count: the last pair's second block past the mask), GQA with
// B > 1, causal both alignments (blocks past the diagonal never drawn), a bias beside it, D = 320
// with either odd O panel owner, D = 1024 (two CTAs a query block read one mask), a cluster's
// padding CTA past the rows, the last wave's pieces (key ranges from their first block), both
// dtypes. The tests' dropout offset is not a multiple of 4 (the straddling Philox blocks).
TEST_CASE("sm90ws: dropout keep bits from the mask (kmask=1)", "[gpu]") {
  if (!hopper()) return;
  // The two-consumer modes (rows = 0, the default at D <= 320, has its keep-mask cases in
  // test::rows_cases).
  auto cfg = [](const Problem& p, int seesaw) {
    fwd90ws::Config c = fwd90ws::default_config(p);
    c.rows = 0;
    c.seesaw = seesaw;
    c.kmask = 1;
    return c;
  };
  for (int seesaw : {0, 1}) {
    for (Dtype dt : {Dtype::bf16, Dtype::fp16})
      for (int n : {128, 1000}) {
        Problem p = make(1, 2, 2, n, n, 512, dt);
        p.dropout = 0.1;
        expect_close(p, cfg(p, seesaw));
      }
    Problem g = make(2, 4, 2, 100, 130, 384);  // GQA, B > 1, 3 key blocks
    g.dropout = 0.2;
    expect_close(g, cfg(g, seesaw));
    g.causal = Causal::bottom_right;
    g.bias = BiasKind::key;
    expect_close(g, cfg(g, seesaw));
    g.causal = Causal::top_left;
    g.bias = BiasKind::full;
    g.bias_dtype = BiasDtype::input;
    expect_close(g, cfg(g, seesaw));
    Problem d320 = make(1, 2, 2, 300, 333, 320);
    d320.dropout = 0.1;
    for (int odd : {0, 1}) {
      fwd90ws::Config c = cfg(d320, seesaw);
      c.oddpanel = odd;
      expect_close(d320, c);
    }
    Problem d1024 = make(1, 2, 1, 200, 300, 1024);
    d1024.dropout = 0.1;
    d1024.causal = Causal::bottom_right;
    expect_close(d1024, cfg(d1024, seesaw));
    Problem cl = make(1, 2, 2, 130, 300, 512);  // 3 query blocks: the cluster pads a fourth
    cl.dropout = 0.1;
    fwd90ws::Config c = cfg(cl, seesaw);
    c.cluster = 2;
    expect_close(cl, c);
  }
  // More key blocks than one CTA of the keep kernel draws (FwdSm90wsKeep::kCtaBlocks): a row
  // block's mask from two CTAs; top-left causal rows see the first key block only.
  for (Causal causal : {Causal::none, Causal::top_left}) {
    Problem k = make(1, 2, 1, 70, 2100, 512);  // 3 row blocks of the group's 140 rows, 33 blocks
    k.dropout = 0.1;
    k.causal = causal;
    expect_close(k, cfg(k, 0));
  }
  Problem t = make(1, 3, 3, 200, 1000, 512);  // 12 units, 1 in the last wave: 8 pieces x 1 pair
  t.dropout = 0.1;
  fwd90ws::Config c = cfg(t, 0);
  c.tail = 1;
  expect_close(t, c, 11);
}

// The last wave split by key range (tail): a few assumed multiprocessors leave one to three units
// in the last wave, split into pieces of 1..4 key-block pairs whose partials the merge combines.
// Pieces with an odd block count (the last pair's second block masked), lengths off the tile grid,
// the first query block partial, GQA and B > 1, D past 512 (two CTAs a block), bias and dropout
// at absolute key positions; tail=0 on the same problems.
TEST_CASE("sm90ws: the last wave's query blocks split by key range (tail)", "[gpu]") {
  if (!hopper()) return;
  // Units, the last wave's, pieces x pairs (fwd90ws::plan_tail):
  for (Dtype d : {Dtype::bf16, Dtype::fp16}) {
    expect_close(make(1, 1, 1, 1000, 1000, 512, d), std::nullopt, 5);  // 16, 1, 4 x 2
    expect_close(make(1, 1, 1, 150, 1000, 320, d), std::nullopt, 8);   // 3, all 3, 2 x 4
    expect_close(make(1, 2, 2, 640, 300, 512, d), std::nullopt, 6);    // 20, 2, 3 x 1 (5 blocks)
    expect_close(make(2, 8, 2, 100, 900, 384, d), std::nullopt, 9);    // 28, 1, 8 x 1
    expect_close(make(1, 2, 2, 200, 777, 1024, d), std::nullopt, 5);   // 16, 1, 4 x 2
  }
  for (BiasKind m : {BiasKind::key, BiasKind::full}) {
    Problem p = make(1, 3, 3, 200, 1000, 512);  // 12, 1, 8 x 1
    p.bias = m;
    p.dropout = 0.1;
    expect_close(p, std::nullopt, 11);
    fwd90ws::Config c = fwd90ws::default_config(p);
    c.kmask = 0;  // drawn ahead in the forward (the default takes the keep mask)
    c.ahead = 1;
    c.tail = 1;
    expect_close(p, c, 11);
    c.tail = 0;
    expect_close(p, c, 11);
  }
  fwd90ws::Config c = fwd90ws::default_config(make(1, 1, 1, 1000, 1000, 512));
  c.tail = 0;
  expect_close(make(1, 1, 1, 1000, 1000, 512), c, 5);
  // In clusters of two (both CTAs of a cluster on one key range): clusters, the last wave's,
  // pieces x pairs, planned on sms / 2 resident clusters.
  const auto clustered = [](const Problem& p) {
    fwd90ws::Config k = fwd90ws::default_config(p);
    k.cluster = 2;
    k.tail = 1;
    return k;
  };
  for (Dtype d : {Dtype::bf16, Dtype::fp16}) {
    const Problem p = make(1, 5, 5, 200, 1000, 512, d);  // 10, 1, 8 x 1
    expect_close(p, clustered(p), 18);
  }
  // A CTA past the rows (3 query blocks a head, 4 in clusters) and an odd block count (27):
  // 8, 1, 7 x 2 (the last piece's last pair half masked).
  const Problem odd = make(1, 4, 4, 150, 1700, 512);
  expect_close(odd, clustered(odd), 14);
  const Problem gqa = make(2, 8, 2, 100, 900, 384);  // 400 rows a kv head: 16, 1, 4 x 2
  expect_close(gqa, clustered(gqa), 10);
  for (BiasKind m : {BiasKind::key, BiasKind::full}) {
    Problem p = make(1, 3, 3, 200, 1000, 512);  // 6, 1, 4 x 2
    p.bias = m;
    p.dropout = 0.1;
    expect_close(p, clustered(p), 10);
  }
}

// The next pair's QK before this pair's PVs (qknext): the ring's order (V of pair t after K of
// pair t + 1), no pair (causal rows that see no key), one pair, odd block counts (the last pair's
// second block masked out), head dims 72..576 (the odd O panel either way; past 512 two CTAs a
// query block), GQA with B > 1, causal both alignments, every bias shape, dropout drawn in the
// softmax and from the keep mask (D = 320 and 512), the last wave's pieces, both dtypes.
TEST_CASE("sm90ws: the next pair's QK before the PVs (qknext=1)", "[gpu]") {
  if (!hopper()) return;
  for (const test::Fwd90wsCase& c : test::qknext_cases()) expect_close(c.problem, c.config, c.sms);
}

// The rows mode: 128 query rows a CTA, 64 and all of O's columns a consumer, one ring read by
// both, with the consumers taking turns (pingpong) and without (test::rows_cases).
TEST_CASE("sm90ws: 128 rows a CTA, each consumer all of O (rows=1)", "[gpu]") {
  if (!hopper()) return;
  for (const test::Fwd90wsCase& c : test::rows_cases()) expect_close(c.problem, c.config, c.sms);
}

// The same cases with the own P read from shared memory (psmem): if one path fails and the other
// passes, the failure is in the P fragments (RS) or in the P tile (SS).
TEST_CASE("sm90ws: own P through shared memory (psmem=1)", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : {Dtype::bf16, Dtype::fp16})
    for (int D : {320, 512}) {
      expect_close(make(1, 2, 1, 129, 129, D, dt), fwd90ws::Config{18, 1, 1});
      expect_close(make(1, 8, 2, 70, 333, D, dt), fwd90ws::Config{18, 2, 1});
    }
  Problem c = make(1, 4, 2, 200, 200, 512);
  c.causal = Causal::top_left;
  expect_close(c, fwd90ws::Config{18, 1, 1});
}

TEST_CASE("sm90ws: the variant through AttnTensors passes the runner's FA3-rule check", "[gpu]") {
  if (!hopper()) return;
  auto v = make_ffpa_fwd_sm90ws();
  Problem self = make(2, 8, 2, 333, 333, 512);
  self.causal = Causal::bottom_right;
  Problem cross = make(1, 16, 4, 130, 3000, 320);
  cross.bias = BiasKind::key;
  Problem drop = make(1, 4, 4, 500, 500, 512);
  drop.dropout = 0.1;
  expect_forward_variant_passes(*v, {self, cross, drop});
}

namespace {

void bench(const char* name, const Problem& pr, const fwd90ws::Config& c) {
  bench_forward(name, pr, to_string(c.knobs()),
                [&](const FfpaFwdParams& p, const gpu::DeviceInfo& dev) {
                  return fwd90ws::bind(pr, c, p, dev);
                });
}

}  // namespace

TEST_CASE("sm90ws forward timings", "[.][bench]") {
  if (!hopper()) return;
  const int N = 8192;
  for (int D : {512, 320, 384, 448, 576, 768, 1024}) {
    const Problem self = make(1, 32, 32, N, N, D);
    bench("self", self, fwd90ws::default_config(self));
    if (D == 320)  // alternated, twice: the odd O panel with consumer 0, then with consumer 1
      for (int rep = 0; rep < 2; ++rep)
        for (int seesaw : {1, 0})
          for (int odd : {0, 1}) bench("oddpanel", self, fwd90ws::Config{16, 1, 0, seesaw, odd});
    if (D == 320 || D == 512)  // alternated, twice: consumer 0 waiting, then leading
      for (int rep = 0; rep < 2; ++rep)
        for (int odd = 0; odd <= (D == 320 ? 1 : 0); ++odd)
          for (int lead : {0, 1}) bench("lead", self, fwd90ws::Config{16, 1, 0, 1, odd, lead});
    if (D <= 512) {  // alternated, twice: seesaw, lock-step, lock-step with the next QK first
      fwd90ws::Config next{16, 1, 0, 0};
      next.qknext = 1;
      for (int rep = 0; rep < 2; ++rep) {
        for (int seesaw : {1, 0}) bench("qknext", self, fwd90ws::Config{16, 1, 0, seesaw});
        bench("qknext", self, next);
      }
    }
    if (D != 512) continue;
    bench("psmem", self, fwd90ws::Config{16, 1, 1});
    for (int slots : {12, 18}) bench("slots", self, fwd90ws::Config{slots, 1});
    bench("cluster", self, fwd90ws::Config{16, 2});
    Problem causal = self;
    causal.causal = Causal::bottom_right;
    bench("causal", causal, fwd90ws::default_config(causal));
    bench("gqa", make(1, 32, 8, N, N, D), fwd90ws::default_config(self));
    bench("cross", make(1, 32, 32, 1024, N, D), fwd90ws::default_config(self));
    Problem drop = self;
    drop.dropout = 0.1;
    Problem biased = self;
    biased.bias = BiasKind::key;
    biased.bias_dtype = BiasDtype::input;
    // Alternating, twice: neighbouring runs of one configuration differ by up to 15 % on the H200.
    for (int rep = 0; rep < 2; ++rep)
      for (int seesaw : {0, 1}) bench("seesaw", self, fwd90ws::Config{16, 1, 0, seesaw});
    for (int seesaw : {0, 1}) {
      bench("dropout", drop, fwd90ws::Config{16, 1, seesaw, seesaw});
      for (int psmem : {0, 1})
        bench("dropout ahead", drop, fwd90ws::Config{16, 1, psmem, seesaw, 0, 0, 1});
      if (seesaw) bench("dropout ahead lead", drop, fwd90ws::Config{16, 1, 0, 1, 0, 1, 1});
      fwd90ws::Config km{16, 1, 0, seesaw};
      km.kmask = 1;
      bench("dropout kmask", drop, km);
      bench("bias", biased, fwd90ws::Config{16, 1, 0, seesaw});
    }
  }
}
