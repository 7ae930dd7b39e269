// The decode forward (ffpa-fwd-decode) against the double-precision CPU reference on random data:
// one and a few query rows, GQA and MQA groups up to 16 rows, causal both alignments with fully
// masked rows, key counts off the tile, B > 1, D 8..1024, both dtypes, dropout, additive bias in
// every shape and dtype, every kb and a range of slots. Small problems get a grid of a few blocks
// whose shares cross heads (a head's keys in two or three segments, merged), large ones one wave.
// Outputs are poisoned (NaN) before the run so an unwritten element fails. "[bench]" times B=1
// H=32 Nq=1 Nkv=8192 at D 320, 512 and 1024 against ffpa-fwd-sm80. Needs an sm_90 GPU.
#include <catch2/catch.hpp>

#include <cstdio>
#include <optional>
#include <random>
#include <vector>

#include "ffpa_support.hpp"
#include "gpu/cuda.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_fwd_decode.hpp"
#include "variants/ffpa_fwd_sm80.hpp"

using namespace ffpa;
using namespace ffpa::test;

namespace {

bool hopper() {
  static const bool yes = gpu::open_device(0).sm_major == 9;
  if (!yes) WARN("not an sm_90 GPU: ffpa-fwd-decode is not tested here");
  return yes;
}

void expect_close(const Problem& pr, std::optional<fwd_decode::Config> cfg = std::nullopt) {
  const fwd_decode::Config c = cfg ? *cfg : fwd_decode::default_config(pr);
  expect_forward_close(
      pr, to_string(c.knobs()), [&](const FfpaFwdParams& p, const gpu::DeviceInfo& dev) {
        REQUIRE(fwd_decode::check(c, static_cast<int>(pr.shape.D), dev.smem_per_block_optin).ok());
        return fwd_decode::bind(pr, c, p, dev);
      });
}

constexpr Dtype kTypes[] = {Dtype::bf16, Dtype::fp16};

// The default, then both tile widths at the fewest slots and at a deep ring, where they fit.
void expect_close_configs(const Problem& pr) {
  expect_close(pr);
  static const int smem = gpu::open_device(0).smem_per_block_optin;
  for (const fwd_decode::Config& c : {fwd_decode::Config{32, 2}, fwd_decode::Config{64, 2},
                                      fwd_decode::Config{32, 5}, fwd_decode::Config{64, 8}})
    if (fwd_decode::check(c, static_cast<int>(pr.shape.D), smem).ok()) expect_close(pr, c);
}

}  // namespace

TEST_CASE("fwd-decode: one query row, keys off the tile, D 8..1024, B > 1", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {8, 64, 136, 320, 512, 1024}) {
      expect_close(make(1, 1, 1, 1, 100, D, dt));  // one block
      expect_close(make(2, 4, 4, 1, 333, D, dt));  // shares across heads
    }
  for (int D : {64, 320, 512, 1024}) expect_close_configs(make(2, 4, 4, 1, 333, D));
  // One wave over 32 heads of 8192 keys: a head in several blocks' shares.
  expect_close(make(1, 32, 32, 1, 8192, 512));
  expect_close(make(1, 32, 32, 1, 8192, 320, Dtype::fp16));
}

TEST_CASE("fwd-decode: GQA and MQA groups up to 16 rows, Nq > 1", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes) {
    expect_close(make(1, 16, 1, 1, 1001, 320, dt));  // MQA: 16 rows
    expect_close(make(2, 8, 2, 4, 777, 512, dt));    // a group of 4, Nq = 4: 16 rows
    expect_close(make(1, 6, 2, 3, 500, 1024, dt));   // 9 rows
  }
  expect_close_configs(make(2, 8, 2, 2, 517, 512));
}

TEST_CASE("fwd-decode: causal, both alignments, fully masked rows", "[gpu]") {
  if (!hopper()) return;
  for (Causal causal : {Causal::bottom_right, Causal::top_left})
    for (Dtype dt : kTypes) {
      Problem p = make(2, 8, 2, 4, 333, 512, dt);
      p.causal = causal;
      expect_close(p);
      // Bottom-right with fewer keys than rows: rows 0 and 1 see no key (lse -inf, O zero).
      Problem m = make(1, 4, 1, 4, 2, 320, dt);
      m.causal = causal;
      expect_close(m);
    }
  Problem p = make(1, 4, 4, 1, 999, 320);
  p.causal = Causal::top_left;  // one visible key a head
  expect_close_configs(p);
}

TEST_CASE("fwd-decode: additive bias in every shape and dtype", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {320, 512})
      for (Problem p : bias_problems(D, dt)) {
        p.shape.Nq = 2;  // the group's rows at most 16
        if (p.shape.group() * p.shape.Nq > fwd_decode::kMaxRows) p.shape.Hkv = p.shape.Hq;
        expect_close(p);
      }
}

TEST_CASE("fwd-decode: dropout replays the forward's Philox stream", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {320, 512, 1024}) {
      Problem p = make(2, 4, 4, 1, 999, D, dt);
      p.dropout = 0.1;
      expect_close(p);
      Problem q = make(1, 8, 2, 3, 517, D, dt);
      q.dropout = 0.3;
      q.causal = Causal::bottom_right;
      q.bias = BiasKind::key;
      expect_close(q);
    }
  Problem p = make(2, 4, 4, 2, 333, 512);
  p.dropout = 0.2;
  expect_close_configs(p);
}

TEST_CASE("fwd-decode: the variant through AttnTensors passes the runner's FA3-rule check",
          "[gpu]") {
  if (!hopper()) return;
  auto v = make_ffpa_fwd_decode();
  Problem dec = make(2, 16, 4, 1, 3000, 512);
  dec.causal = Causal::bottom_right;
  dec.bias = BiasKind::key;
  Problem drop = make(1, 16, 16, 1, 3000, 320);
  drop.dropout = 0.1;
  expect_forward_variant_passes(*v, {dec, drop});
}

TEST_CASE("fwd-decode timings against ffpa-fwd-sm80", "[.][bench]") {
  if (!hopper()) return;
  for (int D : {320, 512, 1024})
    for (int64_t Hkv : {32, 8}) {
      const Problem pr = make(1, 32, Hkv, 1, 8192, D);
      const fwd::Config c80 = fwd::default_config(pr);
      bench_forward("sm80", pr, to_string(c80.knobs()),
                    [&](const FfpaFwdParams& p, const gpu::DeviceInfo& d) {
                      return fwd::bind(pr, c80, p, d);
                    });
      std::vector<fwd_decode::Config> cs = {fwd_decode::default_config(pr)};
      for (int kb : {32, 64})
        for (int slots : {2, 3, 4, 6}) cs.push_back(fwd_decode::Config{kb, slots});
      for (const fwd_decode::Config& c : cs)
        bench_forward("decode", pr, to_string(c.knobs()),
                      [&](const FfpaFwdParams& p, const gpu::DeviceInfo& d) {
                        return fwd_decode::bind(pr, c, p, d);
                      });
    }
}
