"""The Python package against the CLI and against scikit-learn's l1 models (issue 21).

1. Overhead: FGMClassifier.fit on a scipy.sparse CSR matrix versus `fgm train`
   on the LIBSVM file, same keys; both ingest (the CLI into a fresh cache each
   time, the estimator after writing the rows as text), so the ratio is the
   binding's cost. Minimum of --repeats runs each, the two run alternately.
2. Matched feature counts: scikit-learn's LogisticRegression(penalty="l1",
   solver="liblinear") and LinearSVC(penalty="l1", dual=False) swept over C;
   at each model's nonzero count k, FGMClassifier(max_features=k, bias=True,
   the same loss family), on the same 70/30 stratified split. Test accuracy
   and fit time (the FGM time includes writing the rows and ingesting them).

Run with Debian's Python and the built package:
  PYTHONPATH=build/python /usr/bin/python3 bench/bench_python.py --fgm build/fgm --data ../shared/data
"""

import argparse
import bz2
import os
import resource
import subprocess
import tempfile
import time
import warnings

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC

import fgm


def news20_binary(data_dir, work):
    """news20 with classes 1-10 -> +1 and 11-20 -> -1 (bench convention), as a LIBSVM file."""
    path = os.path.join(work, "news20-binary.svm")
    with bz2.open(os.path.join(data_dir, "news20", "news20.bz2"), "rt") as f, open(path, "w") as g:
        for line in f:
            label, rest = line.split(" ", 1) if " " in line else (line.strip(), "\n")
            g.write(("1 " if int(label) <= 10 else "-1 ") + rest)
    return path


def timed_pair(first, second, repeats):
    """Minimum wall and CPU seconds of two functions run alternately (a shared
    machine's load hits both alike; CPU seconds, user + system of this process
    and its children, hardly depend on the load)."""
    best = [[float("inf")] * 2, [float("inf")] * 2]
    for _ in range(repeats):
        for i, fn in enumerate((first, second)):
            start, cpu = time.perf_counter(), cpu_seconds()
            fn()
            best[i][0] = min(best[i][0], time.perf_counter() - start)
            best[i][1] = min(best[i][1], cpu_seconds() - cpu)
    return best


def cpu_seconds():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def overhead(name, path, n_features, fgm_binary, repeats, params):
    X, y = load_svmlight_file(path, n_features=n_features)
    keys = [f"fgm.{k}={v}" for k, v in params.items()]

    def cli():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([fgm_binary, "train", f"data.train={path}", f"data.features={n_features}",
                            f"output.dir={tmp}/out", f"engine.cache_dir={tmp}/cache", "output.report=false", *keys],
                           check=True, capture_output=True)

    def python():
        fgm.FGMClassifier(**params).fit(X, y)

    (w_cli, c_cli), (w_py, c_py) = timed_pair(cli, python, repeats)
    print(f"| {name} | {X.shape[0]} x {X.shape[1]}, {X.nnz} nnz | {w_cli:.3f} | {w_py:.3f} | {w_py / w_cli:.2f} "
          f"| {c_cli:.3f} | {c_py:.3f} | {c_py / c_cli:.2f} |")


def matched(name, path, n_features, Cs, seed=0):
    X, y = load_svmlight_file(path, n_features=n_features)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    for label, make in (("LogisticRegression l1", lambda C: LogisticRegression(penalty="l1", solver="liblinear", C=C)),
                        ("LinearSVC l1", lambda C: LinearSVC(penalty="l1", dual=False, C=C))):
        for C in Cs:
            model = make(C)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(X_train, y_train)
            t_sk = time.perf_counter() - start
            k = int(np.count_nonzero(model.coef_))
            if k == 0:
                continue
            acc_sk = model.score(X_test, y_test)
            # About ten outer iterations to reach k (max_features shortens the last batch to land on it).
            ours = fgm.FGMClassifier(max_features=k, B=-(-k // 10), max_iterations=11, bias=True,
                                     loss="logistic" if "Logistic" in label else "squared_hinge")
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours.fit(X_train, y_train)
            t_fgm = time.perf_counter() - start
            k_fgm = len(ours.selected_features_)
            print(f"| {name} | {label} | {C:g} | {k} | {acc_sk:.4f} | {t_sk:.3f} | {k_fgm} | "
                  f"{ours.score(X_test, y_test):.4f} | {t_fgm:.3f} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fgm", default="build/fgm")
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-matched", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        news20 = news20_binary(args.data, work)
        a9a = os.path.join(args.data, "a9a", "a9a")
        params = {"B": 10, "C": 10.0, "max_iterations": 10}
        print("| data | shape | fgm train wall (s) | fit wall (s) | ratio | fgm train CPU (s) | fit CPU (s) | ratio |\n"
              "|---|---|---|---|---|---|---|---|")
        overhead("a9a", a9a, 123, args.fgm, args.repeats, params)
        overhead("news20 binary", news20, 62061, args.fgm, args.repeats, params)
        if args.skip_matched:
            return
        print("\n| data | scikit-learn model | C | features | accuracy | fit (s) | FGM features | FGM accuracy "
              "| FGM fit (s) |\n|---|---|---|---|---|---|---|---|---|")
        matched("a9a", a9a, 123, [0.005, 0.02, 0.1])
        matched("news20 binary", news20, 62061, [0.1, 0.3, 1.0])


if __name__ == "__main__":
    main()
