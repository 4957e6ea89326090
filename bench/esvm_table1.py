#!/usr/bin/env python3
"""Seed 002, Table 1 protocol on the data here (issue 22): E-SVM(R) against a linear SVM.

  /usr/bin/python3 bench/esvm_table1.py --fgm build/fgm [--repeats 3] [--lambda 1] [--ridge 1]
                                        [--losses hinge,squared_hinge]

Datasets: ALLAML = leu train + test merged (72 x 7129; the paper's ALLAML row,
9 folds) and colon-cancer (62 x 2000; not in the paper's table: 5 folds).
Protocol: the paper reports cross-validated accuracy with the fold counts of
its Table 1; here that k-fold split is stratified, seeded, and repeated
`--repeats` times (repeated random splits). E-SVM(R) is `fgm train
solver=exclusive exclusive.algorithm=licp` (hinge + (alpha/2)|w|^2 +
(lambda/2)|w|_e^2, random groups m = round(s/ln s), s = --relevant, no bias:
the paper's (10)); the linear SVM is LIBLINEAR `-s 3` (L2-regularised hinge,
dual CD) with C = 1/alpha and no bias (the same ridge). Both at fixed
parameters (the paper does not give its grids). Prints one CSV row per
dataset: mean and standard deviation over all folds of every repeat, E-SVM's
mean nonzero weights, and fgm's seconds per fit. --losses runs E-SVM(R) once per
exclusive.loss on the same splits (rows tagged with the loss) and, with two
losses, adds a row of the paired per-fold difference (second minus first).
"""
import argparse
import bz2
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")
WORK = "bench/work/esvm_table1"


def read_rows(path):
    opener = bz2.open if path.endswith(".bz2") else open
    with opener(path, "rt") as f:
        return [line.strip() for line in f if line.strip()]


def datasets():
    leu = read_rows(os.path.join(DATA, "leu", "leu.bz2")) + read_rows(os.path.join(DATA, "leu", "leu.t.bz2"))
    colon = read_rows(os.path.join(DATA, "colon-cancer", "colon-cancer"))
    return [("ALLAML (leu)", leu, 7129, 9), ("colon-cancer", colon, 2000, 5)]


def label(row):
    return 1 if float(row.split()[0]) > 0 else -1


def stratified_folds(rows, k, seed):
    rng = random.Random(seed)
    folds = [[] for _ in range(k)]
    for cls in (1, -1):
        idx = [i for i, r in enumerate(rows) if label(r) == cls]
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            folds[j % k].append(i)
    return folds


def write(path, rows):
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def run_esvm(fgm, train, test, width, args, out, loss):
    cmd = [fgm, "train", f"data.train={train}", f"data.test={test}", f"data.features={width}", "solver=exclusive",
           "exclusive.algorithm=licp", f"exclusive.loss={loss}", f"exclusive.lambda={args.lam}", f"exclusive.ridge={args.ridge}",
           f"exclusive.expected_relevant={args.relevant}", "engine.threads=1", f"output.dir={out}",
           "output.report=false", f"engine.cache_dir={WORK}/cache", "engine.progress=off"]
    start = time.time()
    summary = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    seconds = time.time() - start
    run = json.load(open(os.path.join(out, "run.json")))
    ex = run["exclusive"]
    nonzero = int(summary.split("selected=")[1].split()[0])  # the summary line's nonzero weights
    return run["test"]["accuracy"], ex["converged"], ex["duality_gap"], seconds, nonzero


def run_svm(train, test, ridge, model):
    subprocess.run(["liblinear-train", "-q", "-s", "3", "-c", str(1.0 / ridge), train, model], check=True,
                   stdout=subprocess.DEVNULL)
    out = subprocess.run(["liblinear-predict", test, model, "/dev/null"], capture_output=True, text=True).stdout
    return float(out.split("=")[1].split("%")[0]) / 100


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fgm", default="build/fgm")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lambda", dest="lam", type=float, default=1.0)
    ap.add_argument("--ridge", type=float, default=1.0)
    ap.add_argument("--relevant", type=int, default=20)
    ap.add_argument("--losses", default="hinge", help="E-SVM's exclusive.loss values (hinge, squared_hinge)")
    args = ap.parse_args()
    losses = args.losses.split(",")
    os.makedirs(WORK, exist_ok=True)
    print("dataset,shape,folds,repeats,loss,svm_mean,svm_std,esvm_mean,esvm_std,esvm_nonzeros,esvm_all_converged,"
          "esvm_max_gap,esvm_seconds_per_fit")
    for name, rows, width, k in datasets():
        svm = []
        esvm = {loss: {"acc": [], "nz": [], "gap": [], "secs": [], "converged": True} for loss in losses}
        for rep in range(args.repeats):
            folds = stratified_folds(rows, k, 1000 + rep)
            for f in range(k):
                test_idx = set(folds[f])
                tag = f"{name.split()[0]}-{rep}-{f}"
                train, test = f"{WORK}/{tag}.train.svm", f"{WORK}/{tag}.test.svm"
                write(train, [r for i, r in enumerate(rows) if i not in test_idx])
                write(test, [rows[i] for i in sorted(test_idx)])
                svm.append(run_svm(train, test, args.ridge, f"{WORK}/{tag}.model"))
                for loss in losses:
                    out = f"{WORK}/{tag}-{loss}-out"
                    shutil.rmtree(out, ignore_errors=True)
                    acc, conv, gap, s, nz = run_esvm(args.fgm, train, test, width, args, out, loss)
                    e = esvm[loss]
                    e["acc"].append(acc), e["nz"].append(nz), e["gap"].append(gap), e["secs"].append(s)
                    e["converged"] = e["converged"] and conv
        for loss in losses:
            e = esvm[loss]
            print(f"{name},{len(rows)}x{width},{k},{args.repeats},{loss},{statistics.mean(svm):.4f},"
                  f"{statistics.pstdev(svm):.4f},{statistics.mean(e['acc']):.4f},{statistics.pstdev(e['acc']):.4f},"
                  f"{statistics.mean(e['nz']):.1f},{e['converged']},{max(e['gap']):.3g},"
                  f"{statistics.mean(e['secs']):.2f}")
        if len(losses) == 2:  # paired over the same folds: the SD of the mean is SD/sqrt(folds x repeats)
            diff = [b - a for a, b in zip(esvm[losses[0]]["acc"], esvm[losses[1]]["acc"])]
            print(f"{name},paired {losses[1]} - {losses[0]}: mean {statistics.mean(diff):+.4f} "
                  f"sd {statistics.pstdev(diff):.4f} se {statistics.pstdev(diff) / len(diff) ** 0.5:.4f} "
                  f"over {len(diff)} folds")
        sys.stdout.flush()

if __name__ == "__main__":
    main()
