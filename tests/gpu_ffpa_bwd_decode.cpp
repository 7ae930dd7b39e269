// The decode backward (ffpa-bwd-decode) against the double-precision CPU reference on random data
// (random dO, the reference forward's o and lse; FA3's rule via expect_backward_close): one and a
// few query rows, GQA and MQA groups up to 16 rows, causal both alignments, key counts off the
// tile, B > 1, D 8..1024, both dtypes, dropout, additive bias in every shape and dtype with dBias,
// every kb and stages. The default configuration splits a small problem's keys into one tile a
// block, so every case also runs with fixed splits: a block streams many tiles (one block a head,
// uneven shares of 3 blocks, the last block's last tile partial, tiles no causal row sees).
// Outputs are poisoned (NaN) before the run so an unwritten element fails. "[bench]" times B=1
// H=32 Nq=1 Nkv=8192 D=512 and 1024 against ffpa-bwd-sm80. Needs an sm_80 or newer GPU.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "ffpa_support.hpp"
#include "gpu/cuda.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_bwd_decode.hpp"
#include "variants/ffpa_bwd_sm80.hpp"

using namespace ffpa;
using namespace ffpa::test;

namespace {

bool ampere_or_later() {
  static const bool yes = gpu::open_device(0).sm_major >= 8;
  if (!yes) WARN("not an sm_80+ GPU: ffpa-bwd-decode is not tested here");
  return yes;
}

void expect_close(const Problem& pr, std::optional<bwd_decode::Config> cfg = std::nullopt) {
  const bwd_decode::Config c = cfg ? *cfg : bwd_decode::default_config(pr);
  expect_backward_close(
      pr, to_string(c.knobs()), [&](const FfpaBwdParams& p, const gpu::DeviceInfo& dev) {
        REQUIRE(bwd_decode::check(c, static_cast<int>(pr.shape.D), dev.smem_per_block_optin).ok());
        return bwd_decode::bind(pr, c, p, dev);
      });
}

constexpr Dtype kTypes[] = {Dtype::bf16, Dtype::fp16};

bool fits(const bwd_decode::Config& c, int D) {
  static const int smem = gpu::open_device(0).smem_per_block_optin;
  return bwd_decode::check(c, D, smem).ok();
}

// Configurations whose blocks stream several tiles (kb, stages, splits), those that fit D: one
// block a head (the default's kb and stages: the same cubin), 3 uneven shares, 2 shares of
// 32-key tiles (kb = 64 and the rest: "every kb, stages and splits").
std::vector<bwd_decode::Config> streaming(int D) {
  bwd_decode::Config whole = bwd_decode::default_config(make(1, 1, 1, 1, 1, D));
  whole.splits = 1;
  std::vector<bwd_decode::Config> out;
  for (const bwd_decode::Config& c :
       {whole, bwd_decode::Config{16, 2, 3}, bwd_decode::Config{32, 2, 2}})
    if (fits(c, D)) out.push_back(c);
  return out;
}

// The default configuration, then every streaming one.
void expect_close_streaming(const Problem& pr) {
  expect_close(pr);
  for (const bwd_decode::Config& c : streaming(static_cast<int>(pr.shape.D))) expect_close(pr, c);
}

}  // namespace

TEST_CASE("bwd-decode: one query row, keys off the tile, D 8..1024, B > 1", "[gpu]") {
  if (!ampere_or_later()) return;
  for (Dtype dt : kTypes)
    for (int D : {8, 64, 136, 320, 512, 1024}) {
      expect_close(make(1, 1, 1, 1, 1, D, dt));
      expect_close(make(2, 4, 4, 1, 333, D, dt));  // 20 tiles of 16 and 13 keys
    }
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512, 1024}) {
      expect_close_streaming(make(2, 4, 4, 1, 333, D, dt));
      if (dt == Dtype::bf16)
        expect_close_streaming(make(1, 2, 2, 1, 1000, D, dt));         // 62.5 tiles of 16
      expect_close(make(1, 2, 2, 1, 5, D, dt), streaming(D).front());  // one partial tile
    }
}

TEST_CASE("bwd-decode: GQA and MQA groups, a few rows (group x Nq up to 16)", "[gpu]") {
  if (!ampere_or_later()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 512}) {
      expect_close_streaming(make(2, 8, 2, 1, 200, D, dt));   // 4 rows
      expect_close_streaming(make(1, 16, 1, 1, 130, D, dt));  // MQA: 16 rows
      expect_close_streaming(make(2, 4, 2, 5, 77, D, dt));    // 10 rows, 5 query rows each
      expect_close_streaming(make(1, 4, 4, 16, 100, D, dt));  // 16 query rows
    }
  for (Dtype dt : kTypes)
    for (int D : {320, 1024}) {
      expect_close_streaming(make(2, 8, 2, 1, 300, D, dt));  // 4 rows
      expect_close_streaming(make(1, 16, 1, 1, 97, D, dt));  // MQA: 16 rows
    }
}

TEST_CASE("bwd-decode: causal, both alignments", "[gpu]") {
  if (!ampere_or_later()) return;
  for (Causal causal : {Causal::bottom_right, Causal::top_left})
    for (int D : {64, 320, 512, 1024}) {
      Problem p = make(2, 4, 2, 6, 150, D);
      p.causal = causal;
      expect_close_streaming(p);
      p = make(1, 2, 2, 9, 5, D);  // Nq > Nkv: rows without gradient
      p.causal = causal;
      expect_close_streaming(p);
      // One row: top-left sees key 0 only (every other tile, and whole blocks, not loaded).
      p = make(2, 4, 4, 1, 700, D, Dtype::fp16);
      p.causal = causal;
      expect_close_streaming(p);
    }
}

TEST_CASE("bwd-decode: dropout replays the forward's Philox stream", "[gpu]") {
  if (!ampere_or_later()) return;
  for (Dtype dt : kTypes) {
    for (int D : {64, 512, 1024}) {
      Problem p = make(2, 8, 2, 1, 300, D, dt);
      p.dropout = 0.1;
      expect_close_streaming(p);
      p.causal = Causal::bottom_right;
      p.shape.Nq = 3;
      expect_close_streaming(p);
    }
  }
}

TEST_CASE("bwd-decode: additive bias in every shape and dtype, with dBias", "[gpu]") {
  if (!ampere_or_later()) return;
  for (Dtype dt : kTypes)
    for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
      for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input}) {
        Problem p = make(2, 4, 2, 3, 97, 320, dt);
        p.bias = m;
        p.bias_dtype = md;
        expect_close_streaming(p);
        p.dropout = 0.1;
        p.causal = Causal::bottom_right;
        expect_close(p);
        expect_close(p, bwd_decode::Config{16, 3, 1});  // one block a head
        p.causal = Causal::top_left;
        p.shape.Nkv = 250;
        expect_close(p, bwd_decode::Config{16, 2, 3});
      }
}

TEST_CASE("bwd-decode: every kb, stages and splits that fit", "[gpu]") {
  if (!ampere_or_later()) return;
  for (int D : {64, 320, 512, 1024})
    for (int kb : {16, 32, 64})
      for (int stages : {2, 3})
        for (int splits : {0, 1, 3, 100}) {  // 100: more than the tiles, clamped
          const bwd_decode::Config c{kb, stages, splits};
          if (fits(c, D)) expect_close(make(2, 8, 4, 2, 257, D), c);
        }
}

TEST_CASE("bwd-decode: three blocks an SM (blocks = 3, 85 registers), D up to 512", "[gpu]") {
  if (!ampere_or_later()) return;
  for (int D : {64, 320, 512})
    for (int stages : {2, 3}) {
      const bwd_decode::Config c{16, stages, 0, 3};
      expect_close(make(2, 8, 4, 2, 257, D), c);
      Problem causal = make(1, 4, 4, 1, 3001, D, Dtype::fp16);
      causal.causal = Causal::bottom_right;
      expect_close(causal, c);
    }
}

TEST_CASE("bwd-decode: the variant through AttnTensors passes the runner's FA3-rule check",
          "[gpu]") {
  if (!ampere_or_later()) return;
  auto v = make_ffpa_bwd_decode();
  const Problem dec = make(1, 16, 4, 1, 3000, 320, Dtype::fp16);
  const Problem odd = make(2, 4, 4, 3, 301, 136);
  expect_backward_variant_passes(*v, {dec, odd});
}

TEST_CASE("bwd-decode timings", "[.][bench]") {
  if (!ampere_or_later()) return;
  for (int D : {512, 1024}) {
    const Problem dec = make(1, 32, 32, 1, 8192, D);
    for (const bwd_decode::Config& c : {bwd_decode::default_config(dec), bwd_decode::Config{16, 2},
                                        bwd_decode::Config{16, 3}, bwd_decode::Config{32, 2}}) {
      if (!fits(c, D)) continue;
      bench_backward("decode", dec, "decode " + to_string(c.knobs()),
                     [&](AttnTensors& t, const gpu::DeviceInfo& dev) {
                       return bwd_decode::bind(dec, c, t.bwd_params(), dev);
                     });
    }
    bench_backward("decode", dec, "sm80 default", [&](AttnTensors& t, const gpu::DeviceInfo& dev) {
      return bwd::bind(dec, bwd::default_config(dec), t.bwd_params(), dev);
    });
  }
}
