#!/usr/bin/env python3
"""Protocol simulator of kernels/ffpa_fwd_sm90ws.cuh: the K/V ring, its mbarriers and the
consumers' named barriers, run under random schedules.

Each CTA of a cluster has a producer (one thread issuing TMA loads) and two consumer warpgroups
(modelled as their 4 warps arriving together). The simulator mirrors the kernel's sequence
functions (seq_k, seq_v_own, seq_v_other), the producer's loop order, the release rule (a panel's
slot is released after the next panel's group is committed, the last one after wait<0>), the
mbarrier phase/parity rules (a fresh barrier is in phase 0; waiting for parity 1 passes), the
expect_tx/complete_tx accounting of multicast halves, and the named barriers BAR_MAX and BAR_P.
It checks, for every panel count, O-panel count of a CTA (NPO < NP: D > 512, two CTAs a query
block), ring depth, pair count and cluster size:
  - no deadlock under many random interleavings,
  - every panel a consumer reads holds what it expects (kind, key block, column panel),
  - no slot is overwritten while a consumer still reads it (a TMA write into a held slot).
Run: tools/ffpa_fwd_sm90ws_sim.py  (exits 1 on the first failure)
"""
import random
import sys


def seq_k(NP, NPO, t, p, c):
    return t * (2 * NP + 2 * NPO) + 2 * p + c


def seq_v_own(NP, NPO, t, k, c):
    return t * (2 * NP + 2 * NPO) + 2 * NP + 2 * k + c


def seq_v_other(NP, NPO, t, k, c):
    return t * (2 * NP + 2 * NPO) + 2 * NP + NPO + 2 * k + c


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


def producer_order(NP, NPO, npairs, split=0):
    NP0 = (NPO + 1) // 2
    NP1 = NPO - NP0
    v0 = split * NPO
    out = []  # (kind, block, panel) in seq order
    for t in range(npairs):
        j0, j1 = 2 * t, 2 * t + 1
        for q in range(NP):
            out += [("K", j0, q), ("K", j1, q)]
        for k in range(NP0):
            out.append(("V", j0, v0 + k))
            if k < NP1:
                out.append(("V", j1, v0 + NP0 + k))
        for k in range(NP0):
            out.append(("V", j1, v0 + k))
            if k < NP1:
                out.append(("V", j0, v0 + NP0 + k))
    return out


def consumer_reads(NP, NPO, npairs, c, split=0):
    """(seq, expected content, phase tag) of consumer c in program order, with the points where
    it meets the named barriers."""
    NP0 = (NPO + 1) // 2
    NP1 = NPO - NP0
    NPC, P0 = (NP0, split * NPO) if c == 0 else (NP1, split * NPO + NP0)
    steps = []
    for t in range(npairs):
        own, other = 2 * t + c, 2 * t + 1 - c
        panels = [(seq_k(NP, NPO, t, q, c), ("K", own, q)) for q in range(NP)]
        steps.append(("group", panels))
        steps.append(("bar", "max"))
        steps.append(("bar", "p"))
        pv = [(seq_v_own(NP, NPO, t, k, c), ("V", own, P0 + k)) for k in range(NPC)]
        pv += [(seq_v_other(NP, NPO, t, k, c), ("V", other, P0 + k)) for k in range(NPC)]
        steps.append(("group", pv))
    return steps


def simulate(NP, NPO, R, npairs, CL, rng, split=0):
    order = producer_order(NP, NPO, npairs, split)
    assert len(order) == (2 * NP + 2 * NPO) * npairs
    half = 8192 // CL
    ctas = []
    for _ in range(CL):
        ctas.append({
            "full": [Barrier(1) for _ in range(R)],
            "empty": [Barrier(4 * CL) for _ in range(R)],
            "slot": [None] * R,  # content tag per half: list of CL entries
            "held": [0] * R,  # consumers reading the slot
            "named": {},
        })
        for s in range(R):
            ctas[-1]["slot"][s] = [None] * CL

    def producer(cta, rank):
        for seq, tag in enumerate(order):
            s = seq % R
            e = ctas[cta]["empty"][s]
            par = ((seq // R) & 1) ^ 1
            while not e.done(par):
                yield False
            ctas[cta]["full"][s].arrive(expect_tx=8192)
            yield True
            for dst in range(CL):  # the multicast half lands in every CTA
                d = ctas[dst]
                if d["held"][s]:
                    raise AssertionError(f"TMA wrote slot {s} while cta {dst} reads it")
                d["slot"][s][rank] = tag
                d["full"][s].complete_tx(half)
                yield True

    def named(cta, name, gen):
        bars = ctas[cta]["named"]
        key = (name, gen)
        bars[key] = bars.get(key, 0) + 1
        yield True
        while bars[key] < 2:
            yield False

    def consumer(cta, c):
        gens = {"max": 0, "p": 0}
        for step in consumer_reads(NP, NPO, npairs, c, split):
            if step[0] == "bar":
                yield from named(cta, step[1], gens[step[1]])
                gens[step[1]] += 1
                continue
            panels = step[1]
            prev = None
            for seq, tag in panels:
                s = seq % R
                f = ctas[cta]["full"][s]
                while not f.done((seq // R) & 1):
                    yield False
                got = ctas[cta]["slot"][s]
                if any(g != tag for g in got):
                    raise AssertionError(f"cta {cta} consumer {c} seq {seq} expected {tag}, "
                                         f"slot {s} holds {got}")
                ctas[cta]["held"][s] += 1
                yield True
                if prev is not None:  # wait<1> retired the previous group
                    release(cta, prev)
                    yield True
                prev = seq
            release(cta, prev)  # wait<0>
            yield True

    def release(cta, seq):
        s = seq % R
        ctas[cta]["held"][s] -= 1
        for dst in range(CL):  # every CTA's producer writes into this slot
            for _ in range(4):  # one arrival per consumer warp
                ctas[dst]["empty"][s].arrive()

    actors = []
    for cta in range(CL):
        actors += [producer(cta, cta), consumer(cta, 0), consumer(cta, 1)]
    live = list(range(len(actors)))
    blocked = set()  # actors that made no progress since the last action of any actor
    while live:
        i = rng.choice(live)
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


def main():
    rng = random.Random(1)
    cases = 0
    for NP in (2, 3, 5, 6, 7, 8):
        for R in (4, 5, 7, 8, 12, 16, 18):
            for npairs in (0, 1, 2, 3, 5):
                for CL in (1, 2):
                    for _ in range(3):
                        simulate(NP, NP, R, npairs, CL, rng)
                        cases += 1
    # D > 512: two CTAs a query block, each streaming its share of V (the last partly past D).
    for NP, NPO in ((9, 5), (12, 6), (16, 8)):
        for R in (4, 8, 10):
            for npairs in (1, 2, 3):
                for split in (0, 1):
                    simulate(NP, NPO, R, npairs, 1, rng, split)
                    cases += 1
    print(f"ffpa_fwd_sm90ws protocol: {cases} random schedules, no deadlock, no stale or "
          "overwritten panel")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL:", e)
        sys.exit(1)
