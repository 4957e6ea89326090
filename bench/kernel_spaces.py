#!/usr/bin/python3
"""Issue 22, item 4: the hik and additive expansions against linear features on
data (bench/feature_spaces.md).

For each dataset with a train/test split in ../shared/data (a9a, ijcnn1,
madelon), ingest the training file once (the test file is read as text), then train features.kind = linear, hik and
additive at matched base-feature counts: every run selects at most K base
features (fgm.max_features = K counts features for linear and groups, i.e. base
features, for hik/additive), B = 2, C and T fixed, engine.threads = 1. Prints one
JSON line per run: test accuracy and AUC, generated columns in the model, wall
and CPU seconds of the whole
`fgm train` (wait4 rusage of the child; includes reading and scoring the test
text) and run.json's train_seconds.

Usage: /usr/bin/python3 bench/kernel_spaces.py BUILD_DIR WORK_DIR [K ...]
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import time

DATA = os.path.realpath(os.environ.get("FGM_SHARED_DATA", "../shared/data"))
# name -> (train, test, declared width, C)
SETS = {
    "a9a": ("a9a/a9a", "a9a/a9a.t", 123, 1.0),
    "ijcnn1": ("ijcnn1/ijcnn1.trn.bz2", "ijcnn1/ijcnn1.tst.bz2", 22, 1.0),
    "madelon": ("madelon/madelon.xz", "madelon/madelon.t", 500, 1.0),
}
SPACES = {
    "linear": [],
    "hik": ["features.levels=10"],
    "additive": ["features.order=2"],
}


def timed(cmd):
    """Runs cmd; -> (stdout, wall s, CPU s of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out.stdout, wall, cpu


def main():
    build, work = os.path.realpath(sys.argv[1]), sys.argv[2]
    ks = [int(a) for a in sys.argv[3:]] or [10]
    fgm = os.path.join(build, "fgm")
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    for name, (train, test, width, c) in SETS.items():
        store = f"{name}.train.store"
        if not os.path.isdir(store):
            timed([fgm, "ingest", os.path.join(DATA, train), "--out", store, "--features", str(width)])
        for k, (space, keys) in ((k, s) for k in ks for s in SPACES.items()):
            out_dir = f"{name}-{space}-{k}"
            shutil.rmtree(out_dir, ignore_errors=True)
            cmd = [fgm, "train", f"data.train={name}.train.store", f"data.test={os.path.join(DATA, test)}",
                   f"data.features={width}", f"features.kind={space}", *keys, "fgm.B=2", f"fgm.C={c}",
                   f"fgm.max_features={k}", "fgm.bias=true", "engine.threads=1", "engine.progress=off",
                   f"output.dir={out_dir}"]
            _, wall, cpu = timed(cmd)
            run = json.load(open(os.path.join(out_dir, "run.json")))
            test_metrics = run.get("test", {})
            print(json.dumps({
                "data": name, "space": space, "keys": keys, "max_base_features": k,
                "selected": len(run.get("selected_features", [])),
                "iterations": len(run.get("iterations", [])),
                "test_accuracy": test_metrics.get("accuracy"), "test_auc": test_metrics.get("auc"),
                "train_s": round(run.get("train_seconds", 0), 2), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                "stop_reason": run.get("stop_reason"),
                "command": " ".join(os.path.basename(a) if a == fgm else a for a in cmd)}), flush=True)


if __name__ == "__main__":
    main()
