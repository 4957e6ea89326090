#!/usr/bin/env python3
"""E-SVM(R) against l1-SVM at matched nonzeros: does the exclusive norm's prior (the truth spread over the groups) explain the gap?

  /usr/bin/python3 bench/esvm_prior.py --fgm build/fgm --run CONDITION:M:LOSS:LAMBDAS [--run ...]
      [--work bench/work/esvm_prior] [--threads 1] [--csv bench/results/exclusive/esvm_prior.csv]

  The figures of docs/solvers/exclusive.md ("The prior"; bench/results/exclusive/esvm_prior.csv,
  refit columns with the default --refit-C; the fgm runs are reused from --work when present):
    --run uniform:20:squared_hinge:1000,300,100,30,10,3,1/30000,10000,3000
    --run uniform:20:hinge:3000,1000,300,100
    --run even:20:squared_hinge:10000,3000,1000,300,100,30
    --run balanced:20:squared_hinge:10000,3000,1000,300,100
    --run concentrated:20:squared_hinge:10000,3000,1000,300,100,30
    --run uniform:5:squared_hinge:10000,3000,1000,300,100,30
    --run uniform:50:squared_hinge:30000,10000,3000,1000,300,100

Rows: the issue-22 planted set's (`fgm synth --rows 2000 --test-rows 4000
--features 20000 --relevant 100 --seed 1`, split as bench/esvm_planted.py
splits it: training rows, the planted test set's 2,000 rows for test, 2,000
fresh rows for validation). The design of synth/synthetic_data.cpp: X i.i.d.
N(0, 1) written to 5 significant digits, 100 planted weights U(0, 1) (all
positive), labels y = sign(x'w) with 0 -> +1, no label noise. The conditions
keep every X value and the 100 planted weight values, and move only the
planted SUPPORT, so they differ only in how the relevant features fall into
the engine's m = 20 random groups (exclusive::random_groups, seed 1,
recomputed by bench/esvm_planted.random_groups); the labels are recomputed
from the text values with the moved support (the same formula as synth):
  uniform       fgm synth's own truth (uniform random support; the labels
                are checked to be synth's)
  even          exactly s/m = 5 planted features in each of the 20 groups
  concentrated  4 groups hold 20 each, 4 hold 2, 12 hold 1
  balanced      5 in each group AND equal l1 mass per group (the weights
                dealt largest first to the lightest group): the exclusive
                norm's own prior, sum_g |w_g|_1^2 smallest at equal |w_g|_1
For l1-SVM the three are the same problem in distribution (X is i.i.d.), so
its curve is a control. Per run: E-SVM(R) `fgm path solver=exclusive
exclusive.algorithm=licp exclusive.random_groups=M exclusive.bias=true
exclusive.loss=LOSS exclusive.ridge=1 engine.threads=T` on a warm lambda path,
l1-SVM (LIBLINEAR -s 5 via scikit-learn LinearSVC, intercept) on a C sweep;
both chosen on the validation rows by the one-SE rule; for every point the
same l2 squared-hinge refit on its support (C on validation); every E-SVM
point compared with l1-SVM's test accuracy interpolated in log nnz.
"""
import argparse
import csv
import math
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import esvm_planted as ep  # noqa: E402

GROUPS_FOR_PRIOR, GROUP_SEED = 20, 1


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def planted_support(condition, base_ids, weights, rng):
    """A condition's 0-based planted ids (increasing) and their weights (the base weights, moved)."""
    s = len(base_ids)
    if condition == "uniform":
        return np.array(base_ids), np.array(weights)
    group = ep.random_groups(ep.FEATURES, GROUPS_FOR_PRIOR, GROUP_SEED)
    if condition in ("even", "balanced"):
        counts = [s // GROUPS_FOR_PRIOR] * GROUPS_FOR_PRIOR
    elif condition == "concentrated":
        counts = [20] * 4 + [2] * 4 + [1] * 12
        counts = list(rng.permutation(counts))
    else:
        sys.exit(f"unknown condition {condition}")
    assert sum(counts) == s
    members = [rng.choice(np.flatnonzero(group == g), size=c, replace=False) for g, c in enumerate(counts)]
    if condition == "balanced":  # equal l1 mass per group too: largest weight first to the lightest open group
        mass, taken, w_of = np.zeros(len(counts)), [[] for _ in counts], {}
        for v in sorted(weights, reverse=True):
            g = min((g for g in range(len(counts)) if len(taken[g]) < counts[g]), key=lambda g: mass[g])
            w_of[members[g][len(taken[g])]] = v
            taken[g].append(v)
            mass[g] += v
        ids = np.array(sorted(w_of))
        return ids, np.array([w_of[i] for i in ids])
    ids = np.array(sorted(np.concatenate(members)))
    return ids, rng.permutation(weights)


def relabel(src, dst, y):
    """Copies a LIBSVM file with its labels replaced (the feature text unchanged)."""
    with open(src) as f, open(dst + ".tmp", "w") as out:
        for i, line in enumerate(f):
            out.write(("+1" if y[i] > 0 else "-1") + line[line.index(" "):])
    assert i + 1 == len(y)
    os.replace(dst + ".tmp", dst)


def labels(X, w):
    return np.where(X @ w >= 0, 1.0, -1.0)


def condition_data(args, base, dense, condition):
    """(data dir, [(X, y) for train, test, validation], planted bool mask)."""
    base_truth = np.loadtxt(os.path.join(base, "truth.txt"))
    base_ids, weights = base_truth[:, 0].astype(int) - 1, base_truth[:, 1]
    rng = np.random.default_rng(7)
    ids, planted_weights = planted_support(condition, base_ids, weights, rng)
    w = np.zeros(ep.FEATURES)
    w[ids] = planted_weights
    d = base if condition == "uniform" else os.path.join(args.work, condition, "data")
    data = []
    for name, (X, y0) in zip(("train", "test2k", "val"), dense):
        y = labels(X, w)
        if condition == "uniform":
            mismatch = int(np.sum(y != y0))
            assert mismatch == 0, f"{name}: {mismatch} labels differ from synth's"
        else:
            os.makedirs(d, exist_ok=True)
            if not os.path.exists(os.path.join(d, name + ".svm")):
                relabel(os.path.join(base, name + ".svm"), os.path.join(d, name + ".svm"), y)
        data.append((X, y))
    if condition != "uniform":
        np.savetxt(os.path.join(d, "truth.txt"), np.column_stack([ids + 1, w[ids]]), fmt=["%d", "%.17g"])
        if not os.path.exists(os.path.join(d, "store")):
            ep.sh([args.fgm, "ingest", os.path.join(d, "train.svm"), "--out", os.path.join(d, "store")],
                  os.path.join(args.work, condition + "-ingest.log"))
    truth = np.zeros(ep.FEATURES, dtype=bool)
    truth[ids] = True
    return d, data, truth


def esvm_run(args, d, tag, m, loss, lambdas):
    """fgm path on one (m, loss): points as bench/esvm_planted's, plus the run's CPU seconds."""
    out = os.path.join(args.work, tag)
    cmd = [args.fgm, "path", f"data.train={d}/store", f"data.test={d}/test2k.svm", f"data.validation={d}/val.svm",
           "solver=exclusive", "exclusive.algorithm=licp", f"exclusive.random_groups={m}", "exclusive.ridge=1",
           "exclusive.bias=true", f"exclusive.loss={loss}", f"engine.threads={args.threads}",
           "engine.memory_budget=3GB", "output.report=false", f"output.dir={out}",
           "exclusive.path_lambda=[" + ", ".join(str(float(x)) for x in lambdas) + "]"]
    cpu_file = os.path.join(args.work, tag + ".cpu")
    if not os.path.exists(os.path.join(out, "path.csv")):
        c0, t0 = cpu_children(), time.time()
        ep.sh(cmd, os.path.join(args.work, tag + ".log"))
        with open(cpu_file, "w") as f:
            f.write(f"{cpu_children() - c0:.1f} {time.time() - t0:.1f}\n")
    cpu, wall = (float(x) for x in open(cpu_file).read().split())
    print(f"# {tag}: {' '.join(cmd)}  ({cpu:.0f} s CPU, {wall:.0f} s wall, load {os.getloadavg()[0]:.1f})",
          flush=True)
    points = []
    with open(os.path.join(out, "path.csv")) as f:
        for k, row in enumerate(csv.DictReader(f)):
            w, b = ep.model_weights(args.fgm, os.path.join(out, f"point-{k}.fgm"))
            points.append({"param": float(row["lambda"]), "nnz": int(np.count_nonzero(w)), "w": w, "b": b,
                           "converged": row["converged"] == "1", "seconds": float(row["point_seconds"])})
    return points


def l1_curve(args, tag, data, grid):
    """ep.l1svm_sweep one C at a time, each point cached (a sweep can be resumed)."""
    points = []
    for c in grid:
        cache = os.path.join(args.work, f"{tag}-C{c:g}.npz")
        if not os.path.exists(cache):
            p = ep.l1svm_sweep(data, [c])[0]
            np.savez(cache, w=p["w"], b=p["b"], seconds=p["seconds"])
        z = np.load(cache)
        points.append({"param": c, "nnz": int(np.count_nonzero(z["w"])), "w": z["w"], "b": float(z["b"]),
                       "converged": True, "seconds": float(z["seconds"])})
    return points


def score(points, data, truth, refit_grid):
    (Xte, yte), (Xva, yva) = data[1], data[2]
    for p in points:
        p["test"], p["val"] = ep.accuracy(Xte, yte, p["w"], p["b"]), ep.accuracy(Xva, yva, p["w"], p["b"])
        support = np.flatnonzero(p["w"])
        p["planted"] = int(truth[support].sum())
        p["refit_test"], p["refit_val"] = ep.refit(data, support, refit_grid) if refit_grid else (math.nan, math.nan)


def at_nnz(curve, nnz, key="test"):
    """The curve's accuracy interpolated in log nnz (nan outside its range)."""
    pts = sorted((p["nnz"], p[key]) for p in curve if p["nnz"] > 0)
    xs, ys = np.log([x for x, _ in pts]), [y for _, y in pts]
    if nnz <= 0 or math.log(nnz) < xs[0] - 1e-12 or math.log(nnz) > xs[-1] + 1e-12:
        return float("nan")
    return float(np.interp(math.log(nnz), xs, ys))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fgm", required=True)
    ap.add_argument("--work", default="bench/work/esvm_prior")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--run", action="append", required=True, help="CONDITION:M:LOSS:lambda,lambda,... (decreasing; '/' starts another path, cold)")
    ap.add_argument("--C", default="0.0015,0.003,0.004,0.005,0.0075,0.01,0.02",
                    help="l1-SVM's C")
    ap.add_argument("--refit-C", default="0.001,0.01,0.1,1", help="'' skips the refits")
    ap.add_argument("--csv", default="", help="append the per-point rows here")
    args = ap.parse_args()
    args.fgm, args.work = os.path.abspath(args.fgm), os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    planted = argparse.Namespace(fgm=args.fgm, work=os.path.join(args.work, "uniform"))
    base = ep.prepare(planted)
    dense = [ep.dense(os.path.join(base, n + ".svm"), os.path.join(planted.work, n + ".npz"))
             for n in ("train", "test2k", "val")]
    refit_grid = [float(x) for x in args.refit_C.split(",")] if args.refit_C else []
    header = ("condition,method,groups,loss,param,nnz,planted_in_support,test_acc,val_acc,refit_test_acc,"
              "refit_val_acc,l1_test_at_nnz,diff_points,l1_refit_test_at_nnz,refit_diff_points,one_se,converged,"
              "point_seconds")
    rows = []
    conditions = {}
    for spec in args.run:
        condition, m, loss, lambdas = spec.split(":")
        if condition not in conditions:
            d, data, truth = condition_data(args, base, dense, condition)
            l1 = l1_curve(args, f"{condition}-l1svm", data, [float(x) for x in args.C.split(",")])
            score(l1, data, truth, refit_grid)
            conditions[condition] = (d, data, truth, l1)
            group = ep.random_groups(ep.FEATURES, GROUPS_FOR_PRIOR, GROUP_SEED)
            print(f"# {condition}: planted per group (m = {GROUPS_FOR_PRIOR}):",
                  np.bincount(group[truth], minlength=GROUPS_FOR_PRIOR).tolist(),
                  f"train +1 share {np.mean(data[0][1] > 0):.3f}", flush=True)
            c = ep.one_se(l1)
            for p in l1:
                rows.append([condition, "l1svm", "", "squared_hinge", f"{p['param']:g}", p["nnz"], p["planted"],
                             f"{p['test']:.4f}", f"{p['val']:.4f}", f"{p['refit_test']:.4f}",
                             f"{p['refit_val']:.4f}", "", "", "", "", int(p is c), 1, f"{p['seconds']:.1f}"])
            print(f"# {condition} l1svm one-SE: C {c['param']:g}, {c['nnz']} nonzeros, test {c['test']:.4f}",
                  flush=True)
        d, data, truth, l1 = conditions[condition]
        m = int(m)
        pts = []  # '/' separates lambda lists run as separate (cold-started) paths
        for k, part in enumerate(lambdas.split("/")):
            pts += esvm_run(args, d, f"{condition}-m{m}-{loss}" + (f"-{k}" if k else ""), m, loss,
                            [float(x) for x in part.split(",")])
        score(pts, data, truth, refit_grid)
        c = ep.one_se(pts)
        for p in pts:
            ref, ref_refit = at_nnz(l1, p["nnz"]), at_nnz(l1, p["nnz"], "refit_test")
            rows.append([condition, "esvm", m, loss, f"{p['param']:g}", p["nnz"], p["planted"], f"{p['test']:.4f}",
                         f"{p['val']:.4f}", f"{p['refit_test']:.4f}", f"{p['refit_val']:.4f}", f"{ref:.4f}",
                         f"{100 * (p['test'] - ref):+.1f}", f"{ref_refit:.4f}",
                         f"{100 * (p['refit_test'] - ref_refit):+.1f}", int(p is c), int(p["converged"]),
                         f"{p['seconds']:.1f}"])
        ref = at_nnz(l1, c["nnz"])
        r = max(pts, key=lambda p: (p["refit_val"], -p["nnz"]))
        print(f"# {condition} m={m} {loss} one-SE: lambda {c['param']:g}, {c['nnz']} nonzeros, test {c['test']:.4f}"
              f" (l1 at that nnz {ref:.4f}, {100 * (c['test'] - ref):+.1f}); best refit-val: lambda {r['param']:g},"
              f" {r['nnz']} nonzeros, refit test {r['refit_test']:.4f}", flush=True)
    print(header)
    for row in rows:
        print(",".join(str(x) for x in row))
    if args.csv:
        new = not os.path.exists(args.csv)
        with open(args.csv, "a") as f:
            if new:
                f.write(header + "\n")
            for row in rows:
                f.write(",".join(str(x) for x in row) + "\n")


if __name__ == "__main__":
    main()
