// NVRTC compiles the Hopper cluster backward (ffpa-bwd-sm90c) for sm_90a without a GPU: the default
// configuration at D in {64, 128, 320, 512, 576, 1024}, both dtypes and both causal alignments (and
// with dropout and each bias shape), every point of the fast grid at D = 320, 512 and 1024, and
// phase 1 split by keys (ksplit = 1) in one block (D 64..320) or a cluster (D 64..512) with each
// feature, the last wave's split (tail = 1), and Q and dO by TMA (tma = 1), must not spill, must
// not use a stack frame, and ptxas must not serialize the wgmma pipeline (its C7514/C7515 notes).
// The registers are reported (docs/notes/ffpa_bwd_sm90c.md).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "ffpa_support.hpp"
#include "gpu/nvrtc.hpp"
#include "support.hpp"
#include "tuning/grid.hpp"
#include "variants/ffpa_bwd_sm90c.hpp"

using namespace ffpa;
using test::compile_problem;
using test::h200;

namespace {

constexpr const char* kMain = "ffpa_bwd_sm90c_kernel";

nvrtc::Compiled compile_clean(const bwd90c::Config& c, const bwd::Features& f) {
  INFO("D=" << f.D << " " << to_string(c.knobs()) << (f.bf16 ? " bf16" : " fp16")
            << " causal=" << f.causal << " dbias=" << f.dbias << " dropout=" << f.dropout);
  REQUIRE(bwd90c::check(c, f.D, 227 * 1024).ok());
  const nvrtc::Compiled comp = bwd90c::compile(c, f);
  test::check_clean(comp, {"ffpa_bwd_pre_kernel", kMain, "ffpa_bwd_convert_kernel"});
  INFO(comp.log);
  CHECK(comp.log.find("serialized") == std::string::npos);
  CHECK(comp.log.find("C7514") == std::string::npos);
  CHECK(comp.log.find("C7515") == std::string::npos);
  CHECK(bwd90c::accumulator_registers(c, f.D) < comp.info.at(kMain).registers);
  // The exchange waits order shared::cluster only: an acquire covering global memory puts an L1
  // invalidation after each (CCTL.IVALL, 8 % of the stall samples on the H100). The two left
  // follow the cluster barriers at the kernel's start and end.
  CHECK(test::sass_count(comp, kMain, "CCTL.IVALL") <= 2);
  return comp;
}

}  // namespace

TEST_CASE("bwd90c default configurations compile without spills or wgmma serialization",
          "[nvrtc][bwd90c]") {
  test::FreshCache cache;
  for (int D : {64, 128, 320, 512, 576, 1024})
    for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left})
      for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
        Problem p = compile_problem(D, causal);
        p.dtype = dt;
        const auto comp = compile_clean(bwd90c::default_config(p), bwd::Features::of(p));
        WARN("D=" << D << " " << to_string(dt) << " causal=" << to_string(causal) << ": "
                  << comp.info.at(kMain).registers << " registers");
      }
}

TEST_CASE("bwd90c dropout and every bias shape compile clean", "[nvrtc][bwd90c]") {
  test::FreshCache cache;
  for (int D : {64, 320, 512, 576, 1024}) {
    for (Causal causal : {Causal::none, Causal::top_left}) {
      Problem p = compile_problem(D, causal);
      p.dropout = 0.1;
      const auto comp = compile_clean(bwd90c::default_config(p), bwd::Features::of(p));
      WARN("D=" << D << " dropout causal=" << to_string(causal) << ": "
                << comp.info.at(kMain).registers << " registers");
    }
    for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full}) {
      Problem p = compile_problem(D, Causal::bottom_right);
      p.bias = m;
      const auto comp = compile_clean(bwd90c::default_config(p), bwd::Features::of(p));
      WARN("D=" << D << " bias " << to_string(m) << ": " << comp.info.at(kMain).registers
                << " registers");
      p.dropout = 0.1;
      p.bias_dtype = BiasDtype::input;
      compile_clean(bwd90c::default_config(p), bwd::Features::of(p));
    }
  }
}

TEST_CASE("bwd90c the fast grid compiles clean at D = 320, 512 and 1024", "[nvrtc][bwd90c]") {
  test::FreshCache cache;
  for (int D : {320, 512, 1024})
    for (int bc : {32, 64})
      for (int panels : {1, 2, 3})
        for (int xbuf : {1, 2})
          for (int dqlag : {0, 1})
            for (int cluster : {1, 2})
              for (int ks : {0, 1}) {
                const bwd90c::Config c{bc, panels, 1, xbuf, dqlag, cluster, ks};
                if (!bwd90c::check(c, D, 227 * 1024).ok()) continue;
                const auto comp = compile_clean(c, bwd::Features::of(compile_problem(D)));
                WARN("D=" << D << " " << to_string(c.knobs()) << ": "
                          << comp.info.at(kMain).registers << " registers");
              }
}

TEST_CASE("bwd90c phase 1 by keys (ksplit = 1), one block or a cluster, compiles clean",
          "[nvrtc][bwd90c]") {
  test::FreshCache cache;
  for (int cl : {1, 2}) {
    bwd90c::Config c;
    c.ksplit = 1;
    c.cluster = cl;
    c.xbuf = cl == 1 ? 1 : 2;
    for (int D : {64, 72, 128, 200, 256, 320, 448, 512})
      for (int panels : {1, 2, 3}) {
        c.panels = panels;
        if (!bwd90c::check(c, D, 227 * 1024).ok()) continue;
        for (Causal causal : {Causal::none, Causal::bottom_right})
          for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
            Problem p = compile_problem(D, causal);
            p.dtype = dt;
            const auto comp = compile_clean(c, bwd::Features::of(p));
            WARN("ksplit cluster=" << cl << " D=" << D << " panels=" << panels << " "
                                   << to_string(dt) << " causal=" << to_string(causal) << ": "
                                   << comp.info.at(kMain).registers << " registers");
          }
      }
    c.panels = 1;
    for (int D : {64, 320, 512}) {
      if (!bwd90c::check(c, D, 227 * 1024).ok()) continue;
      Problem p = compile_problem(D, Causal::top_left);
      p.dropout = 0.1;
      WARN("ksplit cluster=" << cl << " D=" << D << " dropout: "
                             << compile_clean(c, bwd::Features::of(p)).info.at(kMain).registers
                             << " registers");
      for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full}) {
        Problem q = compile_problem(D, Causal::bottom_right);
        q.bias = m;
        WARN("ksplit cluster=" << cl << " D=" << D << " bias " << to_string(m) << ": "
                               << compile_clean(c, bwd::Features::of(q)).info.at(kMain).registers
                               << " registers");
        q.dropout = 0.1;
        q.bias_dtype = BiasDtype::input;
        compile_clean(c, bwd::Features::of(q));
      }
    }
  }
}

TEST_CASE("bwd90c the last wave's split (tail = 1) compiles clean without causal masking",
          "[nvrtc][bwd90c]") {
  test::FreshCache cache;
  for (int D : {320, 512, 1024}) {
    Problem p = compile_problem(D);
    bwd90c::Config c = bwd90c::default_config(p);
    c.tail = 1;
    WARN("tail D=" << D << ": " << compile_clean(c, bwd::Features::of(p)).info.at(kMain).registers
                   << " registers");
    p.dropout = 0.1;
    compile_clean(c, bwd::Features::of(p));
    p.dropout = 0;
    p.bias = BiasKind::key;
    c = bwd90c::default_config(p);
    c.tail = 1;
    // One block with a bias (D = 320) is at 255 registers without the pieces: with them it spills
    // (any panels), and bind drops the point.
    if (c.cluster == 1) continue;
    WARN("tail D=" << D
                   << " bias: " << compile_clean(c, bwd::Features::of(p)).info.at(kMain).registers
                   << " registers");
  }
}

TEST_CASE("bwd90c Q and dO by TMA (tma = 1) compile clean, with no cp.async of them",
          "[nvrtc][bwd90c]") {
  test::FreshCache cache;
  for (int D : {64, 320, 512, 576, 1024})
    for (Causal causal : {Causal::none, Causal::top_left})
      for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
        Problem p = compile_problem(D, causal);
        p.dtype = dt;
        bwd90c::Config c = bwd90c::default_config(p);
        const auto base = compile_clean(c, bwd::Features::of(p));
        c.tma = 1;
        const auto comp = compile_clean(c, bwd::Features::of(p));
        WARN("tma D=" << D << " " << to_string(dt) << " causal=" << to_string(causal) << ": "
                      << comp.info.at(kMain).registers
                      << " registers (cp.async: " << base.info.at(kMain).registers << ")");
        // Every Q/dO box by TMA: what cp.async is left (K and V, the row table) is less.
        CHECK(test::sass_count(comp, kMain, "UTMALDG") > 0);
        CHECK(test::sass_count(base, kMain, "UTMALDG") == 0);
        CHECK(test::sass_count(comp, kMain, "LDGSTS") < test::sass_count(base, kMain, "LDGSTS"));
        CHECK(test::sass_count(comp, kMain, "MEMBAR") <= test::sass_count(base, kMain, "MEMBAR"));
      }
  for (int D : {320, 512, 1024}) {
    Problem p = compile_problem(D);
    p.dropout = 0.1;
    bwd90c::Config c = bwd90c::default_config(p);
    c.tma = 1;
    compile_clean(c, bwd::Features::of(p));
    c.tail = 1;
    compile_clean(c, bwd::Features::of(p));
    p.dropout = 0;
    for (BiasKind m : {BiasKind::key, BiasKind::full}) {
      p.bias = m;
      c = bwd90c::default_config(p);
      c.tma = 1;
      // One block with a bias (D = 320) is at 255 registers with cp.async; with the maps ptxas
      // spills 28 bytes, and bind drops the point.
      if (c.cluster == 1) continue;
      compile_clean(c, bwd::Features::of(p));
    }
    // One to four Q/dO groups a tile.
    p.bias = BiasKind::none;
    c = bwd90c::default_config(p);
    c.tma = 1;
    for (int panels : {1, 2, 4}) {
      c.panels = panels;
      if (bwd90c::check(c, D, 227 * 1024).ok()) compile_clean(c, bwd::Features::of(p));
    }
  }
}

TEST_CASE("bwd90c configuration checks", "[bwd90c]") {
  const int smem = 227 * 1024;
  bwd90c::Config c;  // bc = 64
  for (int D : {64, 320, 512}) CHECK(bwd90c::check(c, D, smem).ok());
  CHECK_THAT(bwd90c::check(c, 520, smem).reason, Catch::Contains("bc=64 needs"));
  c.bc = 32;
  for (int D : {520, 576, 768}) CHECK(bwd90c::check(c, D, smem).ok());
  // Two exchange buffers do not fit beside the tiles of D padded to 1024; one does.
  CHECK_THAT(bwd90c::check(c, 1024, smem).reason, Catch::Contains("shared memory"));
  c.xbuf = 1;
  CHECK(bwd90c::check(c, 1024, smem).ok());
  CHECK(bwd90c::smem_bytes(c, 1024) <= smem);
  c.xbuf = 3;
  CHECK_THAT(bwd90c::check(c, 512, smem).reason, Catch::Contains("xbuf is 1 or 2"));
  c.xbuf = 2;
  c.bc = 32;
  CHECK_THAT(bwd90c::check(c, 1032, smem).reason, Catch::Contains("at most 1024"));
  CHECK_THAT(bwd90c::check(c, 100, smem).reason, Catch::Contains("multiple of 8"));
  c.bc = 48;
  CHECK_THAT(bwd90c::check(c, 512, smem).reason, Catch::Contains("bc is 32 or 64"));
  c = {};
  c.panels = 2;
  CHECK_THAT(bwd90c::check(c, 256, smem).reason, Catch::Contains("must divide 1"));
  CHECK(bwd90c::check(c, 320, smem).ok());  // padded to 512: two panels a quarter
  c.panels = 3;
  CHECK_THAT(bwd90c::check(c, 512, smem).reason, Catch::Contains("must divide 2"));
  c = {};
  c.dqbuf = 3;
  CHECK_THAT(bwd90c::check(c, 512, smem).reason, Catch::Contains("dqbuf is 1 or 2"));
  c = {};
  c.dqlag = 2;
  CHECK_THAT(bwd90c::check(c, 512, smem).reason, Catch::Contains("dqlag is 0 or 1"));
  c.dqlag = 1;
  CHECK_THAT(bwd90c::check(c, 256, smem).reason, Catch::Contains("needs two chunks"));
  CHECK(bwd90c::check(c, 320, smem).ok());
  c = {};
  CHECK_THAT(bwd90c::check(c, 512, 99 * 1024).reason, Catch::Contains("shared memory"));
  // One block a key tile: 64 keys, no exchange knobs, half of D at most 160 columns.
  c = {};
  c.cluster = 3;
  CHECK_THAT(bwd90c::check(c, 320, smem).reason, Catch::Contains("cluster is 1 or 2"));
  c.cluster = 1;
  CHECK_THAT(bwd90c::check(c, 320, smem).reason, Catch::Contains("ksplit must be 1"));
  c.ksplit = 2;
  CHECK_THAT(bwd90c::check(c, 320, smem).reason, Catch::Contains("ksplit is 0 or 1"));
  c.ksplit = 1;
  CHECK_THAT(bwd90c::check(c, 320, smem).reason, Catch::Contains("xbuf=2 would be the same"));
  c.xbuf = 1;
  for (int D : {8, 64, 72, 200, 256, 320}) CHECK(bwd90c::check(c, D, smem).ok());
  CHECK(bwd90c::smem_bytes(c, 320) <= smem);
  CHECK_THAT(bwd90c::check(c, 328, smem).reason, Catch::Contains("at most 320"));
  c.dqlag = 1;
  CHECK_THAT(bwd90c::check(c, 320, smem).reason, Catch::Contains("dqlag must be 0"));
  c.dqlag = 0;
  c.bc = 32;
  CHECK_THAT(bwd90c::check(c, 320, smem).reason, Catch::Contains("bc must be 64"));
  c.bc = 64;
  c.panels = 2;  // D = 320: halves of 160 columns on 3 panels
  CHECK_THAT(bwd90c::check(c, 320, smem).reason, Catch::Contains("must divide 3"));
  c.panels = 3;
  CHECK(bwd90c::check(c, 320, smem).ok());
  // Phase 1 by keys in the cluster: two exchange buffers, up to D = 512 (bc = 64).
  c = {};
  c.ksplit = 1;
  for (int D : {64, 320, 512}) CHECK(bwd90c::check(c, D, smem).ok());
  CHECK_THAT(bwd90c::check(c, 520, smem).reason, Catch::Contains("bc=64 needs"));
  c.xbuf = 1;
  CHECK_THAT(bwd90c::check(c, 512, smem).reason, Catch::Contains("needs xbuf=2"));
  for (int D = 8; D <= 1024; D += 8)
    CHECK(bwd90c::check(bwd90c::default_config(compile_problem(D)), D, smem).ok());
  // The defaults follow the H200's measurements: one block up to D = 320 (all three panels of a
  // half in a group), the cluster past it, phase 1 by keys in the cluster only with a bias.
  const bwd90c::Config d320 = bwd90c::default_config(compile_problem(320));
  CHECK((d320.cluster == 1 && d320.ksplit == 1 && d320.xbuf == 1 && d320.panels == 3));
  const bwd90c::Config d384 = bwd90c::default_config(compile_problem(384));
  CHECK((d384.cluster == 2 && d384.ksplit == 0 && d384.xbuf == 2));
  Problem biased = compile_problem(512);
  CHECK(bwd90c::default_config(biased).ksplit == 0);
  biased.bias = BiasKind::key;
  CHECK(bwd90c::default_config(biased).ksplit == 1);
}

TEST_CASE("variant ffpa-bwd-sm90c: grid file, support surface", "[bwd90c]") {
  auto v = make_ffpa_bwd_sm90c();
  CHECK(v->name() == "ffpa-bwd-sm90c");
  CHECK(v->pass() == Pass::bwd);
  const Grid g = load_variant_grid(v->name(), (test::source_dir() / "configs" / "grids").string());
  CHECK(check_grid_matches(g, v->knob_names()).ok());
  for (int D : {32, 64, 320, 512, 576, 1024}) {
    const Problem p = compile_problem(D);
    INFO("D=" << D);
    CHECK(v->supports(p).ok());
    CHECK(v->supports(p, v->default_knobs(p), h200()).ok());
  }
  CHECK_THAT(v->supports(compile_problem(1032)).reason, Catch::Contains("1024"));
  Problem big = compile_problem(1024);
  CHECK_THAT(v->supports(big, Knobs{{"bc", 64}, {"panels", 1}, {"dqbuf", 1}}, h200()).reason,
             Catch::Contains("bc=64 needs"));
  // One block a key tile: a point of the fast grid up to D = 320, refused past it.
  const Knobs solo{{"bc", 64},   {"panels", 1},  {"dqbuf", 1}, {"xbuf", 1},
                   {"dqlag", 0}, {"cluster", 1}, {"ksplit", 1}};
  CHECK(v->supports(compile_problem(320), solo, h200()).ok());
  CHECK_THAT(v->supports(compile_problem(512), solo, h200()).reason,
             Catch::Contains("cluster=1 needs D at most 320"));
  // The last wave is split only without causal masking (refused before compiling).
  const Problem causal = compile_problem(512, Causal::top_left);
  bwd90c::Config tail = bwd90c::default_config(causal);
  tail.tail = 1;
  CHECK_THROWS_WITH(bwd90c::compile_for(causal, tail, h200()), Catch::Contains("tail=1: causal"));
  // Q and dO by TMA: a box is 64 rows of one q head, so a GQA group's packed rows must not put a
  // query tile across two heads (refused before compiling); without a group any Nq.
  Problem gqa = compile_problem(512);
  gqa.shape.Hkv = 8;
  gqa.shape.Nq = 1000;
  bwd90c::Config tma = bwd90c::default_config(gqa);
  tma.tma = 1;
  CHECK_THROWS_WITH(bwd90c::compile_for(gqa, tma, h200()), Catch::Contains("tma=1: Nq=1000"));
  {
    test::FreshCache cache;
    gqa.shape.Nq = 1024;
    CHECK_NOTHROW(bwd90c::compile_for(gqa, tma, h200()));
    gqa.shape.Hkv = 32;
    gqa.shape.Nq = 1000;
    CHECK_NOTHROW(bwd90c::compile_for(gqa, tma, h200()));
  }
  gpu::DeviceInfo ampere = h200();
  ampere.sm_major = 8;
  CHECK_THAT(
      v->supports(compile_problem(512), v->default_knobs(compile_problem(512)), ampere).reason,
      Catch::Contains("sm_90"));
}

TEST_CASE("bwd90c bind refuses a problem it does not handle before touching the GPU", "[bwd90c]") {
  const Problem p = compile_problem(1040);
  FfpaBwdParams prm{};
  CHECK_THROWS_AS(bwd90c::bind(p, bwd90c::default_config(p), prm, h200()), Unsupported);
}

TEST_CASE("bwd90c cluster exchange protocol (simulator, with its mutations)", "[sim][bwd90c]") {
  const std::string cmd =
      "python3 " + (test::source_dir() / "tools" / "ffpa_bwd_sm90c_sim.py").string();
  CHECK(std::system(cmd.c_str()) == 0);
}

TEST_CASE("bwd90c dQ convert of the tiled dq_accum (simulator, with its mutations)",
          "[sim][bwd90c]") {
  const std::string cmd =
      "python3 " + (test::source_dir() / "tools" / "ffpa_bwd_convert_sim.py").string();
  CHECK(std::system(cmd.c_str()) == 0);
}
