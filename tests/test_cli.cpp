#include <catch2/catch.hpp>
#include <initializer_list>
#include <string>
#include <vector>

#include "cli/options.hpp"
#include "core/error.hpp"

using namespace ffpa;

namespace {

std::optional<Options> parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv = {"ffpa-bench"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parse_cli(static_cast<int>(argv.size()), argv.data());
}

Options run(std::initializer_list<const char*> args) {
  auto o = parse(args);
  REQUIRE(o.has_value());
  return *o;
}

// The error parse_cli throws; fails the test when it returns instead.
InputError error(std::initializer_list<const char*> args) {
  try {
    parse(args);
  } catch (const InputError& e) {
    CHECK(e.where() == "command line");
    return e;
  }
  FAIL("expected an InputError");
  throw std::logic_error("unreachable");
}

void expect_error(std::initializer_list<const char*> args, const std::string& flag,
                  const std::string& reason) {
  const InputError e = error(args);
  INFO(e.what());
  CHECK(e.path() == flag);
  CHECK_THAT(e.reason(), Catch::Contains(reason));
}

}  // namespace

TEST_CASE("defaults", "[cli]") {
  for (auto o : {run({}), run({"run"})}) {
    CHECK(o.command == Command::run);
    CHECK(o.fwd);
    CHECK(o.bwd);
    CHECK(o.cases.empty());
    CHECK(o.config == "configs/default.json");
    CHECK(o.B.empty());
    CHECK(o.H.empty());
    CHECK(o.Hkv.empty());
    CHECK(o.N.empty());
    CHECK(o.Nq.empty());
    CHECK(o.Nkv.empty());
    CHECK(o.D.empty());
    CHECK(o.dtypes.empty());
    CHECK(o.tune == TuneMode::none);
    CHECK(o.variants.empty());
    CHECK(o.baseline == BaselineMode::best);
    CHECK(o.timing.cold);
    CHECK(o.timing.min_samples == 10);
    CHECK(o.timing.max_noise == 0.5);
    CHECK(o.timing.min_time == 0.5);
    CHECK(o.timing.timeout == 15.0);
    CHECK(o.seed == 0);
    CHECK(o.out == "ffpa-out");
    CHECK(o.tuning_cache.empty());
    CHECK(o.check);
    CHECK(o.formats == std::vector<std::string>{"md", "json", "csv", "png"});
    CHECK(o.device == 0);
    CHECK_FALSE(o.list);
    CHECK_FALSE(o.dry_run);
    CHECK(o.verbose == 0);
    CHECK(o.save_tensors.empty());
  }
}

TEST_CASE("the README examples parse", "[cli]") {
  auto a = run({"--fwd", "--bwd", "--tune", "max"});
  CHECK(a.fwd);
  CHECK(a.bwd);
  CHECK(a.tune == TuneMode::max);
  auto b = run({"--case", "causal", "--N", "16384"});
  CHECK(b.cases == std::vector<std::string>{"causal"});
  CHECK(b.N == std::vector<int64_t>{16384});
}

TEST_CASE("passes", "[cli]") {
  struct Row {
    std::vector<const char*> args;
    bool fwd, bwd;
  };
  const Row rows[] = {
      {{}, true, true},
      {{"--fwd"}, true, false},
      {{"--bwd"}, false, true},
      {{"--fwd", "--bwd"}, true, true},
      {{"--no-fwd"}, false, true},
      {{"--no-bwd"}, true, false},
      {{"--fwd", "--no-bwd"}, true, false},
      {{"--bwd", "--no-fwd"}, false, true},
  };
  for (const Row& r : rows) {
    std::vector<const char*> argv = {"ffpa-bench"};
    argv.insert(argv.end(), r.args.begin(), r.args.end());
    auto o = parse_cli(static_cast<int>(argv.size()), argv.data());
    REQUIRE(o);
    INFO(o->command_line);
    CHECK(o->fwd == r.fwd);
    CHECK(o->bwd == r.bwd);
  }
  expect_error({"--no-fwd", "--no-bwd"}, "--no-fwd", "nothing to measure");
  expect_error({"--fwd", "--no-fwd"}, "--fwd", "excludes");
  expect_error({"--bwd", "--no-bwd"}, "--bwd", "excludes");
}

TEST_CASE("case lists", "[cli]") {
  CHECK(run({"--case", "self-attn,gqa", "--case", "causal"}).cases ==
        std::vector<std::string>{"self-attn", "gqa", "causal"});
  CHECK(run({"--case", "gqa", "causal"}).cases == std::vector<std::string>{"gqa", "causal"});
  CHECK(run({"--case=dropout,dropout"}).cases == std::vector<std::string>{"dropout"});
  expect_error({"--case", "gqa,,causal"}, "--case", "empty item");
  expect_error({"--case", "gqa,"}, "--case", "empty item");
  expect_error({"--case"}, "--case", "");
}

TEST_CASE("sweeps", "[cli]") {
  auto o = run({"--B", "1,2", "--H", "8", "--H", "16", "--Hkv", "4", "--N", "8192,16384", "--Nq",
                "1,1024", "--Nkv", "333", "--D", "320,512"});
  CHECK(o.B == std::vector<int64_t>{1, 2});
  CHECK(o.H == std::vector<int64_t>{8, 16});
  CHECK(o.Hkv == std::vector<int64_t>{4});
  CHECK(o.N == std::vector<int64_t>{8192, 16384});
  CHECK(o.Nq == std::vector<int64_t>{1, 1024});
  CHECK(o.Nkv == std::vector<int64_t>{333});
  CHECK(o.D == std::vector<int64_t>{320, 512});
  CHECK(run({"--D", "320", "512"}).D == std::vector<int64_t>{320, 512});

  for (const char* flag : {"--B", "--H", "--Hkv", "--N", "--Nq", "--Nkv", "--D"}) {
    INFO(flag);
    expect_error({flag, "0"}, flag, "\"0\" is not a positive integer");
    expect_error({flag, "-4"}, flag, "");
    expect_error({flag, "abc"}, flag, "\"abc\" is not a positive integer");
    expect_error({flag, "1.5"}, flag, "\"1.5\" is not a positive integer");
    expect_error({flag, "+8"}, flag, "\"+8\" is not a positive integer");
    expect_error({flag, "8,8"}, flag, "duplicate value 8");
    expect_error({flag, "4294967296"}, flag, "too large");
    expect_error({flag, "99999999999999999999"}, flag, "is too large (at most 2147483647)");
    expect_error({flag}, flag, "");
  }
}

TEST_CASE("dtype, tune, baseline, variant", "[cli]") {
  CHECK(run({"--dtype", "fp16"}).dtypes == std::vector<Dtype>{Dtype::fp16});
  CHECK(run({"--dtype", "bf16"}).dtypes == std::vector<Dtype>{Dtype::bf16});
  CHECK(run({"--dtype", "both"}).dtypes == std::vector<Dtype>{Dtype::fp16, Dtype::bf16});
  expect_error({"--dtype", "fp8"}, "--dtype", "unknown dtype \"fp8\" (valid: fp16, bf16, both)");

  CHECK(run({"--tune", "none"}).tune == TuneMode::none);
  CHECK(run({"--tune", "fast"}).tune == TuneMode::fast);
  CHECK(run({"--tune", "max"}).tune == TuneMode::max);
  expect_error({"--tune", "slow"}, "--tune", "unknown mode \"slow\"");

  for (auto m : {BaselineMode::best, BaselineMode::cudnn, BaselineMode::unfused, BaselineMode::none,
                 BaselineMode::all}) {
    const std::string name = to_string(m);
    CHECK(run({"--baseline", name.c_str()}).baseline == m);
  }
  expect_error({"--baseline", "sdpa"}, "--baseline",
               "unknown baseline \"sdpa\" (valid: best, cudnn, unfused, none, all)");

  CHECK(run({"--variant", "a,b", "--variant", "c", "a"}).variants ==
        std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("to_string of modes", "[cli]") {
  CHECK(to_string(TuneMode::none) == "none");
  CHECK(to_string(TuneMode::fast) == "fast");
  CHECK(to_string(TuneMode::max) == "max");
  CHECK(to_string(BaselineMode::best) == "best");
  CHECK(to_string(BaselineMode::cudnn) == "cudnn");
  CHECK(to_string(BaselineMode::unfused) == "unfused");
  CHECK(to_string(BaselineMode::none) == "none");
  CHECK(to_string(BaselineMode::all) == "all");
}

TEST_CASE("timing options", "[cli]") {
  auto o = run(
      {"--hot", "--min-samples", "25", "--max-noise", "1.5", "--min-time", "0", "--timeout", "60"});
  CHECK_FALSE(o.timing.cold);
  CHECK(o.timing.min_samples == 25);
  CHECK(o.timing.max_noise == 1.5);
  CHECK(o.timing.min_time == 0);
  CHECK(o.timing.timeout == 60);
  CHECK(run({"--cold"}).timing.cold);
  expect_error({"--cold", "--hot"}, "--cold", "excludes");
  expect_error({"--min-samples", "0"}, "--min-samples", "out of range");
  expect_error({"--min-samples", "ten"}, "--min-samples", "not a non-negative integer");
  expect_error({"--max-noise", "0"}, "--max-noise", "must be > 0");
  expect_error({"--max-noise", "x"}, "--max-noise", "\"x\" is not a number");
  expect_error({"--max-noise", "nan"}, "--max-noise", "is not a number");
  expect_error({"--min-time", "-1"}, "--min-time", "must be >= 0");
  expect_error({"--timeout", "0"}, "--timeout", "must be > 0");
  expect_error({"--timeout", "5s"}, "--timeout", "is not a number");
}

TEST_CASE("seed, out, cache, check, format, device, flags", "[cli]") {
  CHECK(run({"--seed", "18446744073709551615"}).seed == 18446744073709551615ull);
  CHECK(run({"--seed", "42"}).seed == 42);
  expect_error({"--seed", "-1"}, "--seed", "not a non-negative 64-bit integer");
  expect_error({"--seed", "18446744073709551616"}, "--seed", "not a non-negative 64-bit integer");

  auto o = run({"--out", "results/x", "--tuning-cache", "/tmp/t.json", "--no-check", "--format",
                "md,csv", "--format", "md", "--device", "3", "--list", "-v", "-vv", "--verbose",
                "--save-tensors", "dump", "--config", "configs/smoke.json"});
  CHECK(o.out == "results/x");
  CHECK(o.tuning_cache == "/tmp/t.json");
  CHECK_FALSE(o.check);
  CHECK(o.formats == std::vector<std::string>{"md", "csv"});
  CHECK(o.device == 3);
  CHECK(o.list);
  CHECK(run({"--dry-run"}).dry_run);
  CHECK(o.verbose == 4);
  CHECK(o.save_tensors == "dump");
  CHECK(o.config == "configs/smoke.json");
  CHECK(run({"--check"}).check);

  expect_error({"--check", "--no-check"}, "--check", "excludes");
  expect_error({"--format", "md,pdf"}, "--format", "unknown format \"pdf\"");
  expect_error({"--device", "-1"}, "--device", "not a non-negative integer");
  expect_error({"--device", "gpu0"}, "--device", "not a non-negative integer");
  expect_error({"--out", ""}, "--out", "empty directory name");
  expect_error({"--config", ""}, "--config", "empty file name");
}

TEST_CASE("compile-only names a known arch; jobs is a positive count", "[cli]") {
  const Options o = run({"--compile-only", "sm_90a", "-j", "4"});
  CHECK(o.compile_only == "sm_90a");
  CHECK(o.jobs == 4);
  CHECK(run({}).compile_only.empty());
  CHECK(run({}).jobs == 0);
  expect_error({"--compile-only", "sm_70"}, "--compile-only", "unknown arch \"sm_70\"");
  expect_error({"--jobs", "0"}, "--jobs", "");
}

TEST_CASE("profile mode launches once: no search, no check", "[cli]") {
  const Options o = run({"--profile", "--case", "causal"});
  CHECK(o.profile);
  CHECK_FALSE(o.check);
  CHECK(o.tune == TuneMode::none);
  CHECK_FALSE(run({}).profile);
  expect_error({"--profile", "--tune", "fast"}, "--profile", "drop --tune fast");
  expect_error({"--profile", "--check"}, "--profile", "drop --check");
}

TEST_CASE("unknown arguments name themselves", "[cli]") {
  expect_error({"--bogus"}, "--bogus", "");
  expect_error({"--N", "8192", "--fw"}, "--fw", "");
  expect_error({"stray"}, "stray", "");
  expect_error({"--list=yes"}, "--list", "takes no value");
  expect_error({"--dtype", "fp16", "--dtype", "bf16"}, "--dtype", "given more than once");
  expect_error({"--tune", "fast", "--tune", "max"}, "--tune", "given more than once");
}

TEST_CASE("an empty value is an error, never off or the default", "[cli]") {
  expect_error({"--compile-only", ""}, "--compile-only", "empty value");
  expect_error({"--save-tensors", ""}, "--save-tensors", "empty value");
  expect_error({"--tuning-cache", ""}, "--tuning-cache", "empty value");
  expect_error({"report", "r.json", "--out", ""}, "--out", "empty directory name");
}

TEST_CASE("modes that exclude each other are refused", "[cli]") {
  expect_error({"--list", "--dry-run"}, "--list", "excludes --dry-run");
  expect_error({"--dry-run", "--compile-only", "sm_90a"}, "--dry-run", "excludes --compile-only");
  expect_error({"--list", "--compile-only", "sm_90a"}, "--list", "excludes --compile-only");
}

TEST_CASE("numbers beyond 64 bits are too large, not malformed", "[cli]") {
  expect_error({"--N", "99999999999999999999"}, "--N", "is too large (at most 2147483647)");
  expect_error({"--jobs", "99999999999999999999"}, "--jobs", "is out of range 1..1024");
}

TEST_CASE("compare", "[cli]") {
  auto o = run({"compare", "a.json", "b.json", "--threshold", "2.5", "-v"});
  CHECK(o.command == Command::compare);
  CHECK(o.base_file == "a.json");
  CHECK(o.new_file == "b.json");
  CHECK(o.threshold == 2.5);
  CHECK(o.verbose == 1);
  CHECK(run({"compare", "a.json", "b.json"}).threshold == 5.0);
  expect_error({"compare", "a.json"}, "NEW.json", "");
  expect_error({"compare", "a.json", "b.json", "c.json"}, "c.json", "");
  expect_error({"compare", "a.json", "b.json", "--threshold", "-1"}, "--threshold", "must be >= 0");
  expect_error({"compare", "a.json", "b.json", "--D", "512"}, "--D", "");
  CHECK_FALSE(run({"compare", "a.json", "b.json"}).allow_different_gpus);
  CHECK(run({"compare", "a.json", "b.json", "--allow-different-gpus"}).allow_different_gpus);
}

TEST_CASE("report", "[cli]") {
  auto o = run({"report", "r.json", "--out", "rep", "--format", "md,png"});
  CHECK(o.command == Command::report);
  CHECK(o.report_file == "r.json");
  CHECK(o.out == "rep");
  CHECK(o.formats == std::vector<std::string>{"md", "png"});
  // Without --out, next to the results file (even when that is ffpa-out/).
  CHECK(run({"report", "r.json"}).out.empty());
  CHECK(run({"report", "r.json", "--out", "ffpa-out"}).out == "ffpa-out");
  CHECK(run({"report", "r.json"}).formats == std::vector<std::string>{"md", "csv", "png"});
  expect_error({"report"}, "RESULTS.json", "");
  expect_error({"report", "r.json", "--format", "svg"}, "--format", "unknown format");
  expect_error({"report", "r.json", "--format", "md,json"}, "--format", "json is report's input");
}

TEST_CASE("help and version print and stop", "[cli]") {
  CHECK_FALSE(parse({"--help"}).has_value());
  CHECK_FALSE(parse({"-h"}).has_value());
  CHECK_FALSE(parse({"--version"}).has_value());
  CHECK_FALSE(parse({"compare", "--help"}).has_value());
  CHECK_FALSE(parse({"report", "--help"}).has_value());
  // Help wins over errors elsewhere on the line, as users expect.
  CHECK_FALSE(parse({"--help", "--D", "0"}).has_value());
}

TEST_CASE("the command line is recorded, quoted where needed", "[cli]") {
  CHECK(run({"--case", "causal", "--N", "16384"}).command_line ==
        "ffpa-bench --case causal --N 16384");
  CHECK(run({"--out", "my dir", "--save-tensors", "it's"}).command_line ==
        "ffpa-bench --out 'my dir' --save-tensors 'it'\\''s'");
  CHECK(run({"compare", "a.json", "b.json"}).command_line == "ffpa-bench compare a.json b.json");
}
