// Pointwise kernels of unfused attention (kernels.cu), shared by the unfused baseline
// (input dtype) and the GPU reference (fp32 and input dtype). Rows are the flattened
// [B, Hq, Nq] query rows; score rows live in [rows, ld] buffers, ld a multiple of 8 so every row
// starts 16-byte aligned.
#pragma once

#include <cuda_runtime.h>

namespace ffpa {

// Element types of device buffers.
enum class Elem : int { f32 = 0, f16 = 1, bf16 = 2 };
inline int elem_bytes(Elem e) {
  return e == Elem::f32 ? 4 : 2;
}

struct RowGeometry {
  long long row0;  // global index of the buffer's first row (chunked callers); 0 otherwise
  long long rows;  // rows to process
  long long ld;    // row stride of the score buffers (elements)
  int Hq, Nq, Nkv;
  int causal;  // 0 none, 1 bottom-right, 2 top-left
};

struct DropoutArgs {
  float p;  // 0: off
  unsigned long long seed, offset;
};

struct SoftmaxFwdArgs {
  RowGeometry g;
  Elem elem;         // of s and pd
  void* s;           // in: scale * q k^T; out: softmax probabilities (dropped if drop_into_s)
  void* pd;          // optional out: dropped probabilities P * mask / (1 - p)
  float* lse;        // [global rows], natural log; -inf for a row that sees no key
  const void* bias;  // additive bias or null
  Elem bias_elem;
  long long bias_b, bias_h, bias_r;  // bias strides (elements), 0 on broadcast dims
  DropoutArgs drop;
  int drop_into_s;  // apply dropout to s itself (forward pass)
};

struct SoftmaxBwdArgs {
  RowGeometry g;
  Elem elem;         // of p, ds, pd, o, dout
  const void* p;     // softmax probabilities (not dropped)
  void* ds;          // in: dP = dO V^T; out: dS = P * (dP * mask / (1 - p) - delta)
  void* pd;          // out when dropout is on: P * mask / (1 - p); else unused
  const void* o;     // [global rows, D]
  const void* dout;  // [global rows, D]
  int D;
  DropoutArgs drop;
  void* dbias_full;  // optional out: dS itself as [global rows, Nkv] (a [B,Hq,Nq,Nkv] bias)
  Elem dbias_elem;
};

void softmax_fwd(const SoftmaxFwdArgs&, cudaStream_t);
void softmax_bwd(const SoftmaxBwdArgs&, cudaStream_t);

// acc[((row0 + r) % mod) * ld_acc + c] += x[r * ld + c] for r < rows, c < cols (fp32 atomics).
// ld must be a multiple of 8 elements and at least cols rounded up to 8.
void column_sums(const void* x, Elem, long long rows, long long cols, long long ld, long long row0,
                 long long mod, float* acc, long long ld_acc, cudaStream_t);
// out[r * cols + c] = acc[r * ld_acc + c], converted.
void copy_rows(const float* acc, long long rows, long long cols, long long ld_acc, void* out, Elem,
               cudaStream_t);
// dst[i] = src[i] with conversion.
void convert(const void* src, Elem, void* dst, Elem, long long n, cudaStream_t);

}  // namespace ffpa
