#!/usr/bin/python3
"""fgm path vs LIBLINEAR's l1 sweeps (-s 5, -s 6) at matched feature counts.

Run from anywhere (Debian's python3 with numpy, scipy, matplotlib and
python3-liblinear; `scripts/install_deps.sh` installs them; `make build` first):

    bench/compare_liblinear.py                  # every dataset, 3 repeats (~9-11 min on 2 cores)
    bench/compare_liblinear.py --datasets a9a,leu --repeats 1
    bench/compare_liblinear.py --tune-C         # how fgm.C in configs/<ds>.toml was chosen
    bench/compare_liblinear.py --datasets leu --bias false   # variant, written with a suffix
    bench/compare_liblinear.py --tables-only    # rewrite the summary from stored results

Method (bench/compare_liblinear.md has the discussion):
  1. Data: plain LIBSVM text in bench/work/compare_liblinear/<ds>/ (not
     timed): decompressed; w8a, colon-cancer and news20 get a fixed stratified
     random test split (stratified_split, seed SPLIT_SEED); news20 classes
     1-10 -> +1, 11-20 -> -1; madelon is standardised with the training
     statistics; synth-sparse comes from compare_liblinear_synth.py.
  2. LIBLINEAR (Debian liblinear 2.3.0; python3-liblinear drives the same
     liblinear.so.4 that liblinear-train links): the training set is loaded
     once into LIBLINEAR's C structure, then train() is called per C and
     timed alone (wall and process CPU). Grid: 4 values per decade from
     1.05·C_min (C_min = the smallest C at which a feature, not the bias, can
     leave zero: from the gradient at w = 0) until the non-zero count reaches
     min(width, 1000), stops growing for a decade, or 25 values. Non-zeros are
     counted without the bias; accuracy/AUC on the test file with
     liblinear-predict's rule (decision > 0 -> first label). Load time: wall
     time of `liblinear-train -s 5 -c C_min/2` (w stays 0, so this is parse +
     transpose + one cheap pass).
  3. fgm: `fgm ingest` timed with 1 and 2 threads; `fgm path` on the store for
     both losses at 1,2,5,10,20,50,100,... up to the first value at or above
     LIBLINEAR's largest non-zero count (capped by the width); fgm.B =
     max(1, min(50, last count // 20)); fgm.C and fgm.bias from the config
     (LIBLINEAR gets -B 1 exactly when fgm.bias is true). Timing runs:
     path.debias=false, no test file, 1 and 2 threads, path.json "seconds".
     One more run per loss (1 thread, de-biasing on, test file) gives the
     accuracies; its time is reported separately.
  4. Timing rounds interleave LIBLINEAR's grid and the fgm runs so both see
     the same machine load; every time is a median of --repeats rounds.
  5. Matching: each fgm point is matched at its actual non-zero count k
     (squared hinge with -s 5, logistic with -s 6): LIBLINEAR's accuracy is
     interpolated linearly in log(non-zeros) between the grid points that
     bracket k (equal counts averaged); no match outside LIBLINEAR's range.
     The nearest grid point is written too.
Outputs in bench/results: compare_<ds>.csv (matched table),
compare_<ds>_points.csv (every LIBLINEAR and fgm point), compare_<ds>.png,
compare_summary.csv, compare_tables.md, compare_tuneC_<ds>.csv.
"""
import argparse
import bz2
import gzip
import json
import lzma
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
import tomllib

import numpy as np
import scipy.sparse as sp
from scipy.stats import rankdata

import liblinear
import liblinearutil

# Debian's python3-liblinear 2.3.0 calls numpy functions through the `scipy`
# module (scipy.ndarray, scipy.ctypeslib, ...), which scipy >= 1.9 no longer
# re-exports; pointing those names at numpy restores the CSR fast path.
liblinear.scipy = np
liblinearutil.scipy = np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

def config_file(name):
    """configs/<name>.toml, or bench/configs/<name>.toml for the configs whose data a benchmark writes."""
    shipped = os.path.join(ROOT, "configs", name + ".toml")
    return shipped if os.path.exists(shipped) else os.path.join(ROOT, "bench", "configs", name + ".toml")

SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
WORK = os.path.join(HERE, "work", "compare_liblinear")
RESULTS = os.path.join(HERE, "results")

# name: training source, test source or split, declared width, label map.
# split=k: fixed stratified random split, 1/k of each class to the test set
# (see stratified_split; seed SPLIT_SEED).
DATASETS = {
    "colon-cancer": dict(train="colon-cancer/colon-cancer", split=3, width=2000),
    "leu": dict(train="leu/leu.bz2", test="leu/leu.t.bz2", width=7129),
    "arcene": dict(train="arcene/arcene_train.libsvm", test="arcene/arcene_valid.libsvm", width=10000),
    "madelon": dict(train="madelon/madelon.xz", test="madelon/madelon.t", width=500, standardize=True,
                    config="madelon-standardized"),
    "ijcnn1": dict(train="ijcnn1/ijcnn1.trn.bz2", test="ijcnn1/ijcnn1.tst.bz2", width=22),
    "a9a": dict(train="a9a/a9a", test="a9a/a9a.t", width=123),
    "w8a": dict(train="w8a/w8a", split=5, width=300),
    "news20": dict(train="news20/news20.bz2", split=5, width=62061, binary_news20=True),
    "synth-sparse": dict(synthetic=True, width=1000000),
}
SPLIT_SEED = 20240601   # test split of w8a, colon-cancer, news20
TUNE_SEED = 7           # validation folds of --tune-C (inside the training rows)
COUNTS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
MAX_COUNT = 1000          # cap on feature counts (both tools)
GRID_PER_DECADE = 4
GRID_MAX = 25


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- data prep
def open_text(path):
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic.startswith(b"BZh"):
        return bz2.open(path, "rt")
    if magic.startswith(b"\xfd7zXZ"):
        return lzma.open(path, "rt")
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rt")
    return open(path, "rt")


def clean_lines(path, label_map=None):
    """Data rows without comments/blank lines; labels optionally mapped."""
    out = []
    with open_text(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if label_map:
                lab, _, rest = line.partition(" ")
                line = (label_map(lab) + " " + rest.strip()).strip()
            out.append(" ".join(line.split()))
    return out


def write_lines(path, lines):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def prepare(name, spec):
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    train, test = os.path.join(d, "train.svm"), os.path.join(d, "test.svm")
    if os.path.exists(train) and os.path.exists(test):
        return d
    if spec.get("synthetic"):
        subprocess.run([sys.executable, os.path.join(HERE, "compare_liblinear_synth.py"), "--out", d],
                       check=True)
        return d
    label_map = None
    if spec.get("binary_news20"):
        label_map = lambda lab: "+1" if int(float(lab)) <= 10 else "-1"  # noqa: E731
    rows = clean_lines(os.path.join(SHARED, spec["train"]), label_map)
    if "split" in spec:
        rows, test_rows = stratified_split(rows, spec["split"], 0, SPLIT_SEED)
    else:
        test_rows = clean_lines(os.path.join(SHARED, spec["test"]), label_map)
    if spec.get("standardize"):
        rows, test_rows = standardize(rows, test_rows, spec["width"])
    write_lines(test, test_rows)
    write_lines(train, rows)
    return d


def stratified_split(rows, k, fold, seed):
    """(kept, held out), a fixed random stratified split: the rows of each class
    (classes in sorted order) are permuted by numpy's PCG64 generator seeded
    with `seed`; the m-th row of that permutation is in fold m % k and the rows
    of fold `fold` are held out. (A stride split is biased on files whose rows
    cycle through the classes, as news20's do.)"""
    labels = [float(r.split(None, 1)[0]) for r in rows]
    fold_of = [0] * len(rows)
    rng = np.random.default_rng(seed)
    for lab in sorted(set(labels)):
        idx = [i for i, l in enumerate(labels) if l == lab]
        for m, p in enumerate(rng.permutation(len(idx))):
            fold_of[idx[p]] = m % k
    kept = [r for r, f in zip(rows, fold_of) if f != fold]
    held = [r for r, f in zip(rows, fold_of) if f == fold]
    return kept, held


def dense(rows, width):
    y = np.empty(len(rows))
    x = np.zeros((len(rows), width))
    for i, r in enumerate(rows):
        tok = r.split()
        y[i] = float(tok[0])
        for t in tok[1:]:
            j, v = t.split(":")
            x[i, int(j) - 1] = float(v)
    return y, x


def standardize(rows, test_rows, width):
    """Columns to zero mean, unit variance with the training statistics (both sets)."""
    y, x = dense(rows, width)
    yt, xt = dense(test_rows, width)
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd[sd == 0] = 1.0

    def fmt_rows(y, x):
        z = (x - mu) / sd
        return [f"{int(l):+d} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row) if v != 0)
                for l, row in zip(y, z)]
    return fmt_rows(y, x), fmt_rows(yt, xt)


def load_csr(d, part, width):
    npz = os.path.join(d, part + ".npz")
    if os.path.exists(npz):
        z = np.load(npz)
        x = sp.csr_matrix((np.ones(len(z["indices"])), z["indices"], z["indptr"]),
                          shape=(len(z["y"]), width))
        return z["y"].astype(np.float64), x
    y, x = liblinearutil.svm_read_problem(os.path.join(d, part + ".svm"), return_scipy=True)
    x = sp.csr_matrix(x)
    if x.shape[1] < width:
        x.resize((x.shape[0], width))
    elif x.shape[1] > width:
        x = x[:, :width]
    return np.asarray(y, dtype=np.float64), x


# ------------------------------------------------------------------ metrics
def metrics(y, dec, pred_pos=None):
    """accuracy (predicted +1 where pred_pos, default decision > 0) and AUC (ties averaged)."""
    pos = y > 0
    if pred_pos is None:
        pred_pos = dec > 0
    acc = float(np.mean(pred_pos == pos))
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return acc, float("nan")
    r = rankdata(dec)
    auc = (r[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return acc, float(auc)


# ---------------------------------------------------------------- LIBLINEAR
def c_min(solver, y, x, bias):
    """Smallest C at which LIBLINEAR's w = 0 stops being optimal; with bias=False
    only the feature columns count (LIBLINEAR 2.3 penalises the -B 1 bias like a
    feature, and on unbalanced sets it enters long before any feature)."""
    g = np.abs(x.T @ y)
    gmax = float(g.max()) if g.size else 0.0
    if bias:
        gmax = max(gmax, abs(float(y.sum())))
    # -s 5: C·Σ max(0, 1 - y w·x)²: gradient 2C|Σ y x_j|; -s 6: logistic, C|Σ y x_j| / 2.
    return 1.0 / (2 * gmax) if solver == 5 else 2.0 / gmax


def model_weights(m, width):
    """LIBLINEAR's raw weights, bias and the label it predicts for decision > 0."""
    n = m.nr_feature + (1 if m.bias >= 0 else 0)
    w = np.ctypeslib.as_array(m.w, shape=(n,)).copy()
    b = float(w[m.nr_feature] * m.bias) if m.bias >= 0 else 0.0
    return w[:width], b, m.get_labels()[0]


def liblinear_metrics(yt, xt, w, b, first_label):
    # As liblinear-predict: decision > 0 -> labels[0], otherwise labels[1] (ties included).
    raw = xt @ w + b
    score = raw if first_label > 0 else -raw
    pred_pos = (raw > 0) if first_label > 0 else ~(raw > 0)
    return metrics(yt, score, pred_pos)


def liblinear_opts(solver, C, bias):
    return f"-s {solver} -c {C:.10g} -q" + (" -B 1" if bias else "")


def liblinear_sweep(solver, prob, y, x, yt, xt, bias, cap):
    """Discover the C grid of one solver (first timing of every point)."""
    width = x.shape[1]
    c0 = c_min(solver, y, x, False) * 1.05  # the first C at which a feature (not the bias) can enter
    points = []
    k = 0
    while k < GRID_MAX:
        C = c0 * 10 ** (k / GRID_PER_DECADE)
        t0, p0 = time.perf_counter(), time.process_time()
        m = liblinearutil.train(prob, liblinear_opts(solver, C, bias))
        wall, cpu = time.perf_counter() - t0, time.process_time() - p0
        w, b, first = model_weights(m, width)
        nnz = int(np.count_nonzero(w))
        acc, auc = liblinear_metrics(yt, xt, w, b, first)
        points.append(dict(solver=solver, C=C, nnz=nnz, accuracy=acc, auc=auc, walls=[wall], cpus=[cpu]))
        k += 1
        if nnz >= cap:
            break
        if len(points) >= 3 * GRID_PER_DECADE:
            recent = [p["nnz"] for p in points[-GRID_PER_DECADE - 1:]]
            if max(recent) <= recent[0] * 1.02 + 0.5:  # no growth over a decade: saturated
                break
    return points


def liblinear_retime(points, prob, bias):
    for p in points:
        t0, p0 = time.perf_counter(), time.process_time()
        liblinearutil.train(prob, liblinear_opts(p["solver"], p["C"], bias))
        p["walls"].append(time.perf_counter() - t0)
        p["cpus"].append(time.process_time() - p0)


def liblinear_load_seconds(train, solver_cmin, bias, repeats):
    cmd = ["liblinear-train", "-s", "5", "-c", f"{solver_cmin / 2:.10g}", "-q"]
    if bias:
        cmd += ["-B", "1"]
    cmd += [train, os.devnull]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# --------------------------------------------------------------------- fgm
def run_timed(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r.stdout


def fgm_ingest(fgm, d, width, threads, repeats):
    walls = []
    store = os.path.join(d, "store")
    for _ in range(repeats):
        wall, _, _ = run_timed([fgm, "ingest", os.path.join(d, "train.svm"), "--out", store,
                                "--threads", str(threads), "--features", str(width),
                                "--memory-budget", "1GB", "--progress", "off"])
        walls.append(wall)
    return statistics.median(walls), store


def read_path(out_dir):
    with open(os.path.join(out_dir, "path.json")) as f:
        info = json.load(f)
    rows = []
    with open(os.path.join(out_dir, "path.csv")) as f:
        header = f.readline().strip().split(",")
        for line in f:
            vals = line.strip().split(",")
            rows.append({h: (float(v) if v != "" else float("nan")) for h, v in zip(header, vals)})
    return info, rows


def model_nnz(fgm, path):
    out = subprocess.run([fgm, "inspect", path], check=True, stdout=subprocess.PIPE, text=True).stdout
    return sum(1 for f in json.loads(out)["features"] if f["weight"] != 0)


def fgm_path(fgm, config, d, store, loss, counts, B, threads, timing, tag, bias_override=None):
    out = os.path.join(d, f"fgm-{loss}-{tag}" + ("" if bias_override is None else f"-bias{bias_override}"))
    cmd = [fgm, "path", "--config", config, f"data.train={store}", f"output.dir={out}",
           f"engine.cache_dir={os.path.join(d, 'cache')}", f"engine.threads={threads}",
           f"fgm.loss={loss}", f"fgm.B={B}", "path.features=[" + ",".join(map(str, counts)) + "]",
           "engine.progress=off", "engine.memory_budget=2GB"]
    if bias_override is not None:
        cmd.append(f"fgm.bias={'true' if bias_override else 'false'}")
    if timing:
        cmd += ["path.debias=false", "data.test="]
    else:
        cmd += ["path.debias=true", f"data.test={os.path.join(d, 'test.svm')}"]
    wall, cpu, _ = run_timed(cmd)
    info, rows = read_path(out)
    return dict(seconds=info["seconds"], process_wall=wall, process_cpu=cpu, rows=rows, out=out)


# ----------------------------------------------------------------- matching
def interp_acc(points, k):
    """Accuracy at k non-zeros, linear in log(nnz) between bracketing points."""
    by = {}
    for p in points:
        if p["nnz"] >= 1:
            by.setdefault(p["nnz"], []).append(p["accuracy"])
    xs = sorted(by)
    if not xs or k < xs[0] or k > xs[-1]:
        return float("nan")
    ys = [statistics.mean(by[x]) for x in xs]
    return float(np.interp(math.log(k), [math.log(x) for x in xs], ys))


def nearest(points, k):
    cand = [p for p in points if p["nnz"] >= 1]
    if not cand:
        return None
    return min(cand, key=lambda p: (abs(math.log(p["nnz"] / k)), p["C"]))


# ----------------------------------------------------------------- plotting
def plot(name, ll, fgm_acc, fgm_time, path_png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=80)
    colors = {5: "tab:blue", 6: "tab:orange", "squared_hinge": "tab:green", "logistic": "tab:red"}
    for s in (5, 6):
        pts = sorted((p for p in ll[s] if p["nnz"] >= 1), key=lambda p: p["nnz"])
        a1.plot([p["nnz"] for p in pts], [p["accuracy"] for p in pts], "o:", ms=3, color=colors[s],
                label=f"LIBLINEAR -s {s}")
        cum = np.cumsum([p["seconds"] for p in ll[s]])
        xs = [max(p["nnz"], 0.8) for p in ll[s]]
        a2.plot(xs, cum, "o:", ms=3, color=colors[s], label=f"-s {s} sweep (cumulative)")
        a2.plot(xs, [p["seconds"] for p in ll[s]], "x", ms=3, color=colors[s], alpha=0.6,
                label=f"-s {s} single C")
    for loss, short in (("squared_hinge", "sq-hinge"), ("logistic", "logistic")):
        rows = fgm_acc[loss]
        a1.plot([r["nnz"] for r in rows], [r["test_accuracy"] for r in rows], "s-", ms=3,
                color=colors[loss], label=f"fgm {short}")
        a1.plot([r["nnz"] for r in rows], [r["debiased_test_accuracy"] for r in rows], "^--", ms=3,
                color=colors[loss], alpha=0.6, label=f"fgm {short} de-biased")
        t = fgm_time[loss]
        n = min(len(t["counts"]), len(t["point_seconds_1t"]))
        a2.plot(t["counts"][:n], t["point_seconds_1t"][:n], "s-", ms=3, color=colors[loss],
                label=f"fgm {short} path, 1 thread")
    for a in (a1, a2):
        a.set_xscale("log")
        a.set_xlabel("non-zero features")
        a.grid(alpha=0.3)
    a2.set_yscale("log")
    a1.set_ylabel("test accuracy")
    a2.set_ylabel("seconds (training only)")
    a1.set_title(f"{name}: accuracy", fontsize=10)
    a2.set_title(f"{name}: time to reach k features", fontsize=10)
    a1.legend(fontsize=6, loc="lower right")
    a2.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    fig.savefig(path_png)
    plt.close(fig)
    shrink_png(path_png)


def shrink_png(path):
    """64-colour palette PNG: a fraction of the size, same look for line plots."""
    from PIL import Image
    Image.open(path).convert("RGB").quantize(colors=64).save(path, optimize=True)


# --------------------------------------------------------------------- main
def fmt(v, nd=4):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def run_dataset(name, spec, args):
    log(f"== {name}")
    t_start = time.perf_counter()
    d = prepare(name, spec)
    config = config_file(spec.get("config", name))
    with open(config, "rb") as f:
        cfg = tomllib.load(f)
    bias = bool(cfg.get("fgm", {}).get("bias", False))
    bias_override = None
    if args.bias != "config":
        bias_override = args.bias == "true"
        bias = bias_override
    suffix = "" if bias_override is None else f"_bias-{args.bias}"
    width = spec["width"]
    y, x = load_csr(d, "train", width)
    yt, xt = load_csr(d, "test", width)
    prob = liblinear.problem(y, x)
    cap = min(width, MAX_COUNT)
    ll = {}
    for s in (5, 6):
        log(f"   LIBLINEAR -s {s} grid")
        ll[s] = liblinear_sweep(s, prob, y, x, yt, xt, bias, cap)
    load_s = liblinear_load_seconds(os.path.join(d, "train.svm"), c_min(5, y, x, bias), bias, args.repeats)
    max_nnz = max(p["nnz"] for s in ll for p in ll[s])
    top = min(max(max_nnz, 1), cap)
    counts = [c for c in COUNTS if c < top] + [min(next(c for c in COUNTS if c >= top), width)]
    counts = sorted(set(c for c in counts if c <= width))
    B = max(1, min(50, counts[-1] // 20))
    log(f"   fgm ingest; path counts {counts}, B={B}")
    ingest1, store = fgm_ingest(args.fgm, d, width, 1, args.repeats)
    ingest2, store = fgm_ingest(args.fgm, d, width, 2, args.repeats)
    # Timing rounds, LIBLINEAR and fgm interleaved so that both see the same
    # machine load (the first LIBLINEAR timing is the grid discovery above).
    runs = {(loss, th): [] for loss in ("squared_hinge", "logistic") for th in (1, 2)}
    for rnd in range(args.repeats):
        log(f"   timing round {rnd + 1}/{args.repeats}")
        if rnd > 0:
            for s in (5, 6):
                liblinear_retime(ll[s], prob, bias)
        for loss in ("squared_hinge", "logistic"):
            for th in (1, 2):
                runs[(loss, th)].append(fgm_path(args.fgm, config, d, store, loss, counts, B, th, True,
                                                 f"t{th}", bias_override))
    for s in (5, 6):
        for p in ll[s]:
            p["seconds"] = statistics.median(p["walls"])
            p["cpu_seconds"] = statistics.median(p["cpus"])
    fgm_time, fgm_acc, fgm_full = {}, {}, {}
    for loss in ("squared_hinge", "logistic"):
        t = {}
        for threads in (1, 2):
            rr = runs[(loss, threads)]
            t[threads] = statistics.median(r["seconds"] for r in rr)
            t[f"cpu{threads}"] = statistics.median(r["process_cpu"] for r in rr)
            t[f"points{threads}"] = [statistics.median(r["rows"][i]["seconds"] for r in rr)
                                     for i in range(len(rr[0]["rows"]))]
        full = fgm_path(args.fgm, config, d, store, loss, counts, B, 1, False, "acc", bias_override)
        rows = []
        for r in full["rows"]:
            pt = int(r["point"])
            r["nnz"] = model_nnz(args.fgm, os.path.join(full["out"], f"point-{pt}.fgm"))
            r["debiased_nnz"] = model_nnz(args.fgm, os.path.join(full["out"], f"point-{pt}-debiased.fgm"))
            rows.append(r)
        fgm_acc[loss] = rows
        fgm_full[loss] = full["seconds"]
        fgm_time[loss] = dict(seconds_1t=t[1], seconds_2t=t[2], cpu_1t=t["cpu1"],
                              counts=[r["nnz"] for r in rows], point_seconds_1t=t["points1"])

    # Matched table.
    matched = []
    nan = float("nan")
    for i, k in enumerate(counts):
        row = {"features": k}
        for loss, short in (("squared_hinge", "sqh"), ("logistic", "log")):
            # A path can end early (no feature with a non-zero score left): missing points are blank.
            r = fgm_acc[loss][i] if i < len(fgm_acc[loss]) else None
            ps = fgm_time[loss]["point_seconds_1t"]
            row[f"fgm_{short}_nnz"] = r["nnz"] if r else ""
            row[f"fgm_{short}_acc"] = r["test_accuracy"] if r else nan
            row[f"fgm_{short}_auc"] = r["test_auc"] if r else nan
            row[f"fgm_{short}_debiased_acc"] = r["debiased_test_accuracy"] if r else nan
            row[f"fgm_{short}_debiased_auc"] = r["debiased_test_auc"] if r else nan
            row[f"fgm_{short}_path_seconds_1t"] = ps[i] if i < len(ps) else nan
        for s in (5, 6):
            # Each LIBLINEAR solver is matched at the count the fgm model with the
            # corresponding loss actually has (-s 5 ~ squared hinge, -s 6 ~ logistic).
            kk = row["fgm_sqh_nnz"] if s == 5 else row["fgm_log_nnz"]
            if kk == "":
                kk = k
            kk = max(kk, 1)
            row[f"s{s}_interp_acc"] = interp_acc(ll[s], kk)
            n = nearest(ll[s], kk)
            row[f"s{s}_nearest_C"] = n["C"] if n else nan
            row[f"s{s}_nearest_nnz"] = n["nnz"] if n else ""
            row[f"s{s}_nearest_acc"] = n["accuracy"] if n else nan
            row[f"s{s}_nearest_auc"] = n["auc"] if n else nan
        def best(*v):
            v = [x for x in v if not math.isnan(x)]
            return max(v) if v else nan
        row["liblinear_best_acc"] = best(row["s5_interp_acc"], row["s6_interp_acc"])
        row["fgm_best_acc"] = best(row["fgm_sqh_acc"], row["fgm_log_acc"])
        row["fgm_best_debiased_acc"] = best(row["fgm_sqh_debiased_acc"], row["fgm_log_debiased_acc"])
        matched.append(row)

    os.makedirs(RESULTS, exist_ok=True)
    cols = list(matched[0].keys())
    with open(os.path.join(RESULTS, f"compare_{name}{suffix}.csv"), "w") as f:
        f.write(",".join(cols) + "\n")
        for r in matched:
            f.write(",".join(fmt(r[c], 6) if isinstance(r[c], float) else str(r[c]) for c in cols) + "\n")
    with open(os.path.join(RESULTS, f"compare_{name}{suffix}_points.csv"), "w") as f:
        f.write("method,param,nnz,test_accuracy,test_auc,debiased_accuracy,seconds_1t,cpu_seconds_1t,seconds_2t\n")
        for s in (5, 6):
            for p in ll[s]:
                f.write(f"liblinear_s{s},C={p['C']:.6g},{p['nnz']},{p['accuracy']:.6f},{fmt(p['auc'], 6)},,"
                        f"{p['seconds']:.4f},{p['cpu_seconds']:.4f},\n")
        for loss in ("squared_hinge", "logistic"):
            ps = fgm_time[loss]["point_seconds_1t"]
            for i, r in enumerate(fgm_acc[loss]):
                f.write(f"fgm_{loss},k={counts[i]},{r['nnz']},{r['test_accuracy']:.6f},{fmt(r['test_auc'], 6)},"
                        f"{fmt(r['debiased_test_accuracy'], 6)},{fmt(ps[i] if i < len(ps) else None, 4)},,\n")
    plot(name + suffix, ll, fgm_acc, fgm_time, os.path.join(RESULTS, f"compare_{name}{suffix}.png"))

    sweep = {s: sum(p["seconds"] for p in ll[s]) for s in (5, 6)}
    sweep_cpu = {s: sum(p["cpu_seconds"] for p in ll[s]) for s in (5, 6)}
    valid = [r for r in matched if not math.isnan(r["liblinear_best_acc"]) and not math.isnan(r["fgm_best_acc"])]
    wins = sum(1 for r in valid if r["fgm_best_acc"] >= r["liblinear_best_acc"] - 1e-12)
    wins_db = sum(1 for r in valid if r["fgm_best_debiased_acc"] >= r["liblinear_best_acc"] - 1e-12)
    mean_diff = statistics.mean(r["fgm_best_acc"] - r["liblinear_best_acc"] for r in valid) if valid else float("nan")
    summary = dict(
        dataset=name + suffix, train_rows=x.shape[0], test_rows=xt.shape[0], width=width, nnz=int(x.nnz), bias=bias,
        fgm_C=cfg.get("fgm", {}).get("C", 10.0), fgm_B=B, counts=" ".join(map(str, counts)),
        grid_s5=len(ll[5]), grid_s6=len(ll[6]),
        C_range_s5=f"{ll[5][0]['C']:.3g}..{ll[5][-1]['C']:.3g}", C_range_s6=f"{ll[6][0]['C']:.3g}..{ll[6][-1]['C']:.3g}",
        max_nnz_s5=max(p["nnz"] for p in ll[5]), max_nnz_s6=max(p["nnz"] for p in ll[6]),
        liblinear_load_s=load_s, fgm_ingest_1t_s=ingest1, fgm_ingest_2t_s=ingest2,
        s5_sweep_s=sweep[5], s6_sweep_s=sweep[6], s5_sweep_cpu_s=sweep_cpu[5], s6_sweep_cpu_s=sweep_cpu[6],
        fgm_sqh_path_1t_s=fgm_time["squared_hinge"]["seconds_1t"],
        fgm_sqh_path_2t_s=fgm_time["squared_hinge"]["seconds_2t"],
        fgm_log_path_1t_s=fgm_time["logistic"]["seconds_1t"],
        fgm_log_path_2t_s=fgm_time["logistic"]["seconds_2t"],
        fgm_sqh_process_cpu_1t_s=fgm_time["squared_hinge"]["cpu_1t"],
        fgm_log_process_cpu_1t_s=fgm_time["logistic"]["cpu_1t"],
        fgm_sqh_path_debias_test_s=fgm_full["squared_hinge"], fgm_log_path_debias_test_s=fgm_full["logistic"],
        ratio_sqh_s5_1t=fgm_time["squared_hinge"]["seconds_1t"] / sweep[5],
        ratio_log_s6_1t=fgm_time["logistic"]["seconds_1t"] / sweep[6],
        ratio_both_1t=(fgm_time["squared_hinge"]["seconds_1t"] + fgm_time["logistic"]["seconds_1t"]) / (sweep[5] + sweep[6]),
        ratio_both_2t=(fgm_time["squared_hinge"]["seconds_2t"] + fgm_time["logistic"]["seconds_2t"]) / (sweep[5] + sweep[6]),
        ratio_both_1t_cpu=(fgm_time["squared_hinge"]["cpu_1t"] + fgm_time["logistic"]["cpu_1t"]) / (sweep_cpu[5] + sweep_cpu[6]),
        matched_counts=len(valid), fgm_wins=wins, fgm_debiased_wins=wins_db, mean_acc_diff=mean_diff,
        loadavg=os.getloadavg()[0], repeats=args.repeats, date=time.strftime("%Y-%m-%d %H:%M"),
        dataset_wall_s=time.perf_counter() - t_start, fgm_binary=args.fgm_id,
    )
    log(f"   done: matched {len(valid)}, fgm>=LL at {wins}, ratio 1t {summary['ratio_both_1t']:.2f}")
    with open(os.path.join(d, f"result{suffix}.json"), "w") as f:
        json.dump(dict(summary=summary, matched=matched), f)
    return summary, matched


def tune_c(name, spec, args):
    """Pick fgm.C on a validation split of the TRAINING rows (1/4 of each class, fixed seed).

    For each C of the grid and both losses, runs the fgm path (2 threads, no
    de-biasing) on the other 3/4 and averages the validation accuracy over
    the path's feature counts (and over 4 stratified folds below 1000 rows). Writes bench/results/compare_tuneC_<ds>.csv;
    the chosen value goes into the dataset's config by hand (documented).
    """
    d = prepare(name, spec)
    t = os.path.join(d, "tune")
    os.makedirs(t, exist_ok=True)
    with open(os.path.join(d, "train.svm")) as f:
        rows = [line.rstrip("\n") for line in f if line.strip()]
    # One stratified random split (1/4 of each class) or, below 1000 rows, 4-fold CV.
    folds = list(range(4)) if len(rows) < 1000 else [3]
    width = spec["width"]
    for fold in folds:
        kept, held = stratified_split(rows, 4, fold, TUNE_SEED)
        write_lines(os.path.join(t, f"valid{fold}.svm"), held)
        write_lines(os.path.join(t, f"train{fold}.svm"), kept)
        run_timed([args.fgm, "ingest", os.path.join(t, f"train{fold}.svm"), "--out", os.path.join(t, f"store{fold}"),
                   "--threads", "2", "--features", str(width), "--memory-budget", "1GB", "--progress", "off"])
    rj = os.path.join(d, "result.json")
    if os.path.exists(rj):
        with open(rj) as f:
            counts = [int(c) for c in json.load(f)["summary"]["counts"].split()]
    else:
        counts = [c for c in COUNTS if c < min(width, MAX_COUNT)] + [min(width, MAX_COUNT)]
    B = max(1, min(50, counts[-1] // 20))
    config = config_file(spec.get("config", name))
    grid = [float(c) for c in args.tune_grid.split(",")]
    results = []
    for C in grid:
        accs = {}
        for loss in ("squared_hinge", "logistic"):
            per_fold = []
            for fold in folds:
                out = os.path.join(t, f"C{C:g}-{loss}-{fold}")
                cmd = [args.fgm, "path", "--config", config, f"data.train={os.path.join(t, f'store{fold}')}",
                       f"output.dir={out}", f"engine.cache_dir={os.path.join(t, 'cache')}", "engine.threads=2",
                       f"fgm.loss={loss}", f"fgm.B={B}", f"fgm.C={C!r}",
                       "path.features=[" + ",".join(map(str, counts)) + "]", "engine.progress=off",
                       "engine.memory_budget=2GB", "path.debias=false", "data.test=",
                       f"data.validation={os.path.join(t, f'valid{fold}.svm')}"]
                run_timed(cmd)
                _, prow = read_path(out)
                per_fold.append([r["validation_accuracy"] for r in prow])
            n = min(len(a) for a in per_fold)
            accs[loss] = [statistics.mean(a[i] for a in per_fold) for i in range(n)]
        mean = statistics.mean(accs["squared_hinge"] + accs["logistic"])
        results.append((C, mean, accs))
        log(f"   tune {name} C={C:g}: mean validation accuracy {mean:.4f}")
    best = max(results, key=lambda r: (r[1], -r[0]))
    with open(os.path.join(RESULTS, f"compare_tuneC_{name}.csv"), "w") as f:
        f.write("C,mean_validation_accuracy,squared_hinge_by_count,logistic_by_count,chosen\n")
        for C, mean, accs in results:
            f.write(f"{C:g},{mean:.6f},{' '.join(f'{a:.4f}' for a in accs['squared_hinge'])},"
                    f"{' '.join(f'{a:.4f}' for a in accs['logistic'])},{int(C == best[0])}\n")
    log(f"   tune {name}: best C={best[0]:g} (counts {counts}, B={B})")


def add_se_counts(summary, matched):
    """fgm within one standard error of the better LIBLINEAR solver: the binomial
    standard error sqrt(a(1-a)/n_test) of LIBLINEAR's accuracy a."""
    n = summary["test_rows"]
    valid = [r for r in matched if not math.isnan(r["liblinear_best_acc"]) and not math.isnan(r["fgm_best_acc"])]
    summary["fgm_within_se"] = sum(
        1 for r in valid
        if r["fgm_best_acc"] >= r["liblinear_best_acc"] - math.sqrt(r["liblinear_best_acc"] * (1 - r["liblinear_best_acc"]) / n))
    summary["fgm_worse_beyond_se"] = len(valid) - summary["fgm_within_se"]
    summary["se_at_85pct_pp"] = 100 * math.sqrt(0.85 * 0.15 / n)


def write_tables(summaries, matched_all, path):
    lines = []
    lines.append("fgm binary: " + ", ".join(sorted({s.get("fgm_binary", "?") for s in summaries})) + ".\n")
    lines.append(f"Generated by `bench/compare_liblinear.py` ({platform.node()}, {os.cpu_count()} CPUs); "
                 "per dataset: " + ", ".join(f"{s['dataset']} {s['date']} repeats={s['repeats']} "
                                            f"load avg {s['loadavg']:.1f} ({s['dataset_wall_s']:.0f} s)"
                                            for s in summaries) + ".\n")
    lines.append("### Summary\n")
    lines.append("| dataset | train×width | test rows | matched counts | fgm ≥ best LL (raw) | fgm de-biased ≥ best LL "
                 "| fgm worse by > 1 SE | mean Δacc (fgm−LL) | LL load s | fgm ingest s (1t / 2t) | -s 5 sweep s | -s 6 sweep s "
                 "| fgm sq-hinge path s (1t / 2t) | fgm logistic path s (1t / 2t) | ratio fgm/LL 1t | ratio 2t | ratio CPU 1t |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in summaries:
        lines.append(
            f"| {s['dataset']} | {s['train_rows']}×{s['width']} | {s['test_rows']} | {s['matched_counts']} | {s['fgm_wins']} "
            f"| {s['fgm_debiased_wins']} | {s['fgm_worse_beyond_se']} | {100 * s['mean_acc_diff']:+.2f} pp | {s['liblinear_load_s']:.3f} "
            f"| {s['fgm_ingest_1t_s']:.3f} / {s['fgm_ingest_2t_s']:.3f} | {s['s5_sweep_s']:.2f} | {s['s6_sweep_s']:.2f} "
            f"| {s['fgm_sqh_path_1t_s']:.2f} / {s['fgm_sqh_path_2t_s']:.2f} "
            f"| {s['fgm_log_path_1t_s']:.2f} / {s['fgm_log_path_2t_s']:.2f} "
            f"| {s['ratio_both_1t']:.2f} | {s['ratio_both_2t']:.2f} | {s['ratio_both_1t_cpu']:.2f} |")
    lines.append("")
    for s in summaries:
        name = s["dataset"]
        lines.append(f"### {name}\n")
        lines.append(f"{s['train_rows']} train / {s['test_rows']} test rows, width {s['width']}, bias {s['bias']}, "
                     f"fgm C={s['fgm_C']} B={s['fgm_B']}; LIBLINEAR grids: -s 5 {s['grid_s5']} values "
                     f"C={s['C_range_s5']} (max {s['max_nnz_s5']} non-zeros), -s 6 {s['grid_s6']} values "
                     f"C={s['C_range_s6']} (max {s['max_nnz_s6']}). fgm path with de-biasing and test "
                     f"evaluation (1 thread, one run): sq-hinge {s['fgm_sqh_path_debias_test_s']:.2f} s, "
                     f"logistic {s['fgm_log_path_debias_test_s']:.2f} s.\n")
        lines.append("| k | fgm sq-hinge acc (de-biased) | -s 5 acc @k (nearest: nnz, acc) | fgm logistic acc (de-biased) "
                     "| -s 6 acc @k (nearest: nnz, acc) | best fgm − best LL |")
        lines.append("|---|---|---|---|---|---|")
        for r in matched_all[name]:
            def pc(v):
                return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.2f}"
            diff = r["fgm_best_acc"] - r["liblinear_best_acc"]
            k_note = str(r["features"])
            if r["fgm_sqh_nnz"] != r["features"] or r["fgm_log_nnz"] != r["features"]:
                k_note += f" (nnz {r['fgm_sqh_nnz']}/{r['fgm_log_nnz']})"
            lines.append(
                f"| {k_note} | {pc(r['fgm_sqh_acc'])} ({pc(r['fgm_sqh_debiased_acc'])}) "
                f"| {pc(r['s5_interp_acc'])} ({r['s5_nearest_nnz']}, {pc(r['s5_nearest_acc'])}) "
                f"| {pc(r['fgm_log_acc'])} ({pc(r['fgm_log_debiased_acc'])}) "
                f"| {pc(r['s6_interp_acc'])} ({r['s6_nearest_nnz']}, {pc(r['s6_nearest_acc'])}) "
                f"| {'–' if math.isnan(diff) else f'{100 * diff:+.2f}'} |")
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fgm", default=os.path.join(ROOT, "build", "fgm"))
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bias", choices=("config", "true", "false"), default="config",
                    help="fgm.bias and LIBLINEAR -B 1 for both tools (default: the config's fgm.bias); "
                         "results other than 'config' get a _bias-<value> suffix and are not in the summary")
    ap.add_argument("--tables-only", action="store_true",
                    help="only rewrite compare_summary.csv and compare_tables.md from the stored results")
    ap.add_argument("--tune-C", action="store_true",
                    help="instead of the comparison: choose fgm.C on a validation split of the training rows")
    ap.add_argument("--tune-grid", default="0.0001,0.001,0.01,0.1,1,10,100,1000")
    args = ap.parse_args()
    names = [n for n in args.datasets.split(",") if n]
    for n in names:
        if n not in DATASETS:
            sys.exit(f"unknown dataset {n}; known: {', '.join(DATASETS)}")
    t0 = time.perf_counter()
    # Snapshot the binary: build/ may be relinked by a concurrent `make build`.
    os.makedirs(WORK, exist_ok=True)
    snap = os.path.join(WORK, "fgm")
    for attempt in range(30):
        try:
            shutil.copy2(args.fgm, snap + ".tmp")
            os.replace(snap + ".tmp", snap)
            subprocess.run([snap, "--help"], check=True, stdout=subprocess.DEVNULL)
            break
        except (OSError, subprocess.CalledProcessError):
            time.sleep(2)
    else:
        sys.exit(f"cannot copy a working {args.fgm}")
    args.fgm = snap
    import hashlib
    with open(snap, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           stdout=subprocess.PIPE, text=True).stdout.strip()
    args.fgm_id = f"sha256:{digest} from HEAD {head}{' + uncommitted changes' if dirty else ''}"
    if args.tune_C:
        os.makedirs(RESULTS, exist_ok=True)
        for n in names:
            tune_c(n, DATASETS[n], args)
        return
    for n in names if not args.tables_only else []:
        run_dataset(n, DATASETS[n], args)
    # Tables over every dataset that has a result (earlier runs included).
    suffix = "" if args.bias == "config" else f"_bias-{args.bias}"
    summaries, matched_all = [], {}
    for n in DATASETS:
        rj = os.path.join(WORK, n, f"result{suffix}.json")
        if os.path.exists(rj):
            with open(rj) as f:
                r = json.load(f)
            add_se_counts(r["summary"], r["matched"])
            summaries.append(r["summary"])
            matched_all[r["summary"]["dataset"]] = r["matched"]
    os.makedirs(RESULTS, exist_ok=True)
    cols = list(summaries[0].keys())
    with open(os.path.join(RESULTS, f"compare_summary{suffix}.csv"), "w") as f:
        f.write(",".join(cols) + "\n")
        for s in summaries:
            f.write(",".join(fmt(s.get(c), 4) if isinstance(s.get(c), float) else str(s.get(c, "")) for c in cols) + "\n")
    write_tables(summaries, matched_all, os.path.join(RESULTS, f"compare_tables{suffix}.md"))
    log(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
