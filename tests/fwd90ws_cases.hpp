// The problems and configurations the GPU test of ffpa-fwd-sm90ws runs for its lock-step modes
// (qknext, rows), shared with the compile test, which compiles every one of them without a GPU:
// a GPU run then meets no spill or serialized wgmma the host could have caught.
#pragma once

#include <functional>
#include <vector>

#include "ffpa_support.hpp"
#include "variants/ffpa_fwd_sm90ws.hpp"

namespace ffpa::test {

struct Fwd90wsCase {
  Problem problem;
  fwd90ws::Config config;
  int sms = 0;  // the multiprocessors the tail plan assumes (0: the device's)
};

// What every lock-step mode runs: causal both alignments at D = 320 (bottom-right: rows that see
// no key) and on `second` (another head dim, with its ring), every bias shape in fp32 and in the
// input dtype at D = bias_d, dropout at D = 320 drawn in the softmax and from the keep mask (also
// with causal masking), and the mask beside causal masking and a key bias at D = bias_d.
inline void lockstep_cases(std::vector<Fwd90wsCase>& out,
                           const std::function<fwd90ws::Config(int)>& cfg, const Problem& second,
                           int second_slots, int bias_d) {
  for (Causal c : {Causal::bottom_right, Causal::top_left}) {
    Problem p = make(1, 4, 2, 400, 300, 320);
    p.causal = c;
    out.push_back({p, cfg(16)});
    Problem q = second;
    q.causal = c;
    out.push_back({q, cfg(second_slots)});
  }
  for (BiasKind m : {BiasKind::key, BiasKind::query_key, BiasKind::full})
    for (BiasDtype md : {BiasDtype::fp32, BiasDtype::input}) {
      Problem p = make(2, 4, 2, 90, 140, bias_d);
      p.bias = m;
      p.bias_dtype = md;
      out.push_back({p, cfg(16)});
    }
  Problem d = make(2, 4, 2, 300, 453, 320);
  d.dropout = 0.1;
  out.push_back({d, cfg(16)});
  fwd90ws::Config km = cfg(16);
  km.kmask = 1;
  out.push_back({d, km});
  d.causal = Causal::top_left;
  out.push_back({d, km});
  Problem db = make(2, 4, 2, 300, 453, bias_d);
  db.dropout = 0.1;
  db.causal = Causal::top_left;
  db.bias = BiasKind::key;
  out.push_back({db, km});
}

// qknext: one pair (its second block masked), rings of 2 NPC slots, the odd O panel either way,
// D = 72..576, the dropout row's head dim both ways, the tail split.
inline std::vector<Fwd90wsCase> qknext_cases() {
  auto cfg = [](int slots, int odd = 0) {
    fwd90ws::Config c{slots, 1, 0, 0, odd};
    c.qknext = 1;
    return c;
  };
  std::vector<Fwd90wsCase> out;
  for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
    out.push_back({make(1, 2, 2, 128, 64, 128, dt), cfg(4)});
    out.push_back({make(2, 4, 2, 333, 517, 512, dt), cfg(16)});
    for (int odd : {0, 1}) out.push_back({make(2, 8, 2, 130, 1000, 320, dt), cfg(12, odd)});
  }
  for (int D : {72, 136, 384, 448}) out.push_back({make(1, 4, 2, 200, 390, D), cfg(18)});
  out.push_back({make(1, 2, 2, 200, 390, 576), cfg(12)});
  lockstep_cases(
      out, [&](int slots) { return cfg(slots); }, make(1, 4, 4, 300, 400, 512), 18, 320);
  Problem d512 = make(1, 4, 2, 200, 333, 512);  // the dropout row's head dim, both ways
  d512.dropout = 0.1;
  fwd90ws::Config km = cfg(18);
  km.kmask = 1;
  out.push_back({d512, km});
  km.kmask = 0;
  out.push_back({d512, km});
  fwd90ws::Config tail = cfg(16);
  tail.tail = 1;
  out.push_back({make(1, 1, 1, 150, 1000, 320), tail, 8});
  return out;
}

// rows (pingpong 0 and 1): one CTA of one key block, a ring of two slots, rows past the last
// (consumer 1 of the last CTA with few or none), GQA and MQA packing across the consumers'
// boundary, D = 72..320, causal blocks consumer 0's rows do not see, a bias at D = 256 (it spills
// at 320), the tail split. The keep mask's row blocks are the consumers'.
inline std::vector<Fwd90wsCase> rows_cases() {
  std::vector<Fwd90wsCase> out;
  for (int pp : {0, 1}) {
    auto cfg = [pp](int slots) {
      fwd90ws::Config c{slots, 1, 0, 0};
      c.rows = 1;
      c.pingpong = pp;
      return c;
    };
    for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
      out.push_back({make(1, 1, 1, 128, 64, 128, dt), cfg(2)});
      out.push_back({make(1, 1, 1, 128, 200, 128, dt), cfg(2)});
      // 18 slots: the deepest ring beside 128 rows of Q at D = 320.
      out.push_back({make(2, 4, 2, 333, 517, 320, dt), cfg(dt == Dtype::bf16 ? 16 : 18)});
      out.push_back({make(1, 2, 2, 1000, 1000, 320, dt), cfg(12)});
    }
    for (int D : {72, 136, 200, 256})
      out.push_back({make(1, 4, 2, 200, 390, D), cfg(D > 200 ? 4 : 8)});
    out.push_back({make(1, 8, 1, 100, 300, 320), cfg(6)});  // MQA: 800 packed rows
    out.push_back({make(1, 2, 2, 198, 129, 320), cfg(6)});  // consumer 1 of the last CTA: 6 rows
    lockstep_cases(out, cfg, make(2, 4, 4, 300, 400, 256), 6, 256);
    fwd90ws::Config tail = cfg(16);
    tail.tail = 1;
    out.push_back({make(1, 1, 1, 150, 1000, 320), tail, 8});
    out.push_back({make(1, 2, 1, 300, 1000, 256), tail, 3});
  }
  return out;
}

}  // namespace ffpa::test
