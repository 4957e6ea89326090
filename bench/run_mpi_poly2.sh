#!/usr/bin/env bash
# The distributed poly-2 analysis on the 10^6-row sparse synthetic
# (docs/distributed.md, "poly-2 and kernel spaces"): `fgm synth --kind sparse`
# (10^6 rows, ~29 nonzeros per row; BENCH_MPI_POLY2_FEATURES base features,
# default 2·10^6, the size of the first measurement, whose dense moment
# vectors per partition did not fit more; see the doc), ingested with --partitions 4, trained (features.kind=poly2, B=10,
# T=5, eps_outer=0, C=1, 1GB budget per rank, no bias) on 1 process
# (engine.threads=2) and under mpirun on 2 and 4 ranks (engine.threads=1).
# Prints per run: wall seconds, peak RSS per rank (/usr/bin/time %M), bytes and
# collectives of rank 0 per scoring pass and in all solves (run.json), test
# accuracy; and whether the three models are identical.
# Usage: bash bench/run_mpi_poly2.sh [build-dir] [work-dir]
set -euo pipefail
build=$(realpath "${1:-build}")
work=${2:-bench/work/mpi_poly2}
features=${BENCH_MPI_POLY2_FEATURES:-2000000}
mkdir -p "$work"
cd "$work"
fgm="$build/fgm"
mpirun="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && mpirun="$mpirun --allow-run-as-root"
if [ ! -f data/train.svm ] || [ "$(cat data/.features 2>/dev/null)" != "$features" ]; then
  rm -rf data store4
  "$fgm" synth --kind sparse --rows 1000000 --test-rows 100000 --features "$features" --seed 3 --out data >&2
  echo "$features" > data/.features
fi
[ -f store4/partitions.json ] ||
  "$fgm" ingest data/train.svm --out store4 --partitions 4 --features "$features" --threads 2 --memory-budget 1GB >&2
cat > c.toml <<'EOF'
[data]
train = "store4"
test = "data/test.svm"
[features]
kind = "poly2"
[fgm]
B = 10
max_iterations = 5
eps_outer = 0
C = 1
[engine]
memory_budget = "1GB"
progress = "off"
EOF
rm -rf k1 k2 k4 ./*.time
/usr/bin/time -f "%M %e" -o k1.rank0.time "$fgm" train --config c.toml engine.threads=2 output.dir=k1 > k1.out 2> k1.err
for np in 2 4; do
  $mpirun -np $np sh -c "/usr/bin/time -f '%M %e' -o k$np.rank\$OMPI_COMM_WORLD_RANK.time '$fgm' train --config c.toml \
    engine.threads=1 output.dir=k$np" > k$np.out 2> k$np.err
done
/usr/bin/python3 - <<'PY'
import glob, json
for k in (1, 2, 4):
    run = json.load(open(f"k{k}/run.json"))
    ranks = sorted(glob.glob(f"k{k}.rank*.time"))
    rss = [int(open(f).read().split()[0]) / 1024 for f in ranks]
    wall = max(float(open(f).read().split()[1]) for f in ranks)
    passes = run["distributed"]["passes"]
    scoring = [p for p in passes if p["phase"] == "scoring"]
    solve = [p for p in passes if p["phase"] == "solve"]
    print(json.dumps({
        "ranks": k, "wall_seconds": wall, "run_seconds": round(run["seconds"], 2),
        "peak_rss_mib_per_rank": [round(r, 1) for r in rss],
        "scoring_bytes_per_pass": [p["bytes"] for p in scoring],
        "scoring_collectives_per_pass": [p["collectives"] for p in scoring],
        "scoring_comm_seconds": round(sum(p["seconds"] for p in scoring), 2),
        "solve_bytes_total": sum(p["bytes"] for p in solve),
        "solve_collectives_total": sum(p["collectives"] for p in solve),
        "score_seconds_per_pass": [round(i["score_seconds"], 2) for i in run["iterations"]],
        "candidates_scored_per_pass": [i["candidates_scored"] for i in run["iterations"]],
        "test_accuracy": run["test"]["accuracy"]}))
PY
for k in 2 4; do
  if cmp -s <(grep -v '"output.dir"\|"engine.threads"' <("$fgm" inspect k1/model.fgm)) \
            <(grep -v '"output.dir"\|"engine.threads"' <("$fgm" inspect k$k/model.fgm)); then
    echo "k$k model: identical to k1 (inspect, config lines aside)"
  else
    echo "k$k model: DIFFERS from k1"
  fi
done
