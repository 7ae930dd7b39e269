// NVRTC compiles the backward kernels' default configurations for sm_80 and sm_90a without a GPU;
// ptxas must not spill (dK/dV of a key tile in registers is the failure mode of large D).
#include <catch2/catch.hpp>

#include "ffpa_support.hpp"
#include "gpu/nvrtc.hpp"
#include "support.hpp"
#include "tuning/grid.hpp"
#include "variants/ffpa_bwd_sm80.hpp"

using namespace ffpa;
using test::compile_problem;
using test::FreshCache;
using test::h200;

namespace {

void compile_clean(const bwd::Config& c, const bwd::Features& f, const std::string& arch) {
  INFO("D=" << f.D << " " << to_string(c.knobs()) << " " << arch << " causal=" << f.causal
            << " bias=" << f.bias << " dbias=" << f.dbias << " dropout=" << f.dropout
            << " bf16=" << f.bf16);
  REQUIRE(bwd::check(c, f.D, 227 * 1024).ok());
  const nvrtc::Compiled comp = bwd::compile(c, f, arch);
  test::check_clean(comp, {"ffpa_bwd_pre_kernel", "ffpa_bwd_kernel", "ffpa_bwd_convert_kernel"});
  CHECK(bwd::accumulator_registers(c, f.D) < comp.info.at("ffpa_bwd_kernel").registers);
}

}  // namespace

TEST_CASE("bwd configuration checks reject what cannot fit", "[nvrtc][bwd]") {
  bwd::Config c;
  CHECK(bwd::check(c, 512, 227 * 1024).ok());
  c.Br = 32;
  c.Wr = 2;
  c.Bc = 64;  // dK + dV: 4 blocks x 64 = 256 registers
  CHECK_THAT(bwd::check(c, 512, 227 * 1024).reason, Catch::Contains("registers"));
  c = {};
  c.Br = 128;  // resident Q + dO: 2 x 128 x 512 x 2 bytes
  CHECK_THAT(bwd::check(c, 512, 227 * 1024).reason, Catch::Contains("shared memory"));
  c = {};
  CHECK_THAT(bwd::check(c, 1024, 227 * 1024).reason, Catch::Contains("shared memory"));
  c = {};
  c.Br = 48;
  CHECK_THAT(bwd::check(c, 512, 227 * 1024).reason, Catch::Contains("multiple of 16*Wr"));
  c = {};
  c.Wr = 3;
  CHECK_THAT(bwd::check(c, 512, 227 * 1024).reason, Catch::Contains("multiple of Wr"));
  c = {};
  c.Kd = 96;
  CHECK_THAT(bwd::check(c, 512, 227 * 1024).reason, Catch::Contains("Kd"));
  c = {};
  c.Bc = 24;
  CHECK_THAT(bwd::check(c, 512, 227 * 1024).reason, Catch::Contains("Bc"));
}

TEST_CASE("bwd default configurations compile for sm_80 and sm_90a without spills",
          "[nvrtc][bwd]") {
  FreshCache cache;
  for (int D : {64, 320, 512, 1024})
    for (const char* arch : {"sm_80", "sm_90a"})
      for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
        Problem p = compile_problem(D);
        p.dtype = dt;
        compile_clean(bwd::default_config(p), bwd::Features::of(p), arch);
      }
}

TEST_CASE("bwd defaults compile with every feature combination without spills",
          "[nvrtc][bwd][.slow]") {
  FreshCache cache;
  for (int D : {64, 320, 512, 1024})
    for (const char* arch : {"sm_80", "sm_90a"})
      for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left})
        for (BiasKind bias : {BiasKind::none, BiasKind::key, BiasKind::query_key, BiasKind::full})
          for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input})
            for (double dropout : {0.0, 0.1}) {
              if (bias == BiasKind::none && md == BiasDtype::input) continue;
              Problem p = compile_problem(D, causal);
              p.bias = bias;
              p.bias_dtype = md;
              p.dropout = dropout;
              compile_clean(bwd::default_config(p), bwd::Features::of(p), arch);
            }
}

TEST_CASE("bwd register peak: D=512 and 1024 with bias, causal and dropout", "[nvrtc][bwd]") {
  FreshCache cache;
  for (int D : {512, 1024})
    for (const char* arch : {"sm_80", "sm_90a"}) {
      Problem p = compile_problem(D, Causal::bottom_right);
      p.bias = BiasKind::key;
      p.dropout = 0.1;
      compile_clean(bwd::default_config(p), bwd::Features::of(p), arch);
      p.bias = BiasKind::full;
      p.bias_dtype = BiasDtype::input;
      p.causal = Causal::top_left;
      compile_clean(bwd::default_config(p), bwd::Features::of(p), arch);
    }
}

TEST_CASE("variant ffpa-bwd-sm80: grid file, support surface", "[nvrtc][bwd]") {
  auto v = make_ffpa_bwd_sm80();
  CHECK(v->name() == "ffpa-bwd-sm80");
  CHECK(v->pass() == Pass::bwd);
  const Grid g = load_variant_grid(v->name(), (test::source_dir() / "configs" / "grids").string());
  CHECK(check_grid_matches(g, v->knob_names()).ok());
  for (int D : {32, 64, 320, 512, 520, 1024}) {
    Problem p = compile_problem(D);
    INFO("D=" << D);
    CHECK(v->supports(p).ok());
    CHECK(v->supports(p, v->default_knobs(p), h200()).ok());
  }
  CHECK_FALSE(v->supports(compile_problem(1032)).ok());
  CHECK_FALSE(v->supports(compile_problem(100)).ok());
  Problem gqa = compile_problem(512);
  gqa.shape.Hkv = 5;
  CHECK_FALSE(v->supports(gqa).ok());
  gpu::DeviceInfo turing = h200();
  turing.sm_major = 7;
  CHECK_FALSE(
      v->supports(compile_problem(512), v->default_knobs(compile_problem(512)), turing).ok());
  gpu::DeviceInfo small = h200();
  small.smem_per_block_optin = 99 * 1024;  // sm_86/sm_89: resident K, V, Q, dO tiles
  CHECK_THAT(
      v->supports(compile_problem(512), v->default_knobs(compile_problem(512)), small).reason,
      Catch::Contains("shared memory"));
}

TEST_CASE("bwd bind refuses misaligned tensors before touching the GPU", "[nvrtc][bwd]") {
  const Problem p = compile_problem(512);
  FfpaBwdParams prm{};
  alignas(16) static char fake[64];
  prm.fwd.q = prm.fwd.k = prm.fwd.v = prm.fwd.o = fake;
  prm.dout = prm.dq = prm.dk = prm.dv = fake;
  prm.fwd.q_row_stride = prm.fwd.k_row_stride = prm.fwd.v_row_stride = prm.fwd.o_row_stride = 512;
  prm.do_row_stride = prm.dq_row_stride = prm.dk_row_stride = prm.dv_row_stride = 512;
  prm.do_row_stride = 516;  // dO rows no longer 16-byte aligned
  CHECK_THROWS_AS(bwd::bind(p, bwd::default_config(p), prm, h200()), Unsupported);
  prm.do_row_stride = 512;
  prm.dk = fake + 2;
  CHECK_THROWS_AS(bwd::bind(p, bwd::default_config(p), prm, h200()), Unsupported);
}
