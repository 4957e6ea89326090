#!/usr/bin/python3
"""Issue 22, item 4: how many groups the Remark 2 pruning scores on a tree.

On the data bench/groups_synth.py writes (WORK_DIR/data), builds a binary tree
over its consecutive leaf groups (level 0: the groups of groups.txt; level l:
2^l consecutive leaves, up to LEVELS levels, a shorter last group where the
count is odd), writes it as tree.txt and trains features.group_structure=tree
(engine.threads=1). Without pruning every group is scored each pass (the
disjoint/overlapping loop in features/linear_space.cpp); the engine reports
the groups it scored (run.json iterations[].candidates_scored). Prints one JSON
line per iteration and a summary. The engine has no switch to turn the pruning
off, so only counts (and the pass's score_seconds, which includes streaming the
data) are measured, not the time an unpruned search would take.

Usage: /usr/bin/python3 bench/tree_pruning.py BUILD_DIR WORK_DIR [LEVELS B]
"""
import json
import os
import shutil
import subprocess
import sys


def main():
    build, work = os.path.realpath(sys.argv[1]), sys.argv[2]
    levels, b = (int(a) for a in (sys.argv[3:5] or (6, 2)))
    fgm = os.path.join(build, "fgm")
    os.chdir(work)
    leaves = [line.split() for line in open("data/groups.txt") if line.strip()]
    n_features = sum(len(g) for g in leaves)
    tree = [list(g) for g in leaves]
    level = tree
    for _ in range(1, levels):
        level = [sum(level[i:i + 2], []) for i in range(0, len(level), 2)]
        tree += level
        if len(level) == 1:
            break
    # A group equal to its only child (odd tail) would repeat a line: keep one.
    unique = list(dict.fromkeys(" ".join(g) for g in tree))
    with open("tree.txt", "w") as f:
        f.write("\n".join(unique) + "\n")
    total = len(unique)  # every feature is in a leaf: no singleton groups
    shutil.rmtree("tree-run", ignore_errors=True)
    cmd = [fgm, "train", "data.train=data/train.svm", "features.groups=tree.txt", "features.group_structure=tree",
           "fgm.loss=logistic", f"fgm.B={b}", "fgm.C=1", "fgm.max_iterations=10", "engine.threads=1",
           "engine.progress=off", "output.dir=tree-run"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    r = json.load(open("tree-run/run.json"))
    scored = []
    for it in r["iterations"]:
        scored.append(it["candidates_scored"])
        print(json.dumps({"iter": it["iter"], "selected": it["selected"], "candidates_scored": it["candidates_scored"],
                          "groups_in_tree": total, "score_seconds": round(it["score_seconds"], 3)}))
    print(json.dumps({"features": n_features, "tree_groups": total, "levels": levels, "B": b,
                      "scored_mean": round(sum(scored) / len(scored), 1), "scored_share": round(sum(scored) / (total * len(scored)), 3),
                      "stop_reason": r["stop_reason"], "train_seconds": round(r["train_seconds"], 2),
                      "command": " ".join(["fgm"] + cmd[1:])}))


if __name__ == "__main__":
    main()
