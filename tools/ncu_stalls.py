#!/usr/bin/env python3
"""Where a kernel's warps wait, instruction by instruction, from an Nsight Compute report.

Reads the report's source page exported as CSV (plain or gzip-compressed):

    ncu --set full --import-source no -k regex:KERNEL --launch-count 1 -o REPORT ffpa-bench ...
    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > REPORT-sass.csv

and prints the share of each stall reason over the kernel, then the instructions with the most
warp-state samples (offset from the kernel's first instruction, share, the SASS, the two
largest reasons). With --from/--to (offsets, hex) it lists that range instead, in address
order with the running share: one phase of a loop, read the way the notes of docs/notes/ quote
it. With --regions SIZE (bytes, hex) it sums the samples by aligned regions of the code instead,
each with its most frequent opcodes and largest reasons: where a phase's cost lies when no single
instruction stands out (the Philox draws of a dropout kernel, a hand-off's wait). Offsets, not
addresses, so that two runs of one build can be compared line by line.
"""
import argparse
import csv
import gzip
import io
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def fail(msg):
    print(f"ncu_stalls.py: {msg}", file=sys.stderr)
    sys.exit(2)


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def load(path):
    """(kernel name, rows): rows are dicts with off, sass, samples, executed, reasons."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    lines = list(csv.reader(io.StringIO(raw.decode("utf-8", "replace"))))
    # The first line names the kernel ("Kernel Name","...",), the second holds the columns.
    if len(lines) < 3 or not lines[0] or lines[0][0] != "Kernel Name":
        fail(f"{path}: not an Nsight Compute source page (--page source --csv)")
    header = lines[1]
    col = {h: i for i, h in enumerate(header)}
    for need in ("Address", "Source", SAMPLES):
        if need not in col:
            fail(f"{path}: no column \"{need}\" (export with --print-source sass)")
    reasons = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]
    rows = []
    for line in lines[2:]:
        if len(line) < len(header):
            continue
        try:
            addr = int(line[col["Address"]], 16)
        except ValueError:
            continue
        rows.append({
            "addr": addr,
            "sass": line[col["Source"]].strip(),
            "samples": number(line[col[SAMPLES]]),
            "executed": number(line[col[EXECUTED]]) if EXECUTED in col else 0.0,
            "reasons": {r[len("stall_"):]: number(line[col[r]]) for r in reasons},
        })
    if not rows:
        fail(f"{path}: no instructions")
    base = min(r["addr"] for r in rows)
    for r in rows:
        r["off"] = r["addr"] - base
    rows.sort(key=lambda r: r["addr"])
    return lines[0][1] if len(lines[0]) > 1 else "", rows


def top_reasons(row, n=2):
    ranked = sorted(row["reasons"].items(), key=lambda kv: -kv[1])[:n]
    return " ".join(f"{k}:{v:.0f}" for k, v in ranked if v > 0)


def opcode(sass):
    """The opcode of a SASS line without its predicate and modifiers (HGMMA, IMAD, ...)."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def print_regions(rows, total, size, min_share):
    regions = {}
    for r in rows:
        g = regions.setdefault(r["off"] // size, {"samples": 0.0, "ops": {}, "reasons": {}})
        g["samples"] += r["samples"]
        op = opcode(r["sass"])
        g["ops"][op] = g["ops"].get(op, 0) + 1
        for k, v in r["reasons"].items():
            g["reasons"][k] = g["reasons"].get(k, 0.0) + v
    print(f"{'offset':>7} {'share':>6}  opcodes (count)  reasons (share of all samples)")
    for k in sorted(regions):
        g = regions[k]
        share = 100 * g["samples"] / total
        if share < min_share:
            continue
        ops = sorted(g["ops"].items(), key=lambda kv: -kv[1])[:5]
        why = sorted(g["reasons"].items(), key=lambda kv: -kv[1])[:3]
        print(f"{k * size:7x} {share:5.1f}%  " + " ".join(f"{o}:{c}" for o, c in ops) + "  " +
              " ".join(f"{w}:{100 * v / total:.1f}" for w, v in why if v > 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="the source page as CSV (.csv or .csv.gz)")
    ap.add_argument("--top", type=int, default=25, help="instructions to list (default 25)")
    ap.add_argument("--from", dest="lo", help="first offset of a range to list (hex)")
    ap.add_argument("--to", dest="hi", help="last offset of the range (hex)")
    ap.add_argument("--min", type=float, default=0.0,
                    help="with a range or regions: list only those with at least this share (%%)")
    ap.add_argument("--regions", help="sum the samples by aligned regions of this many bytes "
                    "(hex, e.g. 800)")
    a = ap.parse_args()
    if (a.lo is None) != (a.hi is None):
        fail("--from and --to go together")
    if a.regions is not None and a.lo is not None:
        fail("--regions and --from/--to: one view at a time")
    size = None
    if a.regions is not None:
        try:
            size = int(a.regions, 16)
        except ValueError:
            size = 0
        if size <= 0:
            fail(f"--regions: a positive size in bytes, hexadecimal (e.g. 800), not \"{a.regions}\"")
    if a.top < 1:
        fail("--top: at least 1")

    kernel, rows = load(a.csv)
    total = sum(r["samples"] for r in rows)
    if total <= 0:
        fail(f"{a.csv}: no warp-state samples (profile with --set full or the SourceCounters "
             "section)")
    by_reason = {}
    for r in rows:
        for k, v in r["reasons"].items():
            by_reason[k] = by_reason.get(k, 0.0) + v
    reason_total = sum(by_reason.values()) or 1.0
    print(f"{kernel}: {len(rows)} instructions, {total:.0f} samples")
    for k, v in sorted(by_reason.items(), key=lambda kv: -kv[1]):
        if v / reason_total >= 0.005:
            print(f"  {k:<20} {100 * v / reason_total:5.1f} %")
    print()

    if size is not None:
        print_regions(rows, total, size, a.min)
        return
    if a.lo is not None:
        try:
            lo, hi = int(a.lo, 16), int(a.hi, 16)
        except ValueError:
            fail("--from/--to: hexadecimal offsets, as listed (e.g. 1b630)")
        run = 0.0
        print(f"{'offset':>7} {'share':>6} {'running':>7} {'executed':>10}  sass")
        for r in rows:
            if not lo <= r["off"] <= hi:
                continue
            run += r["samples"]
            share = 100 * r["samples"] / total
            if share >= a.min:
                print(f"{r['off']:7x} {share:5.2f}% {100 * run / total:6.2f}% "
                      f"{r['executed']:10.0f}  {r['sass'][:80]}  {top_reasons(r)}")
        return
    print(f"{'offset':>7} {'share':>6}  sass")
    for r in sorted(rows, key=lambda r: -r["samples"])[:a.top]:
        print(f"{r['off']:7x} {100 * r['samples'] / total:5.2f}%  {r['sass'][:80]}  "
              f"{top_reasons(r)}")


if __name__ == "__main__":
    main()
