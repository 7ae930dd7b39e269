#!/usr/bin/env python3
"""Pure-Python transcription of ffpa_bwd_convert_kernel's tiled path (kernels/ffpa_bwd_aux.cuh,
FFPA_DQ_TILED): dq_accum in the fragment order of dq_offset, converted a 64 x 64 block at a time
by CTAs of 256 threads striding over the blocks. Every real element of dq_accum is written from
a row-major dQ by dq_offset's formula (ffpa_bwd_sm90c_sim.py's transcription of it) and every
padding float is poisoned (None); the
transcription must store each (b, hq, r, col) exactly once, with its value, and never a padding
float or a column past D. Shapes: GQA groups that put two heads in a tile, Nq below 8 (a warp's
row steps cross several heads), quarters and halves of DQ columns, DQ off the 64-column grid,
grids smaller and larger than the block count.

What is transcribed (each formula as written there): the block count B Hkv tiles chunks, the
float4s k 256 + t of thread t (warp w, lane l) into shared rows 16 k + l / 4 (+ 8) and pair
4 w + l % 4 (pitch 36), the block's chunk, tile and (batch, kv head), the column pair of lane l
(qc = chunk % QCHUNKS 64 + 2 l, col = chunk / QCHUNKS DQ + qc), warp w's rows w + 8 k with their
head and position advanced by additions, and the store condition (i < rows, qc < DQ, col < D).
Mutations of those formulas must each be caught. Exit 0 when the kernel passes and every mutation
is caught."""
import os
import random
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffpa_bwd_sm90c_sim import dq_offset  # noqa: E402

PITCH = 36


def convert(g, acc, grid, mut):
    out = {}
    for cta in range(grid):
        blk = cta
        while blk < g["blocks"]:
            sdq = [None] * (64 * PITCH)
            for t in range(256):
                w, l = t >> 5, t & 31
                for k in range(4):
                    q = (blk * 1024 + k * 256 + t) * 4
                    x = acc[q:q + 4]
                    row = 16 * k + (l >> 2) if mut != "row_of_k" else 8 * k + (l >> 2)
                    pair = 4 * w + (l & 3) if mut != "pair_of_lane" else 4 * (l & 3) + w
                    sdq[row * PITCH + pair] = (x[0], x[1])
                    sdq[(row + 8) * PITCH + pair] = (x[2], x[3])
            chunks, tiles, qch = g["chunks"], g["tiles"], g["QCH"]
            chunk, tile, bh = blk % chunks, blk // chunks % tiles, blk // chunks // tiles
            for t in range(256):
                w, l = t >> 5, t & 31
                qc = (chunk % qch) * 64 + 2 * l
                col = chunk // qch * g["DQ"] + qc if mut != "col_of_chunk" else chunk * 64 + 2 * l
                i = tile * 64 + w
                hq = bh % g["Hkv"] * g["group"] + i // g["Nq"]
                r = i % g["Nq"]
                for k in range(8):
                    qc_in = qc < g["DQ"] or mut == "no_qc_bound"
                    if i < g["rows"] and col < g["D"] and qc_in:
                        key = (bh // g["Hkv"], hq, r, col)
                        if key in out:
                            raise AssertionError(f"stored twice: {key}")
                        out[key] = sdq[(8 * k + w) * PITCH + l]
                    i, r = i + 8, r + 8
                    if mut == "wrap_once":
                        if r >= g["Nq"]:
                            r, hq = r - g["Nq"], hq + 1
                    else:
                        while r >= g["Nq"]:
                            r, hq = r - g["Nq"], hq + 1
            blk += grid
    return out


def check(shape, grid, mut=None):
    B, Hkv, group, Nq, D, DQ, parts = shape
    qch = (DQ + 63) // 64
    rows = group * Nq
    g = dict(Hkv=Hkv, group=group, Nq=Nq, D=D, DQ=DQ, QCH=qch, rows=rows,
             tiles=(rows + 63) // 64, chunks=parts * qch)
    g["blocks"] = B * Hkv * g["tiles"] * g["chunks"]
    shape_ns = SimpleNamespace(B=B, Hkv=Hkv, group=group, Nq=Nq)
    acc = [None] * (g["blocks"] * 4096)
    ref = {}
    for b in range(B):
        for hq in range(Hkv * group):
            for r in range(Nq):
                for col in range(0, D, 2):
                    o = dq_offset(shape_ns, DQ, parts, b, hq, r, col)
                    v = (random.random(), random.random())
                    acc[o], acc[o + 1] = v
                    ref[(b, hq, r, col)] = v
    out = convert(g, acc, grid, mut)
    if out != ref:
        raise AssertionError(f"{len(set(ref) - set(out))} pairs missing, "
                             f"{sum(1 for k in out if out[k] != ref.get(k))} wrong")


# B, Hkv, group, Nq, D, DQ, parts; grid
CASES = [((1, 1, 1, 1, 64, 16, 4), 1), ((1, 2, 1, 7, 128, 32, 4), 3),
         ((2, 2, 2, 127, 320, 80, 4), 5), ((1, 1, 4, 100, 512, 128, 4), 7),
         ((2, 1, 3, 5, 72, 18, 4), 2), ((1, 2, 2, 70, 192, 96, 2), 4),
         ((1, 1, 1, 130, 512, 256, 2), 64), ((2, 3, 1, 9, 384, 96, 4), 1000)]
MUTATIONS = ["row_of_k", "pair_of_lane", "col_of_chunk", "no_qc_bound", "wrap_once"]


def main():
    random.seed(1)
    for shape, grid in CASES:
        check(shape, grid)
    print(f"kernel: {len(CASES)} shapes pass")
    ok = True
    for m in MUTATIONS:
        try:
            for shape, grid in CASES:
                check(shape, grid, m)
            print(f"mutation {m:14s} NOT caught")
            ok = False
        except (AssertionError, TypeError, IndexError) as e:
            print(f"mutation {m:14s} caught ({str(e)[:60]})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
