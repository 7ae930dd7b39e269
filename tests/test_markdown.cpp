// Markdown report (report/markdown) against goldens in every baseline mode, and the seed's table
// format.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "report/csv.hpp"
#include "report/markdown.hpp"
#include "report_support.hpp"

using namespace ffpa;

TEST_CASE("markdown matches the goldens in every baseline mode", "[markdown]") {
  const Results res = test::sample_results();
  test::check_golden("report_best.md", render_markdown(res, BaselineMode::best));
  test::check_golden("report_cudnn.md", render_markdown(res, BaselineMode::cudnn));
  test::check_golden("report_unfused.md", render_markdown(res, BaselineMode::unfused));
  test::check_golden("report_all.md", render_markdown(res, BaselineMode::all));
  test::check_golden("report_none.md", render_markdown(res, BaselineMode::none));
}

TEST_CASE("markdown keeps the seed's table format", "[markdown]") {
  const Results res = test::sample_results();
  const std::string md = render_markdown(res, BaselineMode::best);
  CHECK(md.rfind("## Benchmark\n\nEnv: NVIDIA H200, B=1, N=8192 (also 8191), H=32 (also 8), "
                 "D=512 (also 1024).\n",
                 0) == 0);
  CHECK(md.find("### Forward Pass (ffpa-fwd-sm90, ffpa-fwd-sm80)\n") != std::string::npos);
  CHECK(md.find("### Backward Pass (ffpa-bwd-sm90)\n") != std::string::npos);
  CHECK(md.find("| Case | dtype | Nq/Nkv | FFPA / best baseline | TFLOPS | speedup |") !=
        std::string::npos);
  // 11.42 ms against the faster baseline (unfused, 16.00 ms): 385T / 275T, 1.40x.
  CHECK(md.find("| self-attn | fp16 | 8192/8192 | 11.42 / 16.00 ms (unfused) | 385T / 275T | "
                "1.40x |") != std::string::npos);
  CHECK(md.find("| causal (bottom-right) | bf16 |") != std::string::npos);
  CHECK(md.find("| non-aligned [H=8] | bf16 | 8191/8191 |") != std::string::npos);
  CHECK(md.find("| gqa [Hkv=8] |") != std::string::npos);
  CHECK(md.find(
            "| self-attn [D=1024] | bf16 | 8192/8192 | – / 40.20 ms (unfused) | – / 219T | – |") !=
        std::string::npos);
  CHECK(md.find("| n/a (needs Nq >= 64) / 0.0934 ms (cuDNN) |") != std::string::npos);
  CHECK(md.find("FAIL (max err 3.1e-02 > 7.8e-03 on o) / 16.60 ms (unfused)") != std::string::npos);
  CHECK(md.find("dropout \\| bias") != std::string::npos);  // '|' escaped in a cell
  CHECK(md.find("Partial") == std::string::npos);

  Results partial = res;
  partial.complete = false;
  CHECK(render_markdown(partial, BaselineMode::best).find("**Partial results**") !=
        std::string::npos);
  CHECK(render_markdown(res, BaselineMode::cudnn).find("| FFPA / cuDNN |") != std::string::npos);
  const std::string all = render_markdown(res, BaselineMode::all);
  CHECK(all.find("| Case | dtype | Nq/Nkv | FFPA | cuDNN | vs cuDNN | unfused | vs unfused |") !=
        std::string::npos);
  CHECK(render_markdown(res, BaselineMode::none)
            .find("| Case | dtype | Nq/Nkv | FFPA | TFLOPS |\n") != std::string::npos);
}

TEST_CASE("markdown of a run with one shape and of an empty run", "[markdown]") {
  Results res = test::sample_results();
  res.rows.resize(2);
  CHECK(render_markdown(res, BaselineMode::best)
            .find("Env: NVIDIA H200, B=1, N=8192, H=32, D=512.\n") != std::string::npos);
  res.rows.clear();
  const std::string md = render_markdown(res, BaselineMode::best);
  CHECK(md.find("Env: NVIDIA H200.\n") != std::string::npos);
  CHECK(md.find("###") == std::string::npos);
}

TEST_CASE("a pass's other FFPA variants are listed under the chosen one", "[markdown][csv]") {
  Results res = test::sample_results();
  Row& r = res.rows[0];
  REQUIRE(r.ffpa);
  Measurement other = *r.ffpa;
  other.impl = "ffpa-fwd-sm80";
  other.timing.median_ms = 0.0777;
  r.ffpa_others.push_back(other);
  const std::string md = render_markdown(res, BaselineMode::best);
  const size_t details = md.find("### Details");
  REQUIRE(details != std::string::npos);
  const size_t chosen = md.find("| " + r.ffpa->impl + " |", details);
  const size_t second = md.find("| ffpa-fwd-sm80 | ok | 0.0777 |", details);
  CHECK(chosen != std::string::npos);
  CHECK(second != std::string::npos);
  CHECK(chosen < second);
  const auto lines = [](const std::string& t) { return std::count(t.begin(), t.end(), '\n'); };
  CHECK(lines(render_csv(res)) == lines(render_csv(test::sample_results())) + 1);
  CHECK(render_csv(res).find(",0.0777,") != std::string::npos);
}
