#!/usr/bin/env python3
"""SIFS benchmark helpers (bench/run_sifs.sh).

  synth <out.svm> <n> <p> <seed>   Section 6.1 of seed 003: x = [x1; x2],
      x1 in R^{0.02p} ~ N(+1.5*1, 0.75 I) (positive) / N(-1.5*1, 0.75 I)
      (negative), each entry of x2 in R^{0.98p} is N(0, 1) with chance 0.02,
      else 0; labels +1/-1 alternate (balanced).
  news20 <news20.bz2> <out.svm>    news20 made binary as configs/news20.toml
      (classes 1-10 -> +1, 11-20 -> -1), every row.
  summary <work dir> <out.csv> <out.md> <names...>
      one row per data set from <work>/<name>/path.json and path.csv:
      rejection ratios (features screened / inactive features, averaged over
      the solved points; samples screened (R + L) / coordinates) and the
      speedup against sifs.screening = none.
"""
import bz2
import csv
import json
import os
import sys

import numpy as np


def synth(out, n, p, seed):
    rng = np.random.default_rng(seed)
    p1 = max(1, int(round(0.02 * p)))
    p2 = p - p1
    with open(out + ".tmp", "w") as f:
        for i in range(n):
            y = 1 if i % 2 == 0 else -1
            x1 = rng.normal(1.5 * y, np.sqrt(0.75), p1)
            mask = rng.random(p2) < 0.02
            idx2 = np.nonzero(mask)[0]
            x2 = rng.normal(0.0, 1.0, idx2.size)
            parts = [f"{j + 1}:{v:.6g}" for j, v in enumerate(x1)]
            parts += [f"{p1 + j + 1}:{v:.6g}" for j, v in zip(idx2, x2)]
            f.write(("+1 " if y > 0 else "-1 ") + " ".join(parts) + "\n")
    os.replace(out + ".tmp", out)


def news20(src, out):
    with bz2.open(src, "rt") as f, open(out + ".tmp", "w") as g:
        for line in f:
            label, _, rest = line.strip().partition(" ")
            g.write(("+1 " if int(float(label)) <= 10 else "-1 ") + rest + "\n")
    os.replace(out + ".tmp", out)


def summary(work, out_csv, out_md, names):
    rows = []
    for name in names:
        pj = os.path.join(work, name, "path.json")
        pc = os.path.join(work, name, "path.csv")
        if not os.path.exists(pj):
            rows.append({"data": name, "status": "missing"})
            continue
        j = json.load(open(pj))
        pts = [r for r in csv.DictReader(open(pc)) if r["closed_form"] == "0"]
        W, C = j["weights"], j["coordinates"]
        feat = [int(r["features_screened"]) / max(1, W - int(r["selected"])) for r in pts]
        samp = [(int(r["samples_screened_R"]) + int(r["samples_screened_L"])) / C for r in pts]
        t, b = j["totals"], j.get("baseline", {})
        rows.append({
            "data": name, "status": "ok", "n": j["data"].get("rows", ""), "weights": W, "coordinates": C,
            "solved_points": len(pts),
            "feature_rejection_mean": round(sum(feat) / max(1, len(feat)), 4),
            "feature_rejection_min": round(min(feat), 4) if feat else "",
            "sample_screened_mean": round(sum(samp) / max(1, len(samp)), 4),
            "sifs_seconds": round(t["seconds"], 2), "sifs_screen_s": round(t["screening_seconds"], 2),
            "sifs_extract_s": round(t["extract_seconds"], 2), "sifs_solve_s": round(t["solve_seconds"], 2),
            "none_seconds": round(b.get("seconds", float("nan")), 2),
            "none_solve_s": round(b.get("solve_seconds", float("nan")), 2),
            "speedup": round(j.get("speedup", float("nan")), 2),
            "sifs_cpu_s": round(t.get("cpu_seconds", float("nan")), 2),
            "none_cpu_s": round(b.get("cpu_seconds", float("nan")), 2),
            "cpu_speedup": round(j.get("cpu_speedup", float("nan")), 2),
            "sifs_epochs": round(t.get("mean_epochs", float("nan")), 2),
            "none_epochs": round(b.get("mean_epochs", float("nan")), 2),
            "solve_nnz_ratio": round(b.get("mean_solve_nnz", float("nan")) / max(1.0, t.get("mean_solve_nnz", float("nan"))), 2),
            "passes_per_point": round((t["row_passes"] + t["column_passes"]) / max(1, len(pts)), 2),
            "columns_held": t.get("columns_held", ""),
            "load_after": open(os.path.join(work, name, "loadavg")).read().strip() if os.path.exists(os.path.join(work, name, "loadavg")) else "",
            "max_objective_excess_over_gaps": j.get("max_objective_excess_over_gaps", ""),
            "not_converged": t["not_converged"] + b.get("not_converged", 0),
        })
    keys = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    with open(out_md, "w") as f:
        f.write("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys) + "\n")
        for r in rows:
            f.write("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |\n")
    print(open(out_md).read())


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "synth":
        synth(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "news20":
        news20(sys.argv[2], sys.argv[3])
    elif cmd == "summary":
        summary(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    else:
        sys.exit(f"unknown command {cmd}")
