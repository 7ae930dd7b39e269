// Row-major, strided-batched cuBLASLt GEMM with fp32 accumulation (CUBLAS_COMPUTE_32F: true fp32
// for fp32 operands, never TF32). The algorithm is chosen once, at construction (bind time).
#pragma once

#include <cublasLt.h>

#include <cstdint>

#include "unfused/kernels.hpp"

namespace ffpa {

// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, row-major with leading dimensions and
// batch strides in elements. trans_a: A is stored [K,M]; trans_b: B is stored [N,K].
struct GemmDesc {
  Elem ab = Elem::bf16;  // A and B
  Elem c = Elem::bf16;   // C (and D)
  int64_t M = 0, N = 0, K = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int align = 16;  // bytes every A, B, C pointer passed to run() is aligned to
};

// Largest power of two <= 16 dividing the address and every byte count given.
int common_alignment(const void* p, std::initializer_list<int64_t> bytes);

// Operands for timing candidate algorithms at construction; C is overwritten.
struct GemmTuneArgs {
  const void* a;
  const void* b;
  void* c;
  float alpha, beta;
};

class Gemm {
 public:
  // Throws RunError when cuBLASLt has no algorithm for the description. With `tune`, times the
  // heuristic's top candidates on those operands and keeps the fastest; else takes its first.
  Gemm(const GemmDesc&, void* workspace, size_t workspace_bytes,
       const GemmTuneArgs* tune = nullptr);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  void run(const void* a, const void* b, void* c, float alpha, float beta, cudaStream_t) const;

 private:
  void release();
  cublasLtMatmulAlgo_t fastest(const cublasLtMatmulHeuristicResult_t*, int n, const GemmTuneArgs&);
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
};

constexpr size_t kGemmWorkspaceBytes = 32u << 20;

}  // namespace ffpa
