// Shared-memory layout of ffpa-bwd-sm90, read by the kernel (its regions) and by the host (the
// bytes a launch asks for), so the two cannot drift. Offsets from the 1024-aligned base.
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct BwdSm90 {
  static constexpr int kRows = 64;  // query rows of a tile
  static constexpr int kKeys = 32;  // keys of a block

  int k, v;   // K and V: 32 keys x dp each
  int q, o;   // Q and dO: 64 rows x dp each
  int pt;     // (P^T, dS^T) sets, 32 x 64 each; two sets (by tile parity) with split
  int x;      // exchange between the warpgroups: [warp][n8 group][thread] float4
  int rows;   // row tables (lse * log2(e), delta): [parity], or [warpgroup][parity] with split
  int bytes;  // dynamic shared memory of a launch, with the alignment slack
};

// dp: D padded to a multiple of 128 (each warpgroup holds a half).
FFPA_LAYOUT_FN BwdSm90 bwd_sm90_layout(int dp, bool split) {
  using L = BwdSm90;
  BwdSm90 l{};
  const int kv = L::kKeys * dp * 2, q = L::kRows * dp * 2, sets = split ? 2 : 1;
  l.k = 0;
  l.v = l.k + kv;
  l.q = l.v + kv;
  l.o = l.q + q;
  l.pt = l.o + q;
  l.x = l.pt + sets * 2 * L::kKeys * L::kRows * 2;
  l.rows = l.x + 2 * 4 * 128 * 16;
  l.bytes = 1024 + l.rows + 2 * sets * L::kRows * 8;
  return l;
}

}  // namespace ffpa_layout
