#include "core/types.hpp"

#include <algorithm>
#include <cmath>

namespace ffpa {
namespace {

template <class E, size_t N>
std::optional<E> lookup(const std::pair<E, const char*> (&table)[N], const std::string& s) {
  for (const auto& [e, name] : table)
    if (s == name) return e;
  return std::nullopt;
}

template <class E, size_t N>
std::string name_of(const std::pair<E, const char*> (&table)[N], E e) {
  for (const auto& [v, name] : table)
    if (v == e) return name;
  return "?";
}

const std::pair<Dtype, const char*> kDtypes[] = {{Dtype::fp16, "fp16"}, {Dtype::bf16, "bf16"}};
const std::pair<Pass, const char*> kPasses[] = {{Pass::fwd, "fwd"}, {Pass::bwd, "bwd"}};
const std::pair<Causal, const char*> kCausal[] = {
    {Causal::none, "none"}, {Causal::bottom_right, "bottom_right"}, {Causal::top_left, "top_left"}};
const std::pair<BiasKind, const char*> kBiasKinds[] = {{BiasKind::none, "none"},
                                                       {BiasKind::key, "key"},
                                                       {BiasKind::query_key, "query_key"},
                                                       {BiasKind::full, "full"}};
const std::pair<BiasDtype, const char*> kBiasDtypes[] = {{BiasDtype::fp32, "fp32"},
                                                         {BiasDtype::input, "input"}};
const std::pair<BaselineId, const char*> kBaselines[] = {{BaselineId::unfused, "unfused"},
                                                         {BaselineId::cudnn, "cudnn"}};

}  // namespace

std::string to_string(Dtype e) {
  return name_of(kDtypes, e);
}
std::string to_string(Pass e) {
  return name_of(kPasses, e);
}
std::string to_string(Causal e) {
  return name_of(kCausal, e);
}
std::string to_string(BiasKind e) {
  return name_of(kBiasKinds, e);
}
std::string to_string(BiasDtype e) {
  return name_of(kBiasDtypes, e);
}
std::string to_string(BaselineId e) {
  return name_of(kBaselines, e);
}

std::optional<Dtype> parse_dtype(const std::string& s) {
  return lookup(kDtypes, s);
}
std::optional<Pass> parse_pass(const std::string& s) {
  return lookup(kPasses, s);
}
std::optional<Causal> parse_causal(const std::string& s) {
  return lookup(kCausal, s);
}
std::optional<BiasKind> parse_bias_kind(const std::string& s) {
  return lookup(kBiasKinds, s);
}
std::optional<BiasDtype> parse_bias_dtype(const std::string& s) {
  return lookup(kBiasDtypes, s);
}
std::optional<BaselineId> parse_baseline_id(const std::string& s) {
  return lookup(kBaselines, s);
}

int dtype_bytes(Dtype) {
  return 2;
}

std::string HeadDims::refusal(int64_t D) {
  auto n = [](int64_t v) { return std::to_string(v); };
  return "D=" + n(D) + " must be a multiple of " + n(step) + " in " + n(min) + ".." + n(max);
}

double Problem::scale() const {
  return 1.0 / std::sqrt(static_cast<double>(shape.D));
}

double Problem::pairs() const {
  const int64_t nq = shape.Nq, nkv = shape.Nkv;
  if (causal == Causal::none) return static_cast<double>(nq) * static_cast<double>(nkv);
  // Row r sees min(Nkv, max(0, r + shift + 1)) keys; sum it in closed form over the rows where
  // the count grows linearly, then add the saturated rows.
  const int64_t shift = causal == Causal::bottom_right ? nkv - nq : 0;
  double total = 0;
  // Rows with r + shift + 1 in [1, Nkv): r in [max(0, -shift), Nkv - shift - 1).
  const int64_t lo = std::max<int64_t>(0, -shift);
  const int64_t hi = std::min<int64_t>(nq, nkv - shift - 1);  // exclusive
  if (hi > lo) {
    const double a = static_cast<double>(lo + shift + 1),
                 b = static_cast<double>(hi - 1 + shift + 1);
    total += (a + b) * static_cast<double>(hi - lo) / 2.0;
  }
  const int64_t full_from = std::max<int64_t>(lo, hi);  // rows seeing all Nkv keys
  if (nq > full_from) total += static_cast<double>(nq - full_from) * static_cast<double>(nkv);
  return total;
}

double Problem::flops(Pass pass) const {
  const double fwd = 4.0 * static_cast<double>(shape.B) * static_cast<double>(shape.Hq) *
                     static_cast<double>(shape.D) * pairs();
  return pass == Pass::fwd ? fwd : 2.5 * fwd;
}

int64_t Problem::bias_elems() const {
  switch (bias) {
    case BiasKind::none:
      return 0;
    case BiasKind::key:
      return shape.Nkv;
    case BiasKind::query_key:
      return shape.Nq * shape.Nkv;
    case BiasKind::full:
      return shape.B * shape.Hq * shape.Nq * shape.Nkv;
  }
  return 0;
}

int64_t Problem::io_bytes(Pass pass) const {
  const int64_t e = dtype_bytes(dtype);
  const int64_t q = shape.B * shape.Hq * shape.Nq * shape.D * e;
  const int64_t kv = shape.B * shape.Hkv * shape.Nkv * shape.D * e;
  const int64_t lse = shape.B * shape.Hq * shape.Nq * 4;
  const int64_t bias_bytes = bias_elems() * (bias_dtype == BiasDtype::fp32 ? 4 : e);
  if (pass == Pass::fwd) return 2 * q + 2 * kv + lse + bias_bytes;  // q, k, v in; o, lse out
  // q, k, v, o, dO, lse in; dq, dk, dv (and dbias) out
  return 3 * q + 2 * kv + lse + q + 2 * kv + 2 * bias_bytes;
}

std::optional<int64_t> knob(const Knobs& knobs, const std::string& name) {
  for (const auto& [k, v] : knobs)
    if (k == name) return v;
  return std::nullopt;
}

std::string to_string(const Knobs& knobs) {
  std::string s;
  for (const auto& [k, v] : knobs) {
    if (!s.empty()) s += ',';
    s += k + '=' + std::to_string(v);
  }
  return s;
}

}  // namespace ffpa
