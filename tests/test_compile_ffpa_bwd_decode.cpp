// NVRTC compiles the decode backward (ffpa-bwd-decode) without a GPU, for sm_90a and sm_80: at D
// in {64, 136, 320, 512, 1024} the default configuration with both dtypes, both causal
// alignments, dropout and each bias shape, and every other (kb, stages) that fits, plain and with
// every feature, must not spill and must not use a stack frame. Its checks, support surface
// (decode rows only) and the host's choice of splits are read here too.
#include <catch2/catch.hpp>

#include <string>

#include "ffpa_bwd_decode_layout.h"
#include "ffpa_support.hpp"
#include "gpu/nvrtc.hpp"
#include "support.hpp"
#include "tuning/grid.hpp"
#include "variants/ffpa_bwd_decode.hpp"

using namespace ffpa;
using test::h200;

namespace {

constexpr const char* kMain = "ffpa_bwd_decode_kernel";

// Decode: one query row of 32 heads over 8192 keys.
Problem decode_problem(int D, Causal causal = Causal::none) {
  Problem p = test::compile_problem(D, causal);
  p.shape.Nq = 1;
  return p;
}

void compile_clean(const bwd_decode::Config& c, const bwd::Features& f, const std::string& arch,
                   int rows = 1) {
  INFO("D=" << f.D << " " << to_string(c.knobs()) << " rows=" << rows
            << (f.bf16 ? " bf16" : " fp16") << " causal=" << f.causal << " bias=" << f.bias
            << " dbias=" << f.dbias << " dropout=" << f.dropout << " " << arch);
  REQUIRE(bwd_decode::check(c, f.D, 227 * 1024).ok());
  const nvrtc::Compiled comp = bwd_decode::compile(c, f, rows, arch);
  INFO(comp.log);
  test::check_clean(comp, {"ffpa_bwd_pre_kernel", kMain, "ffpa_bwd_convert_kernel"});
}

}  // namespace

TEST_CASE("bwd-decode configurations compile without spills", "[nvrtc][bwd-decode]") {
  test::FreshCache cache;
  for (const char* arch : {"sm_90a", "sm_80"})
    for (int D : {64, 136, 320, 512, 1024}) {
      // The default configuration with every feature.
      const bwd_decode::Config def = bwd_decode::default_config(decode_problem(D));
      for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left})
        for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
          Problem p = decode_problem(D, causal);
          p.dtype = dt;
          compile_clean(def, bwd::Features::of(p), arch);
        }
      Problem p = decode_problem(D, Causal::bottom_right);
      p.dropout = 0.1;
      compile_clean(def, bwd::Features::of(p), arch);
      for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
        for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input}) {
          p.bias = m;
          p.bias_dtype = md;
          compile_clean(def, bwd::Features::of(p), arch);
        }
      // Every other configuration that fits: plain, and with the most registers (causal,
      // dropout, a full bias with dBias).
      for (int kb : {16, 32, 64})
        for (int stages : {2, 3}) {
          const bwd_decode::Config c{kb, stages};
          if (!bwd_decode::check(c, D, 227 * 1024).ok()) continue;
          compile_clean(c, bwd::Features::of(decode_problem(D)), arch);
          Problem q = decode_problem(D, Causal::top_left);
          q.dropout = 0.1;
          q.bias = BiasKind::full;
          compile_clean(c, bwd::Features::of(q), arch);
        }
      // Three blocks an SM (85 registers) with 16-key tiles, up to D = 512, plain and causal;
      // one row (4 parts of D), two (2 parts) and a GQA group of 4 (none).
      if (D <= 512)
        for (int stages : {2, 3})
          for (Causal causal : {Causal::none, Causal::bottom_right})
            for (int rows : {1, 2, 4})
              compile_clean(bwd_decode::Config{16, stages, 0, 3},
                            bwd::Features::of(decode_problem(D, causal)), arch, rows);
    }
}

TEST_CASE("bwd-decode configuration checks and support surface", "[bwd-decode]") {
  const int smem = 227 * 1024;
  bwd_decode::Config c;  // kb = 16, two stages
  for (int D : {8, 64, 320, 512, 1024}) CHECK(bwd_decode::check(c, D, smem).ok());
  for (int D : {8, 64, 320, 512, 1024})
    CHECK(bwd_decode::check(bwd_decode::default_config(decode_problem(D)), D, smem).ok());
  CHECK(bwd_decode::default_config(decode_problem(512)).stages == 3);
  CHECK(bwd_decode::default_config(decode_problem(1024)).stages == 2);
  CHECK_THAT(bwd_decode::check(c, 1032, smem).reason, Catch::Contains("at most 1024"));
  CHECK_THAT(bwd_decode::check(c, 100, smem).reason, Catch::Contains("multiple of 8"));
  c.stages = 3;
  CHECK(bwd_decode::check(c, 512, smem).ok());
  CHECK_THAT(bwd_decode::check(c, 1024, smem).reason, Catch::Contains("shared memory"));
  c.stages = 4;
  CHECK_THAT(bwd_decode::check(c, 512, smem).reason, Catch::Contains("stages is 2 or 3"));
  c = bwd_decode::Config{32, 2};
  CHECK(bwd_decode::check(c, 512, smem).ok());
  CHECK_THAT(bwd_decode::check(c, 1024, smem).reason, Catch::Contains("shared memory"));
  c.stages = 3;
  CHECK(bwd_decode::check(c, 320, smem).ok());
  CHECK_THAT(bwd_decode::check(c, 512, smem).reason, Catch::Contains("shared memory"));
  c = bwd_decode::Config{64, 2};
  CHECK(bwd_decode::check(c, 320, smem).ok());
  CHECK_THAT(bwd_decode::check(c, 512, smem).reason, Catch::Contains("shared memory"));
  c.kb = 48;
  CHECK_THAT(bwd_decode::check(c, 512, smem).reason, Catch::Contains("kb is 16, 32 or 64"));
  c = bwd_decode::Config{};
  c.blocks = 4;
  CHECK_THAT(bwd_decode::check(c, 512, smem).reason,
             Catch::Contains("blocks is 0 (by D), 1, 2 or 3"));
  c.blocks = 3;
  CHECK(bwd_decode::check(c, 512, smem).ok());
  // blocks is the kernel's (its launch bounds): a macro, one cubin each.
  const bwd::Features f512 = bwd::Features::of(decode_problem(512));
  CHECK(bwd_decode::nvrtc_options(c, f512, 1) !=
        bwd_decode::nvrtc_options(bwd_decode::Config{}, f512, 1));
  c = bwd_decode::Config{};
  c.splits = -1;
  CHECK_THAT(bwd_decode::check(c, 512, smem).reason, Catch::Contains("splits"));
  // splits is the host's: it is no macro of the kernel (one cubin for every count).
  c.splits = 8;
  const bwd::Features ft = bwd::Features::of(decode_problem(512));
  CHECK(bwd_decode::nvrtc_options(c, ft, 1) ==
        bwd_decode::nvrtc_options(bwd_decode::Config{}, ft, 1));

  auto v = make_ffpa_bwd_decode();
  CHECK(v->name() == "ffpa-bwd-decode");
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
  gpu::DeviceInfo volta = h200();
  volta.sm_major = 7;
  CHECK_FALSE(v->supports(decode_problem(512), v->default_knobs(decode_problem(512)), volta).ok());
}

TEST_CASE("bwd-decode fills the GPU in whole waves", "[bwd-decode]") {
  gpu::DeviceInfo dev = h200();
  dev.regs_per_sm = 65536;
  // D = 512, one row, kb = 16, three stages: ~100 KB, two blocks an SM at <= 128 registers.
  const int smem = ffpa_layout::bwd_decode_layout(512, 16, 3, 1).bytes;
  CHECK(bwd_decode::resident_blocks(smem, 128, dev) == 2);
  CHECK(bwd_decode::resident_blocks(smem, 168, dev) == 1);  // registers bound
  CHECK(bwd_decode::resident_blocks(smem, 0, dev) == 2);
  CHECK(bwd_decode::resident_blocks(ffpa_layout::bwd_decode_layout(512, 16, 2, 1).bytes, 64, dev) ==
        3);
  // H=32, B=1, Nkv=8192: 512 tiles a head on 132 x 2 slots: 8 splits (256 blocks, one wave).
  const int64_t slots = int64_t{dev.sm_count} * 2;
  CHECK(bwd_decode::auto_splits(32, 512, 3, slots) == 8);
  // A grid that already fills the GPU keeps whole heads a block.
  CHECK(bwd_decode::auto_splits(4 * slots, 512, 3, slots) == 1);
  // One head: as many blocks as slots allow, never more than its tiles.
  CHECK(bwd_decode::auto_splits(1, 512, 3, slots) <= slots);
  CHECK(bwd_decode::auto_splits(1, 5, 3, slots) <= 5);
  CHECK(bwd_decode::auto_splits(1, 1, 2, slots) == 1);
  for (int64_t heads : {1, 7, 32, 100, 264, 1000})
    for (int64_t tiles : {1, 3, 64, 512, 4096}) {
      const int s = bwd_decode::auto_splits(heads, tiles, 3, slots);
      CHECK(s >= 1);
      CHECK(s <= tiles);
    }
}

TEST_CASE("bwd-decode bind refuses a problem it does not handle before touching the GPU",
          "[bwd-decode]") {
  const Problem p = test::compile_problem(512);  // 8192 query rows
  FfpaBwdParams prm{};
  CHECK_THROWS_AS(bwd_decode::bind(p, bwd_decode::default_config(p), prm, h200()), Unsupported);
}
