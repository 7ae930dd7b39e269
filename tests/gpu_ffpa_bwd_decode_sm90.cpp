// The Hopper decode backward (ffpa-bwd-decode-sm90) against the double-precision CPU reference on
// random data (random dO, the reference forward's o and lse; FA3's rule via
// expect_backward_close): one and a few query rows, GQA and MQA groups up to 16 rows, causal both
// alignments (keys no row sees, rows that see none), key counts off the tile, B > 1, D 8..1024,
// both dtypes, dropout, additive bias in every shape and dtype with dBias, every kb and warps
// count with the fewest and most slots, one pass and two. Small problems get a grid of a few blocks
// whose shares cross heads (a head's keys in two or three segments, each adding its dQ), large ones
// one wave. Outputs are poisoned (NaN) before the run so an unwritten element fails. "[bench]"
// times B=1 H=32 Nq=1 Nkv=8192 at D 320, 512 and 1024 against ffpa-bwd-decode. Needs an sm_90 GPU.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "ffpa_support.hpp"
#include "gpu/cuda.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_bwd_decode.hpp"
#include "variants/ffpa_bwd_decode_sm90.hpp"

using namespace ffpa;
using namespace ffpa::test;

namespace {

bool hopper() {
  static const bool yes = gpu::open_device(0).sm_major == 9;
  if (!yes) WARN("not an sm_90 GPU: ffpa-bwd-decode-sm90 is not tested here");
  return yes;
}

bool fits(const bwd_decode90::Config& c, const Problem& pr) {
  static const int smem = gpu::open_device(0).smem_per_block_optin;
  const int nr = bwd_decode90::computed_rows(static_cast<int>(pr.shape.group() * pr.shape.Nq));
  return bwd_decode90::rows_check(c, static_cast<int>(pr.shape.D), nr, smem).ok();
}

void expect_close(const Problem& pr, std::optional<bwd_decode90::Config> cfg = std::nullopt) {
  const bwd_decode90::Config c = cfg ? *cfg : bwd_decode90::default_config(pr);
  expect_backward_close(pr, to_string(c.knobs()),
                        [&](const FfpaBwdParams& p, const gpu::DeviceInfo& dev) {
                          REQUIRE(fits(c, pr));
                          return bwd_decode90::bind(pr, c, p, dev);
                        });
}

constexpr Dtype kTypes[] = {Dtype::bf16, Dtype::fp16};

// The default, then every tile width at the fewest slots and at a deep ring, where they fit.
void expect_close_configs(const Problem& pr) {
  expect_close(pr);
  bwd_decode90::Config two = bwd_decode90::default_config(pr);
  two.passes = 2;
  for (const bwd_decode90::Config& c :
       {bwd_decode90::Config{16, 2}, bwd_decode90::Config{32, 2}, bwd_decode90::Config{64, 2},
        bwd_decode90::Config{16, 8}, bwd_decode90::Config{32, 4, 8}, two,
        bwd_decode90::Config{16, 4, 8, 2}})
    if (fits(c, pr)) expect_close(pr, c);
}

}  // namespace

TEST_CASE("bwd-decode-sm90: one query row, keys off the tile, D 8..1024, B > 1", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {8, 64, 136, 320, 512, 1024}) {
      expect_close(make(1, 1, 1, 1, 100, D, dt));  // one block
      expect_close(make(2, 4, 4, 1, 333, D, dt));  // shares across heads
    }
  for (Dtype dt : kTypes)
    for (int D : {64, 320, 512, 1024}) {
      expect_close_configs(make(2, 4, 4, 1, 333, D, dt));
      if (dt == Dtype::bf16) expect_close_configs(make(1, 2, 2, 1, 1000, D, dt));
      expect_close(make(1, 2, 2, 1, 5, D, dt));  // one partial tile
    }
}

TEST_CASE("bwd-decode-sm90: two passes with D off the 64-column chunks (TMA stores clip)",
          "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {8, 72, 136, 200}) {
      for (Problem p : {make(2, 4, 4, 1, 333, D, dt), make(2, 8, 2, 1, 300, D, dt)}) {
        bwd_decode90::Config two = bwd_decode90::default_config(p);
        two.passes = 2;
        expect_close(p, two);
        p.causal = Causal::top_left;  // keys 1.. zero: the last partial block's rows too
        expect_close(p, two);
      }
    }
}

TEST_CASE("bwd-decode-sm90: GQA and MQA groups, a few rows (group x Nq up to 16)", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 512}) {
      expect_close_configs(make(2, 8, 2, 1, 200, D, dt));   // 4 rows
      expect_close_configs(make(1, 16, 1, 1, 130, D, dt));  // MQA: 16 rows
      expect_close_configs(make(2, 4, 2, 5, 77, D, dt));    // 10 rows, 5 query rows each
      expect_close_configs(make(1, 4, 4, 16, 100, D, dt));  // 16 query rows
    }
  for (Dtype dt : kTypes)
    for (int D : {320, 1024}) {
      expect_close_configs(make(2, 8, 2, 1, 300, D, dt));  // 4 rows
      expect_close_configs(make(1, 16, 1, 1, 97, D, dt));  // MQA: 16 rows
    }
}

TEST_CASE("bwd-decode-sm90: causal, both alignments", "[gpu]") {
  if (!hopper()) return;
  for (Causal causal : {Causal::bottom_right, Causal::top_left})
    for (int D : {64, 320, 512, 1024}) {
      Problem p = make(2, 4, 2, 6, 150, D);
      p.causal = causal;
      expect_close_configs(p);
      p = make(1, 2, 2, 9, 5, D);  // Nq > Nkv: rows without gradient
      p.causal = causal;
      expect_close_configs(p);
      // One row: top-left sees key 0 only (every other key's dK and dV stored as zeros).
      p = make(2, 4, 4, 1, 700, D, Dtype::fp16);
      p.causal = causal;
      expect_close_configs(p);
    }
}

TEST_CASE("bwd-decode-sm90: dropout replays the forward's Philox stream", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (int D : {64, 512, 1024}) {
      Problem p = make(2, 8, 2, 1, 300, D, dt);
      p.dropout = 0.1;
      expect_close_configs(p);
      p.causal = Causal::bottom_right;
      p.shape.Nq = 3;
      expect_close_configs(p);
    }
}

TEST_CASE("bwd-decode-sm90: additive bias in every shape and dtype, with dBias", "[gpu]") {
  if (!hopper()) return;
  for (Dtype dt : kTypes)
    for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
      for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input}) {
        Problem p = make(2, 4, 2, 3, 97, 320, dt);
        p.bias = m;
        p.bias_dtype = md;
        expect_close_configs(p);
        p.dropout = 0.1;
        p.causal = Causal::bottom_right;
        expect_close(p);
        p.causal = Causal::top_left;
        p.shape.Nkv = 250;
        expect_close(p, bwd_decode90::Config{16, 3});
      }
}

TEST_CASE("bwd-decode-sm90: every kb and warps, the fewest and most slots that fit", "[gpu]") {
  if (!hopper()) return;
  for (int D : {64, 320, 512, 1024})
    for (int warps : {4, 8})
      for (int kb : {16, 32, 64})
        for (int slots = 2; slots <= 8; ++slots) {
          const bwd_decode90::Config c{kb, slots, warps};
          const Problem p = make(2, 8, 4, 2, 257, D);
          // The fewest and the most slots that fit (between them only offsets change).
          if (!fits(c, p) ||
              (slots > 2 && slots < 8 && fits(bwd_decode90::Config{kb, slots + 1, warps}, p)))
            continue;
          expect_close(p, c);
        }
}

TEST_CASE("bwd-decode-sm90: the variant through AttnTensors passes the runner's FA3-rule check",
          "[gpu]") {
  if (!hopper()) return;
  auto v = make_ffpa_bwd_decode_sm90();
  const Problem dec = make(1, 16, 4, 1, 3000, 320, Dtype::fp16);
  const Problem odd = make(2, 4, 4, 3, 301, 136);
  expect_backward_variant_passes(*v, {dec, odd});
}

TEST_CASE("bwd-decode-sm90 timings against ffpa-bwd-decode", "[.][bench]") {
  if (!hopper()) return;
  for (int D : {320, 512, 1024}) {
    const Problem dec = make(1, 32, 32, 1, 8192, D);
    for (const bwd_decode90::Config& c :
         {bwd_decode90::default_config(dec), bwd_decode90::Config{16, 4},
          bwd_decode90::Config{16, 8}, bwd_decode90::Config{32, 3}, bwd_decode90::Config{32, 4},
          bwd_decode90::Config{64, 2}, bwd_decode90::Config{64, 3}, bwd_decode90::Config{16, 4, 8},
          bwd_decode90::Config{32, 3, 8}, bwd_decode90::Config{32, 4, 8},
          bwd_decode90::Config{64, 2, 8}, bwd_decode90::Config{16, 4, 4, 2},
          bwd_decode90::Config{16, 4, 8, 2}, bwd_decode90::Config{32, 4, 8, 2}}) {
      if (!fits(c, dec)) continue;
      bench_backward("decode", dec, "sm90 " + to_string(c.knobs()),
                     [&](AttnTensors& t, const gpu::DeviceInfo& dev) {
                       return bwd_decode90::bind(dec, c, t.bwd_params(), dev);
                     });
    }
    bench_backward(
        "decode", dec, "bwd-decode default", [&](AttnTensors& t, const gpu::DeviceInfo& dev) {
          return bwd_decode::bind(dec, bwd_decode::default_config(dec), t.bwd_params(), dev);
        });
  }
}
