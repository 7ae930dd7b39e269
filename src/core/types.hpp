// Vocabulary shared by every layer: what an attention problem is, independent of how it is run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ffpa {

enum class Dtype { fp16, bf16 };
enum class Pass { fwd, bwd };
// bottom_right: query r sees keys k <= r + Nkv - Nq (the seed's and FA's convention).
// top_left: query r sees keys k <= r (PyTorch SDPA's convention).
enum class Causal { none, bottom_right, top_left };
// Additive bias broadcast shapes: key = [1,1,1,Nkv], query_key = [1,1,Nq,Nkv], full =
// [B,Hq,Nq,Nkv].
enum class BiasKind { none, key, query_key, full };
// fp32, or the same dtype as q/k/v.
enum class BiasDtype { fp32, input };
// The baselines. A Baseline says which it is (Baseline::id) and is picked by it; the spelling
// (to_string) is its impl name in results and reports.
enum class BaselineId { unfused, cudnn };

std::string to_string(Dtype);
std::string to_string(Pass);
std::string to_string(Causal);
std::string to_string(BiasKind);
std::string to_string(BiasDtype);
std::string to_string(BaselineId);

// Parsers return nullopt for an unknown spelling; callers turn that into an InputError.
std::optional<Dtype> parse_dtype(const std::string&);
std::optional<Pass> parse_pass(const std::string&);
std::optional<Causal> parse_causal(const std::string&);
std::optional<BiasKind> parse_bias_kind(const std::string&);
std::optional<BiasDtype> parse_bias_dtype(const std::string&);
std::optional<BaselineId> parse_baseline_id(const std::string&);

int dtype_bytes(Dtype);

// Layout is [B, H, N, D] for q, k, v, o and their gradients.
struct Shape {
  int64_t B = 1;
  int64_t Hq = 1;
  int64_t Hkv = 1;
  int64_t Nq = 1;
  int64_t Nkv = 1;
  int64_t D = 64;

  int64_t group() const { return Hq / Hkv; }
  bool operator==(const Shape& o) const {
    return B == o.B && Hq == o.Hq && Hkv == o.Hkv && Nq == o.Nq && Nkv == o.Nkv && D == o.D;
  }
};

// The head dims a problem may have: multiples of 8 (16-byte rows of 2-byte elements) in 32..1024.
// Cases refuse other D when they are read; the FFPA variants refuse them in problems built in code.
struct HeadDims {
  static constexpr int64_t min = 32, max = 1024, step = 8;
  static bool allows(int64_t D) { return D % step == 0 && D >= min && D <= max; }
  static std::string refusal(int64_t D);  // "D=100 must be a multiple of 8 in 32..1024"
};

// One fully resolved attention problem: a case at one sweep point and one dtype.
struct Problem {
  std::string case_name;
  Shape shape;
  Dtype dtype = Dtype::bf16;
  Causal causal = Causal::none;
  BiasKind bias = BiasKind::none;
  BiasDtype bias_dtype = BiasDtype::fp32;
  double bias_scale = 0.25;  // bias values are randn * bias_scale
  double dropout = 0.0;
  uint64_t seed = 0;  // input data and dropout seed

  double scale() const;
  // Number of (query, key) pairs that take part, per (batch, head): exact for causal.
  double pairs() const;
  // ANCHORS.md convention: fwd = 4*B*Hq*D*pairs, bwd = 2.5 * fwd.
  double flops(Pass) const;
  // Bytes of the tensors a kernel must touch at least once (inputs + outputs) for the pass.
  int64_t io_bytes(Pass) const;
  // Number of elements in the bias tensor (0 without a bias).
  int64_t bias_elems() const;
};

// A tuning grid point or a variant's configuration: knob name -> value, ordered for stable keys.
using Knobs = std::vector<std::pair<std::string, int64_t>>;
std::optional<int64_t> knob(const Knobs&, const std::string& name);
std::string to_string(const Knobs&);  // "Br=64,Bc=64"

}  // namespace ffpa
