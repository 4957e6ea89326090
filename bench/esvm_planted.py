#!/usr/bin/env python3
"""E-SVM(R) against l1-SVM at matched nonzeros on the issue-22 planted set, lambda and C chosen on validation rows.

  /usr/bin/python3 bench/esvm_planted.py --fgm build/fgm [--work bench/work/esvm_planted] [--threads 2]

Data: `fgm synth --rows 2000 --test-rows 4000 --features 20000 --relevant 100
--seed 1`. synth draws the truth, then the training rows, then the test rows
from one stream, so the training rows and the first 2,000 test rows are the
planted set's (`--test-rows 2000`) unchanged; the last 2,000 are fresh rows of
the same distribution, used here as the validation split (never the test rows
for any choice).

Curves (nonzero weights -> test accuracy), each with the point chosen on the
validation rows by the one-standard-error rule (`fgm path data.validation`):
  esvm20   E-SVM(R): `fgm path solver=exclusive exclusive.algorithm=licp
           exclusive.random_groups=20 exclusive.bias=true`, warm lambda path
  esvmgrid E-SVM(R) with the group count m chosen too: one `fgm path` with
           exclusive.path_random_groups=[2,5,20] (the lambda path once per m),
           the one-SE rule over all (m, lambda) points -- the engine's choice
  esvm1    the same solver with ONE group: (lambda/2)|w|_1^2 has the lasso's
           path, so this is the l1 hinge SVM (S-SVM, Bi et al. 2003) plus a
           small ridge -- it separates the loss from the exclusive norm
  --loss squared_hinge: the E-SVM curves with exclusive.loss=squared_hinge
           (the L2-SVM loss, as l1svm's; tags get the suffix _sq); --engine-debias
           adds exclusive.debias=true (the engine's refit, C = exclusive.debias_C,
           one-SE on validation over the refits) and prints its choice
  l1svm    l1-regularised squared hinge (LIBLINEAR -s 5 through scikit-learn,
           intercept), a C sweep
and, for every point of every curve, the same refit on its support (an
l2-regularised squared-hinge SVM, scikit-learn LinearSVC, its C chosen on the
validation rows): the de-biased accuracy, applied alike to every method.
Also prints, per E-SVM(R) point, how its weight spreads over the 20 random
groups against the planted features per group (the groups recomputed with
the engine's draw, solvers/exclusive/exclusive_groups.cpp).
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

ROWS, TEST_ROWS, FEATURES, RELEVANT, SEED = 2000, 2000, 20000, 100, 1


def sh(cmd, log):
    t = time.time()
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}; see {log}")
    return time.time() - t


def prepare(args):
    d = os.path.join(args.work, "data")
    if not os.path.exists(os.path.join(d, "val.svm")):
        os.makedirs(args.work, exist_ok=True)
        if not os.path.exists(os.path.join(d, "test.svm")):
            sh([args.fgm, "synth", "--out", d, "--rows", str(ROWS), "--test-rows", str(2 * TEST_ROWS), "--features",
                str(FEATURES), "--relevant", str(RELEVANT), "--seed", str(SEED)], os.path.join(args.work, "synth.log"))
        with open(os.path.join(d, "test.svm")) as f, open(os.path.join(d, "test2k.svm"), "w") as t, \
                open(os.path.join(d, "val.svm"), "w") as v:
            for i, line in enumerate(f):
                (t if i < TEST_ROWS else v).write(line)
        os.remove(os.path.join(d, "test.svm"))
    if not os.path.exists(os.path.join(d, "store")):
        sh([args.fgm, "ingest", os.path.join(d, "train.svm"), "--out", os.path.join(d, "store")],
           os.path.join(args.work, "ingest.log"))
    return d


def dense(path, cache):
    if os.path.exists(cache):
        z = np.load(cache)
        return z["X"], z["y"]
    from sklearn.datasets import load_svmlight_file
    X, y = load_svmlight_file(path, n_features=FEATURES)
    X = X.toarray()
    np.savez(cache, X=X, y=y)
    return X, y


def mt19937_64(seed):
    """std::mt19937_64 (the engine's random groups), as a generator of 64-bit draws."""
    n, m, mask = 312, 156, (1 << 64) - 1
    mt = [seed & mask]
    for i in range(1, n):
        mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & mask)
    idx = n
    while True:
        if idx >= n:
            for i in range(n):
                x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % n] & 0x7FFFFFFF)
                xa = x >> 1
                if x & 1:
                    xa ^= 0xB5026F5AA96619E9
                mt[i] = mt[(i + m) % n] ^ xa
            idx = 0
        y = mt[idx]
        idx += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        yield y


def random_groups(columns, count, seed):
    """Column -> group as exclusive::random_groups draws them (Fisher-Yates, then round robin)."""
    order = list(range(columns))
    rng = mt19937_64(seed)
    top = (1 << 64) - 1
    for k in range(columns, 1, -1):
        limit = top - top % k
        draw = next(rng)
        while draw >= limit:
            draw = next(rng)
        order[k - 1], order[draw % k] = order[draw % k], order[k - 1]
    group = np.empty(columns, dtype=int)
    for q, column in enumerate(order):
        group[column] = q % count
    return group


def model_weights(fgm, path):
    m = json.loads(subprocess.check_output([fgm, "inspect", path]))
    w = np.zeros(FEATURES)
    for f in m["features"]:
        w[int(f["id"]) - 1] = f["weight"]
    return w, (-m["bias"] if m.get("has_bias") else 0.0)  # decision w'x + b, b = -(the model's bias)


def accuracy(X, y, w, b):
    return float(np.mean(np.where(X @ w + b > 0, 1, -1) == y))


def one_se(points):
    """fgm path's rule: the fewest nonzeros with validation accuracy >= best - sqrt(best(1-best)/rows)."""
    best = max(p["val"] for p in points)
    threshold = best - math.sqrt(best * (1 - best) / TEST_ROWS)
    return min((p for p in points if p["val"] >= threshold), key=lambda p: p["nnz"])


def refit(data, support, grid):
    """l2 squared-hinge SVM on `support` (its C chosen on the validation rows): (test, validation) accuracy."""
    from sklearn.svm import LinearSVC
    (Xtr, ytr), (Xte, yte), (Xva, yva) = data
    if len(support) == 0:
        return float("nan"), float("nan")
    best = None
    for c in grid:
        m = LinearSVC(C=c, loss="squared_hinge", dual=len(support) > ROWS, max_iter=20000, tol=1e-5)
        m.fit(Xtr[:, support], ytr)
        val = m.score(Xva[:, support], yva)
        if best is None or val > best[1]:
            best = (m.score(Xte[:, support], yte), val)
    return best


def esvm_path(args, d, tag, groups, ridge, lambdas):
    """groups: m, or a list of m (exclusive.path_random_groups)."""
    out = os.path.join(args.work, tag)
    grouping = (f"exclusive.random_groups={groups}" if isinstance(groups, int) else
                "exclusive.path_random_groups=[" + ", ".join(str(m) for m in groups) + "]")
    cmd = [args.fgm, "path", f"data.train={d}/store", f"data.test={d}/test2k.svm", f"data.validation={d}/val.svm",
           "solver=exclusive", "exclusive.algorithm=licp", grouping,
           f"exclusive.ridge={ridge}", "exclusive.bias=true", f"engine.threads={args.threads}",
           f"exclusive.loss={args.loss}",
           "engine.memory_budget=3GB", "output.report=false", f"output.dir={out}",
           "exclusive.path_lambda=[" + ", ".join(str(float(x)) for x in lambdas) + "]"]
    if args.engine_debias:
        cmd.append("exclusive.debias=true")
    if not os.path.exists(os.path.join(out, "path.csv")):
        seconds = sh(cmd, os.path.join(args.work, tag + ".log"))
        print(f"# {tag}: {' '.join(cmd)}  ({seconds:.0f} s wall)", flush=True)
    points = []
    with open(os.path.join(out, "path.csv")) as f:
        for k, row in enumerate(csv.DictReader(f)):
            w, b = model_weights(args.fgm, os.path.join(out, f"point-{k}.fgm"))
            points.append({"param": float(row["lambda"]), "nnz": int(np.count_nonzero(w)), "w": w, "b": b,
                           "test": float(row["test_accuracy"]), "val": float(row["validation_accuracy"]),
                           "converged": row["converged"] == "1", "seconds": float(row["point_seconds"]),
                           "engine_refit_test": float(row.get("debiased_test_accuracy") or "nan"),
                           "engine_refit_val": float(row.get("debiased_validation_accuracy") or "nan"),
                           "groups": int(row["groups"]) if row.get("groups") else groups})
    with open(os.path.join(out, "path.json")) as f:
        selection = json.load(f).get("selection", {})
    if "chosen_point" in selection:
        points[selection["chosen_point"]]["engine_choice"] = True
    if "one_se_point" in selection.get("debiased", {}):
        points[selection["debiased"]["one_se_point"]]["engine_refit_choice"] = True
    return points


def l1svm_sweep(data, grid):
    from sklearn.svm import LinearSVC
    (Xtr, ytr), (Xte, yte), (Xva, yva) = data
    points = []
    for c in grid:
        t = time.time()
        m = LinearSVC(C=c, penalty="l1", loss="squared_hinge", dual=False, tol=1e-4, max_iter=10000)
        m.fit(Xtr, ytr)
        w, b = m.coef_.ravel(), float(m.intercept_[0])
        points.append({"param": c, "nnz": int(np.count_nonzero(w)), "w": w, "b": b,
                       "test": accuracy(Xte, yte, w, b), "val": accuracy(Xva, yva, w, b), "converged": True,
                       "seconds": time.time() - t})
    return points


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fgm", required=True)
    ap.add_argument("--work", default="bench/work/esvm_planted")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lambdas", default="3000,1000,300,100,30,10,3,1",
                    help="E-SVM(R), 20 groups (decreasing; '' skips)")
    ap.add_argument("--groups-grid", default="2,5,20", help="esvmgrid: exclusive.path_random_groups ('' skips)")
    ap.add_argument("--lambdas-grid", default="1000,300,150,100,60,30,15", help="esvmgrid's lambda path (each m)")
    ap.add_argument("--lambdas-one-group", default="100,30,10,3,1,0.3", help="the one-group control (decreasing)")
    ap.add_argument("--ridge", type=float, default=1.0, help="E-SVM(R)'s alpha")
    ap.add_argument("--loss", default="hinge", choices=["hinge", "squared_hinge"], help="E-SVM's exclusive.loss")
    ap.add_argument("--engine-debias", action="store_true", help="exclusive.debias=true on the E-SVM paths")
    ap.add_argument("--ridge-one-group", type=float, default=0.01)
    ap.add_argument("--C", default="0.002,0.003,0.005,0.0075,0.01,0.015,0.02,0.03,0.05,0.1", help="l1-SVM's C")
    ap.add_argument("--refit-C", default="0.001,0.01,0.1,1")
    args = ap.parse_args()
    args.fgm = os.path.abspath(args.fgm)
    d = prepare(args)
    floats = lambda s: [float(x) for x in s.split(",")]
    curves = {}
    sfx = "_sq" if args.loss == "squared_hinge" else ""
    if args.lambdas:
        curves["esvm20" + sfx] = esvm_path(args, d, "esvm20" + sfx, 20, args.ridge, floats(args.lambdas))
    if args.groups_grid:
        curves["esvmgrid" + sfx] = esvm_path(args, d, "esvmgrid" + sfx, [int(m) for m in args.groups_grid.split(",")],
                                             args.ridge, floats(args.lambdas_grid))
    if args.lambdas_one_group:
        curves["esvm1" + sfx] = esvm_path(args, d, "esvm1" + sfx, 1, args.ridge_one_group,
                                          floats(args.lambdas_one_group))
    data = [dense(os.path.join(d, n + ".svm"), os.path.join(args.work, n + ".npz"))
            for n in ("train", "test2k", "val")]
    curves["l1svm"] = l1svm_sweep(data, floats(args.C))
    grid = floats(args.refit_C)
    truth = np.zeros(FEATURES, dtype=bool)
    with open(os.path.join(d, "truth.txt")) as f:
        for line in f:
            truth[int(line.split()[0]) - 1] = True
    drawn = {}  # m -> the engine's random groups
    print("# planted features per random group (m = 20):",
          np.bincount(random_groups(FEATURES, 20, 1)[truth], minlength=20).tolist())
    print("method,groups,param,nnz,planted_in_support,test_acc,val_acc,refit_test_acc,refit_val_acc,converged,seconds,"
          "corr(selected_per_group;planted_per_group),l1_norm_spread(max/min)")
    for name, points in curves.items():
        for p in points:
            m = p.get("groups") or 1
            if m not in drawn:
                drawn[m] = random_groups(FEATURES, m, 1)
            group = drawn[m]
            planted_per_group = np.bincount(group[truth], minlength=m)
            (Xte, yte), (Xva, yva) = data[1], data[2]
            p["test"], p["val"] = accuracy(Xte, yte, p["w"], p["b"]), accuracy(Xva, yva, p["w"], p["b"])
            support = np.flatnonzero(p["w"])
            p["refit_test"], p["refit_val"] = refit(data, support, grid)
            selected = np.bincount(group[support], minlength=m)
            l1 = np.array([np.abs(p["w"][group == g]).sum() for g in range(m)])
            corr = np.corrcoef(selected, planted_per_group)[0, 1] if selected.std() > 0 else float("nan")
            spread = l1.max() / l1.min() if l1.min() > 0 else float("inf")
            print(f"{name},{p.get('groups', '')},{p['param']:g},{p['nnz']},{int(truth[support].sum())},"
                  f"{p['test']:.4f},{p['val']:.4f},"
                  f"{p['refit_test']:.4f},{p['refit_val']:.4f},{int(p['converged'])},{p['seconds']:.1f},"
                  f"{corr:.2f},{spread:.2f}", flush=True)
    print("# chosen on the validation rows (one-SE rule; refit: the best refit validation accuracy's point)")
    for name, points in curves.items():
        c = next((p for p in points if p.get("engine_choice")), None) or one_se(points)
        r = max(points, key=lambda p: (p["refit_val"], -p["nnz"]))
        print(f"# {name}: groups {c.get('groups', '')}, param {c['param']:g}, {c['nnz']} nonzeros,"
              f" test {c['test']:.4f};"
              f" refit: param {r['param']:g}, {r['nnz']} nonzeros, test {r['refit_test']:.4f}")
        e = next((p for p in points if p.get("engine_refit_choice")), None)
        if e:
            print(f"# {name}: engine refit (exclusive.debias) chose groups {e.get('groups', '')}, param {e['param']:g},"
                  f" {e['nnz']} nonzeros, refit test {e['engine_refit_test']:.4f}")


if __name__ == "__main__":
    main()
