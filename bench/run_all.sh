#!/usr/bin/env bash
# The benchmarks of issue 2 (`make bench` runs `bash bench/run_all.sh build/fgm`).
# Builds nothing: it uses the fgm binary given and fgm_bench_scoring beside it.
# Data goes to bench/work/ (git-ignored, reused across runs); results to
# bench/results/ (*.csv, *.jsonl, summary.md). See bench/README.md.
#
# Steps (BENCH_STEPS, default all, in this order):
#   data      Section 8.2 synthetic sets via `fgm synth`: s82 (4096 x 4096, 300
#             planted), big (BENCH_BIG_ROWS x 4096: the >= 10x-budget store),
#             small (1024 x 4096, for callgrind)
#   ingest    `fgm ingest` MB/s and peak RSS: a9a, w8a, s82, big; threads 1, 2
#   scoring   fgm_bench_scoring on the s82 store (as ingested, then read back
#             from disk) and the big store: pass throughput vs memory read
#             bandwidth; callgrind instructions per nonzero (small store)
#   memory    `fgm train` peak RSS on the big store at BENCH_BUDGET (and on the
#             same data cut into ~800 shards)
#   e2e       `fgm train --config configs/<name>.toml` for the shared-data
#             configs (BENCH_CONFIGS), vs LIBLINEAR -s 5 / -s 6 at the same
#             number of features
#   recovery  planted recovery on s82: FGM B=30, T=1..10 vs LIBLINEAR -s 5 C grid
#   exclusive seed 002 (bench/run_exclusive.sh): E-LASSO synthetic, a9a/w8a with
#             random groups vs LIBLINEAR -s 6, streamed FISTA iteration vs scoring pass
# Issue 9 (bench/run_issue9.sh; each step prints its shape; a failing step is
# recorded in its results, not fatal):
#   tall      tall store (BENCH_TALL_ROWS x BENCH_TALL_FEATURES, BENCH_TALL_NNZ
#             per row): fgm_bench_tall, linear scoring pass (2 threads) vs a
#             naive single-loop CSC gather vs read bandwidth, one process
#   hashed    the 2-row file with index 4,294,967,297 (ingest s, store bytes);
#             BENCH_HASH_ROWS rows with ids from [0, 2^40) vs the same nonzeros
#             with dense ids (store bytes); one scoring pass on each store
#   madelon   madelon poly-2 (fgm_bench_poly2): pass s vs the GEMM reference
#   apg       `fgm train` on the tall store, B = BENCH_APG_B, T = 1: APG s/iteration
#   weak      poly-2 `fgm train` on a weakly planted sparse set: pair updates/s,
#             wall s, planted terms found (and fgm_bench_poly2 on that store)
#   poly2     bench/run_poly2_scale.sh: whole-run s, APG share, RSS vs budget
# Issue 10:
#   kta       bench/run_kta.sh: the p-norm KTA path (solver = "pnorm_kta") on
#             madelon and arcene vs the paper's Tables 2 and 4 and vs `fgm path`
#   sifs      bench/run_sifs.sh: SIFS screening (solver = sifs) on syn1-3, a9a,
#             w8a, news20 binary and 20-class: rejection ratios and the speedup
#             against sifs.screening = none (bench/results/sifs.{csv,md})
# Issue 11:
#   exclusive bench/run_exclusive.sh: E-LASSO synthetic and a9a/w8a with random groups
#             vs LIBLINEAR -s 6; streamed FISTA iteration vs a scoring pass
#   mslr      bench/run_mslr.sh: MSLR vs LIBLINEAR -s 6 vs logistic FGM at matched
#             feature counts (news20 binary, a9a, w8a, ijcnn1, fgm synth --kind sparse)
# Issue 12:
#   mpi       bench/run_mpi.sh: news20 binary ingested with --partitions 4, trained
#             on 1 (no mpirun), 2 and 4 ranks: seconds, bytes per scoring pass,
#             collectives (measured and predicted), peak RSS per rank, model cmp
#             (bench/results/mpi.{csv,md})
#   summary   bench/results/summary.md (with before/after tables if
#             bench/results/before/ holds a "before" run)
# Knobs: BENCH_REPS (3) runs per timed measurement, BENCH_SCORING_REPS (7),
# BENCH_BIG_ROWS (24000), BENCH_BUDGET (64MB), FGM_SHARED_DATA (../shared/data),
# BENCH_WORK (bench/work), BENCH_RESULTS (bench/results);
# issue 9: BENCH_TALL_*, BENCH_HASH_*, BENCH_APG_*, BENCH_WEAK_*, BENCH_POLY2_*
# (bench/run_issue9.sh and bench/README.md, "Tall, hashed, dense and weak-signal shapes").
set -euo pipefail

fgm_arg=${1:-build/fgm}
FGM="$(cd "$(dirname "$fgm_arg")" && pwd)/$(basename "$fgm_arg")"
BUILD_DIR="$(dirname "$FGM")"
BENCH_BIN="$BUILD_DIR/fgm_bench_scoring"
TALL_BIN="$BUILD_DIR/fgm_bench_tall"
POLY2_BIN="$BUILD_DIR/fgm_bench_poly2"
PY=/usr/bin/python3
cd "$(dirname "$0")/.."
ROOT=$PWD
W=${BENCH_WORK:-bench/work}
R=${BENCH_RESULTS:-bench/results}
LIB="$PY bench/bench_lib.py"
REPS=${BENCH_REPS:-3}
SREPS=${BENCH_SCORING_REPS:-7}
BIG_ROWS=${BENCH_BIG_ROWS:-24000}
BUDGET=${BENCH_BUDGET:-64MB}
DATA=${FGM_SHARED_DATA:-$ROOT/../shared/data}
STEPS=${BENCH_STEPS:-data ingest scoring memory e2e recovery tall hashed madelon apg weak poly2 kta sifs exclusive mslr mpi summary}
# The configs of issue 2 (configs/*.toml other than demo at the time); add
# others by name, e.g. BENCH_CONFIGS="a9a news20".
CONFIGS=${BENCH_CONFIGS:-a9a w8a ijcnn1 leu colon-cancer madelon arcene}

for tool in "$FGM" "$BENCH_BIN" "$TALL_BIN" "$POLY2_BIN"; do
  [ -x "$tool" ] || { echo "run_all.sh: $tool not found; build first (make build)" >&2; exit 2; }
done
for tool in /usr/bin/time liblinear-train liblinear-predict "$PY"; do
  command -v "$tool" >/dev/null || { echo "run_all.sh: $tool missing (scripts/install_deps.sh)" >&2; exit 2; }
done
mkdir -p "$W/tmp" "$W/stores" "$R"
T0=$(date +%s)
LOAD_START=$(cut -d' ' -f1 /proc/loadavg)
log() { echo "== [$(( $(date +%s) - T0 ))s] $*" >&2; }
has_step() { [[ " $STEPS " == *" $1 "* ]]; }
kv() { $LIB kv "$1" < "$2"; }   # kv KEY FILE: value of KEY=... in FILE
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# ------------------------------------------------------------------ data
synth() {  # synth NAME ROWS TEST_ROWS SEED
  local dir=$W/$1 stamp="rows=$2 test_rows=$3 features=4096 relevant=300 seed=$4"
  if [ -f "$dir/truth.txt" ] && [ "$(cat "$dir/.params" 2>/dev/null)" = "$stamp" ]; then return; fi
  log "fgm synth $1 ($2 x 4096, 300 planted)"
  "$FGM" synth --out "$dir" --rows "$2" --test-rows "$3" --features 4096 --relevant 300 --seed "$4" >/dev/null
  echo "$stamp" > "$dir/.params"
}
if has_step data; then
  synth s82 4096 4096 1
  synth big "$BIG_ROWS" 1000 3
  synth small 1024 16 2
fi

# ---------------------------------------------------------------- ingest
# One /usr/bin/time -v'd `fgm ingest`; appends a row to ingest.csv.
ingest_run() {  # ingest_run DATASET INPUT BUDGET THREADS REP STORE
  local name=$1 input=$2 budget=$3 threads=$4 rep=$5 store=$6
  rm -rf "$store"
  /usr/bin/time -v -o "$W/tmp/time.txt" "$FGM" ingest "$input" --out "$store" \
    --memory-budget "$budget" --threads "$threads" --progress off > "$W/tmp/ingest.out"
  read -r wall rss user sys < <($LIB timev "$W/tmp/time.txt")
  local out=$W/tmp/ingest.out
  printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$name" "$threads" "$rep" "$budget" \
    "$(numfmt --from=iec "${budget%B}")" "$(stat -c %s "$input")" "$(kv seconds "$out")" \
    "$(kv text_mb_per_s "$out")" "$rss" "$wall" "$user" "$sys" "$(kv shards "$out")" \
    "$(kv spilled_runs "$out")" "$(kv rows "$out")" "$(kv nnz "$out")" "$(du -sb "$store" | cut -f1)" >> "$R/ingest.csv"
}
if has_step ingest; then
  echo "dataset,threads,rep,budget,budget_bytes,text_bytes,seconds,text_mb_per_s,peak_rss_bytes,wall_seconds,user_seconds,system_seconds,shards,spilled_runs,rows,nnz,store_bytes" > "$R/ingest.csv"
  for rep in $(seq 1 "$REPS"); do
    for t in 1 2; do
      log "ingest rep $rep threads $t: a9a, w8a, s82 (budget 256MB), big (budget $BUDGET)"
      ingest_run a9a "$DATA/a9a/a9a" 256MB "$t" "$rep" "$W/stores/a9a"
      ingest_run w8a "$DATA/w8a/w8a" 256MB "$t" "$rep" "$W/stores/w8a"
      ingest_run s82 "$W/s82/train.svm" 256MB "$t" "$rep" "$W/stores/s82"
      ingest_run big "$W/big/train.svm" "$BUDGET" "$t" "$rep" "$W/stores/big"
    done
  done
  "$FGM" ingest "$W/small/train.svm" --out "$W/stores/small" --memory-budget 256MB --progress off >/dev/null
fi

# --------------------------------------------------------------- scoring
if has_step scoring; then
  log "scoring pass vs memory bandwidth: s82 store ($SREPS reps)"
  "$BENCH_BIN" --store "$W/stores/s82" --reps "$SREPS" --threads 1 2 --label s82 > "$R/scoring_s82.jsonl"
  log "scoring pass vs memory bandwidth: big store ($SREPS reps, budget $BUDGET)"
  "$BENCH_BIN" --store "$W/stores/big" --reps "$SREPS" --threads 1 2 --label big \
    --memory-budget "$BUDGET" > "$R/scoring_big.jsonl"
  # The s82 store again after dropping its pages from the page cache
  # (posix_fadvise DONTNEED, no root needed): opening it reads it back through
  # readahead, so its pages sit in smaller page-cache folios than right after
  # ingest, and every pass takes more minor faults (see README).
  log "scoring pass vs memory bandwidth: s82 store read back from disk ($SREPS reps)"
  $PY -c "
import glob, os
for p in glob.glob('$W/stores/s82/*'):
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)"
  "$BENCH_BIN" --store "$W/stores/s82" --reps "$SREPS" --threads 1 2 --label s82-reread > "$R/scoring_s82_reread.jsonl"
  $LIB scoring_csv "$R/scoring.csv" "$R/scoring_s82.jsonl" "$R/scoring_s82_reread.jsonl" "$R/scoring_big.jsonl"
  if command -v valgrind >/dev/null; then
    log "callgrind: instructions per nonzero (small store, 1 thread)"
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$W/callgrind.out" \
      "$BENCH_BIN" --store "$W/stores/small" --callgrind --label small > "$W/tmp/cg.json" 2> "$W/tmp/cg.err"
    rm -f "$R/callgrind.csv"
    $LIB callgrind "$W/callgrind.out" "$(grep callgrind_pass "$W/tmp/cg.json" | $PY -c "import json,sys;print(json.load(sys.stdin)['nnz'])")" \
      "$R/callgrind.csv" small >&2
  else
    log "valgrind not installed: no instructions-per-nonzero figure"
  fi
fi

# ---------------------------------------------------------------- memory
if has_step memory; then
  # The same big text ingested with an 8MB budget: 1 MiB shards, ~800 of them.
  # Training on it with the same 64MB budget shows how resident memory depends
  # on the number of shards (bench/README.md, "Scoring pass, ingest and memory").
  # (made again when this build cannot open it, e.g. after a store format change)
  if [ ! -f "$W/stores/big-many-shards/manifest.fgm" ] ||
     ! "$TALL_BIN" --store "$W/stores/big-many-shards" --open-only > /dev/null 2>&1; then
    rm -rf "$W/stores/big-many-shards"
    log "ingest big text with --memory-budget 8MB (many small shards)"
    "$FGM" ingest "$W/big/train.svm" --out "$W/stores/big-many-shards" --memory-budget 8MB \
      --threads 2 --progress off > /dev/null
  fi
  echo "step,threads,rep,budget_bytes,store_bytes,shards,peak_rss_bytes,wall_seconds,train_seconds,budget_peak_bytes,selected,recovered,test_accuracy" > "$R/memory.csv"
  budget_bytes=$(numfmt --from=iec "${BUDGET%B}")
  for rep in $(seq 1 "$REPS"); do
    for cfg in "big 1" "big 2" "big-many-shards 2"; do
      read -r store t <<< "$cfg"
      store_bytes=$(du -sb "$W/stores/$store" | cut -f1)
      shards=$(find "$W/stores/$store" -name 'shard-*.fgs' | wc -l)
      log "train on store $store ($store_bytes bytes, $shards shards), engine.memory_budget=$BUDGET, threads $t, rep $rep"
      out=$W/mem/$store-t$t
      /usr/bin/time -v -o "$W/tmp/time.txt" "$FGM" train "data.train=$W/stores/$store" \
        "data.test=$W/big/test.svm" "data.truth=$W/big/truth.txt" "engine.memory_budget=$BUDGET" \
        "engine.threads=$t" fgm.B=10 fgm.max_iterations=10 "output.dir=$out" engine.progress=off \
        > "$W/tmp/train.out" 2> "$W/tmp/train.err"
      read -r wall rss _ _ < <($LIB timev "$W/tmp/time.txt")
      $LIB runjson "$out/run.json" > "$W/tmp/run.kv"
      echo "$store,$t,$rep,$budget_bytes,$store_bytes,$shards,$rss,$wall,$(kv train_seconds "$W/tmp/run.kv"),$(kv budget_peak_bytes "$W/tmp/run.kv"),$(kv selected "$W/tmp/run.kv"),$(kv recovered "$W/tmp/run.kv"),$(kv test_accuracy "$W/tmp/run.kv")" >> "$R/memory.csv"
    done
  done
fi

# ------------------------------------------------------------------- e2e
# LIBLINEAR reads plain 1-based LIBSVM text: decompress .bz2/.xz, drop blank lines.
ll_data() {  # ll_data PATH -> path of a LIBLINEAR-readable copy
  local src=$1 base; base=$(basename "$src"); base=${base%.bz2}; base=${base%.xz}
  local dst=$W/data/$(basename "$(dirname "$src")")/$base
  if [ ! -s "$dst" ]; then
    mkdir -p "$(dirname "$dst")"
    case "$src" in
      *.bz2) bzip2 -dc "$src" ;; *.xz) xz -dc "$src" ;; *) cat "$src" ;;
    esac | grep -v '^[[:space:]]*$' > "$dst.tmp"
    mv "$dst.tmp" "$dst"
  fi
  echo "$dst"
}
if has_step e2e; then
  echo "dataset,eval_on,fgm_features,fgm_cold_wall_s,fgm_ingest_s,fgm_warm_wall_s,fgm_train_s,fgm_accuracy,fgm_auc,fgm_peak_rss_bytes,ll5_features,ll5_C,ll5_fit_s,ll5_accuracy,ll6_features,ll6_C,ll6_fit_s,ll6_accuracy" > "$R/e2e.csv"
  rm -f "$R/liblinear_search.csv"
  for name in $CONFIGS; do
    cfg=configs/$name.toml
    [ -f "$cfg" ] || { log "e2e: $cfg not found, skipped"; continue; }
    d=$W/e2e/$name
    rm -rf "$d"; mkdir -p "$d"
    log "e2e $name: fgm train --config $cfg (cold: ingest + train), then $REPS warm runs"
    args=(train --config "$cfg" "output.dir=$d/run" "engine.cache_dir=$d/cache" engine.progress=off)
    /usr/bin/time -v -o "$d/time_cold.txt" "$FGM" "${args[@]}" > "$d/cold.out" 2> "$d/cold.err"
    read -r cold_wall cold_rss _ _ < <($LIB timev "$d/time_cold.txt")
    $LIB runjson "$d/run/run.json" > "$d/cold.kv"
    walls=(); trains=(); peak=$cold_rss
    for rep in $(seq 1 "$REPS"); do
      /usr/bin/time -v -o "$d/time_warm.txt" "$FGM" "${args[@]}" > "$d/warm.out" 2> "$d/warm.err"
      read -r wall rss _ _ < <($LIB timev "$d/time_warm.txt")
      $LIB runjson "$d/run/run.json" > "$d/warm.kv"
      walls+=("$wall"); trains+=("$(kv train_seconds "$d/warm.kv")")
      [ "$rss" -gt "$peak" ] && peak=$rss
    done
    features=$(kv selected "$d/warm.kv")
    train=$($LIB config "$cfg" train); test=$($LIB config "$cfg" test); bias=$($LIB config "$cfg" bias)
    if [ -n "$test" ]; then
      eval_on=test; eval_file=$test
      acc=$(kv test_accuracy "$d/warm.kv"); auc=$(kv test_auc "$d/warm.kv")
    else
      eval_on=train; eval_file=$train
      "$FGM" predict --model "$d/run/model.fgm" "$train" > "$d/predict.out"
      acc=$(kv accuracy "$d/predict.out"); auc=$(kv auc "$d/predict.out")
    fi
    ll_train=$(ll_data "$train"); ll_eval=$(ll_data "$eval_file")
    [ "$bias" = True ] && llb=1 || llb=0
    row="$name,$eval_on,$features,$cold_wall,$(kv ingest_seconds "$d/cold.kv"),$(median "${walls[@]}"),$(median "${trains[@]}"),$acc,$auc,$peak"
    for solver in 5 6; do
      log "e2e $name: LIBLINEAR -s $solver, C searched for $features nonzero weights"
      read -r c nnz secs model < <($LIB llsearch "$ll_train" "$solver" "$features" "$llb" "$d/ll" "$R/liblinear_search.csv" "$name")
      row="$row,$nnz,$c,$secs,$($LIB llacc "$model" "$ll_eval")"
    done
    echo "$row" >> "$R/e2e.csv"
  done
fi

# -------------------------------------------------------------- recovery
if has_step recovery; then
  echo "T,selected,recovered,test_accuracy,train_seconds" > "$R/recovery_fgm.csv"
  for T in $(seq 1 10); do
    log "recovery: fgm B=30 T=$T on s82"
    out=$W/rec/T$T
    "$FGM" train --config configs/demo.toml "data.train=$W/stores/s82" "data.test=$W/s82/test.svm" \
      "data.truth=$W/s82/truth.txt" fgm.B=30 "fgm.max_iterations=$T" fgm.eps_outer=0 \
      "output.dir=$out" "engine.cache_dir=$W/rec/cache" engine.progress=off > /dev/null 2> "$W/tmp/rec.err"
    $LIB runjson "$out/run.json" > "$W/tmp/run.kv"
    echo "$T,$(kv selected "$W/tmp/run.kv"),$(kv recovered "$W/tmp/run.kv"),$(kv test_accuracy "$W/tmp/run.kv"),$(kv train_seconds "$W/tmp/run.kv")" >> "$R/recovery_fgm.csv"
  done
  # 14 values of C, log-spaced over [1.4e-3, 7e-3]: ~15 .. ~500 nonzero weights
  # on this data (a wider grid, 1e-3 .. 1, only adds points far beyond FGM's
  # 30 .. 300 features; each fit parses the 216 MB text, ~10 s).
  cs=$($PY -c "print(' '.join(f'{1.4e-3 * 5 ** (i / 13):.4g}' for i in range(14)))")
  log "recovery: LIBLINEAR -s 5 over 14 C in [1.4e-3, 7e-3] (two fits at a time)"
  $LIB llgrid "$W/s82/train.svm" "$W/s82/test.svm" "$W/s82/truth.txt" 5 "$R/recovery_liblinear.csv" "$W/rec/ll" $cs
  $LIB recovery "$R/recovery_fgm.csv" "$R/recovery_liblinear.csv" "$R/recovery.csv"
fi

# ---------------------------------------------------------------- issue 9
# tall, hashed, madelon, apg, weak, poly2: shapes of issue 9 (own file, same shell).
. bench/run_issue9.sh

# ---------------------------------------------------------------- issue 10
if has_step kta; then
  log "kta: p-norm KTA path on madelon and arcene (bench/run_kta.sh)"
  BENCH_RESULTS="$R" BENCH_WORK="$W" bash bench/run_kta.sh "$BUILD_DIR" ||
    log "kta step failed (see bench/work/kta/*.log)"
fi
if has_step sifs; then
  log "sifs: bench/run_sifs.sh (grid subset and knobs in its header)"
  BENCH_WORK="$W" BENCH_RESULTS="$R" FGM_SHARED_DATA="$DATA" bash bench/run_sifs.sh "$FGM" || log "sifs: failed"
fi
# ------------------------------------------------------------ exclusive
# Seed 002 (solver = "exclusive"): E-LASSO synthetic, a9a/w8a vs LIBLINEAR -s 6,
# streamed FISTA iteration vs a scoring pass (bench/run_exclusive.sh).
if has_step exclusive; then
  log "exclusive: bench/run_exclusive.sh"
  bash bench/run_exclusive.sh "$FGM" || log "exclusive: failed (see bench/results/exclusive/)"
fi

# ---------------------------------------------------------------- issue 11
if has_step mslr; then
  log "mslr: bench/run_mslr.sh"
  bench/run_mslr.sh --fgm "$BUILD_DIR/fgm" || log "mslr step failed (see above)"
fi

# ---------------------------------------------------------------- issue 12
if has_step mpi; then
  log "mpi: bench/run_mpi.sh (news20 binary on 1, 2, 4 ranks)"
  BENCH_WORK="$W" BENCH_RESULTS="$R" FGM_SHARED_DATA="$DATA" bash bench/run_mpi.sh "$FGM" ||
    log "mpi: failed (see bench/work/mpi/)"
fi

# --------------------------------------------------------------- summary
if has_step summary; then
  $LIB machine "$R/machine.json" "loadavg_start=$LOAD_START" "loadavg_end=$(cut -d' ' -f1 /proc/loadavg)" \
    "bench_seconds=$(( $(date +%s) - T0 ))" "steps=$STEPS" "reps=$REPS" "scoring_reps=$SREPS" \
    "fgm_commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "date=$(date -u +%Y-%m-%dT%H:%MZ)"
  $LIB summary "$R" >&2
fi
log "done"
