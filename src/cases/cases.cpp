#include "cases/cases.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json_strict.hpp"

namespace ffpa {
namespace {

using json = nlohmann::ordered_json;

// One dimension; larger values are typos, and keep every product below int64 in __int128 checks.
constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;
// Elements of any one tensor (a full bias is B*Hq*Nq*Nkv): keeps byte counts far from overflow.
constexpr __int128 kMaxElems = __int128{1} << 50;

const char* const kCaseKeys[] = {"name", "description", "B",          "Hq",     "Hkv",
                                 "Nq",   "Nkv",         "D",          "dtypes", "causal",
                                 "bias", "bias_dtype",  "bias_scale", "dropout"};
// Keys of earlier versions of the case format, refused with their new names.
const std::pair<const char*, const char*> kRenamedCaseKeys[] = {
    {"mask", "bias"}, {"mask_dtype", "bias_dtype"}, {"mask_scale", "bias_scale"}};
const char* const kDefaultKeys[] = {"B", "H", "N", "D", "dtypes"};
const char* const kTopKeys[] = {"defaults", "cases", "description"};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Strict non-negative decimal: digits only, fits in kMaxDim.
std::optional<int64_t> parse_digits(const std::string& s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > kMaxDim) return std::nullopt;
  return v;
}

std::string json_type(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();
}

class Loader {
 public:
  explicit Loader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    throw InputError(file_, shown(path), reason);
  }

  // An integer beyond 64 bits reaches us as a double.
  void reject_huge(const json& j, const std::string& path) const {
    if (j.is_number_float() && std::abs(j.get<double>()) >= 0x1p63)
      fail(path, "too large (at most " + std::to_string(kMaxDim) + ")");
  }

  void check_keys(const json& obj, const std::string& path, const char* const* begin,
                  const char* const* end) const {
    for (const auto& item : obj.items()) {
      bool known = false;
      for (auto k = begin; k != end; ++k) known = known || item.key() == *k;
      if (known) continue;
      std::string valid;
      for (auto k = begin; k != end; ++k) valid += std::string(valid.empty() ? "" : ", ") + *k;
      fail(json_pointer(path, item.key()), "unknown key (valid: " + valid + ")");
    }
  }

  int64_t positive_int(const json& j, const std::string& path) const {
    reject_huge(j, path);
    if (!j.is_number_integer()) fail(path, "expected a positive integer, got " + json_type(j));
    if (j.is_number_unsigned()) {
      const uint64_t v = j.get<uint64_t>();
      if (v == 0) fail(path, "must be positive, got 0");
      if (v > static_cast<uint64_t>(kMaxDim))
        fail(path,
             "too large: " + std::to_string(v) + " (at most " + std::to_string(kMaxDim) + ")");
      return static_cast<int64_t>(v);
    }
    const int64_t v = j.get<int64_t>();
    if (v <= 0) fail(path, "must be positive, got " + std::to_string(v));
    if (v > kMaxDim)
      fail(path, "too large: " + std::to_string(v) + " (at most " + std::to_string(kMaxDim) + ")");
    return v;
  }

  SizeExpr size(const json& j, const std::string& path) const {
    if (j.is_number_integer()) {
      SizeExpr e;
      e.k = positive_int(j, path);
      e.text = std::to_string(e.k);
      return e;
    }
    reject_huge(j, path);
    if (!j.is_string())
      fail(path, "expected an integer or a size expression such as \"N-1\", got " + json_type(j));
    std::string why;
    auto e = parse_size_expr(j.get<std::string>(), &why);
    if (!e) fail(path, why);
    if (e->var == 0 && e->k <= 0) fail(path, "must be positive, got " + e->text);
    return *e;
  }

  std::string string(const json& j, const std::string& path) const {
    if (!j.is_string()) fail(path, "expected a string, got " + json_type(j));
    return j.get<std::string>();
  }

  double number(const json& j, const std::string& path) const {
    if (!j.is_number()) fail(path, "expected a number, got " + json_type(j));
    const double v = j.get<double>();
    if (!std::isfinite(v)) fail(path, "must be finite");
    return v;
  }

  template <class E>
  E choice(const json& j, const std::string& path, std::optional<E> (*parse)(const std::string&),
           const std::string& valid) const {
    const std::string s = string(j, path);
    auto e = parse(s);
    if (!e) fail(path, "unknown value \"" + s + "\" (valid: " + valid + ")");
    return *e;
  }

  std::vector<Dtype> dtypes(const json& j, const std::string& path) const {
    if (!j.is_array()) fail(path, "expected an array of dtypes, got " + json_type(j));
    if (j.empty()) fail(path, "must list at least one dtype");
    std::vector<Dtype> out;
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string p = path + "/" + std::to_string(i);
      const Dtype d = choice<Dtype>(j[i], p, parse_dtype, "fp16, bf16");
      for (Dtype seen : out)
        if (seen == d) fail(p, "duplicate dtype \"" + to_string(d) + "\"");
      out.push_back(d);
    }
    return out;
  }

  CaseFile load(const std::string& text) const {
    const json doc = parse_json_strict(text, file_);
    if (!doc.is_object()) fail("", "expected a JSON object with \"defaults\" and \"cases\"");
    check_keys(doc, "", std::begin(kTopKeys), std::end(kTopKeys));
    if (doc.contains("description")) string(doc["description"], "/description");

    CaseFile cf;
    cf.file = file_;
    if (!doc.contains("defaults")) fail("/defaults", "missing");
    const json& d = doc["defaults"];
    if (!d.is_object()) fail("/defaults", "expected an object, got " + json_type(d));
    check_keys(d, "/defaults", std::begin(kDefaultKeys), std::end(kDefaultKeys));
    for (const char* key : kDefaultKeys)
      if (!d.contains(key)) fail(std::string("/defaults/") + key, "missing");
    cf.defaults.B = positive_int(d["B"], "/defaults/B");
    cf.defaults.H = positive_int(d["H"], "/defaults/H");
    cf.defaults.N = positive_int(d["N"], "/defaults/N");
    cf.defaults.D = positive_int(d["D"], "/defaults/D");
    cf.dtypes = dtypes(d["dtypes"], "/defaults/dtypes");

    if (!doc.contains("cases")) fail("/cases", "missing");
    const json& cases = doc["cases"];
    if (!cases.is_array()) fail("/cases", "expected an array, got " + json_type(cases));
    if (cases.empty()) fail("/cases", "must list at least one case");
    for (size_t i = 0; i < cases.size(); ++i) {
      CaseSpec c = one_case(cases[i], "/cases/" + std::to_string(i), cf);
      c.index = static_cast<int>(i);
      if (const CaseSpec* other = cf.find(c.name))
        fail("/cases/" + std::to_string(i) + "/name", "duplicate case name \"" + c.name +
                                                          "\" (also /cases/" +
                                                          std::to_string(other->index) + ")");
      cf.cases.push_back(std::move(c));
    }
    // A file that loads must describe valid problems at its own defaults.
    for (const CaseSpec& c : cf.cases) resolve_case(cf, c, cf.defaults, c.dtypes.front(), 0);
    return cf;
  }

  CaseSpec one_case(const json& j, const std::string& path, const CaseFile& cf) const {
    if (!j.is_object()) fail(path, "expected an object, got " + json_type(j));
    for (const auto& [old_key, new_key] : kRenamedCaseKeys)
      if (j.contains(old_key))
        fail(json_pointer(path, old_key), std::string("renamed to \"") + new_key + "\"");
    check_keys(j, path, std::begin(kCaseKeys), std::end(kCaseKeys));
    CaseSpec c;
    if (!j.contains("name")) fail(path + "/name", "missing");
    c.name = string(j["name"], path + "/name");
    if (c.name.empty()) fail(path + "/name", "must not be empty");
    for (char ch : c.name) {
      const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '+';
      // Names go into --case lists, table rows and file names.
      if (!ok) fail(path + "/name", "\"" + c.name + "\" may use only letters, digits and -_.+");
    }
    if (j.contains("description")) c.description = string(j["description"], path + "/description");

    auto sized = [&](const char* key, const std::string& fallback) {
      if (j.contains(key)) return size(j[key], path + "/" + key);
      std::string why;
      return *parse_size_expr(fallback, &why);
    };
    c.B = sized("B", "B");
    c.Hq = sized("Hq", "H");
    c.Hkv = j.contains("Hkv") ? size(j["Hkv"], path + "/Hkv") : c.Hq;  // MHA unless told
    c.Nq = sized("Nq", "N");
    c.Nkv = sized("Nkv", "N");
    c.D = sized("D", "D");

    c.dtypes = j.contains("dtypes") ? dtypes(j["dtypes"], path + "/dtypes") : cf.dtypes;
    if (j.contains("causal"))
      c.causal = choice<Causal>(j["causal"], path + "/causal", parse_causal,
                                "none, bottom_right, top_left");
    if (j.contains("bias"))
      c.bias = choice<BiasKind>(j["bias"], path + "/bias", parse_bias_kind,
                                "none, key, query_key, full");
    // Bias settings without a bias are almost certainly a mistake in the file.
    if (j.contains("bias_dtype")) {
      c.bias_dtype =
          choice<BiasDtype>(j["bias_dtype"], path + "/bias_dtype", parse_bias_dtype, "fp32, input");
      if (c.bias == BiasKind::none) fail(path + "/bias_dtype", "given without a bias");
    }
    if (j.contains("bias_scale")) {
      c.bias_scale = number(j["bias_scale"], path + "/bias_scale");
      if (c.bias_scale < 0) fail(path + "/bias_scale", "must be >= 0");
      if (c.bias == BiasKind::none) fail(path + "/bias_scale", "given without a bias");
    }
    if (j.contains("dropout")) {
      c.dropout = number(j["dropout"], path + "/dropout");
      if (!(c.dropout >= 0 && c.dropout < 1))
        fail(path + "/dropout", "must be in [0, 1), got " + json(c.dropout).dump());
    }
    return c;
  }

 private:
  std::string file_;
};

std::string point_text(const SweepPoint& p) {
  std::string s = "B=" + std::to_string(p.B) + ", H=" + std::to_string(p.H) +
                  ", N=" + std::to_string(p.N) + ", D=" + std::to_string(p.D);
  if (p.Hkv) s += ", Hkv=" + std::to_string(*p.Hkv);
  if (p.Nq) s += ", Nq=" + std::to_string(*p.Nq);
  if (p.Nkv) s += ", Nkv=" + std::to_string(*p.Nkv);
  return s;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::optional<SizeExpr> parse_size_expr(const std::string& text, std::string* why) {
  const std::string t = trim(text);
  SizeExpr e;
  e.text = t;
  const std::string form =
      ": expected an integer or V, V+k, V-k, V*k, V/k with V one of B, H, N, D and k an integer";
  auto bad = [&]() -> std::optional<SizeExpr> {
    *why = "cannot parse size expression \"" + text + "\"" + form;
    return std::nullopt;
  };
  if (t.empty()) return bad();
  if (t[0] >= '0' && t[0] <= '9') {
    auto v = parse_digits(t);
    if (!v) return bad();
    e.k = *v;
    return e;
  }
  if (std::strchr("BHND", t[0]) == nullptr) return bad();
  e.var = t[0];
  const std::string rest = trim(t.substr(1));
  if (rest.empty()) return e;
  if (std::strchr("+-*/", rest[0]) == nullptr) return bad();
  e.op = rest[0];
  auto k = parse_digits(trim(rest.substr(1)));
  if (!k) return bad();
  if ((e.op == '/' || e.op == '*') && *k == 0) {
    *why = "cannot parse size expression \"" + text +
           "\": " + (e.op == '/' ? "division" : "product") + " by zero";
    return std::nullopt;
  }
  e.k = *k;
  return e;
}

std::optional<int64_t> eval_size(const SizeExpr& e, const SweepPoint& p, std::string* why) {
  if (e.var == 0) return e.k;
  const int64_t v = e.var == 'B' ? p.B : e.var == 'H' ? p.H : e.var == 'N' ? p.N : p.D;
  __int128 r = v;
  switch (e.op) {
    case '+':
      r = r + e.k;
      break;
    case '-':
      r = r - e.k;
      break;
    case '*':
      r = r * e.k;
      break;
    case '/':
      if (v % e.k != 0) {
        *why = e.text + " with " + std::string(1, e.var) + "=" + std::to_string(v) +
               " is not a whole number";
        return std::nullopt;
      }
      r = r / e.k;
      break;
    default:
      break;
  }
  if (r > kMaxDim) {
    *why = e.text + " with " + std::string(1, e.var) + "=" + std::to_string(v) + " is too large";
    return std::nullopt;
  }
  return static_cast<int64_t>(r);
}

const CaseSpec* CaseFile::find(const std::string& name) const {
  for (const CaseSpec& c : cases)
    if (c.name == name) return &c;
  return nullptr;
}

std::vector<std::string> CaseFile::names() const {
  std::vector<std::string> out;
  for (const CaseSpec& c : cases) out.push_back(c.name);
  return out;
}

CaseFile parse_case_file(const std::string& text, const std::string& file) {
  return Loader(file).load(text);
}

CaseFile load_case_file(const std::string& path) {
  std::string text;
  try {
    text = read_input_file(path, kMaxConfigBytes);
  } catch (const InputError& e) {
    throw InputError("command line", "--config", path + ": " + e.reason());
  }
  return parse_case_file(text, path);
}

Problem resolve_case(const CaseFile& cf, const CaseSpec& c, const SweepPoint& p, Dtype dtype,
                     uint64_t seed) {
  const std::string base = "/cases/" + std::to_string(c.index);
  const std::string at = " (case \"" + c.name + "\" at " + point_text(p) + ")";
  auto fail = [&](const std::string& field, const std::string& reason) {
    throw InputError(cf.file, base + (field.empty() ? "" : "/" + field), reason + at);
  };
  // A value forced from the command line is blamed on its flag, not on the file.
  auto fail_forced = [&](const char* flag, const std::string& reason) {
    throw InputError("command line", flag, reason + at + " in " + cf.file);
  };
  auto value = [&](const SizeExpr& e, const char* field) {
    std::string why;
    auto v = eval_size(e, p, &why);
    if (!v) fail(field, why);
    if (*v <= 0) fail(field, e.text + " must be positive, got " + std::to_string(*v));
    return *v;
  };

  Problem pr;
  pr.case_name = c.name;
  pr.dtype = dtype;
  pr.causal = c.causal;
  pr.bias = c.bias;
  pr.bias_dtype = c.bias_dtype;
  pr.bias_scale = c.bias_scale;
  pr.dropout = c.dropout;
  pr.seed = case_seed(seed, c.name);
  Shape& s = pr.shape;
  s.B = value(c.B, "B");
  s.Hq = value(c.Hq, "Hq");
  s.Hkv = p.Hkv ? *p.Hkv : value(c.Hkv, "Hkv");
  s.Nq = p.Nq ? *p.Nq : value(c.Nq, "Nq");
  s.Nkv = p.Nkv ? *p.Nkv : value(c.Nkv, "Nkv");
  s.D = value(c.D, "D");

  if (s.Hq % s.Hkv != 0) {
    const std::string why =
        "Hkv=" + std::to_string(s.Hkv) + " does not divide Hq=" + std::to_string(s.Hq);
    if (p.Hkv) fail_forced("--Hkv", why);
    fail("Hkv", why);
  }
  if (!HeadDims::allows(s.D)) fail("D", HeadDims::refusal(s.D));
  if (c.causal == Causal::bottom_right && s.Nq > s.Nkv) {
    const std::string why = "bottom_right causal needs Nq <= Nkv, got Nq=" + std::to_string(s.Nq) +
                            ", Nkv=" + std::to_string(s.Nkv) + " (the first rows would see no key)";
    if (p.Nq) fail_forced("--Nq", why);
    if (p.Nkv) fail_forced("--Nkv", why);
    fail("causal", why);
  }
  const __int128 q = __int128{s.B} * s.Hq * s.Nq * s.D;
  const __int128 kv = __int128{s.B} * s.Hkv * s.Nkv * s.D;
  const __int128 bias = c.bias == BiasKind::full        ? __int128{s.B} * s.Hq * s.Nq * s.Nkv
                        : c.bias == BiasKind::query_key ? __int128{s.Nq} * s.Nkv
                                                        : __int128{s.Nkv};
  if (q > kMaxElems || kv > kMaxElems || bias > kMaxElems)
    fail("", "tensors too large (more than 2^50 elements)");
  return pr;
}

uint64_t case_seed(uint64_t seed, const std::string& case_name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char ch : case_name) h = (h ^ ch) * 0x100000001b3ull;
  return splitmix64(splitmix64(seed) ^ h);
}

}  // namespace ffpa
