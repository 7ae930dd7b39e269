#include "tuning/grid.hpp"

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json_strict.hpp"

namespace ffpa {
namespace {

using json = nlohmann::ordered_json;

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string type_name(const json& j) {
  if (j.is_number_float()) return "a non-integer number";
  const std::string t = j.type_name();
  return (t == "array" || t == "object" ? "an " : "a ") + t;
}

// A non-empty list of distinct integers.
std::vector<int64_t> int_list(const json& j, const std::string& where, const std::string& at) {
  if (!j.is_array())
    throw InputError(where, at, "expected a list of integers, got " + type_name(j));
  if (j.empty()) throw InputError(where, at, "empty list: give at least one value");
  std::vector<int64_t> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& v = j[i];
    const std::string vat = json_pointer(at, i);
    if (!v.is_number_integer())
      throw InputError(where, vat, "expected an integer, got " + type_name(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw InputError(where, vat, "out of range");
    const int64_t x = v.get<int64_t>();
    if (std::find(out.begin(), out.end(), x) != out.end())
      throw InputError(where, vat, "duplicate value " + std::to_string(x));
    out.push_back(x);
  }
  return out;
}

const json& member(const json& root, const char* key, const std::string& where) {
  if (!root.contains(key)) throw InputError(where, json_pointer("", key), "missing");
  return root[key];
}

}  // namespace

std::vector<std::string> Grid::knob_names() const {
  std::vector<std::string> names;
  for (const auto& k : knobs) names.push_back(k.name);
  return names;
}

Grid parse_grid(const std::string& text, const std::string& where) {
  const json root = parse_json_strict(text, where);
  if (!root.is_object())
    throw InputError(where, "/",
                     "expected an object with variant, knobs and fast, got " + type_name(root));
  for (const auto& [key, value] : root.items())
    if (key != "variant" && key != "knobs" && key != "fast" && key != "comment")
      throw InputError(where, json_pointer("", key),
                       "unknown key (expected variant, knobs, fast, comment)");

  Grid g;
  g.file = where;
  const json& variant = member(root, "variant", where);
  if (!variant.is_string() || variant.get<std::string>().empty())
    throw InputError(where, "/variant", "expected the variant's name, a non-empty string");
  g.variant = variant.get<std::string>();
  if (root.contains("comment")) {
    if (!root["comment"].is_string())
      throw InputError(where, "/comment", "expected a string, got " + type_name(root["comment"]));
    g.comment = root["comment"].get<std::string>();
  }

  const json& knobs = member(root, "knobs", where);
  if (!knobs.is_object())
    throw InputError(where, "/knobs",
                     "expected an object knob -> list of values, got " + type_name(knobs));
  if (knobs.empty()) throw InputError(where, "/knobs", "no knobs: a grid tunes at least one");
  for (const auto& [name, values] : knobs.items()) {
    const std::string at = json_pointer("/knobs", name);
    if (!is_identifier(name))
      throw InputError(where, at, "knob names are identifiers ([A-Za-z_][A-Za-z0-9_]*)");
    GridKnob k;
    k.name = name;
    k.values = int_list(values, where, at);
    g.knobs.push_back(std::move(k));
  }

  const json& fast = member(root, "fast", where);
  if (!fast.is_object())
    throw InputError(where, "/fast",
                     "expected an object knob -> subset of its values, got " + type_name(fast));
  for (const auto& [name, values] : fast.items()) {
    const std::string at = json_pointer("/fast", name);
    auto it = std::find_if(g.knobs.begin(), g.knobs.end(),
                           [&](const GridKnob& k) { return k.name == name; });
    if (it == g.knobs.end()) throw InputError(where, at, "not a knob declared in /knobs");
    it->fast = int_list(values, where, at);
    for (size_t i = 0; i < it->fast.size(); ++i)
      if (std::find(it->values.begin(), it->values.end(), it->fast[i]) == it->values.end())
        throw InputError(where, json_pointer(at, i),
                         std::to_string(it->fast[i]) + " is not among the values of " +
                             json_pointer("/knobs", name));
  }
  for (auto& k : g.knobs)
    if (k.fast.empty()) k.fast = k.values;  // a knob fast does not narrow keeps every value

  if (grid_size(g, TuneMode::max) > kMaxGridPoints)
    throw InputError(where, "/knobs",
                     "more than " + std::to_string(kMaxGridPoints) + " configurations in max mode");
  return g;
}

Grid load_grid(const std::string& path) {
  return parse_grid(read_input_file(path, kMaxConfigBytes), path);
}

Grid load_variant_grid(const std::string& variant, const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / (variant + ".json")).string();
  if (!std::filesystem::exists(path))
    throw InputError(path, "/", "no tuning grid for variant " + variant);
  Grid g = load_grid(path);
  if (g.variant != variant)
    throw InputError(path, "/variant",
                     "is \"" + g.variant + "\", but the file is the grid of \"" + variant + "\"");
  return g;
}

int64_t grid_size(const Grid& g, TuneMode mode) {
  if (mode == TuneMode::none) return 0;
  int64_t n = 1;
  for (const auto& k : g.knobs) {
    const auto m = static_cast<int64_t>(mode == TuneMode::fast ? k.fast.size() : k.values.size());
    n = n > kMaxGridPoints ? n : n * m;  // saturates instead of overflowing
  }
  return n;
}

std::vector<Knobs> grid_points(const Grid& g, TuneMode mode) {
  std::vector<Knobs> out;
  if (mode == TuneMode::none || g.knobs.empty()) return out;
  auto values = [&](const GridKnob& k) -> const std::vector<int64_t>& {
    return mode == TuneMode::fast ? k.fast : k.values;
  };
  std::vector<size_t> idx(g.knobs.size(), 0);  // odometer, last knob fastest
  while (true) {
    Knobs p;
    for (size_t i = 0; i < g.knobs.size(); ++i)
      p.emplace_back(g.knobs[i].name, values(g.knobs[i])[idx[i]]);
    out.push_back(std::move(p));
    size_t i = g.knobs.size();
    while (i > 0) {
      --i;
      if (++idx[i] < values(g.knobs[i]).size()) break;
      idx[i] = 0;
      if (i == 0) return out;
    }
  }
}

Support check_grid_matches(const Grid& g, const std::vector<std::string>& knob_names) {
  const std::vector<std::string> have = g.knob_names();
  if (have == knob_names) return Support::yes();
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return "[" + s + "]";
  };
  return Support::no(g.file + " declares knobs " + join(have) + " but variant " + g.variant +
                     " has " + join(knob_names) + " (same names, same order)");
}

}  // namespace ffpa
