// Mutates JSON text for the fuzz tests: byte flips, truncation, deleted brackets and quotes,
// duplicated chunks, inserted keys, and values swapped for values of another type. Weighted
// towards edits that keep the JSON valid, so the validators see most mutants.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <regex>
#include <string>
#include <vector>

namespace ffpa::test {

class Mangler {
 public:
  // keys: "\"name\": value, " snippets that insert_key puts at the start of an object.
  Mangler(uint64_t seed, std::vector<std::string> keys) : rng_(seed), keys_(std::move(keys)) {}

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
    std::vector<size_t> at;
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i] == '{') at.push_back(i + 1);
    if (!at.empty() && !keys_.empty()) t.insert(at[pick(at.size())], keys_[pick(keys_.size())]);
  }

  std::mt19937_64 rng_;
  std::vector<std::string> keys_;
};

}  // namespace ffpa::test
