#!/usr/bin/python3
"""MSLR (solver = "mslr") against l1-regularised logistic regression
(LIBLINEAR -s 6) and fgm's own logistic FGM at matched feature counts — the
comparison of Tables II-III of Tan, Tsang, Wang (TNNLS 2013) on the data we
have: news20 binary (classes 1-10 vs 11-20), a9a, w8a, ijcnn1 and an
`fgm synth --kind sparse` set.

No method has a bias (MSLR has none): LIBLINEAR without -B, fgm.bias=false.
MSLR: C = 10 (the paper's), r = mslr.r, one `fgm path` run with checkpoints at
the counts. FGM: logistic loss, the dataset's configs/<name>.toml C, B = r,
path.features = the counts (its de-biased refit is reported separately).
LIBLINEAR: the C grid of bench/compare_liblinear.py (4 per decade from the
first C at which a feature enters), accuracy interpolated in log(nnz) at each
count (nan outside the grid's range of nnz).

Data: the train/test splits of bench/compare_liblinear.py (prepare()); the
synthetic set is written by `fgm synth --kind sparse` (20000 + 10000 rows,
100000 features, 20 planted linear features, no crosses).

Output: bench/results/compare_mslr.csv (one row per dataset and count) and
bench/results/compare_mslr_summary.csv. Usage:
  bench/compare_mslr.py [--fgm build/fgm] [--datasets a9a,w8a,...] [--counts 5,10,20,50,100] [--r 10]
"""
import argparse
import csv
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

def config_file(name):
    """configs/<name>.toml, or bench/configs/<name>.toml for the configs whose data a benchmark writes."""
    shipped = os.path.join(ROOT, "configs", name + ".toml")
    return shipped if os.path.exists(shipped) else os.path.join(ROOT, "bench", "configs", name + ".toml")

sys.path.insert(0, HERE)
import compare_liblinear as cl  # noqa: E402

RESULTS = os.path.join(HERE, "results")
WORK = os.path.join(HERE, "work", "compare_mslr")
DATASETS = ["news20", "a9a", "w8a", "ijcnn1", "synth-sparse"]


def synth_sparse(fgm):
    d = os.path.join(WORK, "synth-sparse")
    if not os.path.exists(os.path.join(d, "test.svm")):
        subprocess.run([fgm, "synth", "--kind", "sparse", "--out", d, "--rows", "20000", "--test-rows", "10000",
                        "--features", "100000", "--planted-linear", "20", "--planted-cross", "0",
                        "--min-term-frequency", "0.01", "--seed", "11"], check=True, stdout=subprocess.DEVNULL)
    return d, 100000


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def mslr_path(fgm, d, counts, r, threads):
    out = os.path.join(d, f"mslr-r{r}")
    cmd = [fgm, "path", "solver=mslr", f"data.train={os.path.join(d, 'train.svm')}",
           f"data.test={os.path.join(d, 'test.svm')}", f"output.dir={out}", f"mslr.r={r}",
           "mslr.max_iterations=64", "mslr.eps_outer=0",
           "mslr.features=[" + ",".join(map(str, counts)) + "]", f"engine.threads={threads}",
           f"engine.cache_dir={os.path.join(d, 'cache')}", "engine.progress=off", "engine.memory_budget=2GB"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    return {int(float(row["selected"])): float(row["test_accuracy"]) for row in read_csv(os.path.join(out, "path.csv"))}, wall


def fgm_logistic_path(fgm, d, name, counts, B, threads):
    config = config_file(name)
    C = 10.0
    if os.path.exists(config):
        import tomllib
        with open(config, "rb") as f:
            C = tomllib.load(f).get("fgm", {}).get("C", 10.0)
    out = os.path.join(d, "fgm-logistic")
    cmd = [fgm, "path", f"data.train={os.path.join(d, 'train.svm')}", f"data.test={os.path.join(d, 'test.svm')}",
           f"output.dir={out}", "fgm.loss=logistic", "fgm.bias=false", f"fgm.C={C}", f"fgm.B={B}",
           "fgm.max_iterations=1000", "path.features=[" + ",".join(map(str, counts)) + "]", "path.debias=true",
           f"engine.threads={threads}", f"engine.cache_dir={os.path.join(d, 'cache')}", "engine.progress=off",
           "engine.memory_budget=2GB"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    rows = read_csv(os.path.join(out, "path.csv"))
    acc = {int(float(r["selected"])): float(r["test_accuracy"]) for r in rows}
    deb = {int(float(r["selected"])): float(r["debiased_test_accuracy"] or "nan") for r in rows}
    return acc, deb, C, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fgm", default=os.path.join(ROOT, "build", "fgm"))
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--counts", default="5,10,20,50,100")
    ap.add_argument("--r", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    os.makedirs(RESULTS, exist_ok=True)
    # Rows of datasets not run now are kept (one dataset can be rerun alone).
    names = args.datasets.split(",")
    rows, summary = [], []
    for path, table in ((os.path.join(RESULTS, "compare_mslr.csv"), rows),
                        (os.path.join(RESULTS, "compare_mslr_summary.csv"), summary)):
        if os.path.exists(path):
            table.extend(r for r in read_csv(path) if r["dataset"] not in names)
    for name in names:
        cl.log(name)
        if name == "synth-sparse":
            d, width = synth_sparse(args.fgm)
        else:
            spec = cl.DATASETS[name]
            d, width = cl.prepare(name, spec), spec["width"]
        y, x = cl.load_csr(d, "train", width)
        yt, xt = cl.load_csr(d, "test", width)
        prob = cl.liblinear.problem(y, x)
        t0 = time.perf_counter()
        l1 = cl.liblinear_sweep(6, prob, y, x, yt, xt, False, max(counts) * 2)
        l1_wall = time.perf_counter() - t0
        cl.log(f"  liblinear -s 6: {len(l1)} C values, nnz up to {max(p['nnz'] for p in l1)} ({l1_wall:.1f}s)")
        # fgm path refuses counts beyond the width (ijcnn1 has 22 features): they are left out.
        reachable = [k for k in counts if k <= width]
        mslr, mslr_wall = mslr_path(args.fgm, d, reachable, args.r, args.threads)
        cl.log(f"  mslr: {mslr} ({mslr_wall:.1f}s)")
        fgm, fgm_deb, fgm_C, fgm_wall = fgm_logistic_path(args.fgm, d, name, reachable, args.r, args.threads)
        cl.log(f"  fgm logistic: {fgm} ({fgm_wall:.1f}s)")
        wins_l1 = wins_fgm = matched_l1 = matched_fgm = 0
        for k in counts:
            a_m = mslr.get(k, float("nan"))
            a_l1 = cl.interp_acc(l1, k)
            a_f = fgm.get(k, float("nan"))
            rows.append(dict(dataset=name, features=k, mslr_accuracy=f"{a_m:.4f}", l1lr_accuracy=f"{a_l1:.4f}",
                             fgm_logistic_accuracy=f"{a_f:.4f}",
                             fgm_logistic_debiased_accuracy=f"{fgm_deb.get(k, float('nan')):.4f}",
                             mslr_minus_l1lr=f"{a_m - a_l1:+.4f}", mslr_minus_fgm=f"{a_m - a_f:+.4f}"))
            if not math.isnan(a_m) and not math.isnan(a_l1):
                matched_l1 += 1
                wins_l1 += a_m > a_l1
            if not math.isnan(a_m) and not math.isnan(a_f):
                matched_fgm += 1
                wins_fgm += a_m > a_f
        summary.append(dict(dataset=name, train_rows=len(y), test_rows=len(yt), width=width, mslr_r=args.r,
                            fgm_C=fgm_C, counts=" ".join(map(str, counts)),
                            mslr_wins_vs_l1lr=f"{wins_l1}/{matched_l1}", mslr_wins_vs_fgm=f"{wins_fgm}/{matched_fgm}",
                            mslr_path_s=f"{mslr_wall:.2f}", fgm_path_s=f"{fgm_wall:.2f}",
                            l1lr_sweep_s=f"{l1_wall:.2f}", l1lr_grid=len(l1)))
        for path, table in ((os.path.join(RESULTS, "compare_mslr.csv"), rows),
                            (os.path.join(RESULTS, "compare_mslr_summary.csv"), summary)):
            with open(path + ".tmp", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(table[0].keys()))
                w.writeheader()
                w.writerows(table)
            os.replace(path + ".tmp", path)
    cl.log("wrote", os.path.join(RESULTS, "compare_mslr.csv"))


if __name__ == "__main__":
    main()
