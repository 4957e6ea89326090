#!/usr/bin/python3
"""news20 (20 classes) one-vs-rest: fgm against LIBLINEAR -s 5 at matched
total non-zero counts.

    bench/multiclass_news20.py                 # ~10 min on 2 cores
    bench/multiclass_news20.py --counts 10,50 --C 0.1,1

Data: ../shared/data/news20/news20.bz2 (raw counts, classes 1..20) split as
bench/compare_liblinear.py splits news20 (stratified_split: 5 folds, seed
SPLIT_SEED, fold 0 held out; the same rows as its binary split), labels kept.
Files in bench/work/multiclass_news20/.
LIBLINEAR: `liblinear-train -s 5 -c C -B 1` (l1-regularised squared hinge,
one-vs-rest over the classes, bias column not counted), accuracy from
`liblinear-predict`; non-zeros = non-zero weights over all classes.
fgm: `fgm train` with configs/news20.toml's fgm.C, fgm.B and bias,
fgm.max_features = k per class (so the total is at most 20·k), test accuracy
from `fgm predict` (argmax of the 20 decision values); non-zeros = features
over all classes (fgm inspect).
Matching: each fgm point's LIBLINEAR accuracy is interpolated linearly in
log(non-zeros) between the bracketing LIBLINEAR points (interp_acc).
fgm.B = max(1, min(B, k // 10)) (see fgm_point).
Output: bench/results/multiclass_news20.csv (every point, both tools) and
bench/results/multiclass_news20_matched.csv.

--transform: both tools see log1p then row-l2 normalised rows. fgm trains on
the raw files with features.transform=["log1p","row_l2"] (the model records
the transform, so `fgm predict` applies it to the raw test rows); LIBLINEAR
reads train/test files transformed here (transform_line: sign(x)·log1p(|x|)
per value, then each row divided by its l2 norm — the definitions of
features/transforms.h). Output then goes to multiclass_news20_log1p_l2*.csv.
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_liblinear import (SHARED, SPLIT_SEED, clean_lines, interp_acc, log,  # noqa: E402
                               nearest, stratified_split, write_lines)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(HERE, "work", "multiclass_news20")
RESULTS = os.path.join(HERE, "results")
WIDTH = 62061


def prepare():
    os.makedirs(WORK, exist_ok=True)
    train, test = os.path.join(WORK, "train.svm"), os.path.join(WORK, "test.svm")
    if not (os.path.exists(train) and os.path.exists(test)):
        rows = clean_lines(os.path.join(SHARED, "news20", "news20.bz2"))
        kept, held = stratified_split(rows, 5, 0, SPLIT_SEED)
        write_lines(test, held)
        write_lines(train, kept)
    return train, test


def transform_line(line):
    """One svmlight row, log1p then row-l2 (as fgm's features.transform)."""
    label, *pairs = line.split()
    cells = []
    for p in pairs:
        j, v = p.split(":")
        x = float(v)
        cells.append((j, math.copysign(math.log1p(abs(x)), x)))
    norm = math.sqrt(sum(x * x for _, x in cells))
    scale = 1.0 / norm if norm > 0 else 1.0
    return " ".join([label] + [f"{j}:{x * scale:.17g}" for j, x in cells])


def transform_files(train, test):
    out = []
    for path in (train, test):
        dst = path[:-len(".svm")] + "-log1p_l2.svm"
        if not os.path.exists(dst):
            with open(path) as f:
                write_lines(dst, [transform_line(line) for line in f.read().split("\n") if line.strip()])
        out.append(dst)
    return out


def liblinear_point(train, test, C, tag=""):
    model = os.path.join(WORK, f"ll{tag}-{C:g}.model")
    t0 = time.time()
    subprocess.run(["liblinear-train", "-q", "-s", "5", "-c", repr(C), "-B", "1", train, model],
                   check=True)
    seconds = time.time() - t0
    out = subprocess.run(["liblinear-predict", test, model, os.devnull], check=True,
                         capture_output=True, text=True).stdout
    acc = float(out.split("=")[1].split("%")[0]) / 100
    nnz = 0
    with open(model) as f:
        lines = f.read().split("\n")
    start = lines.index("w") + 1
    for line in lines[start:start + WIDTH]:  # the bias row (WIDTH + 1) is not counted
        nnz += sum(1 for v in line.split() if float(v) != 0)
    return {"tool": "liblinear", "C": C, "k": "", "nnz": nnz, "accuracy": acc, "seconds": seconds}


def fgm_point(fgm, cfg, train, test, k, C, transform=False):
    out = os.path.join(WORK, f"fgm{'-log1p_l2' if transform else ''}-{k}-{C:g}")
    # At most a tenth of the count per batch: the first batch is scored with
    # α⁰ = C·1, before the bias is fitted, which on a 1-in-20 class favours
    # frequent words of the rest; later batches see the fitted duals.
    B = max(1, min(int(cfg["fgm"]["B"]), k // 10))
    cmd = [fgm, "train", f"data.train={train}", f"output.dir={out}", f"fgm.max_features={k}",
           f"fgm.B={B}", f"fgm.C={C}", f"fgm.bias={str(cfg['fgm']['bias']).lower()}",
           f"fgm.max_iterations={math.ceil(k / B) + 1}", "fgm.eps_outer=0", "engine.threads=2",
           "engine.memory_budget=1GB", f"engine.cache_dir={os.path.join(WORK, 'cache')}",
           f"data.features={WIDTH}"]
    if transform:
        cmd.append('features.transform=["log1p","row_l2"]')
    t0 = time.time()
    subprocess.run(cmd, check=True, capture_output=True)
    seconds = time.time() - t0
    model = os.path.join(out, "model.fgm")
    pred = subprocess.run([fgm, "predict", "--model", model, test], check=True, capture_output=True,
                          text=True).stdout
    kv = dict(t.split("=") for t in pred.split())
    info = json.loads(subprocess.run([fgm, "inspect", model], check=True, capture_output=True,
                                     text=True).stdout)
    nnz = sum(sum(1 for f in c["features"] if f["weight"] != 0) for c in info["classes"])
    return {"tool": "fgm", "C": C, "k": k, "nnz": nnz,
            "accuracy": float(kv["accuracy"]), "auc": float(kv["auc"]), "seconds": seconds}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fgm", default=os.path.join(ROOT, "build", "fgm"))
    ap.add_argument("--counts", default="5,10,20,50,100,200")
    ap.add_argument("--C", default="0.01,0.02,0.05,0.1,0.2,0.5,1,2", help="LIBLINEAR's C values")
    ap.add_argument("--fgm-C", default="", help="fgm.C values (default: configs/news20.toml's)")
    ap.add_argument("--no-liblinear", action="store_true")
    ap.add_argument("--transform", action="store_true",
                    help="log1p then row-l2 for both tools (fgm: features.transform; LIBLINEAR: "
                         "transformed copies of the files)")
    args = ap.parse_args()
    with open(os.path.join(ROOT, "configs", "news20.toml"), "rb") as f:
        cfg = tomllib.load(f)
    train, test = prepare()
    ll_train, ll_test = transform_files(train, test) if args.transform else (train, test)
    suffix = "_log1p_l2" if args.transform else ""
    points = []
    for C in ([] if args.no_liblinear else [float(c) for c in args.C.split(",")]):
        p = liblinear_point(ll_train, ll_test, C, suffix)
        log("liblinear", p)
        points.append(p)
    fgm_cs = [float(c) for c in args.fgm_C.split(",")] if args.fgm_C else [float(cfg["fgm"]["C"])]
    for C in fgm_cs:
        for k in [int(c) for c in args.counts.split(",")]:
            p = fgm_point(args.fgm, cfg, train, test, k, C, args.transform)
            log("fgm", p)
            points.append(p)
    os.makedirs(RESULTS, exist_ok=True)
    fields = ["tool", "C", "k", "nnz", "accuracy", "auc", "seconds"]
    with open(os.path.join(RESULTS, f"multiclass_news20{suffix}.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fields, restval="")
        w.writeheader()
        w.writerows(points)
    ll = [p for p in points if p["tool"] == "liblinear"]
    with open(os.path.join(RESULTS, f"multiclass_news20{suffix}_matched.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["fgm_features_per_class", "fgm_C", "nnz", "fgm_accuracy", "liblinear_accuracy_interp",
                    "liblinear_nearest_C", "liblinear_nearest_nnz", "liblinear_nearest_accuracy"])
        for p in points:
            if p["tool"] != "fgm":
                continue
            near = nearest(ll, p["nnz"]) or {"C": "", "nnz": "", "accuracy": float("nan")}
            w.writerow([p["k"], p["C"], p["nnz"], f"{p['accuracy']:.4f}",
                        f"{interp_acc(ll, p['nnz']):.4f}", near["C"], near["nnz"],
                        f"{near['accuracy']:.4f}"])
    print(open(os.path.join(RESULTS, f"multiclass_news20{suffix}_matched.csv")).read())


if __name__ == "__main__":
    main()
