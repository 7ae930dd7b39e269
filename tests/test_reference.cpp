// Host tests: Philox against Random123's vectors and the dropout mapping samples, the .npy
// reader/writer, the CPU double reference against every oracle case (and against finite
// differences where the oracle has no case: dropout, per-query bias, empty causal rows), and the
// unfused baseline's support and memory answers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "baselines/unfused.hpp"
#include "core/npy.hpp"
#include "philox.cuh"
#include "reference/cpu_reference.hpp"
#include "support.hpp"

using namespace ffpa;
using nlohmann::json;

namespace {

json load_json(const std::filesystem::path& p) {
  return json::parse(test::read_file(p));
}

std::vector<double> widen(const std::vector<float>& f) {
  return {f.begin(), f.end()};
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// max |a - b| / max(1e-3, max|b|).
double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m / std::max(1e-3, max_abs(b));
}

Problem problem(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nkv, int64_t D) {
  Problem p;
  p.shape = {B, Hq, Hkv, Nq, Nkv, D};
  return p;
}

std::vector<double> randn(size_t n, std::mt19937_64& rng, double scale = 1.0) {
  std::normal_distribution<double> d(0.0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

HostAttnInputs random_inputs(const Problem& p, std::mt19937_64& rng) {
  const Shape& s = p.shape;
  HostAttnInputs in;
  in.q = randn(static_cast<size_t>(s.B * s.Hq * s.Nq * s.D), rng);
  in.k = randn(static_cast<size_t>(s.B * s.Hkv * s.Nkv * s.D), rng);
  in.v = randn(in.k.size(), rng);
  in.bias = randn(static_cast<size_t>(p.bias_elems()), rng, 0.5);
  in.dout = randn(in.q.size(), rng);
  in.dropout_seed = 0x1234567890abcdefull;
  in.dropout_offset = 8;
  return in;
}

// L = sum(o * dout): its gradient is what the backward returns.
double loss(const Problem& p, HostAttnInputs in) {
  const std::vector<double> dout = std::move(in.dout);
  in.dout.clear();
  const HostAttnOutputs o = cpu_attention(p, in);
  double l = 0;
  for (size_t i = 0; i < o.o.size(); ++i) l += o.o[i] * dout[i];
  return l;
}

void check_gradient(const Problem& p, const HostAttnInputs& in,
                    std::vector<double> HostAttnInputs::*x, const std::vector<double>& grad) {
  REQUIRE(grad.size() == (in.*x).size());
  const double h = 1e-5;
  double worst = 0;
  for (size_t i = 0; i < grad.size(); ++i) {
    HostAttnInputs a = in, b = in;
    (a.*x)[i] += h;
    (b.*x)[i] -= h;
    const double fd = (loss(p, a) - loss(p, b)) / (2 * h);
    worst = std::max(worst, std::fabs(fd - grad[i]));
  }
  CHECK(worst <= 1e-6 * std::max(1.0, max_abs(grad)));
}

}  // namespace

TEST_CASE("Philox4x32-10 matches the Random123 known answers", "[philox]") {
  const json kat = load_json(test::testdata_dir() / "philox_kat.json");
  REQUIRE(kat["philox4x32_10"].size() >= 3);
  for (const json& v : kat["philox4x32_10"]) {
    FfpaPhilox4 c;
    for (int i = 0; i < 4; ++i) c.x[i] = v["ctr"][i].get<unsigned>();
    const FfpaPhilox4 r =
        ffpa_philox4x32_10(c, v["key"][0].get<unsigned>(), v["key"][1].get<unsigned>());
    for (int i = 0; i < 4; ++i) CHECK(r.x[i] == v["expect"][i].get<unsigned>());
  }
}

TEST_CASE("dropout mapping matches every sample of philox_kat.json", "[philox]") {
  const json kat = load_json(test::testdata_dir() / "philox_kat.json");
  REQUIRE(kat["dropout_mapping"].size() >= 20);
  for (const json& m : kat["dropout_mapping"]) {
    const auto seed = m["seed"].get<unsigned long long>(),
               off = m["offset"].get<unsigned long long>(),
               e = m["element"].get<unsigned long long>();
    const float p = m["p"].get<float>();
    const float u = ffpa_dropout_uniform(seed, off, e);
    INFO("seed " << seed << " offset " << off << " element " << e);
    CHECK(std::fabs(u - m["uniform"].get<double>()) <= 1e-7);
    CHECK(ffpa_dropout_keep(seed, off, e, p) == m["keep"].get<bool>());
    FfpaDropoutStream s;
    s.init(seed);
    CHECK(s.uniform(off + e) == u);
  }
}

// The kernels keep an element iff its word >= ffpa_keep_min(p); the definition is u(word) > p.
// u is non-decreasing in the word, so the two agree on every word iff they agree at the boundary.
TEST_CASE("ffpa_keep_min is the boundary of u(x) > p", "[philox]") {
  CHECK(ffpa_keep_min(0.f) == 0u);
  for (float p : {1e-12f, 0.01f, 0.1f, 0.1234567f, 0.2f, 0.5f, 0.75f, 0.9f, 0.999f, 0.99999994f}) {
    INFO("p " << p);
    const unsigned k = ffpa_keep_min(p);
    CHECK(ffpa_uniform(k) > p);
    if (k > 0) CHECK_FALSE(ffpa_uniform(k - 1) > p);
    CHECK(std::fabs(k * 0x1p-32 - p) < 1e-6);
  }
  // Monotone: a sample of words on both sides of the boundary and across the range.
  std::mt19937 rng(7);
  for (float p : {0.1f, 0.5f}) {
    const unsigned k = ffpa_keep_min(p);
    for (int i = 0; i < 100000; ++i) {
      const unsigned x = static_cast<unsigned>(rng());
      CHECK((x >= k) == (ffpa_uniform(x) > p));
      const unsigned y = k - 512 + static_cast<unsigned>(i % 1024);
      CHECK((y >= k) == (ffpa_uniform(y) > p));
    }
  }
}

TEST_CASE("the stream walker equals per-element Philox across block boundaries", "[philox]") {
  FfpaDropoutStream s;
  s.init(99);
  for (unsigned long long g = 3; g < 40; ++g)
    CHECK(s.uniform(g) == ffpa_dropout_uniform(99, 3, g - 3));
  // Uniforms lie in (0, 1]: the conversion never yields 0.
  CHECK(ffpa_uniform(0u) > 0.f);
  CHECK(ffpa_uniform(0xffffffffu) <= 1.f);
}

TEST_CASE("npy writer and reader round-trip shapes and values", "[npy]") {
  test::TempDir dir;
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{5}, std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{1, 1, 1, 7}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> data(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) data[i] = 0.5f * static_cast<float>(i) - 3.25f;
    const auto path = dir.path() / "x.npy";
    write_npy(path, shape, data.data());
    const std::string raw = test::read_file(path);
    CHECK((raw.find('\n') + 1) % 64 == 0);  // header padded to 64 bytes
    const NpyArray a = read_npy(path);
    CHECK(a.shape == shape);
    CHECK(a.data == data);
  }
}

TEST_CASE("npy reader rejects what it cannot read", "[npy]") {
  test::TempDir dir;
  test::write_file(dir.path() / "bad.npy", "not numpy");
  CHECK_THROWS_AS(read_npy(dir.path() / "bad.npy"), RunError);
  CHECK_THROWS_AS(read_npy(dir.path() / "missing.npy"), RunError);
  std::string h = "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }";
  h += std::string(64 - (10 + h.size() + 1) % 64, ' ') + "\n";
  std::string f =
      std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(h.size()) + '\0' + h + "abcd";
  test::write_file(dir.path() / "int.npy", f);
  CHECK_THROWS_AS(read_npy(dir.path() / "int.npy"), RunError);
}

TEST_CASE("CPU reference matches every oracle case", "[reference][oracle]") {
  const auto root = test::testdata_dir() / "oracle";
  const json index = load_json(root / "index.json");
  REQUIRE(index["cases"].size() >= 14);
  for (const json& c : index["cases"]) {
    const std::string name = c["name"];
    SECTION(name) {
      Problem p = problem(c["B"], c["Hq"], c["Hkv"], c["Nq"], c["Nkv"], c["D"]);
      const std::string causal = c["causal"], bias = c["bias"];
      p.causal = causal == "none"           ? Causal::none
                 : causal == "bottom-right" ? Causal::bottom_right
                                            : Causal::top_left;
      REQUIRE((causal == "none" || causal == "bottom-right" || causal == "top-left"));
      p.bias = bias == "none"   ? BiasKind::none
               : bias == "key"  ? BiasKind::key
               : bias == "full" ? BiasKind::query_key
                                : BiasKind::full;
      REQUIRE((bias == "none" || bias == "key" || bias == "full" || bias == "bhqk"));
      CHECK(p.scale() == Approx(c["scale"].get<double>()).epsilon(1e-12));
      auto load = [&](const char* f) { return read_npy(root / name / (std::string(f) + ".npy")); };
      HostAttnInputs in;
      in.q = widen(load("q").data);
      in.k = widen(load("k").data);
      in.v = widen(load("v").data);
      in.dout = widen(load("do").data);
      if (p.bias != BiasKind::none) {
        const NpyArray b = load("bias");
        CHECK(b.size() == p.bias_elems());
        in.bias = widen(b.data);
      }
      const HostAttnOutputs out = cpu_attention(p, in);
      // The oracle is float64 truth stored in float32: agreement to float32 rounding.
      const double tol = 5e-7;
      CHECK(rel_err(out.o, widen(load("o").data)) <= tol);
      CHECK(rel_err(out.lse, widen(load("lse").data)) <= tol);
      CHECK(rel_err(out.dq, widen(load("dq").data)) <= tol);
      CHECK(rel_err(out.dk, widen(load("dk").data)) <= tol);
      CHECK(rel_err(out.dv, widen(load("dv").data)) <= tol);
      if (p.bias != BiasKind::none) CHECK(rel_err(out.dbias, widen(load("dbias").data)) <= tol);
    }
  }
}

TEST_CASE("CPU reference gradients match finite differences", "[reference]") {
  std::mt19937_64 rng(7);
  struct Case {
    const char* name;
    Problem p;
  };
  std::vector<Case> cases;
  {
    Problem p = problem(1, 4, 2, 5, 6, 8);  // GQA, dropout, per-query bias
    p.dropout = 0.3;
    p.bias = BiasKind::query_key;
    cases.push_back({"gqa dropout query_key bias", p});
  }
  {
    Problem p = problem(2, 2, 1, 7, 4, 4);  // Nq > Nkv bottom-right: rows 0..2 see no key
    p.causal = Causal::bottom_right;
    p.bias = BiasKind::full;
    p.dropout = 0.5;
    cases.push_back({"empty causal rows, full bias", p});
  }
  {
    Problem p = problem(1, 2, 2, 6, 9, 4);
    p.causal = Causal::top_left;
    p.bias = BiasKind::key;
    cases.push_back({"top-left causal, key bias", p});
  }
  for (const Case& c : cases) {
    SECTION(c.name) {
      const HostAttnInputs in = random_inputs(c.p, rng);
      const HostAttnOutputs g = cpu_attention(c.p, in);
      check_gradient(c.p, in, &HostAttnInputs::q, g.dq);
      check_gradient(c.p, in, &HostAttnInputs::k, g.dk);
      check_gradient(c.p, in, &HostAttnInputs::v, g.dv);
      check_gradient(c.p, in, &HostAttnInputs::bias, g.dbias);
    }
  }
}

TEST_CASE("CPU reference: empty causal rows, dropout mask and GQA semantics", "[reference]") {
  std::mt19937_64 rng(3);
  Problem p = problem(1, 2, 1, 6, 3, 4);
  p.causal = Causal::bottom_right;  // row i sees keys j <= i - 3
  HostAttnInputs in = random_inputs(p, rng);
  HostAttnOutputs out = cpu_attention(p, in);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 6; ++i) {
      const double lse = out.lse[h * 6 + i];
      if (i < 3) {
        CHECK(std::isinf(lse));
        CHECK(lse < 0);
        for (int64_t d = 0; d < 4; ++d) CHECK(out.o[(h * 6 + i) * 4 + d] == 0.0);
      } else {
        CHECK(std::isfinite(lse));
      }
    }
  // Row 3 sees only key 0: o = v[0] exactly, without dropout.
  for (int64_t d = 0; d < 4; ++d) CHECK(out.o[3 * 4 + d] == Approx(in.v[d]));

  // With dropout, each output row is sum_j p_j * keep_j / (1 - p) * v_j over the Philox mask.
  Problem q = problem(1, 1, 1, 3, 50, 1);
  q.dropout = 0.25;
  HostAttnInputs a = random_inputs(q, rng);
  a.q.assign(a.q.size(), 0.0);  // uniform attention: p_j = 1/50
  a.v.assign(a.v.size(), 1.0);
  const HostAttnOutputs d = cpu_attention(q, a);
  for (int64_t i = 0; i < 3; ++i) {
    int kept = 0;
    for (int64_t j = 0; j < 50; ++j)
      kept += ffpa_dropout_keep(a.dropout_seed, a.dropout_offset, i * 50 + j, 0.25f);
    CHECK(d.o[i] == Approx(kept / 50.0 / 0.75));
    CHECK(kept < 50);
  }
}

TEST_CASE("unfused baseline: support answers and memory estimates", "[unfused]") {
  auto b = make_unfused_baseline();
  CHECK(b->name() == "unfused");
  Problem p = problem(1, 32, 32, 8192, 8192, 512);
  CHECK(b->supports(p, Pass::fwd).ok());
  CHECK(b->supports(p, Pass::bwd).ok());
  const int64_t ws = 32 << 20;
  const int64_t scores = int64_t{32} * 8192 * 8192 * 2;
  CHECK(unfused_extra_bytes(p, Pass::fwd) == scores + ws);
  const int64_t o = int64_t{32} * 8192 * 512 * 2, lse = int64_t{32} * 8192 * 4;
  CHECK(unfused_extra_bytes(p, Pass::bwd) == 2 * scores + o + lse + ws);
  CHECK(b->extra_bytes(p, Pass::bwd) == unfused_extra_bytes(p, Pass::bwd));
  Problem d = p;
  d.dropout = 0.1;
  CHECK(unfused_extra_bytes(d, Pass::fwd) == unfused_extra_bytes(p, Pass::fwd));
  CHECK(unfused_extra_bytes(d, Pass::bwd) == unfused_extra_bytes(p, Pass::bwd) + scores);
  // Rows pad to 8 elements; GQA does not change the score memory (it is per query head).
  Problem odd = problem(1, 32, 8, 8191, 8191, 512);
  CHECK(unfused_extra_bytes(odd, Pass::fwd) == int64_t{32} * 8191 * 8192 * 2 + ws);
  Problem kb = p;
  kb.bias = BiasKind::key;
  CHECK(unfused_extra_bytes(kb, Pass::bwd) == unfused_extra_bytes(p, Pass::bwd) + 8192 * 4);
  Problem qk = p;
  qk.bias = BiasKind::query_key;
  CHECK(unfused_extra_bytes(qk, Pass::bwd) ==
        unfused_extra_bytes(p, Pass::bwd) + int64_t{8192} * 8192 * 4);
  Problem full = p;
  full.bias = BiasKind::full;
  CHECK(unfused_extra_bytes(full, Pass::bwd) == unfused_extra_bytes(p, Pass::bwd));
  // Decode: one query row per head.
  Problem dec = problem(1, 32, 32, 1, 8192, 512);
  CHECK(unfused_extra_bytes(dec, Pass::fwd) == int64_t{32} * 8192 * 2 + ws);
  Problem sure = p;
  sure.dropout = 1.0;
  CHECK_FALSE(b->supports(sure, Pass::fwd).ok());
}
