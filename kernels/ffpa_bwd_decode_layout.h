// Shared-memory layout of ffpa-bwd-decode, read by the kernel (its regions) and by the host (the
// bytes a launch asks for), so the two cannot drift.
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct BwdDecode {
  static constexpr int kRows = 16;  // query rows of a kv head's group (group x Nq) at most
  static constexpr int kThreads = 256;

  int stride;  // elements between two rows of a tile: D and a 16-byte pad (conflict-free reads
               // of 8 consecutive keys' granules)
  int kv;      // bytes of one stage's K or V tile (kb rows); stage s: K at s * 2 * kv, V after it
  int q, o;    // the group's query rows (`rows` of them), loaded once
  int pd, ds;  // P (dropped, scaled) and dS of the current tile, fp32 [rows][kb] (or more)
  int stats;   // per row (kRows): lse * log2(e) (+inf: no gradient), then delta
  int bytes;   // dynamic shared memory of a launch
};

// d: head dim (a multiple of 8); kb: keys of a tile; stages: tiles in flight (K and V buffers);
// rows: the group's query rows (group x Nq, at most kRows). The stage buffers are also the
// scratch of the block's final dQ reduction (8 fp32 a thread): at least kThreads x 32 bytes.
FFPA_LAYOUT_FN BwdDecode bwd_decode_layout(int d, int kb, int stages, int rows) {
  using L = BwdDecode;
  BwdDecode l{};
  l.stride = d + 8;
  l.kv = kb * l.stride * 2;
  const int staged = stages * 2 * l.kv, scratch = L::kThreads * 32;
  // pd and ds also take the partial S and dP sums (a key each) of the row groups that split D
  // when the rows are fewer than them: kThreads / 32 / (kb / 8) groups.
  const int parts = L::kThreads / 32 * 8 / kb;
  const int qo = rows * l.stride * 2, pf = (rows > parts ? rows : parts) * kb * 4;
  l.q = staged > scratch ? staged : scratch;
  l.o = l.q + qo;
  l.pd = l.o + qo;
  l.ds = l.pd + pf;
  l.stats = l.ds + pf;
  l.bytes = l.stats + L::kRows * 8;
  return l;
}

}  // namespace ffpa_layout
