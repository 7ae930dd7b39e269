// Random command lines must either parse and plan (then render a dry run) or fail with an
// InputError that names a flag, an argument or a file: never another exception, never a crash.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "cli/listing.hpp"
#include "cli/options.hpp"
#include "core/error.hpp"
#include "plan/plan.hpp"
#include "runner/runner.hpp"
#include "support.hpp"

using namespace ffpa;

namespace {

const std::vector<std::string> kFlags = {"--fwd",
                                         "--bwd",
                                         "--no-fwd",
                                         "--no-bwd",
                                         "--case",
                                         "--config",
                                         "--B",
                                         "--H",
                                         "--Hkv",
                                         "--N",
                                         "--Nq",
                                         "--Nkv",
                                         "--D",
                                         "--dtype",
                                         "--tune",
                                         "--variant",
                                         "--baseline",
                                         "--cold",
                                         "--hot",
                                         "--min-samples",
                                         "--max-noise",
                                         "--min-time",
                                         "--timeout",
                                         "--seed",
                                         "--out",
                                         "--tuning-cache",
                                         "--check",
                                         "--no-check",
                                         "--format",
                                         "--device",
                                         "--list",
                                         "--dry-run",
                                         "--compile-only",
                                         "-j",
                                         "-v",
                                         "--save-tensors",
                                         "--threshold",
                                         "--allow-different-gpus",
                                         "--bogus",
                                         "-",
                                         "--",
                                         "--list=yes"};

const std::vector<std::string> kValues = {"1",
                                          "0",
                                          "-1",
                                          "8192",
                                          "512",
                                          "100",
                                          "1,2,3",
                                          "8,,16",
                                          "",
                                          " 512",
                                          "0x200",
                                          "1e3",
                                          "99999999999999999999",
                                          "2147483648",
                                          "nan",
                                          "inf",
                                          "fp16",
                                          "bf16",
                                          "both",
                                          "fp8",
                                          "fast",
                                          "max",
                                          "none",
                                          "all",
                                          "best",
                                          "cudnn",
                                          "self-attn",
                                          "gqa,causal",
                                          "bogus",
                                          "sm_90a",
                                          "sm_80",
                                          "sm_75",
                                          "md,csv",
                                          "json",
                                          "xml",
                                          "ffpa-fwd-sm80",
                                          "ffpa-bwd-sm90",
                                          "configs/smoke.json",
                                          "configs/default.json",
                                          "missing.json",
                                          "run",
                                          "compare",
                                          "report",
                                          "a.json",
                                          "=",
                                          "\xff\xfe",
                                          "-5",
                                          "4096,8192"};

}  // namespace

TEST_CASE("random command lines parse and plan, or name what is wrong", "[cli][fuzz]") {
  std::mt19937_64 rng(20261203);
  auto pick = [&](const std::vector<std::string>& v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  const Registry reg = Registry::make();
  int planned = 0, rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::string> args;
    const int n = std::uniform_int_distribution<int>(0, 6)(rng);
    for (int k = 0; k < n; ++k) {
      args.push_back(pick(kFlags));
      if (rng() % 4 != 0) args.push_back(pick(kValues));
    }
    // Most lines stay dry runs: nothing here may touch a GPU or compile.
    if (rng() % 8 != 0) args.push_back("--dry-run");
    std::vector<const char*> argv = {"ffpa-bench"};
    for (const auto& a : args) argv.push_back(a.c_str());
    std::string line;
    for (const auto& a : args) line += " '" + a + "'";
    INFO(line);
    try {
      const auto opts = parse_cli(static_cast<int>(argv.size()), argv.data());
      REQUIRE(opts);  // --help and --version are not in the vocabulary
      if (opts->command != Command::run || !opts->dry_run) continue;
      // What ffpa-bench checks before a dry run.
      const Plan plan = make_plan(*opts, *opts);
      CHECK(plan.items.size() <= static_cast<size_t>(kMaxPlanItems));
      for (const Variant* v : selected_variants(reg, opts->variants))
        if (opts->tune != TuneMode::none) variant_grid(*v);
      const std::string text = render_dry_run(plan, reg);
      CHECK_FALSE(text.empty());
      ++planned;
    } catch (const InputError& e) {
      ++rejected;
      const bool named = !e.path().empty() && !e.reason().empty();
      if (!named) FAIL_CHECK("unnamed error: " << e.what());
    } catch (const std::exception& e) {
      FAIL_CHECK("unexpected " << typeid(e).name() << ": " << e.what());
    }
  }
  INFO("planned " << planned << ", rejected " << rejected);
  CHECK(planned > 100);
  CHECK(rejected > 1000);
}
