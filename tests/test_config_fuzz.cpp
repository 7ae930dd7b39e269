// Mangled variants of configs/default.json must either load or fail with an InputError that points
// somewhere: never another exception, never a crash.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <regex>

#include "cases/cases.hpp"
#include "core/error.hpp"
#include "support.hpp"

using namespace ffpa;

namespace {

class Mangler {
 public:
  explicit Mangler(uint64_t seed) : rng_(seed) {}

  std::string operator()(std::string text) {
    const int edits = 1 + pick(2);
    for (int i = 0; i < edits && !text.empty(); ++i) {
      // Weighted towards edits that keep the JSON valid, so the validator sees most mutants.
      switch (pick(10)) {
        case 0:
          flip_byte(text);
          break;
        case 1:
          text.resize(pick(text.size()));
          break;
        case 2:
          delete_one_of(text, "{}[]");
          break;
        case 3:
          delete_one_of(text, ",:\"");
          break;
        case 4:
          duplicate_chunk(text);
          break;
        case 5:
        case 6:
          insert_key(text);
          break;
        default:
          swap_type(text);
          break;
      }
    }
    return text;
  }

 private:
  size_t pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }

  void flip_byte(std::string& t) {
    static const std::string interesting = "{}[]\",:0123456789-+./eE BHNDx\\\n\t";
    const size_t at = pick(t.size());
    t[at] = pick(2) ? interesting[pick(interesting.size())] : static_cast<char>(pick(256));
  }

  // Replaces one JSON value with a value of another type (or an awkward one of the same type).
  void swap_type(std::string& t) {
    static const std::regex value(
        R"("(?:[^"\\]|\\.)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null)");
    static const char* const replacements[] = {"\"x\"",
                                               "1",
                                               "-1",
                                               "0",
                                               "1.5",
                                               "true",
                                               "null",
                                               "[]",
                                               "{}",
                                               "\"N-1\"",
                                               "\"H/0\"",
                                               "1e400",
                                               "18446744073709551616",
                                               "-9223372036854775809",
                                               "\"fp8\"",
                                               "[\"fp16\"]",
                                               "{\"name\": \"z\"}",
                                               "\"\"",
                                               "\"N*99999999\"",
                                               "0.999999",
                                               "\"D+1\""};
    std::vector<std::pair<size_t, size_t>> spans;
    for (auto it = std::sregex_iterator(t.begin(), t.end(), value); it != std::sregex_iterator();
         ++it)
      spans.emplace_back(it->position(), it->length());
    if (spans.empty()) return;
    const auto [at, len] = spans[pick(spans.size())];
    t.replace(at, len, replacements[pick(std::size(replacements))]);
  }

  void delete_one_of(std::string& t, const char* chars) {
    std::vector<size_t> at;
    for (size_t i = 0; i < t.size(); ++i)
      if (std::strchr(chars, t[i])) at.push_back(i);
    if (!at.empty()) t.erase(at[pick(at.size())], 1);
  }

  void duplicate_chunk(std::string& t) {
    const size_t from = pick(t.size()), len = 1 + pick(40);
    const std::string chunk = t.substr(from, len);
    t.insert(pick(t.size() + 1), chunk);
  }

  void insert_key(std::string& t) {
    static const char* const keys[] = {"\"zz\": 1, ",      "\"name\": \"dup\", ",
                                       "\"Hkv\": 3, ",     "\"causal\": \"top_left\", ",
                                       "\"dropout\": 1, ", "\"mask_scale\": 0.5, ",
                                       "\"dtypes\": [], "};
    std::vector<size_t> at;
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i] == '{') at.push_back(i + 1);
    if (!at.empty()) t.insert(at[pick(at.size())], keys[pick(std::size(keys))]);
  }

  std::mt19937_64 rng_;
};

bool located(const InputError& e) {
  const std::string& p = e.path();
  return p.empty() || p[0] == '/' || p.rfind("line ", 0) == 0 || p.rfind("--", 0) == 0;
}

}  // namespace

TEST_CASE("mangled configs load or raise InputError, nothing else", "[cases][fuzz]") {
  const std::string original = test::read_file(test::source_dir() / "configs" / "default.json");
  REQUIRE(parse_case_file(original, "default.json").cases.size() == 8);

  Mangler mangle(20261202);
  int loaded = 0, rejected = 0, json_errors = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::string text = mangle(original);
    try {
      const CaseFile cf = parse_case_file(text, "fuzz.json");
      ++loaded;
      // What loads must also resolve at another sweep point without surprises.
      SweepPoint p = cf.defaults;
      p.N = 1 + static_cast<int64_t>(i % 5000);
      p.D = 8 * (1 + i % 130);
      for (const CaseSpec& c : cf.cases) {
        try {
          const Problem pr = resolve_case(cf, c, p, c.dtypes.front(), i);
          CHECK(pr.shape.Hq % pr.shape.Hkv == 0);
          CHECK(pr.shape.Nq > 0);
          CHECK(pr.flops(Pass::fwd) >= 0);
        } catch (const InputError& e) {
          if (!located(e)) FAIL_CHECK("unlocated error: " << e.what());
        }
      }
    } catch (const InputError& e) {
      ++rejected;
      json_errors += e.path().rfind("line ", 0) == 0;
      CHECK(e.where() == "fuzz.json");
      if (!located(e)) FAIL_CHECK("unlocated error: " << e.what() << "\n" << text);
    } catch (const std::exception& e) {
      FAIL_CHECK("unexpected " << typeid(e).name() << ": " << e.what() << "\n" << text);
    }
  }
  INFO("loaded " << loaded << ", rejected " << rejected << " (" << json_errors << " invalid JSON)");
  // The mangler must exercise both the JSON parser and the validator, and leave some files valid.
  CHECK(loaded > 50);
  CHECK(rejected - json_errors > 500);
  CHECK(json_errors > 500);
}
