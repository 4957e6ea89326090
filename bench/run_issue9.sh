# Issue 9 benchmarks: tall, hashed, dense (madelon poly-2) and weak-signal
# shapes. Sourced by bench/run_all.sh (uses its FGM, TALL_BIN, POLY2_BIN, PY,
# LIB, W, R, DATA, log, has_step, kv); not run on its own. Every step writes
# its raw results to bench/results/ and prints its shape. A step whose command
# fails is recorded as failed (exit code and first error line in the CSV /
# JSONL) and the run goes on: the lead runs `make bench` once after merging.
#
# Knobs (environment):
#   BENCH_TALL_ROWS (3000000) BENCH_TALL_FEATURES (1000000) BENCH_TALL_NNZ (20)
#   BENCH_TALL_REPS (5)       BENCH_TALL_STORE (use this store, not bench/work/tall)
#   BENCH_HASH_ROWS (1000000) BENCH_HASH_NNZ (10) BENCH_HASH_VOCAB (200000)
#   BENCH_APG_B (40)          BENCH_APG_REPS (3)  BENCH_APG_MAX_ITERS (100)
#   BENCH_APG_EPS (0.001: apg.eps_inner, tighter than the default 0.15 so that a
#                 solve runs enough iterations for a per-iteration figure)
#   BENCH_MADELON_REPS (5)
#   BENCH_WEAK_ROWS (300000)  BENCH_WEAK_FEATURES (1000000) BENCH_WEAK_NNZ (20)
#   BENCH_WEAK_NOISE (0.47)   BENCH_WEAK_T (5)
#   BENCH_POLY2_ROWS / BENCH_POLY2_FEATURES (passed to run_poly2_scale.sh)

TALL_ROWS=${BENCH_TALL_ROWS:-3000000}
TALL_FEATURES=${BENCH_TALL_FEATURES:-1000000}
TALL_NNZ=${BENCH_TALL_NNZ:-20}
TALL_REPS=${BENCH_TALL_REPS:-5}
HASH_ROWS=${BENCH_HASH_ROWS:-1000000}
HASH_NNZ=${BENCH_HASH_NNZ:-10}
HASH_VOCAB=${BENCH_HASH_VOCAB:-200000}
APG_B=${BENCH_APG_B:-40}
APG_REPS=${BENCH_APG_REPS:-3}
APG_MAX_ITERS=${BENCH_APG_MAX_ITERS:-100}
APG_EPS=${BENCH_APG_EPS:-0.001}
MADELON_REPS=${BENCH_MADELON_REPS:-5}
WEAK_ROWS=${BENCH_WEAK_ROWS:-300000}
WEAK_FEATURES=${BENCH_WEAK_FEATURES:-1000000}
WEAK_NNZ=${BENCH_WEAK_NNZ:-20}
WEAK_NOISE=${BENCH_WEAK_NOISE:-0.47}
WEAK_T=${BENCH_WEAK_T:-5}

# One JSON line {"bench":"step_failed",...} in FILE for a command that failed.
record_failure() {  # record_failure FILE STEP EXIT ERRFILE
  local msg
  msg=$(grep -v '^[[:space:]]*$' "$4" 2>/dev/null | head -1 || true)
  $PY -c 'import json,sys; print(json.dumps({"bench":"step_failed","step":sys.argv[1],"exit":int(sys.argv[2]),"error":sys.argv[3]}))' \
    "$2" "$3" "$msg" >> "$1"
  log "$2 FAILED (exit $3): $msg"
}

# The tall store: BENCH_TALL_STORE, or bench/work/tall/store made once by
# `fgm synth --kind sparse` (made again when its parameters change or when this
# build cannot open it, e.g. an older store format).
TALL_STORE=""
tall_store() {
  if [ -n "$TALL_STORE" ]; then return 0; fi
  if [ -n "${BENCH_TALL_STORE:-}" ]; then TALL_STORE=$BENCH_TALL_STORE; return 0; fi
  local dir=$W/tall
  local stamp="rows=$TALL_ROWS features=$TALL_FEATURES nnz_per_row=$TALL_NNZ zipf=0.01 planted_cross=0 label_noise=0.2 values=real seed=1"
  if [ -f "$dir/store/manifest.fgm" ] && [ "$(cat "$dir/.params" 2>/dev/null)" = "$stamp" ] &&
     "$TALL_BIN" --store "$dir/store" --open-only > /dev/null 2>&1; then
    TALL_STORE=$dir/store; return 0
  fi
  log "fgm synth --kind sparse: tall store $TALL_ROWS x $TALL_FEATURES, $TALL_NNZ nonzeros per row (2 threads)"
  rm -rf "$dir"
  mkdir -p "$dir"
  if ! "$FGM" synth --kind sparse --rows "$TALL_ROWS" --test-rows 1000 --features "$TALL_FEATURES" \
      --nnz-per-row "$TALL_NNZ" --zipf 0.01 --planted-cross 0 --label-noise 0.2 --values real --seed 1 \
      --out "$dir" --store --threads 2 > "$dir/synth.out" 2> "$dir/synth.err"; then
    log "tall store: fgm synth failed: $(tail -1 "$dir/synth.err")"
    return 1
  fi
  echo "$stamp" > "$dir/.params"
  TALL_STORE=$dir/store
}

# ------------------------------------------------------------------ tall
if has_step tall; then
  : > "$R/tall.jsonl"
  if tall_store; then
    log "tall: shape $TALL_ROWS rows x $TALL_FEATURES features, $TALL_NNZ nnz/row ($TALL_STORE); fgm_bench_tall: linear pass vs naive CSC gather, 2 threads each, vs read bandwidth, $TALL_REPS reps"
    if "$TALL_BIN" --store "$TALL_STORE" --threads 2 --naive-threads 2 --reps "$TALL_REPS" --label tall \
        >> "$R/tall.jsonl" 2> "$W/tmp/tall.err"; then
      grep tall_summary "$R/tall.jsonl" | $PY -c 'import json,sys; j=json.loads(sys.stdin.read()); print("tall: pass (as fgm train runs it, resident: %s) %.3f s = %.3g nnz/s; naive gather %.3f s = %.3g nnz/s; pass/naive speed %.2fx (target >= 3; per CPU-second %.2fx); streamed pass %.3f s = %.2fx; first pass %.2f s; read BW %.1f GB/s; top-B equal: %s" % (j.get("resident"), j["pass_seconds"], j["pass_nnz_per_s"], j["naive_seconds"], j["naive_nnz_per_s"], j["speedup_over_naive"], j.get("speedup_per_cpu", 0), j.get("streamed_pass_seconds", 0), j.get("streamed_speedup_over_naive", 0), j.get("first_pass_seconds", 0), j["bandwidth_gb_per_s"], j["top_matches_naive"]))' >&2 || true
    else
      record_failure "$R/tall.jsonl" tall $? "$W/tmp/tall.err"
    fi
  else
    record_failure "$R/tall.jsonl" tall_synth 1 "$W/tall/synth.err"
  fi
fi

# ---------------------------------------------------------------- hashed
# One /usr/bin/time -v'd `fgm ingest` (guarded: --max-store-bytes, timeout);
# appends a row to hashed.csv.
hashed_ingest() {  # hashed_ingest NAME INPUT STORE MAX_BYTES
  local name=$1 input=$2 store=$3 max=$4 rc=0
  rm -rf "$store" "$store".tmp-* "$store.lock"
  timeout 600 /usr/bin/time -v -o "$W/tmp/time.txt" "$FGM" ingest "$input" --out "$store" \
    --memory-budget 1GB --threads 2 --progress off --max-store-bytes "$max" \
    > "$W/tmp/hashed.out" 2> "$W/tmp/hashed.err" || rc=$?
  rm -rf "$store".tmp-* "$store.lock"   # a timed-out ingest leaves its temp dir
  local wall=0 rss=0 user sys bytes=0 err=""
  [ -s "$W/tmp/time.txt" ] && { read -r wall rss user sys < <($LIB timev "$W/tmp/time.txt") || true; }
  [ -d "$store" ] && bytes=$(du -sb "$store" | cut -f1)
  [ "$rc" -ne 0 ] && err=$(grep -v '^[[:space:]]*$' "$W/tmp/hashed.err" | head -1 | tr ',"' ";'" | cut -c1-300 || true)
  echo "$name,$(stat -c %s "$input"),$rc,$(kv seconds "$W/tmp/hashed.out" 2>/dev/null),$wall,$rss,$(kv rows "$W/tmp/hashed.out" 2>/dev/null),$(kv features "$W/tmp/hashed.out" 2>/dev/null),$(kv nnz "$W/tmp/hashed.out" 2>/dev/null),$bytes,\"$err\"" >> "$R/hashed.csv"
  log "hashed: $name ingest exit $rc, $wall s, store $bytes bytes ${err:+($err)}"
}
if has_step hashed; then
  hdir=$W/hashed
  hstamp="rows=$HASH_ROWS nnz_per_row=$HASH_NNZ vocabulary=$HASH_VOCAB id_bits=40 zipf=1.0 seed=9"
  if [ ! -f "$hdir/two.svm" ] || [ "$(cat "$hdir/.params" 2>/dev/null)" != "$hstamp" ]; then
    log "hashed: bench/make_hashed.py ($HASH_ROWS rows, $HASH_NNZ tokens/row, vocabulary $HASH_VOCAB hashed into [0, 2^40))"
    rm -rf "$hdir"; mkdir -p "$hdir"
    $PY bench/make_hashed.py "$hdir" --rows "$HASH_ROWS" --nnz-per-row "$HASH_NNZ" --vocabulary "$HASH_VOCAB" \
      --id-bits 40 --seed 9 > "$hdir/make.out"
    echo "$hstamp" > "$hdir/.params"
  fi
  echo "input,text_bytes,exit,seconds,wall_seconds,peak_rss_bytes,rows,features,nnz,store_bytes,error" > "$R/hashed.csv"
  log "hashed: shape 2 rows, feature index 4,294,967,297 (targets: ingest < 1 s, store < 1 MB)"
  hashed_ingest two "$hdir/two.svm" "$hdir/two.store" 1GB
  log "hashed: shape $(cat "$hdir/make.out"): hashed ids vs dense ids (target: store bytes ratio <= 1.5)"
  hashed_ingest hashed "$hdir/hashed.svm" "$hdir/hashed.store" 4GB
  hashed_ingest dense "$hdir/dense.svm" "$hdir/dense.store" 4GB
  : > "$R/hashed_pass.jsonl"
  for name in hashed dense; do
    if [ -f "$hdir/$name.store/manifest.fgm" ]; then
      log "hashed: linear scoring pass on the $name store (fgm_bench_tall, 2 threads, 3 reps)"
      "$TALL_BIN" --store "$hdir/$name.store" --threads 2 --reps 3 --bandwidth-bytes 0 --label "$name" \
        >> "$R/hashed_pass.jsonl" 2> "$W/tmp/hpass.err" || record_failure "$R/hashed_pass.jsonl" "pass_$name" $? "$W/tmp/hpass.err"
    else
      log "hashed: no $name store, no scoring pass"
    fi
  done
fi

# --------------------------------------------------------------- madelon
if has_step madelon; then
  : > "$R/madelon_poly2.jsonl"
  mstore=$W/stores/madelon
  if [ ! -f "$mstore/manifest.fgm" ] || ! "$TALL_BIN" --store "$mstore" --open-only > /dev/null 2>&1; then
    rm -rf "$mstore"
    "$FGM" ingest "$DATA/madelon/madelon.xz" --out "$mstore" --features 500 --progress off > /dev/null 2> "$W/tmp/madelon.err" ||
      record_failure "$R/madelon_poly2.jsonl" madelon_ingest $? "$W/tmp/madelon.err"
  fi
  if [ -f "$mstore/manifest.fgm" ]; then
    log "madelon: shape 2000 x 500 dense, features.kind=poly2 (125,750 pairs); fgm_bench_poly2 2 threads, $MADELON_REPS reps, alpha random, next to its GEMM reference"
    "$POLY2_BIN" --store "$mstore" --threads 2 --reps "$MADELON_REPS" --alpha random \
      >> "$R/madelon_poly2.jsonl" 2> "$W/tmp/madelon.err" || record_failure "$R/madelon_poly2.jsonl" madelon $? "$W/tmp/madelon.err"
  fi
fi

# ------------------------------------------------------------------- apg
if has_step apg; then
  echo "rep,threads,B,exit,wall_seconds,peak_rss_bytes,score_seconds,solve_seconds,apg_iterations,apg_stop,seconds_per_apg_iteration,selected,error" > "$R/apg_tall.csv"
  if tall_store; then
    for rep in $(seq 1 "$APG_REPS"); do
      log "apg: shape tall store ($TALL_ROWS x $TALL_FEATURES, $TALL_NNZ nnz/row), fgm train B=$APG_B T=1 apg.eps_inner=$APG_EPS (2 threads), rep $rep: APG seconds per iteration"
      out=$W/apg/run; rm -rf "$out"; rc=0
      /usr/bin/time -v -o "$W/tmp/time.txt" "$FGM" train "data.train=$TALL_STORE" "fgm.B=$APG_B" fgm.max_iterations=1 \
        "apg.max_iterations=$APG_MAX_ITERS" "apg.eps_inner=$APG_EPS" engine.threads=2 engine.memory_budget=8GB engine.progress=off \
        "output.dir=$out" "engine.cache_dir=$W/apg/cache" > "$W/tmp/apg.out" 2> "$W/tmp/apg.err" || rc=$?
      wall=0; rss=0; read -r wall rss _ _ < <($LIB timev "$W/tmp/time.txt") || true
      if [ "$rc" -eq 0 ] && [ -f "$out/run.json" ]; then
        echo "$rep,2,$APG_B,0,$wall,$rss,$($LIB apgjson "$out/run.json")," >> "$R/apg_tall.csv"
      else
        err=$(grep -v '^[[:space:]]*$' "$W/tmp/apg.err" | head -1 | tr ',"' ";'" | cut -c1-300 || true)
        echo "$rep,2,$APG_B,$rc,$wall,$rss,,,,,,,\"$err\"" >> "$R/apg_tall.csv"
        log "apg FAILED (exit $rc): $err"
      fi
    done
    tail -n +2 "$R/apg_tall.csv" | awk -F, '{print "apg: rep " $1 ": " $9 " APG iterations in " $8 " s = " $11 " s/iteration (target <= 0.030)"}' >&2
  fi
fi

# ------------------------------------------------------------------ weak
if has_step weak; then
  wdir=$W/weak
  wstamp="rows=$WEAK_ROWS features=$WEAK_FEATURES nnz_per_row=$WEAK_NNZ label_noise=$WEAK_NOISE planted_linear=2 planted_cross=5 min_term_frequency=0.001 seed=4"
  : > "$R/weak_poly2.jsonl"
  if [ ! -f "$wdir/store/manifest.fgm" ] || [ "$(cat "$wdir/.params" 2>/dev/null)" != "$wstamp" ] ||
     ! "$TALL_BIN" --store "$wdir/store" --open-only > /dev/null 2>&1; then
    log "weak: fgm synth --kind sparse $WEAK_ROWS x $WEAK_FEATURES, label noise $WEAK_NOISE, 2 linear + 5 cross planted terms in >= 0.1% of rows"
    rm -rf "$wdir"; mkdir -p "$wdir"
    if "$FGM" synth --kind sparse --rows "$WEAK_ROWS" --test-rows 20000 --features "$WEAK_FEATURES" \
        --nnz-per-row "$WEAK_NNZ" --label-noise "$WEAK_NOISE" --planted-linear 2 --planted-cross 5 \
        --min-term-frequency 0.001 --seed 4 --out "$wdir" --store --threads 2 > "$wdir/synth.out" 2> "$wdir/synth.err"; then
      echo "$wstamp" > "$wdir/.params"
    else
      record_failure "$R/weak_poly2.jsonl" weak_synth $? "$wdir/synth.err"
    fi
  fi
  if [ -f "$wdir/store/manifest.fgm" ]; then
    log "weak: shape $WEAK_ROWS x $WEAK_FEATURES, $WEAK_NNZ nnz/row, label noise $WEAK_NOISE; fgm_bench_poly2 (2 threads, alpha = C·1, 2 reps)"
    "$POLY2_BIN" --store "$wdir/store" --threads 2 --reps 2 --alpha first \
      >> "$R/weak_poly2.jsonl" 2> "$W/tmp/weak.err" || record_failure "$R/weak_poly2.jsonl" weak_bench $? "$W/tmp/weak.err"
    log "weak: fgm train features.kind=poly2 B=10 T=$WEAK_T (2 threads, budget 2GB)"
    out=$wdir/train; rm -rf "$out"; rc=0
    /usr/bin/time -v -o "$W/tmp/time.txt" "$FGM" train "data.train=$wdir/store" "data.test=$wdir/test.svm" \
      "data.truth=$wdir/truth.txt" features.kind=poly2 fgm.B=10 "fgm.max_iterations=$WEAK_T" fgm.eps_outer=0 \
      fgm.bias=true fgm.C=1 engine.memory_budget=2GB engine.threads=2 engine.progress=off \
      "output.dir=$out" "engine.cache_dir=$wdir/cache" > "$W/tmp/weak.out" 2> "$W/tmp/weak.err" || rc=$?
    wall=0; rss=0; read -r wall rss _ _ < <($LIB timev "$W/tmp/time.txt") || true
    if [ "$rc" -eq 0 ] && [ -f "$out/run.json" ]; then
      $LIB poly2json "$out/run.json" weak_train "$wall" "$rss" >> "$R/weak_poly2.jsonl" 2> "$W/tmp/weak.err" ||
        record_failure "$R/weak_poly2.jsonl" weak_parse $? "$W/tmp/weak.err"
      tail -1 "$R/weak_poly2.jsonl" | $PY -c 'import json,sys; j=json.loads(sys.stdin.read()); print("weak: wall %.1f s, %.3g pair updates in %.1f s of scoring = %.3g pairs/s; planted found: linear %s/%s, cross %s/%s" % (j["wall_seconds"], j["pair_updates"], j["score_seconds"], j["pair_updates_per_second"], j["recovered"], j["planted"], j["recovered_cross"], j["planted_cross"]))' >&2 || true
    else
      record_failure "$R/weak_poly2.jsonl" weak_train "$rc" "$W/tmp/weak.err"
    fi
  fi
fi

# ----------------------------------------------------------------- poly2
if has_step poly2; then
  log "poly2: bash bench/run_poly2_scale.sh (shape ${BENCH_POLY2_ROWS:-1000000} x ${BENCH_POLY2_FEATURES:-15000000}, ~29 nnz/row, fgm synth --kind sparse; the default is the issue 3 scale run, 1.1e14 poly-2 dims; T=10 B=10 budget 1GB)"
  rm -f "$R/poly2_scale.jsonl"
  if ! BENCH_RESULTS="$R" bash bench/run_poly2_scale.sh "$BUILD_DIR" "$W/poly2" > "$W/tmp/poly2.out" 2> "$W/tmp/poly2.err"; then
    if [ -f "$R/poly2_scale.jsonl" ]; then   # the script got to fgm train, which failed: recorded there
      log "poly2: fgm train FAILED: $(grep '^fgm:' "$W/poly2/train.err" | tail -1 | cut -c1-300)"
    else
      log "poly2 FAILED: $(tail -1 "$W/tmp/poly2.err")"
      $PY -c 'import json,sys; print(json.dumps({"measure":"step_failed","error":sys.argv[1]}))' "$(tail -1 "$W/tmp/poly2.err")" \
        > "$R/poly2_scale.jsonl"
    fi
  fi
fi
