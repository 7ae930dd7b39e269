// NVRTC compiles the Hopper wgmma forward (ffpa-fwd-sm90) for sm_90a without a GPU: the default
// configurations at D = 320..512 in both dtypes must not spill, must not use a stack frame, and
// ptxas must not serialize the wgmma pipeline (its C7514/C7515 notes).
#include <catch2/catch.hpp>

#include "ffpa_support.hpp"
#include "gpu/nvrtc.hpp"
#include "support.hpp"
#include "tuning/grid.hpp"
#include "variants/ffpa_fwd_sm90.hpp"

using namespace ffpa;
using test::compile_problem;

namespace {

nvrtc::Compiled compile_clean(const fwd90::Config& c, const fwd::Features& f) {
  INFO("D=" << f.D << " " << to_string(c.knobs()) << (f.bf16 ? " bf16" : " fp16")
            << " causal=" << f.causal << " bias=" << f.bias << " dropout=" << f.dropout);
  REQUIRE(fwd90::check(c, f.D, 227 * 1024).ok());
  const nvrtc::Compiled comp = fwd90::compile(c, f);
  test::check_clean(comp, {"ffpa_fwd_sm90_kernel"});
  INFO(comp.log);
  CHECK(comp.log.find("serialized") == std::string::npos);
  CHECK(fwd90::accumulator_registers(c, f.D) < comp.info.at("ffpa_fwd_sm90_kernel").registers);
  return comp;
}

}  // namespace

TEST_CASE("sm90 default configurations compile without spills or wgmma serialization", "[nvrtc]") {
  test::FreshCache cache;
  for (int D : {320, 384, 448, 512})
    for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
      Problem p = compile_problem(D);
      p.dtype = dt;
      const auto comp = compile_clean(fwd90::default_config(p), fwd::Features::of(p));
      WARN("D=" << D << " " << to_string(dt) << ": "
                << comp.info.at("ffpa_fwd_sm90_kernel").registers << " registers");
    }
  for (Causal causal : {Causal::bottom_right, Causal::top_left})
    for (int D : {320, 512}) {
      const Problem p = compile_problem(D, causal);
      compile_clean(fwd90::default_config(p), fwd::Features::of(p));
    }
}

TEST_CASE("sm90 configuration checks", "[nvrtc]") {
  const int smem = 227 * 1024;
  fwd90::Config c;
  for (int D : {64, 320, 512}) CHECK(fwd90::check(c, D, smem).ok());
  CHECK_THAT(fwd90::check(c, 520, smem).reason, Catch::Contains("at most 512"));
  CHECK_THAT(fwd90::check(c, 1024, smem).reason, Catch::Contains("at most 512"));
  c.Bc = 96;
  CHECK_THAT(fwd90::check(c, 512, smem).reason, Catch::Contains("64 or 128"));
  c = {};
  c.stages = 2;
  CHECK_THAT(fwd90::check(c, 512, smem).reason, Catch::Contains("at least 3"));
  c.stages = 9;  // 1024 + 64 KB Q + 9 x 16 KB + 32 KB
  CHECK_THAT(fwd90::check(c, 512, smem).reason, Catch::Contains("shared memory"));
  c.stages = 8;
  CHECK(fwd90::check(c, 512, smem).ok());
  c.stages = 4;
  c.panels = 3;  // 4 panels a half at D=512
  CHECK_THAT(fwd90::check(c, 512, smem).reason, Catch::Contains("must divide 4"));
  c.panels = 2;
  CHECK(fwd90::check(c, 512, smem).ok());
  c.stages = 5;  // 5 x 32 KB slots
  CHECK_THAT(fwd90::check(c, 512, smem).reason, Catch::Contains("shared memory"));
  c = {};
  c.Bc = 128;  // O 128 + S 64 + P 32 registers
  c.stages = 3;
  CHECK_THAT(fwd90::check(c, 512, smem).reason, Catch::Contains("registers"));
  CHECK_THAT(fwd90::check(c, 320, smem).reason,
             Catch::Contains("registers"));  // ptxas spills there
  CHECK(fwd90::check(c, 128, smem).ok());
  // Every default fits the H200 at every D it accepts.
  for (int D = 8; D <= 512; D += 8)
    CHECK(fwd90::check(fwd90::default_config(compile_problem(D)), D, smem).ok());
}

TEST_CASE("variant ffpa-fwd-sm90: grid file, support surface", "[nvrtc]") {
  auto v = make_ffpa_fwd_sm90();
  CHECK(v->name() == "ffpa-fwd-sm90");
  CHECK(v->pass() == Pass::fwd);
  const Grid g = load_variant_grid(v->name(), (test::source_dir() / "configs" / "grids").string());
  CHECK(check_grid_matches(g, v->knob_names()).ok());

  const gpu::DeviceInfo h200 = test::h200();
  for (int D : {64, 320, 384, 448, 512}) {
    const Problem p = compile_problem(D);
    INFO("D=" << D);
    CHECK(v->supports(p).ok());
    CHECK(v->supports(p, v->default_knobs(p), h200).ok());
  }
  CHECK_THAT(v->supports(compile_problem(520)).reason, Catch::Contains("at most 512"));
  CHECK_THAT(v->supports(compile_problem(1024)).reason, Catch::Contains("at most 512"));
  CHECK_FALSE(v->supports(compile_problem(100)).ok());  // not a multiple of 8
  gpu::DeviceInfo ampere = h200;
  ampere.sm_major = 8;
  const Problem p512 = compile_problem(512);
  CHECK_THAT(v->supports(p512, v->default_knobs(p512), ampere).reason, Catch::Contains("sm_90"));
  CHECK_THROWS_AS(fwd90::compile_for(p512, fwd90::default_config(p512), ampere), Unsupported);
  gpu::DeviceInfo small = h200;
  small.smem_per_block_optin = 99 * 1024;
  CHECK_THAT(v->supports(p512, v->default_knobs(p512), small).reason,
             Catch::Contains("shared memory"));
}

TEST_CASE("sm90 bind refuses misaligned tensors before touching the GPU", "[nvrtc]") {
  const Problem p = compile_problem(512);
  FfpaFwdParams prm{};
  alignas(16) static char fake[64];
  prm.q = prm.k = prm.v = prm.o = fake;
  prm.q_row_stride = prm.k_row_stride = prm.v_row_stride = prm.o_row_stride = 512;
  const gpu::DeviceInfo h200 = test::h200();
  prm.k_row_stride = 516;
  CHECK_THROWS_AS(fwd90::bind(p, fwd90::default_config(p), prm, h200), Unsupported);
  prm.k_row_stride = 512;
  prm.v = fake + 2;
  CHECK_THROWS_AS(fwd90::bind(p, fwd90::default_config(p), prm, h200), Unsupported);
}

TEST_CASE("sm90 bias and dropout compile clean at D=320 with every causal mode", "[nvrtc]") {
  test::FreshCache cache;
  for (int causal : {0, 1, 2})
    for (int bias : {0, 1, 2})
      for (int dropout : {0, 1}) {
        fwd::Features f;
        f.D = 320;
        f.causal = causal;
        f.bias = bias;
        f.dropout = dropout;
        compile_clean(fwd90::default_config(compile_problem(320)), f);
      }
}

// Bias and dropout are staged in shared memory per key tile, so D=512 holds them beside O. A bias
// with a row per query needs 17 KB more than the 4-slot, 2-panel ring leaves: 6 one-panel slots.
TEST_CASE("sm90 bias and dropout compile clean at D=512", "[nvrtc]") {
  test::FreshCache cache;
  for (int causal : {0, 1, 2})
    for (int bias : {0, 1, 2})
      for (bool key_bias : {true, false})
        for (int dropout : {0, 1}) {
          if (!bias && !key_bias) continue;
          Problem p = compile_problem(512);
          p.bias = !bias ? BiasKind::none : key_bias ? BiasKind::key : BiasKind::full;
          p.dropout = dropout ? 0.1 : 0.0;
          p.causal = causal == 0   ? Causal::none
                     : causal == 1 ? Causal::bottom_right
                                   : Causal::top_left;
          fwd::Features f = fwd::Features::of(p);
          f.bias = bias;
          INFO("causal " << causal << " bias " << bias << " key " << key_bias << " dropout "
                         << dropout);
          compile_clean(fwd90::default_config(p), f);
          CHECK_NOTHROW(fwd90::compile_for(p, fwd90::default_config(p), test::h200()));
        }
  Problem p = compile_problem(512);
  p.bias = BiasKind::full;
  CHECK_THROWS_WITH(fwd90::compile_for(p, fwd90::Config{64, 4, 2}, test::h200()),
                    Catch::Contains("staged bias"));
}

TEST_CASE("sm90 configurations of the GPU test compile clean", "[nvrtc]") {
  test::FreshCache cache;
  fwd::Features f;
  for (int D : {64, 128, 136, 256, 504}) {
    f.D = D;
    compile_clean(fwd90::default_config(compile_problem(D)), f);
  }
  // D=512 with 3 or 5 slots spills 8 bytes (bind refuses them; the tuner skips them).
  f.D = 512;
  for (int st : {4, 6, 7, 8}) compile_clean(fwd90::Config{64, st}, f);
  f.D = 320;
  for (int st : {3, 5}) compile_clean(fwd90::Config{64, st}, f);
  f.D = 128;
  for (int st : {3, 4}) compile_clean(fwd90::Config{128, st}, f);
  // Wider slots: 2 panels of each half (32 KB) at D=512, 3 (48 KB) at D=320.
  f.D = 512;
  compile_clean(fwd90::Config{64, 4, 2}, f);
  f.D = 320;
  compile_clean(fwd90::Config{64, 3, 3}, f);
  // P through shared memory (the fallback if the register-A PV path misbehaves).
  for (int D : {320, 512})
    for (int causal : {0, 1}) {
      f.D = D;
      f.causal = causal;
      compile_clean(fwd90::Config{64, D <= 384 ? 8 : 6, 1, 1}, f);
    }
}
