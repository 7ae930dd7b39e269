// NVRTC compiles the warp-specialized Hopper forward (ffpa-fwd-sm90ws) for sm_90a without a GPU:
// the default configurations and those of its GPU test must not spill, must not use a stack
// frame, and ptxas must not serialize the wgmma pipeline (C7514/C7515). Also its support surface,
// its grid file and the ring/barrier protocol simulator.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "ffpa_fwd_sm90ws_layout.h"
#include "ffpa_support.hpp"
#include "fwd90ws_cases.hpp"
#include "gpu/nvrtc.hpp"
#include "support.hpp"
#include "tuning/grid.hpp"
#include "variants/ffpa_fwd_sm90ws.hpp"
#include "variants/ffpa_variant.hpp"

using namespace ffpa;
using test::compile_problem;

namespace {

nvrtc::Compiled compile_clean(const fwd90ws::Config& c, const fwd::Features& f) {
  INFO("D=" << f.D << " " << to_string(c.knobs()) << (f.bf16 ? " bf16" : " fp16")
            << " causal=" << f.causal);
  REQUIRE(fwd90ws::check(c, f.D, 227 * 1024).ok());
  const nvrtc::Compiled comp = fwd90ws::compile(c, f);
  if (c.kmask && f.dropout)
    test::check_clean(comp, {"ffpa_fwd_sm90ws_kernel", "ffpa_fwd_sm90ws_merge_kernel",
                             "ffpa_fwd_sm90ws_keep_kernel"});
  else
    test::check_clean(comp, {"ffpa_fwd_sm90ws_kernel", "ffpa_fwd_sm90ws_merge_kernel"});
  INFO(comp.log);
  CHECK(comp.log.find("serialized") == std::string::npos);
  return comp;
}

}  // namespace

TEST_CASE("sm90ws default configurations compile clean", "[nvrtc]") {
  test::FreshCache cache;
  for (int D : {256, 320, 384, 448, 512, 576, 768, 1024})
    for (Dtype dt : {Dtype::bf16, Dtype::fp16})
      for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left}) {
        if (dt == Dtype::fp16 && causal != Causal::none) continue;
        Problem p = compile_problem(D, causal);
        p.dtype = dt;
        compile_clean(fwd90ws::default_config(p), fwd::Features::of(p));
      }
  // Dropout (the keep mask, in the seesaw; lock-step beside a bias), and a problem whose mask
  // would pass 1 GiB (drawn in the softmax).
  for (int D : {320, 512, 1024})
    for (BiasKind bias : {BiasKind::none, BiasKind::key}) {
      Problem p = compile_problem(D);
      p.dropout = 0.1;
      p.bias = bias;
      const fwd90ws::Config c = fwd90ws::default_config(p);
      CHECK(c.kmask == 1);
      // D = 320 without a bias: the rows mode (lock-step by construction).
      CHECK(c.rows == (D == 320 && bias == BiasKind::none));
      CHECK(c.seesaw == (bias == BiasKind::none && !c.rows));
      compile_clean(c, fwd::Features::of(p));
    }
  Problem big = compile_problem(512);
  big.dropout = 0.1;
  big.shape.Nq = big.shape.Nkv = 32768;
  CHECK(fwd90ws::default_config(big).kmask == 0);
}

TEST_CASE("sm90ws configurations of the GPU test compile clean", "[nvrtc]") {
  test::FreshCache cache;
  fwd::Features f;
  for (int D : {72, 128, 136, 256, 504, 520, 640, 968}) {
    f.D = D;
    compile_clean(fwd90ws::default_config(compile_problem(D)), f);
  }
  f.D = 512;
  for (int slots : {8, 10, 12, 16, 18})
    for (int cl : {1, 2}) compile_clean(fwd90ws::Config{slots, cl}, f);
  f.D = 320;
  for (int slots : {4, 6}) compile_clean(fwd90ws::Config{slots, 2}, f);
  f.D = 1024;
  for (int slots : {8, 10}) compile_clean(fwd90ws::Config{slots, 1}, f);
  f.D = 768;
  compile_clean(fwd90ws::Config{8, 1, 1}, f);
  for (int D : {320, 512})
    for (int causal : {0, 2}) {
      f.D = D;
      f.causal = causal;
      compile_clean(fwd90ws::Config{18, 1, 1}, f);
    }
  // "sm90ws: seesaw and lock-step"; with dropout drawn in the softmax the seesaw reads P from
  // shared memory (psmem: with P_0 in consumer 1's registers through its softmax ptxas spills 24
  // bytes); drawn ahead (under held PV groups), P from registers or shared memory.
  for (int seesaw : {0, 1}) {
    fwd::Features g;
    g.D = 512;
    g.causal = 1;
    g.bias = 1;
    g.dropout = 1;
    compile_clean(fwd90ws::Config{16, 1, seesaw, seesaw}, g);
    for (int psmem : {0, 1}) compile_clean(fwd90ws::Config{16, 1, psmem, seesaw, 0, 0, 1}, g);
    g.causal = 0;
    g.bias = 0;
    // the default matrix's dropout row, both dtypes
    compile_clean(fwd90ws::Config{16, 1, seesaw, seesaw}, g);
    for (int psmem : {0, 1}) compile_clean(fwd90ws::Config{16, 1, psmem, seesaw, 0, 0, 1}, g);
    g.bf16 = false;
    compile_clean(fwd90ws::Config{16, 1, 0, seesaw, 0, 0, 1}, g);
    g = fwd::Features{};
    g.D = 320;
    g.dropout = 1;
    compile_clean(fwd90ws::Config{6, 1, 0, seesaw, 0, 0, 1}, g);  // consumer 0 holds 3 V panels
    g = fwd::Features{};
    g.D = 320;
    g.bf16 = false;
    for (int psmem : {0, 1}) compile_clean(fwd90ws::Config{16, 1, psmem, seesaw}, g);
    g = fwd::Features{};
    g.D = 1024;
    g.causal = 2;
    compile_clean(fwd90ws::Config{10, 1, 0, seesaw}, g);
  }
  // "sm90ws: bias and dropout": a cluster of two, P through shared memory, lock-step.
  fwd::Features g;
  g.D = 512;
  g.bf16 = false;
  g.bias = 1;
  g.dropout = 1;
  compile_clean(fwd90ws::Config{18, 2, 1, 0}, g);
}

// cluster = 2: a consumer frees a ring slot in both CTAs by remote arrivals, once a warp and
// panel; an arrival with a cluster-scope release compiles to MEMBAR.ALL.GPU before it (66 in the
// D = 512 seesaw kernel until 5be72d8; check_clean allows two), the seesaw and lock-step, D = 320
// and 512. The wgmma arrivals counted show that the kernel's SASS was read.
TEST_CASE("sm90ws cluster=2 frees ring slots without GPU-wide fences", "[nvrtc]") {
  test::FreshCache cache;
  for (int D : {320, 512})
    for (int seesaw : {0, 1}) {
      fwd::Features f;
      f.D = D;
      const nvrtc::Compiled comp = compile_clean(fwd90ws::Config{16, 2, 0, seesaw}, f);
      CHECK(test::sass_count(comp, "ffpa_fwd_sm90ws_kernel", "WARPGROUP.ARRIVE") > 0);
    }
}

// "sm90ws: the odd O panel to consumer 1": 3 O panels in consumer 1's registers, its P_0 too in
// the seesaw, at D = 320 and in the second CTA of D = 576 (5 panels each).
TEST_CASE("sm90ws oddpanel=1 compiles clean at D 320 and 576", "[nvrtc]") {
  test::FreshCache cache;
  for (int seesaw : {0, 1})
    for (int psmem : {0, 1}) {
      fwd::Features f;
      f.D = 320;
      compile_clean(fwd90ws::Config{16, 1, psmem, seesaw, 1}, f);
      f.causal = 1;
      f.bf16 = false;
      compile_clean(fwd90ws::Config{16, 1, psmem, seesaw, 1}, f);
      f = fwd::Features{};
      f.D = 576;
      compile_clean(fwd90ws::Config{10, 1, psmem, seesaw, 1}, f);
    }
  fwd::Features f;
  f.D = 320;
  f.bias = 1;
  f.dropout = 1;
  compile_clean(fwd90ws::Config{16, 1, 1, 0, 1}, f);
}

// "sm90ws: consumer 0 leads": the next pair's S accumulators in flight through consumer 1's
// P_1 and P_1 V_2t-1, in every head-dim regime (D 128, 320 with either odd panel owner, 512, and
// 1024 split over two CTAs), causal, with a bias and dropout, P from registers or sP.
TEST_CASE("sm90ws lead=1 compiles clean at D 128..1024", "[nvrtc]") {
  test::FreshCache cache;
  for (int psmem : {0, 1}) {
    fwd::Features f;
    for (int D : {128, 320, 512}) {
      f.D = D;
      compile_clean(fwd90ws::Config{16, 1, psmem, 1, 0, 1}, f);
    }
    f.D = 320;
    compile_clean(fwd90ws::Config{16, 1, psmem, 1, 1, 1}, f);
    f.D = 512;
    f.bf16 = false;
    f.causal = 2;
    compile_clean(fwd90ws::Config{16, 1, psmem, 1, 0, 1}, f);
    f.bias = 1;
    f.dropout = 1;
    compile_clean(fwd90ws::Config{16, 1, psmem, 1, 0, 1, 1}, f);
    if (psmem) compile_clean(fwd90ws::Config{16, 1, psmem, 1, 0, 1, 0}, f);
    // "sm90ws: consumer 0 leads": bf16 without causal masking, the keep bits from the mask, P
    // from sP (from registers it spills beside a bias).
    if (psmem) {
      fwd::Features g = f;
      g.bf16 = true;
      g.causal = 0;
      fwd90ws::Config km{16, 1, psmem, 1, 0, 1, 0};
      km.kmask = 1;
      compile_clean(km, g);
    }
    f = fwd::Features{};
    f.D = 1024;
    compile_clean(fwd90ws::Config{10, 1, psmem, 1, 0, 1}, f);
  }
}

// The keep bits from the mask (kmask): both protocols, P from registers or sP, leading, with a
// bias and causal masking, at D = 320 (an odd O panel either way), 512 and 1024 (two CTAs a
// query block), both dtypes; the keep kernel is checked with them.
TEST_CASE("sm90ws kmask=1 compiles clean at D 320, 512 and 1024", "[nvrtc]") {
  test::FreshCache cache;
  auto cfg = [](int slots, int psmem, int seesaw, int oddpanel, int lead) {
    fwd90ws::Config c{slots, 1, psmem, seesaw, oddpanel, lead};
    c.kmask = 1;
    return c;
  };
  for (int seesaw : {0, 1})
    for (int psmem : {0, 1}) {
      fwd::Features f;
      f.dropout = 1;
      f.D = 512;
      compile_clean(cfg(16, psmem, seesaw, 0, 0), f);
      f.bf16 = false;
      compile_clean(cfg(12, psmem, seesaw, 0, seesaw), f);
      f.bf16 = true;
      f.causal = 1;
      f.bias = 1;
      compile_clean(cfg(16, psmem, seesaw, 0, 0), f);
      f = fwd::Features{};
      f.dropout = 1;
      f.D = 320;
      for (int odd : {0, 1}) compile_clean(cfg(16, psmem, seesaw, odd, 0), f);
      f.D = 1024;
      f.causal = 2;
      compile_clean(cfg(10, psmem, seesaw, 0, 0), f);
    }
}

// Every case the GPU test runs is one the variant accepts (a case it refuses fails there, after a
// staging and a GPU call).
TEST_CASE("sm90ws: the GPU test's case lists are supported", "[plan]") {
  const gpu::DeviceInfo h200 = test::h200();
  for (const auto& list : {test::qknext_cases(), test::rows_cases()})
    for (const test::Fwd90wsCase& c : list) {
      INFO(test::describe(c.problem) << " " << to_string(c.config.knobs()));
      CHECK(fwd90ws::problem_check(c.problem).reason == "");
      CHECK(fwd90ws::check(c.config, static_cast<int>(c.problem.shape.D), h200.smem_per_block_optin)
                .reason == "");
    }
}

// The GPU test's qknext configurations (test::qknext_cases): the next S accumulators in flight
// beside the PV groups, P loaded from sP each pair, D = 72..576, both dtypes.
TEST_CASE("sm90ws qknext=1 compiles clean at D 72..576", "[nvrtc]") {
  test::FreshCache cache;
  for (const test::Fwd90wsCase& c : test::qknext_cases())
    compile_clean(c.config, fwd::Features::of(c.problem));
}

// The rows mode at the GPU test's configurations: O of 64 rows x D in a consumer (160 registers
// at D = 320); a bias at D = 320 spills (bind() refuses it), at 256 it does not.
TEST_CASE("sm90ws rows=1 compiles clean at D 72..320", "[nvrtc]") {
  test::FreshCache cache;
  for (const test::Fwd90wsCase& c : test::rows_cases())
    compile_clean(c.config, fwd::Features::of(c.problem));
}

// In lock-step (their default: seesaw = 0), bf16 with every mask alignment, fp16 without.
TEST_CASE("sm90ws bias and dropout compile clean at D 320, 512 and 1024", "[nvrtc]") {
  test::FreshCache cache;
  for (int D : {320, 512, 1024})
    for (int bf16 : {1, 0})
      for (int causal : {0, 1, 2})
        for (int bias : {0, 1, 2})
          for (int dropout : {0, 1}) {
            if ((!bias && !dropout) || (!bf16 && causal)) continue;
            fwd::Features f;
            f.D = D;
            f.bf16 = bf16;
            f.causal = causal;
            f.bias = bias;
            f.dropout = dropout;
            compile_clean(fwd90ws::Config{D > 512 ? 10 : 18, 1, 0, 0}, f);
          }
}

TEST_CASE("variant ffpa-fwd-sm90ws: grid file, support surface", "[nvrtc]") {
  auto v = make_ffpa_fwd_sm90ws();
  CHECK(v->name() == "ffpa-fwd-sm90ws");
  CHECK(v->pass() == Pass::fwd);
  const Grid g = load_variant_grid(v->name(), (test::source_dir() / "configs" / "grids").string());
  CHECK(check_grid_matches(g, v->knob_names()).ok());

  const gpu::DeviceInfo h200 = test::h200();
  for (int D : {72, 320, 384, 448, 504, 512, 520, 1024}) {
    const Problem p = compile_problem(D);
    INFO("D=" << D);
    CHECK(v->supports(p).ok());
    CHECK(v->supports(p, v->default_knobs(p), h200).ok());
  }
  CHECK_THAT(v->supports(compile_problem(64)).reason, Catch::Contains("72..1024"));
  Problem p = compile_problem(512);
  p.shape.Nq = 1;
  CHECK_THAT(v->supports(p).reason, Catch::Contains("decode"));

  // Causal rows run without a cluster: the two CTAs of one would see different key counts.
  const Problem causal = compile_problem(512, Causal::bottom_right);
  CHECK_THROWS_WITH(fwd90ws::compile_for(causal, fwd90ws::Config{18, 2}, h200),
                    Catch::Contains("causal"));
  // The last wave is split only without causal masking; in clusters of two as with one CTA.
  fwd90ws::Config tail;
  tail.tail = 1;
  CHECK_THROWS_WITH(fwd90ws::compile_for(causal, tail, h200), Catch::Contains("tail=1: causal"));
  tail.cluster = 2;
  CHECK_NOTHROW(fwd90ws::compile_for(compile_problem(512), tail, h200));
  // Past D = 512 the two CTAs of a query block hold different O columns: no shared V stream.
  CHECK_THROWS_WITH(fwd90ws::compile_for(compile_problem(1024), fwd90ws::Config{8, 2}, h200),
                    Catch::Contains("different V columns"));
  CHECK_THAT(v->supports(compile_problem(1024), fwd90ws::Config{12, 1}.knobs(), h200).reason,
             Catch::Contains("shared memory"));
  gpu::DeviceInfo ampere = h200;
  ampere.sm_major = 8;
  const Problem p512 = compile_problem(512);
  CHECK_THAT(v->supports(p512, v->default_knobs(p512), ampere).reason, Catch::Contains("sm_90"));
  CHECK_THAT(v->supports(p512, fwd90ws::Config{20, 2}.knobs(), h200).reason,
             Catch::Contains("shared memory"));
  // Two rings; consumer 1's holds its 4 V panels of a block at once at D = 512.
  CHECK_THAT(v->supports(p512, fwd90ws::Config{6, 1}.knobs(), h200).reason,
             Catch::Contains("at least 4"));
  CHECK_THAT(v->supports(p512, fwd90ws::Config{17, 1}.knobs(), h200).reason,
             Catch::Contains("even"));
  CHECK(v->supports(compile_problem(320), fwd90ws::Config{4, 1}.knobs(), h200).ok());
  // Drawing ahead holds consumer 0's V panels of a block in flight (3 at D = 320), and needs
  // dropout.
  CHECK_THAT(
      v->supports(compile_problem(320), fwd90ws::Config{4, 1, 0, 1, 0, 0, 1}.knobs(), h200).reason,
      Catch::Contains("ahead=1 holds consumer 0's 3 V panels"));
  Problem drop320 = compile_problem(320);
  drop320.dropout = 0.1;
  CHECK_NOTHROW(fwd90ws::compile_for(drop320, fwd90ws::Config{6, 1, 0, 0, 0, 0, 1}, h200));
  CHECK_THROWS_WITH(
      fwd90ws::compile_for(compile_problem(320), fwd90ws::Config{6, 1, 0, 0, 0, 0, 1}, h200),
      Catch::Contains("no dropout"));
  // The keep mask: with dropout only, and not beside drawing ahead (nothing left to draw).
  fwd90ws::Config km;
  km.kmask = 1;
  CHECK_NOTHROW(fwd90ws::compile_for(drop320, km, h200));
  CHECK_THROWS_WITH(fwd90ws::compile_for(compile_problem(320), km, h200),
                    Catch::Contains("kmask=1: the problem has no dropout"));
  km.ahead = 1;
  CHECK_THAT(v->supports(drop320, km.knobs(), h200).reason,
             Catch::Contains("ahead=1 with kmask=1"));
  km.ahead = 0;
  km.kmask = 2;
  CHECK_THAT(v->supports(drop320, km.knobs(), h200).reason, Catch::Contains("kmask is 0 or 1"));
  // The odd O panel to consumer 1: only where a CTA has an odd count (5 at D = 320 and 576), and
  // then consumer 1's ring holds 3 V panels.
  CHECK(v->supports(compile_problem(320), fwd90ws::Config{6, 1, 0, 1, 1}.knobs(), h200).ok());
  CHECK(v->supports(compile_problem(576), fwd90ws::Config{10, 1, 0, 1, 1}.knobs(), h200).ok());
  CHECK_THAT(v->supports(compile_problem(320), fwd90ws::Config{4, 1, 0, 1, 1}.knobs(), h200).reason,
             Catch::Contains("at least 3"));
  CHECK_THAT(v->supports(p512, fwd90ws::Config{16, 1, 0, 1, 1}.knobs(), h200).reason,
             Catch::Contains("even count of O panels"));
  CHECK_THAT(v->supports(p512, fwd90ws::Config{16, 1, 0, 1, 2}.knobs(), h200).reason,
             Catch::Contains("oddpanel is 0 or 1"));
  // The next pair's QK first: lock-step, P from registers, nothing drawn ahead; a consumer's ring
  // holds its V panels of a pair (6 slots at D = 320, 8 at 512).
  fwd90ws::Config next{12, 1, 0, 0};
  next.qknext = 1;
  CHECK(v->supports(compile_problem(320), next.knobs(), h200).ok());
  next.slots = 14;
  CHECK_THAT(v->supports(p512, next.knobs(), h200).reason,
             Catch::Contains("qknext=1 holds 8 V panels of a pair"));
  next.slots = 16;
  CHECK(v->supports(p512, next.knobs(), h200).ok());
  next.seesaw = 1;
  CHECK_THAT(v->supports(p512, next.knobs(), h200).reason, Catch::Contains("lock-step only"));
  next.seesaw = 0;
  next.psmem = 1;
  CHECK_THAT(v->supports(p512, next.knobs(), h200).reason, Catch::Contains("psmem=1"));
  next.psmem = 0;
  next.ahead = 1;
  CHECK_THAT(v->supports(drop320, next.knobs(), h200).reason,
             Catch::Contains("qknext=1 with ahead=1"));
  next.ahead = 0;
  next.qknext = 2;
  CHECK_THAT(v->supports(p512, next.knobs(), h200).reason, Catch::Contains("qknext is 0 or 1"));
  // Consumer 0 leads only in the seesaw.
  CHECK(v->supports(p512, fwd90ws::Config{16, 1, 0, 1, 0, 1}.knobs(), h200).ok());
  CHECK(v->supports(compile_problem(128), fwd90ws::Config{4, 1, 0, 1, 0, 1}.knobs(), h200).ok());
  CHECK_THAT(v->supports(p512, fwd90ws::Config{16, 1, 0, 0, 0, 1}.knobs(), h200).reason,
             Catch::Contains("only the seesaw"));
  // Leading, consumer 0's ring holds its V panels of a block (3 at D = 320).
  CHECK_THAT(
      v->supports(compile_problem(320), fwd90ws::Config{4, 1, 0, 1, 0, 1}.knobs(), h200).reason,
      Catch::Contains("consumer 0's 3 V panels"));
  CHECK(v->supports(compile_problem(320), fwd90ws::Config{6, 1, 0, 1, 0, 1}.knobs(), h200).ok());
  CHECK_THAT(v->supports(p512, fwd90ws::Config{8, 4}.knobs(), h200).reason,
             Catch::Contains("cluster"));
  // The rows mode: D up to 320, lock-step knobs only, one CTA, an even ring (with pingpong one
  // that holds a block's V panels), 128 rows of Q in shared memory.
  fwd90ws::Config rows{16, 1, 0, 0};
  rows.rows = 1;
  CHECK(v->supports(compile_problem(320), rows.knobs(), h200).ok());
  CHECK(v->supports(compile_problem(72), rows.knobs(), h200).ok());
  rows.kmask = 1;
  CHECK_NOTHROW(fwd90ws::compile_for(drop320, rows, h200));
  rows.kmask = 0;
  fwd90ws::Config turns = rows;
  turns.slots = 4;
  turns.pingpong = 1;
  CHECK(v->supports(compile_problem(256), turns.knobs(), h200).ok());
  using Change = std::function<void(fwd90ws::Config&)>;
  const std::vector<std::tuple<Change, int, const char*>> refused = {
      {[](fwd90ws::Config&) {}, 384, "rows=1: D=384 > 320"},
      {[](fwd90ws::Config& c) { c.seesaw = 1; }, 320, "rows=1 with seesaw=1"},
      {[](fwd90ws::Config& c) { c.psmem = 1; }, 320, "rows=1 with psmem=1"},
      {[](fwd90ws::Config& c) { c.qknext = 1; }, 320, "rows=1 with qknext=1"},
      {[](fwd90ws::Config& c) { c.oddpanel = 1; }, 320, "rows=1 with oddpanel=1"},
      {[](fwd90ws::Config& c) { c.ahead = 1; }, 320, "rows=1 with ahead=1"},
      {[](fwd90ws::Config& c) { c.cluster = 2; }, 320, "rows=1 with cluster=2"},
      {[](fwd90ws::Config& c) { c.slots = 3; }, 320, "even ring"},
      {[](fwd90ws::Config& c) { c.slots = 4, c.pingpong = 1; }, 320,
       "pingpong=1 holds a block's 5 V panels"},
      {[](fwd90ws::Config& c) { c.rows = 0, c.pingpong = 1; }, 320,
       "pingpong=1: only the rows mode"},
      {[](fwd90ws::Config& c) { c.pingpong = 2; }, 320, "pingpong is 0 or 1"},
      {[](fwd90ws::Config& c) { c.rows = 2; }, 320, "rows is 0 or 1"},
      // 128 rows of Q (80 KB at D = 320) beside 20 slots.
      {[](fwd90ws::Config& c) { c.slots = 20; }, 320, "shared memory"},
  };
  for (const auto& [change, D, reason] : refused) {
    fwd90ws::Config c = rows;
    change(c);
    INFO(to_string(c.knobs()) << " D=" << D);
    CHECK_THAT(v->supports(compile_problem(D), c.knobs(), h200).reason, Catch::Contains(reason));
  }
  // Every default fits the H200 at every D it accepts.
  for (int D = fwd90ws::kMinD; D <= fwd90ws::kMaxD; D += 8)
    CHECK(fwd90ws::check(fwd90ws::default_config(compile_problem(D)), D, h200.smem_per_block_optin)
              .ok());
}

TEST_CASE("the last wave's split (plan_tail)", "[plan]") {
  using ffpa_family::plan_tail;
  // D = 512 self on the H200: 32 heads x 128 query blocks = 31 waves and 4 CTAs; the 4 run as 32
  // pieces of 2 of their 64 pairs (as cheap as 33, fewer partials).
  auto t = plan_tail(4096, 132, 64);
  CHECK(t.from == 4092);
  CHECK(t.pieces == 32);
  // A last wave of 100 CTAs on 132 SMs: split, it would take longer (two waves of pieces).
  t = plan_tail(1024, 132, 64);
  CHECK(t.from == 1024);
  CHECK(t.pieces == 1);
  // Fewer units than SMs: each in pieces of the fewest pairs that still fit one wave (2: 32
  // pieces as cheap as 44).
  t = plan_tail(3, 132, 64);
  CHECK(t.from == 0);
  CHECK(t.pieces == 32);
  t = plan_tail(3, 8, 8);
  CHECK(t.from == 0);
  CHECK(t.pieces == 2);
  // Whole waves, one pair a unit, or no multiprocessor: nothing to split.
  CHECK(plan_tail(264, 132, 64).pieces == 1);
  CHECK(plan_tail(5, 132, 1).pieces == 1);
  CHECK(plan_tail(5, 0, 8).pieces == 1);
  // Pieces of one pair, no more than the pairs.
  t = plan_tail(133, 132, 4);
  CHECK(t.from == 132);
  CHECK(t.pieces == 4);
}

// Every CTA of a split last wave, in clusters of 1 and 2: each (tail unit, piece) runs once, at
// its own partial rows (unit-major, as the merge reads them); the CTAs of a cluster take one
// piece (one key stream) and the neighbouring units of one cluster, rank by rank.
TEST_CASE("the last wave's pieces in clusters (fwd_sm90ws_piece)", "[plan]") {
  for (int cluster : {1, 2})
    for (int pieces = 1; pieces <= 9; ++pieces)
      for (int clusters = 1; clusters <= 5; ++clusters) {
        INFO("cluster=" << cluster << " pieces=" << pieces << " clusters=" << clusters);
        const int units = clusters * cluster, ctas = units * pieces;
        std::vector<int> runs(static_cast<size_t>(ctas), 0);
        for (int rel = 0; rel < ctas; ++rel) {
          const auto pc = ffpa_layout::fwd_sm90ws_piece(rel, cluster, pieces);
          REQUIRE(pc.unit >= 0);
          REQUIRE(pc.unit < units);
          REQUIRE(pc.piece >= 0);
          REQUIRE(pc.piece < pieces);
          ++runs[static_cast<size_t>(pc.unit * pieces + pc.piece)];
          CHECK(pc.unit % cluster == rel % cluster);
          const auto lead = ffpa_layout::fwd_sm90ws_piece(rel - rel % cluster, cluster, pieces);
          CHECK(pc.piece == lead.piece);
          CHECK(pc.unit / cluster == lead.unit / cluster);
        }
        for (int r : runs) CHECK(r == 1);
      }
}

TEST_CASE("sm90ws ring and barrier protocol (simulator)", "[sim]") {
  const std::string cmd =
      "python3 " + (test::source_dir() / "tools" / "ffpa_fwd_sm90ws_sim.py").string();
  CHECK(std::system(cmd.c_str()) == 0);
}
