// Shared-memory layout and work split of ffpa-fwd-decode, read by the kernel (its regions, the
// keys of each block, where a block's partial rows go) and by the host (the bytes a launch asks
// for, the partial buffers), so the two cannot drift.
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct FwdDecode {
  static constexpr int kRows = 16;  // query rows of a block: a kv head's group x Nq at most
  static constexpr int kWarps = 4;  // consumer warps; one producer warp beside them
  static constexpr int kThreads = (kWarps + 1) * 32;

  int slot;   // one ring slot: a K or a V tile, kb keys x dp columns in 64-column panels
  int q;      // Q [kRows][dp] in 64-column panels (the ring starts at 0)
  int p;      // P [kRows][64] 16-bit (kb <= 64 columns used)
  int red;    // a float per consumer warp and row: the tile's row maxima, the rows' sums
  int bars;   // full[slots], then empty[slots]
  int bytes;  // dynamic shared memory of a launch, with the alignment slack
};

// dp: D padded to a multiple of 64 (TMA zero-fills the columns past D); kb: keys of a tile.
FFPA_LAYOUT_FN FwdDecode fwd_decode_layout(int dp, int kb, int slots) {
  using L = FwdDecode;
  FwdDecode l{};
  l.slot = kb * dp * 2;
  l.q = slots * l.slot;
  l.p = l.q + L::kRows * dp * 2;
  l.red = l.p + L::kRows * 64 * 2;
  l.bars = l.red + L::kWarps * L::kRows * 4;
  // The slots must start on a 1024-byte boundary (the 128-byte swizzle is a function of address
  // bits 7..9); the launch's base is only known to be 16-byte aligned.
  l.bytes = 1024 + l.bars + 2 * slots * 8;
  return l;
}

// The work split. The keys every (batch, kv head) sees (`vis` each: all of Nkv, or up to the
// last key a causal row sees) lie end to end, total = B x Hkv x vis; block i of `blocks` takes
// keys [start(i), start(i + 1)), so shares differ by at most one key whatever the head count.
// A share that crosses a head's end is two (or more) segments, each a partial result of its
// head; a head's segments come from consecutive blocks and a merge kernel combines them.
FFPA_LAYOUT_FN long long decode_start(long long total, int blocks, int i) {
  return total * i / blocks;
}
// The block whose share holds key x (0 <= x < total): the largest i with start(i) <= x.
FFPA_LAYOUT_FN int decode_block_of(long long total, int blocks, long long x) {
  return (int)(((x + 1) * blocks - 1) / total);
}
// Blocks of the grid (on the host): every resident block (`resident`, one wave) unless the
// keys are fewer than two tiles of `kb` for each; at least one.
FFPA_LAYOUT_FN long long decode_blocks(long long total, int kb, long long resident) {
  const long long by_keys = total / (2 * kb);
  const long long n = resident < by_keys ? resident : by_keys;
  return n > 1 ? n : 1;
}
// Partial slots a head: the most blocks whose shares meet one head's keys (shares hold at least
// total / blocks keys, blocks <= total). Head h's segment from block i is slot
// h x head_slots + i - decode_block_of(h x vis).
FFPA_LAYOUT_FN int decode_head_slots(long long total, int blocks, long long vis) {
  const long long share = total / blocks;
  return (int)((vis + share - 1) / share) + 1;
}

}  // namespace ffpa_layout
