// Shared-memory layout of ffpa-bwd-decode, read by the kernel (its regions) and by the host (the
// bytes a launch asks for), so the two cannot drift.
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct BwdDecode {
  static constexpr int kRows = 16;  // query rows of a kv head's group (group x Nq) at most
  static constexpr int kThreads = 128;

  int stride;  // elements between two rows of a tile: D and a 16-byte pad (conflict-free reads
               // of 8 consecutive keys' granules)
  int k, v;    // the block's keys: kb rows each
  int q, o;    // the group's query rows: kRows each
  int pd, ds;  // P (dropped, scaled) and dS, fp32 [kRows][kb]
  int rows;    // per row: lse * log2(e) (+inf: no gradient), delta
  int bytes;   // dynamic shared memory of a launch
};

// d: head dim (a multiple of 8); kb: keys of a block.
FFPA_LAYOUT_FN BwdDecode bwd_decode_layout(int d, int kb) {
  using L = BwdDecode;
  BwdDecode l{};
  l.stride = d + 8;
  const int kv = kb * l.stride * 2, qo = L::kRows * l.stride * 2, pf = L::kRows * kb * 4;
  l.k = 0;
  l.v = l.k + kv;
  l.q = l.v + kv;
  l.o = l.q + qo;
  l.pd = l.o + qo;
  l.ds = l.pd + pf;
  l.rows = l.ds + pf;
  l.bytes = l.rows + L::kRows * 8;
  return l;
}

}  // namespace ffpa_layout
