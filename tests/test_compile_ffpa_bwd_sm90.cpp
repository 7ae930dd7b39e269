// NVRTC compiles the Hopper wgmma backward (ffpa-bwd-sm90) for sm_90a without a GPU: default
// configurations at D in {64, 128, 320, 512}, both dtypes and both causal alignments (and with
// dropout and each bias shape), must not spill, must not use a stack frame, and ptxas must not
// serialize the wgmma pipeline (its C7514/C7515 notes). The registers are reported
// (docs/notes/ffpa_bwd_sm90.md).
#include <catch2/catch.hpp>

#include "ffpa_support.hpp"
#include "gpu/nvrtc.hpp"
#include "support.hpp"
#include "tuning/grid.hpp"
#include "variants/ffpa_bwd_sm90.hpp"

using namespace ffpa;
using test::compile_problem;
using test::h200;

namespace {

nvrtc::Compiled compile_clean(const bwd90::Config& c, const bwd::Features& f) {
  INFO("D=" << f.D << " " << to_string(c.knobs()) << (f.bf16 ? " bf16" : " fp16")
            << " causal=" << f.causal);
  REQUIRE(bwd90::check(c, f.D, 227 * 1024).ok());
  const nvrtc::Compiled comp = bwd90::compile(c, f);
  // pair = 1 sends half of each dQ chunk to the other block with generic stores, published by
  // cluster barriers whose release is a GPU-wide fence: two a chunk, up to 8 in the code.
  test::check_clean(comp,
                    {"ffpa_bwd_pre_kernel", "ffpa_bwd_sm90_kernel", "ffpa_bwd_convert_kernel"},
                    c.pair ? 8 : 2);
  INFO(comp.log);
  CHECK(comp.log.find("serialized") == std::string::npos);
  CHECK(bwd90::accumulator_registers(c, f.D) < comp.info.at("ffpa_bwd_sm90_kernel").registers);
  return comp;
}

}  // namespace

TEST_CASE("bwd90 default configurations compile without spills or wgmma serialization",
          "[nvrtc][bwd90]") {
  test::FreshCache cache;
  for (int D : {64, 128, 320, 512})
    for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left})
      for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
        Problem p = compile_problem(D, causal);
        p.dtype = dt;
        const auto comp = compile_clean(bwd90::default_config(p), bwd::Features::of(p));
        WARN("D=" << D << " " << to_string(dt) << " causal=" << to_string(causal) << ": "
                  << comp.info.at("ffpa_bwd_sm90_kernel").registers << " registers");
      }
}

TEST_CASE("bwd90 every panel grouping at D = 512 and 320 compiles clean", "[nvrtc][bwd90]") {
  test::FreshCache cache;
  for (auto [D, panels] : {std::pair{512, 2}, {512, 4}, {320, 3}, {136, 1}, {504, 2}})
    for (int split : {0, 1}) {
      const Problem p = compile_problem(D);
      compile_clean(bwd90::Config{panels, split}, bwd::Features::of(p));
    }
}

TEST_CASE("bwd90 two dQ accumulators (dqbuf=2) compile clean", "[nvrtc][bwd90]") {
  test::FreshCache cache;
  for (int D : {64, 320, 512})
    for (Causal causal : {Causal::none, Causal::top_left}) {
      const Problem p = compile_problem(D, causal);
      for (int pair : {0, 1}) {
        const int panels = (D + 127) / 128 % 2 ? 1 : 2;
        const auto comp = compile_clean(bwd90::Config{panels, 0, pair, 2}, bwd::Features::of(p));
        WARN("D=" << D << " dqbuf=2 pair=" << pair << " causal=" << to_string(causal) << ": "
                  << comp.info.at("ffpa_bwd_sm90_kernel").registers << " registers");
      }
    }
}

TEST_CASE("bwd90 pairs of blocks (pair=1) compile clean", "[nvrtc][bwd90]") {
  test::FreshCache cache;
  for (int D : {64, 320, 512})
    for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left}) {
      Problem p = compile_problem(D, causal);
      const auto comp = compile_clean(bwd90::Config{1, 0, 1}, bwd::Features::of(p));
      CHECK(comp.log.find("cluster") == std::string::npos);  // no ptxas complaint about it
      WARN("D=" << D << " pair=1 causal=" << to_string(causal) << ": "
                << comp.info.at("ffpa_bwd_sm90_kernel").registers << " registers");
      p.dropout = 0.1;
      compile_clean(bwd90::Config{1, 0, 1}, bwd::Features::of(p));
    }
}

TEST_CASE("bwd90 split warpgroups compile clean at D = 64..512, causal, dropout",
          "[nvrtc][bwd90]") {
  test::FreshCache cache;
  for (int D : {64, 320, 512})
    for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left}) {
      Problem p = compile_problem(D, causal);
      const auto comp = compile_clean(bwd90::Config{1, 1}, bwd::Features::of(p));
      WARN("D=" << D << " split=1 causal=" << to_string(causal) << ": "
                << comp.info.at("ffpa_bwd_sm90_kernel").registers << " registers");
      p.dropout = 0.1;
      compile_clean(bwd90::Config{1, 1}, bwd::Features::of(p));
    }
}

TEST_CASE("bwd90 dropout compiles clean", "[nvrtc][bwd90]") {
  test::FreshCache cache;
  for (int D : {64, 320, 512})
    for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left}) {
      Problem p = compile_problem(D, causal);
      p.dropout = 0.1;
      const auto comp = compile_clean(bwd90::default_config(p), bwd::Features::of(p));
      WARN("D=" << D << " dropout causal=" << to_string(causal) << ": "
                << comp.info.at("ffpa_bwd_sm90_kernel").registers << " registers");
    }
  Problem p = compile_problem(320, Causal::bottom_right);
  p.dropout = 0.1;
  compile_clean(bwd90::Config{3}, bwd::Features::of(p));
  p.shape.D = 512;
  for (const bwd90::Config& c : {bwd90::Config{2}, bwd90::Config{1, 1}, bwd90::Config{1, 0, 1}})
    compile_clean(c, bwd::Features::of(p));
}

TEST_CASE("bwd90 bias and dBias compile clean", "[nvrtc][bwd90]") {
  test::FreshCache cache;
  for (int D : {64, 320, 512})
    for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full}) {
      Problem p = compile_problem(D, Causal::bottom_right);
      p.bias = m;
      const auto comp = compile_clean(bwd90::default_config(p), bwd::Features::of(p));
      WARN("D=" << D << " bias " << to_string(m) << ": "
                << comp.info.at("ffpa_bwd_sm90_kernel").registers << " registers");
      p.dropout = 0.1;
      p.bias_dtype = BiasDtype::input;
      compile_clean(bwd90::default_config(p), bwd::Features::of(p));
    }
  Problem p = compile_problem(512);
  p.bias = BiasKind::key;
  for (const bwd90::Config& c :
       {bwd90::Config{4}, bwd90::Config{2, 1}, bwd90::Config{2, 0, 1}, bwd90::Config{2, 0, 0, 2}})
    compile_clean(c, bwd::Features::of(p));
}

TEST_CASE("bwd90 configuration checks", "[bwd90]") {
  const int smem = 227 * 1024;
  bwd90::Config c;
  for (int D : {64, 320, 512}) CHECK(bwd90::check(c, D, smem).ok());
  CHECK(bwd90::smem_bytes(c, 512) <= smem);
  CHECK_THAT(bwd90::check(c, 520, smem).reason, Catch::Contains("at most 512"));
  c.panels = 3;
  CHECK_THAT(bwd90::check(c, 512, smem).reason, Catch::Contains("must divide 4"));
  CHECK(bwd90::check(c, 320, smem).ok());
  c.panels = 0;
  CHECK_THAT(bwd90::check(c, 320, smem).reason, Catch::Contains("must divide"));
  c = {};
  CHECK_THAT(bwd90::check(c, 512, 99 * 1024).reason, Catch::Contains("shared memory"));
  c.split = 1;  // the second P^T/dS^T set: exactly the 227 KB of the H200 at D = 512
  CHECK(bwd90::smem_bytes(c, 512) == smem);
  CHECK(bwd90::check(c, 512, smem).ok());
  c.split = 2;
  CHECK_THAT(bwd90::check(c, 512, smem).reason, Catch::Contains("split is 0 or 1"));
  c.split = 1;
  c.pair = 1;
  CHECK_THAT(bwd90::check(c, 512, smem).reason, Catch::Contains("pair needs split=0"));
  c.split = 0;
  CHECK(bwd90::check(c, 512, smem).ok());
  c.dqbuf = 3;
  CHECK_THAT(bwd90::check(c, 512, smem).reason, Catch::Contains("dqbuf is 1 or 2"));
  for (int D = 8; D <= 512; D += 8)
    CHECK(bwd90::check(bwd90::default_config(compile_problem(D)), D, smem).ok());
}

TEST_CASE("variant ffpa-bwd-sm90: grid file, support surface", "[bwd90]") {
  auto v = make_ffpa_bwd_sm90();
  CHECK(v->name() == "ffpa-bwd-sm90");
  CHECK(v->pass() == Pass::bwd);
  const Grid g = load_variant_grid(v->name(), (test::source_dir() / "configs" / "grids").string());
  CHECK(check_grid_matches(g, v->knob_names()).ok());
  for (int D : {32, 64, 320, 512}) {
    const Problem p = compile_problem(D);
    INFO("D=" << D);
    CHECK(v->supports(p).ok());
    CHECK(v->supports(p, v->default_knobs(p), h200()).ok());
  }
  CHECK_THAT(v->supports(compile_problem(520)).reason, Catch::Contains("at most 512"));
  for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full}) {
    Problem biased = compile_problem(512);
    biased.bias = m;
    CHECK(v->supports(biased).ok());
  }
  Problem drop = compile_problem(512);
  drop.dropout = 0.1;
  CHECK(v->supports(drop).ok());
  gpu::DeviceInfo ampere = h200();
  ampere.sm_major = 8;
  CHECK_THAT(
      v->supports(compile_problem(512), v->default_knobs(compile_problem(512)), ampere).reason,
      Catch::Contains("sm_90"));
}

TEST_CASE("bwd90 bind refuses a problem it does not handle before touching the GPU", "[bwd90]") {
  const Problem p = compile_problem(1024);
  FfpaBwdParams prm{};
  CHECK_THROWS_AS(bwd90::bind(p, bwd90::default_config(p), prm, h200()), Unsupported);
}
