#!/usr/bin/env python3
"""scripts/layout_stats.py STATS.jsonl - the conversion table of scripts/layout_stats.sh.

Reads TLE_STATS lines (one JSON object per GPU compile) and counts identical lines once (the same
specialization - kernel, PTX hash, options - compiled again by another launch or process), then
prints per source file and in
total: specializations, convert_layout ops left by the layout pass, the ops forward layout
inference alone would leave (the elimination off), the share removed, conversions through shared
memory and their bytes, and barriers.
"""
import collections
import json
import os
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    seen = set()
    rows = []
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if not line or line in seen:
                continue
            seen.add(line)
            rows.append(json.loads(line))
    if not rows:
        sys.exit("layout_stats: no TLE_STATS lines (was libtle built with them?)")
    groups = collections.OrderedDict()
    for r in sorted(rows, key=lambda r: r["file"]):
        path = r["file"]
        parts = path.split(os.sep)
        for top in ("examples", "benchmarks", "tests", "include"):
            if top in parts:
                path = os.sep.join(parts[parts.index(top):])
                break
        groups.setdefault(path, []).append(r)

    def line(name, rs):
        n = len(rs)
        after = sum(r["conversions"] for r in rs)
        before = sum(r["conversions_without_elimination"] for r in rs)
        shared = sum(r["conversions_through_shared"] for r in rs)
        nbytes = sum(r["conversion_shared_bytes"] for r in rs)
        bars = sum(r["barriers"] for r in rs)
        removed = f"{100.0 * (before - after) / before:5.1f} %" if before else "    -  "
        print(f"{name:<44} {n:>6} {before:>8} {after:>7} {removed:>8} {shared:>7} {nbytes:>11} {bars:>9}")
        return before, after

    print(f"{'source':<44} {'specs':>6} {'without':>8} {'with':>7} {'removed':>8} {'shared':>7} "
          f"{'shared B':>11} {'barriers':>9}")
    for path, rs in groups.items():
        line(path, rs)
    print("-" * 106)
    line("total", rows)


if __name__ == "__main__":
    main()
