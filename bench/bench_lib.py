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


def read_csv_rows(path):
    """Rows of a results CSV; none when a step did not run (BENCH_STEPS)."""
    return list(csv.DictReader(open(path))) if os.path.exists(path) else []


ISSUE9_FILES = ("tall.jsonl", "hashed.csv", "madelon_poly2.jsonl", "apg_tall.csv", "weak_poly2.jsonl",
                "poly2_scale.jsonl")


def cmd_summary(args):
    """summary RESULTS_DIR -> RESULTS_DIR/summary.md (markdown tables of every CSV)"""
    d = args[0]
    parts = []
    m = json.load(open(os.path.join(d, "machine.json")))
    parts.append("## Machine\n\n" + table(["key", "value"], [[k, v] for k, v in m.items()]))

    sc = read_csv_rows(os.path.join(d, "scoring.csv"))
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

    ing = read_csv_rows(os.path.join(d, "ingest.csv"))
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

    mem = read_csv_rows(os.path.join(d, "memory.csv"))
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

    e2e = read_csv_rows(os.path.join(d, "e2e.csv"))
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

    rec = read_csv_rows(os.path.join(d, "recovery.csv"))
    rows = []
    for r in rec:
        rows.append([r["T"], r["features"], r["fgm_recovered"], r["liblinear_recovered_interpolated"],
                     f"{r['liblinear_nearest_recovered']} of {r['liblinear_nearest_features']} (C={float(r['liblinear_nearest_C']):.3g})",
                     f"{float(r['fgm_test_accuracy']):.4f}", f"{float(r['liblinear_nearest_test_accuracy']):.4f}"])
    parts.append("## Planted recovery (Section 8.2 data, 300 planted of 4096)\n\n" + table(
        ["T", "features (B·T)", "FGM recovered", "l1-SVM recovered (interp.)", "l1-SVM nearest grid point",
         "FGM test acc", "l1-SVM test acc (nearest)"], rows))
    # The issue 9 tables read raw lines of several programs: a format they do not
    # expect costs that table (with the error in its place), never the summary.
    for section in (issue9_section, existing_before_after):
        if section is issue9_section and not any(os.path.exists(os.path.join(d, f)) for f in ISSUE9_FILES):
            continue
        try:
            text = section(d)
        except Exception as e:  # noqa: BLE001
            import traceback
            text = (f"## {section.__name__}: failed\n\n```\n{traceback.format_exc()}```")
            print(f"summary: {section.__name__} failed: {e!r}", file=sys.stderr)
        if text:
            parts.append(text)
    with open(os.path.join(d, "summary.md"), "w") as f:
        f.write("# Benchmark results (generated by bench/run_all.sh)\n\n" + "\n\n".join(parts) + "\n")
    print(os.path.join(d, "summary.md"))


# ------------------------------------------------------------------ issue 9
def cmd_apgjson(args):
    """apgjson RUN.JSON -> 'score_s,solve_s,apg_iterations,apg_stop,s_per_iteration,selected'
    for the first outer iteration (apg_tall.csv columns)."""
    r = json.load(open(args[0]))
    it = r["iterations"][0]
    n = it.get("apg_iterations", 0)
    per = it["solve_seconds"] / n if n else float("nan")
    print(f"{it['score_seconds']:.6f},{it['solve_seconds']:.6f},{n},{it.get('apg_stop', '')},{per:.6f},"
          f"{len(r.get('selected_features', []))}")


def cmd_poly2json(args):
    """poly2json RUN.JSON LABEL WALL_S PEAK_RSS_BYTES -> one JSON line: a poly-2 run's
    pair updates per second of scoring, seconds, and planted terms found."""
    r = json.load(open(args[0]))
    its = r.get("iterations", [])
    truth, test = r.get("truth", {}), r.get("test", {})
    score = sum(i.get("score_seconds", 0) for i in its)
    pairs = sum(i.get("pair_updates", 0) for i in its)
    print(json.dumps({
        "bench": args[1], "wall_seconds": float(args[2]), "peak_rss_bytes": int(args[3]),
        "train_seconds": r.get("train_seconds"), "score_seconds": score,
        "solve_seconds": sum(i.get("solve_seconds", 0) for i in its),
        "apg_iterations": sum(i.get("apg_iterations", 0) for i in its),
        "pair_updates": pairs, "pair_updates_per_second": pairs / score if score else 0,
        "candidates_scored": sum(i.get("candidates_scored", 0) for i in its),
        "iterations": len(its), "selected": len(r.get("selected_features", [])),
        "recovered": truth.get("recovered"), "planted": truth.get("planted"),
        "recovered_cross": truth.get("recovered_cross"), "planted_cross": truth.get("planted_cross"),
        "test_accuracy": test.get("accuracy"), "test_auc": test.get("auc"),
        "memory_budget_bytes": r.get("memory_budget_bytes"),
        "per_iteration": [{k: i.get(k) for k in ("score_seconds", "solve_seconds", "pair_updates",
                                                  "candidates_scored", "apg_iterations")} for i in its]}))


def jsonl(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def wall_seconds(text):
    v = 0.0
    for p in str(text).split(":"):
        v = v * 60 + float(p)
    return v


def issue9_figures(d):
    """The figures of issue 9 from the raw results in d: a list of dicts
    (key, shape, figure, value, unit, target, command); value '' when absent."""
    rows = []

    def add(key, shape, figure, value, unit, target, command, note=""):
        rows.append({"key": key, "shape": shape, "figure": figure,
                     "value": "" if value is None else value, "unit": unit, "target": target,
                     "command": command, "note": note[:400]})

    def failed(lines):
        f = [j for j in lines if j.get("bench") == "step_failed" or j.get("measure") == "step_failed"]
        return ("failed: " + f[0].get("error", "")[:160]) if f else ""

    def step_tall():
        # tall
        t = jsonl(os.path.join(d, "tall.jsonl"))
        s = next((j for j in t if j.get("bench") == "tall_summary"), None)
        shape = (f"tall store {s['rows']:,} x {s['features']:,}, {s['nnz']:,} nnz, format {s['format']}"
                 if s else "tall store")
        cmd = "fgm_bench_tall --store <tall> --threads 2 --naive-threads 1 (run_all.sh step tall)"
        note = failed(t)
        resident = "resident" if s and s.get("resident") else "streamed"
        add("tall_pass_s", shape, f"linear scoring pass as fgm train runs it ({resident}), 2 threads (median s)",
            s and s["pass_seconds"], "s", "", cmd, note)
        add("tall_pass_nnz_s", shape, "scoring pass nonzeros/s", s and s["pass_nnz_per_s"], "nnz/s", "", cmd, note)
        add("tall_naive_s", shape, "naive CSC gather, 1 thread (median s)", s and s["naive_seconds"], "s", "", cmd, note)
        add("tall_naive_nnz_s", shape, "naive CSC gather nonzeros/s", s and s["naive_nnz_per_s"], "nnz/s", "", cmd, note)
        add("tall_speedup", shape, "pass speed / naive speed (median of per-rep ratios)", s and s["speedup_over_naive"],
            "x", ">= 3", cmd, note if note else ("" if not s or s["top_matches_naive"] else "top-B differs from naive"))
        if s and "streamed_pass_seconds" in s:
            add("tall_speedup_cpu", shape, "naive CPU s / (pass CPU s / threads) (median)", s["speedup_per_cpu"],
                "x", "", cmd, note)
            add("tall_streamed_s", shape, "the pass streamed in --block-bytes units, not resident (median s)",
                s["streamed_pass_seconds"], "s", "", cmd, note)
            add("tall_streamed_speedup", shape, "streamed pass speed / naive speed (median of per-rep ratios)",
                s["streamed_speedup_over_naive"], "x", "", cmd, note)
            add("tall_first_pass_s", shape, "first pass (reads, keeps resident blocks and row orders)",
                s["first_pass_seconds"], "s", "", cmd, note)
        add("tall_bw", shape, "memory read bandwidth, 2 threads", s and s["bandwidth_gb_per_s"], "GB/s", "", cmd, note)
        add("tall_pass_bw", shape, "pass shard bytes/s / read bandwidth", s and s["pass_over_bandwidth"], "x", "", cmd, note)

    def step_hashed():
        # hashed
        hc = os.path.join(d, "hashed.csv")
        h = {r["input"]: r for r in csv.DictReader(open(hc))} if os.path.exists(hc) else {}
        cmd = "fgm ingest <file> --max-store-bytes 1GB|4GB --threads 2 (step hashed)"

        def ingest_fig(name):
            r = h.get(name)
            if not r:
                return None, None, ""
            if r["exit"] != "0":
                return None, None, f"exit {r['exit']}: {r['error'][:200]}"
            return float(r["wall_seconds"]), int(r["store_bytes"]), ""
        w, b, note = ingest_fig("two")
        add("two_ingest_s", "2 rows, feature index 4,294,967,297", "ingest wall s", w, "s", "< 1", cmd, note)
        add("two_store_bytes", "2 rows, feature index 4,294,967,297", "store bytes", b, "bytes", "< 1e6", cmd, note)
        hw, hb, hnote = ingest_fig("hashed")
        dw, db, dnote = ingest_fig("dense")
        hshape = (f"{int(h['dense']['rows']):,} rows, {int(h['dense']['nnz']):,} nnz, "
                  f"{int(h['dense']['features']):,} distinct ids" if h.get("dense") and h["dense"]["rows"] else "hashed ids")
        add("hashed_store_bytes", hshape + ", ids in [0, 2^40)", "store bytes (hashed ids)", hb, "bytes", "", cmd, hnote)
        add("dense_store_bytes", hshape + ", dense ids", "store bytes (dense ids)", db, "bytes", "", cmd, dnote)
        add("hashed_ratio", hshape, "store bytes hashed / dense", hb / db if hb and db else None, "x", "<= 1.5", cmd,
            hnote or dnote)
        add("hashed_ingest_s", hshape + ", ids in [0, 2^40)", "ingest wall s (hashed ids)", hw, "s", "", cmd, hnote)
        add("dense_ingest_s", hshape + ", dense ids", "ingest wall s (dense ids)", dw, "s", "", cmd, dnote)
        hp = jsonl(os.path.join(d, "hashed_pass.jsonl"))
        for name in ("hashed", "dense"):
            s = next((j for j in hp if j.get("bench") == "tall_summary" and j.get("label") == name), None)
            add(f"{name}_pass_s", hshape + (", ids in [0, 2^40)" if name == "hashed" else ", dense ids"),
                f"linear scoring pass on the {name} store, 2 threads (median s)", s and s["pass_seconds"], "s", "",
                f"fgm_bench_tall --store <{name} store> --bandwidth-bytes 0 (step hashed)",
                "" if s else (hnote if name == "hashed" else dnote) or failed(hp))

    def step_madelon():
        # madelon poly-2
        m = jsonl(os.path.join(d, "madelon_poly2.jsonl"))
        summ = next((j for j in m if j.get("measure") == "poly2_summary"), None)
        passes = [j for j in m if j.get("measure") == "poly2_pass"]
        peak = next((j for j in m if j.get("measure") == "dgemm_peak"), None)
        # The GEMM of the same active block: fgm_bench_poly2's "poly2_dense_vs_gemm"
        # lines (one per SIMD target; the summary's target is the one fgm uses),
        # else any other line naming a block GEMM with a seconds field.
        vs = [j for j in m if j.get("measure") == "poly2_dense_vs_gemm"]
        own = next((j for j in vs if summ and j.get("simd") == summ.get("simd")), vs[-1] if vs else None)
        gemm_s = own and own.get("eigen_native_gemm_seconds")
        if gemm_s is None:
            other = [j for j in m if "gemm" in str(j.get("measure", "")) and j.get("measure") != "dgemm_peak"
                     and any(k in j for k in ("seconds", "median_seconds", "gemm_seconds"))]
            if other:
                g = other[-1]
                gemm_s = g.get("median_seconds", g.get("gemm_seconds", g.get("seconds")))
        shape = "madelon 2,000 x 500, features.kind=poly2"
        cmd = "fgm_bench_poly2 --store <madelon> --threads 2 --alpha random (step madelon)"
        note = failed(m)
        pass_s = (own and own.get("pass_seconds")) or (summ and summ["median_pass_seconds"])
        simd = f", SIMD target {summ['simd']}" if summ and summ.get("simd") else ""
        add("madelon_pass_s", shape, f"poly-2 scoring pass, 2 threads (median s{simd})", pass_s, "s", "", cmd, note)
        active = passes[-1].get("active_features") if passes else None
        add("madelon_active", shape, "active features of the pass", active, "", "", cmd, note)
        add("madelon_gemm_s", shape, "one Eigen GEMM (-march=native) of the same active block, 2 threads (s)", gemm_s,
            "s", "", cmd, note or ("" if gemm_s else "fgm_bench_poly2 reports no block GEMM in this build"))
        if own and own.get("fgm_gemm_seconds") is not None:
            add("madelon_fgm_gemm_s", shape, "fgm's dispatched GEMM kernel of the same block, 2 threads (s)",
                own["fgm_gemm_seconds"], "s", "", cmd, note)
        est = None
        if peak and active and passes:
            n = 2000
            est = 2.0 * n * active * active / (peak["gflops_per_core"] * 1e9 * 2)
        add("madelon_gemm_est_s", shape, "GEMM-equivalent s: 2·n·k² flops at the 1024² dgemm peak of 2 cores", est, "s",
            "", cmd, "estimate, not a measurement")
        ref = gemm_s or est
        add("madelon_ratio", shape, "poly-2 pass / GEMM" + ("" if gemm_s else " (vs the estimate)"),
            pass_s / ref if pass_s and ref else None, "x", "<= 2", cmd, note)
        if len(vs) > 1:
            add("madelon_ratio_targets", shape, "pass / Eigen GEMM per SIMD target",
                ", ".join(f"{j.get('simd')} {j['pass_seconds'] / j['eigen_native_gemm_seconds']:.2f}×" for j in vs
                          if j.get("eigen_native_gemm_seconds")), "", "", cmd, note)

    def step_apg():
        # APG on the tall store
        ac = os.path.join(d, "apg_tall.csv")
        a = list(csv.DictReader(open(ac))) if os.path.exists(ac) else []
        ok = [r for r in a if r["exit"] == "0" and r["seconds_per_apg_iteration"] not in ("", "nan")]
        shape = "tall store, fgm train B=40, T=1, 2 threads"
        cmd = ("fgm train data.train=<tall> fgm.B=40 fgm.max_iterations=1 apg.eps_inner=0.001 apg.max_iterations=100 "
               "engine.threads=2 (step apg; run.json)")
        note = "" if ok or not a else f"exit {a[0]['exit']}: {a[0]['error'][:200]}"
        add("apg_s_per_it", shape, "APG seconds per iteration (solve_seconds / apg_iterations, median)",
            med(r["seconds_per_apg_iteration"] for r in ok) if ok else None, "s", "<= 0.030", cmd, note)
        add("apg_iterations", shape, "APG iterations", ok[0]["apg_iterations"] if ok else None, "", "", cmd, note)
        add("apg_wall", shape, "whole fgm train wall s (median)", med(r["wall_seconds"] for r in ok) if ok else None,
            "s", "", cmd, note)
        add("apg_rss", shape, "peak RSS MiB (max)", max(float(r["peak_rss_bytes"]) for r in ok) / 2**20 if ok else None,
            "MiB", "", cmd, note)

    def step_weak():
        # weak-signal poly-2
        wk = jsonl(os.path.join(d, "weak_poly2.jsonl"))
        tr = next((j for j in wk if j.get("bench") == "weak_train"), None)
        ws = next((j for j in wk if j.get("measure") == "poly2_summary"), None)
        wp = [j for j in wk if j.get("measure") == "poly2_pass"]
        shape = (f"weak-signal sparse set {ws['rows']:,} x {ws['features']:,}, poly-2" if ws else "weak-signal sparse set, poly-2")
        note = failed(wk)
        cmd = "fgm train features.kind=poly2 fgm.B=10 fgm.max_iterations=5 (step weak; run.json pair_updates)"
        add("weak_pairs_s", shape, "pair updates / s of scoring wall time (fgm train: Σ pair_updates / Σ score_seconds)",
            tr and tr["pair_updates_per_second"], "pairs/s", "", cmd, note)
        add("weak_pair_updates", shape, "pair updates, whole run", tr and tr["pair_updates"], "", "", cmd, note)
        add("weak_wall", shape, "whole fgm train wall s", tr and tr["wall_seconds"], "s", "", cmd, note)
        add("weak_apg_share", shape, "APG share of train seconds",
            tr and tr["train_seconds"] and tr["solve_seconds"] / tr["train_seconds"], "", "", cmd, note)
        add("weak_found", shape, "planted terms found: linear, cross (truth.txt)",
            tr and f"{tr['recovered']}/{tr['planted']}, {tr['recovered_cross']}/{tr['planted_cross']}", "", "", cmd, note)
        add("weak_test_acc", shape, "test accuracy", tr and tr["test_accuracy"], "", "", cmd, note)
        add("weak_candidate_pairs", shape, "candidate pairs left by pruning (fgm_bench_poly2, alpha = C·1)",
            wp[-1].get("candidate_pairs") if wp else None, "", "", "fgm_bench_poly2 --store <weak> --alpha first", note)
        add("weak_bench_pass_s", shape, "one poly-2 pass (fgm_bench_poly2, median s)",
            ws and ws["median_pass_seconds"], "s", "", "fgm_bench_poly2 --store <weak> --alpha first", note)
        add("weak_bench_pairs_core", shape, "pair updates / s / core (fgm_bench_poly2 sparse path)",
            ws and ws["pair_updates_per_second_per_core"], "pairs/s", "", "fgm_bench_poly2 --store <weak> --alpha first", note)

    def step_poly2():
        # poly-2 scale run
        p = jsonl(os.path.join(d, "poly2_scale.jsonl"))
        pt = next((j for j in p if j.get("measure") == "poly2_train"), None)
        pp = next((j for j in p if j.get("measure") == "poly2_train_passes"), None)
        ps = next((j for j in p if j.get("measure") == "poly2_summary"), None)
        shape = (f"poly-2 scale run {ps['rows']:,} x {ps['features']:,}, T=10 B=10, budget 1GB" if ps else
                 "poly-2 scale run, T=10 B=10, budget 1GB")
        cmd = "bash bench/run_poly2_scale.sh (step poly2)"
        note = failed(p) or (f"exit {pt['exit']}: {pt.get('error', '')}" if pt and pt.get("exit") else "")
        wall = pt and pt.get("wall") and wall_seconds(pt["wall"])
        add("poly2_wall", shape, "whole fgm train wall s" + (" (until it failed)" if note else ""), wall, "s", "<= 30",
            cmd, note)
        total = pp and (pp.get("train_seconds") or wall)
        add("poly2_apg_share", shape, "APG share (Σ solve_seconds / train_seconds)",
            pp and total and sum(pp["solve_seconds"]) / total, "", "", cmd, note)
        add("poly2_score_s", shape, "Σ score_seconds", pp and sum(pp["score_seconds"]), "s", "", cmd, note)
        add("poly2_solve_s", shape, "Σ solve_seconds", pp and sum(pp["solve_seconds"]), "s", "", cmd, note)
        rss = pt and pt["peak_rss_kb"] * 1024 / 2**20
        add("poly2_rss", shape, "peak RSS MiB (limit: budget 1024 + 64)", rss, "MiB", "<= 1088", cmd, note)
        if pp and pp.get("pair_updates") and all(x is not None for x in pp["pair_updates"]):
            add("poly2_pairs_s", shape, "pair updates / s of scoring wall time (Σ pair_updates / Σ score_seconds)", sum(pp["pair_updates"]) / sum(pp["score_seconds"]),
                "pairs/s", "", cmd, note)
        tru = pp and pp.get("truth") or {}
        add("poly2_found", shape, "planted terms found: linear, cross (truth.txt)",
            f"{tru.get('recovered')}/{tru.get('planted')}, {tru.get('recovered_cross')}/{tru.get('planted_cross')}"
            if tru else None, "", "", cmd, note)

    # One step's lines in a shape its parser does not expect cost that step's
    # rows (a "parse failed" row in their place), not the table.
    for name, step in [("tall", step_tall), ("hashed", step_hashed), ("madelon", step_madelon),
                       ("apg", step_apg), ("weak", step_weak), ("poly2", step_poly2)]:
        try:
            step()
        except Exception as e:  # noqa: BLE001
            add(f"{name}_parse", name, "results of this step", None, "", "", f"bench_lib.py issue9_figures ({name})",
                f"parse failed: {e!r}")
    return rows


def met(value, target):
    if value in ("", None) or not target:
        return ""
    try:
        v = float(value)
    except ValueError:
        return ""
    op, num = target.split()
    num = float(num)
    ok = {"<": v < num, "<=": v <= num, ">=": v >= num, ">": v > num}[op]
    return "yes" if ok else "**no**"


def fmt9(value, unit):
    if value in ("", None):
        return "–"
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return value
    if unit == "bytes":
        return f"{value:,.0f}"
    if unit in ("nnz/s", "pairs/s"):
        return f"{value:.3g}"
    return fmt(value)


def cmd_issue9(args):
    """issue9 RESULTS_DIR -> RESULTS_DIR/issue9.csv (the issue 9 figures of the raw results there)"""
    rows = issue9_figures(args[0])
    with open(os.path.join(args[0], "issue9.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def short(note):
    """A table cell's note: the failure's gist (full text in issue9.csv)."""
    note = re.sub(r"fgm: [\w ]+: \S+: ", "", note.replace("|", "/"))
    return note if len(note) <= 110 else note[:107] + "…"


def issue9_section(d):
    cmd_issue9([d])
    rows = read_csv_rows(os.path.join(d, "issue9.csv"))
    before_path = os.path.join(d, "before", "issue9.csv")
    before = {r["key"]: r for r in csv.DictReader(open(before_path))} if os.path.exists(before_path) else {}
    out, shape, last_note, last_bnote = [], None, None, None
    for r in rows:
        b = before.get(r["key"], {})
        bnote = b.get("note", "")
        bval = (fmt9(b["value"], r["unit"]) if b.get("value") else "–" if b else "") + (
            (" (as above)" if bnote == last_bnote else f" ({short(bnote)})") if bnote else "")
        last_bnote = bnote
        val = fmt9(r["value"], r["unit"]) + ((" (as above)" if r["note"] == last_note else f" ({short(r['note'])})")
                                             if r["note"] else "")
        last_note = r["note"]
        failed_now = r["target"] and r["value"] in ("", None) and r["note"].startswith(("exit", "failed"))
        out.append([r["shape"] if r["shape"] != shape else "″", r["figure"], bval, val, r["target"],
                    "**no** (failed)" if failed_now else met(r["value"], r["target"])])
        shape = r["shape"]
    title = "## Issue 9: tall, hashed, dense and weak-signal shapes"
    src = f" (before: `{before_path}`)" if before else ""
    return (f"{title}\n\nOne `make bench` run; commands per figure in `issue9.csv`{src}.\n\n" +
            table(["shape", "figure", "before", "this run", "target", "met"], out))


def existing_before_after(d):
    """Key figures of the issue 2/3 steps: bench/results/before/*.csv vs this run."""
    b = os.path.join(d, "before")
    if not os.path.isdir(b):
        return None
    rows = []

    def load(base, name):
        p = os.path.join(base, name)
        return list(csv.DictReader(open(p))) if os.path.exists(p) else []

    def ratio(x, y):
        try:
            return f"{float(y) / float(x):.2f}×"
        except (ValueError, ZeroDivisionError, TypeError):
            return ""
    for old, new in [(load(b, "scoring.csv"), load(d, "scoring.csv"))]:
        nk = {(r["store"], r["threads"]): r for r in new}
        for r in old:
            n = nk.get((r["store"], r["threads"]), {})
            rows.append([f"scoring pass {r['store']}, {r['threads']} thr", "pass GB/s", fmt(float(r["pass_gb_s"])),
                         fmt(float(n["pass_gb_s"])) if n else "–", ratio(r["pass_gb_s"], n.get("pass_gb_s"))])
            rows.append(["″", "pass / read BW (median of reps)", f"{float(r['ratio_median_of_reps']):.2f}",
                         f"{float(n['ratio_median_of_reps']):.2f}" if n else "–",
                         ratio(r["ratio_median_of_reps"], n.get("ratio_median_of_reps"))])
    old, new = load(b, "callgrind.csv"), load(d, "callgrind.csv")
    if old:
        n = new[0] if new else {}
        rows.append(["callgrind, small store, 1 thread", "instructions per nnz (pass)", old[0]["instructions_per_nnz"],
                     n.get("instructions_per_nnz", "–"), ratio(old[0]["instructions_per_nnz"], n.get("instructions_per_nnz"))])
    for name, key, label in [("ingest.csv", ("dataset", "threads"), "ingest"),
                             ("memory.csv", ("step", "threads"), "fgm train (memory)")]:
        old, new = load(b, name), load(d, name)
        groups_o, groups_n = {}, {}
        for r in old:
            groups_o.setdefault(tuple(r[k] for k in key), []).append(r)
        for r in new:
            groups_n.setdefault(tuple(r[k] for k in key), []).append(r)
        for k, rs in groups_o.items():
            ns = groups_n.get(k, [])
            if name == "ingest.csv":
                o, n = med(r["text_mb_per_s"] for r in rs), med(r["text_mb_per_s"] for r in ns) if ns else None
                rows.append([f"{label} {k[0]}, {k[1]} thr", "MB/s of text (median)", fmt(o), fmt(n) if n else "–",
                             ratio(o, n)])
            o, n = med(r["peak_rss_bytes"] for r in rs) / 2**20, med(r["peak_rss_bytes"] for r in ns) / 2**20 if ns else None
            w_o, w_n = med(r["wall_seconds"] for r in rs), med(r["wall_seconds"] for r in ns) if ns else None
            rows.append(["″" if name == "ingest.csv" else f"{label} {k[0]}, {k[1]} thr", "wall s (median)",
                         fmt(w_o), fmt(w_n) if w_n else "–",
                         ratio(w_o, w_n)])
            rows.append(["″", "peak RSS MiB (median)", fmt(o), fmt(n) if n else "–", ratio(o, n)])
    old, new = load(b, "e2e.csv"), {r["dataset"]: r for r in load(d, "e2e.csv")}
    for r in old:
        n = new.get(r["dataset"], {})
        rows.append([f"e2e {r['dataset']}", "warm wall s (median) / train s",
                     f"{fmt(float(r['fgm_warm_wall_s']))} / {fmt(float(r['fgm_train_s']))}",
                     f"{fmt(float(n['fgm_warm_wall_s']))} / {fmt(float(n['fgm_train_s']))}" if n else "–",
                     ratio(r["fgm_warm_wall_s"], n.get("fgm_warm_wall_s"))])
        rows.append(["″", "features, test/train accuracy", f"{r['fgm_features']}, {float(r['fgm_accuracy']):.4f}",
                     f"{n['fgm_features']}, {float(n['fgm_accuracy']):.4f}" if n else "–", ""])
    old, new = load(b, "recovery_fgm.csv"), {r["T"]: r for r in load(d, "recovery_fgm.csv")}
    for r in old:
        if r["T"] in ("1", "5", "10"):
            n = new.get(r["T"], {})
            rows.append([f"recovery s82, B=30 T={r['T']}", "recovered / train s",
                         f"{r['recovered']} / {fmt(float(r['train_seconds']))}",
                         f"{n['recovered']} / {fmt(float(n['train_seconds']))}" if n else "–",
                         ratio(r["train_seconds"], n.get("train_seconds"))])
    return ("## Before/after: the issue 2 and 3 figures\n\n"
            f"Before: `{b}` (see its `machine.json`); after: this run. after/before > 1 is faster only for rates "
            "(GB/s, MB/s); for seconds and MiB smaller is better.\n\n" +
            table(["figure", "measure", "before", "this run", "after/before"], rows))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    fn = globals().get("cmd_" + sys.argv[1].replace("-", "_"))
    if fn is None:
        raise SystemExit(f"unknown command {sys.argv[1]}")
    fn(sys.argv[2:])
