// Shared-memory layout of ffpa-fwd-sm90ws, read by the kernel (its offsets) and by the host (the
// bytes a launch asks for), so the two cannot drift. Offsets from the 1024-aligned base (the
// 128-byte swizzle is a function of absolute address bits 7..9).
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct FwdSm90ws {
  static constexpr int kRows = 64;            // query rows of a consumer warpgroup
  static constexpr int kKeys = 64;            // keys of a block
  static constexpr int kPanel = kKeys * 128;  // one ring slot: 64 keys x 64 columns, 2 bytes

  int ring;   // the slots of both rings (rows mode: of the one ring)
  int p;      // sP[0], sP[1] (none in the rows mode)
  int stats;  // row maxima and sums of both consumers, floats (none in the rows mode)
  int rows;   // query index and q head per row, ints
  int drop;   // dropout seed and p (16 bytes)
  int unit;   // the CTA's unit of work and key range, ints (32 bytes)
  int bars;   // per ring: full[slots / 2], empty[slots / 2] (rows mode: full[slots], empty[slots])
  int bytes;  // dynamic shared memory of a launch, with the alignment slack
};

// Query rows of a CTA: 64, shared by the two consumers (O's columns split between them), or in
// the rows mode (knob rows) 128, 64 a consumer (all of O's columns in each).
FFPA_LAYOUT_FN int fwd_sm90ws_cta_rows(int rows_mode) {
  return rows_mode ? 2 * FwdSm90ws::kRows : FwdSm90ws::kRows;
}

// dp: D padded to a multiple of 64 (Q's panels are zero-filled past D).
FFPA_LAYOUT_FN FwdSm90ws fwd_sm90ws_layout(int dp, int slots, int rows_mode) {
  using L = FwdSm90ws;
  const int br = fwd_sm90ws_cta_rows(rows_mode);
  FwdSm90ws l{};
  l.ring = br * dp * 2;
  l.p = l.ring + slots * L::kPanel;
  l.stats = l.p + (rows_mode ? 0 : 2 * L::kRows * L::kKeys * 2);
  l.rows = l.stats + (rows_mode ? 0 : 4 * br * 4);
  l.drop = l.rows + 2 * br * 4;
  l.unit = l.drop + 16;
  l.bars = l.unit + 32;
  l.bytes = 1024 + l.bars + 2 * slots * 8;
  return l;
}

// The last wave's split (knob tail): the CTA `rel` places past FfpaFwdParams::split_from runs
// piece `piece` of tail unit `unit` (counted from split_from). The host plans the split in
// clusters, the CTAs of one sharing a key stream: tail cluster c runs piece c % pieces of units
// (c / pieces) x cluster + rank, so a cluster walks one key range and keeps its neighbouring
// query blocks; a piece's partial rows stay unit-major (unit x pieces + piece), as the merge
// reads them. With cluster = 1 a CTA is its own cluster.
struct FwdSm90wsPiece {
  long long unit;
  int piece;
};
FFPA_LAYOUT_FN FwdSm90wsPiece fwd_sm90ws_piece(long long rel, int cluster, int pieces) {
  const long long c = rel / cluster;
  return {c / pieces * cluster + rel % cluster, static_cast<int>(c % pieces)};
}

// The keep mask (knob kmask): the dropout keep bits of every key block a CTA sees, drawn by
// ffpa_fwd_sm90ws_keep_kernel before the forward. A word per consumer thread and key block, in
// the bit order the thread applies them (keep_mask_word in the kernel): word
// (row_block * key_blocks + key_block) * kKeepWords + thread, row_block = (b * Hkv + kvh) *
// row_blocks + m0 / kRows over the packed group * Nq rows of each kv head (a consumer's rows, in
// either mode).
struct FwdSm90wsKeep {
  static constexpr int kKeepWords = 128;  // a consumer warpgroup's threads
  // Key blocks a CTA of the keep kernel draws: 32, since at 8 ncu put ~40 % of the kernel's
  // stall samples on its first instructions (results/h100/2026-12-06c, ncu-keep2).
  static constexpr int kCtaBlocks = 32;
  long long row_blocks;  // of a kv head: ceil(group * Nq / kRows)
  long long key_blocks;  // ceil(Nkv / kKeys)
  long long words;       // of the whole mask
};
FFPA_LAYOUT_FN FwdSm90wsKeep fwd_sm90ws_keep(long long B, long long Hkv, long long rows,
                                             long long Nkv) {
  using L = FwdSm90ws;
  FwdSm90wsKeep k{};
  k.row_blocks = (rows + L::kRows - 1) / L::kRows;
  k.key_blocks = (Nkv + L::kKeys - 1) / L::kKeys;
  k.words = B * Hkv * k.row_blocks * k.key_blocks * FwdSm90wsKeep::kKeepWords;
  return k;
}

}  // namespace ffpa_layout
