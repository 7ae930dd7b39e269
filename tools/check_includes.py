#!/usr/bin/env python3
"""Checks that includes between the modules of src/ point down only.

Each folder of src/ is a module (src/main.cpp is the module "main"); kernels/ is the bottom
floor. FLOORS lists the floors from the top down; a file may include headers of its own module
and of modules on lower floors, never of its own floor's other modules or of a higher floor.
Prints every edge that breaks the rule (file:line, the floors) and exits 1, or prints the graph's
size and exits 0. Usage: tools/check_includes.py [REPO_ROOT]
"""
import pathlib
import re
import sys

# Top to bottom. The pipeline reads down: main > cli > runner > plan > ... > core > kernels.
FLOORS = [
    ["main"],
    ["cli"],
    ["runner"],
    ["plan"],
    ["baselines", "tuning"],
    ["variants", "reference"],
    ["tensors"],
    ["unfused", "timing"],
    ["gpu", "report", "cases"],
    ["core"],
    ["kernels"],
]
FLOOR = {m: i for i, floor in enumerate(FLOORS) for m in floor}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = {".cpp", ".hpp", ".cu", ".cuh", ".h"}


def module_of_file(root, path):
    rel = path.relative_to(root)
    if rel.parts[0] == "kernels":
        return "kernels"
    return "main" if len(rel.parts) == 2 else rel.parts[1]


def module_of_include(root, name):
    if (root / "kernels" / name).exists():
        return "kernels"
    if (root / "src" / name).exists():
        return name.split("/")[0]
    return None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    files = [p for d in ("src", "kernels") for p in sorted((root / d).rglob("*"))
             if p.suffix in SOURCE_SUFFIXES]
    problems, edges = [], set()
    for path in files:
        src = module_of_file(root, path)
        if src not in FLOOR:
            problems.append(f"{path.relative_to(root)}: module '{src}' is on no floor "
                            "(add it to FLOORS in tools/check_includes.py)")
            continue
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            dst = module_of_include(root, m.group(1))
            where = f"{path.relative_to(root)}:{line_no}"
            if dst is None:
                problems.append(f"{where}: \"{m.group(1)}\" is neither in src/ nor in kernels/")
                continue
            if dst == src:
                continue
            if dst not in FLOOR:
                problems.append(f"{where}: module '{dst}' is on no floor")
                continue
            edges.add((src, dst))
            if FLOOR[dst] <= FLOOR[src]:
                kind = "sideways" if FLOOR[dst] == FLOOR[src] else "up"
                problems.append(f"{where}: {src} (floor {FLOOR[src]}) includes {dst} "
                                f"(floor {FLOOR[dst]}), {kind}: \"{m.group(1)}\"")
    for p in problems:
        print(p)
    if problems:
        print(f"check_includes: {len(problems)} include(s) break the floors")
        return 1
    print(f"check_includes: {len(files)} files, {len(edges)} module edges, all pointing down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
