#!/usr/bin/env python3
"""Cross-validated KTA path (bench/run_kta.sh, arcene): the mean test accuracy
over the folds at each p, and its maximum along the path — an ORACLE figure
(chosen on the test folds), the paper's Table 2 measure (mean over 5 folds).

Usage: kta_cv_summary.py LABEL DIR_FOLD0 DIR_FOLD1 ...   (each with path.csv)
"""
import csv
import sys


def main():
    label, dirs = sys.argv[1], sys.argv[2:]
    by_p = {}
    for d in dirs:
        with open(f"{d}/path.csv") as f:
            for r in csv.DictReader(f):
                by_p.setdefault(float(r["p"]), []).append((float(r["test_accuracy"]), int(r["selected"])))
    complete = {p: v for p, v in by_p.items() if len(v) == len(dirs)}
    mean = {p: sum(a for a, _ in v) / len(v) for p, v in complete.items()}
    best = max(sorted(mean, reverse=True), key=lambda p: mean[p])
    sel = [s for _, s in complete[best]]
    print(f"| {label} | {len(dirs)} | {100 * mean[best]:.2f} % | {best:g} | "
          f"{sum(sel) / len(sel):.0f} ({min(sel)}-{max(sel)}) | "
          f"{100 * min(mean.values()):.2f}-{100 * max(mean.values()):.2f} % |")


if __name__ == "__main__":
    main()
