#!/usr/bin/python3
"""Issue 22, item 4: FGM group selection on the grouped synthetic of FGM
Section 8.6.1 (`fgm synth --kind groups`) against an l1 baseline (LIBLINEAR
-s 5, l1-regularised squared hinge) and a group lasso (an in-memory numpy twin:
FISTA on mean logistic loss + lam * sum_g ||w_g||, a lam path from lam_max).

Each method is taken at the first point of its path that touches at least K
groups (K = the planted count by default): FGM adds B groups an iteration up
to fgm.max_features = K; LIBLINEAR sweeps C upwards; the group lasso sweeps
lam downwards. Reports groups touched, planted groups recovered, test
accuracy and CPU seconds (single thread: OMP/BLAS threads 1, engine.threads=1).
Prints one JSON line per method.

Usage: /usr/bin/python3 bench/groups_synth.py BUILD_DIR WORK_DIR [ROWS FEATURES PER_GROUP PLANTED]
"""
import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import json  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import load_svmlight_file  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from group_lasso import logistic_group_lasso_path  # noqa: E402


def child_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr}")
    return out.stdout


def touched_groups(w, per_group):
    return {j // per_group for j in np.flatnonzero(w)}


def fgm_run(fgm, k, per_group, planted):
    shutil.rmtree("fgm-run", ignore_errors=True)
    cmd = [fgm, "train", "data.train=data/train.svm", "data.test=data/test.svm",
           "features.groups=data/groups.txt", "fgm.loss=logistic", "fgm.B=2", "fgm.C=1",
           f"fgm.max_features={k}", "engine.threads=1", "engine.progress=off", "output.dir=fgm-run"]
    before = child_cpu()
    run(cmd)
    cpu = child_cpu() - before
    r = json.load(open("fgm-run/run.json"))
    groups = {int(f["group"]) for f in r["selected_features"]}
    return {"method": "fgm groups (logistic, B=2, C=1)", "groups": len(groups),
            "recovered": len(groups & planted), "test_accuracy": r["test"]["accuracy"],
            "cpu_s": round(cpu, 2), "train_s": round(r["train_seconds"], 2),
            "command": " ".join(["fgm"] + cmd[1:])}


def liblinear_run(k, per_group, planted):
    total = 0.0
    for c in np.geomspace(0.001, 1.0, 31):
        before = child_cpu()
        run(["liblinear-train", "-s", "5", "-c", f"{c:.6g}", "-q", "data/train.svm", "ll.model"])
        total += child_cpu() - before
        lines = open("ll.model").read().split("\n")
        w = np.array([float(v) for v in lines[lines.index("w") + 1:] if v.strip()])
        groups = touched_groups(w, per_group)
        if len(groups) >= k:
            acc = run(["liblinear-predict", "data/test.svm", "ll.model", "/dev/null"])
            return {"method": "LIBLINEAR -s 5 (l1, squared hinge)", "C": round(float(c), 6),
                    "groups": len(groups), "nonzero_weights": int(np.count_nonzero(w)),
                    "recovered": len(groups & planted),
                    "test_accuracy": float(acc.split("=")[1].split("%")[0]) / 100,
                    "cpu_s_path": round(total, 2), "cpu_s_last": round(child_cpu() - before, 2),
                    "command": f"liblinear-train -s 5 -c {c:.6g} data/train.svm (C path 0.001..1, 31 points)"}
    return {"method": "LIBLINEAR -s 5", "error": f"fewer than {k} groups at C = 1"}


def group_lasso_run(x, y, xt, yt, k, per_group, planted):
    """The disjoint group lasso (bench/group_lasso.py), contiguous groups of per_group."""
    groups = [range(g * per_group, (g + 1) * per_group) for g in range(x.shape[1] // per_group)]
    w, lam_ratio, found, iterations, cpu = logistic_group_lasso_path(x, y, groups, k, inner_cap=500)
    acc = float(np.mean(np.where(xt @ w >= 0, 1, -1) == yt))
    return {"method": "group lasso (numpy FISTA, logistic)", "lam_over_lam_max": round(lam_ratio, 4),
            "groups": len(found), "recovered": len(found & planted), "test_accuracy": acc,
            "fista_iterations": iterations, "cpu_s": round(cpu, 2)}


def main():
    build, work = os.path.realpath(sys.argv[1]), sys.argv[2]
    rows, features, per_group, k = (int(a) for a in (sys.argv[3:7] or (2000, 10000, 10, 20)))
    fgm = os.path.join(build, "fgm")
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    if not os.path.exists("data/planted_groups.txt"):
        run([fgm, "synth", "--kind", "groups", "--out", "data", "--rows", str(rows), "--test-rows", "1000",
             "--features", str(features), "--features-per-group", str(per_group),
             "--relevant-groups", str(k), "--digits", "4", "--seed", "1"])
    planted = {int(line) - 1 for line in open("data/planted_groups.txt")}
    shape = {"rows": rows, "test_rows": 1000, "features": features, "per_group": per_group, "planted_groups": k}
    for result in (fgm_run(fgm, k, per_group, planted), liblinear_run(k, per_group, planted)):
        print(json.dumps({**shape, **result}), flush=True)
    x, y = load_svmlight_file("data/train.svm", n_features=features)
    xt, yt = load_svmlight_file("data/test.svm", n_features=features)
    print(json.dumps({**shape, **group_lasso_run(x.toarray(), y, xt.toarray(), yt, k, per_group, planted)}),
          flush=True)


if __name__ == "__main__":
    main()
