// Case matrices: JSON files that describe attention problems in terms of a few sweep variables
// (B, H, N, D), so one file serves every sweep point. Loading validates the whole file; resolving
// turns one case at one sweep point into a Problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/types.hpp"

namespace ffpa {

// A size: a literal, or a sweep variable with at most one integer operation ("N-1", "H/4").
struct SizeExpr {
  char var = 0;      // 0 for a literal, else one of B H N D
  char op = 0;       // 0, '+', '-', '*', '/'
  int64_t k = 0;     // the literal, or the operand
  std::string text;  // as written, for messages
};

// Parses "V", "V-k", "V+k", "V*k", "V/k" or a decimal literal (spaces allowed around tokens).
// Returns nullopt with *why set when the text is not an expression of that form.
std::optional<SizeExpr> parse_size_expr(const std::string& text, std::string* why);

// Values of the sweep variables. Hkv, Nq, Nkv, when set, replace the case's own fields.
struct SweepPoint {
  int64_t B = 1, H = 1, N = 1, D = 64;
  std::optional<int64_t> Hkv, Nq, Nkv;
};

// Evaluates an expression at a sweep point. Returns nullopt with *why set on a division that is
// not exact or an overflow.
std::optional<int64_t> eval_size(const SizeExpr&, const SweepPoint&, std::string* why);

struct CaseSpec {
  std::string name;
  std::string description;
  SizeExpr B, Hq, Hkv, Nq, Nkv, D;
  std::vector<Dtype> dtypes;
  Causal causal = Causal::none;
  BiasKind bias = BiasKind::none;
  BiasDtype bias_dtype = BiasDtype::fp32;
  double bias_scale = 0.25;
  double dropout = 0.0;
  int index = 0;  // position in "cases", for JSON pointers in messages
};

struct CaseFile {
  std::string file;           // where it came from, for messages
  SweepPoint defaults;        // B, H, N, D from "defaults"
  std::vector<Dtype> dtypes;  // "defaults"/"dtypes"
  std::vector<CaseSpec> cases;

  const CaseSpec* find(const std::string& name) const;
  std::vector<std::string> names() const;
};

// Parses and validates a case file's text; every case is also resolved at the file's defaults, so
// a file that loads describes valid problems. Throws InputError(file, JSON pointer, reason).
CaseFile parse_case_file(const std::string& text, const std::string& file);
// Reads the file first; a missing or unreadable file is InputError("command line", "--config").
CaseFile load_case_file(const std::string& path);

// Resolves one case at one sweep point. Throws InputError naming the case's JSON pointer (or the
// forcing flag, for Hkv/Nq/Nkv given on the command line) when the result is not a valid problem.
Problem resolve_case(const CaseFile&, const CaseSpec&, const SweepPoint&, Dtype, uint64_t seed);

// Input/dropout seed for a case: the same for every variant, different between cases.
uint64_t case_seed(uint64_t seed, const std::string& case_name);

}  // namespace ffpa
