// What the decode kernels (ffpa_fwd_decode.cuh, ffpa_bwd_decode_sm90.cuh) share: the keys a head's
// rows see, a block's share of them cut into segments (ffpa_fwd_decode_layout.h's split), and the
// producer warp that streams K and V tiles of those segments through the mbarrier ring. Device
// code only; reads FFPA_CAUSAL.
#pragma once

#include "ffpa_fwd_decode_layout.h"
#include "tma.cuh"

namespace ffpa_decode {

using namespace ffpa_dev;

// Keys every (batch, kv head) sees: row r sees keys k <= r + diag under causal masking.
__device__ __forceinline__ long long visible_keys(const FfpaFwdParams& p) {
  if (!FFPA_CAUSAL) return p.Nkv;
  const long long last = (long long)p.Nq - 1 + (FFPA_CAUSAL == 1 ? p.Nkv - p.Nq : 0);
  return last + 1 < p.Nkv ? last + 1 : p.Nkv;
}

// One segment of a block's share: keys [lo, hi) of head hh (= b x Hkv + kvh).
struct Segment {
  long long hh;
  int lo, hi, kvh, b;
};
__device__ __forceinline__ Segment segment_at(const FfpaFwdParams& p, long long x, long long x1,
                                              long long vis) {
  Segment s;
  s.hh = x / vis;
  s.lo = (int)(x - s.hh * vis);
  const long long end = x1 - s.hh * vis;
  s.hi = (int)(end < vis ? end : vis);
  s.kvh = (int)(s.hh % p.Hkv);
  s.b = (int)(s.hh / p.Hkv);
  return s;
}

// The ring's mbarriers, SLOTS of each kind from `bars`: full(s) completes when the producer's
// TMA bytes of slot s have landed, empty(s) when each of the consumer warps released it.
template <int SLOTS>
struct RingBars {
  u32 bars;
  __device__ __forceinline__ u32 full(int s) const { return bars + 8 * s; }
  __device__ __forceinline__ u32 empty(int s) const { return bars + 8 * (SLOTS + s); }
  // Thread 0 initializes them for `warps` releasing warps (lane 0 of each); a block barrier
  // follows, so every thread of the block calls it.
  __device__ __forceinline__ void init(int warps) const {
    if (threadIdx.x == 0) {
      for (int s = 0; s < SLOTS; ++s) {
        mbar_init(full(s), 1);
        mbar_init(empty(s), warps);
      }
      mbar_init_fence();
    }
    __syncthreads();
  }
};

// The producer (one thread): ring item n is tile n / 2's K (n even) or V (n odd) of the block's
// keys [x0, x1), KB keys x DP columns (DP / 64 boxes of 64 columns, 128-byte swizzle) into slot
// n % SLOTS at base + slot x bytes, once the slot's (n / SLOTS - 1)-th release has completed.
// It returns when the last item is issued: the consumers wait for every one.
template <int KB, int DP, int SLOTS>
__device__ __forceinline__ void produce(const FfpaFwdParams& p, const FfpaTmaDesc& tk,
                                        const FfpaTmaDesc& tv, u32 base, RingBars<SLOTS> ring,
                                        long long x0, long long x1, long long vis) {
  constexpr u32 SLOT = KB * DP * 2;
  tma_prefetch_desc(tk);
  tma_prefetch_desc(tv);
  int n = 0;
  for (long long x = x0; x < x1;) {
    const Segment g = segment_at(p, x, x1, vis);
    for (int k = g.lo; k < g.hi; k += KB)
#pragma unroll
      for (int kind = 0; kind < 2; ++kind, ++n) {
        const int s = n % SLOTS, use = n / SLOTS;
        if (use > 0) mbar_wait(ring.empty(s), (use - 1) & 1);
        mbar_expect_tx(ring.full(s), SLOT);
#pragma unroll 1
        for (int pn = 0; pn < DP / 64; ++pn)
          tma_load_4d(base + s * SLOT + pn * KB * 128, kind ? tv : tk, pn * 64, k, g.kvh, g.b,
                      ring.full(s));
      }
    x = g.hh * vis + g.hi;
  }
}

}  // namespace ffpa_decode
