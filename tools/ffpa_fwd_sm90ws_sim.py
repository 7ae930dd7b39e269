#!/usr/bin/env python3
"""Protocol simulator of kernels/ffpa_fwd_sm90ws.cuh: the two K/V rings, their mbarriers and the
consumers' named-barrier hand-offs, run under random schedules.

Each CTA of a cluster has two producers (one thread each, filling one consumer's ring by TMA) and
two consumer warpgroups (modelled as their 4 warps acting together). The simulator mirrors the
kernel's sequence functions (seq_k, seq_v), the producers' loop order, the release rules (a
panel's slot is released after the next panel's group is committed, the last one after wait<0>;
consumer 1's P_0 V_2t groups stay in flight through its softmax and are released together; with
dropout drawn ahead (FFPA_AHEAD) the PV groups that follow each consumer's own hand-off in the
seesaw (consumer 0's P_0 V_2t, consumer 1's P_1 V_2t+1), and both PVs in lock-step, stay in
flight while it draws the next block's keep bits), the
mbarrier phase/parity rules (a fresh barrier is in phase 0; waiting for parity 1 passes), the
expect_tx/complete_tx accounting of multicast halves, and the hand-offs: consumer 0 publishes its
P tile and maximum and arrives on BAR_P0, consumer 1 waits there, reads them, publishes its own and
arrives on BAR_P1, where consumer 0 waits; in lock-step (seesaw = 0) both wait on BAR_P0 (row
maxima), publish their P and both wait on BAR_P1. A hardware named barrier completes when all its
threads arrived, whoever they are: an arrival twice before the other side waited would complete
it wrongly, which the model reports.
In the rows mode (FFPA_ROWS) one producer fills one ring that both consumers read whole (each its
own 64 query rows over K and V of every key block, empty barriers counting the 8 warps of both),
with no named barrier in the key loop; with pingpong (FFPA_PINGPONG) the consumers take turns, a
turn being one QK or one PV: each waits for its turn on its named barrier (consumer 0's first
turn excepted) and passes it on the other's once its groups are issued, before they retire.
It checks, for every panel count, O-panel count of a CTA (NPO < NP: D > 512, two CTAs a query
block), owner of an odd count's extra O panel, ring depth, pair count and cluster size:
  - no deadlock under many random interleavings,
  - every panel a consumer reads holds what it expects (kind, key block, column panel),
  - no slot is overwritten while a consumer still reads it (a TMA write into a held slot),
  - every P tile and maximum a consumer reads is the other consumer's of the same pair, and
    none is overwritten while read or before it was read.
Run: tools/ffpa_fwd_sm90ws_sim.py  (exits 1 on the first failure)
"""
import random
import sys


def own_panels(NPO, odd):
    """O panels of consumers 0 and 1; odd (FFPA_ODDPANEL) is the one owning an odd count's extra."""
    NP0 = (NPO + 1 - odd) // 2
    return (NP0, NPO - NP0)


def first_v(NPO, own, c, split):
    """Consumer c's first V (and O) panel: its O columns follow consumer 0's in the CTA's share."""
    return split * NPO + (0 if c == 0 else own[0])


def seq_k(NP, own, c, t, q, lead=False, qknext=False, rows=False):
    if rows:  # t counts key blocks: K then V of each
        return t * 2 * NP + q
    if lead and c == 0:  # FFPA_LEAD: V of block 2t - 1 after K of block 2t
        return max(0, t * (NP + 2 * own[0]) - own[0]) + q
    if qknext:  # FFPA_QKNEXT: V of pair t after K of pair t + 1
        return max(0, t * (NP + 2 * own[c]) - 2 * own[c]) + q
    return t * (NP + 2 * own[c]) + q


def seq_v(NP, own, c, t, i, k, npairs=0, lead=False, qknext=False, rows=False):
    if rows:
        return t * 2 * NP + NP + k
    n = own[c]
    U = NP + 2 * n
    if lead and c == 0:
        return t * U + NP + k if i == 0 else (t + 1) * U - n + (NP if t + 1 < npairs else 0) + k
    if qknext:
        return (t + 1) * U - 2 * n + (NP if t + 1 < npairs else 0) + i * n + k
    return t * U + NP + i * n + k


class Barrier:
    """An mbarrier: arrival count and transaction bytes of the current phase."""

    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, expect_tx=0):
        self.tx += expect_tx
        self.pending -= 1
        assert self.pending >= 0, "more arrivals than the barrier counts"
        self._maybe_complete()

    def complete_tx(self, n):
        self.tx -= n
        self._maybe_complete()

    def done(self, parity):
        # The phase of this parity has completed: the current phase has the other parity.
        return (self.phase & 1) != parity


class NamedBarrier:
    """bar.arrive / bar.sync over two warpgroups: completes on the second arrival."""

    def __init__(self, name):
        self.name, self.arrived, self.generation, self.waiting = name, 0, 0, False

    def arrive(self):
        if self.arrived == 1 and not self.waiting:
            raise AssertionError(f"{self.name}: a second arrival before the other side waited")
        self.arrived += 1
        if self.arrived == 2:
            self.arrived, self.waiting = 0, False
            self.generation += 1

    def sync(self):
        """Generator: arrive and wait for the barrier to complete."""
        gen = self.generation
        self.waiting = True
        self.arrived += 1
        if self.arrived == 2:
            self.arrived, self.waiting = 0, False
            self.generation += 1
        yield True
        while self.generation == gen:
            yield False


def producer_order(NP, NPO, own, npairs, c, split=0, lead=False, qknext=False, rows=False):
    v0 = first_v(NPO, own, c, split)
    out = []  # (kind, block, panel) in seq order
    if rows:  # npairs counts key blocks
        for t in range(npairs):
            out += [("K", t, q) for q in range(NP)] + [("V", t, k) for k in range(NPO)]
        return out
    if qknext:
        out += [("K", c, q) for q in range(NP if npairs else 0)]
        for t in range(npairs):
            out += [("K", 2 * t + 2 + c, q) for q in range(NP if t + 1 < npairs else 0)]
            for i in range(2):
                out += [("V", 2 * t + i, v0 + k) for k in range(own[c])]
        return out
    if lead and c == 0:
        for t in range(npairs):
            out += [("K", 2 * t, q) for q in range(NP)]
            for blk in ([2 * t - 1] if t > 0 else []) + [2 * t]:
                out += [("V", blk, v0 + k) for k in range(own[0])]
        if npairs:
            out += [("V", 2 * npairs - 1, v0 + k) for k in range(own[0])]
        return out
    for t in range(npairs):
        out += [("K", 2 * t + c, q) for q in range(NP)]
        for i in range(2):
            out += [("V", 2 * t + i, v0 + k) for k in range(own[c])]
    return out


def simulate(NP, NPO, R, npairs, CL, rng, split=0, seesaw=True, odd=0, ahead=False, lead=False,
             qknext=False, rows=False, pingpong=False):
    # The rows mode: one ring of R slots that both consumers read whole, each over all of O;
    # npairs counts key blocks.
    RC = R if rows else R // 2
    own = (NPO, NPO) if rows else own_panels(NPO, odd)
    nrings = 1 if rows else 2

    def rc(c):  # consumer c's ring
        return 0 if rows else c

    if rows and (seesaw or ahead or lead or qknext or CL > 1):
        return False  # lock-step knobs only, one CTA: refused
    if pingpong and (not rows or R < NPO):
        return False  # the rows mode only, a block's V panels held through the other's turn
    if qknext and (seesaw or ahead or RC < 2 * max(own)):
        return False  # lock-step only, nothing drawn ahead, a pair's V panels held at once
    if lead and (not seesaw or RC < own[0]):
        return False  # consumer 0 leads only in the seesaw, holding its V panels: refused
    if RC < own[1]:
        return False  # consumer 1 holds all its V panels of a block at once: refused
    if ahead and RC < own[0]:
        return False  # drawing ahead, consumer 0 does too: refused
    half = 8192 // CL
    orders = [producer_order(NP, NPO, own, npairs, c, split, lead, qknext, rows)
              for c in range(nrings)]
    for c in range(2):
        o = orders[rc(c)]
        blocks = (0,) if rows else (0, 1)  # of a step: V of the step's block(s)
        assert len(o) == (NP + len(blocks) * own[c]) * npairs
        for t in range(npairs):  # the sequence functions index the producer's order
            for q in range(NP):
                assert o[seq_k(NP, own, c, t, q, lead, qknext, rows)] == (
                    "K", t if rows else 2 * t + c, q)
            v0 = 0 if rows else first_v(NPO, own, c, split)
            for i in blocks:
                for k in range(own[c]):
                    assert o[seq_v(NP, own, c, t, i, k, npairs, lead, qknext, rows)] == (
                        "V", t if rows else 2 * t + i, v0 + k)
    ctas = []
    for _ in range(CL):
        cta = {"rings": [], "bar": [NamedBarrier("BAR_P0"), NamedBarrier("BAR_P1")],
               "turn": [NamedBarrier("BAR_T0"), NamedBarrier("BAR_T1")],
               # P tile and maximum of each consumer: (pair written, pairs read by the other)
               "p": [None, None], "p_read": [-1, -1], "p_held": [False, False]}
        for c in range(nrings):
            cta["rings"].append({
                "full": [Barrier(1) for _ in range(RC)],
                "empty": [Barrier(4 * (2 if rows else 1) * CL) for _ in range(RC)],
                "slot": [[None] * CL for _ in range(RC)],  # content tag per multicast half
                "held": [0] * RC,
            })
        ctas.append(cta)

    def producer(cta, c, rank):
        for seq, tag in enumerate(orders[c]):
            s = seq % RC
            e = ctas[cta]["rings"][c]["empty"][s]
            par = ((seq // RC) & 1) ^ 1
            while not e.done(par):
                yield False
            ctas[cta]["rings"][c]["full"][s].arrive(expect_tx=8192)
            yield True
            for dst in range(CL):  # the multicast half lands in every CTA
                ring = ctas[dst]["rings"][c]
                if ring["held"][s]:
                    raise AssertionError(f"TMA wrote slot {s} of ring {c} while cta {dst} reads it")
                ring["slot"][s][rank] = tag
                ring["full"][s].complete_tx(half)
                yield True

    def release(cta, c, seq):
        s = seq % RC
        ctas[cta]["rings"][rc(c)]["held"][s] -= 1
        for dst in range(CL):  # every CTA's producer writes into this slot
            for _ in range(4):  # one arrival per consumer warp
                ctas[dst]["rings"][rc(c)]["empty"][s].arrive()

    def read(cta, c, seq, tag):
        ring = ctas[cta]["rings"][rc(c)]
        s = seq % RC
        while not ring["full"][s].done((seq // RC) & 1):
            yield False
        if any(g != tag for g in ring["slot"][s]):
            raise AssertionError(f"cta {cta} consumer {c} seq {seq} expected {tag}, "
                                 f"slot {s} holds {ring['slot'][s]}")
        ring["held"][s] += 1
        yield True

    def held(cta, c, panels):
        """The groups in flight while the consumer draws keep bits, then retired together."""
        yield from group(cta, c, panels, retire=False)
        yield True  # the draws
        for seq, _ in panels:
            release(cta, c, seq)
        yield True

    def group(cta, c, panels, retire=True, keep_last=False):
        """One wgmma group per panel; with retire, release as the kernel does (keep_last: the
        last panel's slot stays held, for the caller to release)."""
        prev = None
        for seq, tag in panels:
            yield from read(cta, c, seq, tag)
            if retire and prev is not None:
                release(cta, c, prev)
                yield True
            prev = seq
        if retire and not keep_last:
            release(cta, c, prev)
            yield True

    def publish(cta, c, t):
        x = ctas[cta]
        if x["p_held"][c]:
            raise AssertionError(f"consumer {c} overwrote its P tile while the other reads it")
        if t > 0 and x["p_read"][c] != t - 1:
            raise AssertionError(f"consumer {c} overwrote P of pair {t - 1} before it was read")
        x["p"][c] = t

    def take(cta, c, t):
        x = ctas[cta]
        if x["p"][1 - c] != t:
            raise AssertionError(f"consumer {c} read P of pair {x['p'][1 - c]} in pair {t}")
        x["p_read"][1 - c] = t
        x["p_held"][1 - c] = True

    def consumer(cta, c):
        x = ctas[cta]
        n = own[c]
        v0 = first_v(NPO, own, c, split)
        def panels_v(t, i):
            return [(seq_v(NP, own, c, t, i, k, npairs, lead, qknext), ("V", 2 * t + i, v0 + k))
                    for k in range(n)]

        def k_panels(t):
            return [(seq_k(NP, own, c, t, q, lead, qknext), ("K", 2 * t + c, q)) for q in range(NP)]

        def pv_p1(t, kseq=None, hold=False):  # consumer 0: P_1 of pair t, then P_1 V_2t+1
            yield from x["bar"][1].sync()
            if kseq is not None:  # leading: the last QK group retired, its slot released
                release(cta, 0, kseq)
                yield True
            take(cta, 0, t)
            yield from group(cta, 0, panels_v(t, 1), retire=not hold)
            if not hold:
                x["p_held"][1] = False  # the PV that read P_1 retired
                yield True

        def retire_p1(t):  # leading: P_1 V_2t+1, held through the softmax, retired
            for seq, _ in panels_v(t, 1):
                release(cta, 0, seq)
            x["p_held"][1] = False
            yield True

        def softmax_next(t):  # qknext: both maxima, then both P tiles published in sP
            yield from x["bar"][0].sync()
            publish(cta, c, t)
            yield from x["bar"][1].sync()

        def pv_pair(t, kseq=None):
            """qknext: both P tiles into registers, both PVs' groups in flight; kseq: the last
            QK group's slot, released once the first PV group is committed."""
            take(cta, c, t)
            x["p_held"][1 - c] = False  # read into registers: sP is free at once
            yield True
            for i in range(2):
                for k, (seq, tag) in enumerate(panels_v(t, i)):
                    yield from read(cta, c, seq, tag)
                    if kseq is not None and i == 0 and k == 0:  # wait<1>: the QK groups retired
                        release(cta, c, kseq)
                        yield True

        def retire_pair(t):
            for i in range(2):
                for seq, _ in panels_v(t, i):
                    release(cta, c, seq)
            yield True

        if rows:  # each block's K panels (QK), then its V panels (PV)
            turn = x["turn"]
            for t in range(npairs):
                kp = [(seq_k(NP, own, c, t, q, rows=True), ("K", t, q)) for q in range(NP)]
                vp = [(seq_v(NP, own, c, t, 0, k, rows=True), ("V", t, k)) for k in range(NPO)]
                if not pingpong:  # retired as they go
                    yield from group(cta, c, kp)
                    yield from group(cta, c, vp)
                    continue
                if c == 1 or t > 0:
                    yield from turn[c].sync()
                yield from group(cta, c, kp, keep_last=True)  # the last QK group in flight
                turn[1 - c].arrive()
                release(cta, c, kp[-1][0])
                yield True
                yield from turn[c].sync()
                yield from group(cta, c, vp, retire=False)  # every PV group in flight
                if c == 0 or t + 1 < npairs:
                    turn[1 - c].arrive()
                for seq, _ in vp:
                    release(cta, c, seq)
                yield True
            return

        if qknext:
            if npairs:
                yield from group(cta, c, k_panels(0))
                yield from softmax_next(0)
            for t in range(npairs - 1):
                yield from group(cta, c, k_panels(t + 1), keep_last=True)
                yield from pv_pair(t, k_panels(t + 1)[-1][0])
                yield from softmax_next(t + 1)
                yield from retire_pair(t)
            if npairs:
                yield from pv_pair(npairs - 1)
                yield from retire_pair(npairs - 1)
            return

        for t in range(npairs):
            v_panels = [panels_v(t, 0), panels_v(t, 1)]
            if lead and c == 0 and t > 0:
                # the QK groups in flight while consumer 1's P_1 of the pair before arrives
                yield from group(cta, c, k_panels(t), keep_last=True)
                yield from pv_p1(t - 1, k_panels(t)[-1][0], hold=True)
            else:
                yield from group(cta, c, k_panels(t))
            if not seesaw:
                yield from x["bar"][0].sync()
                publish(cta, c, t)
                yield from x["bar"][1].sync()
                take(cta, c, t)
                yield from (held if ahead else group)(cta, c, v_panels[0])
                yield from (held if ahead else group)(cta, c, v_panels[1])
                x["p_held"][1 - c] = False  # the PVs that read the other's P retired
                yield True
            elif c == 0:
                if lead and t > 0:  # P_1 V_2t-1 ran under the softmax: retired before P_0
                    yield from retire_p1(t - 1)
                publish(cta, 0, t)  # P_0 and the maximum, then BAR_P0
                x["bar"][0].arrive()
                yield True
                yield from (held if ahead else group)(cta, 0, v_panels[0])
                if not lead:
                    yield from pv_p1(t)
            else:
                yield from x["bar"][0].sync()
                take(cta, 1, t)
                yield from group(cta, 1, v_panels[0], retire=False)  # in flight: softmax
                publish(cta, 1, t)
                yield True
                for seq, _ in v_panels[0]:  # wait<0>: P_0 V_2t retired, sP[0] read
                    release(cta, 1, seq)
                x["p_held"][0] = False
                yield True
                x["bar"][1].arrive()
                yield True
                yield from (held if ahead else group)(cta, 1, v_panels[1])
        if lead and c == 0 and npairs:
            yield from pv_p1(npairs - 1)

    actors = []
    for cta in range(CL):
        actors += [producer(cta, c, cta) for c in range(nrings)]
        actors += [consumer(cta, 0), consumer(cta, 1)]
    # Random speeds: a slow actor opens the windows a race needs (one step of it against many
    # of the others).
    speed = [rng.choice((1.0, 1.0, 0.2, 0.02)) for _ in actors]
    live = list(range(len(actors)))
    blocked = set()  # actors that made no progress since the last action of any actor
    while live:
        i = rng.choices(live, weights=[speed[j] for j in live])[0]
        try:
            progressed = next(actors[i])
        except StopIteration:
            live.remove(i)
            blocked.clear()
            continue
        if progressed:
            blocked.clear()
        else:
            blocked.add(i)
            if blocked == set(live):
                raise AssertionError(f"deadlock: NP={NP} NPO={NPO} R={R} npairs={npairs} CL={CL}")
    return True


def main():
    rng = random.Random(1)
    cases = 0
    for NP in (2, 3, 5, 6, 7, 8):
        for R in (4, 6, 8, 12, 16, 18):
            for npairs in (0, 1, 2, 3, 5):
                for CL in (1, 2):
                    # the seesaw: without and with dropout (keep bits drawn ahead), with
                    # consumer 0 leading (both); lock-step: plain, drawing ahead, the next
                    # pair's QK first
                    for seesaw, ahead, lead, qk in ((True, False, False, False),
                                                    (True, True, False, False),
                                                    (True, False, True, False),
                                                    (True, True, True, False),
                                                    (False, False, False, False),
                                                    (False, True, False, False),
                                                    (False, False, False, True)):
                        # an odd panel count: its extra panel with consumer 0, then with 1
                        for odd in (0, 1) if NP % 2 else (0,):
                            cases += simulate(NP, NP, R, npairs, CL, rng, seesaw=seesaw, odd=odd,
                                              ahead=ahead, lead=lead, qknext=qk)
    # The rows mode (D <= 320: up to 5 panels), one CTA; npairs counts key blocks.
    for NP in (2, 3, 4, 5):
        for R in (2, 4, 6, 8, 12, 16, 18):
            for nblocks in (0, 1, 2, 3, 5, 7):
                for pingpong in (False, True):
                    cases += simulate(NP, NP, R, nblocks, 1, rng, seesaw=False, rows=True,
                                      pingpong=pingpong)
    # D > 512: two CTAs a query block, each streaming its share of V (the last partly past D).
    for NP, NPO in ((9, 5), (12, 6), (16, 8)):
        for R in (4, 8, 10, 14):
            for npairs in (1, 2, 3):
                for split in (0, 1):
                    for seesaw, ahead, lead, qk in ((True, False, False, False),
                                                    (True, True, False, False),
                                                    (True, False, True, False),
                                                    (False, False, False, False),
                                                    (False, True, False, False),
                                                    (False, False, False, True)):
                        for odd in (0, 1) if NPO % 2 else (0,):
                            cases += simulate(NP, NPO, R, npairs, 1, rng, split, seesaw, odd,
                                              ahead, lead, qk)
    print(f"ffpa_fwd_sm90ws protocol: {cases} random schedules, no deadlock, no stale or "
          "overwritten panel, P tile or maximum")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL:", e)
        sys.exit(1)
