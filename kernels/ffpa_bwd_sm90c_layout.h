// Shared-memory layout of ffpa-bwd-sm90c, read by the kernel (its regions) and by the host (the
// bytes a launch asks for), so the two cannot drift. Offsets from the 1024-aligned base; the same
// in both CTAs of the cluster (the exchange slots are addressed across them).
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct BwdSm90c {
  static constexpr int kRows = 64;  // query rows of a tile
  static constexpr int kThreads = 256;

  int k, v;    // the block's half of K and V: bc keys x dp / 2 columns each
  int q, o;    // the block's half of Q and dO: 64 rows x dp / 2
  int pt, st;  // P^T (then dS^T) and S^T: bc x 64 each
  int x;       // exchange with the other CTA: [warp][n8 group][thread] float4
  int rows;    // row tables of two query tiles: lse * log2(e) and delta per row
  int keep;    // dropout keep bits from the other block, one word a thread
  int full;    // mbarrier: the other block's exchange stores have landed
  int bytes;   // dynamic shared memory of a launch, with the alignment slack
};

// dp: D padded to a multiple of 256 (each of the 4 warpgroups of the cluster holds a quarter);
// bc: keys of a block.
FFPA_LAYOUT_FN BwdSm90c bwd_sm90c_layout(int dp, int bc) {
  using L = BwdSm90c;
  BwdSm90c l{};
  const int kv = bc * (dp / 2) * 2, q = L::kRows * (dp / 2) * 2, pt = bc * L::kRows * 2;
  l.k = 0;
  l.v = l.k + kv;
  l.q = l.v + kv;
  l.o = l.q + q;
  l.pt = l.o + q;
  l.st = l.pt + pt;
  l.x = l.st + pt;
  l.rows = l.x + 2 * (bc / 8) * 128 * 16;
  l.keep = l.rows + 2 * L::kRows * 8;
  l.full = l.keep + L::kThreads * 4;
  l.bytes = 1024 + l.full + 8;
  return l;
}

}  // namespace ffpa_layout
