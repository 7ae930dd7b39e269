#include "unfused/lt_gemm.hpp"

#include <algorithm>
#include <string>

#include "gpu/cuda.hpp"

#include "core/error.hpp"

namespace ffpa {
namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw RunError(std::string("cuBLASLt: ") + what + " failed (status " +
                   std::to_string(static_cast<int>(s)) + ")");
}

cublasLtHandle_t handle() {
  // Never destroyed: process exit may come after the CUDA runtime is torn down.
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t x = nullptr;
    check(cublasLtCreate(&x), "cublasLtCreate");
    return x;
  }();
  return h;
}

cudaDataType_t dt(Elem e) {
  switch (e) {
    case Elem::f32:
      return CUDA_R_32F;
    case Elem::f16:
      return CUDA_R_16F;
    case Elem::bf16:
      return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

cublasLtMatrixLayout_t layout(Elem e, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                              int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  check(cublasLtMatrixLayoutCreate(&l, dt(e), static_cast<uint64_t>(rows),
                                   static_cast<uint64_t>(cols), ld),
        "layout");
  if (batch > 1) {
    const int32_t n = static_cast<int32_t>(batch);
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof(n)),
          "batch count");
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                           sizeof(stride)),
          "batch stride");
  }
  return l;
}

}  // namespace

int common_alignment(const void* p, std::initializer_list<int64_t> bytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 16u;
  for (int64_t b : bytes) bits |= static_cast<uint64_t>(b);
  return static_cast<int>(bits & (~bits + 1));  // lowest set bit, at most 16
}

// cuBLASLt is column-major: row-major C = A B is column-major C^T = B^T A^T, so cuBLASLt's A is
// our B and its B is our A, each stored buffer read with swapped rows and columns.
Gemm::Gemm(const GemmDesc& d, void* workspace, size_t workspace_bytes, const GemmTuneArgs* tune)
    : ws_(workspace), ws_bytes_(workspace_bytes) {
  check(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t ta = d.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = d.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
        "transa");
  check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
        "transb");
  // Stored B: [K,N] (col-major N x K), or [N,K] when transposed (col-major K x N).
  la_ = d.trans_b ? layout(d.ab, d.K, d.N, d.ldb, d.batch, d.stride_b)
                  : layout(d.ab, d.N, d.K, d.ldb, d.batch, d.stride_b);
  lb_ = d.trans_a ? layout(d.ab, d.M, d.K, d.lda, d.batch, d.stride_a)
                  : layout(d.ab, d.K, d.M, d.lda, d.batch, d.stride_a);
  lc_ = layout(d.c, d.N, d.M, d.ldc, d.batch, d.stride_c);

  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const uint32_t align = static_cast<uint32_t>(d.align);
  const uint64_t ws = workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t res[kCandidates] = {};
  int found = 0;
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle(), op_, la_, lb_, lc_, lc_, pref,
                                                          tune ? kCandidates : 1, res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
    release();
    throw RunError("cuBLASLt: no algorithm for a " + std::to_string(d.M) + "x" +
                   std::to_string(d.N) + "x" + std::to_string(d.K) + " GEMM (batch " +
                   std::to_string(d.batch) + ")");
  }
  algo_ = res[0].algo;
  if (tune && found > 1) algo_ = fastest(res, found, *tune);
}

// Median of 3 timed runs per candidate, after one warmup; candidates that fail are skipped.
cublasLtMatmulAlgo_t Gemm::fastest(const cublasLtMatmulHeuristicResult_t* res, int n,
                                   const GemmTuneArgs& t) {
  cudaEvent_t e0, e1;
  FFPA_CUDA(cudaEventCreate(&e0));
  FFPA_CUDA(cudaEventCreate(&e1));
  cublasLtMatmulAlgo_t best = res[0].algo;
  float best_ms = 0;
  for (int i = 0; i < n; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
    algo_ = res[i].algo;
    auto once = [&] {
      return cublasLtMatmul(handle(), op_, &t.alpha, t.b, la_, t.a, lb_, &t.beta, t.c, lc_, t.c,
                            lc_, &algo_, ws_, ws_bytes_, nullptr);
    };
    if (once() != CUBLAS_STATUS_SUCCESS) continue;
    float ms[3];
    for (float& m : ms) {
      FFPA_CUDA(cudaEventRecord(e0, nullptr));
      once();
      FFPA_CUDA(cudaEventRecord(e1, nullptr));
      FFPA_CUDA(cudaEventSynchronize(e1));
      FFPA_CUDA(cudaEventElapsedTime(&m, e0, e1));
    }
    std::sort(ms, ms + 3);
    if (best_ms == 0 || ms[1] < best_ms) {
      best_ms = ms[1];
      best = res[i].algo;
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return best;
}

Gemm::~Gemm() {
  release();
}

void Gemm::release() {
  if (la_) cublasLtMatrixLayoutDestroy(la_);
  if (lb_) cublasLtMatrixLayoutDestroy(lb_);
  if (lc_) cublasLtMatrixLayoutDestroy(lc_);
  if (op_) cublasLtMatmulDescDestroy(op_);
  la_ = lb_ = lc_ = nullptr;
  op_ = nullptr;
}

void Gemm::run(const void* a, const void* b, void* c, float alpha, float beta,
               cudaStream_t st) const {
  check(cublasLtMatmul(handle(), op_, &alpha, b, la_, a, lb_, &beta, c, lc_, c, lc_, &algo_, ws_,
                       ws_bytes_, st),
        "matmul");
}

}  // namespace ffpa
