#!/usr/bin/env python3
"""Seed 002, Section 5.2's synthetic design: E-SVM (true groups), E-SVM(R), l1-SVM and SVM, parameters chosen on validation.

  /usr/bin/python3 bench/esvm_synth52.py --fgm build/fgm [--samples 315,720] [--repeats 2] [--threads 2]

The paper's design: n = 5040 features split at random into m equal groups,
one nonzero weight per group drawn from N(0, 1) (w*); m samples, half
positive x = x0 + d w*, half negative x = x0 - d w*, x0 ~ N(0, I), with d set
so that w* misclassifies about 10% (d = 1.2816 / |w*|, since w*'x0 ~ N(0,
|w*|^2)); a test set of the same size. Here a validation set of the same size
is drawn too, and every method's parameter is chosen on it by fgm path's
one-standard-error rule (the paper does not say how it chose its
parameters). Methods: E-SVM with the true groups (`features.groups`), E-SVM(R)
with m / ln m random groups (`exclusive.random_groups`), both `fgm path
solver=exclusive exclusive.algorithm=licp exclusive.bias=true
data.validation=...` over exclusive.path_lambda; l1-SVM (LIBLINEAR -s 5
through scikit-learn) and SVM (-s 3, l2 hinge) over a C grid. Prints one row
per method and m: mean test accuracy over the repeats and mean nonzero weights
at the chosen parameter. --losses hinge,squared_hinge runs both E-SVM methods once per
exclusive.loss (the squared hinge's rows are marked "sq"); --no-true-groups skips
E-SVM with the true groups. After the rows, the paired per-repeat differences
of every E-SVM(R) row against l1-SVM and, with two losses, between the losses.
"""
import argparse
import csv
import math
import os
import subprocess
import sys

import numpy as np

N_FEATURES = 5040


def make_split(rng, m, w, d):
    x = rng.standard_normal((m, N_FEATURES))
    y = np.where(np.arange(m) < m // 2, 1, -1)
    return x + d * y[:, None] * w[None, :], y


def write_svm(path, x, y):
    with open(path, "w") as f:
        for row, label in zip(x, y):
            f.write(("+1" if label > 0 else "-1") + "".join(f" {j + 1}:{v:.6g}" for j, v in enumerate(row)) + "\n")


def one_se(points, rows):
    best = max(p[2] for p in points)
    threshold = best - math.sqrt(best * (1 - best) / rows)
    return min((p for p in points if p[2] >= threshold), key=lambda p: p[0])


def fgm_path(args, work, tag, group_keys, lambdas, loss="hinge"):
    out = os.path.join(work, tag)
    cmd = [args.fgm, "path", f"data.train={work}/train.svm", f"data.test={work}/test.svm",
           f"data.validation={work}/val.svm", f"engine.cache_dir={work}/cache", "solver=exclusive",
           "exclusive.algorithm=licp", "exclusive.bias=true", f"exclusive.ridge={args.ridge}",
           f"engine.threads={args.threads}", "output.report=false", f"output.dir={out}",
           f"exclusive.loss={loss}",
           "exclusive.path_lambda=[" + ", ".join(str(float(x)) for x in lambdas) + "]"] + group_keys
    with open(os.path.join(work, tag + ".log"), "w") as log:
        if subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}")
    with open(os.path.join(out, "path.csv")) as f:
        rows = list(csv.DictReader(f))
    points = [(int(r["selected"]), float(r["test_accuracy"]), float(r["validation_accuracy"])) for r in rows]
    return points, all(r["converged"] == "1" for r in rows)


def sklearn_sweep(data, penalty, loss, grid):
    from sklearn.svm import LinearSVC
    (xtr, ytr), (xva, yva), (xte, yte) = data
    points = []
    for c in grid:
        model = LinearSVC(C=c, penalty=penalty, loss=loss, dual=penalty == "l2", max_iter=20000, tol=1e-4)
        model.fit(xtr, ytr)
        points.append((int(np.count_nonzero(model.coef_)), model.score(xte, yte), model.score(xva, yva)))
    return points


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fgm", required=True)
    ap.add_argument("--work", default="bench/work/esvm_synth52")
    ap.add_argument("--samples", default="315,720", help="m: samples = groups (the paper: 112 ... 2520)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ridge", type=float, default=1.0)
    ap.add_argument("--lambdas", default="100,30,10,3,1,0.3,0.1")
    ap.add_argument("--C", default="0.001,0.003,0.01,0.03,0.1,0.3,1")
    ap.add_argument("--losses", default="hinge", help="E-SVM's exclusive.loss values (hinge, squared_hinge)")
    ap.add_argument("--no-true-groups", action="store_true", help="skip E-SVM with the true groups")
    args = ap.parse_args()
    args.fgm = os.path.abspath(args.fgm)
    lambdas = [float(x) for x in args.lambdas.split(",")]
    grid = [float(x) for x in args.C.split(",")]
    print("m,method,test_acc_mean,test_acc_sd,nonzeros_mean,all_certified")
    for m in [int(x) for x in args.samples.split(",")]:
        results = {}
        for r in range(args.repeats):
            rng = np.random.default_rng(1000 * m + r)
            work = os.path.join(args.work, f"m{m}-r{r}")
            os.makedirs(work, exist_ok=True)
            order = rng.permutation(N_FEATURES)
            groups = np.array_split(order, m)
            w = np.zeros(N_FEATURES)
            for g in groups:
                w[rng.choice(g)] = rng.standard_normal()
            d = 1.2815515655446004 / np.linalg.norm(w)  # Phi^-1(0.9) / |w*|: about 10% error for w*
            data = [make_split(rng, m, w, d) for _ in range(3)]  # train, validation, test
            for name, (x, y) in zip(("train", "val", "test"), data):
                write_svm(os.path.join(work, name + ".svm"), x, y)
            with open(os.path.join(work, "groups.txt"), "w") as f:
                for g in groups:
                    f.write(" ".join(str(j + 1) for j in sorted(g)) + "\n")
            true_acc = float(np.mean(np.where(data[2][0] @ w > 0, 1, -1) == data[2][1]))
            runs = {}
            for loss in args.losses.split(","):
                sq = "" if loss == "hinge" else " sq"
                if not args.no_true_groups:
                    runs["E-SVM (true groups)" + sq] = fgm_path(args, work, "esvm" + sq.strip(),
                                                                [f"features.groups={work}/groups.txt"], lambdas, loss)
                runs["E-SVM(R)" + sq] = fgm_path(args, work, "esvmr" + sq.strip(),
                                                 [f"exclusive.random_groups={max(1, round(m / math.log(m)))}"],
                                                 lambdas, loss)
            runs["l1-SVM (-s 5)"] = (sklearn_sweep(data, "l1", "squared_hinge", grid), True)
            runs["SVM (-s 3)"] = (sklearn_sweep(data, "l2", "hinge", grid), True)
            results.setdefault("w* (the truth)", []).append((m, true_acc, True))
            for name, (points, certified) in runs.items():
                chosen = one_se(points, m)
                results.setdefault(name, []).append((chosen[0], chosen[1], certified))
        for name, rows in results.items():
            acc = [a for _, a, _ in rows]
            print(f"{m},{name},{np.mean(acc):.4f},{np.std(acc):.4f},{np.mean([n for n, _, _ in rows]):.0f},"
                  f"{int(all(c for _, _, c in rows))}", flush=True)
        paired = [(a, "l1-SVM (-s 5)") for a in results if a.startswith("E-SVM(R)")]
        if "E-SVM(R) sq" in results and "E-SVM(R)" in results:
            paired.append(("E-SVM(R) sq", "E-SVM(R)"))
        for a, b in paired:  # the same data sets: per-repeat differences
            diff = np.array([x[1] for x in results[a]]) - np.array([x[1] for x in results[b]])
            print(f"{m},paired {a} - {b},{diff.mean():+.4f},{diff.std():.4f},se {diff.std() / np.sqrt(len(diff)):.4f},",
                  flush=True)


if __name__ == "__main__":
    main()
