#!/usr/bin/python3
"""Issue 22, item 4: overlapping groups on data.

FGM with features.group_structure=overlapping (each selected group brings its
own copy of its columns: Section 2.3's augmentation) against an l1 baseline
(LIBLINEAR -s 5, l1-regularised squared hinge) and the latent group lasso
(Jacob, Obozinski and Vert 2009) as an in-memory numpy twin: the columns
duplicated per group, FISTA on mean logistic loss + lam * sum_g ||v_g||, a lam
path from lam_max down by 0.9. Groups are sliding windows of WIDTH features
every WIDTH - OVERLAP (the windowing of `fgm synth --kind groups
--group-overlap`).

Cases:
  synth, synth40  `fgm synth --kind groups --group-overlap 5` (dense
         Gaussian 2,000 x 4,000, test 1,000, 799 windows of 10, 10 or 40
         planted): planted windows and features recovered.
  a9a    ../shared/data a9a (32,561 x 123, test 16,281), windows of
         consecutive feature ids (its one-hot encoded attributes are
         consecutive): no truth, accuracy and time only.

Each method is taken at the first point of its path reaching K windows (FGM:
fgm.max_features = K with B = max(1, K/10); the group lasso: K windows with a nonzero
block); l1 at the first C of a 31-point path (0.001..1) whose support is at
least FGM's distinct features. CPU seconds with one thread (engine.threads=1,
BLAS threads 1). One JSON line per method.

Usage: /usr/bin/python3 bench/overlap_groups.py BUILD_DIR WORK_DIR {synth|synth40|a9a} [K]
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

DATA = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "shared", "data")

CASES = {
    "synth": dict(rows=2000, test_rows=1000, features=4000, width=10, overlap=5, planted=10, K=10),
    "synth40": dict(rows=2000, test_rows=1000, features=4000, width=10, overlap=5, planted=40, K=40),
    "a9a": dict(train=os.path.join(DATA, "a9a", "a9a"), test=os.path.join(DATA, "a9a", "a9a.t"), features=123,
                width=8, overlap=4, K=4),
}


def child_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr}")
    return out.stdout


def windows(features, width, overlap):
    """0-based feature lists, as synth --group-overlap writes them."""
    stride = width - overlap
    n = 1 if features <= width else (features - width + stride - 1) // stride + 1
    return [list(range(g * stride, min(features, g * stride + width))) for g in range(n)]


def recovery(support, planted_features):
    if planted_features is None:
        return {}
    hit = len(support & planted_features)
    return {"planted_features_found": hit, "planted_features": len(planted_features),
            "false_features": len(support - planted_features)}


def fgm_run(fgm, train, test, k, planted, planted_features):
    shutil.rmtree("fgm-run", ignore_errors=True)
    cmd = [fgm, "train", f"data.train={train}", f"data.test={test}", "features.groups=groups.txt",
           "features.group_structure=overlapping", "fgm.loss=logistic", f"fgm.B={max(1, k // 10)}", "fgm.C=1",
           f"fgm.max_features={k}", f"fgm.max_iterations={k}", "engine.threads=1", "engine.progress=off",
           "output.dir=fgm-run"]
    before = child_cpu()
    run(cmd)
    cpu = child_cpu() - before
    r = json.load(open("fgm-run/run.json"))
    groups = {int(f["group"]) for f in r["selected_features"]}
    support = {int(f["id"]) - 1 for f in r["selected_features"] if f["weight"] != 0}
    out = {"method": f"fgm overlapping (logistic, B={max(1, k // 10)}, C=1)", "windows": len(groups),
           "stop_reason": r["stop_reason"],
           "columns": len(r["selected_features"]), "distinct_features": len(support),
           "test_accuracy": r["test"]["accuracy"], "cpu_s": round(cpu, 2), "train_s": round(r["train_seconds"], 2),
           "command": " ".join(["fgm"] + cmd[1:])}
    if planted is not None:
        out["planted_windows_found"] = len(groups & planted)
    return {**out, **recovery(support, planted_features)}, len(support)


def liblinear_run(train, test, target, planted_features):
    total = 0.0
    for c in np.geomspace(0.001, 1.0, 31):
        before = child_cpu()
        run(["liblinear-train", "-s", "5", "-c", f"{c:.6g}", "-q", train, "ll.model"])
        total += child_cpu() - before
        lines = open("ll.model").read().split("\n")
        w = np.array([float(v) for v in lines[lines.index("w") + 1:] if v.strip()])
        support = set(int(j) for j in np.flatnonzero(w))
        if len(support) >= target or c == 1.0:
            acc = run(["liblinear-predict", test, "ll.model", "/dev/null"])
            return {"method": "LIBLINEAR -s 5 (l1, squared hinge)", "C": round(float(c), 6),
                    "distinct_features": len(support),
                    "test_accuracy": float(acc.split("=")[1].split("%")[0]) / 100,
                    "cpu_s_path": round(total, 2), "cpu_s_last": round(child_cpu() - before, 2),
                    "command": f"liblinear-train -s 5 -c {c:.6g} TRAIN (C path 0.001..1, 31 points)",
                    **recovery(support, planted_features)}


def latent_group_lasso(x, y, xt, yt, groups, k, planted, planted_features):
    """The latent group lasso (bench/group_lasso.py) over the windows."""
    w, lam_ratio, found, iterations, cpu = logistic_group_lasso_path(x, y, groups, k, inner_cap=1000)
    acc = float(np.mean(np.where(xt @ w >= 0, 1, -1) == yt))
    support = set(int(j) for j in np.flatnonzero(w))
    out = {"method": "latent group lasso (numpy FISTA on duplicated columns, logistic)",
           "lam_over_lam_max": round(lam_ratio, 4), "windows": len(found), "distinct_features": len(support),
           "test_accuracy": acc, "fista_iterations": iterations, "cpu_s": round(cpu, 2)}
    if planted is not None:
        out["planted_windows_found"] = len(found & planted)
    return {**out, **recovery(support, planted_features)}


def main():
    build, work, case = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3]
    spec = dict(CASES[case])
    if len(sys.argv) > 4:
        spec["K"] = int(sys.argv[4])
    fgm = os.path.join(build, "fgm")
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    groups = windows(spec["features"], spec["width"], spec["overlap"])
    planted = planted_features = None
    if case.startswith("synth"):
        if not os.path.exists("data/planted_groups.txt"):
            run([fgm, "synth", "--kind", "groups", "--out", "data", "--rows", str(spec["rows"]),
                 "--test-rows", str(spec["test_rows"]), "--features", str(spec["features"]),
                 "--features-per-group", str(spec["width"]), "--group-overlap", str(spec["overlap"]),
                 "--relevant-groups", str(spec["planted"]), "--digits", "4", "--seed", "1"])
        shutil.copy("data/groups.txt", "groups.txt")
        planted = {int(line) - 1 for line in open("data/planted_groups.txt")}
        planted_features = {int(line.split()[0]) - 1 for line in open("data/truth.txt")}
        train, test = "data/train.svm", "data/test.svm"
    else:
        with open("groups.txt", "w") as f:
            for g in groups:
                f.write(" ".join(str(j + 1) for j in g) + "\n")
        train, test = spec["train"], spec["test"]
    shape = {"case": case, "features": spec["features"], "window": spec["width"], "overlap": spec["overlap"],
             "n_windows": len(groups), "K": spec["K"]}
    fgm_result, fgm_support = fgm_run(fgm, train, test, spec["K"], planted, planted_features)
    print(json.dumps({**shape, **fgm_result}), flush=True)
    print(json.dumps({**shape, **liblinear_run(train, test, fgm_support, planted_features)}), flush=True)
    x, y = load_svmlight_file(train, n_features=spec["features"])
    xt, yt = load_svmlight_file(test, n_features=spec["features"])
    shape["rows"], shape["test_rows"] = x.shape[0], xt.shape[0]
    print(json.dumps({**shape, **latent_group_lasso(x.toarray(), y, xt.toarray(), yt, groups, spec["K"], planted,
                                                     planted_features)}), flush=True)


if __name__ == "__main__":
    main()
