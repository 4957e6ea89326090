#!/usr/bin/env bash
# Issue 3 scale benchmark: 1,000,000 rows x 15,000,000 base features (~29
# nonzeros per row, > 10^14 poly-2 dimensions), written straight into a store
# by `fgm synth --kind sparse --store`; then
#   1. fgm_bench_poly2: dgemm peak, median poly-2 scoring pass, pair updates/s/core;
#   2. the same on a dense 60000 x 256 Gaussian store: dense-block GFLOP/s vs the peak;
#   3. a full `fgm train` (features.kind=poly2, T=10, B=10, engine.memory_budget=1GB)
#      under /usr/bin/time -v: wall time, peak RSS, planted terms recovered.
# Usage: bash bench/run_poly2_scale.sh [build-dir] [work-dir]   (results: $BENCH_RESULTS, default bench/results)
# BENCH_TRAIN_ONLY=1 skips steps 1 and 2 (only the train run, e.g. to compare
# two builds' training time).
# Knobs (for quick checks of the script; the figures above use the defaults):
# BENCH_POLY2_ROWS (1000000), BENCH_POLY2_TEST_ROWS (100000), BENCH_POLY2_FEATURES
# (15000000). A store is made again when these change or when this build cannot
# open it (fgm_bench_tall --open-only: e.g. after a store format change).
set -euo pipefail
build=${1:-build}
work=${2:-bench/work/poly2}
out=${BENCH_RESULTS:-bench/results}/poly2_scale.jsonl
rows=${BENCH_POLY2_ROWS:-1000000}
test_rows=${BENCH_POLY2_TEST_ROWS:-100000}
features=${BENCH_POLY2_FEATURES:-15000000}
mkdir -p "$work" "$(dirname "$out")"
fgm="$build/fgm"
opens() { [ -f "$1/manifest.fgm" ] && "$build/fgm_bench_tall" --store "$1" --open-only > /dev/null 2>&1; }
stamp="rows=$rows test_rows=$test_rows features=$features seed=3"
if ! opens "$work/big/store" || [ "$(cat "$work/big/.params" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$work/big"
  "$fgm" synth --kind sparse --rows "$rows" --test-rows "$test_rows" --features "$features" --store --threads 2 \
    --seed 3 --out "$work/big" >&2
  echo "$stamp" > "$work/big/.params"
fi
train_only=${BENCH_TRAIN_ONLY:-0}
if [ "$train_only" != 1 ] && ! opens "$work/dense/store"; then
  rm -rf "$work/dense"
  "$fgm" synth --out "$work/dense" --rows 60000 --test-rows 1000 --features 256 --relevant 20 --seed 2 >&2
  "$fgm" ingest "$work/dense/train.svm" --out "$work/dense/store" --threads 2 --memory-budget 512MB >&2
fi
{
  echo "{\"measure\":\"machine\",\"nproc\":$(nproc),\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
  [ "$train_only" = 1 ] && exit 0
  "$build/fgm_bench_poly2" --store "$work/big/store" --threads 2 --reps 3 --alpha first
  "$build/fgm_bench_poly2" --store "$work/big/store" --threads 1 --reps 3 --alpha first | grep summary
  "$build/fgm_bench_poly2" --store "$work/dense/store" --threads 2 --reps 3 --alpha random | grep -E "summary|dgemm"
} | tee "$out.tmp"
rm -rf "$work/train"
rc=0
/usr/bin/time -v -o "$work/time.txt" "$fgm" train "data.train=$work/big/store" "data.test=$work/big/test.svm" \
  "data.truth=$work/big/truth.txt" features.kind=poly2 fgm.B=10 fgm.max_iterations=10 fgm.eps_outer=0 \
  fgm.bias=true fgm.C=1 engine.memory_budget=1GB engine.threads=2 engine.progress=off \
  "output.dir=$work/train" "engine.cache_dir=$work/cache" > "$work/train.out" 2> "$work/train.err" || rc=$?
# A failed run (exit rc) is recorded too: its error line, and the passes its
# "info: iter" lines report (run.json is written only by a run that ends).
/usr/bin/python3 - "$work" "$rc" >> "$out.tmp" <<'PY'
import json, os, re, sys
work, rc = sys.argv[1], int(sys.argv[2])
wall, rss = "", 0
for line in open(os.path.join(work, "time.txt")):
    if "Elapsed (wall clock)" in line:
        wall = line.split()[-1]
    elif "Maximum resident set size" in line:
        rss = int(line.split()[-1])
err = [l.strip() for l in open(os.path.join(work, "train.err")) if l.startswith("fgm:")]
print(json.dumps({"measure": "poly2_train", "T": 10, "B": 10, "budget": "1GB", "exit": rc, "wall": wall,
                  "peak_rss_kb": rss, "result": open(os.path.join(work, "train.out")).read().strip(),
                  "error": err[-1] if err else ""}))
run = os.path.join(work, "train", "run.json")
if rc == 0 and os.path.exists(run):
    r = json.load(open(run))
    its = r["iterations"]
    print(json.dumps({"measure": "poly2_train_passes",
                      "score_seconds": [round(i["score_seconds"], 3) for i in its],
                      "solve_seconds": [round(i["solve_seconds"], 3) for i in its],
                      "apg_iterations": [i.get("apg_iterations") for i in its],
                      "pair_updates": [i.get("pair_updates") for i in its],
                      "candidates_scored": [i["candidates_scored"] for i in its],
                      "train_seconds": r["train_seconds"], "peak_rss_bytes": r.get("peak_rss_bytes"),
                      "memory_budget_bytes": r.get("memory_budget_bytes"),
                      "test": r.get("test"), "truth": r.get("truth")}))
else:
    its = [re.search(r"scored (\d+) candidates, score ([\d.]+)s, solve ([\d.]+)s \((\d+) APG its\)", l)
           for l in open(os.path.join(work, "train.err")) if l.startswith("info: iter")]
    its = [m for m in its if m]
    print(json.dumps({"measure": "poly2_train_passes", "source": "train.err info lines (the run failed)",
                      "score_seconds": [float(m.group(2)) for m in its],
                      "solve_seconds": [float(m.group(3)) for m in its],
                      "apg_iterations": [int(m.group(4)) for m in its],
                      "candidates_scored": [int(m.group(1)) for m in its],
                      "train_seconds": None}))
PY
tail -2 "$out.tmp"
mv "$out.tmp" "$out"
exit "$rc"
