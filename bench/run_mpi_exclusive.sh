#!/usr/bin/env bash
# Issue 12, solver = "exclusive" on a partitioned store (docs/distributed.md,
# "Exclusive sparsity"): the time of one distributed FISTA iteration against
# one FGM scoring pass on the same store and rank count.
#
# A FISTA iteration without the working set (exclusive.working_set=false, so
# every iteration streams the store: Xᵀr, its tree sum, Xw, and the row sums of
# the loss and the line search) is timed as the difference of two runs of
# ITS_LONG and ITS_SHORT iterations (the setup, the power iteration and the
# output cancel), divided by ITS_LONG − ITS_SHORT. The scoring pass is FGM's
# (solver=fgm, fgm.max_iterations=1): run.json iterations[0].score_seconds.
# Communication per iteration: the "fit" phase of run.json "distributed" (rank
# 0's bytes and collectives), by the same difference. The models of every rank
# count are compared byte for byte (cmp) with the 1-process model.
#
# Every figure is the median of BENCH_MPI_REPS repetitions.
#
# Usage: bash bench/run_mpi_exclusive.sh [build/fgm]
# Knobs: BENCH_MPI_EXCL_SETS ("a9a news20"), BENCH_MPI_RANKS ("1 2 4"),
# ITS_SHORT (100), ITS_LONG (600), BENCH_MPI_REPS (3), BENCH_MPI_THREADS (1),
# BENCH_WORK, BENCH_RESULTS.
# Results: $BENCH_RESULTS/mpi_exclusive.csv and mpi_exclusive.md.
set -euo pipefail

fgm_arg=${1:-build/fgm}
FGM="$(cd "$(dirname "$fgm_arg")" && pwd)/$(basename "$fgm_arg")"
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
W=$(realpath -m "${BENCH_WORK:-bench/work}")/mpi_exclusive
R=$(realpath -m "${BENCH_RESULTS:-bench/results}")
SETS=${BENCH_MPI_EXCL_SETS:-a9a news20}
RANKS=${BENCH_MPI_RANKS:-1 2 4}
ITS_SHORT=${ITS_SHORT:-100}
ITS_LONG=${ITS_LONG:-600}
REPS=${BENCH_MPI_REPS:-3}
THREADS=${BENCH_MPI_THREADS:-1}
DATA=$(realpath -m "${FGM_SHARED_DATA:-../shared/data}")
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
mkdir -p "$W" "$R"

input_of() {
  case $1 in
    a9a) echo "$DATA/a9a/a9a" ;;
    news20) (cd bench && $PY -c "
import compare_liblinear as c
print(c.prepare('news20', c.DATASETS['news20']) + '/train.svm')") ;;
  esac
}

run_fgm() {  # run_fgm DIR K ARGS...: fgm in DIR (cwd) on K ranks (1: no mpirun)
  local d=$1 k=$2
  shift 2
  mkdir -p "$d"
  if [ "$k" = 1 ]; then (cd "$d" && "$FGM" "$@" > out.txt 2> err.txt)
  else (cd "$d" && "${MPIRUN[@]}" -np "$k" "$FGM" "$@" > out.txt 2> err.txt); fi
}

for set in $SETS; do
  input=$(input_of "$set")
  rm -rf "$W/$set"
  mkdir -p "$W/$set"
  "$FGM" ingest "$input" --out "$W/$set/store" --partitions 4 --progress off > /dev/null
  for rep in $(seq 1 "$REPS"); do
  for k in $RANKS; do
    echo "== $set rep $rep: $k rank(s)" >&2
    for its in "$ITS_SHORT" "$ITS_LONG"; do
      run_fgm "$W/$set/np$k/r$rep/excl$its" "$k" train "data.train=$W/$set/store" output.dir=out solver=exclusive \
        exclusive.expected_relevant=40 exclusive.lambda=1 exclusive.working_set=false \
        exclusive.max_iterations="$its" exclusive.tolerance=1e-15 "engine.threads=$THREADS" engine.progress=off
    done
    run_fgm "$W/$set/np$k/r$rep/score" "$k" train "data.train=$W/$set/store" output.dir=out fgm.B=20 \
      fgm.max_iterations=1 fgm.bias=false "engine.threads=$THREADS" engine.progress=off
  done
  done
done

$PY - "$W" "$R" "$SETS" "$RANKS" "$ITS_SHORT" "$ITS_LONG" "$REPS" <<'PY'
import csv, filecmp, json, os, statistics, sys
W, R, sets, ranks, short, long_, reps = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split(), \
    int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])


def measure(s, k, rep):
        base = os.path.join(W, s, "np" + k, "r%d" % rep)
        runs = {its: json.load(open(os.path.join(base, "excl%d" % its, "out", "run.json"))) for its in (short, long_)}
        fit = {its: next(p for p in r["distributed"]["passes"] if p["phase"] == "fit") for its, r in runs.items()}
        its = runs[long_]["exclusive"]["fista_iterations"] - runs[short]["exclusive"]["fista_iterations"]
        assert its == long_ - short, "a run stopped early: raise the tolerance's precision"
        per = lambda f: (f(long_) - f(short)) / its
        score = json.load(open(os.path.join(base, "score", "out", "run.json")))
        model = os.path.join(base, "excl%d" % long_, "out", "model.fgm")
        one = os.path.join(W, s, "np" + ranks[0], "r1", "excl%d" % long_, "out", "model.fgm")
        return {
            "set": s, "ranks": int(k),
            "iteration_seconds": per(lambda i: runs[i]["exclusive"]["seconds"]),
            "passes_per_iteration": per(lambda i: runs[i]["exclusive"]["store_passes"]),
            "bytes_per_iteration": per(lambda i: fit[i]["bytes"]),
            "collectives_per_iteration": per(lambda i: fit[i]["collectives"]),
            "collective_seconds_per_iteration": per(lambda i: fit[i]["seconds"]),
            "scoring_pass_seconds": score["iterations"][0]["score_seconds"],
            "model_identical": filecmp.cmp(model, one, shallow=False),
        }


rows = []
for s in sets:
    for k in ranks:
        runs = [measure(s, k, rep) for rep in range(1, reps + 1)]
        row = {key: statistics.median(r[key] for r in runs) for key in runs[0] if key not in ("set", "ranks",
                                                                                            "model_identical")}
        row = {"set": s, "ranks": int(k), **row, "model_identical": all(r["model_identical"] for r in runs)}
        rows.append(row)
with open(os.path.join(R, "mpi_exclusive.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
lines = ["| set | ranks | FISTA iteration (ms) | store passes / it | scoring pass (ms) | iteration / scoring pass "
         "| bytes / it | collectives / it | in collectives (ms / it) | model = 1-process |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    lines.append("| {set} | {ranks} | {it:.2f} | {passes:.0f} | {score:.2f} | {ratio:.2f} | {bytes:.0f} | {calls:.0f} | "
                 "{cs:.2f} | {same} |".format(set=r["set"], ranks=r["ranks"], it=1e3 * r["iteration_seconds"],
                                              passes=r["passes_per_iteration"], score=1e3 * r["scoring_pass_seconds"],
                                              ratio=r["iteration_seconds"] / r["scoring_pass_seconds"],
                                              bytes=r["bytes_per_iteration"], calls=r["collectives_per_iteration"],
                                              cs=1e3 * r["collective_seconds_per_iteration"],
                                              same="yes" if r["model_identical"] else "NO"))
open(os.path.join(R, "mpi_exclusive.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
