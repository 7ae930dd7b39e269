// The cuDNN baseline's decisions that need no GPU: graph cache keys, bias shapes, version text,
// and what supports() may refuse without asking cuDNN.
#include <catch2/catch.hpp>

#include <array>
#include <regex>
#include <set>

#include "baselines/cudnn/cudnn_sdpa.hpp"
#include "gpu/cuda.hpp"
#include "runner/registry.hpp"

using namespace ffpa;

namespace {

Problem base() {
  Problem p;
  p.case_name = "self";
  p.shape = {2, 8, 4, 100, 300, 128};
  p.dtype = Dtype::bf16;
  return p;
}

}  // namespace

TEST_CASE("graph key ignores what only changes the data", "[cudnn]") {
  Problem a = base(), b = base();
  a.bias = b.bias = BiasKind::key;
  a.dropout = b.dropout = 0.1;
  b.case_name = "other";
  b.seed = 12345;
  b.bias_scale = 2.0;
  CHECK(cudnn::graph_key(a, Pass::fwd, false) == cudnn::graph_key(b, Pass::fwd, false));
  CHECK(cudnn::graph_key(a, Pass::bwd, true) == cudnn::graph_key(b, Pass::bwd, true));
}

TEST_CASE("graph key separates every field that changes the graph", "[cudnn]") {
  const Problem p = base();
  std::vector<std::pair<std::string, Problem>> variants;
  auto with = [&](const char* what, auto edit) {
    Problem q = p;
    edit(q);
    variants.emplace_back(what, q);
  };
  with("dtype", [](Problem& q) { q.dtype = Dtype::fp16; });
  with("B", [](Problem& q) { q.shape.B = 1; });
  with("Hq", [](Problem& q) { q.shape.Hq = 16; });
  with("Hkv", [](Problem& q) { q.shape.Hkv = 8; });
  with("Nq", [](Problem& q) { q.shape.Nq = 101; });
  with("Nkv", [](Problem& q) { q.shape.Nkv = 301; });
  with("D", [](Problem& q) { q.shape.D = 64; });
  with("causal br", [](Problem& q) { q.causal = Causal::bottom_right; });
  with("causal tl", [](Problem& q) { q.causal = Causal::top_left; });
  with("key bias", [](Problem& q) { q.bias = BiasKind::key; });
  with("qk bias", [](Problem& q) { q.bias = BiasKind::query_key; });
  with("full bias", [](Problem& q) { q.bias = BiasKind::full; });
  with("input-dtype bias", [](Problem& q) {
    q.bias = BiasKind::key;
    q.bias_dtype = BiasDtype::input;
  });
  with("dropout", [](Problem& q) { q.dropout = 0.1; });
  with("other dropout", [](Problem& q) { q.dropout = 0.2; });

  std::set<std::string> keys{cudnn::graph_key(p, Pass::fwd, false)};
  for (const auto& [what, q] : variants) {
    INFO(what);
    CHECK(keys.insert(cudnn::graph_key(q, Pass::fwd, false)).second);
  }
  CHECK(cudnn::graph_key(p, Pass::fwd, false) != cudnn::graph_key(p, Pass::bwd, false));
}

TEST_CASE("dBias is part of the key only for a backward with a bias", "[cudnn]") {
  Problem p = base();
  CHECK(cudnn::graph_key(p, Pass::bwd, true) == cudnn::graph_key(p, Pass::bwd, false));
  p.bias = BiasKind::query_key;
  CHECK(cudnn::graph_key(p, Pass::fwd, true) == cudnn::graph_key(p, Pass::fwd, false));
  CHECK(cudnn::graph_key(p, Pass::bwd, true) != cudnn::graph_key(p, Pass::bwd, false));
}

TEST_CASE("bias dims follow the broadcast shape", "[cudnn]") {
  Problem p = base();
  using A = std::array<int64_t, 4>;
  p.bias = BiasKind::key;
  CHECK(cudnn::bias_dims(p) == A{1, 1, 1, 300});
  p.bias = BiasKind::query_key;
  CHECK(cudnn::bias_dims(p) == A{1, 1, 100, 300});
  p.bias = BiasKind::full;
  CHECK(cudnn::bias_dims(p) == A{2, 8, 100, 300});
}

TEST_CASE("cuDNN version numbers read as major.minor.patch", "[cudnn]") {
  CHECK(cudnn::version_string(91900) == "9.19.0");
  CHECK(cudnn::version_string(91002) == "9.10.2");
  CHECK(cudnn::version_string(90100) == "9.1.0");
}

TEST_CASE("the baseline refuses only what is certain without cuDNN", "[cudnn]") {
  auto b = make_cudnn_baseline();
  CHECK(b->name() == "cudnn");
  const std::string load = cudnn::load_error();
  const Support s = b->supports(base(), Pass::bwd);
  CHECK(s.ok() == (load.empty() && gpu::available()));
  if (!load.empty()) {
    CHECK(s.reason.find("not loadable") != std::string::npos);
    CHECK(b->version().empty());
  } else {
    // Loading the library needs no GPU, so the version is known on any machine that has it.
    CHECK(std::regex_match(b->version(), std::regex(R"(\d+\.\d+\.\d+)")));
  }
  if (load.empty() && !gpu::available()) CHECK(s.reason == "no GPU");
  // A problem cuDNN will refuse (D=512 backward) is still "supported" here: cuDNN decides in
  // bind().
  Problem big = base();
  big.shape.D = 512;
  CHECK(b->supports(big, Pass::bwd).ok() == s.ok());
}

TEST_CASE("memory estimate before any graph is built", "[cudnn]") {
  auto b = make_cudnn_baseline();
  const Problem p = base();
  CHECK(b->extra_bytes(p, Pass::fwd) == 0);
  // At least the fp32 dQ accumulator of the backward.
  CHECK(b->extra_bytes(p, Pass::bwd) >= 2 * 8 * 100 * 128 * 4);
  // Dropout adds the device seed and offset.
  Problem drop = p;
  drop.dropout = 0.1;
  CHECK(b->extra_bytes(drop, Pass::fwd) > 0);
}

TEST_CASE("the registry lists the cuDNN baseline", "[cudnn]") {
  int n = 0;
  for (const auto& b : Registry::make().baselines) n += b->name() == "cudnn";
  CHECK(n == 1);
}
