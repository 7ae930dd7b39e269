// NVRTC compiles the forward kernel's default configurations for sm_80 and sm_90a without a GPU;
// ptxas must not spill (a spilling accumulator tile is the failure mode of large D). The runner's
// ahead-of-time compilation (precompile, --compile-only) needs no GPU either.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "core/build_info.hpp"
#include "core/error.hpp"
#include "ffpa_support.hpp"
#include "gpu/nvrtc.hpp"
#include "runner/runner.hpp"
#include "support.hpp"
#include "tuning/grid.hpp"
#include "variants/ffpa_fwd_sm80.hpp"

using namespace ffpa;
using test::compile_problem;

namespace {

void compile_clean(const fwd::Config& c, const fwd::Features& f, const std::string& arch) {
  INFO("D=" << f.D << " " << to_string(c.knobs()) << " " << arch);
  REQUIRE(fwd::check(c, f.D, 227 * 1024).ok());
  const nvrtc::Compiled comp = fwd::compile(c, f, arch);
  test::check_clean(comp, {"ffpa_fwd_kernel"});
  CHECK(fwd::accumulator_registers(c, f.D) < comp.info.at("ffpa_fwd_kernel").registers);
}

}  // namespace

TEST_CASE("ptxas -v output is parsed per kernel", "[nvrtc]") {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k1' for 'sm_90a'\n"
      "ptxas info    : Function properties for k1\n"
      "    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 392 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'k2' for 'sm_90a'\n"
      "ptxas info    : Function properties for k2\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers, 392 bytes cmem[0]\n";
  const auto info = nvrtc::parse_ptxas(log);
  REQUIRE(info.size() == 2);
  CHECK(info.at("k1").registers == 255);
  CHECK(info.at("k1").spill_stores == 12);
  CHECK(info.at("k1").spill_loads == 16);
  CHECK(info.at("k1").stack_bytes == 8);
  CHECK(info.at("k1").static_smem == 1024);
  CHECK(info.at("k2").registers == 40);
  CHECK(info.at("k2").spill_stores == 0);
}

TEST_CASE("configuration checks reject what cannot fit", "[nvrtc]") {
  fwd::Config c;
  CHECK(fwd::check(c, 512, 227 * 1024).ok());
  c.Wn = 2;  // O would be 32 rows x 256 columns a warp: 256 registers
  CHECK_THAT(fwd::check(c, 512, 227 * 1024).reason, Catch::Contains("registers"));
  c = {};
  c.Br = 256;
  c.Wm = 4;
  CHECK_THAT(fwd::check(c, 1024, 227 * 1024).reason, Catch::Contains("shared memory"));
  c = {};
  c.Br = 48;
  CHECK_THAT(fwd::check(c, 512, 227 * 1024).reason, Catch::Contains("multiple of 16*Wm"));
}

TEST_CASE("default configurations compile for sm_80 and sm_90a without spills", "[nvrtc]") {
  test::FreshCache cache;  // compile for real, not from the user's cubin cache
  for (int D : {320, 512, 1024})
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const Problem p = compile_problem(D);
      compile_clean(fwd::default_config(p), fwd::Features::of(p), arch);
    }
  // Every feature combination at D=512 (the register peak of Br=64) and D=1024: a spill in one of
  // them turned the default into "n/a" for that case.
  for (int D : {512, 1024})
    for (Causal causal : {Causal::none, Causal::bottom_right, Causal::top_left})
      for (BiasKind bias : {BiasKind::none, BiasKind::key})
        for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input})
          for (double dropout : {0.0, 0.1})
            for (bool split : {false, true}) {
              if (bias == BiasKind::none && md == BiasDtype::input) continue;
              Problem p = compile_problem(D, causal);
              p.bias = bias;
              p.bias_dtype = md;
              p.dropout = dropout;
              fwd::Features f = fwd::Features::of(p);
              f.split = split;
              compile_clean(fwd::default_config(p), f, "sm_90a");
            }
}

// Decode's default (wider key tiles, split-KV) with every feature, GQA groups up to 16 rows.
TEST_CASE("decode default configurations compile without spills", "[nvrtc]") {
  test::FreshCache cache;
  for (int D : {320, 512, 1024})
    for (Causal causal : {Causal::none, Causal::bottom_right})
      for (BiasKind bias : {BiasKind::none, BiasKind::key, BiasKind::full})
        for (double dropout : {0.0, 0.1}) {
          Problem p = compile_problem(D, causal);
          p.shape.Nq = 1;
          p.shape.Hkv = 2;  // a group of 16
          p.bias = bias;
          p.dropout = dropout;
          const fwd::Config c = fwd::default_config(p);
          CHECK(fwd::resolve_splits(c, p, 132) > 1);
          fwd::Features f = fwd::Features::of(p);
          f.split = true;
          compile_clean(c, f, "sm_90a");
        }
}

TEST_CASE("the cubin cache returns what was compiled", "[nvrtc]") {
  test::FreshCache cache;
  const Problem p = compile_problem(128);
  fwd::Config c = fwd::default_config(p);
  const auto first = fwd::compile(c, fwd::Features::of(p), "sm_80");
  const auto second = fwd::compile(c, fwd::Features::of(p), "sm_80");
  CHECK_FALSE(first.cached);
  CHECK(second.cached);
  CHECK(first.cubin == second.cubin);
  CHECK(second.info.at("ffpa_fwd_kernel").registers == first.info.at("ffpa_fwd_kernel").registers);
  c.stages = 2;  // other options, other entry
  CHECK_FALSE(fwd::compile(c, fwd::Features::of(p), "sm_80").cached);
}

// A cubin's key covers the kernel's own sources only: a change to another family's kernel
// leaves it valid.
TEST_CASE("the cubin key hashes the main file and what it includes", "[nvrtc]") {
  const std::vector<std::string> files = kernel_source_files("ffpa_fwd.cuh");
  auto has = [&](const char* f) { return std::count(files.begin(), files.end(), f) == 1; };
  CHECK(has("ffpa_fwd.cuh"));
  CHECK(has("ffpa_common.cuh"));
  CHECK(has("philox.cuh"));  // through ffpa_common.cuh
  CHECK(has("params.h"));
  CHECK_FALSE(has("ffpa_bwd.cuh"));
  CHECK_FALSE(has("ffpa_fwd_sm90ws.cuh"));
  CHECK(std::is_sorted(files.begin(), files.end()));
  const uint64_t fwd = kernel_source_hash("ffpa_fwd.cuh");
  CHECK(fwd == kernel_source_hash("ffpa_fwd.cuh"));
  CHECK(fwd != kernel_source_hash("ffpa_fwd_sm90ws.cuh"));
  CHECK(fwd != kernel_source_hash());
  CHECK_THROWS_AS(kernel_source_files("no_such_kernel.cuh"), RunError);
}

TEST_CASE("variant ffpa-fwd-sm80: grid file, support surface", "[nvrtc]") {
  auto v = make_ffpa_fwd_sm80();
  CHECK(v->name() == "ffpa-fwd-sm80");
  CHECK(v->pass() == Pass::fwd);
  const Grid g = load_variant_grid(v->name(), (test::source_dir() / "configs" / "grids").string());
  CHECK(check_grid_matches(g, v->knob_names()).ok());

  const gpu::DeviceInfo h200 = test::h200();
  for (int D : {32, 64, 320, 512, 520, 1024}) {
    Problem p = compile_problem(D);
    INFO("D=" << D);
    CHECK(v->supports(p).ok());
    CHECK(v->supports(p, v->default_knobs(p), h200).ok());
  }
  CHECK_FALSE(v->supports(compile_problem(1032)).ok());
  CHECK_FALSE(v->supports(compile_problem(100)).ok());
  Problem gqa = compile_problem(512);
  gqa.shape.Hkv = 5;
  CHECK_FALSE(v->supports(gqa).ok());
  gpu::DeviceInfo turing = h200;
  turing.sm_major = 7;
  CHECK_FALSE(
      v->supports(compile_problem(512), v->default_knobs(compile_problem(512)), turing).ok());
  gpu::DeviceInfo small = h200;
  small.smem_per_block_optin = 99 * 1024;  // sm_86/sm_89: resident Q of 64 x 512 + stages
  const Support s =
      v->supports(compile_problem(512), v->default_knobs(compile_problem(512)), small);
  CHECK_THAT(s.reason, Catch::Contains("shared memory"));
}

TEST_CASE("split-KV fills the GPU for decode only", "[nvrtc]") {
  const fwd::Config c = fwd::default_config(compile_problem(512));
  Problem dec = compile_problem(512);
  dec.shape.Nq = 1;
  CHECK(fwd::resolve_splits(c, dec, 132) == 4);  // 32 heads: 4 x 32 = 128 blocks
  dec.shape.Hkv = 8;
  CHECK(fwd::resolve_splits(c, dec, 132) == 16);  // q heads packed: 8 blocks
  CHECK(fwd::resolve_splits(c, compile_problem(512), 132) == 1);
  fwd::Config fixed = c;
  fixed.splits = 1000;
  CHECK(fwd::resolve_splits(fixed, dec, 132) == 64);
}

TEST_CASE("bind refuses misaligned tensors before touching the GPU", "[nvrtc]") {
  const Problem p = compile_problem(512);
  FfpaFwdParams prm{};
  alignas(16) static char fake[64];
  prm.q = prm.k = prm.v = prm.o = fake;
  prm.q_row_stride = prm.k_row_stride = prm.v_row_stride = prm.o_row_stride = 512;
  const gpu::DeviceInfo h200 = test::h200();
  prm.k_row_stride = 516;  // rows no longer 16-byte aligned
  CHECK_THROWS_AS(fwd::bind(p, fwd::default_config(p), prm, h200), Unsupported);
  prm.k_row_stride = 512;
  prm.v = fake + 2;
  CHECK_THROWS_AS(fwd::bind(p, fwd::default_config(p), prm, h200), Unsupported);
}

TEST_CASE("precompile fills the cache for a plan on several threads, each key once", "[nvrtc]") {
  test::FreshCache cache;
  Plan plan;
  for (Pass pass : {Pass::fwd, Pass::bwd})
    for (int copy = 0; copy < 2; ++copy) {  // equal problems: the second waits, then reads
      PlanItem it;
      it.problem = compile_problem(512);
      it.problem.case_name = "self-attn";
      it.pass = pass;
      plan.items.push_back(it);
    }
  Registry reg = Registry::make();
  const auto variants = selected_variants(reg, {});
  const TuningCache none = TuningCache::load((cache.dir.path() / "tuning.json").string());
  const gpu::DeviceInfo dev = gpu::known_device("sm_90a");
  REQUIRE_FALSE(dev.name.empty());
  CHECK(gpu::known_device("sm_70").name.empty());

  auto cubins = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(cache.dir.path()))
      n += e.path().extension() == ".cubin";
    return n;
  };
  // Every variant that takes the problem, with its default configuration, once per item.
  size_t jobs = 0, kernels = 0;
  for (Variant* v : variants) {
    const Problem& p = plan.items[v->pass() == Pass::fwd ? 0 : 2].problem;
    const bool takes = v->supports(p).ok() && v->supports(p, v->default_knobs(p), dev).ok();
    jobs += takes ? 2 : 0;
    kernels += takes;
  }
  REQUIRE(kernels >= 2);  // at least the portable forward and backward
  const auto done = precompile(plan, variants, TuneMode::none, none, dev, 4);
  REQUIRE(done.size() == jobs);
  for (const auto& c : done) {
    INFO(c.variant << " " << to_string(c.knobs) << " " << c.result.reason);
    CHECK(c.result.ok());
    CHECK(c.source == "default");
  }
  CHECK(cubins() == static_cast<int>(kernels));  // equal items share one compile
  const auto again = precompile(plan, variants, TuneMode::none, none, dev, 2);
  CHECK(again.size() == jobs);
  CHECK(cubins() == static_cast<int>(kernels));
}
