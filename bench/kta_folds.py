#!/usr/bin/env python3
"""Stratified k-fold split of a LIBSVM file for bench/run_kta.sh (the paper's
protocol on arcene: 5-fold cross-validation of its 100 rows, Table 1/2).
Fixed seed (1): the same folds on every run.

Usage: kta_folds.py SRC OUT_DIR K   ->  OUT_DIR/train<f>.svm, OUT_DIR/test<f>.svm
"""
import random
import sys


def main():
    src, out, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rows = [l for l in open(src) if l.strip()]
    pos = [i for i, l in enumerate(rows) if not l.startswith("-")]
    neg = [i for i, l in enumerate(rows) if l.startswith("-")]
    rng = random.Random(1)
    rng.shuffle(pos)
    rng.shuffle(neg)
    fold = {}
    for group in (pos, neg):
        for j, i in enumerate(group):
            fold[i] = j % k
    for f in range(k):
        with open(f"{out}/train{f}.svm", "w") as tr, open(f"{out}/test{f}.svm", "w") as te:
            for i, line in enumerate(rows):
                (te if fold[i] == f else tr).write(line)


if __name__ == "__main__":
    main()
