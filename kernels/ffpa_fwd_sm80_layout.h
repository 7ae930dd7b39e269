// Shared-memory layout of ffpa-fwd-sm80 (kernels/ffpa_fwd.cuh): plain constexpr C++ included by
// the kernel (NVRTC) and by the host (src/variants/ffpa_fwd_sm80.cpp), so the launch's dynamic
// shared memory and the kernel's regions come from one formula and cannot drift apart.
// Arguments are the knobs (grid spelling) and D; sizes and offsets are in bytes.
#pragma once

#include "ffpa_layout.h"

namespace ffpa_layout {

struct FwdSm80 {
  int padded_d;    // D rounded up to whole Kd chunks (the kernel zero-fills the padding)
  int slot_bytes;  // one warp's slice of a K/V chunk (private mode)
  int stage_bytes;
  int q;      // [Br, padded_d] Q tile
  int stage;  // Stages x stage_bytes K/V ring
  int p;      // [Br, Bc] P tile
  int red;    // [Wn, Br] fp32 row max / sum exchange
  int rows;   // [Br] x 2 ints: query index and q head of each row
  int total;
};

FFPA_LAYOUT_FN FwdSm80 fwd_sm80_layout(int D, int Br, int Bc, int Wm, int Wn, int Kd, int stages,
                                       int priv) {
  FwdSm80 l{};
  l.padded_d = (D + Kd - 1) / Kd * Kd;
  l.slot_bytes = Bc * Kd * 2 / Wn;
  l.stage_bytes = priv ? Wm * Wn * l.slot_bytes : Bc * Kd * 2;
  l.q = 0;
  l.stage = l.q + Br * l.padded_d * 2;
  l.p = l.stage + stages * l.stage_bytes;
  l.red = l.p + Br * Bc * 2;
  l.rows = l.red + Wn * Br * 4;
  l.total = l.rows + Br * 8;
  return l;
}

}  // namespace ffpa_layout
