// NVRTC compiles the decode backward (ffpa-bwd-decode) without a GPU, for sm_90a and sm_80: the
// default configuration and kb = 64 at D in {64, 136, 320, 512, 1024}, both dtypes, both causal
// alignments, dropout and each bias shape, must not spill and must not use a stack frame. Its
// checks and support surface (decode rows only) are read here too.
#include <catch2/catch.hpp>

#include <string>

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

void compile_clean(const bwd_decode::Config& c, const bwd::Features& f, const std::string& arch) {
  INFO("D=" << f.D << " " << to_string(c.knobs()) << (f.bf16 ? " bf16" : " fp16")
            << " causal=" << f.causal << " bias=" << f.bias << " dbias=" << f.dbias
            << " dropout=" << f.dropout << " " << arch);
  REQUIRE(bwd_decode::check(c, f.D, 227 * 1024).ok());
  const nvrtc::Compiled comp = bwd_decode::compile(c, f, arch);
  INFO(comp.log);
  test::check_clean(comp, {"ffpa_bwd_pre_kernel", kMain, "ffpa_bwd_convert_kernel"});
}

}  // namespace

TEST_CASE("bwd-decode configurations compile without spills", "[nvrtc][bwd-decode]") {
  test::FreshCache cache;
  for (const char* arch : {"sm_90a", "sm_80"})
    for (int D : {64, 136, 320, 512, 1024})
      for (int kb : {32, 64}) {
        const bwd_decode::Config c{kb};
        if (!bwd_decode::check(c, D, 227 * 1024).ok()) continue;
        for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left})
          for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
            Problem p = decode_problem(D, causal);
            p.dtype = dt;
            compile_clean(c, bwd::Features::of(p), arch);
          }
        Problem p = decode_problem(D, Causal::bottom_right);
        p.dropout = 0.1;
        compile_clean(c, bwd::Features::of(p), arch);
        for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
          for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input}) {
            p.bias = m;
            p.bias_dtype = md;
            compile_clean(c, bwd::Features::of(p), arch);
          }
      }
}

TEST_CASE("bwd-decode configuration checks and support surface", "[bwd-decode]") {
  const int smem = 227 * 1024;
  bwd_decode::Config c;  // kb = 32
  for (int D : {8, 64, 320, 512, 1024}) CHECK(bwd_decode::check(c, D, smem).ok());
  CHECK_THAT(bwd_decode::check(c, 1032, smem).reason, Catch::Contains("at most 1024"));
  CHECK_THAT(bwd_decode::check(c, 100, smem).reason, Catch::Contains("multiple of 8"));
  c.kb = 64;
  CHECK(bwd_decode::check(c, 512, smem).ok());
  CHECK_THAT(bwd_decode::check(c, 1024, smem).reason, Catch::Contains("shared memory"));
  c.kb = 48;
  CHECK_THAT(bwd_decode::check(c, 512, smem).reason, Catch::Contains("kb is 32 or 64"));

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

TEST_CASE("bwd-decode bind refuses a problem it does not handle before touching the GPU",
          "[bwd-decode]") {
  const Problem p = test::compile_problem(512);  // 8192 query rows
  FfpaBwdParams prm{};
  CHECK_THROWS_AS(bwd_decode::bind(p, bwd_decode::default_config(p), prm, h200()), Unsupported);
}
