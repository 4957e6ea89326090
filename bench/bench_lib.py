#!/usr/bin/env python3
"""Helpers for bench/run_all.sh: parsing (/usr/bin/time -v, fgm output, run.json,
LIBLINEAR models), the LIBLINEAR C search, and the summary tables.

Usage: python3 bench/bench_lib.py <command> [args]; see the functions named cmd_*.
Only the standard library is used (tomllib needs Python >= 3.11).
"""
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import tomllib

# ---------------------------------------------------------------- parsing


def parse_time_v(path):
    """/usr/bin/time -v output -> (wall seconds, max RSS bytes, user s, system s)."""
    wall, rss, user, system = None, None, None, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("User time (seconds):"):
                user = float(line.split(":")[-1])
            elif line.startswith("System time (seconds):"):
                system = float(line.split(":")[-1])
            elif line.startswith("Maximum resident set size (kbytes):"):
                rss = int(line.split(":")[-1]) * 1024
            elif line.startswith("Elapsed (wall clock) time"):
                t = line.split(": ")[-1].strip()
                parts = [float(p) for p in t.split(":")]
                wall = 0.0
                for p in parts:
                    wall = wall * 60 + p
    return wall, rss, user, system


def parse_kv(text):
    """'a=1 b=2.5 ...' (fgm ingest / train stdout) -> dict of strings."""
    return dict(m.groups() for m in re.finditer(r"(\w+)=(\S+)", text))


def read_truth(path):
    ids = set()
    with open(path) as f:
        for line in f:
            if line.strip():
                ids.add(int(line.split()[0]))  # 1-based
    return ids


def liblinear_model(path, truth_path=None):
    """-> (nnz weights excluding the bias, recovered planted ids or None).

    Model file: header lines, then "w", then one line per feature (1-based
    feature j on the j-th line), plus one line for the bias when bias >= 0.
    Two classes: one weight per line."""
    n_feature, bias = None, -1.0
    weights = []
    with open(path) as f:
        in_w = False
        for line in f:
            if in_w:
                weights.append(float(line.split()[0]))
                continue
            tok = line.split()
            if not tok:
                continue
            if tok[0] == "nr_feature":
                n_feature = int(tok[1])
            elif tok[0] == "bias":
                bias = float(tok[1])
            elif tok[0] == "w":
                in_w = True
    if n_feature is None:
        raise SystemExit(f"{path}: not a LIBLINEAR model (no nr_feature)")
    w = weights[:n_feature]
    nz = [j + 1 for j, v in enumerate(w) if v != 0.0]
    rec = None
    if truth_path:
        truth = read_truth(truth_path)
        rec = sum(1 for j in nz if j in truth)
    return len(nz), rec


def liblinear_accuracy(model, data, out="/dev/null"):
    r = subprocess.run(["liblinear-predict", data, model, out], capture_output=True, text=True, check=True)
    m = re.search(r"Accuracy = ([0-9.]+)%", r.stdout)
    return float(m.group(1)) / 100.0


def config_paths(config):
    """Resolved data paths and FGM settings of a config file."""
    with open(config, "rb") as f:
        t = tomllib.load(f)
    base = os.path.dirname(os.path.abspath(config))

    def path(section, key):
        v = t.get(section, {}).get(key, "")
        return os.path.normpath(os.path.join(base, v)) if v else ""

    fgm = t.get("fgm", {})
    return {
        "train": path("data", "train"),
        "test": path("data", "test"),
        "features": t.get("data", {}).get("features", 0),
        "bias": bool(fgm.get("bias", False)),
        "loss": fgm.get("loss", "squared_hinge"),
        "B": fgm.get("B", 10),
        "C": fgm.get("C", 10.0),
        "budget": t.get("engine", {}).get("memory_budget", "1GB"),
    }


# --------------------------------------------------------------- commands


def cmd_timev(args):
    """timev FILE -> 'wall_seconds max_rss_bytes user_seconds system_seconds'"""
    wall, rss, user, system = parse_time_v(args[0])
    print(f"{wall} {rss} {user} {system}")


def cmd_kv(args):
    """kv KEY < text -> value of KEY=... in stdin ('' when absent)"""
    print(parse_kv(sys.stdin.read()).get(args[0], ""))


def cmd_runjson(args):
    """runjson RUN.JSON -> one line of 'key=value' fields used by the benches"""
    r = json.load(open(args[0]))
    test = r.get("test", {})
    truth = r.get("truth", {})
    out = {
        "selected": len(r.get("selected_features", [])),
        "iterations": len(r.get("iterations", [])),
        "train_seconds": r.get("train_seconds", ""),
        "ingest_seconds": r.get("data", {}).get("ingest_seconds", ""),
        "ingested_now": r.get("data", {}).get("ingested_now", ""),
        "peak_rss_bytes": r.get("peak_rss_bytes", ""),
        "budget_bytes": r.get("memory_budget_bytes", ""),
        "budget_peak_bytes": r.get("memory_budget_peak_bytes", ""),
        "test_accuracy": test.get("accuracy", ""),
        "test_auc": test.get("auc", ""),
        "recovered": truth.get("recovered", ""),
        "planted": truth.get("planted", ""),
        "stop_reason": r.get("stop_reason", ""),
        "bytes_streamed": r.get("total_bytes_streamed", ""),
        "score_seconds": sum(i.get("score_seconds", 0) for i in r.get("iterations", [])),
        "solve_seconds": sum(i.get("solve_seconds", 0) for i in r.get("iterations", [])),
    }
    print(" ".join(f"{k}={v}" for k, v in out.items()))


def cmd_config(args):
    """config CONFIG.toml KEY -> value (train, test, features, bias, loss, B, C, budget)"""
    print(config_paths(args[0])[args[1]])


def cmd_llmodel(args):
    """llmodel MODEL [TRUTH] -> 'nnz recovered'"""
    nnz, rec = liblinear_model(args[0], args[1] if len(args) > 1 else None)
    print(nnz, "" if rec is None else rec)


def ll_fit(train, solver, c, bias, model):
    cmd = ["liblinear-train", "-q", "-s", str(solver), "-c", repr(c)]
    if bias:
        cmd += ["-B", "1"]
    t0 = time.monotonic()
    subprocess.run(cmd + [train, model], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0


def cmd_llsearch(args):
    """llsearch TRAIN SOLVER TARGET BIAS(0/1) WORKDIR TRIALS_CSV LABEL
    Finds C whose nonzero-weight count is closest to TARGET: factor-10 bracketing
    from C=1e-3 (large C is where LIBLINEAR's l1 solvers are slow), then up to 8
    bisections in log C (nnz grows with C). Appends every trial to TRIALS_CSV;
    prints 'C nnz seconds model_path' of the best; the seconds are of a
    separate fit at that C (parse + train, as a user would run it)."""
    train, solver, target, bias, work, trials_csv, label = args
    solver, target, bias = int(solver), int(target), bool(int(bias))
    os.makedirs(work, exist_ok=True)
    seen = {}

    def fit(logc):
        logc = round(logc, 6)
        if logc in seen:
            return seen[logc][0]
        c = 10.0 ** logc
        model = os.path.join(work, f"s{solver}_c{logc:+.6f}.model")
        secs = ll_fit(train, solver, c, bias, model)
        nnz, _ = liblinear_model(model)
        seen[logc] = (nnz, secs, model, c)
        new = not os.path.exists(trials_csv)
        with open(trials_csv, "a", newline="") as f:
            w = csv.writer(f)
            if new:
                w.writerow(["label", "solver", "C", "nnz", "seconds"])
            w.writerow([label, solver, f"{c:.6g}", nnz, f"{secs:.3f}"])
        return nnz

    lo = hi = None
    x = -3.0
    n = fit(x)
    for _ in range(12):  # bracket: [lo, hi] with nnz(lo) <= target <= nnz(hi)
        if n == target:
            lo = hi = x
            break
        if n < target:
            lo = x
            if hi is not None:
                break
            x += 1
        else:
            hi = x
            if lo is not None:
                break
            x -= 1
        n = fit(x)
    if lo is not None and hi is not None and lo != hi:
        for _ in range(8):
            mid = 0.5 * (lo + hi)
            n = fit(mid)
            if n == target:
                break
            if n < target:
                lo = mid
            else:
                hi = mid
    best = min(seen.items(), key=lambda kv: (abs(kv[1][0] - target), kv[0]))
    logc, (nnz, secs, model, c) = best
    # Time the chosen fit again (the search ran them back to back).
    secs = ll_fit(train, solver, c, bias, model)
    print(f"{c:.6g} {nnz} {secs:.3f} {model}")


def cmd_llgrid(args):
    """llgrid TRAIN TEST TRUTH SOLVER OUT.csv WORKDIR C1 C2 ... -> one row per C:
    features (nonzero weights), planted recovered, test accuracy, fit seconds.
    Two fits run at a time (the machine has 2 cores; fit times are indicative)."""
    from concurrent.futures import ThreadPoolExecutor
    train, test, truth, solver, out, work = args[:6]
    cs = [float(c) for c in args[6:]]
    os.makedirs(work, exist_ok=True)

    def one(c):
        model = os.path.join(work, f"s{solver}_c{c:.6g}.model")
        secs = ll_fit(train, int(solver), c, False, model)
        nnz, rec = liblinear_model(model, truth)
        acc = liblinear_accuracy(model, test)
        return {"solver": solver, "C": f"{c:.6g}", "nnz": nnz, "recovered": rec,
                "test_accuracy": f"{acc:.6f}", "fit_seconds": f"{secs:.3f}"}

    with ThreadPoolExecutor(max_workers=2) as ex:
        rows = list(ex.map(one, cs))
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def cmd_machine(args):
    """machine OUT.json KEY=VALUE... -> machine facts plus the given fields"""
    info = {}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info["nproc"] = os.cpu_count()
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["mem_total_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    info["kernel"] = os.uname().release
    for kv in args[1:]:
        k, _, v = kv.partition("=")
        info[k] = v
    with open(args[0], "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")


def cmd_llacc(args):
    """llacc MODEL DATA -> accuracy (0..1)"""
    print(liblinear_accuracy(args[0], args[1]))


def cmd_scoring_csv(args):
    """scoring_csv OUT.csv JSONL... -> summary/breakdown lines as one CSV"""
    out, files = args[0], args[1:]
    rows = []
    for path in files:
        summ, brk, rss = {}, {}, {}
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            j = json.loads(line)
            if j["bench"] == "summary":
                summ[j["threads"]] = j
            elif j["bench"] == "breakdown":
                brk[j["threads"]] = j
            elif j["bench"] == "rss_during_pass":
                rss[j["threads"]] = j
            elif j["bench"] == "rss" and j["stage"] == "blocks_planned":
                rss["planned"] = j
        for t, s in sorted(summ.items()):
            b = brk.get(t, {})
            rows.append({
                "store": s["label"], "rows": s["rows"], "features": s["features"], "nnz": s["nnz"],
                "pass_bytes": s["pass_bytes"], "threads": t, "reps": s["reps"],
                "bandwidth_gb_s": s["bandwidth_gb_per_s"], "pass_seconds": s["pass_seconds"],
                "pass_gb_s": s["pass_gb_per_s"], "ratio": s["ratio"],
                "ratio_median_of_reps": s["ratio_median_of_reps"],
                "ratio_per_cpu_second": s["ratio_per_cpu_second"],
                "kernel_resident_gb_s": b.get("kernel_resident_gb_per_s", ""),
                "kernel_resident_ratio": b.get("kernel_resident_ratio", ""),
                "kernel_stream_gb_s": b.get("kernel_stream_gb_per_s", ""),
                "kernel_stream_ratio": b.get("kernel_stream_ratio", ""),
                "ns_per_nnz_per_thread": b.get("kernel_resident_ns_per_nnz", ""),
                "minor_faults_per_pass": s["minor_faults_per_pass"],
                "pages_per_pass": s["pages_per_pass"],
                "rss_file_after_plan_blocks": rss.get("planned", {}).get("rss_file", ""),
                "max_rss_first_pass": rss.get(t, {}).get("max_vm_rss", "") if t == min(summ) else "",
                "deterministic_top": s["deterministic_top"], "loadavg_end": s["loadavg_end"],
            })
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def cmd_callgrind(args):
    """callgrind CALLGRIND_OUT NNZ OUT.csv LABEL -> Ir total and column_dot self Ir per nonzero"""
    path, nnz, out, label = args[0], int(args[1]), args[2], args[3]
    total = None
    for line in open(path):
        if line.startswith("summary:") or line.startswith("totals:"):
            total = int(line.split()[1])
    ann = subprocess.run(["callgrind_annotate", path], capture_output=True, text=True).stdout
    # The per-block transform (column_dot inlined into it): its self cost.
    kernel = None
    for line in ann.splitlines():
        if "column_dot" in line or ("_Function_handler" in line and "LinearSpace" in line):
            kernel = int(line.split()[0].replace(",", ""))
            break
    new = not os.path.exists(out)
    with open(out, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["store", "nnz", "pass_instructions", "instructions_per_nnz",
                        "kernel_instructions", "kernel_instructions_per_nnz"])
        w.writerow([label, nnz, total, f"{total / nnz:.3f}", kernel,
                    f"{kernel / nnz:.3f}" if kernel else ""])
    print(f"callgrind: {total / nnz:.2f} instructions per nonzero for the whole pass")


def cmd_recovery(args):
    """recovery FGM.csv LL_GRID.csv OUT.csv -> LIBLINEAR at FGM's feature counts"""
    fgm = list(csv.DictReader(open(args[0])))
    grid = list(csv.DictReader(open(args[1])))
    pts = sorted(((int(g["nnz"]), int(g["recovered"]), float(g["C"]), float(g["test_accuracy"])) for g in grid))
    rows = []
    for r in fgm:
        k = int(r["selected"])
        nearest = min(pts, key=lambda p: (abs(p[0] - k), p[0]))
        below = [p for p in pts if p[0] <= k]
        above = [p for p in pts if p[0] >= k]
        interp = ""
        if below and above:
            a, b = below[-1], above[0]
            interp = a[1] if b[0] == a[0] else a[1] + (b[1] - a[1]) * (k - a[0]) / (b[0] - a[0])
            interp = f"{interp:.1f}"
        rows.append({
            "T": r["T"], "features": k, "fgm_recovered": r["recovered"],
            "fgm_test_accuracy": r["test_accuracy"], "fgm_train_seconds": r["train_seconds"],
            "liblinear_recovered_interpolated": interp,
            "liblinear_nearest_C": f"{nearest[2]:.6g}", "liblinear_nearest_features": nearest[0],
            "liblinear_nearest_recovered": nearest[1], "liblinear_nearest_test_accuracy": nearest[3],
        })
    with open(args[2], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def med(values):
    v = [float(x) for x in values if x not in ("", None)]
    return statistics.median(v) if v else float("nan")


def fmt(x, digits=3):
    if isinstance(x, str):
        return x
    if x != x:  # nan
        return "–"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:.0f}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def cmd_summary(args):
    """summary RESULTS_DIR -> RESULTS_DIR/summary.md (markdown tables of every CSV)"""
    d = args[0]
    parts = []
    m = json.load(open(os.path.join(d, "machine.json")))
    parts.append("## Machine\n\n" + table(["key", "value"], [[k, v] for k, v in m.items()]))

    sc = list(csv.DictReader(open(os.path.join(d, "scoring.csv"))))
    rows = []
    for r in sc:
        rows.append([r["store"], r["threads"], r["reps"], fmt(float(r["bandwidth_gb_s"])),
                     fmt(float(r["pass_gb_s"])), f"**{float(r['ratio_median_of_reps']):.2f}**",
                     f"{float(r['ratio']):.2f}", f"{float(r['ratio_per_cpu_second']):.2f}",
                     fmt(float(r["kernel_resident_gb_s"])) if r["kernel_resident_gb_s"] else "",
                     f"{float(r['kernel_resident_ratio']):.2f}" if r["kernel_resident_ratio"] else "",
                     fmt(float(r["kernel_stream_gb_s"])) if r["kernel_stream_gb_s"] else "",
                     r["minor_faults_per_pass"], r["loadavg_end"]])
    parts.append("## Scoring pass vs memory read bandwidth (same process, medians)\n\n" + table(
        ["store", "threads", "reps", "read BW GB/s", "pass GB/s", "pass/BW (median of per-rep ratios)",
         "ratio of the medians",
         "ratio per CPU-second", "kernel only (resident) GB/s", "kernel/BW", "kernel+madvise GB/s",
         "minor faults/pass", "load avg"], rows))
    cg = os.path.join(d, "callgrind.csv")
    if os.path.exists(cg):
        rows = [[r["store"], r["nnz"], r["pass_instructions"], r["instructions_per_nnz"],
                 r["kernel_instructions_per_nnz"]] for r in csv.DictReader(open(cg))]
        parts.append("## Instructions per nonzero (callgrind, 1 thread, one pass)\n\n" + table(
            ["store", "nnz", "instructions (pass)", "per nnz (pass)", "per nnz (block transform: column_dot loop)"], rows))

    ing = list(csv.DictReader(open(os.path.join(d, "ingest.csv"))))
    groups = {}
    for r in ing:
        groups.setdefault((r["dataset"], r["threads"]), []).append(r)
    rows = []
    for (ds, t), rs in groups.items():
        cpu = med(float(r["user_seconds"]) + float(r["system_seconds"]) for r in rs)
        rows.append([ds, t, len(rs), fmt(float(rs[0]["text_bytes"]) / 1e6), rs[0]["budget"],
                     f"**{fmt(med(r['text_mb_per_s'] for r in rs))}**", fmt(med(r["seconds"] for r in rs)),
                     f"{fmt(med(r['user_seconds'] for r in rs))} + {fmt(med(r['system_seconds'] for r in rs))}",
                     fmt(float(rs[0]["text_bytes"]) / 1e6 / cpu) if cpu > 0 else "",
                     fmt(med(r["peak_rss_bytes"] for r in rs) / 2**20), rs[0]["shards"], rs[0]["spilled_runs"]])
    parts.append("## Ingest (LIBSVM text -> store, warm page cache, medians)\n\n" + table(
        ["input", "threads", "runs", "text MB", "budget", "MB/s (text, wall)", "seconds",
         "CPU s (user + sys)", "MB per CPU-second", "peak RSS MiB", "shards", "spilled runs"], rows))

    mem = list(csv.DictReader(open(os.path.join(d, "memory.csv"))))
    groups = {}
    for r in ing:
        if r["dataset"] == "big":
            groups.setdefault(f"fgm ingest (threads {r['threads']})", []).append(
                {"store_bytes": r["store_bytes"], "budget_bytes": r["budget_bytes"],
                 "peak_rss_bytes": r["peak_rss_bytes"], "seconds": r["wall_seconds"]})
    for r in mem:
        groups.setdefault(f"fgm train, {r['step']} (threads {r['threads']})", []).append(
            {"store_bytes": r["store_bytes"], "budget_bytes": r["budget_bytes"],
             "peak_rss_bytes": r["peak_rss_bytes"], "seconds": r["wall_seconds"],
             "shards": r.get("shards", "")})
    rows = []
    for step, rs in groups.items():
        limit = float(rs[0]["budget_bytes"]) + 64 * 2**20
        peak = max(float(r["peak_rss_bytes"]) for r in rs)
        rows.append([step, len(rs), fmt(float(rs[0]["store_bytes"]) / 2**20), fmt(float(rs[0]["budget_bytes"]) / 2**20),
                     rs[0].get("shards", ""),
                     f"{float(rs[0]['store_bytes']) / float(rs[0]['budget_bytes']):.1f}×",
                     fmt(med(r["peak_rss_bytes"] for r in rs) / 2**20), fmt(peak / 2**20), fmt(limit / 2**20),
                     "yes" if peak <= limit else "**no**", fmt(med(r["seconds"] for r in rs))])
    parts.append("## Peak RSS on a store much larger than the budget\n\n" + table(
        ["step", "runs", "store MiB", "budget MiB", "store shards", "store/budget", "peak RSS MiB (median)",
         "peak RSS MiB (max)", "limit MiB (budget+64)", "within", "wall s"], rows))

    e2e = list(csv.DictReader(open(os.path.join(d, "e2e.csv"))))
    rows = []
    for r in e2e:
        rows.append([r["dataset"], r["eval_on"], r["fgm_features"], fmt(float(r["fgm_cold_wall_s"])),
                     fmt(float(r["fgm_warm_wall_s"])), fmt(float(r["fgm_train_s"])),
                     f"{float(r['fgm_accuracy']):.4f}", f"{float(r['fgm_auc']):.4f}" if r["fgm_auc"] else "",
                     fmt(float(r["fgm_peak_rss_bytes"]) / 2**20),
                     r["ll5_features"], f"{float(r['ll5_C']):.3g}", fmt(float(r["ll5_fit_s"])),
                     f"{float(r['ll5_accuracy']):.4f}", r["ll6_features"], f"{float(r['ll6_C']):.3g}",
                     fmt(float(r["ll6_fit_s"])), f"{float(r['ll6_accuracy']):.4f}"])
    parts.append("## End to end on ../shared/data: FGM vs LIBLINEAR at the same feature count\n\n" + table(
        ["dataset", "accuracy on", "FGM features", "FGM cold wall s", "FGM warm wall s (median)",
         "FGM train s", "FGM acc", "FGM AUC", "FGM peak RSS MiB", "l1-SVM (-s 5) features", "C",
         "fit s", "acc", "l1-LR (-s 6) features", "C", "fit s", "acc"], rows))

    rec = list(csv.DictReader(open(os.path.join(d, "recovery.csv"))))
    rows = []
    for r in rec:
        rows.append([r["T"], r["features"], r["fgm_recovered"], r["liblinear_recovered_interpolated"],
                     f"{r['liblinear_nearest_recovered']} of {r['liblinear_nearest_features']} (C={float(r['liblinear_nearest_C']):.3g})",
                     f"{float(r['fgm_test_accuracy']):.4f}", f"{float(r['liblinear_nearest_test_accuracy']):.4f}"])
    parts.append("## Planted recovery (Section 8.2 data, 300 planted of 4096)\n\n" + table(
        ["T", "features (B·T)", "FGM recovered", "l1-SVM recovered (interp.)", "l1-SVM nearest grid point",
         "FGM test acc", "l1-SVM test acc (nearest)"], rows))
    with open(os.path.join(d, "summary.md"), "w") as f:
        f.write("# Benchmark results (generated by bench/run_all.sh)\n\n" + "\n\n".join(parts) + "\n")
    print(os.path.join(d, "summary.md"))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    fn = globals().get("cmd_" + sys.argv[1].replace("-", "_"))
    if fn is None:
        raise SystemExit(f"unknown command {sys.argv[1]}")
    fn(sys.argv[2:])
