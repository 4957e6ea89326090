#!/usr/bin/env bash
# Seed 002 (exclusive sparsity, solver = "exclusive"): bench/README.md, "Exclusive sparsity".
#   bash bench/run_exclusive.sh build/fgm [elasso] [datasets] [streamed] [multiclass]   (no step: all)
# elasso      fgm_bench_exclusive: the paper's E-LASSO synthetic (400 x 4000, 100 groups
#             x 4 true features): Fista-pcp vs Fista-locp, support recovery with the true
#             groups, random groups (m = s/ln s) and the l1 baseline at matched sparsity.
# datasets    a9a, w8a and news20 binary (classes 1-10 vs 11-20) with random groups
#             (exclusive.expected_relevant = s), logistic, Fista-pcp, working set: one
#             `fgm path` over exclusive.path_lambda warm-started and one cold
#             (exclusive.path_warm_start=false): test accuracy and features per lambda,
#             against LIBLINEAR -s 6 (l1 logistic, no bias) at the nearest feature count
#             of a C grid; the warm start's saving (seconds, FISTA iterations).
#             Splits: bench/compare_liblinear.py's (w8a, news20: stratified 1/5 test split).
# streamed    fgm_bench_exclusive_streamed: a streamed FISTA iteration (working set off)
#             against one FGM scoring pass on the same resident store (a9a, w8a, news20).
# multiclass  news20, 20 classes (bench/multiclass_news20.py's split): one-vs-rest.
set -euo pipefail
FGM=${1:-build/fgm}
shift || true
STEPS=${*:-elasso datasets streamed multiclass}
BIN=$(dirname "$FGM")
OUT=bench/results/exclusive
WORK=bench/work/exclusive
mkdir -p "$OUT" "$WORK"
DATA=../shared/data
PY=/usr/bin/python3
want() { [[ " $STEPS " == *" $1 "* ]]; }

# The splits of compare_liblinear.py / multiclass_news20.py (made once).
prepare_splits() {
  $PY - <<'PY'
import sys
sys.path.insert(0, "bench")
import compare_liblinear as cl
import multiclass_news20 as mc
for name in ["news20", "w8a"]:
    cl.prepare(name, cl.DATASETS[name])
mc.prepare()
PY
}

# dataset -> "train test width s lambdas tolerance"
spec() {
  case $1 in
    a9a) echo "$DATA/a9a/a9a $DATA/a9a/a9a.t 123 40 [10.0,3.0,1.0,0.3] 1e-5" ;;
    w8a) echo "bench/work/compare_liblinear/w8a/train.svm bench/work/compare_liblinear/w8a/test.svm 300 40 [30.0,10.0,3.0,1.0] 1e-5" ;;
    news20) echo "bench/work/compare_liblinear/news20/train.svm bench/work/compare_liblinear/news20/test.svm 62061 100 [100.0,30.0,10.0,3.0,1.0] 1e-4" ;;
  esac
}

if want elasso; then
  echo "== E-LASSO synthetic"
  "$BIN/fgm_bench_exclusive" | tee "$OUT/elasso.csv"
fi

if want datasets || want streamed || want multiclass; then prepare_splits; fi

if want datasets; then
  echo "== datasets: exclusive path (warm, cold) and LIBLINEAR -s 6"
  for ds in a9a w8a news20; do
    read -r train test width s lambdas tolerance <<<"$(spec $ds)"
    for warm in true false; do
      # A finished path is kept (delete $WORK/<ds>-path-* to run it again).
      [ -f $WORK/$ds-path-$warm/path.csv ] && continue
      "$FGM" path data.train="$train" data.test="$test" data.features=$width solver=exclusive \
        exclusive.expected_relevant=$s "exclusive.path_lambda=$lambdas" exclusive.path_warm_start=$warm \
        exclusive.tolerance=$tolerance engine.threads=2 engine.cache_dir=$WORK/cache output.dir=$WORK/$ds-path-$warm \
        output.report=false >/dev/null 2>&1
    done
    echo "C,features,test_accuracy" > "$OUT/$ds-liblinear.csv"
    for C in 0.002 0.005 0.01 0.02 0.05 0.1 0.2 0.5 1 2 5 10 20 50; do
      liblinear-train -q -s 6 -c $C "$train" "$WORK/$ds.ll.model" >/dev/null
      nz=$(awk 'f{for(i=1;i<=NF;i++) if ($i+0!=0) c++} /^w$/{f=1} END{print c+0}' "$WORK/$ds.ll.model")
      acc=$(liblinear-predict "$test" "$WORK/$ds.ll.model" /dev/null | sed -n 's/Accuracy = \([0-9.]*\)%.*/\1/p')
      echo "$C,$nz,$(echo "scale=6; $acc/100" | bc)" >> "$OUT/$ds-liblinear.csv"
    done
  done
  $PY - "$WORK" "$OUT" <<'PY'
import csv, json, sys
work, out = sys.argv[1], sys.argv[2]
rows, warm_rows = [], []
for ds in ["a9a", "w8a", "news20"]:
    warm = list(csv.DictReader(open(f"{work}/{ds}-path-true/path.csv")))
    cold = list(csv.DictReader(open(f"{work}/{ds}-path-false/path.csv")))
    ll = [r for r in csv.DictReader(open(f"{out}/{ds}-liblinear.csv")) if int(r["features"]) > 0]
    for w in warm:
        k = int(w["selected"])
        near = min(ll, key=lambda r: (abs(int(r["features"]) - k), int(r["features"])))
        rows.append(dict(dataset=ds, **{"lambda": w["lambda"]}, exclusive_features=k,
                         exclusive_accuracy=w["test_accuracy"], liblinear_C=near["C"],
                         liblinear_features=near["features"], liblinear_accuracy=near["test_accuracy"],
                         difference_points=f'{100 * (float(w["test_accuracy"]) - float(near["test_accuracy"])):+.2f}'))
    agree = max(abs(float(a["train_objective"]) - float(b["train_objective"])) / abs(float(b["train_objective"]))
                for a, b in zip(warm, cold))
    warm_rows.append(dict(dataset=ds, points=len(warm),
                          warm_seconds=f'{float(warm[-1]["seconds"]):.3f}', cold_seconds=f'{float(cold[-1]["seconds"]):.3f}',
                          warm_fista_iterations=sum(int(r["fista_iterations"]) for r in warm),
                          cold_fista_iterations=sum(int(r["fista_iterations"]) for r in cold),
                          warm_store_passes=sum(int(r["store_passes"]) for r in warm),
                          cold_store_passes=sum(int(r["store_passes"]) for r in cold),
                          max_relative_objective_difference=f"{agree:.2e}"))
for name, data in [("datasets.csv", rows), ("warm_start.csv", warm_rows)]:
    with open(f"{out}/{name}", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(data[0].keys()))
        w.writeheader()
        w.writerows(data)
    print(open(f"{out}/{name}").read())
PY
fi

if want streamed; then
  echo "== streamed FISTA iteration vs one scoring pass"
  : > "$OUT/streamed.csv"
  for ds in a9a w8a news20; do
    read -r train test width s lambdas tolerance <<<"$(spec $ds)"
    # The store the datasets step trained on (ingest it now when that step did not run).
    [ -f $WORK/$ds-path-true/path.json ] || "$FGM" path data.train="$train" data.features=$width solver=exclusive \
      exclusive.random_groups=2 "exclusive.path_lambda=[1.0]" exclusive.max_iterations=1 engine.cache_dir=$WORK/cache \
      output.dir=$WORK/$ds-path-true output.report=false >/dev/null 2>&1 || true
    store=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['data']['store'])" $WORK/$ds-path-true/path.json)
    echo "# $ds" >> "$OUT/streamed.csv"
    "$BIN/fgm_bench_exclusive_streamed" "$store" 2 20 | tee -a "$OUT/streamed.csv"
  done
fi

if want multiclass; then
  echo "== news20, 20 classes, one-vs-rest"
  M=bench/work/multiclass_news20
  "$FGM" train data.train=$M/train.svm data.test=$M/test.svm data.features=62061 solver=exclusive \
    exclusive.expected_relevant=100 exclusive.lambda=3 exclusive.tolerance=1e-4 engine.threads=2 \
    engine.cache_dir=$WORK/cache output.dir=$WORK/news20-multiclass output.report=false | tee "$OUT/multiclass.txt"
  $PY - "$WORK/news20-multiclass/run.json" <<'PY' | tee -a "$OUT/multiclass.txt"
import json, sys
r = json.load(open(sys.argv[1]))
cls = r["classes"]
print("classes", len(cls), "features per class", [len(c["selected_features"]) for c in cls])
print("seconds per class", [round(c["train_seconds"], 1) for c in cls], "total", round(r["resources"]["train_seconds"] if "resources" in r and "train_seconds" in r["resources"] else sum(c["train_seconds"] for c in cls), 1))
PY
fi
