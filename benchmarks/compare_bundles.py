#!/usr/bin/env python3
"""benchmarks/compare_bundles.py DIR ROUNDS - the table of compare_bundles.sh: per gpu_bench case,
the median over rounds of base and new (tle_ms), new / base time, and the cases slower by more
than 2 %. Cases that failed on either side are listed, not compared."""
import json
import statistics
import sys


def load(path):
    out = {}
    try:
        f = open(path)
    except OSError as e:
        print(f"compare: {path}: {e.strerror} (that round is left out)")
        return out
    with f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                if "case" in r:
                    out[r["case"]] = r
    return out


def main():
    d, rounds = sys.argv[1], int(sys.argv[2])
    sides = {s: [load(f"{d}/{s}.{r}.jsonl") for r in range(1, rounds + 1)] for s in ("base", "new")}
    for s in sides:
        sides[s] = [run for run in sides[s] if run]
    if not sides["base"] or not sides["new"]:
        sys.exit("compare: no complete round on one side")
    cases = [c for c in sides["base"][0] if all(c in run for s in sides.values() for run in s)]
    slower = []
    print(f"{'case':<44} {'base ms':>10} {'new ms':>10} {'new/base':>9}")
    for c in cases:
        rows = {s: [run[c] for run in runs] for s, runs in sides.items()}
        if not all(r.get("ok", True) and r.get("tle_ms") is not None for rs in rows.values() for r in rs):
            print(f"{c:<44} (failed on a side)")
            continue
        b = statistics.median(r["tle_ms"] for r in rows["base"])
        n = statistics.median(r["tle_ms"] for r in rows["new"])
        print(f"{c:<44} {b:>10.4f} {n:>10.4f} {n / b:>9.3f}")
        if n > 1.02 * b:
            slower.append(c)
    print(f"compare: {len(cases)} cases, {len(slower)} slower by more than 2 %: {', '.join(slower) or '-'}")


if __name__ == "__main__":
    main()
