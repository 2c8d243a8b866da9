#!/usr/bin/env python3
"""benchmarks/tune_plot.py FILE.csv [OUT.png]

Draws the CSV that benchmarks/tune_report writes (entry, kernel, predicted_rank, time_over_best):
each tuning cache entry's measured time / its best time (log2 scale) against the rank a ranking
model trained on the other entries predicted for it (0 = predicted fastest). A good model puts the
points low on the left. Writes OUT.png (default: FILE with .png). Needs matplotlib; without it,
says so and exits 0 (the numbers are in the CSV and tune_report's output).
"""
import csv
import os
import sys


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = sys.argv[1]
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.splitext(src)[0] + ".png"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("tune_plot: matplotlib is not available (%s); no plot" % e)
        return 0
    series = {}
    with open(src, newline="") as f:
        for row in csv.DictReader(f):
            key = (int(row["entry"]), row["kernel"])
            series.setdefault(key, ([], []))
            series[key][0].append(float(row["predicted_rank"]))
            series[key][1].append(float(row["time_over_best"]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for (entry, kernel), (x, y) in sorted(series.items()):
        ax.scatter(x, y, s=12, label="%d %s" % (entry, kernel))
    ax.set_yscale("log", base=2)
    ax.set_xlabel("predicted rank (0 = predicted fastest)")
    ax.set_ylabel("measured time / best")
    ax.grid(True, alpha=0.3)
    if len(series) <= 12:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dst, dpi=100)
    print("tune_plot: %s (%d entries)" % (dst, len(series)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
