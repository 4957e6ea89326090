#!/usr/bin/env bash
# The distributed hik/additive analysis (docs/distributed.md, "poly-2 and
# kernel spaces"): a9a and news20 (FGM_SHARED_DATA, default ../shared/data;
# news20 made binary: classes 1–10 against 11–20) ingested with --partitions 4, trained with features.kind=hik
# (features.levels=5) and features.kind=additive (features.order=2), B=5,
# T=3, eps_outer=0, C=1, no bias, on 1 process and under mpirun on 2 and 4
# ranks (engine.threads=1). Prints per run the bytes rank 0 counts per scoring
# pass and in the once-per-run column-range exchange (phase "labels"), the
# collectives per scoring pass, the run's wall seconds, and whether the models
# of 1, 2 and 4 ranks are identical (`fgm inspect`, output.dir aside). Models
# and run.json stay in the work dir.
# Usage: bash bench/run_mpi_kernels.sh [build-dir] [work-dir]
set -euo pipefail
build=$(realpath "${1:-build}")
data=$(realpath "${FGM_SHARED_DATA:-../shared/data}")
work=${2:-bench/work/mpi_kernels}
mkdir -p "$work"
cd "$work"
fgm="$build/fgm"
mpirun="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && mpirun="$mpirun --allow-run-as-root"
[ -f a9a.svm ] || cp "$data/a9a/a9a" a9a.svm
[ -f news20.svm ] || bzcat "$data/news20/news20.bz2" | awk '{ $1 = ($1 <= 10 ? "+1" : "-1"); print }' > news20.svm
for d in a9a news20; do
  [ -f "$d.store/partitions.json" ] || "$fgm" ingest "$d.svm" --out "$d.store" --partitions 4 >&2
done
for d in a9a news20; do
  for kind in "hik features.levels=5" "additive features.order=2"; do
    name=$d-${kind%% *}
    args="train data.train=$d.store features.kind=$kind fgm.B=5 fgm.max_iterations=3 fgm.eps_outer=0 fgm.C=1
          engine.threads=1 engine.progress=off"
    rm -rf "$name-1" "$name-2" "$name-4"
    "$fgm" $args output.dir="$name-1" > /dev/null 2>&1
    for np in 2 4; do $mpirun -np $np "$fgm" $args output.dir="$name-$np" > /dev/null 2>&1; done
    /usr/bin/python3 - "$name" "$fgm" <<'PY'
import json, sys, subprocess
name, fgm = sys.argv[1], sys.argv[2]
def described(k):  # fgm inspect, the output.dir line aside
    out = subprocess.run([fgm, "inspect", f"{name}-{k}/model.fgm"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "output.dir" not in line]
same = all(described(1) == described(k) for k in (2, 4))
for k in (2, 4):
    run = json.load(open(f"{name}-{k}/run.json"))
    passes = run["distributed"]["passes"]
    scoring = [p for p in passes if p["phase"] == "scoring"]
    labels = [p for p in passes if p["phase"] == "labels"]
    print(json.dumps({"run": name, "ranks": k,
                      "scoring_bytes_per_pass": sorted({int(p["bytes"]) for p in scoring}),
                      "scoring_collectives_per_pass": sorted({int(p["collectives"]) for p in scoring}),
                      "labels_bytes": sum(int(p["bytes"]) for p in labels),
                      "seconds": round(run["total_seconds"], 1), "budget_peak_MB": round(run["memory_budget_peak_bytes"] / 2**20, 1),
                      "models_identical_1_2_4": same}))
PY
  done
done
