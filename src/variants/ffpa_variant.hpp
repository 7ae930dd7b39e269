// What the FFPA kernel families (src/variants/ffpa_*.cpp) share: knob tables, feature codes,
// NVRTC defines, the resource check, tensor alignment and the spill refusal; and FfpaVariant, the
// Variant over one family, made from the traits struct at the end of the family's .cpp.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/types.hpp"
#include "gpu/cuda.hpp"
#include "gpu/nvrtc.hpp"
#include "params.h"
#include "variants/op.hpp"

namespace ffpa::ffpa_family {

// D padded to whole chunks of Kd columns (the kernels zero-fill the padding).
// Keys every (batch, kv head) of a decode kernel sees (kernels/ffpa_decode_ring.cuh's
// visible_keys): all of Nkv, or up to the last key a causal row sees.
inline int64_t decode_visible_keys(const Problem& pr) {
  const auto& s = pr.shape;
  if (pr.causal == Causal::none) return s.Nkv;
  const int64_t last = s.Nq - 1 + (pr.causal == Causal::bottom_right ? s.Nkv - s.Nq : 0);
  return std::min(last + 1, s.Nkv);
}

inline int padded_d(int D, int Kd) {
  return (D + Kd - 1) / Kd * Kd;
}

inline std::string define(const char* name, int v) {
  return std::string("-D") + name + "=" + std::to_string(v);
}
inline std::vector<std::string> define_all(
    std::initializer_list<std::pair<const char*, int>> macros) {
  std::vector<std::string> out;
  for (const auto& [name, v] : macros) out.push_back(define(name, v));
  return out;
}

// A family's knobs, in the order of its grid file: the knob's name (the grid file's spelling),
// the Config member it sets, and whether the kernel receives it as the macro FFPA_<NAME> (the
// name in upper case, see knob_defines): one spelling from the grid file to the kernel.
template <class C>
struct Knob {
  const char* name;
  int C::*member;
  bool macro = true;  // false: the host alone reads it (a count resolved at bind time)
};

template <class C, size_t N>
std::vector<std::string> knob_names(const Knob<C> (&table)[N]) {
  std::vector<std::string> names;
  for (const Knob<C>& k : table) names.push_back(k.name);
  return names;
}
// Missing knobs keep the Config's defaults.
template <class C, size_t N>
C read_knobs(const Knob<C> (&table)[N], const Knobs& knobs) {
  C c;
  for (const Knob<C>& k : table)
    if (auto x = knob(knobs, k.name)) c.*k.member = static_cast<int>(*x);
  return c;
}
template <class C, size_t N>
Knobs knobs_of(const Knob<C> (&table)[N], const C& c) {
  Knobs out;
  for (const Knob<C>& k : table) out.emplace_back(k.name, c.*k.member);
  return out;
}
// -DFFPA_<NAME>=value for every knob the kernel reads, in table order.
template <class C, size_t N>
std::vector<std::string> knob_defines(const Knob<C> (&table)[N], const C& c) {
  std::vector<std::string> out;
  for (const Knob<C>& k : table) {
    if (!k.macro) continue;
    std::string macro = "FFPA_";
    for (const char* p = k.name; *p; ++p)
      macro += static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
    out.push_back(define(macro.c_str(), c.*k.member));
  }
  return out;
}

// FFPA_CAUSAL: 0 none, 1 bottom-right, 2 top-left. FFPA_BIAS: 0 none, 1 fp32, 2 input dtype.
inline int causal_code(const Problem& p) {
  return p.causal == Causal::bottom_right ? 1 : p.causal == Causal::top_left ? 2 : 0;
}
inline int bias_code(const Problem& p) {
  return p.bias == BiasKind::none ? 0 : p.bias_dtype == BiasDtype::fp32 ? 1 : 2;
}

// The end of a configuration check: shared memory and estimated registers against the device's
// limits (65536 registers a block, 255 a thread).
inline Support check_resources(int smem, int smem_limit, int threads, int regs) {
  auto s = [](int v) { return std::to_string(v); };
  if (smem > smem_limit)
    return Support::no("needs " + s(smem) + " bytes of shared memory, the device allows " +
                       s(smem_limit));
  const int reg_limit = std::min(255, 65536 / threads);
  if (regs > reg_limit)
    return Support::no("needs about " + s(regs) + " registers a thread, the limit is " +
                       s(reg_limit));
  return Support::yes();
}

// Whether ptr is aligned to `elems` 2-byte elements and every stride is a multiple of it.
inline bool aligned(const void* ptr, std::initializer_list<long long> strides, int elems) {
  if (reinterpret_cast<uintptr_t>(ptr) % (elems * 2)) return false;
  for (long long st : strides)
    if (st % elems) return false;
  return true;
}

// Whether q, k, v (16-byte cp.async rows: 8 elements) and o (`o_elems`-element stores) of the
// forward parameters are aligned.
inline bool qkvo_aligned(const FfpaFwdParams& p, int o_elems) {
  return aligned(p.q, {p.q_batch_stride, p.q_head_stride, p.q_row_stride}, 8) &&
         aligned(p.k, {p.k_batch_stride, p.k_head_stride, p.k_row_stride}, 8) &&
         aligned(p.v, {p.v_batch_stride, p.v_head_stride, p.v_row_stride}, 8) &&
         aligned(p.o, {p.o_batch_stride, p.o_head_stride, p.o_row_stride}, o_elems);
}

// A launch grid of x * y * z blocks; throws Unsupported past CUDA's limits (2^31 - 1, 65535,
// 65535).
// The last wave's split: a grid of `units` work units of equal work (CTAs or clusters), `slots` of
// them resident at once, ends with units % slots units while the other SMs idle. Those units run
// as `pieces` ranges of their `steps` steps each (key-block pairs of a forward query block, query
// tiles of a backward key tile), whose partial results a second kernel merges (pieces = 1: no
// split). A piece is charged one step beyond its own (its prologue and the fp32 partial); the plan
// splits only where that saves at least a quarter of a unit's time, and ties take fewer pieces.
// Causal units differ in work: the kernels plan none there.
struct Tail {
  int64_t from;  // the first split unit
  int pieces;
};
inline Tail plan_tail(int64_t units, int64_t slots, int steps) {
  const int64_t rem = slots > 0 ? units % slots : 0;
  Tail best{units, 1};
  if (rem == 0 || steps < 2) return best;
  // In units' times: the last wave unsplit takes 1; split in s, ceil(rem s / slots) waves of
  // pieces of ceil(steps / s) + 1 steps.
  double best_cost = 0.75;
  for (int s = 2; s <= steps && s <= slots; ++s) {
    const int64_t waves = (rem * s + slots - 1) / slots;
    const double cost = static_cast<double>(waves) * ((steps + s - 1) / s + 1) / steps;
    if (cost < best_cost) best_cost = cost, best = {units - rem, s};
  }
  return best;
}

inline dim3 launch_grid(int64_t x, int64_t y, int64_t z) {
  if (x > 0x7fffffff || y > 65535 || z > 65535)
    throw Unsupported("grid too large: " + std::to_string(x) + " x " + std::to_string(y) + " x " +
                      std::to_string(z));
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y), static_cast<unsigned>(z));
}

// Throws Unsupported when ptxas spilled registers in `kernel`.
inline void refuse_spills(const nvrtc::Compiled& comp, const char* kernel) {
  const auto it = comp.info.find(kernel);
  if (it != comp.info.end() && (it->second.spill_stores || it->second.spill_loads))
    throw Unsupported("ptxas spills " + std::to_string(it->second.spill_stores) + " bytes (" +
                      std::to_string(it->second.registers) + " registers)");
}

// The device check of the mma.sync families.
inline Support needs_sm80(const gpu::DeviceInfo& d) {
  return d.sm_major < 8 ? Support::no("needs sm80+ (mma.sync bf16, cp.async)") : Support::yes();
}
// The device check of the wgmma families.
inline Support needs_sm90(const gpu::DeviceInfo& d) {
  return d.sm_major == 9 ? Support::yes() : Support::no("needs sm_90 (wgmma)");
}
// The problem check of a family that handles every problem the common checks let through.
inline Support any_problem(const Problem&) {
  return Support::yes();
}

// A Variant over one family. F (traits) has: name, pass, Config (from_knobs, knobs()),
// knob_names(), default_config(Problem), check(Config, D, smem_limit),
// compile(Problem, Config, DeviceInfo), bind(Problem, Config, AttnTensors&, DeviceInfo), and the
// family's narrowing of the support surface: problem_check(Problem), device_check(DeviceInfo),
// each a Support.
template <class F>
class FfpaVariant : public Variant {
 public:
  std::string name() const override { return F::name; }
  Pass pass() const override { return F::pass; }
  std::vector<std::string> knob_names() const override { return F::knob_names(); }
  Knobs default_knobs(const Problem& p) const override { return F::default_config(p).knobs(); }

  Support supports(const Problem& p) const override {
    const auto& s = p.shape;
    if (!HeadDims::allows(s.D)) return Support::no(HeadDims::refusal(s.D));
    if (s.Hkv <= 0 || s.Hq % s.Hkv) return Support::no("Hq must be a multiple of Hkv");
    if (s.group() * s.Nq > 0x7fffffffLL) return Support::no("group * Nq exceeds 2^31");
    if (s.B < 1 || s.Nq < 1 || s.Nkv < 1) return Support::no("empty problem");
    return F::problem_check(p);
  }

  Support supports(const Problem& p, const Knobs& k, const gpu::DeviceInfo& d) const override {
    if (Support s = F::device_check(d); !s.ok()) return s;
    return F::check(F::Config::from_knobs(k), static_cast<int>(p.shape.D), d.smem_per_block_optin);
  }

  Support compile(const Problem& p, const Knobs& k, const gpu::DeviceInfo& d) const override {
    try {
      F::compile(p, F::Config::from_knobs(k), d);
    } catch (const Unsupported& e) {
      return Support::no(e.what());
    }
    return Support::yes();
  }

  std::unique_ptr<Op> bind(const Problem& p, const Knobs& k, AttnTensors& t,
                           const gpu::DeviceInfo& d) override {
    return F::bind(p, F::Config::from_knobs(k), t, d);
  }
};

}  // namespace ffpa::ffpa_family
