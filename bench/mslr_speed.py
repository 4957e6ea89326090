#!/usr/bin/python3
"""MSLR's path against a LIBLINEAR -s 6 sweep over C, timed side by side in
one run (issue 22): the time and the test accuracy at matched feature counts.

Data: news20 binary (classes 1-10 vs 11-20), the split of
bench/compare_liblinear.py (prepare(): 12,747 training rows x 62,061
features, 1,018,286 nonzeros; 3,188 test rows).

MSLR: `fgm path solver=mslr 'mslr.features=[100,200,400]'` with C = 10,
r = 10 and every other key at its default (the path lifts the default
mslr.max_iterations and takes the 40 iterations the counts need), engine.threads =
--threads (1: LIBLINEAR's -s 6 is single-threaded), the store ingested once
before the timed runs (cache_dir), as LIBLINEAR's problem is loaded once.
Timed: the whole `fgm path` process (wall, and its CPU time), which includes
evaluating the three points on the test file.

LIBLINEAR: Debian liblinear 2.3.0 through python3-liblinear, -s 6 without a
bias, the C grid of compare_liblinear.liblinear_sweep (4 values per decade
from 1.05 C_min until 800 nonzeros); timed: the train() calls alone (the
sum of their walls and of their CPU times), accuracy interpolated in
log(nnz) at the counts.

Each repeat runs LIBLINEAR's sweep and then the MSLR path, so machine load
falls on both; the figures are medians over --repeats (3). CPU times are
the steadier figure on a shared machine. --smoothing also
times the paper's subproblem solver (mslr.subproblem = smoothing) once:
minutes.

Output: bench/results/mslr_speed.csv (one row per repeat and method) and the
summary on stdout. Usage:
  bench/mslr_speed.py [--fgm build/fgm] [--repeats 3] [--threads 1] [--smoothing]
"""
import argparse
import csv
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import compare_liblinear as cl  # noqa: E402

COUNTS = [100, 200, 400]
RESULTS = os.path.join(HERE, "results")


def mslr_path(fgm, d, out, threads, extra):
    cmd = [fgm, "path", "solver=mslr", f"data.train={os.path.join(d, 'train.svm')}",
           f"data.test={os.path.join(d, 'test.svm')}", f"output.dir={out}",
           "mslr.features=[" + ",".join(map(str, COUNTS)) + "]", f"engine.threads={threads}",
           f"engine.cache_dir={os.path.join(d, 'cache')}", "engine.progress=off", "engine.memory_budget=2GB",
           "output.report=false"] + extra
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    with open(os.path.join(out, "path.csv")) as f:
        rows = list(csv.DictReader(f))
    return wall, cpu, {int(r["selected"]): float(r["test_accuracy"]) for r in rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fgm", default=os.path.join(ROOT, "build", "fgm"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--smoothing", action="store_true")
    args, _ = ap.parse_known_args()  # run_mslr.sh passes compare_mslr.py's options too
    spec = cl.DATASETS["news20"]
    d, width = cl.prepare("news20", spec), spec["width"]
    y, x = cl.load_csr(d, "train", width)
    yt, xt = cl.load_csr(d, "test", width)
    prob = cl.liblinear.problem(y, x)
    work = os.path.join(HERE, "work", "mslr_speed")
    os.makedirs(work, exist_ok=True)
    # Ingest once (the timed runs open the cached store).
    mslr_path(args.fgm, d, os.path.join(work, "warmup"), args.threads, ["mslr.features=[10]"])
    rows = []
    for rep in range(args.repeats):
        t0 = time.perf_counter()
        grid = cl.liblinear_sweep(6, prob, y, x, yt, xt, False, 2 * COUNTS[-1])
        sweep_wall = time.perf_counter() - t0
        train_wall = sum(p["walls"][0] for p in grid)
        train_cpu = sum(p["cpus"][0] for p in grid)
        acc = {k: cl.interp_acc(grid, k) for k in COUNTS}
        rows.append(dict(repeat=rep + 1, method="liblinear -s 6", seconds=f"{train_wall:.3f}",
                         cpu_seconds=f"{train_cpu:.3f}", loop_seconds=f"{sweep_wall:.3f}", grid=len(grid),
                         **{f"acc_{k}": f"{acc[k]:.4f}" for k in COUNTS}))
        cl.log(f"repeat {rep + 1}: liblinear {train_wall:.2f}s ({train_cpu:.2f} CPU s, {len(grid)} C values) {acc}")
        wall, cpu, acc = mslr_path(args.fgm, d, os.path.join(work, "newton"), args.threads, [])
        rows.append(dict(repeat=rep + 1, method="mslr newton", seconds=f"{wall:.3f}", cpu_seconds=f"{cpu:.3f}",
                         loop_seconds="", grid="", **{f"acc_{k}": f"{acc.get(k, float('nan')):.4f}" for k in COUNTS}))
        cl.log(f"repeat {rep + 1}: mslr {wall:.2f}s ({cpu:.2f} CPU s) {acc}")
    if args.smoothing:
        wall, cpu, acc = mslr_path(args.fgm, d, os.path.join(work, "smoothing"), args.threads,
                                   ["mslr.subproblem=smoothing"])
        rows.append(dict(repeat=1, method="mslr smoothing", seconds=f"{wall:.3f}", cpu_seconds=f"{cpu:.3f}",
                         loop_seconds="", grid="", **{f"acc_{k}": f"{acc.get(k, float('nan')):.4f}" for k in COUNTS}))
        cl.log(f"smoothing: {wall:.2f}s ({cpu:.2f} CPU s) {acc}")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "mslr_speed.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print(f"news20 binary, {len(y)} x {width} train, {len(yt)} test, threads={args.threads}, "
          f"medians of {args.repeats}:")
    for method in ("liblinear -s 6", "mslr newton", "mslr smoothing"):
        mine = [r for r in rows if r["method"] == method]
        if not mine:
            continue
        seconds = statistics.median(float(r["seconds"]) for r in mine)
        cpu = statistics.median(float(r["cpu_seconds"]) for r in mine)
        accs = " / ".join(f"{statistics.median(float(r[f'acc_{k}']) for r in mine):.4f}" for k in COUNTS)
        print(f"  {method:15s} {seconds:7.2f} s wall {cpu:7.2f} s CPU   accuracy at {COUNTS}: {accs}")
    for field, what in (("seconds", "wall"), ("cpu_seconds", "CPU")):
        lib = statistics.median(float(r[field]) for r in rows if r["method"] == "liblinear -s 6")
        new = statistics.median(float(r[field]) for r in rows if r["method"] == "mslr newton")
        print(f"  MSLR path / LIBLINEAR sweep ({what}): {new / lib:.2f}x")


if __name__ == "__main__":
    main()
