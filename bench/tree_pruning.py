#!/usr/bin/python3
"""Issue 22, item 4: what Remark 2's pruning of tree-structured groups saves.

Builds a forest of binary trees over the features of a LIBSVM training file
in id order: leaves of LEAF consecutive features, each level pairing two
consecutive groups of the level below (an odd tail joins the last pair), up to
groups of TOP features (every group is a line, the leaves too; features past
the last full leaf are singletons). Ingests the file once
(`fgm ingest`, not timed) and trains `features.group_structure=tree` with
`features.tree_pruning` true and false, at 1 and 2 threads, REPEATS times
each, interleaved so both see the same load. Reports medians of run.json's
train_seconds and of the per-pass score_seconds (the worst-case analysis:
the streamed pass over the data plus the group search, where the pruning
acts; a pass's median over its iterations, then the median over repeats), groups scored per pass (candidates_scored), and checks that both
searches select the same groups with the same weights (run.json
selected_features and objective).

With no TRAIN, news20 binary (classes 1-10 -> +1; 15,935 x 62,061) is written
from ../shared/data.

Usage: /usr/bin/python3 bench/tree_pruning.py BUILD_DIR WORK_DIR [TRAIN LEAF TOP REPEATS]
"""
import bz2
import json
import os
import shutil
import statistics
import subprocess
import sys

DATA = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "shared", "data")


def news20_binary(path):
    with bz2.open(os.path.join(DATA, "news20", "news20.bz2"), "rt") as f, open(path, "w") as g:
        for line in f:
            label, rest = line.split(" ", 1) if " " in line else (line.strip(), "\n")
            g.write(("+1 " if int(label) <= 10 else "-1 ") + rest)


def write_forest(width, leaf, top, path):
    level = [list(range(s + 1, s + leaf + 1)) for s in range(0, width - leaf + 1, leaf)]
    lines = []
    size = leaf
    while True:
        lines += level
        if size * 2 > top or len(level) < 2:
            break
        up = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            up[-1] = up[-1] + level[-1]
        level, size = up, size * 2
    with open(path, "w") as f:
        for g in lines:
            f.write(" ".join(map(str, g)) + "\n")
    return len(lines), sum(len(g) for g in lines), size


def main():
    build, work = os.path.realpath(sys.argv[1]), sys.argv[2]
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    train = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    leaf, top, repeats = (int(a) for a in (sys.argv[4:7] or (2, 1024, 3)))
    fgm = os.path.join(build, "fgm")
    if train is None:
        train = "news20-binary.svm"
        if not os.path.exists(train):
            news20_binary(train)
    shutil.rmtree("store", ignore_errors=True)
    subprocess.run([fgm, "ingest", train, "--out", "store"], check=True, capture_output=True)
    width = max(int(tok.split(":")[0]) for line in open(train) for tok in line.split()[1:])
    n_rows = sum(1 for _ in open(train))
    groups, members, largest = write_forest(width, leaf, top, "tree.txt")
    singles = width - (width // leaf) * leaf
    shape = {"train": train, "rows": n_rows, "features": width, "leaf": leaf, "largest_group": largest,
             "tree_groups": groups, "group_members": members, "singleton_groups": singles}
    print(json.dumps(shape), flush=True)
    base = [fgm, "train", "data.train=store", "features.groups=tree.txt", "features.group_structure=tree",
            "fgm.loss=logistic", "fgm.B=2", "fgm.C=1", "fgm.max_iterations=8", "engine.progress=off"]
    runs = {}
    for rep in range(repeats):
        for threads in (1, 2):
            for pruning in ("true", "false"):
                out = f"run-{pruning}-{threads}"
                shutil.rmtree(out, ignore_errors=True)
                cmd = base + [f"features.tree_pruning={pruning}", f"engine.threads={threads}", f"output.dir={out}"]
                subprocess.run(cmd, check=True, capture_output=True)
                r = json.load(open(os.path.join(out, "run.json")))
                its = r["iterations"]
                key = (pruning, threads)
                entry = runs.setdefault(key, {"train": [], "score": [], "scored": None, "model": None})
                entry["train"].append(r["train_seconds"])
                entry["score"].append(statistics.median(it["score_seconds"] for it in its))
                entry["scored"] = [it["candidates_scored"] for it in its]
                entry["model"] = (json.dumps(r["selected_features"], sort_keys=True), r.get("objective"))
                entry["passes"] = len(its)
                entry["stop_reason"] = r["stop_reason"]
                entry["columns"] = len(r["selected_features"])
    for threads in (1, 2):
        on, off = runs[("true", threads)], runs[("false", threads)]
        same = on["model"] == off["model"]
        print(json.dumps({
            "threads": threads, "repeats": repeats, "passes": on["passes"], "stop_reason": on["stop_reason"],
            "columns": on["columns"], "same_model": same,
            "scored_per_pass_pruned": round(statistics.mean(on["scored"]), 1),
            "scored_per_pass_exhaustive": round(statistics.mean(off["scored"]), 1),
            "score_s_per_pass_pruned": round(statistics.median(on["score"]), 4),
            "score_s_per_pass_exhaustive": round(statistics.median(off["score"]), 4),
            "train_s_pruned": round(statistics.median(on["train"]), 3),
            "train_s_exhaustive": round(statistics.median(off["train"]), 3),
            "command": " ".join(["fgm"] + base[1:] + ["features.tree_pruning={true|false}", f"engine.threads={threads}"]),
        }), flush=True)
        if not same:
            sys.exit("pruned and exhaustive runs selected different models")


if __name__ == "__main__":
    main()
