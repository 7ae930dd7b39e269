// Warp-specialized flash-attention forward for Hopper (sm_90a): a TMA producer warpgroup and two
// consumer warpgroups that split the key blocks for QK and the columns of O for PV. Compiled at
// run time by NVRTC; the configuration comes in as macros (src/variants/ffpa_fwd_sm90ws.cpp
// sets them):
//   FFPA_D        head dim (multiple of 8, 72..1024)
//   FFPA_SPLIT    CTAs per query block, each holding a share of O's columns (1; 2 for D > 512,
//                 where 64 rows of O no longer fit two consumers' registers): every one of them
//                 computes the whole S, so QK is done SPLIT times
//   FFPA_SLOTS    8 KB slots of the K/V rings (even: half for each consumer's ring)
//   FFPA_CLUSTER  1, or 2: two CTAs of neighbouring query blocks share every K/V panel (each loads
//                 half of it and multicasts it to both), halving the L2 traffic per FLOP
//   FFPA_SEESAW   1: the consumers run half a pair apart (below); 0: in lock-step, exchanging
//                 their row maxima and then their P tiles each pair, both softmaxes at once. The
//                 seesaw serializes the two softmaxes in each pair's critical path: with a bias
//                 or dropout (long softmaxes) lock-step can be faster
//   FFPA_LEAD     1 (seesaw only): consumer 0 issues pair t's QK before it waits for consumer 1's
//                 P of pair t - 1, and keeps P_1 V_2t-1 in flight through its softmax, so its
//                 wait and that PV lie under tensor work; its ring then streams V of block
//                 2t - 1 after K of block 2t
//   FFPA_ODDPANEL the consumer (0 or 1) that owns the odd O panel when a CTA has an odd count
//                 (D = 320: 3 | 2 or 2 | 3): in the seesaw consumer 0's softmax lies in the pair's
//                 chain unoverlapped, consumer 1's under its own PV wgmmas
//   FFPA_PSMEM    0: the PVs take P from registers (wgmma RS; the other consumer's P is read from
//                 sP once a pair); 1: from sP (SS): 32 registers fewer, 8 KB more shared reads
//                 per O panel and P
//   FFPA_QKNEXT   1 (lock-step, P from registers, nothing drawn ahead): each consumer issues
//                 the next pair's QK before this pair's PVs, and runs the next pair's softmax
//                 while the PVs are in flight (FA3's intra-warpgroup overlap): the tensor pipe
//                 no longer idles through both softmaxes. Its ring streams K of block 2t + 2 + C
//                 before V of blocks 2t and 2t + 1 and holds all of pair t's V panels at once
//                 (check() refuses smaller rings with the reason); the last K panel is released
//                 once the first PV group is committed
//   FFPA_BF16, FFPA_CAUSAL, FFPA_BIAS, FFPA_DROPOUT as in ffpa_fwd.cuh (no split-KV here): the
//                 bias is read from global memory in the softmax (any broadcast shape, through its
//                 strides; a key bias stays in L1), the keep bits are drawn there per element pair
//   FFPA_AHEAD    1 (with dropout): each consumer draws the keep bits of its next key block a pair
//                 ahead, under PV groups it holds in flight (the seesaw: its own PV; lock-step:
//                 half under each PV), so no softmax draws
//   FFPA_KMASK    1 (with dropout): the keep bits come from the keep mask that
//                 ffpa_fwd_sm90ws_keep_kernel draws before the forward (a word a thread and key
//                 block, loaded a pair ahead): the Philox rounds run in a launch of their own on
//                 every scheduler instead of in the consumers' softmax, beside nothing
//   FFPA_ROWS     1 (D <= 320, lock-step knobs only): the rows mode below
//   FFPA_PINGPONG 1 (rows mode): the consumers take turns at the tensor pipe (FA3's ping-pong):
//                 each QK and each PV is one consumer's turn, passed on once its groups are
//                 issued, so one consumer's softmax runs under the other's groups
//
// A CTA holds 64 query rows (of the packed group * Nq rows of one kv head) and walks the keys in
// pairs of 64-key blocks. Consumer c (0 or 1) owns block 2t + c of pair t:
//  - QK: S_c = Q K_c^T over the whole (64-padded) D, wgmma m64n64k16 with Q and K from shared
//    memory; no partial sums to exchange.
//  - PV: consumer c owns the O columns [64 * c0, ...) of its panels (the first NP0 panels for
//    c = 0, the other NP1 for c = 1) and adds P_0 V_2t + P_1 V_2t+1 to them, its own P from
//    registers, the other consumer's loaded from shared memory (sP) into registers.
// The two consumers run half a pair apart (FlashMLA's seesaw), so one's softmax overlaps the
// other's tensor work. Their row maxima flow one way per pair:
//  - consumer 0 folds its block's maximum into the running maximum m (lazily: m moves only when
//    a row's maximum passes it by more than RESCALE_SLACK, in log2 units, so P stays below 2^8
//    and most pairs leave O unscaled), writes P_0 = exp2(S_0 - m) to sP[0] and m to smax[0],
//    arrives on BAR_P0, and multiplies P_0 V_2t while consumer 1 does its softmax;
//  - consumer 1 waits on BAR_P0, adopts m (rescaling its O), issues P_0 V_2t and folds its own
//    maximum into m under those wgmmas (when m moves again, rarely, O is rescaled once they
//    retired); it publishes P_1 and m (sP[1], smax[1], BAR_P1) and multiplies P_1 V_2t+1;
//  - consumer 0 waits on BAR_P1, adopts m (rescaling its O in the rare case) and multiplies
//    P_1 V_2t+1.
// Each consumer keeps the row sum of its own P (added at the end, relative to the same m).
// A producer thread per consumer streams that consumer's panels through its own FIFO ring of
// 8 KB slots (64 keys x 64 columns, 128-byte swizzle: the layout tile_off gives, so the wgmma
// descriptors are ffpa-fwd-sm90's) in exactly the order the consumer reads them: K of its block,
// then V of blocks 2t and 2t + 1 in its O columns. Each slot has a full and an empty mbarrier; a
// consumer releases a slot as soon as the wgmma group that read it retired. With a ring each,
// neither consumer waits for a slot the other still holds, so the half-pair offset costs
// nothing. No wgmma group is in flight across a loop edge (that makes ptxas serialize every
// wgmma, C7514/C7515). tools/ffpa_fwd_sm90ws_sim.py checks the ring order and the barrier
// protocol.
//
// The rows mode (FFPA_ROWS, D <= 320, where 64 rows of the whole O fit a consumer's registers):
// a CTA holds 128 query rows, consumer c the rows [64 c, 64 c + 64) and all of O's columns. Both
// consumers walk the same key blocks, one at a time (QK, softmax, PV with P from registers), and
// read every panel of one ring that a single producer thread fills (K panels of a block, then its
// V panels; a slot is free once all 8 consumer warps released it). Nothing passes between the
// consumers: no maxima or P tiles exchanged, no named barrier in the key loop, so one's softmax
// runs while the other's wgmmas do. Each K/V panel loaded serves 128 rows (64 in the column
// split), and no P tile goes through shared memory: ~27 % less shared-memory traffic per FLOP at
// D = 320 (docs/notes/ffpa_fwd_sm90ws.md step 13).
#pragma once

#include "ffpa_fwd_sm90ws_layout.h"
#include "tma.cuh"
#include "wgmma.cuh"

namespace ffpa_fwd90ws {

using namespace ffpa_dev;

constexpr int D = FFPA_D;
constexpr bool ROWS = FFPA_ROWS;
constexpr bool PINGPONG = FFPA_PINGPONG;
constexpr int WR = ffpa_layout::FwdSm90ws::kRows;  // query rows of a consumer
constexpr int BR = ffpa_layout::fwd_sm90ws_cta_rows(ROWS);
constexpr int BC = ffpa_layout::FwdSm90ws::kKeys;
constexpr int R = FFPA_SLOTS;
constexpr int RC = ROWS ? R : R / 2;  // slots of each consumer's ring (rows mode: the one ring)
constexpr int CL = FFPA_CLUSTER;
constexpr bool PSMEM = FFPA_PSMEM;
constexpr bool SEESAW = FFPA_SEESAW;
// Keep bits drawn under tensor work: the softmaxes lie in the pair's chain, the draws then do
// not.
constexpr bool AHEAD = FFPA_AHEAD && FFPA_DROPOUT;
constexpr bool KMASK = FFPA_KMASK && FFPA_DROPOUT;
constexpr bool LEAD = SEESAW && FFPA_LEAD;
constexpr bool QKNEXT = FFPA_QKNEXT;
constexpr int DP = (D + 63) / 64 * 64;  // zero-filled past D (TMA and the Q load)
constexpr int NP = DP / 64;             // 64-column panels of Q and K
constexpr int SPLIT = FFPA_SPLIT;
constexpr int NPO = (NP + SPLIT - 1) / SPLIT;  // O (and V) panels of a CTA; the last CTA's may
                                               // lie past D: TMA zero-fills them, unstored
// O panels of consumer 0 and of consumer 1 (rows mode: all of them, each for its own rows)
constexpr int NP0 = ROWS ? NPO : (NPO + 1 - FFPA_ODDPANEL) / 2;
constexpr int NP1 = ROWS ? NPO : NPO - NP0;
constexpr int PANEL = ffpa_layout::FwdSm90ws::kPanel;  // one ring slot
constexpr int Q_PANEL = BR * 128;                      // a 64-column panel of Q
constexpr int NT = 384;
constexpr ffpa_layout::FwdSm90ws LAYOUT = ffpa_layout::fwd_sm90ws_layout(DP, R, ROWS);
constexpr int OFF_RING = LAYOUT.ring;
constexpr int OFF_P = LAYOUT.p;
constexpr int OFF_STATS = LAYOUT.stats;
constexpr int OFF_ROWS = LAYOUT.rows;
constexpr int OFF_DROP = LAYOUT.drop;
constexpr int OFF_UNIT = LAYOUT.unit;
// Whether the last wave's units may run as pieces (a key range each): never with causal masking
// (units differ in work); a cluster's CTAs take one key range (fwd_sm90ws_piece).
constexpr bool PIECES = !FFPA_CAUSAL;
constexpr int OFF_BARS = LAYOUT.bars;
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
constexpr float RESCALE_SLACK = 8.f;

static_assert(D % 8 == 0 && D > 64 && D <= 1024, "D: a multiple of 8 in 72..1024");
static_assert(ROWS ? NPO <= 5 && SPLIT == 1 : NP0 <= 4 && NP1 <= 4,
              "O of a consumer: at most 4 panels (128 registers), 5 in the rows mode (D <= 320)");
// The rows mode's consumers do not exchange maxima or P: lock-step knobs only, one CTA.
static_assert(!ROWS || (!SEESAW && !PSMEM && !QKNEXT && !AHEAD && CL == 1 && FFPA_ODDPANEL == 0),
              "rows: no seesaw, psmem, qknext, ahead, cluster or oddpanel");
// Taking turns, a consumer holds all V panels of a block in flight while the other's turn runs.
static_assert(!PINGPONG || (ROWS && RC >= NPO), "pingpong: rows mode, a block's V panels held");
static_assert(FFPA_ODDPANEL == 0 || FFPA_ODDPANEL == 1, "the odd O panel goes to consumer 0 or 1");
static_assert(SPLIT == 1 || CL == 1, "the CTAs of a split read different V panels");
static_assert(CL == 1 || CL == 2, "cluster of 1 or 2 CTAs");
static_assert(R % 2 == 0 && RC >= 2, "two rings of at least two slots (rows mode: one ring)");
// In the seesaw consumer 1 keeps its P_0 V_2t groups in flight through its softmax, so its ring
// holds all its V panels of a block at once (check() refuses smaller rings with the reason; the
// rows mode retires its groups as it goes, or holds them with pingpong, below).
static_assert(ROWS || RC >= NP1, "consumer 1's ring holds its V panels of a block");
// Drawing ahead, consumer 0 holds its P_0 V_2t groups in flight too.
static_assert(!(AHEAD || LEAD) || RC >= NP0, "consumer 0's ring holds its V panels of a block");
static_assert(!(AHEAD && KMASK), "the keep bits are drawn ahead or read from the mask, not both");
// The next pair's softmax writes sP and P while the PVs read the last ones: P from registers,
// both consumers in lock-step, and its draws lie under the PVs already.
static_assert(!QKNEXT || (!SEESAW && !PSMEM && !AHEAD), "qknext: lock-step, P from registers");
// With qknext a consumer holds all its V panels of a pair at once.
static_assert(!QKNEXT || (RC >= 2 * NP0 && RC >= 2 * NP1), "qknext: rings of 2 NPC slots");

// Named barriers (0 is __syncthreads): consumer 0's P and maximum published (consumer 0 arrives,
// consumer 1 waits), consumer 1's (the other way round), Q and the row table loaded, the row
// sums. In lock-step both consumers wait on BAR_P0 (row maxima exchanged) and BAR_P1 (P tiles).
// With pingpong the turn at the tensor pipe passes to consumer 0 on BAR_T0, to 1 on BAR_T1.
enum : int { BAR_P0 = 1, BAR_P1 = 2, BAR_Q = 3, BAR_SUM = 4, BAR_T0 = 5, BAR_T1 = 6 };

// Addresses are computed where used (opaque): the unrolled panel loops would otherwise hoist
// every panel's addresses into registers the O accumulator needs.
// The dropout stream's seed and smallest kept word, read from shared memory where the keep bits
// are drawn.
struct DropParams {
  unsigned long long seed;
  u32 kmin;
};

// A consumer's ring: RC slots (slot i at base + i * PANEL), full[i] at bars + 8 i, empty[i] at
// bars + 8 (RC + i).
struct Ring {
  u32 base, bars;
  __device__ u32 slot(int seq) const { return base + opaque((u32)(seq % RC) * PANEL); }
  __device__ u32 full(int seq) const { return bars + opaque((u32)(seq % RC) * 8); }
  __device__ u32 empty(int seq) const { return bars + opaque((u32)(RC + seq % RC) * 8); }
  __device__ static u32 parity(int seq) { return (u32)(seq / RC) & 1u; }
};
template <int C>
__device__ __forceinline__ Ring ring_of(u32 sQ) {
  constexpr int c = ROWS ? 0 : C;  // the rows mode's consumers share one ring
  return Ring{sQ + OFF_RING + c * RC * PANEL, sQ + OFF_BARS + c * 2 * RC * 8};
}

template <int C>
constexpr int NPC = C == 0 ? NP0 : NP1;  // O panels of consumer C
template <int C>
constexpr bool LEADS = C == 0 && LEAD;  // consumer C leads (FFPA_LEAD)

// Sequence numbers in consumer C's ring (its producer's order) of pair t: K panel q of block
// 2t + C, then V panel k (of C's O columns) of block 2t + i, i = 0 then 1. When consumer 0
// leads, its ring holds per pair K of block 2t, V of block 2t - 1 (t > 0), V of block 2t, and
// after the last pair V of its last odd block: V of block 2t + 1 follows K of block 2t + 2.
// With qknext the V panels of both blocks of pair t follow K of block 2t + 2 + C. In the rows
// mode t counts key blocks: K panel q, then V panel k of block t (i = 0).
template <int C>
__device__ __forceinline__ int seq_k(int t, int q) {
  if constexpr (ROWS) return t * 2 * NP + q;
  if constexpr (LEADS<C>) return max(0, t * (NP + 2 * NP0) - NP0) + q;
  if constexpr (QKNEXT) return max(0, t * (NP + 2 * NPC<C>)-2 * NPC<C>) + q;
  return t * (NP + 2 * NPC<C>)+q;
}
template <int C>
__device__ __forceinline__ int seq_v(int t, int i, int k, int npairs) {
  if constexpr (ROWS) return t * 2 * NP + NP + k;
  if constexpr (LEADS<C>) {
    constexpr int U = NP + 2 * NP0;
    return i == 0 ? t * U + NP + k : (t + 1) * U - NP0 + (t + 1 < npairs ? NP : 0) + k;
  }
  if constexpr (QKNEXT)
    return (t + 1) * (NP + 2 * NPC<C>)-2 * NPC<C> + (t + 1 < npairs ? NP : 0) + i * NPC<C> + k;
  return t * (NP + 2 * NPC<C>)+NP + i * NPC<C> + k;
}

// A consumer warp is done with a slot: one arrival per warp on the slot's empty barrier, in every
// CTA of the cluster (each CTA's producer writes its half of the slot into both).
__device__ __forceinline__ void release(const Ring& ring, int seq, int lane) {
  if (lane == 0) {
    if (CL == 1) {
      mbar_arrive(ring.empty(seq));
    } else {
#pragma unroll
      for (int r = 0; r < CL; ++r) mbar_arrive_cluster(ring.empty(seq), r);
    }
  }
}

// Panel (block j, columns 64 p) of K or V into the slot of seq.
__device__ __forceinline__ void produce(const Ring& ring, const FfpaTmaDesc& map, int seq, int j,
                                        int p, int kvh, int b, u32 rank) {
  mbar_wait(ring.empty(seq), Ring::parity(seq) ^ 1u);
  mbar_expect_tx(ring.full(seq), PANEL);
  if (CL == 1) {
    tma_load_4d(ring.slot(seq), map, p * 64, j * BC, kvh, b, ring.full(seq));
  } else {
    // Rank r loads keys [32 r, 32 r + 32) of the block for both CTAs.
    constexpr int HALF = PANEL / CL;
    tma_load_4d_multicast(ring.slot(seq) + rank * HALF, map, p * 64, j * BC + rank * (BC / CL), kvh,
                          b, ring.full(seq), (unsigned short)((1u << CL) - 1));
  }
}

// Consumer C's panels in the order it reads them (seq_k, seq_v); rows mode: both consumers',
// npairs counting key blocks. Rolled loops: unrolled, they need more than the producer's 24
// registers at D > 896.
template <int C>
__device__ __forceinline__ void produce_ring(const FfpaTmaDesc& tk, const FfpaTmaDesc& tv,
                                             const Ring& ring, int jb, int npairs, int kvh, int b,
                                             u32 rank, int split) {
  const int v0 = split * NPO + (C == 0 ? 0 : NP0);  // the consumer's V panels
  int seq = 0;
  if constexpr (ROWS) {
#pragma unroll 1
    for (int t = 0; t < npairs; ++t) {
#pragma unroll 1
      for (int q = 0; q < NP; ++q) produce(ring, tk, seq++, jb + t, q, kvh, b, rank);
#pragma unroll 1
      for (int k = 0; k < NPO; ++k) produce(ring, tv, seq++, jb + t, k, kvh, b, rank);
    }
  } else if constexpr (LEADS<C>) {
#pragma unroll 1
    for (int t = 0; t < npairs; ++t) {
#pragma unroll 1
      for (int q = 0; q < NP; ++q) produce(ring, tk, seq++, jb + 2 * t, q, kvh, b, rank);
#pragma unroll 1
      for (int i = t > 0 ? -1 : 0; i < 1; ++i)
#pragma unroll 1
        for (int k = 0; k < NP0; ++k)
          produce(ring, tv, seq++, jb + 2 * t + i, v0 + k, kvh, b, rank);
    }
#pragma unroll 1
    for (int k = 0; k < (npairs > 0 ? NP0 : 0); ++k)
      produce(ring, tv, seq++, jb + 2 * npairs - 1, v0 + k, kvh, b, rank);
  } else if constexpr (QKNEXT) {
#pragma unroll 1
    for (int q = 0; q < (npairs > 0 ? NP : 0); ++q)
      produce(ring, tk, seq++, jb + C, q, kvh, b, rank);
#pragma unroll 1
    for (int t = 0; t < npairs; ++t) {
#pragma unroll 1
      for (int q = 0; q < (t + 1 < npairs ? NP : 0); ++q)
        produce(ring, tk, seq++, jb + 2 * t + 2 + C, q, kvh, b, rank);
#pragma unroll 1
      for (int i = 0; i < 2; ++i)
#pragma unroll 1
        for (int k = 0; k < NPC<C>; ++k)
          produce(ring, tv, seq++, jb + 2 * t + i, v0 + k, kvh, b, rank);
    }
  } else {
    for (int t = 0; t < npairs; ++t) {
#pragma unroll 1
      for (int q = 0; q < NP; ++q) produce(ring, tk, seq++, jb + 2 * t + C, q, kvh, b, rank);
#pragma unroll 1
      for (int i = 0; i < 2; ++i)
#pragma unroll 1
        for (int k = 0; k < NPC<C>; ++k)
          produce(ring, tv, seq++, jb + 2 * t + i, v0 + k, kvh, b, rank);
    }
  }
}

// O *= f (f per row half of this thread) in the warps where a row's factor is not 1. No wgmma
// group may be in flight on O.
template <int N>
__device__ __forceinline__ void rescale(float (&o)[N][8][4], const float (&f)[2]) {
  if (__any_sync(0xffffffffu, f[0] != 1.f || f[1] != 1.f)) {
#pragma unroll
    for (int c = 0; c < N; ++c) {
      fence_acc(o[c]);
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[c][n][e] *= f[e >> 1];
      fence_acc(o[c]);
    }
  }
}

// O += P V_(2t + i) over consumer C's O panels, one wgmma group per V panel; P from registers
// (a), or with psmem from the tile at sPi. With RETIRE, a panel's slot is released once its
// group retired (wait<1> after the next commit) and the call returns with every group retired;
// without, the groups stay in flight and the caller retires and releases them. With KNEXT
// (qknext): the last QK group of pair t + 1, committed before these, is retired and its slot
// released once the first of them is committed (the ring then needs no slot for it beside the V
// panels).
template <int C, bool RETIRE, bool KNEXT = false>
__device__ __forceinline__ void pv(float (&o)[NPC<C>][8][4], const u32 (&a)[4][4], u32 sPi,
                                   const Ring& ring, int t, int i, int npairs, int lane) {
#pragma unroll
  for (int k = 0; k < NPC<C>; ++k) {
    const int seq = seq_v<C>(t, i, k, npairs);
    mbar_wait(ring.full(seq), Ring::parity(seq));
    const u32 sv = ring.slot(seq);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      const u64 db = desc_mn(sv + ks * 16 * 128);
      if (!PSMEM)
        wgmma_rs(o[k], a[ks], db);
      else
        wgmma<0, 1>(o[k], desc_k(sPi + ks * 32), db);
    }
    wgmma_commit();
    if (RETIRE && k > 0) {
      wgmma_wait<1>();
      release(ring, seq_v<C>(t, i, k - 1, npairs), lane);
    }
    if (KNEXT && k == 0) {
      wgmma_wait<1>();
      release(ring, seq_k<C>(t + 1, NP - 1), lane);
    }
  }
  if (RETIRE) {
    wgmma_wait<0>();
    release(ring, seq_v<C>(t, i, NPC<C> - 1, npairs), lane);
  }
}

// Retires the groups pv<C, false> left in flight and releases their slots.
template <int C>
__device__ __forceinline__ void retire_pv(const Ring& ring, int t, int i, int npairs, int lane) {
  wgmma_wait<0>();
#pragma unroll
  for (int k = 0; k < NPC<C>; ++k) release(ring, seq_v<C>(t, i, k, npairs), lane);
}

// The CTA's unit in shared memory, sunit[U_...] (consume reads it where it uses it). U_NT0,
// U_NT1: the key blocks the rows of consumer 0 and 1 see (with causal masking consumer 0's, and
// where the CTA spans two heads consumer 1's, may be fewer than the CTA's), those the keep kernel
// draws for them.
enum : int { U_M0, U_KVH, U_B, U_SPLIT, U_JB, U_SLOT, U_NT0, U_NT1 };
__device__ __forceinline__ int first_block(const int* sunit) {  // of the CTA's key range
  return PIECES ? sunit[U_JB] : 0;
}

#if FFPA_DROPOUT
// The keep mask's bit order (kmask): the decision of element e of P word (n, h) (slice n, row
// half h: bit (n * 2 + h) * 2 + e of dropout_keep_bits) sits at bit 8 (2 h + e) + 7 - n, so the
// mask word shifted left by n holds word (n, h)'s two decisions in the sign bits of bytes 2 h and
// 2 h + 1, and one byte permute spreads them over the word's halves (mask_halves): 2
// instructions a P word where spreading two bits took 6.
//
// A thread's mask word of one key block, drawn in that order (dropout_keep_bits' elements: g is
// its stream position there). Lanes 2i and 2i + 1 draw the 4 keys of a slice for rows h = 0 and
// 1; each keeps two of its decisions (the even lane keys 0, 1 of row 0, the odd lane keys 2, 3
// of row 1) and sends the other two, placed where the partner keeps them, in one shuffle. The
// keep kernel is bound by the integer ALU pipe (the Philox XORs and compares): placing the bits
// directly saves the slice-wise swaps and a permutation of the word.
// 2 acc + (x >= kmin), given negk = 2^32 - kmin (kmin > 0): x + negk carries out exactly when
// x >= kmin, and the carry feeds a multiply-add: one instruction on the integer ALU pipe (which
// binds the keep kernel) and one on the FMA pipe a decision, where a compare, a select and a share
// of an OR took ~2.5 on the ALU pipe. An addition's carry, not a subtraction's borrow: sub.cc
// then madc compiled to IADD3 with -kmin and IMAD.X taking that addition's carry (x >= kmin),
// not the borrow PTX documents for sub.cc, and the mask came out inverted on an H100.
__device__ __forceinline__ u32 shift_in_keep(u32 acc, u32 x, u32 negk) {
  u32 out;
  asm("{\n\t.reg .u32 t;\n\tadd.cc.u32 t, %1, %2;\n\tmadc.lo.u32 %0, %3, 2, 0;\n\t}"
      : "=r"(out)
      : "r"(x), "r"(negk), "r"(acc));
  return out;
}
__device__ __forceinline__ u32 keep_mask_word(unsigned long long seed, unsigned long long g,
                                              u32 kmin, int lane) {
  const u32 o = (u32)g & 3;  // the same for every slice: they are 8 apart
  u32 p01 = 0, p23 = 0;      // decisions of keys 0, 1 and of keys 2, 3, at bits 7 - n, 15 - n
  if (kmin == 0) {  // every word keeps (a probability below the smallest uniform)
    p01 = p23 = 0xffffu;
  } else if (o == 0) {
    const u32 negk = 0u - kmin;
    u32 d[4] = {0, 0, 0, 0};  // word w's keeps, shifted in: slice n at bit 7 - n
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const FfpaPhilox4 r = ffpa_philox_block(seed, (g >> 2) + n * 2);
#pragma unroll
      for (int w = 0; w < 4; ++w) d[w] = shift_in_keep(d[w], r.x[w], negk);
    }
    p01 = d[0] | d[1] << 8;
    p23 = d[2] | d[3] << 8;
  } else {
#pragma unroll 1
    for (int n = 0; n < 8; ++n) {
      const u32 nib = keep4(seed, (g + n * 8) >> 2, o, kmin);
      p01 |= (nib & 1u) << (7 - n) | (nib >> 1 & 1u) << (15 - n);
      p23 |= (nib >> 2 & 1u) << (7 - n) | (nib >> 3 & 1u) << (15 - n);
    }
  }
  const bool odd = lane & 1;
  const u32 send = odd ? p01 << 16 : p23, stay = odd ? p23 << 16 : p01;
  return stay | __shfl_xor_sync(0xffffffffu, send, 1);
}
// 0xffff for each kept half of P word (n, h), from t = the mask word shifted left by n: the
// sign bits of bytes 2 h (the low half) and 2 h + 1, each replicated over two bytes.
__device__ __forceinline__ u32 mask_halves(u32 t, int h) {
  u32 m;
  if (h)
    asm("prmt.b32 %0, %1, 0, 0xbbaa;\n" : "=r"(m) : "r"(t));
  else
    asm("prmt.b32 %0, %1, 0, 0x9988;\n" : "=r"(m) : "r"(t));
  return m;
}
#endif

// One consumer warpgroup (C = 0 or 1) over its pairs (key blocks jb + 2 t + C), then its part of
// the epilogue: O and the LSE, or for a piece of a tail unit (slot >= 0) its partial O and LSE.
// The unit (m0, kvh, b, split, jb, slot) is read from shared memory where used: held in
// registers through the pair loop, it made ptxas spill (a grid of blockIdx.y = kvh and
// blockIdx.z = b cost none: the special registers are read again). Plain loads: volatile ones
// pinned the bias offset's and spilled too.
template <int C>
__device__ __forceinline__ void consume(const FfpaFwdParams& p, u32 sQ, u32 sP, float* sstat,
                                        const int* srow, const DropParams* sdrop, const int* sunit,
                                        int npairs, int rows_total, int r_lo, int diag) {
  constexpr int NO = NPC<C>;  // O panels of this consumer
  const Ring ring = ring_of<C>(sQ);
  const int t128 = threadIdx.x & 127, lane = t128 & 31, wq = t128 >> 5;
  const int r0 = ROWS ? WR * C : 0;  // the consumer's first row in the CTA's
  // [2][BR]: the running maximum each consumer published (the rows mode reserves none, reads none)
  float* smax = sstat;
  float* ssum = sstat + 2 * BR;      // [2][BR]
  // This thread's element pair (row half h, n8 group n) of a P tile, in the A-fragment layout.
  auto p_at = [&](u32 tile, int h, int n) {
    return tile + tile_off(wq * 16 + (lane >> 2) + h * 8, n * 8 + (lane & 3) * 2, WR);
  };
  // The other consumer's P tile into registers (the A-fragment layout of the own).
  auto load_p = [&](u32 tile, u32(&pb)[4][4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int n = 0; n < 8; ++n)
        asm volatile("ld.shared.b32 %0, [%1];\n"
                     : "=r"(pb[n / 2][(n & 1) * 2 + h])
                     : "r"(p_at(tile, h, n)));
  };
  // Adopts the running maximum the other consumer published (never below the own): O and the
  // row sums follow it.
  auto adopt = [&](const float* m_other, float(&m_run)[2], float(&l_run)[2], float(&f)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m = m_other[wq * 16 + (lane >> 2) + h * 8];
      f[h] = m == m_run[h] ? 1.f : exp2f(m_run[h] - m);
      m_run[h] = m;
      l_run[h] *= f[h];
    }
  };

  float o[NO][8][4];
#pragma unroll
  for (int c = 0; c < NO; ++c)
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[c][n][e] = 0.f;
  float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.f, 0.f};
#if FFPA_DROPOUT
  // Keep bits of this thread's 32 elements of a key block (lanes 2i and 2i + 1 share each
  // Philox block); a dropped element's half of its packed pair is zeroed in the softmax. key0:
  // the key of this thread's first S column. The seed and the smallest kept word come from
  // shared memory: kept in registers across the pair loop, one of them is what ptxas spilled.
  auto pos = [&](int key0) {  // this thread's stream position at key0
    const int drow = r0 + wq * 16 + (lane >> 2) + (lane & 1) * 8;
    return p.dropout_offset +
           (((unsigned long long)sunit[U_B] * p.Hq + srow[BR + drow]) * p.Nq + srow[drow]) *
               (unsigned long long)p.Nkv +
           key0 - (lane & 1) * 2;
  };
  auto draw = [&](int key0) {
    return dropout_keep_bits<8>(sdrop->seed, pos(key0), sdrop->kmin, lane);
  };
  u32 keep = 0;  // AHEAD: block 2t + C's, drawn under the PV groups of the pair before
  // The first block's once, rolled: one Philox block of code (fetch stalls cost the dropout row).
  if (AHEAD && npairs > 0)
    keep = dropout_keep_bits<8, 1>(sdrop->seed, pos((first_block(sunit) + C) * BC + (lane & 3) * 2),
                                   sdrop->kmin, lane);
  // KMASK: this thread's word of key block j; none past the last tile of the consumer's rows (an
  // odd count's last block, masked out entirely; in the rows mode a consumer's rows may see
  // fewer blocks than the CTA's) or for a cluster's padding CTA (or a consumer) past the rows.
  auto mask_word = [&](int j) -> u32 {
    const int m0 = sunit[U_M0] + r0;
    if (m0 >= rows_total || j >= sunit[C == 0 ? U_NT0 : U_NT1]) return 0u;
    const auto km = ffpa_layout::fwd_sm90ws_keep(p.B, p.Hkv, rows_total, p.Nkv);
    const long long rb = ((long long)sunit[U_B] * p.Hkv + sunit[U_KVH]) * km.row_blocks + m0 / WR;
    return __ldg(p.keep_mask + (rb * km.key_blocks + j) * km.kKeepWords + t128);
  };
  if (KMASK) {
    grid_dependency_wait();  // the keep kernel wrote the mask (chained by programmatic launch)
    keep = mask_word(first_block(sunit) + (ROWS ? 0 : C));
  }
#endif

  // Consumer 0 in the seesaw: consumer 1's maximum (rarely above this one's) and P_1 of pair
  // tp, then P_1 V_2tp+1. Leading: kseq (>= 0) is the slot of the last QK group, still in
  // flight, retired and released before the PV groups need the ring; with hold the PV groups
  // stay in flight through the softmax that follows (retired before this consumer publishes P_0:
  // with psmem they read sP[1], which consumer 1 then overwrites).
  auto pv_p1 = [&](int tp, int kseq, bool hold) {
    named_sync(BAR_P1, 256);
    if (kseq >= 0) {
      wgmma_wait<0>();
      release(ring, kseq, lane);
    }
    float f[2];
    adopt(smax + BR, m_run, l_run, f);
    rescale(o, f);
    u32 pb[4][4];
    if (!PSMEM) {
      load_p(opaque(sP + WR * BC * 2), pb);
      fence_regs(pb);
    }
    if (hold)
      pv<C, false>(o, pb, opaque(sP + WR * BC * 2), ring, tp, 1, npairs, lane);
    else
      pv<C, true>(o, pb, opaque(sP + WR * BC * 2), ring, tp, 1, npairs, lane);
  };

  // S = Q K_j^T for pair t's block j: one group per K panel; a panel's slot is released once
  // the group that read it retired (wait<1> after the next group is committed). The last group
  // is left in flight.
  auto qk = [&](int t, float(&s)[8][4]) {
#pragma unroll
    for (int q = 0; q < NP; ++q) {
      const int seq = seq_k<C>(t, q);
      mbar_wait(ring.full(seq), Ring::parity(seq));
      // opaque: descriptors of Q and P are the same every pair; hoisted out of the pair loop
      // they would hold 2 registers each. The consumer's rows start r0 rows into each Q panel.
      const u32 sk = ring.slot(seq), sq = opaque(sQ + q * Q_PANEL + r0 * 128);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if (q == 0 && kk == 0)
          wgmma_first<0, 0>(s, desc_k(sq), desc_k(sk));
        else
          wgmma<0, 0>(s, desc_k(sq + kk * 32), desc_k(sk + kk * 32));
      }
      wgmma_commit();
      if (q > 0) {
        wgmma_wait<1>();
        release(ring, seq_k<C>(t, q - 1), lane);
      }
    }
  };
  // Scores of block j in log2 units, masked; the row maxima.
  auto scores = [&](int j, float(&s)[8][4], float(&rmax)[2]) {
    const bool edge = (j + 1) * BC > p.Nkv || (FFPA_CAUSAL && (j + 1) * BC - 1 > r_lo + diag);
    const int key0 = j * BC + (lane & 3) * 2;  // key of this thread's first S column
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = r0 + wq * 16 + (lane >> 2) + h * 8;
      // Columns kof >= lim are masked: past Nkv, or past the row's last causal key.
      const int kv_lim = p.Nkv - key0;
      int lim = kv_lim;
      if (FFPA_CAUSAL) lim = min(lim, srow[row] + diag - key0 + 1);
#if FFPA_BIAS
      const long long boff = sunit[U_B] * p.bias_batch_stride +
                             srow[BR + row] * p.bias_head_stride + srow[row] * p.bias_row_stride +
                             key0;
#endif
      float v = NEG_INF;
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kof = n * 8 + e;
          float x = s[n][h * 2 + e] * p.scale_log2;
#if FFPA_BIAS
          if (kof < kv_lim) x += bias_at(p, boff + kof) * LOG2E;
#endif
          if (edge && kof >= lim) x = NEG_INF;
          s[n][h * 2 + e] = x;
          v = fmaxf(v, x);
        }
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
      rmax[h] = v;
    }
  };

  // Lock-step: both fold the larger of the two blocks' maxima; the pair acts as one 128-key
  // block.
  auto pair_max = [&](float(&rmax)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if ((lane & 3) == 0) smax[C * BR + wq * 16 + (lane >> 2) + h * 8] = rmax[h];
    named_sync(BAR_P0, 256);
#pragma unroll
    for (int h = 0; h < 2; ++h)
      rmax[h] = fmaxf(rmax[h], smax[(1 - C) * BR + wq * 16 + (lane >> 2) + h * 8]);
  };
  // Fold this block's maxima into the running maximum, lazily: it moves only when a row's
  // maximum passes it by more than RESCALE_SLACK (log2 units), so P stays below 2^8 (exact
  // enough in fp32 sums and as bf16/fp16) and most pairs leave O unscaled. P in the input
  // dtype, as the A fragments of the PV (k16 step ks: n8 groups 2 ks and 2 ks + 1); with psmem
  // only staged here on the way to sP (not in the rows mode: no consumer reads another's P).
  // Returns this consumer's P tile in sP.
  auto probs = [&](int j, float(&s)[8][4], const float(&rmax)[2], u32(&pa)[4][4], float(&g)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = wq * 16 + (lane >> 2) + h * 8;
      g[h] = 1.f;
      if (rmax[h] > m_run[h] + RESCALE_SLACK) {
        g[h] = exp2f(m_run[h] - rmax[h]);
        m_run[h] = rmax[h];
      }
      const float base = m_run[h] == NEG_INF ? 0.f : m_run[h];
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const float p0 = exp2f(s[n][h * 2] - base), p1 = exp2f(s[n][h * 2 + 1] - base);
        sum += p0 + p1;
        pa[n / 2][(n & 1) * 2 + h] = pack2(p0, p1);
      }
      l_run[h] = l_run[h] * g[h] + sum;
      if (SEESAW && (lane & 3) == 0) smax[C * BR + row] = m_run[h];
    }
#if FFPA_DROPOUT
    {
      // In lock-step drawn here, once S is dead, so the Philox state does not compete with it.
      if (!AHEAD && !KMASK) keep = draw(j * BC + (lane & 3) * 2);
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          u32& w = pa[n / 2][(n & 1) * 2 + h];
          if (KMASK) {
            w &= mask_halves(keep << n, h);
          } else {
            const u32 k2 = keep >> ((n * 2 + h) * 2);
            w &= ((k2 & 1) ? 0xffffu : 0u) | ((k2 & 2) ? 0xffff0000u : 0u);
          }
        }
    }
#endif
    const u32 sPown = opaque(sP + C * (WR * BC * 2));
#pragma unroll
    for (int h = 0; h < 2 && !ROWS; ++h)
#pragma unroll
      for (int n = 0; n < 8; ++n)
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(p_at(sPown, h, n)),
                     "r"(pa[n / 2][(n & 1) * 2 + h]));
    // With psmem the PVs read sP through the async proxy.
    if (PSMEM) fence_proxy_async();
    return sPown;
  };

  // qknext: pair t's PVs, both P tiles from sP into registers, where they stay until the PV
  // groups that read them retired (in-flight RS operands); loaded afresh each pair, never
  // carried across the loop edge (a copy there made ptxas serialize the wgmmas, C7513). The
  // groups stay in flight.
  // knext: the last QK group (pair t + 1's), still in flight, retired and its slot released once
  // the first PV group is committed.
  auto pv_pair = [&](int t, bool knext) {
    u32 pa[4][4], pb[4][4];
    load_p(opaque(sP), pa);
    load_p(opaque(sP + WR * BC * 2), pb);
    fence_regs(pa);
    fence_regs(pb);
    if (knext)
      pv<C, false, true>(o, pa, opaque(sP), ring, t, 0, npairs, lane);
    else
      pv<C, false>(o, pa, opaque(sP), ring, t, 0, npairs, lane);
    pv<C, false>(o, pb, opaque(sP + WR * BC * 2), ring, t, 1, npairs, lane);
  };
  auto retire_pair = [&](int t) {
    retire_pv<C>(ring, t, 0, npairs, lane);
#pragma unroll
    for (int k = 0; k < NO; ++k) release(ring, seq_v<C>(t, 1, k, npairs), lane);
  };
  // The softmax of block j into sP (both consumers: the tiles are read once BAR_P1 passed).
  auto softmax_next = [&](int j, float(&s)[8][4], float(&g)[2]) {
    fence_acc(s);
    float rmax[2];
    u32 pn[4][4];
    scores(j, s, rmax);
    pair_max(rmax);
    probs(j, s, rmax, pn, g);
    named_sync(BAR_P1, 256);
  };
  if constexpr (QKNEXT) {
    if (npairs > 0) {
      float s[8][4], g[2];  // O is zero: g is not needed
      qk(0, s);
      wgmma_wait<0>();
      release(ring, seq_k<C>(0, NP - 1), lane);
      softmax_next(first_block(sunit) + C, s, g);
    }
    // Pairs t < npairs - 1: the next pair's QK, this pair's PVs, the next softmax under them.
    // sP is rewritten once both consumers passed the next BAR_P0, after they loaded it.
#pragma unroll 1
    for (int t = 0; t + 1 < npairs; ++t) {
      const int j = first_block(sunit) + 2 * t + 2 + C;  // this consumer's next key block
      float s[8][4], g[2];
      qk(t + 1, s);
      pv_pair(t, true);  // returns with the QK groups retired
#if FFPA_DROPOUT
      // Read under the groups (issued before them it made ptxas spill 8 bytes at D = 512).
      if (KMASK) keep = mask_word(j);
#endif
      softmax_next(j, s, g);
      retire_pair(t);
      rescale(o, g);
    }
    if (npairs > 0) {
      pv_pair(npairs - 1, false);
      retire_pair(npairs - 1);
    }
  }
  // Rows mode: each key block's QK, softmax and PV in turn (npairs counts blocks); the other
  // consumer's run beside them. With pingpong the turns go QK of consumer 0, QK of 1, PV of 0,
  // PV of 1, ...: consumer 0 starts with the turn, consumer 1's last PV passes it to no one.
  auto turn_wait = [&](bool first) {
    if (PINGPONG && !first) named_sync(C == 0 ? BAR_T0 : BAR_T1, 256);
  };
  auto turn_pass = [&](bool last) {
    if (PINGPONG && !last) named_arrive(C == 0 ? BAR_T1 : BAR_T0, 256);
  };
#pragma unroll 1
  for (int t = 0; ROWS && t < npairs; ++t) {
    const int j = first_block(sunit) + t;
#if FFPA_DROPOUT
    // KMASK: the next block's word, a block ahead of its use (the mask is read from HBM).
    const u32 keep_next = KMASK && t + 1 < npairs ? mask_word(j + 1) : 0u;
#endif
    float s[8][4];
    turn_wait(C == 0 && t == 0);
    qk(t, s);  // its last group in flight
    turn_pass(false);
    wgmma_wait<0>();
    release(ring, seq_k<C>(t, NP - 1), lane);
    fence_acc(s);
    float rmax[2], g[2];
    u32 pa[4][4];
    scores(j, s, rmax);
    probs(j, s, rmax, pa, g);
    rescale(o, g);
    fence_regs(pa);
    if constexpr (PINGPONG) {
      turn_wait(false);
      pv<C, false>(o, pa, sP, ring, t, 0, npairs, lane);  // every group in flight
      turn_pass(C == 1 && t + 1 == npairs);
      retire_pv<C>(ring, t, 0, npairs, lane);
    } else {
      pv<C, true>(o, pa, sP, ring, t, 0, npairs, lane);
    }
#if FFPA_DROPOUT
    if (KMASK) keep = keep_next;
#endif
  }
  // Without qknext: each pair's QK, softmax and PVs in turn.
  for (int t = 0; !QKNEXT && !ROWS && t < npairs; ++t) {
    const int j = first_block(sunit) + 2 * t + C;  // this consumer's key block
#if FFPA_DROPOUT
    // KMASK: the next pair's word, a pair ahead of its use (the mask is read from HBM).
    const u32 keep_next = KMASK && t + 1 < npairs ? mask_word(j + 2) : 0u;
#endif

    float s[8][4];
    qk(t, s);
    if (LEADS<C> && t > 0) {
      // Leading: the QK groups run while consumer 1's P_1 of the pair before arrives; P_1
      // V_2t-1 follows them and runs under this softmax.
      pv_p1(t - 1, seq_k<C>(t, NP - 1), true);
    } else {
      wgmma_wait<0>();
      release(ring, seq_k<C>(t, NP - 1), lane);
    }
    fence_acc(s);
    float rmax[2];
    scores(j, s, rmax);

    u32 pb[4][4];  // consumer 0's P in consumer 1, consumer 1's in consumer 0
    if constexpr (!SEESAW) {
      pair_max(rmax);
    } else if constexpr (C == 1) {
      // Consumer 0's maximum and P_0: O follows the maximum, then P_0 V_2t runs under this
      // consumer's softmax.
      named_sync(BAR_P0, 256);
      float f[2];
      adopt(smax, m_run, l_run, f);
      rescale(o, f);
      if (!PSMEM) {
        load_p(opaque(sP), pb);
        fence_regs(pb);
      }
      pv<C, false>(o, pb, opaque(sP), ring, t, 0, npairs, lane);
    }

    u32 pa[4][4];
    float g[2];
    const u32 sPown = probs(j, s, rmax, pa, g);

    // Seesaw: this consumer's P against its own block's V (O follows the maximum first); drawing
    // ahead, the next block's keep bits under these groups.
    auto pv_own = [&] {
      rescale(o, g);
      if (!PSMEM) fence_regs(pa);
      if constexpr (AHEAD) {
        pv<C, false>(o, pa, sPown, ring, t, C, npairs, lane);
#if FFPA_DROPOUT
        if (t + 1 < npairs) keep = draw((j + 2) * BC + (lane & 3) * 2);
#endif
        retire_pv<C>(ring, t, C, npairs, lane);
      } else {
        pv<C, true>(o, pa, sPown, ring, t, C, npairs, lane);
      }
    };
    if constexpr (!SEESAW) {
      named_sync(BAR_P1, 256);
      if (!PSMEM) {
        load_p(opaque(sP + (1 - C) * (WR * BC * 2)), pb);
        fence_regs(pb);
        fence_regs(pa);
      }
      rescale(o, g);
      if constexpr (AHEAD) {
        // Both consumers are here at once: the next block's bits in two halves (slices 0-3,
        // 4-7), one under each PV, so the draws of the pair lie beside 2 NPC groups each.
        pv<C, false>(o, C == 0 ? pa : pb, opaque(sP), ring, t, 0, npairs, lane);
#if FFPA_DROPOUT
        const int key_next = (j + 2) * BC + (lane & 3) * 2;
        if (t + 1 < npairs)
          keep = dropout_keep_bits<4>(sdrop->seed, pos(key_next), sdrop->kmin, lane);
#endif
        retire_pv<C>(ring, t, 0, npairs, lane);
        pv<C, false>(o, C == 0 ? pb : pa, opaque(sP + WR * BC * 2), ring, t, 1, npairs, lane);
#if FFPA_DROPOUT
        if (t + 1 < npairs)
          keep |= dropout_keep_bits<4>(sdrop->seed, pos(key_next) + 32, sdrop->kmin, lane) << 16;
#endif
        retire_pv<C>(ring, t, 1, npairs, lane);
      } else {
        pv<C, true>(o, C == 0 ? pa : pb, opaque(sP), ring, t, 0, npairs, lane);
        pv<C, true>(o, C == 0 ? pb : pa, opaque(sP + WR * BC * 2), ring, t, 1, npairs, lane);
      }
    } else if constexpr (C == 0) {
      if constexpr (LEADS<C>) {
        // P_1 V_2t-1 (t > 0) ran under the softmax. The wait on every path: a group the
        // compiler cannot prove retired before rescale reads O serializes every wgmma (C7514).
        wgmma_wait<0>();
        if (t > 0)
#pragma unroll
          for (int k = 0; k < NO; ++k) release(ring, seq_v<C>(t - 1, 1, k, npairs), lane);
      }
      named_arrive(BAR_P0, 256);
      pv_own();
      if constexpr (!LEAD) pv_p1(t, -1, false);  // leading, in the next pair (or after the last)
    } else {
      // P_0 V_2t retired: its slots go back and sP[0] is no longer read, so consumer 0 may
      // overwrite it once this consumer arrives.
      retire_pv<C>(ring, t, 0, npairs, lane);
      named_arrive(BAR_P1, 256);
      pv_own();
    }
#if FFPA_DROPOUT
    if (KMASK) keep = keep_next;
#endif
  }
  if (LEADS<C> && npairs > 0) pv_p1(npairs - 1, -1, false);
#pragma unroll
  for (int c = 0; c < NO; ++c) fence_acc(o[c]);

  // l = the two consumers' sums (rows mode: the own); consumer 0 writes the LSE (rows mode:
  // each of its rows').
  float lsum[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    lsum[h] = l;
    if (!ROWS && (lane & 3) == 0) ssum[C * BR + wq * 16 + (lane >> 2) + h * 8] = l;
  }
  if (!ROWS) named_sync(BAR_SUM, 256);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = r0 + wq * 16 + (lane >> 2) + h * 8;
    const int i = sunit[U_M0] + row;
    if (i >= rows_total) continue;
    const float l = lsum[h] + (ROWS ? 0.f : ssum[(1 - C) * BR + row]);
    const float inv = l > 0.f ? p.dropout_scale / l : 0.f;
    const float lse = l > 0.f ? (m_run[h] + __log2f(l)) * LN2 : NEG_INF;
    const int slot = PIECES ? sunit[U_SLOT] : -1;
    const int split = SPLIT == 1 ? 0 : sunit[U_SPLIT];
    const int P0 = split * NPO + (C == 0 || ROWS ? 0 : NP0);  // this consumer's first O panel
    // A piece writes its O (normalized over its own keys) and LSE in fp32, for the merge.
    const long long prow = (long long)slot * BR + row;
    const int b = sunit[U_B], hq = sunit[U_KVH] * p.group + i / p.Nq;
    const int r = i % p.Nq;
    if ((C == 0 || ROWS) && (lane & 3) == 0) {
      if (slot >= 0)
        p.lse_partial[prow] = lse;
      else if (split == 0)
        p.lse[((long long)b * p.Hq + hq) * p.Nq + r] = lse;
    }
    u16* orow =
        static_cast<u16*>(p.o) + b * p.o_batch_stride + hq * p.o_head_stride + r * p.o_row_stride;
#pragma unroll
    for (int c = 0; c < NO; ++c)
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const int col = (P0 + c) * 64 + n * 8 + (lane & 3) * 2;
        if (col >= D) continue;
        const float o0 = o[c][n][h * 2] * inv, o1 = o[c][n][h * 2 + 1] * inv;
        if (slot >= 0)
          *reinterpret_cast<float2*>(p.o_partial + prow * D + col) = make_float2(o0, o1);
        else
          *reinterpret_cast<u32*>(orow + col) = pack2(o0, o1);
      }
  }
}

// A unit of work: a query block (and share of O's columns) of a kv head and batch. Units go
// x-fastest in blockIdx.x: the CTAs of a query block, and those of a cluster, are neighbours
// (they read the same K/V panels from L2 together); heaviest causal blocks first.
struct Unit {
  int m0, kvh, b, split;
};
__device__ __forceinline__ Unit unit_of(const FfpaFwdParams& p, long long u) {
  const int blocks = ((p.group * p.Nq + BR - 1) / BR + CL - 1) / CL * CL;  // whole clusters
  const long long x = u % (blocks * SPLIT), hb = u / (blocks * SPLIT);
  return {(blocks - 1 - (int)(x / SPLIT)) * BR, (int)(hb % p.Hkv), (int)(hb / p.Hkv),
          (int)(x % SPLIT)};
}

}  // namespace ffpa_fwd90ws

extern "C" __global__ void __launch_bounds__(ffpa_fwd90ws::NT, 1)
    ffpa_fwd_sm90ws_kernel(const __grid_constant__ FfpaFwdParams p,
                           const __grid_constant__ FfpaTmaDesc tk,
                           const __grid_constant__ FfpaTmaDesc tv) {
  using namespace ffpa_fwd90ws;
  const SmemBase sb = smem_base_1024();
  const u32 sQ = sb.addr;
  unsigned char* smem = sb.ptr;
  float* sstat = reinterpret_cast<float*>(smem + OFF_STATS);
  int* srow = reinterpret_cast<int*>(smem + OFF_ROWS);
  DropParams* sdrop = reinterpret_cast<DropParams*>(smem + OFF_DROP);
  int* sunit = reinterpret_cast<int*>(smem + OFF_UNIT);

  const int tid = threadIdx.x;
  const int wg = tid >> 7;
  const int rows_total = p.group * p.Nq;
  // The units from p.split_from on (the last wave's, when it would leave most SMs idle) run as
  // p.num_splits pieces each, a range of key-block pairs a piece whose partial O and LSE
  // ffpa_fwd_sm90ws_merge_kernel combines; never with causal masking (the host plans none
  // there). In whole clusters: both CTAs of one take one key range.
  const long long cta = blockIdx.x;
  const bool piece = PIECES && cta >= p.split_from;
  int slot = -1;  // the piece's partial rows: tail unit x pieces + piece
  long long u = cta;
  if (piece) {
    const auto pc = ffpa_layout::fwd_sm90ws_piece(cta - p.split_from, CL, p.num_splits);
    slot = (int)(pc.unit * p.num_splits + pc.piece);
    u = p.split_from + pc.unit;
  }
  const Unit w = unit_of(p, u);
  const int m0 = w.m0, kvh = w.kvh, b = w.b, split = w.split;
  const u32 rank = CL == 1 ? 0u : cluster_rank();
  // Every CTA of a cluster walks the same key blocks (the ring is shared): without causal
  // masking they all see every key.
  const auto [r_lo, diag, ntile] = block_span<BR, BC>(p, m0, rows_total);
  // Key-block pairs (an odd count ends with a block masked out entirely); key blocks in the rows
  // mode.
  int npairs = ROWS ? ntile : (ntile + 1) / 2;
  int jb = 0;  // the first key block
  if (piece) {
    const int k = slot % p.num_splits, all = npairs, first = k * all / p.num_splits;
    jb = ROWS ? first : 2 * first;
    npairs = (k + 1) * all / p.num_splits - first;
  }

  if (tid == 0) {
    for (int c = 0; c < (ROWS ? 1 : 2); ++c) {
      const Ring ring = c == 0 ? ring_of<0>(sQ) : ring_of<1>(sQ);
      for (int i = 0; i < RC; ++i) {
        mbar_init(ring.full(i), 1);
        // Each warp of the consumer in every CTA of the cluster; of both consumers in the rows
        // mode.
        mbar_init(ring.empty(i), (ROWS ? 8 : 4) * CL);
      }
    }
    mbar_init_fence();
  }
  if (CL == 1)
    __syncthreads();
  else
    cluster_sync();

  if (wg == 0) {
    // Producers: lane 0 of warp C fills consumer C's ring (rows mode: lane 0 of warp 0 the one).
    regs_dec<24>();
    if (tid == 0) {
      tma_prefetch_desc(tk);
      tma_prefetch_desc(tv);
      produce_ring<0>(tk, tv, ring_of<0>(sQ), jb, npairs, kvh, b, rank, split);
    } else if (tid == 32 && !ROWS) {
      produce_ring<1>(tk, tv, ring_of<1>(sQ), jb, npairs, kvh, b, rank, split);
    }
    __syncwarp();
  } else {
    const int t128 = tid & 127;
    // Row table and Q (BR x DP, 64-column panels; zero past the rows and past D) by the 256
    // consumer threads.
    if (t128 < BR && wg == 1) {
      const int i = min(m0 + t128, rows_total - 1);
      srow[t128] = i % p.Nq;
      srow[BR + t128] = kvh * p.group + i / p.Nq;
    }
    if (tid == 128) {
      *sdrop = {p.dropout_seed, p.dropout_keep_min};
      sunit[U_M0] = m0, sunit[U_KVH] = kvh, sunit[U_B] = b, sunit[U_SPLIT] = split;
      sunit[U_JB] = jb, sunit[U_SLOT] = slot, sunit[U_NT0] = sunit[U_NT1] = ntile;
      if (ROWS) {
        sunit[U_NT0] = block_span<WR, BC>(p, m0, rows_total).tiles;
        sunit[U_NT1] = m0 + WR < rows_total ? block_span<WR, BC>(p, m0 + WR, rows_total).tiles : 0;
      }
    }
    {
      const u16* qb = static_cast<const u16*>(p.q) + b * p.q_batch_stride;
      for (int idx = tid - 128; idx < BR * DP / 8; idx += 256)
        load_q_granule<BR, DP, D>(p, qb, sQ, idx, m0, rows_total, kvh);
      cp_async_commit();
      cp_async_wait<0>();
      fence_proxy_async();
    }
    named_sync(BAR_Q, 256);
    const u32 sP = sQ + OFF_P;
    // 240 registers each (24 + 240 + 240 = 3 x 168 a thread), raised inside each branch: raised
    // once before it, ptxas spilled 4 bytes in dropout configurations; 232 / 248 (consumer 1
    // holds P_0 through its softmax) spilled more.
    if (wg == 1) {
      regs_inc<240>();
      consume<0>(p, sQ, sP, sstat, srow, sdrop, sunit, npairs, rows_total, r_lo, diag);
    } else {
      regs_inc<240>();
      consume<1>(p, sQ, sP, sstat, srow, sdrop, sunit, npairs, rows_total, r_lo, diag);
    }
  }
  // A CTA leaves only when its cluster partner no longer arrives on its barriers.
  if (CL > 1) cluster_sync();
}

// The tail's pieces merged (launched after the forward, chained by programmatic dependent
// launch): a CTA per (tail unit, query row); lse = log sum_s exp(lse_s), O = sum_s w_s O_s over
// the unit's columns, as ffpa_merge_kernel merges split-KV rows.
extern "C" __global__ void __launch_bounds__(128)
    ffpa_fwd_sm90ws_merge_kernel(const __grid_constant__ FfpaFwdParams p) {
  using namespace ffpa_fwd90ws;
  grid_dependency_wait();
  const Unit w = unit_of(p, p.split_from + blockIdx.x);
  const int row = blockIdx.y, i = w.m0 + row;
  if (i >= p.group * p.Nq) return;
  const long long prow0 = (long long)blockIdx.x * p.num_splits * BR + row;  // piece 0's row
  const LseMerge m(p.lse_partial + prow0, BR, p.num_splits);
  const int hq = w.kvh * p.group + i / p.Nq, r = i % p.Nq;
  if (w.split == 0 && threadIdx.x == 0) p.lse[((long long)w.b * p.Hq + hq) * p.Nq + r] = m.lse();
  u16* orow =
      static_cast<u16*>(p.o) + w.b * p.o_batch_stride + hq * p.o_head_stride + r * p.o_row_stride;
  const int hi = min(D, (w.split + 1) * NPO * 64);
  for (int col = w.split * NPO * 64 + threadIdx.x * 2; col < hi; col += 256) {
    float a0 = 0.f, a1 = 0.f;
    if (!m.none())
      for (int s = 0; s < p.num_splits; ++s) {
        const long long prow = prow0 + s * BR;
        const float wt = m.weight(p.lse_partial[prow]);
        const float2 x = *reinterpret_cast<const float2*>(p.o_partial + prow * D + col);
        a0 += wt * x.x, a1 += wt * x.y;
      }
    *reinterpret_cast<u32*>(orow + col) = pack2(a0, a1);
  }
}

#if FFPA_DROPOUT && FFPA_KMASK
// The keep mask (ffpa_fwd_sm90ws_layout.h, FwdSm90wsKeep), launched before the forward: a CTA of
// 128 threads per (row block, kCtaBlocks key blocks: one row table for them), thread t drawing the
// decisions consumer thread t of that row block draws in the forward without the mask (the same
// rows and stream positions), in the mask's bit order (keep_mask_word), for the key blocks the row
// block sees (causal: up to its last tile). Its dependants may start at once: the forward's
// producers fill their rings while it runs, and its consumers wait for it before they read the
// mask.
extern "C" __global__ void __launch_bounds__(128)
    ffpa_fwd_sm90ws_keep_kernel(const __grid_constant__ FfpaFwdParams p) {
  using namespace ffpa_fwd90ws;
  launch_dependents();
  const int rows_total = p.group * p.Nq;
  const auto km = ffpa_layout::fwd_sm90ws_keep(p.B, p.Hkv, rows_total, p.Nkv);
  // In 32 bits (the grid's x, B Hkv row_blocks, is below 2^31): 64-bit divisions are calls.
  const int rb = blockIdx.x, row_blocks = (int)km.row_blocks;  // (b Hkv + kvh) row_blocks + m0 / WR
  const int m0 = rb % row_blocks * WR;
  const int kvh = rb / row_blocks % p.Hkv, b = rb / row_blocks / p.Hkv;
  const int ntile = block_span<WR, BC>(p, m0, rows_total).tiles;
  const int t = threadIdx.x, lane = t & 31, wq = t >> 5;
  // The consumer's pos(): its row table clamps rows past the last to it.
  const int i = min(m0 + wq * 16 + (lane >> 2) + (lane & 1) * 8, rows_total - 1);
  const int hq = kvh * p.group + i / p.Nq, q = i % p.Nq;
  const unsigned long long g0 =
      p.dropout_offset +
      (((unsigned long long)b * p.Hq + hq) * p.Nq + q) * (unsigned long long)p.Nkv +
      (lane & 3) * 2 - (lane & 1) * 2;
  u32* out = p.keep_mask + (long long)rb * km.key_blocks * km.kKeepWords + t;
  const int j_end = min(ntile, (int)(blockIdx.y + 1) * km.kCtaBlocks);
  for (int j = blockIdx.y * km.kCtaBlocks; j < j_end; ++j)
    out[(long long)j * km.kKeepWords] =
        keep_mask_word(p.dropout_seed, g0 + (unsigned long long)j * BC, p.dropout_keep_min, lane);
}
#endif
