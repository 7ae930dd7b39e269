// NVRTC compiles the decode forward (ffpa-fwd-decode) without a GPU, for sm_90a: at D in {64,
// 136, 320, 512, 1024} the default configuration with both dtypes, both causal alignments,
// dropout and each bias shape, and every (kb, slots) that fits, plain and with every feature,
// must not spill and must not use a stack frame. Its checks, support surface (decode rows only,
// Hopper), the work split (ffpa_fwd_decode_layout.h) and the ring's protocol (a model of the
// kernel's mbarrier waits) are read here too.
#include <catch2/catch.hpp>

#include <deque>
#include <string>
#include <vector>

#include "ffpa_fwd_decode_layout.h"
#include "ffpa_support.hpp"
#include "gpu/nvrtc.hpp"
#include "support.hpp"
#include "tuning/grid.hpp"
#include "variants/ffpa_fwd_decode.hpp"

using namespace ffpa;
using test::h200;

namespace {

constexpr const char* kMain = "ffpa_fwd_decode_kernel";

// Decode: one query row of 32 heads over 8192 keys.
Problem decode_problem(int D, Causal causal = Causal::none) {
  Problem p = test::compile_problem(D, causal);
  p.shape.Nq = 1;
  return p;
}

void compile_clean(const fwd_decode::Config& c, const Problem& p) {
  const fwd::Features f = fwd::Features::of(p);
  INFO("D=" << f.D << " " << to_string(c.knobs()) << (f.bf16 ? " bf16" : " fp16")
            << " causal=" << f.causal << " bias=" << f.bias << " dropout=" << f.dropout);
  REQUIRE(fwd_decode::check(c, f.D, 227 * 1024).ok());
  const nvrtc::Compiled comp = fwd_decode::compile(c, f);
  INFO(comp.log);
  test::check_clean(comp, {kMain, "ffpa_fwd_decode_merge_kernel"});
}

}  // namespace

TEST_CASE("fwd-decode configurations compile without spills", "[nvrtc][fwd-decode]") {
  test::FreshCache cache;
  for (int D : {64, 136, 320, 512, 1024}) {
    const fwd_decode::Config def = fwd_decode::default_config(decode_problem(D));
    for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left})
      for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
        Problem p = decode_problem(D, causal);
        p.dtype = dt;
        compile_clean(def, p);
      }
    Problem p = decode_problem(D, Causal::bottom_right);
    p.dropout = 0.1;
    compile_clean(def, p);
    for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
      for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input}) {
        p.bias = m;
        p.bias_dtype = md;
        compile_clean(def, p);
      }
    // Every other configuration that fits: plain, and with the most work in the softmax
    // (causal, dropout, a full bias).
    for (int kb : {32, 64})
      for (int slots = 2; slots <= 8; ++slots) {
        const fwd_decode::Config c{kb, slots};
        if (!fwd_decode::check(c, D, 227 * 1024).ok()) continue;
        compile_clean(c, decode_problem(D));
        Problem q = decode_problem(D, Causal::top_left);
        q.dropout = 0.1;
        q.bias = BiasKind::full;
        compile_clean(c, q);
      }
  }
}

TEST_CASE("fwd-decode configuration checks and support surface", "[fwd-decode]") {
  const int smem = 227 * 1024;
  // Defaults: 64-key tiles up to D = 512 with as many slots as fit (at most 6), 32 past it.
  CHECK(to_string(fwd_decode::default_config(decode_problem(320)).knobs()) == "kb=64,slots=5");
  CHECK(to_string(fwd_decode::default_config(decode_problem(512)).knobs()) == "kb=64,slots=3");
  CHECK(to_string(fwd_decode::default_config(decode_problem(1024)).knobs()) == "kb=32,slots=2");
  CHECK(to_string(fwd_decode::default_config(decode_problem(64)).knobs()) == "kb=64,slots=6");
  for (int D : {8, 64, 136, 320, 512, 768, 1024})
    CHECK(fwd_decode::check(fwd_decode::default_config(decode_problem(D)), D, smem).ok());
  CHECK_THAT(fwd_decode::check(fwd_decode::Config{}, 1032, smem).reason,
             Catch::Contains("at most 1024"));
  CHECK_THAT(fwd_decode::check(fwd_decode::Config{}, 100, smem).reason,
             Catch::Contains("multiple of 8"));
  CHECK_THAT(fwd_decode::check(fwd_decode::Config{48, 4}, 512, smem).reason,
             Catch::Contains("kb is 32 or 64"));
  CHECK_THAT(fwd_decode::check(fwd_decode::Config{64, 1}, 512, smem).reason,
             Catch::Contains("slots is 2 to 8"));
  CHECK_THAT(fwd_decode::check(fwd_decode::Config{64, 9}, 64, smem).reason,
             Catch::Contains("slots is 2 to 8"));
  CHECK_THAT(fwd_decode::check(fwd_decode::Config{64, 4}, 512, smem).reason,
             Catch::Contains("shared memory"));
  CHECK_THAT(fwd_decode::check(fwd_decode::Config{32, 3}, 1024, smem).reason,
             Catch::Contains("shared memory"));

  auto v = make_ffpa_fwd_decode();
  CHECK(v->name() == "ffpa-fwd-decode");
  CHECK(v->pass() == Pass::fwd);
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

TEST_CASE("fwd-decode work split: equal shares, a head's segments in its slots", "[fwd-decode]") {
  using namespace ffpa_layout;
  // One wave of blocks over the heads' keys, as the host sizes it.
  CHECK(ffpa_layout::decode_blocks(32 * 8192, 64, 132) == 132);
  CHECK(ffpa_layout::decode_blocks(200, 64, 132) == 1);
  CHECK(ffpa_layout::decode_blocks(1, 32, 132) == 1);
  CHECK(ffpa_layout::decode_blocks(4 * 64 * 5, 64, 132) == 10);
  for (long long vis : {1LL, 7LL, 64LL, 333LL, 8192LL})
    for (long long heads : {1LL, 3LL, 32LL, 264LL})
      for (int blocks : {1, 2, 5, 132, 264}) {
        const long long total = heads * vis;
        if (blocks > total) continue;
        INFO("vis=" << vis << " heads=" << heads << " blocks=" << blocks);
        const int slots = decode_head_slots(total, blocks, vis);
        // Shares tile [0, total), differ by at most one key.
        long long lo = total, hi = 0;
        for (int i = 0; i < blocks; ++i) {
          const long long n = decode_start(total, blocks, i + 1) - decode_start(total, blocks, i);
          lo = std::min(lo, n), hi = std::max(hi, n);
        }
        CHECK(decode_start(total, blocks, 0) == 0);
        CHECK(decode_start(total, blocks, blocks) == total);
        CHECK(hi - lo <= 1);
        CHECK(lo >= 1);
        // Every key's block holds it; a head's blocks are consecutive and fit its slots.
        for (long long h = 0; h < heads; ++h) {
          const int first = decode_block_of(total, blocks, h * vis);
          const int last = decode_block_of(total, blocks, (h + 1) * vis - 1);
          CHECK(last - first + 1 <= slots);
          for (long long x : {h * vis, h * vis + vis / 2, (h + 1) * vis - 1}) {
            const int i = decode_block_of(total, blocks, x);
            CHECK(decode_start(total, blocks, i) <= x);
            CHECK(x < decode_start(total, blocks, i + 1));
          }
        }
      }
}

// The kernel's ring, modelled: the producer issues items (tile t's K, then its V) into slot
// n % slots after waiting for the slot's (n / slots - 1)-th release (parity), the consumers wait
// for item n's fill (parity n / slots), read K, release it, then wait for V, read it and release
// it. Run in every interleaving a fair scheduler reaches (the producer as far ahead as the
// barriers allow, or as lazy as possible), every consumer reads the item the producer put in the
// slot, no wait could complete on a later phase of the same parity, and both finish.
TEST_CASE("fwd-decode ring protocol: no deadlock, every read sees its item", "[fwd-decode][sim]") {
  for (int slots = 2; slots <= 8; ++slots)
    for (int tiles = 0; tiles <= 9; ++tiles)
      for (bool eager : {true, false}) {
        INFO("slots=" << slots << " tiles=" << tiles << (eager ? " eager" : " lazy"));
        const int items = 2 * tiles;
        std::vector<int> fills(slots, 0), releases(slots, 0), content(slots, -1);
        int produced = 0, consumed = 0;  // next item of each side
        bool progress = true;
        while ((produced < items || consumed < items) && progress) {
          progress = false;
          // Producer: item n may go into its slot once the slot's use - 1 release completed
          // (mbarrier phase (use - 1) done: releases > use - 1).
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
          // Consumers (in lock-step: the four warps release together): item n once its fill
          // (phase use) completed, then released.
          auto consume = [&] {
            if (consumed >= items) return false;
            const int s = consumed % slots, use = consumed / slots;
            CHECK(fills[s] <= use + 1);
            if (fills[s] <= use) return false;
            CHECK(content[s] == consumed);
            ++releases[s];
            ++consumed;
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
        CHECK(consumed == items);
      }
}
