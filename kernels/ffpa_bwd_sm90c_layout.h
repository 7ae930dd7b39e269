// Shared-memory layout of ffpa-bwd-sm90c, read by the kernel (its regions) and by the host (the
// bytes a launch asks for), so the two cannot drift. Offsets from the 1024-aligned base; the same
// in both CTAs of a cluster (the exchange slots are addressed across them).
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct BwdSm90c {
  static constexpr int kRows = 64;  // query rows of a tile
  static constexpr int kThreads = 256;

  int k, v;    // the block's columns of K and V: bc keys x dc columns each
  int q, o;    // the block's columns of Q and dO: 64 rows x dc
  int pt, st;  // P^T (then dS^T) and S^T: bc x 64 each
  int x;       // exchange buffers (xbuf of them): S, then dP: [warpgroup][n8 pair][thread] float4
  int rows;    // row tables of two query tiles: lse and delta per row
  int keep;    // dropout keep bits from the other block, one word a thread (xbuf sets)
  int full;    // four mbarriers: the other block's S or dP stores of a tile parity have landed
  int loads;   // four mbarriers: a Q/dO group's TMA boxes have landed (FFPA_TMA)
  int bytes;   // dynamic shared memory of a launch, with the alignment slack
};

// dc: the block's columns in shared memory (its two warpgroups' parts of D, each on whole
// 64-column panels); bc: keys of a block; xbuf: exchange buffers (1 or 2; 0 without a cluster).
FFPA_LAYOUT_FN BwdSm90c bwd_sm90c_layout(int dc, int bc, int xbuf) {
  using L = BwdSm90c;
  BwdSm90c l{};
  const int kv = bc * dc * 2, q = L::kRows * dc * 2, pt = bc * L::kRows * 2;
  l.k = 0;
  l.v = l.k + kv;
  l.q = l.v + kv;
  l.o = l.q + q;
  l.pt = l.o + q;
  l.st = l.pt + pt;
  l.x = l.st + pt;
  l.rows = l.x + xbuf * 2 * (bc / 8) * 128 * 16;
  l.keep = l.rows + 2 * L::kRows * 8;
  l.full = l.keep + xbuf * L::kThreads * 4;
  l.loads = l.full + 32;
  l.bytes = 1024 + l.loads + 32;
  return l;
}

}  // namespace ffpa_layout
