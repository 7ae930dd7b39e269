#!/usr/bin/env python3
"""Compares two cubin caches (ffpa-bench --compile-only with XDG_CACHE_HOME=DIR, before and after
a change): pairs every cubin of the first with one of the second whose code sections are
byte-identical (.text.*, .nv.info*, .nv.constant*, .nv.shared*, ...), and counts whole-file
matches. The sections left out hold only the names and values of the namespace-scope constants
NVRTC emits (.strtab, .symtab, .nv.global.init and the relocations against them), which a rename
or a removed unused constant changes without changing any instruction.
Usage: tools/compare_cubins.py BEFORE_CACHE AFTER_CACHE   (exit 1 unless every code section pairs)
"""
import collections
import glob
import struct
import sys

NAMES = {".strtab", ".symtab", ".nv.global.init", ".rel.nv.constant4", ".rela.nv.constant4"}


def sections(path):
    b = open(path, "rb").read()
    shoff = struct.unpack_from("<Q", b, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names = hdrs[shstrndx][4]
    name = lambda o: b[names + o:b.index(b"\0", names + o)].decode()
    return {name(h[0]): b[h[4]:h[4] + h[5]] for h in hdrs}, b


def load(cache):
    out = []
    for p in sorted(glob.glob(cache + "/ffpa-bench/cubins/*.cubin")):
        s, b = sections(p)
        out.append((tuple(sorted((k, v) for k, v in s.items() if k not in NAMES)), b))
    return out


def main():
    before, after = load(sys.argv[1]), load(sys.argv[2])
    codes = collections.Counter(c for c, _ in after)
    files = {b for _, b in after}
    same_code = sum(codes[c] > 0 for c, _ in before)
    same_file = sum(b in files for _, b in before)
    print(f"{len(before)} cubins before, {len(after)} after: {same_code} with byte-identical code "
          f"sections, {same_file} byte-identical files")
    return 0 if before and same_code == len(before) else 1


if __name__ == "__main__":
    sys.exit(main())
