// NVRTC compiles the Hopper decode backward (ffpa-bwd-decode-sm90) without a GPU, for sm_90a: at
// D in {64, 136, 320, 512, 1024} the default configuration for one query row and for a group of
// 16 with both dtypes, both causal alignments, dropout and each bias shape, and every kb and warps
// at the fewest and most slots that fit, plain and with every feature, must not spill and must
// not use a stack frame. Its
// checks, support surface (decode rows only, Hopper) and the ring's protocol (a model of the
// kernel's mbarrier waits and releases) are read here too.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ffpa_bwd_decode_sm90_layout.h"
#include "ffpa_support.hpp"
#include "gpu/nvrtc.hpp"
#include "support.hpp"
#include "tuning/grid.hpp"
#include "variants/ffpa_bwd_decode_sm90.hpp"

using namespace ffpa;
using test::h200;

namespace {

constexpr const char* kMain = "ffpa_bwd_decode_sm90_kernel";
constexpr const char* kWrites = "ffpa_bwd_decode_sm90_writes_kernel";
constexpr int kSmem = 227 * 1024;

// Decode: one query row of 32 heads over 8192 keys; `group` q heads a kv head.
Problem decode_problem(int D, Causal causal = Causal::none, int group = 1) {
  Problem p = test::compile_problem(D, causal);
  p.shape.Nq = 1;
  p.shape.Hkv = p.shape.Hq / group;
  return p;
}

void compile_clean(const bwd_decode90::Config& c, const Problem& p) {
  const bwd::Features f = bwd::Features::of(p);
  const int nr = bwd_decode90::computed_rows(static_cast<int>(p.shape.group() * p.shape.Nq));
  INFO("D=" << f.D << " " << to_string(c.knobs()) << " nr=" << nr << (f.bf16 ? " bf16" : " fp16")
            << " causal=" << f.causal << " bias=" << f.bias << " dbias=" << f.dbias
            << " dropout=" << f.dropout);
  REQUIRE(bwd_decode90::check(c, f.D, kSmem).ok());
  const nvrtc::Compiled comp = bwd_decode90::compile(c, f, nr);
  INFO(comp.log);
  if (c.passes == 2)
    test::check_clean(comp, {"ffpa_bwd_pre_kernel", kMain, kWrites, "ffpa_bwd_convert_kernel"});
  else
    test::check_clean(comp, {"ffpa_bwd_pre_kernel", kMain, "ffpa_bwd_convert_kernel"});
}

bool fits(const bwd_decode90::Config& c, int D, int nr) {
  return bwd_decode90::rows_check(c, D, nr, kSmem).ok();
}

}  // namespace

TEST_CASE("bwd-decode-sm90 configurations compile without spills", "[nvrtc][bwd-decode-sm90]") {
  test::FreshCache cache;
  for (int D : {64, 136, 320, 512, 1024})
    for (int group : {1, 16}) {
      const bwd_decode90::Config def =
          bwd_decode90::default_config(decode_problem(D, Causal::none, group));
      for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left})
        for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
          Problem p = decode_problem(D, causal, group);
          p.dtype = dt;
          compile_clean(def, p);
        }
      Problem p = decode_problem(D, Causal::bottom_right, group);
      p.dropout = 0.1;
      compile_clean(def, p);
      for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
        for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input}) {
          p.bias = m;
          p.bias_dtype = md;
          compile_clean(def, p);
        }
      // Every tile width at the fewest and the most slots that fit (the slots change only
      // offsets), plain and with the most work in the element phase (causal, dropout, a full
      // bias with dBias).
      const int nr = group == 1 ? 8 : 16;
      for (int warps : {4, 8})
        for (int kb : {16, 32, 64})
          for (int slots = 2; slots <= 8; ++slots) {
            const bwd_decode90::Config c{kb, slots, warps};
            if (!fits(c, D, nr)) continue;
            if (slots > 2 && slots < 8 && fits(bwd_decode90::Config{kb, slots + 1, warps}, D, nr))
              continue;
            compile_clean(c, decode_problem(D, Causal::none, group));
            Problem q = decode_problem(D, Causal::top_left, group);
            q.dropout = 0.1;
            q.bias = BiasKind::full;
            compile_clean(c, q);
          }
      // Two passes (P and dS out, then a kernel for dK and dV): the default and eight warps,
      // plain and with every feature.
      for (int warps : {4, 8}) {
        bwd_decode90::Config c = def;
        c.passes = 2;
        c.warps = warps;
        if (!fits(c, D, nr)) continue;
        compile_clean(c, decode_problem(D, Causal::none, group));
        Problem q = decode_problem(D, Causal::bottom_right, group);
        q.dropout = 0.1;
        q.bias = BiasKind::full;
        compile_clean(c, q);
      }
    }
}

TEST_CASE("bwd-decode-sm90 configuration checks and support surface", "[bwd-decode-sm90]") {
  using bwd_decode90::Config;
  auto def = [](int D, int group = 1) {
    return to_string(bwd_decode90::default_config(decode_problem(D, Causal::none, group)).knobs());
  };
  // Defaults: 16-key tiles in 4 slots, 8 warps where D splits into their parts and the rows
  // allow (8 rows), else 4.
  CHECK(def(64) == "kb=16,slots=4,warps=4,passes=1");
  CHECK(def(320) == "kb=16,slots=4,warps=4,passes=1");
  CHECK(def(512) == "kb=16,slots=4,warps=8,passes=1");
  CHECK(def(512, 16) == "kb=16,slots=4,warps=4,passes=1");
  CHECK(def(1024) == "kb=16,slots=4,warps=8,passes=1");
  CHECK(def(1024, 16) == "kb=16,slots=4,warps=4,passes=1");
  for (int D : {8, 64, 136, 320, 512, 768, 1024})
    for (int group : {1, 16}) {
      const Config c = bwd_decode90::default_config(decode_problem(D, Causal::none, group));
      CHECK(fits(c, D, group == 1 ? 8 : 16));
    }
  CHECK_THAT(bwd_decode90::check(Config{}, 1032, kSmem).reason, Catch::Contains("at most 1024"));
  CHECK_THAT(bwd_decode90::check(Config{}, 100, kSmem).reason, Catch::Contains("multiple of 8"));
  CHECK_THAT(bwd_decode90::check(Config{48, 4}, 512, kSmem).reason,
             Catch::Contains("kb is 16, 32 or 64"));
  CHECK_THAT(bwd_decode90::check(Config{32, 1}, 512, kSmem).reason,
             Catch::Contains("slots is 2 to 8"));
  CHECK_THAT(bwd_decode90::check(Config{32, 9}, 64, kSmem).reason,
             Catch::Contains("slots is 2 to 8"));
  CHECK_THAT(bwd_decode90::check(Config{64, 4}, 512, kSmem).reason,
             Catch::Contains("shared memory"));
  CHECK_THAT(bwd_decode90::check(Config{32, 3}, 1024, kSmem).reason,
             Catch::Contains("shared memory"));
  CHECK_THAT(bwd_decode90::check(Config{32, 4, 6}, 512, kSmem).reason,
             Catch::Contains("warps is 4 or 8"));
  CHECK_THAT(bwd_decode90::check(Config{32, 4, 4, 3}, 512, kSmem).reason,
             Catch::Contains("passes is 1 or 2"));
  // Eight warps on a key block of a 16-key tile: D = 320 does not split into 8 parts of whole
  // k16 steps; four warps do.
  CHECK_THAT(bwd_decode90::check(Config{16, 4, 8}, 320, kSmem).reason, Catch::Contains("8 parts"));
  CHECK(bwd_decode90::check(Config{32, 4, 8}, 320, kSmem).ok());
  // 16 rows past D = 512 with four warps: 16-key tiles only (registers).
  CHECK_THAT(bwd_decode90::rows_check(Config{32, 2}, 1024, 16, kSmem).reason,
             Catch::Contains("registers"));
  CHECK(bwd_decode90::rows_check(Config{32, 2}, 1024, 8, kSmem).ok());
  CHECK(bwd_decode90::rows_check(Config{16, 4}, 1024, 16, kSmem).ok());
  CHECK_THAT(bwd_decode90::rows_check(Config{16, 4, 8}, 512, 16, kSmem).reason,
             Catch::Contains("8 warps"));
  CHECK(bwd_decode90::rows_check(Config{16, 4, 8}, 512, 8, kSmem).ok());
  // The rows: 8 for one to 8, 16 past them (Q and dO twice the bytes).
  CHECK(bwd_decode90::computed_rows(1) == 8);
  CHECK(bwd_decode90::computed_rows(8) == 8);
  CHECK(bwd_decode90::computed_rows(9) == 16);
  CHECK(bwd_decode90::smem_bytes(Config{16, 4}, 1024, 16) >
        bwd_decode90::smem_bytes(Config{16, 4}, 1024, 8));

  auto v = make_ffpa_bwd_decode_sm90();
  CHECK(v->name() == "ffpa-bwd-decode-sm90");
  CHECK(v->pass() == Pass::bwd);
  const Grid g = load_variant_grid(v->name(), (test::source_dir() / "configs" / "grids").string());
  CHECK(check_grid_matches(g, v->knob_names()).ok());
  Problem dec = decode_problem(512);
  CHECK(v->supports(dec).ok());
  CHECK(v->supports(dec, v->default_knobs(dec), h200()).ok());
  dec.shape.Hkv = 2;  // a group of 16 q heads, one row each: 16 rows
  CHECK(v->supports(dec).ok());
  dec.shape.Nq = 2;  // 32 rows
  CHECK_THAT(v->supports(dec).reason, Catch::Contains("group x Nq = 32"));
  CHECK_THAT(v->supports(test::compile_problem(512)).reason, Catch::Contains("at most 16"));
  gpu::DeviceInfo ampere = h200();
  ampere.sm_major = 8;
  CHECK_FALSE(v->supports(decode_problem(512), v->default_knobs(decode_problem(512)), ampere).ok());
}

// The kernel's ring, modelled: the producer issues items (tile t's K, then its V) into slot
// n % slots after waiting for the slot's (n / slots - 1)-th release (parity); the consumers wait
// for tile t's K fill, then its V fill (parity n / slots), release V (after dP), then K (after
// dQ). Run in every interleaving a fair scheduler reaches (the producer as far ahead as the
// barriers allow, or as lazy as possible), every consumer read sees the item the producer put in
// the slot, no wait could complete on a later phase of the same parity, and both finish.
TEST_CASE("bwd-decode-sm90 ring protocol: no deadlock, every read sees its item",
          "[bwd-decode-sm90][sim]") {
  for (int slots = 2; slots <= 8; ++slots)
    for (int tiles = 0; tiles <= 9; ++tiles)
      for (bool eager : {true, false}) {
        INFO("slots=" << slots << " tiles=" << tiles << (eager ? " eager" : " lazy"));
        const int items = 2 * tiles;
        std::vector<int> fills(slots, 0), releases(slots, 0), content(slots, -1);
        int produced = 0;
        // The consumers' tile and step: 0 wait K, 1 wait V, 2 release V, 3 release K.
        int tile = 0, step = 0;
        bool progress = true;
        auto filled = [&](int n) {
          const int s = n % slots, use = n / slots;
          CHECK(fills[s] <= use + 1);
          return fills[s] > use;
        };
        auto release = [&](int n) {
          CHECK(content[n % slots] == n);  // the slot still holds the item until its release
          ++releases[n % slots];
        };
        while ((produced < items || tile < tiles) && progress) {
          progress = false;
          auto produce = [&] {
            if (produced >= items) return false;
            const int s = produced % slots, use = produced / slots;
            CHECK(releases[s] <= use);  // a parity wait cannot mistake a later phase
            if (use > 0 && releases[s] < use) return false;
            content[s] = produced;
            ++fills[s];
            ++produced;
            return true;
          };
          auto consume = [&] {
            if (tile >= tiles) return false;
            const int k = 2 * tile, v = k + 1;
            switch (step) {
              case 0:
                if (!filled(k)) return false;
                CHECK(content[k % slots] == k);
                break;
              case 1:
                if (!filled(v)) return false;
                CHECK(content[v % slots] == v);
                CHECK(content[k % slots] == k);  // K still there for dQ
                break;
              case 2:
                release(v);
                break;
              case 3:
                release(k);
                break;
            }
            if (++step == 4) step = 0, ++tile;
            return true;
          };
          if (eager) {
            while (produce()) progress = true;
            if (consume()) progress = true;
          } else {
            if (consume())
              progress = true;
            else if (produce())
              progress = true;
          }
        }
        CHECK(produced == items);
        CHECK(tile == tiles);
      }
}
