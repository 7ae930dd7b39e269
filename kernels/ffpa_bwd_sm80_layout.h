// Shared-memory layout of ffpa-bwd-sm80 (kernels/ffpa_bwd.cuh), read by the kernel (its regions)
// and by the host (the bytes a launch asks for), so the two cannot drift.
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct BwdSm80 {
  int k, v;   // K and V: bc keys x dp each
  int q, o;   // Q and dO: br rows x dp each
  int p, s;   // Pd and dS in the input dtype: br x bcp each (whole 64-column swizzled tiles)
  int x;      // dP, fp32: br x bc
  int rows;   // per row lse * log2(e), delta, query row, q head (4 words), then the dBias
              // column sums (bc floats)
  int bytes;  // dynamic shared memory of a launch
};

// dp: D padded to whole Kd chunks.
FFPA_LAYOUT_FN BwdSm80 bwd_sm80_layout(int dp, int br, int bc) {
  BwdSm80 l{};
  const int bcp = (bc + 63) / 64 * 64;
  l.k = 0;
  l.v = l.k + bc * dp * 2;
  l.q = l.v + bc * dp * 2;
  l.o = l.q + br * dp * 2;
  l.p = l.o + br * dp * 2;
  l.s = l.p + br * bcp * 2;
  l.x = l.s + br * bcp * 2;
  l.rows = l.x + br * bc * 4;
  l.bytes = l.rows + br * 16 + bc * 4;
  return l;
}

}  // namespace ffpa_layout
