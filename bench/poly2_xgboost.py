#!/usr/bin/python3
"""ijcnn1 degree-2: fgm's poly-2 path against XGBoost depth-2 trees at equal
threads (issue 19, 5d). Debian's python3-xgboost (scripts/install_deps.sh).

    bench/poly2_xgboost.py                       # 1 and 2 threads, 3 rounds
    bench/poly2_xgboost.py --threads 2 --repeats 1

Shape: ijcnn1 (49,990 training rows x 22 features, test 91,701 rows), the
degree-2 expansion 22 + 22·23/2 = 275 generated features, never stored.
  - fgm: `fgm path --config configs/ijcnn1-poly2.toml
    'path.features=[5,10,20,50,100,200]' fgm.max_features=0
    engine.threads=T` (de-biasing on, the default), the text ingested in the
    timed run (fresh cache); accuracy of each point's de-biased model.
  - XGBoost: one `xgboost.train` of depth-2 trees (a depth-2 tree is a
    product of at most two features' thresholds: the tree counterpart of a
    degree-2 term), eta 0.3, --rounds rounds, nthread=T, the data loaded
    from the same text (timed with the fit); the curve is read off that one
    model: after r trees, the distinct features its splits use and the test
    accuracy (iteration_range).
Matched at a feature count k: fgm's point with k features against the
XGBoost prefix with the most trees whose splits use at most k features.
Times are medians of whole runs, interleaved round by round.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_liblinear as cl  # noqa: E402

COUNTS = [5, 10, 20, 50, 100, 200]


def run_fgm(fgm, d, threads, work):
    out, cache = os.path.join(work, "fgm-out"), os.path.join(work, "fgm-cache")
    subprocess.run(["rm", "-rf", out, cache], check=True)
    cmd = [fgm, "path", "--config", cl.config_file("ijcnn1-poly2"), f"data.train={os.path.join(d, 'train.svm')}",
           f"data.test={os.path.join(d, 'test.svm')}", f"output.dir={out}", f"engine.cache_dir={cache}",
           f"engine.threads={threads}", "engine.progress=off", "fgm.max_features=0",
           "path.features=[" + ",".join(map(str, COUNTS)) + "]"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    _, rows = cl.read_path(out)
    curve = []
    for r in rows:
        acc = r["debiased_test_accuracy"]
        curve.append((int(r["selected"]), acc if not np.isnan(acc) else r["test_accuracy"]))
    return wall, curve


def run_xgboost(d, threads, rounds):
    import xgboost as xgb
    width = cl.DATASETS["ijcnn1"]["width"]
    t0 = time.perf_counter()
    y_train, x_train = cl.load_csr(d, "train", width)  # the text parsed inside the timed run
    train = xgb.DMatrix(x_train, label=(y_train > 0).astype(np.float32), nthread=threads)
    params = dict(objective="binary:logistic", max_depth=2, eta=0.3, nthread=threads, tree_method="hist",
                  verbosity=0)
    booster = xgb.train(params, train, num_boost_round=rounds)
    wall = time.perf_counter() - t0
    y_test, x_test = cl.load_csr(d, "test", width)
    test = xgb.DMatrix(x_test, label=(y_test > 0).astype(np.float32), nthread=threads)
    y = test.get_label()
    trees = booster.trees_to_dataframe()
    used, curve = set(), []
    for r in range(1, rounds + 1):
        used |= set(trees[(trees.Tree == r - 1) & (trees.Feature != "Leaf")].Feature)
        if r in (1, 2, 5) or r % 5 == 0:
            p = booster.predict(test, iteration_range=(0, r))
            curve.append((r, len(used), float(np.mean((p > 0.5) == (y > 0.5)))))
    return wall, curve


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fgm", default=os.path.join(cl.ROOT, "build", "fgm"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    d = cl.prepare("ijcnn1", cl.DATASETS["ijcnn1"])
    table = []
    for threads in map(int, args.threads.split(",")):
        fgm_t, xgb_t, fgm_curve, xgb_curve = [], [], None, None
        with tempfile.TemporaryDirectory(prefix="poly2-xgb-") as work:
            for _ in range(args.repeats):
                wall, xgb_curve = run_xgboost(d, threads, args.rounds)
                xgb_t.append(wall)
                wall, fgm_curve = run_fgm(args.fgm, d, threads, work)
                fgm_t.append(wall)
        f, x = statistics.median(fgm_t), statistics.median(xgb_t)
        matched = []
        for k, acc in fgm_curve:
            prefix = [c for c in xgb_curve if c[1] <= k]
            xa = prefix[-1][2] if prefix else float("nan")
            matched.append(f"{k}:{acc:.4f}/{xa:.4f}")
        table.append(dict(threads=threads, fgm_seconds=round(f, 3), xgboost_seconds=round(x, 3),
                          ratio=round(f / x, 2), matched=" ".join(matched)))
        print(f"threads {threads}: fgm path {f:.2f} s, XGBoost depth-2 x{args.rounds} {x:.2f} s "
              f"(ratio {f / x:.1f}); features:fgm/xgboost accuracy {' '.join(matched)}", flush=True)
    os.makedirs(cl.RESULTS, exist_ok=True)
    with open(os.path.join(cl.RESULTS, "poly2_xgboost.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    with open(os.path.join(cl.RESULTS, "poly2_xgboost_curve.json"), "w") as fh:
        json.dump(dict(xgboost=xgb_curve, fgm=fgm_curve), fh)


if __name__ == "__main__":
    main()
