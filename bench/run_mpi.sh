#!/usr/bin/env bash
# Issue 12: the same training on 1 (no mpirun), 2 and 4 ranks of one
# partitioned store (docs/distributed.md). Per run: wall seconds, run.json's
# "seconds", bytes communicated per scoring pass and in the solves (rank 0's
# counters in run.json "distributed"), collective calls, seconds inside
# collectives, peak RSS of every rank (/usr/bin/time -f %M per rank), and
# whether the model file is identical, byte for byte (cmp), to the 1-process
# model. The communication figures are also predicted from the formulas of
# docs/distributed.md ("Cost model") and the run's own APG counts, and the
# prediction is written next to the measurement.
#
# Usage: bash bench/run_mpi.sh [build/fgm]        (also the `mpi` step of bench/run_all.sh)
# Results: $BENCH_RESULTS/mpi.csv (one row per run), mpi.md (the table of bench/README.md);
# work files: $BENCH_WORK/mpi/<set>/ (store, np<K>/out/{model.fgm,run.json}, np<K>/rss.<rank>).
#
# Sets (BENCH_MPI_SETS, default "news20"):
#   news20  news20 binary (classes 1-10 vs 11-20; the train split of
#           bench/compare_liblinear.py, as configs/news20.toml), 12,747 x 62,061,
#           `--partitions 4`; configs/news20.toml with fgm.bias=false (the bias is
#           not distributed yet), engine.threads=$BENCH_MPI_THREADS.
#   poly2   `fgm synth --kind sparse` text, BENCH_MPI_POLY2_ROWS (1000000) x
#           BENCH_MPI_POLY2_FEATURES (15000000), ~29 nonzeros per row (the shape of
#           bench/run_poly2_scale.sh, here as text because `--partitions` ingests
#           text); features.kind=poly2, B=10, T=10, C=1, 1GB per rank. Not in the
#           default list until poly-2 runs on a partitioned store; a refused run is
#           recorded (exit code, error line) like any failed run.
# Knobs: BENCH_MPI_RANKS ("1 2 4"; each must divide BENCH_MPI_PARTITIONS, 4),
# BENCH_MPI_REPS (3), BENCH_MPI_RESULTS_ONLY (1: recompute the tables from the runs already made), BENCH_MPI_THREADS (1: engine.threads of every rank; the
# model does not depend on it), BENCH_WORK, BENCH_RESULTS, FGM_SHARED_DATA.
# mpirun gets --oversubscribe (4 ranks on 2 cores) and, as root, --allow-run-as-root.
set -euo pipefail

fgm_arg=${1:-build/fgm}
FGM="$(cd "$(dirname "$fgm_arg")" && pwd)/$(basename "$fgm_arg")"
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=/usr/bin/python3
W=$(realpath -m "${BENCH_WORK:-bench/work}")/mpi
R=$(realpath -m "${BENCH_RESULTS:-bench/results}")
SETS=${BENCH_MPI_SETS:-news20}
RANKS=${BENCH_MPI_RANKS:-1 2 4}
PARTITIONS=${BENCH_MPI_PARTITIONS:-4}
REPS=${BENCH_MPI_REPS:-3}
THREADS=${BENCH_MPI_THREADS:-1}
POLY2_ROWS=${BENCH_MPI_POLY2_ROWS:-1000000}
POLY2_FEATURES=${BENCH_MPI_POLY2_FEATURES:-15000000}

[ -x "$FGM" ] || { echo "run_mpi.sh: $FGM not found; build first (make build)" >&2; exit 2; }
for tool in mpirun /usr/bin/time "$PY"; do
  command -v "$tool" > /dev/null || { echo "run_mpi.sh: $tool missing (scripts/install_deps.sh)" >&2; exit 2; }
done
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
mkdir -p "$W" "$R"
T0=$(date +%s)
log() { echo "== [mpi $(( $(date +%s) - T0 ))s] $*" >&2; }

# ------------------------------------------------------------------ data
# Each prepare_<set> makes its data once and sets INPUT (the LIBSVM text to
# ingest), INGEST_ARGS and TRAIN_ARGS (the `fgm train` settings of the set,
# besides data.train, output.dir and engine.threads).
prepare_news20() {
  local d
  # compare_liblinear.prepare writes bench/work/compare_liblinear/news20/{train,test}.svm once.
  d=$(cd bench && FGM_SHARED_DATA=${FGM_SHARED_DATA:-} $PY -c "
import os, compare_liblinear as c
c.SHARED = os.environ.get('FGM_SHARED_DATA') or c.SHARED
print(c.prepare('news20', c.DATASETS['news20']))")
  INPUT=$d/train.svm
  INGEST_ARGS=(--features 62061)
  TRAIN_ARGS=(--config "$ROOT/configs/news20.toml" "data.test=$d/test.svm" fgm.bias=false)
}
prepare_poly2() {
  local d=$W/poly2/text stamp="rows=$POLY2_ROWS features=$POLY2_FEATURES seed=3"
  if [ ! -f "$d/train.svm" ] || [ "$(cat "$d/.params" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$d"
    log "fgm synth --kind sparse: $POLY2_ROWS x $POLY2_FEATURES text (2 threads)"
    "$FGM" synth --kind sparse --rows "$POLY2_ROWS" --test-rows 1000 --features "$POLY2_FEATURES" --threads 2 \
      --seed 3 --out "$d" > /dev/null
    echo "$stamp" > "$d/.params"
  fi
  INPUT=$d/train.svm
  INGEST_ARGS=(--features "$POLY2_FEATURES" --memory-budget 1GB --threads 2)
  TRAIN_ARGS=(features.kind=poly2 fgm.B=10 fgm.max_iterations=10 fgm.eps_outer=0 fgm.bias=false fgm.C=1
              engine.memory_budget=1GB "data.test=$d/test.svm")
}

# ------------------------------------------------------------------- runs
# One training of SET on K ranks in $W/SET/npK (cwd, so that output.dir = "out"
# is the same text in every run's config and the model files can be compared
# byte for byte). Writes wall seconds and exit code to npK/run.txt.
train_once() {  # train_once SET K
  local set=$1 k=$2 d=$W/$1/np$2 rc=0
  rm -rf "$d"; mkdir -p "$d"
  local args=(train "${TRAIN_ARGS[@]}" "data.train=$W/$set/store" output.dir=out "engine.threads=$THREADS"
              engine.progress=off)
  local start end
  start=$(date +%s.%N)
  if [ "$k" = 1 ]; then
    (cd "$d" && /usr/bin/time -f %M -o rss.0 "$FGM" "${args[@]}" > train.out 2> train.err) || rc=$?
  else
    # Every rank under its own /usr/bin/time: rss.<rank> holds its peak RSS (KiB).
    (cd "$d" && "${MPIRUN[@]}" -np "$k" sh -c 'exec /usr/bin/time -f %M -o "rss.$OMPI_COMM_WORLD_RANK" "$@"' sh \
       "$FGM" "${args[@]}" > train.out 2> train.err) || rc=$?
  fi
  end=$(date +%s.%N)
  echo "wall=$($PY -c "print(round($end - $start, 3))") exit=$rc" > "$d/run.txt"
  [ "$rc" = 0 ] || log "$set on $k rank(s) FAILED (exit $rc): $(grep -m1 'fgm' "$d/train.err" || head -1 "$d/train.err")"
  return 0
}

# BENCH_MPI_RESULTS_ONLY=1: only the tables, from the runs already in $W.
[ "${BENCH_MPI_RESULTS_ONLY:-0}" = 1 ] && SKIP_RUNS=1 || SKIP_RUNS=0
for set in $SETS; do
  [ "$SKIP_RUNS" = 1 ] && break
  declare -F "prepare_$set" > /dev/null || { log "unknown set $set (news20, poly2)"; continue; }
  mkdir -p "$W/$set"
  prepare_"$set"
  log "$set: fgm ingest $INPUT --partitions $PARTITIONS"
  rm -rf "$W/$set/store"
  "$FGM" ingest "$INPUT" --out "$W/$set/store" --partitions "$PARTITIONS" "${INGEST_ARGS[@]}" --progress off \
    > "$W/$set/ingest.out"
  for rep in $(seq 1 "$REPS"); do
    for k in $RANKS; do
      log "$set rep $rep: $k rank(s), engine.threads=$THREADS"
      train_once "$set" "$k"
      mkdir -p "$W/$set/rep$rep"
      rm -rf "$W/$set/rep$rep/np$k"
      mv "$W/$set/np$k" "$W/$set/rep$rep/np$k"
    done
  done
done

# ---------------------------------------------------------------- results
$PY - "$W" "$R" "$SETS" "$RANKS" "$REPS" "$PARTITIONS" "$THREADS" <<'PY'
"""mpi.csv and mpi.md from the runs; the communication predicted by
docs/distributed.md's cost model next to what run.json measured."""
import csv, filecmp, json, os, statistics, sys

W, R, sets, ranks, reps, P, threads = sys.argv[1], sys.argv[2], sys.argv[3].split(), \
    [int(k) for k in sys.argv[4].split()], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]


def covering_nodes(P, first, last, begin=0, end=None, out=None):
    """core/partition_sum.cpp's covering_nodes: the maximal tree nodes inside [first, last)."""
    end = P if end is None else end
    out = [] if out is None else out
    if end <= first or begin >= last:
        return out
    if first <= begin and end <= last:
        out.append((begin, end))
        return out
    half = 1
    while 2 * half < end - begin:
        half *= 2
    covering_nodes(P, first, last, begin, begin + half, out)
    covering_nodes(P, first, last, begin + half, end, out)
    return out


def allgather_bytes(K, length):
    """Rank 0's counted bytes of one allreduce_partition_sums of `length` doubles on K
    ranks: every rank sends its covering nodes (2 + length doubles each); the
    counter adds the gathered total and the K 4-byte sizes (core/mpi_communicator.cpp)."""
    if K == 1:
        return 0
    nodes = sum(len(covering_nodes(P, r * P // K, (r + 1) * P // K)) for r in range(K))
    return 8 * nodes * (2 + length) + 4 * K


def column_range(m, K, r):
    """core/partition_sum.cpp's column_range_of_rank."""
    return r * m // K, (r + 1) * m // K


_columns = {}


def partition_columns(store):
    """The non-empty column ids (0-based) of every partition, read from the
    ingested text and the manifest's row split (rows: the non-blank, non-comment lines)."""
    if store not in _columns:
        man = json.load(open(os.path.join(store, "partitions.json")))
        first, base = man["first_row"], man["index_base"]
        parts = [set() for _ in range(man["partitions"])]
        row, p = 0, 0
        with open(man["input_path"]) as f:
            for line in f:
                line = line.split("#", 1)[0].split()
                if not line:
                    continue
                while row >= first[p + 1]:
                    p += 1
                parts[p].update(int(tok.split(":", 1)[0]) - base for tok in line[1:] if ":" in tok)
                row += 1
        _columns[store] = [sorted(c) for c in parts]
    return _columns[store]


def scoring_bytes(K, m, B, nodes, nonempty, selected):
    """Rank 0's bytes of one scoring pass by column ranges (docs/distributed.md, Cost model):
    the reduce-scatter (alltoallv: to every other rank d its nodes' entries in d's range,
    24 bytes per node + 8 per id of the range when the node has at least half of them,
    else 16 per entry; the same from every other rank for range 0; K 4-byte sizes), then
    the allgather of the top lists (16 per entry: min(B, unselected non-empty columns
    of the rank's range), assuming no non-empty column sums to exactly 0) and of the
    selected columns' c_j (8 bytes each, from their range's rank), each list with an
    8-byte count, plus K sizes."""
    if K == 1:
        return 0
    import bisect

    def share(node_cols, d):
        lo, hi = column_range(m, K, d)
        cnt = bisect.bisect_left(node_cols, hi) - bisect.bisect_left(node_cols, lo)
        return 24 + (8 * (hi - lo) if cnt and 2 * cnt >= hi - lo else 16 * cnt)
    scatter = 4 * K
    for d in range(K):
        for s in range(K):
            if (d == 0) != (s == 0):  # rank 0 sends to d != 0 and receives from s != 0
                scatter += sum(share(node, d) for node in nodes[s])
    gather = 4 * K
    for r in range(K):
        lo, hi = column_range(m, K, r)
        free = bisect.bisect_left(nonempty, hi) - bisect.bisect_left(nonempty, lo)
        mine = sum(1 for j in selected if lo <= j < hi)
        gather += 16 + 16 * min(B, free - mine) + 8 * mine
    return scatter + gather


def predict(run, K, m):
    """Bytes and collectives per phase from the formulas of docs/distributed.md (Cost
    model) for linear features without a bias, squared hinge; None otherwise."""
    cfg = run["config"]
    if cfg.get("features.kind", "linear") != "linear" or cfg.get("features.groups") \
            or cfg.get("fgm.bias") != "false" or cfg.get("fgm.loss", "squared_hinge") != "squared_hinge":
        return None
    d = run["distributed"]
    its = run["iterations"]
    B = int(cfg["fgm.B"])
    store = run["data"]["train"]
    parts = partition_columns(store)
    base = json.load(open(os.path.join(store, "partitions.json")))["index_base"]
    nodes = [[sorted(set().union(*(parts[p] for p in range(b, e))))
              for b, e in covering_nodes(P, r * P // K, (r + 1) * P // K)] for r in range(K)]
    nonempty = sorted(set().union(*parts))
    batch_of = [(f["id"] - base, f["batch"]) for f in run["selected_features"]]
    scoring = [p for p in d["passes"] if p["phase"] == "scoring"]
    solves = [p for p in d["passes"] if p["phase"] == "solve"]
    pred = {"labels_bytes": (8 * 2 * P + 4 * K) if K > 1 else 0, "scoring_collectives": 2 if K > 1 else 0,
            "solve_bytes": 0, "solve_collectives_low": 0, "solve_collectives_high": 0,
            # phase "diagnostics": the value-span exchange after the first pass
            # and the chance-level tree sum at the end (one collective each)
            "diagnostics_collectives": 2 if K > 1 else 0,
            "scoring_bytes": [scoring_bytes(K, m, B, nodes, nonempty, [j for j, b in batch_of if b < t])
                              for t in range(1, len(scoring) + 1)]}
    for t, it in enumerate(its, start=1):
        S, I = it["selected"], it["apg_iterations"]
        failed = it["apg_line_search_steps"] - I
        # Per solve: P at the start (with the column norms behind L0 on the first
        # solve: 2 + S doubles), per APG iteration the gradient (S) and one
        # line-search round of 2 trials ([Bregman side, P] each: 4 doubles), a
        # second round of 4 trials (8) in an iteration whose first two trials
        # fail, the final [gradient, P] (S + 1) and the dual bound's [A, S] (2).
        # Rounds beyond the first are not in run.json: from the measured count.
        low = 3 + 2 * I
        pred["solve_collectives_low"] += low if K > 1 else 0
        pred["solve_collectives_high"] += (low + failed // 2) if K > 1 else 0
        extra = max(solves[t - 1]["collectives"] - low, 0) if K > 1 else 0
        if K > 1:
            pred["solve_bytes"] += allgather_bytes(K, 2 + S if t == 1 else 1) + I * allgather_bytes(K, S) \
                + I * allgather_bytes(K, 4) + extra * allgather_bytes(K, 8) + allgather_bytes(K, S + 1) \
                + allgather_bytes(K, 2)
    pred["scoring_passes"] = len(scoring)
    return pred


rows = []
for s in sets:
    base = os.path.join(W, s)
    if not os.path.isdir(base):
        continue
    for rep in range(1, reps + 1):
        ref = os.path.join(base, f"rep{rep}", f"np{ranks[0]}", "out", "model.fgm")
        for K in ranks:
            d = os.path.join(base, f"rep{rep}", f"np{K}")
            txt = dict(kv.split("=") for kv in open(os.path.join(d, "run.txt")).read().split())
            rss = []
            for r in range(K):
                try:
                    rss.append(int(open(os.path.join(d, f"rss.{r}")).read().split()[-1]))
                except (OSError, ValueError, IndexError):
                    rss.append(0)
            row = {"set": s, "ranks": K, "rep": rep, "threads": threads, "partitions": P,
                   "exit": int(txt["exit"]), "wall_s": float(txt["wall"]),
                   "peak_rss_kib_per_rank": ";".join(map(str, rss)), "max_rss_kib": max(rss)}
            run_path = os.path.join(d, "out", "run.json")
            if row["exit"] == 0 and os.path.exists(run_path):
                run = json.load(open(run_path))
                m = run["data"]["features"]
                dist = run["distributed"]
                passes = dist["passes"]
                sc = [p for p in passes if p["phase"] == "scoring"]
                so = [p for p in passes if p["phase"] == "solve"]
                lab = [p for p in passes if p["phase"] == "labels"]
                pred = predict(run, K, m) or {}
                guess = lambda key: pred.get(key, "")  # noqa: E731
                row.update({
                    "run_seconds": run["seconds"], "rows": run["data"]["rows"], "features": m,
                    "iterations": len(run["iterations"]), "selected": len(run["selected_features"]),
                    "objective": run["objective"], "test_accuracy": run.get("test", {}).get("accuracy", ""),
                    "scoring_passes": len(sc),
                    "bytes_per_scoring_pass": sc[0]["bytes"] if sc else 0,
                    "bytes_per_scoring_pass_predicted": pred["scoring_bytes"][0] if pred else "",
                    "scoring_bytes_all_passes": sum(p["bytes"] for p in sc),
                    "scoring_bytes_all_passes_predicted": sum(pred["scoring_bytes"]) if pred else "",
                    "scoring_passes_all_predicted": pred and all(
                        p["bytes"] == q for p, q in zip(sc, pred["scoring_bytes"])),
                    "solve_bytes": sum(p["bytes"] for p in so), "solve_bytes_predicted": guess("solve_bytes"),
                    "labels_bytes": sum(p["bytes"] for p in lab), "labels_bytes_predicted": guess("labels_bytes"),
                    "collectives": sum(p["collectives"] for p in passes),
                    "collectives_predicted_low": ((1 if K > 1 else 0) + pred["scoring_collectives"] * len(sc)
                                                  + pred["solve_collectives_low"] + pred["diagnostics_collectives"]) if pred else "",
                    "collectives_predicted_high": ((1 if K > 1 else 0) + pred["scoring_collectives"] * len(sc)
                                                   + pred["solve_collectives_high"] + pred["diagnostics_collectives"]) if pred else "",
                    "solve_collectives": sum(p["collectives"] for p in so),
                    "apg_iterations": sum(i["apg_iterations"] for i in run["iterations"]),
                    "line_search_steps": sum(i["apg_line_search_steps"] for i in run["iterations"]),
                    "comm_seconds": round(sum(p["seconds"] for p in passes), 3),
                    "score_seconds": round(sum(i["score_seconds"] for i in run["iterations"]), 3),
                    "solve_seconds": round(sum(i["solve_seconds"] for i in run["iterations"]), 3),
                })
                mine = os.path.join(d, "out", "model.fgm")
                row["model_identical_to_1"] = os.path.exists(ref) and filecmp.cmp(ref, mine, shallow=False)
            else:
                err = open(os.path.join(d, "train.err")).read().splitlines()
                row["error"] = next((l for l in err if "fgm" in l), err[0] if err else "")
            rows.append(row)

fields = []
for r in rows:
    fields += [k for k in r if k not in fields]
with open(os.path.join(R, "mpi.csv.tmp"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields)
    w.writeheader()
    w.writerows(rows)
os.replace(os.path.join(R, "mpi.csv.tmp"), os.path.join(R, "mpi.csv"))

# The table: medians over reps of the times, the rest from rep 1 (deterministic).
md = ["| set | ranks | wall s (median) | run.json s (median) | seconds in collectives (median) | bytes of the first scoring pass: measured / predicted | scoring bytes, all passes: measured / predicted (every pass exact?) | solve bytes, all iterations: measured / predicted (extra line-search rounds taken as second rounds) | collectives: measured / predicted range | peak RSS per rank, MiB (max over reps) | model = 1-process model (cmp) |",
      "|---|---|---|---|---|---|---|---|---|---|---|"]
for s in sets:
    for K in ranks:
        rs = [r for r in rows if r["set"] == s and r["ranks"] == K]
        if not rs:
            continue
        ok = [r for r in rs if r["exit"] == 0 and "run_seconds" in r]
        if not ok:
            md.append(f"| {s} | {K} | failed (exit {rs[0]['exit']}): {rs[0].get('error', '')} | | | | | | | | |")
            continue
        r1 = ok[0]
        med = lambda key: statistics.median(r[key] for r in ok)  # noqa: E731
        rss = [max(int(r["peak_rss_kib_per_rank"].split(";")[i]) for r in ok) for i in range(K)]
        same = all(r.get("model_identical_to_1") for r in ok)
        num = lambda v: f"{v:,}" if isinstance(v, int) else "–"  # noqa: E731
        md.append(f"| {s} | {K} | {med('wall_s'):.2f} | {med('run_seconds'):.2f} | {med('comm_seconds'):.2f} | "
                  f"{num(r1['bytes_per_scoring_pass'])} / {num(r1['bytes_per_scoring_pass_predicted'])} | "
                  f"{num(r1['scoring_bytes_all_passes'])} / {num(r1['scoring_bytes_all_passes_predicted'])} "
                  f"({'yes' if r1['scoring_passes_all_predicted'] else 'no'}) | "
                  f"{num(r1['solve_bytes'])} / {num(r1['solve_bytes_predicted'])} | "
                  f"{num(r1['collectives'])} / {num(r1['collectives_predicted_low'])}–"
                  f"{num(r1['collectives_predicted_high'])} | "
                  f"{' / '.join(f'{v / 1024:.1f}' for v in rss)} | {'yes' if same else 'NO'} ({len(ok)} reps) |")
open(os.path.join(R, "mpi.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
log "done: $R/mpi.csv, $R/mpi.md"
