#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "cases/cases.hpp"
#include "core/error.hpp"
#include "support.hpp"

using namespace ffpa;
using nlohmann::json;
using test::thrown;

namespace {

const json kBase = json::parse(R"({
  "defaults": {"B": 1, "H": 32, "N": 8192, "D": 512, "dtypes": ["fp16", "bf16"]},
  "cases": [{"name": "a"}, {"name": "b", "Hkv": "H/4"}]
})");

// Loads kBase changed by `edit` and returns the error it must raise.
InputError load_error(const std::function<void(json&)>& edit) {
  json doc = kBase;
  edit(doc);
  INFO(doc.dump());
  return thrown([&] { parse_case_file(doc.dump(), "test.json"); });
}

void expect_error(const std::function<void(json&)>& edit, const std::string& path,
                  const std::string& reason) {
  const InputError e = load_error(edit);
  INFO(e.what());
  CHECK(e.where() == "test.json");
  CHECK(e.path() == path);
  CHECK_THAT(e.reason(), Catch::Contains(reason));
}

CaseFile load_config(const std::string& name) {
  return load_case_file((test::source_dir() / "configs" / name).string());
}

Problem at_defaults(const CaseFile& cf, const std::string& name, Dtype dtype = Dtype::bf16) {
  const CaseSpec* c = cf.find(name);
  REQUIRE(c != nullptr);
  return resolve_case(cf, *c, cf.defaults, dtype, 0);
}

}  // namespace

TEST_CASE("size expressions parse", "[cases]") {
  struct Row {
    const char* text;
    char var, op;
    int64_t k;
  };
  const Row rows[] = {{"N", 'N', 0, 0},     {"N-1", 'N', '-', 1}, {"H/4", 'H', '/', 4},
                      {"D*2", 'D', '*', 2}, {"B+3", 'B', '+', 3}, {" N - 1 ", 'N', '-', 1},
                      {"512", 0, 0, 512},   {"N-0", 'N', '-', 0}, {"H/ 8", 'H', '/', 8}};
  for (const Row& r : rows) {
    INFO(r.text);
    std::string why;
    auto e = parse_size_expr(r.text, &why);
    REQUIRE(e);
    CHECK(e->var == r.var);
    CHECK(e->op == r.op);
    CHECK(e->k == r.k);
  }
  for (const char* bad : {"", " ", "X", "n", "N-", "N--1", "N-1-1", "NN", "N%2", "-1", "1.5", "N/0",
                          "N*0", "N-1.5", "N-x", "4096*N", "H/4 heads", "99999999999"}) {
    INFO(bad);
    std::string why;
    CHECK_FALSE(parse_size_expr(bad, &why));
    CHECK_FALSE(why.empty());
  }
  std::string why;
  parse_size_expr("N/0", &why);
  CHECK_THAT(why, Catch::Contains("division by zero"));
  parse_size_expr("N--1", &why);
  CHECK_THAT(why, Catch::Contains("cannot parse size expression \"N--1\""));
}

TEST_CASE("size expressions evaluate against the sweep point", "[cases]") {
  SweepPoint p;
  p.B = 2;
  p.H = 32;
  p.N = 8192;
  p.D = 512;
  auto eval = [&](const char* text) {
    std::string why;
    auto e = parse_size_expr(text, &why);
    REQUIRE(e);
    auto v = eval_size(*e, p, &why);
    INFO(why);
    return v;
  };
  CHECK(eval("N") == 8192);
  CHECK(eval("N-1") == 8191);
  CHECK(eval("N+7") == 8199);
  CHECK(eval("H/4") == 8);
  CHECK(eval("D*2") == 1024);
  CHECK(eval("B") == 2);
  CHECK(eval("1024") == 1024);
  CHECK(eval("N-8192") == 0);  // positivity is the loader's check, with the JSON path
  CHECK_FALSE(eval("H/5"));
  CHECK_FALSE(eval("N*1000000"));

  std::string why;
  auto e = parse_size_expr("H/5", &why);
  eval_size(*e, p, &why);
  CHECK(why == "H/5 with H=32 is not a whole number");
}

TEST_CASE("default.json is the seed's eight cases", "[cases]") {
  const CaseFile cf = load_config("default.json");
  CHECK(cf.defaults.B == 1);
  CHECK(cf.defaults.H == 32);
  CHECK(cf.defaults.N == 8192);
  CHECK(cf.defaults.D == 512);
  CHECK(cf.names() == std::vector<std::string>{"self-attn", "cross-attn", "decode-attn", "gqa",
                                               "causal", "attn-mask", "dropout", "non-aligned"});
  struct Row {
    const char* name;
    Shape shape;
    Causal causal;
    BiasKind bias;
    double dropout;
  };
  const Row rows[] = {
      {"self-attn", {1, 32, 32, 8192, 8192, 512}, Causal::none, BiasKind::none, 0},
      {"cross-attn", {1, 32, 32, 1024, 8192, 512}, Causal::none, BiasKind::none, 0},
      {"decode-attn", {1, 32, 32, 1, 8192, 512}, Causal::none, BiasKind::none, 0},
      {"gqa", {1, 32, 8, 8192, 8192, 512}, Causal::none, BiasKind::none, 0},
      {"causal", {1, 32, 32, 8192, 8192, 512}, Causal::bottom_right, BiasKind::none, 0},
      {"attn-mask", {1, 32, 32, 8192, 8192, 512}, Causal::none, BiasKind::key, 0},
      {"dropout", {1, 32, 32, 8192, 8192, 512}, Causal::none, BiasKind::none, 0.1},
      {"non-aligned", {1, 8, 8, 8191, 8191, 512}, Causal::none, BiasKind::none, 0},
  };
  for (const Row& r : rows) {
    INFO(r.name);
    const CaseSpec* c = cf.find(r.name);
    REQUIRE(c);
    CHECK(c->dtypes == std::vector<Dtype>{Dtype::fp16, Dtype::bf16});
    const Problem p = at_defaults(cf, r.name, Dtype::fp16);
    CHECK(p.case_name == r.name);
    CHECK(p.shape == r.shape);
    CHECK(p.dtype == Dtype::fp16);
    CHECK(p.causal == r.causal);
    CHECK(p.bias == r.bias);
    CHECK(p.dropout == r.dropout);
    CHECK_FALSE(c->description.empty());
  }
  const Problem biased = at_defaults(cf, "attn-mask");
  CHECK(biased.bias_dtype == BiasDtype::fp32);
  CHECK(biased.bias_scale == 0.25);
  CHECK(biased.bias_elems() == 8192);  // [1,1,1,Nkv]
}

TEST_CASE("smoke.json and long.json", "[cases]") {
  const CaseFile smoke = load_config("smoke.json");
  std::set<BiasKind> biases;
  std::set<Causal> causal;
  bool dropout = false, gqa = false, decode = false;
  std::set<int64_t> dims;
  for (const CaseSpec& c : smoke.cases) {
    const Problem p = resolve_case(smoke, c, smoke.defaults, c.dtypes.front(), 0);
    biases.insert(p.bias);
    causal.insert(p.causal);
    dropout = dropout || p.dropout > 0;
    gqa = gqa || p.shape.group() > 1;
    decode = decode || p.shape.Nq == 1;
    dims.insert(p.shape.D);
    // Small enough for CI: well under a second of work for any kernel.
    CHECK(p.flops(Pass::bwd) < 1e11);
  }
  for (const char* kind : {"self-attn", "cross-attn", "decode-attn", "gqa", "causal", "attn-mask",
                           "dropout", "non-aligned"})
    CHECK(smoke.find(kind) != nullptr);
  CHECK(biases.count(BiasKind::query_key) == 1);
  CHECK(causal.count(Causal::top_left) == 1);
  CHECK((dropout && gqa && decode));
  CHECK(dims.size() >= 3);

  const CaseFile lng = load_config("long.json");
  std::set<int64_t> lengths;
  for (const CaseSpec& c : lng.cases)
    lengths.insert(resolve_case(lng, c, lng.defaults, Dtype::bf16, 0).shape.Nkv);
  CHECK(lengths.count(16384) == 1);
  CHECK(lengths.count(32768) == 1);
  for (const char* kind : {"self-attn", "cross-attn", "decode-attn", "gqa", "causal", "attn-mask",
                           "dropout", "non-aligned"})
    CHECK(lng.find(kind) != nullptr);
}

TEST_CASE("case defaults: omitted fields follow the sweep variables", "[cases]") {
  json doc = kBase;
  const CaseFile cf = parse_case_file(doc.dump(), "test.json");
  SweepPoint p = cf.defaults;
  p.B = 3;
  p.H = 16;
  p.N = 1000;
  p.D = 64;
  const Problem a = resolve_case(cf, cf.cases[0], p, Dtype::fp16, 7);
  CHECK(a.shape == Shape{3, 16, 16, 1000, 1000, 64});
  const Problem b = resolve_case(cf, cf.cases[1], p, Dtype::fp16, 7);
  CHECK(b.shape == Shape{3, 16, 4, 1000, 1000, 64});
  CHECK(a.causal == Causal::none);
  CHECK(a.bias == BiasKind::none);
  CHECK(a.dropout == 0);

  // Hkv defaults to Hq, whatever Hq is.
  doc["cases"][0]["Hq"] = "H/2";
  const CaseFile cf2 = parse_case_file(doc.dump(), "test.json");
  CHECK(resolve_case(cf2, cf2.cases[0], p, Dtype::fp16, 0).shape.Hkv == 8);

  // Forced fields replace the case's own.
  p.Hkv = 2;
  p.Nq = 1;
  p.Nkv = 77;
  CHECK(resolve_case(cf, cf.cases[1], p, Dtype::fp16, 0).shape == Shape{3, 16, 2, 1, 77, 64});
}

TEST_CASE("seeds: the same for every variant, different between cases", "[cases]") {
  CHECK(case_seed(0, "gqa") == case_seed(0, "gqa"));
  CHECK(case_seed(0, "gqa") != case_seed(0, "causal"));
  CHECK(case_seed(0, "gqa") != case_seed(1, "gqa"));
  const CaseFile cf = load_config("default.json");
  const Problem a = at_defaults(cf, "gqa", Dtype::fp16), b = at_defaults(cf, "gqa", Dtype::bf16);
  CHECK(a.seed == b.seed);
  CHECK(a.seed == case_seed(0, "gqa"));
  CHECK(at_defaults(cf, "causal").seed != a.seed);
}

TEST_CASE("structure errors name the JSON path", "[cases]") {
  expect_error([](json& d) { d["extra"] = 1; }, "/extra", "unknown key (valid: defaults, cases");
  expect_error([](json& d) { d["defaults"]["Nq"] = 1; }, "/defaults/Nq", "unknown key");
  expect_error([](json& d) { d["cases"][1]["Hkvv"] = 1; }, "/cases/1/Hkvv", "unknown key");
  expect_error([](json& d) { d["cases"][0]["a/b"] = 1; }, "/cases/0/a~1b", "unknown key");
  expect_error([](json& d) { d["description"] = 3; }, "/description", "expected a string");
  expect_error([](json& d) { d = json::array(); }, "/", "expected a JSON object");

  expect_error([](json& d) { d.erase("defaults"); }, "/defaults", "missing");
  expect_error([](json& d) { d["defaults"] = 1; }, "/defaults", "expected an object, got integer");
  expect_error([](json& d) { d["defaults"].erase("N"); }, "/defaults/N", "missing");
  expect_error([](json& d) { d["defaults"]["N"] = "8192"; }, "/defaults/N",
               "expected a positive integer, got string");
  expect_error([](json& d) { d["defaults"]["N"] = 8192.0; }, "/defaults/N",
               "expected a positive integer, got number");
  expect_error([](json& d) { d["defaults"]["N"] = 0; }, "/defaults/N", "must be positive, got 0");
  expect_error([](json& d) { d["defaults"]["B"] = -5; }, "/defaults/B", "must be positive, got -5");
  expect_error([](json& d) { d["defaults"]["N"] = 4294967296LL; }, "/defaults/N", "too large");
  expect_error([](json& d) { d["cases"][0]["Nq"] = 1e23; }, "/cases/0/Nq",
               "too large (at most 2147483647)");
  expect_error([](json& d) { d["defaults"]["N"] = 18446744073709551615ull; }, "/defaults/N",
               "too large");

  expect_error([](json& d) { d["defaults"]["dtypes"] = "fp16"; }, "/defaults/dtypes",
               "expected an array of dtypes, got string");
  expect_error([](json& d) { d["defaults"]["dtypes"] = json::array(); }, "/defaults/dtypes",
               "at least one dtype");
  expect_error(
      [](json& d) {
        d["defaults"]["dtypes"] = {"fp16", "fp8"};
      },
      "/defaults/dtypes/1", "unknown value \"fp8\" (valid: fp16, bf16)");
  expect_error(
      [](json& d) {
        d["defaults"]["dtypes"] = {"bf16", "bf16"};
      },
      "/defaults/dtypes/1", "duplicate dtype");
  expect_error([](json& d) { d["cases"][0]["dtypes"] = {1}; }, "/cases/0/dtypes/0",
               "expected a string, got integer");

  expect_error([](json& d) { d.erase("cases"); }, "/cases", "missing");
  expect_error([](json& d) { d["cases"] = json::object(); }, "/cases", "expected an array");
  expect_error([](json& d) { d["cases"] = json::array(); }, "/cases", "at least one case");
  expect_error([](json& d) { d["cases"][1] = "b"; }, "/cases/1", "expected an object, got string");
}

TEST_CASE("case field errors", "[cases]") {
  expect_error([](json& d) { d["cases"][1].erase("name"); }, "/cases/1/name", "missing");
  expect_error([](json& d) { d["cases"][1]["name"] = 2; }, "/cases/1/name", "expected a string");
  expect_error([](json& d) { d["cases"][1]["name"] = ""; }, "/cases/1/name", "must not be empty");
  expect_error([](json& d) { d["cases"][1]["name"] = "a b"; }, "/cases/1/name",
               "only letters, digits and -_.+");
  expect_error([](json& d) { d["cases"][1]["name"] = "a,b"; }, "/cases/1/name", "only letters");
  expect_error([](json& d) { d["cases"][1]["name"] = "a"; }, "/cases/1/name",
               "duplicate case name \"a\" (also /cases/0)");
  expect_error([](json& d) { d["cases"][0]["description"] = json::array(); },
               "/cases/0/description", "expected a string, got array");

  for (const char* key : {"B", "Hq", "Hkv", "Nq", "Nkv", "D"}) {
    INFO(key);
    const std::string path = std::string("/cases/0/") + key;
    expect_error([&](json& d) { d["cases"][0][key] = true; }, path,
                 "expected an integer or a size expression such as \"N-1\", got boolean");
    expect_error([&](json& d) { d["cases"][0][key] = 1.5; }, path, "got number");
    expect_error([&](json& d) { d["cases"][0][key] = nullptr; }, path, "got null");
    expect_error([&](json& d) { d["cases"][0][key] = "N--1"; }, path,
                 "cannot parse size expression \"N--1\"");
    expect_error([&](json& d) { d["cases"][0][key] = "Q"; }, path, "cannot parse");
    expect_error([&](json& d) { d["cases"][0][key] = 0; }, path, "must be positive, got 0");
    expect_error([&](json& d) { d["cases"][0][key] = -3; }, path, "must be positive, got -3");
    expect_error([&](json& d) { d["cases"][0][key] = "0"; }, path, "must be positive, got 0");
  }
  // Non-positive after resolution names the field and the sweep point.
  expect_error([](json& d) { d["cases"][0]["Nq"] = "N-8192"; }, "/cases/0/Nq",
               "N-8192 must be positive, got 0 (case \"a\" at B=1, H=32, N=8192, D=512)");
  expect_error([](json& d) { d["cases"][0]["Hq"] = "H/5"; }, "/cases/0/Hq",
               "H/5 with H=32 is not a whole number");
  expect_error([](json& d) { d["cases"][0]["Nkv"] = "N*1000000"; }, "/cases/0/Nkv", "too large");
}

TEST_CASE("the keys renamed from mask to bias are refused with their new name", "[cases]") {
  // Old spellings are bad input, named with the file and the JSON path, not silently ignored.
  expect_error([](json& d) { d["cases"][1]["mask"] = "key"; }, "/cases/1/mask",
               "renamed to \"bias\"");
  expect_error(
      [](json& d) {
        d["cases"][0]["bias"] = "key";
        d["cases"][0]["mask_dtype"] = "input";
      },
      "/cases/0/mask_dtype", "renamed to \"bias_dtype\"");
  expect_error(
      [](json& d) {
        d["cases"][0]["bias"] = "key";
        d["cases"][0]["mask_scale"] = 0.5;
      },
      "/cases/0/mask_scale", "renamed to \"bias_scale\"");
  const InputError e = load_error([](json& d) { d["cases"][0]["mask"] = "full"; });
  CHECK(std::string(e.what()) == "test.json: /cases/0/mask: renamed to \"bias\"");
  // The new keys load.
  json ok = kBase;
  ok["cases"][1]["bias"] = "full";
  ok["cases"][1]["bias_dtype"] = "input";
  ok["cases"][1]["bias_scale"] = 0.5;
  const CaseFile cf = parse_case_file(ok.dump(), "ok.json");
  const Problem p = resolve_case(cf, cf.cases[1], cf.defaults, Dtype::bf16, 0);
  CHECK(p.bias == BiasKind::full);
  CHECK(p.bias_dtype == BiasDtype::input);
  CHECK(p.bias_scale == 0.5);
}

TEST_CASE("problem validity errors", "[cases]") {
  expect_error([](json& d) { d["cases"][1]["Hkv"] = 5; }, "/cases/1/Hkv",
               "Hkv=5 does not divide Hq=32");
  expect_error([](json& d) { d["cases"][0]["Hkv"] = "H*2"; }, "/cases/0/Hkv",
               "Hkv=64 does not divide Hq=32");
  expect_error([](json& d) { d["cases"][0]["D"] = 100; }, "/cases/0/D",
               "D=100 must be a multiple of 8 in 32..1024");
  expect_error([](json& d) { d["cases"][0]["D"] = 24; }, "/cases/0/D", "D=24 must be");
  expect_error([](json& d) { d["cases"][0]["D"] = 1032; }, "/cases/0/D", "D=1032 must be");
  expect_error([](json& d) { d["cases"][0]["D"] = "D+1"; }, "/cases/0/D", "D=513 must be");
  expect_error(
      [](json& d) {
        d["cases"][0]["causal"] = "bottom_right";
        d["cases"][0]["Nq"] = "N+1";
      },
      "/cases/0/causal", "bottom_right causal needs Nq <= Nkv, got Nq=8193, Nkv=8192");
  expect_error([](json& d) { d["cases"][0]["causal"] = "bottom-right"; }, "/cases/0/causal",
               "unknown value \"bottom-right\" (valid: none, bottom_right, top_left)");
  expect_error([](json& d) { d["cases"][0]["causal"] = true; }, "/cases/0/causal",
               "expected a string, got boolean");
  expect_error([](json& d) { d["cases"][0]["bias"] = "row"; }, "/cases/0/bias",
               "unknown value \"row\" (valid: none, key, query_key, full)");
  expect_error(
      [](json& d) {
        d["cases"][0]["bias"] = "key";
        d["cases"][0]["bias_dtype"] = "fp16";
      },
      "/cases/0/bias_dtype", "unknown value \"fp16\" (valid: fp32, input)");
  expect_error([](json& d) { d["cases"][0]["bias_dtype"] = "fp32"; }, "/cases/0/bias_dtype",
               "given without a bias");
  expect_error([](json& d) { d["cases"][0]["bias_scale"] = 0.5; }, "/cases/0/bias_scale",
               "given without a bias");
  expect_error(
      [](json& d) {
        d["cases"][0]["bias"] = "key";
        d["cases"][0]["bias_scale"] = -1;
      },
      "/cases/0/bias_scale", "must be >= 0");
  expect_error(
      [](json& d) {
        d["cases"][0]["bias"] = "key";
        d["cases"][0]["bias_scale"] = "0.25";
      },
      "/cases/0/bias_scale", "expected a number, got string");
  expect_error([](json& d) { d["cases"][0]["dropout"] = 1.0; }, "/cases/0/dropout",
               "must be in [0, 1), got 1.0");
  expect_error([](json& d) { d["cases"][0]["dropout"] = -0.1; }, "/cases/0/dropout",
               "must be in [0, 1)");
  expect_error([](json& d) { d["cases"][0]["dropout"] = "0.1"; }, "/cases/0/dropout",
               "expected a number, got string");
  expect_error(
      [](json& d) {
        d["cases"][0]["B"] = 1000;
        d["cases"][0]["Hq"] = 10000;
        d["cases"][0]["Hkv"] = 10000;
        d["cases"][0]["Nq"] = 2000000;
      },
      "/cases/0", "tensors too large");
  expect_error(
      [](json& d) {
        d["cases"][0]["bias"] = "full";
        d["defaults"]["B"] = 64;
        d["defaults"]["N"] = 1 << 20;
      },
      "/cases/0", "tensors too large");

  // The valid neighbours of those errors load.
  json ok = kBase;
  ok["cases"][0]["causal"] = "top_left";
  ok["cases"][0]["Nq"] = "N+1";  // top-left allows Nq > Nkv
  ok["cases"][0]["bias"] = "query_key";
  ok["cases"][0]["bias_dtype"] = "input";
  ok["cases"][0]["bias_scale"] = 0;
  ok["cases"][0]["dropout"] = 0.999;
  ok["cases"][0]["D"] = 1024;
  ok["cases"][1]["D"] = 32;
  ok["description"] = "ok";
  const CaseFile cf = parse_case_file(ok.dump(), "ok.json");
  const Problem p = resolve_case(cf, cf.cases[0], cf.defaults, Dtype::bf16, 0);
  CHECK(p.causal == Causal::top_left);
  CHECK(p.bias == BiasKind::query_key);
  CHECK(p.bias_dtype == BiasDtype::input);
  CHECK(p.bias_scale == 0);
  CHECK(p.dropout == 0.999);
}

TEST_CASE("forced fields are blamed on their flag", "[cases]") {
  json doc = kBase;
  doc["cases"][0]["causal"] = "bottom_right";
  const CaseFile cf = parse_case_file(doc.dump(), "test.json");
  SweepPoint p = cf.defaults;
  p.Hkv = 5;
  InputError e = thrown([&] { resolve_case(cf, cf.cases[1], p, Dtype::fp16, 0); });
  CHECK(e.where() == "command line");
  CHECK(e.path() == "--Hkv");
  CHECK_THAT(e.reason(), Catch::Contains("Hkv=5 does not divide Hq=32 (case \"b\""));
  CHECK_THAT(e.reason(), Catch::Contains("test.json"));

  p = cf.defaults;
  p.Nq = 9000;
  e = thrown([&] { resolve_case(cf, cf.cases[0], p, Dtype::fp16, 0); });
  CHECK(e.path() == "--Nq");
  CHECK_THAT(e.reason(), Catch::Contains("bottom_right causal needs Nq <= Nkv"));
  p = cf.defaults;
  p.Nkv = 100;
  e = thrown([&] { resolve_case(cf, cf.cases[0], p, Dtype::fp16, 0); });
  CHECK(e.path() == "--Nkv");

  // A swept D the file's cases cannot take is blamed on the case's D, naming the point.
  p = cf.defaults;
  p.D = 100;
  e = thrown([&] { resolve_case(cf, cf.cases[0], p, Dtype::fp16, 0); });
  CHECK(e.where() == "test.json");
  CHECK(e.path() == "/cases/0/D");
  CHECK_THAT(e.reason(), Catch::Contains("D=100 must be a multiple of 8 in 32..1024 (case \"a\" "
                                         "at B=1, H=32, N=8192, D=100)"));
}

TEST_CASE("file errors", "[cases]") {
  const InputError e = thrown([] { parse_case_file("{\n  \"defaults\": {,\n}", "bad.json"); });
  CHECK(e.where() == "bad.json");
  CHECK(e.path() == "line 2, column 16");
  CHECK_THAT(e.reason(), Catch::Contains("invalid JSON"));

  const InputError empty = thrown([] { parse_case_file("", "empty.json"); });
  CHECK(empty.path() == "line 1, column 1");

  const InputError trailing = thrown([] { parse_case_file("{}\n\n  x", "t.json"); });
  CHECK(trailing.path() == "line 3, column 3");

  // Numbers beyond double range are a parse failure too, located at the number.
  const InputError huge = thrown([] { parse_case_file("{\"defaults\":\n 1e400}", "h.json"); });
  CHECK(huge.path() == "line 2, column 2");
  CHECK_THAT(huge.reason(), Catch::Contains("invalid JSON"));

  // A key given twice would silently keep the last value: refused at its pointer.
  const InputError dup = thrown([] {
    parse_case_file(R"({"defaults": {"B": 1, "B": 2, "H": 1, "N": 8, "D": 64}, "cases": []})",
                    "dup.json");
  });
  CHECK(dup.path() == "/defaults/B");
  CHECK(dup.reason() == "duplicate key");

  const InputError missing = thrown([] { load_case_file("/nonexistent/cases.json"); });
  CHECK(missing.where() == "command line");
  CHECK(missing.path() == "--config");
  CHECK_THAT(missing.reason(), Catch::Contains("/nonexistent/cases.json: cannot open"));
  const InputError dir_error = thrown([] { load_case_file(test::source_dir().string()); });
  CHECK_THAT(dir_error.reason(), Catch::EndsWith("is a directory, not a file"));

  test::TempDir dir;
  test::write_file(dir.path() / "c.json", kBase.dump());
  CHECK(load_case_file((dir.path() / "c.json").string()).cases.size() == 2);
  test::write_file(dir.path() / "d.json", "{\"cases\": 1");
  const InputError truncated = thrown([&] { load_case_file((dir.path() / "d.json").string()); });
  CHECK(truncated.where() == (dir.path() / "d.json").string());
  CHECK(truncated.path() == "line 1, column 12");
}
