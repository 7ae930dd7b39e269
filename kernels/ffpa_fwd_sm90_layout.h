// Shared-memory layout of ffpa-fwd-sm90, read by the kernel (its regions) and by the host (the
// bytes a launch asks for), so the two cannot drift. Offsets from the 1024-aligned base.
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct FwdSm90 {
  static constexpr int kRows = 64;  // query rows of a CTA

  int q;      // Q: 64 rows x dp
  int slots;  // the K/V ring: stages slots of 2 x panels panels of bc x 64
  int x;      // the two S partials, fp32
  int p;      // P (psmem), bc / 64 panels of 64 rows; 1024-aligned (x's size is a multiple)
  int bias;   // the key tile's bias: one row or a row per query, bc + 4 floats each
  int keep;   // dropout keep bits: bc / 32 words a row
  int rows;   // the row table: query index and q head per row
  int bytes;  // dynamic shared memory of a launch, with the alignment slack
};

// dp: D padded to a multiple of 128; bias_rows: 0, 1 (key bias) or 64.
FFPA_LAYOUT_FN FwdSm90 fwd_sm90_layout(int dp, int bc, int stages, int panels, bool psmem,
                                       int bias_rows, bool dropout) {
  using L = FwdSm90;
  FwdSm90 l{};
  l.q = 0;
  l.slots = l.q + L::kRows * dp * 2;
  l.x = l.slots + stages * 2 * panels * bc * 128;
  l.p = l.x + 2 * L::kRows * bc * 4;
  l.bias = l.p + (psmem ? L::kRows * bc * 2 : 0);
  l.keep = l.bias + bias_rows * (bc + 4) * 4;
  l.rows = l.keep + (dropout ? L::kRows * bc / 8 : 0);
  l.bytes = 1024 + l.rows + L::kRows * 8;
  return l;
}

}  // namespace ffpa_layout
