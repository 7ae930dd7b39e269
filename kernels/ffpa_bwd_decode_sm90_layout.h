// Shared-memory layout of ffpa-bwd-decode-sm90, read by the kernel (its regions) and by the host
// (the bytes a launch asks for), so the two cannot drift. The work split (the keys of every head
// end to end, equal shares for one wave of blocks) is ffpa_fwd_decode_layout.h's decode_start.
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct BwdDecodeSm90 {
  static constexpr int kRows = 16;         // query rows of a block: a kv head's group x Nq at most
  static constexpr int kStage = 16 * 128;  // a consumer warp's staging: 16 rows of 128 bytes

  int slot;   // one ring slot: a K or a V tile, kb keys x dp columns in 64-column panels
  int q, o;   // Q and dO of the segment's rows [nr][dp] in 64-column panels (the ring at 0)
  int ds;     // dS (16-bit) of the tile [nr][64], two buffers (by tile parity)
  int xch;    // the S and dP partial fragments of the warps that split D: [warps][16][32] fp32
  int stage;  // warps x kStage: dK, dV (16-bit) and dQ (fp32) on their way to global memory
  int stats;  // per row (kRows): lse * log2(e) (+inf: no gradient), then delta
  int bars;   // full[slots], then empty[slots]
  int bytes;  // dynamic shared memory of a launch, with the alignment slack
};

// dp: D padded to a multiple of 64 (TMA zero-fills the columns past D); kb: keys of a tile;
// nr: query rows the kernel computes (8 or 16: the group's rows rounded up); warps: consumer
// warps (4 or 8; a producer warp beside them).
FFPA_LAYOUT_FN BwdDecodeSm90 bwd_decode_sm90_layout(int dp, int kb, int slots, int nr, int warps) {
  using L = BwdDecodeSm90;
  BwdDecodeSm90 l{};
  l.slot = kb * dp * 2;
  l.q = slots * l.slot;
  l.o = l.q + nr * dp * 2;
  l.ds = l.o + nr * dp * 2;
  l.xch = l.ds + 2 * nr * 64 * 2;
  l.stage = l.xch + (warps * 16 > kb ? warps * 16 * 32 * 4 : 0);  // warps split D
  l.stats = l.stage + warps * L::kStage;
  l.bars = l.stats + L::kRows * 8;
  // The slots must start on a 1024-byte boundary (the 128-byte swizzle is a function of address
  // bits 7..9); the launch's base is only known to be 16-byte aligned.
  l.bytes = 1024 + l.bars + 2 * slots * 8;
  return l;
}

// The second pass (dK and dV from P and dS, passes = 2): Q and dO of the head's rows [nr][dp],
// then two staging buffers a warp (dV's and dK's TMA stores; 1024-byte aligned, as the 128-byte
// swizzle of their boxes needs: nr x dp x 4 bytes is a multiple of 1024).
struct BwdDecodeSm90Writes {
  int q, o, stage;
  int bytes;  // dynamic shared memory of a launch, with the alignment slack
};
FFPA_LAYOUT_FN BwdDecodeSm90Writes bwd_decode_sm90_writes_layout(int dp, int nr, int warps) {
  BwdDecodeSm90Writes l{};
  l.q = 0;
  l.o = nr * dp * 2;
  l.stage = l.o + nr * dp * 2;
  l.bytes = 1024 + l.stage + warps * 2 * BwdDecodeSm90::kStage;
  return l;
}

}  // namespace ffpa_layout
