// One parameter struct per pass (FA3's flash.h style). Plain C so that host code, nvcc-built
// kernels and NVRTC-built kernels all include the same definition. Strides are in elements and
// 64-bit: B*H*N*D passes 2^31 at realistic sizes.
#pragma once

struct FfpaFwdParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;        // [B, Hq, Nq], natural log
  const void* bias;  // additive bias or null; broadcast dims have stride 0
  long long q_batch_stride, q_head_stride, q_row_stride;
  long long k_batch_stride, k_head_stride, k_row_stride;
  long long v_batch_stride, v_head_stride, v_row_stride;
  long long o_batch_stride, o_head_stride, o_row_stride;
  long long bias_batch_stride, bias_head_stride, bias_row_stride;
  int bias_is_fp32;  // else the bias has q's dtype
  int is_bf16;       // else fp16
  int B, Hq, Hkv, Nq, Nkv, D;
  int group;  // Hq / Hkv: q head h reads kv head h / group
  float scale;
  float scale_log2;  // scale * log2(e)
  int causal;        // 0 none, 1 bottom-right, 2 top-left
  // Dropout (compiled in by FFPA_DROPOUT): an element keeps iff its Philox word >= this
  // (ffpa_keep_min of the probability p).
  unsigned int dropout_keep_min;
  float dropout_scale;  // 1 / (1 - p)
  unsigned long long dropout_seed, dropout_offset;
  // ffpa-fwd-sm90ws with kmask: the keep bits drawn ahead by its keep kernel
  // (ffpa_fwd_sm90ws_layout.h, FwdSm90wsKeep); null otherwise.
  unsigned int* keep_mask;
  // Split-KV (decode): partial outputs in fp32, merged by a second kernel.
  int num_splits;
  float* o_partial;    // [num_splits, B, Hq, Nq, D]
  float* lse_partial;  // [num_splits, B, Hq, Nq]
  // ffpa-fwd-sm90ws: the work units from this one on (the last wave's) run as num_splits key
  // ranges each, o_partial / lse_partial holding their rows ([units, num_splits, 64, D]).
  long long split_from;
};

struct FfpaBwdParams {
  FfpaFwdParams fwd;  // inputs, o and lse as the forward left them
  const void* dout;
  void* dq;
  void* dk;
  void* dv;
  void* dbias;  // gradient of the bias reduced to its broadcast shape, or null
  long long do_batch_stride, do_head_stride, do_row_stride;
  long long dq_batch_stride, dq_head_stride, dq_row_stride;
  long long dk_batch_stride, dk_head_stride, dk_row_stride;
  long long dv_batch_stride, dv_head_stride, dv_row_stride;
  float* delta;        // [B, Hq, Nq] rowsum(dO * O), workspace
  float* dq_accum;     // fp32 workspace when dQ is accumulated atomically
  float* dbias_accum;  // fp32 workspace for dbias
  // ffpa-bwd-sm90c: the last kv head's key tiles from this one on (the last wave's) run as
  // num_splits query ranges each, their dK and dV in fp32 ([tiles, num_splits, 2, keys, D]).
  long long split_from;
  int num_splits;
  float* dkv_partial;
  // ffpa-bwd-decode-sm90 in two passes: P and dS of every visible key, 16-bit pairs of rows
  // ([B, Hkv, Nkv, 2, nr / 2] words: P's rows, then dS's), from the first pass to the second.
  unsigned int* pds;
};

// A TMA tensor map (CUtensorMap: 128 opaque bytes, 64-byte aligned), encoded on the host and
// passed by value as a __grid_constant__ kernel parameter; the kernels need no cuda.h.
struct alignas(64) FfpaTmaDesc {
  unsigned long long opaque[16];
};
