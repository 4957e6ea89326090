#!/usr/bin/python3
"""The whole job at one thread: `fgm path` at its defaults against a
16-value LIBLINEAR -s 5 C sweep, from the same text files (issue 19, 5a).

    bench/whole_job.py                          # a9a, w8a, ijcnn1, news20 (binary), 3 rounds
    bench/whole_job.py --datasets a9a --repeats 1

Each side is what a user runs, timed as whole commands, interleaved round by
round so both see the same machine load; medians of --repeats rounds:
  - fgm: `fgm path --config configs/<ds>.toml` with the prepared files of
    bench/compare_liblinear.py (same splits), engine.threads=1, the config's
    C, B and bias, de-biasing on (the default), the test file given, a fresh
    cache (so the text is ingested inside the timed run), path.features up to
    the largest count LIBLINEAR's sweep reaches (at most 100);
  - LIBLINEAR: `liblinear-train -s 5 -c C [-B 1]` on the training text for 16
    values of C, 4 per decade from 1.05·C_min (the first C at which a feature
    can enter), summed; each model is scored with liblinear-predict (not timed).
Accuracy is matched at fgm's actual non-zero count k: LIBLINEAR's accuracy
interpolated in log(non-zeros) between the grid points that bracket k.
Writes bench/results/whole_job.csv and prints one table.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_liblinear as cl  # noqa: E402

CONFIGS = {"a9a": "a9a", "w8a": "w8a", "ijcnn1": "ijcnn1", "news20": "news20"}
COUNTS = [5, 10, 20, 50, 100]
SWEEP = 16


def timed(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return time.perf_counter() - t0, r.stdout


def liblinear_sweep(d, grid, bias, work):
    """Seconds of the 16 trainings, and (C, non-zeros, accuracy) per model."""
    seconds, points = 0.0, []
    for C in grid:
        model = os.path.join(work, f"ll-{C:.6g}.model")
        cmd = ["liblinear-train", "-s", "5", "-c", f"{C:.10g}", "-q"] + (["-B", "1"] if bias else [])
        wall, _ = timed(cmd + [os.path.join(d, "train.svm"), model])
        seconds += wall
        out = subprocess.run(["liblinear-predict", os.path.join(d, "test.svm"), model, os.devnull],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        acc = float(out.split("=")[1].split("%")[0]) / 100
        with open(model) as f:
            lines = f.read().split("\n")
        at = lines.index("w") + 1
        n_feat = int(next(l for l in lines if l.startswith("nr_feature")).split()[1])
        nnz = sum(1 for l in lines[at:at + n_feat] if l.strip() and float(l.split()[0]) != 0)
        points.append(dict(C=C, nnz=nnz, accuracy=acc))
    return seconds, points


def fgm_path(fgm, ds, d, width, counts, work):
    out, cache = os.path.join(work, "fgm-out"), os.path.join(work, "fgm-cache")
    subprocess.run(["rm", "-rf", out, cache], check=True)
    cmd = [fgm, "path", "--config", cl.config_file(CONFIGS[ds]), f"data.train={os.path.join(d, 'train.svm')}",
           f"data.test={os.path.join(d, 'test.svm')}", f"data.features={width}", f"output.dir={out}",
           f"engine.cache_dir={cache}", "engine.threads=1", "engine.progress=off",
           "path.features=[" + ",".join(map(str, counts)) + "]"]
    wall, _ = timed(cmd)
    _, rows = cl.read_path(out)
    return wall, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fgm", default=os.path.join(cl.ROOT, "build", "fgm"))
    ap.add_argument("--datasets", default=",".join(CONFIGS))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    table = []
    for ds in args.datasets.split(","):
        spec = cl.DATASETS[ds]
        d = cl.prepare(ds, spec)
        y, x = cl.load_csr(d, "train", spec["width"])
        bias = "bias = true" in open(cl.config_file(CONFIGS[ds])).read()
        c0 = cl.c_min(5, y, x, False) * 1.05
        grid = [c0 * 10 ** (k / 4) for k in range(SWEEP)]
        fgm_times, ll_times, points, rows = [], [], None, None
        with tempfile.TemporaryDirectory(prefix=f"whole-{ds}-") as work:
            for _ in range(args.repeats):
                seconds, points = liblinear_sweep(d, grid, bias, work)
                ll_times.append(seconds)
                if rows is None:  # counts up to LIBLINEAR's largest non-zero count
                    top = max(p["nnz"] for p in points)
                    counts = [c for c in COUNTS if c <= max(top, COUNTS[0]) and c < spec["width"]]
                wall, rows = fgm_path(args.fgm, ds, d, spec["width"], counts, work)
                fgm_times.append(wall)
        ll_points = [dict(nnz=p["nnz"], accuracy=p["accuracy"]) for p in points]
        matched = []
        for r in rows:
            k = int(r["nonzero"])
            acc = r["debiased_test_accuracy"]  # the de-biased model of the point (the default)
            if np.isnan(acc):
                acc = r["test_accuracy"]
            matched.append((k, acc, cl.interp_acc(ll_points, k)))
        fgm_s, ll_s = statistics.median(fgm_times), statistics.median(ll_times)
        table.append(dict(dataset=ds, fgm_seconds=fgm_s, liblinear_seconds=ll_s, ratio=fgm_s / ll_s,
                          counts=" ".join(str(k) for k, _, _ in matched),
                          fgm_accuracy=" ".join(f"{a:.4f}" for _, a, _ in matched),
                          liblinear_accuracy=" ".join(f"{b:.4f}" for _, _, b in matched),
                          wins=sum(1 for _, a, b in matched if not np.isnan(b) and a >= b),
                          matched=sum(1 for _, _, b in matched if not np.isnan(b))))
        t = table[-1]
        print(f"{ds}: fgm path {fgm_s:.2f} s, LIBLINEAR -s 5 x{SWEEP} {ll_s:.2f} s (ratio {t['ratio']:.2f}); "
              f"counts {t['counts']}: fgm {t['fgm_accuracy']} vs LIBLINEAR {t['liblinear_accuracy']} "
              f"({t['wins']}/{t['matched']} at least equal)", flush=True)
    os.makedirs(cl.RESULTS, exist_ok=True)
    with open(os.path.join(cl.RESULTS, "whole_job.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)


if __name__ == "__main__":
    main()
