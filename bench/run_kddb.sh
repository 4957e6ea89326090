#!/usr/bin/env bash
# The FGM paper's kddb shape (Table 1: 19,264,097 rows x 29,890,095 features,
# ~29 nonzeros a row, binary values, Zipf-popular features whose columns are
# dense), made with the engine's own generator, then trained as a new user
# would. Prints one line per run: per-iteration scoring and solve seconds,
# their totals and ratio, certified gaps, accuracy, peak RSS.
#
#   bash bench/run_kddb.sh build/fgm [WORK_DIR]
#
# Knobs (environment): KDD_ROWS (19264097) KDD_TEST_ROWS (748401)
#   KDD_FEATURES (29890095) KDD_THREADS (2) KDD_BUDGETS ("10GB 2GB")
#   KDD_METHODS ("auto apg": apg.method values to compare; apg is the
#   first-order solver of the paper) KDD_PATH (1: also the path
#   [10,20,50,100,200] at 4GB) KDD_LIBLINEAR (0; "store": LIBLINEAR -s 5
#   trained from the store's rows by fgm_liblinear_store, beside FGM, ~20 GB
#   of memory; 1: also writes the training text and runs liblinear-train on
#   it, whose parse of 6 GB takes over 40 minutes) KDD_LIBLINEAR_C (its
#   values of C).
set -euo pipefail
FGM=${1:?usage: run_kddb.sh FGM [WORK_DIR]}
W=${2:-bench/work/kdd}
ROWS=${KDD_ROWS:-19264097}
TEST_ROWS=${KDD_TEST_ROWS:-748401}
FEATURES=${KDD_FEATURES:-29890095}
THREADS=${KDD_THREADS:-2}
BUDGETS=${KDD_BUDGETS-"10GB 2GB"}  # set but empty: no train runs
METHODS=${KDD_METHODS-"auto apg"}
mkdir -p "$W"

if [ ! -f "$W/store/manifest.fgm" ]; then
  echo "# generating: $ROWS x $FEATURES, 29 nonzeros a row, Zipf 1.05 ($THREADS threads)"
  "$FGM" synth --kind sparse --out "$W" --rows "$ROWS" --test-rows "$TEST_ROWS" --features "$FEATURES" \
    --store --threads "$THREADS" --memory-budget 3GB
fi

summary() {  # summary RUN_DIR TIME_FILE LABEL
  python3 - "$1/run.json" "$2" "$3" <<'EOF'
import json, re, sys
run = json.load(open(sys.argv[1]))
rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[2]).read())
its = run["iterations"]
score = sum(i["score_seconds"] for i in its)
solve = sum(i["solve_seconds"] for i in its)
gaps = " ".join("%.1e" % i["apg_relative_gap"] for i in its)
steps = " ".join(str(i["apg_iterations"]) for i in its)
print(f"{sys.argv[3]}: iterations {len(its)} selected {its[-1]['selected']} objective {its[-1]['objective']:.6g} "
      f"score_s {score:.1f} ({' '.join('%.1f' % i['score_seconds'] for i in its)}) "
      f"solve_s {solve:.1f} ({' '.join('%.1f' % i['solve_seconds'] for i in its)}) solve/score {solve / score:.2f} "
      f"solver_iterations [{steps}] gaps [{gaps}] accuracy {run['test']['accuracy']:.4f} "
      f"peak_rss_MiB {int(rss.group(1)) / 1024 if rss else float('nan'):.0f} train_s {run['train_seconds']:.1f}")
EOF
}

for method in $METHODS; do
  for budget in $BUDGETS; do
    out="$W/train-$method-$budget"
    rm -rf "$out"
    /usr/bin/time -v "$FGM" train data.train="$W/store" data.test="$W/test.svm" fgm.B=10 fgm.max_iterations=5 \
      engine.threads="$THREADS" engine.memory_budget="$budget" apg.method="$method" output.dir="$out" \
      engine.progress=off > "$out.log" 2> "$out.time" || { echo "$method $budget: exit $? (see $out.time)"; continue; }
    summary "$out" "$out.time" "train B=10 T=5 apg.method=$method budget=$budget threads=$THREADS"
    "$FGM" inspect "$out/model.fgm" | grep -v -i "created\|seconds\|memory_budget\|output.dir" > "$out.model.txt" || true
  done
done
first=""
for budget in $BUDGETS; do
  f="$W/train-auto-$budget.model.txt"
  [ -f "$f" ] || continue
  if [ -z "$first" ]; then first=$f; elif cmp -s "$first" "$f"; then echo "models at $BUDGETS: identical"; else echo "models differ: $first $f"; fi
done

if [ "${KDD_PATH:-1}" = 1 ]; then
  out="$W/path"
  rm -rf "$out"
  /usr/bin/time -v "$FGM" path data.train="$W/store" data.test="$W/test.svm" 'path.features=[10,20,50,100,200]' \
    engine.threads="$THREADS" engine.memory_budget=4GB output.dir="$out" engine.progress=off > "$out.log" 2> "$out.time"
  echo "path [10,20,50,100,200] at 4GB: $(grep -E 'seconds=' "$out.log" | tail -1) peak RSS $(grep 'Maximum resident' "$out.time")"
  cut -d, -f1-8 "$out/path.csv"
fi

if [ "${KDD_LIBLINEAR:-0}" = store ]; then
  /usr/bin/time -v "$(dirname "$FGM")/fgm_liblinear_store" --store "$W/store" --test "$W/test.svm" \
    --C ${KDD_LIBLINEAR_C:-2e-7 3e-7 5e-7 1e-6 2e-6 5e-6 1e-5 3e-5 1e-4} 2> "$W/ll-store.time" | tee "$W/ll-store.jsonl"
  grep -E 'Elapsed|Maximum resident' "$W/ll-store.time"
fi
if [ "${KDD_LIBLINEAR:-0}" = 1 ]; then
  if [ ! -f "$W/text/train.svm" ]; then
    "$FGM" synth --kind sparse --out "$W/text" --rows "$ROWS" --test-rows "$TEST_ROWS" --features "$FEATURES" \
      --threads "$THREADS" --memory-budget 3GB
  fi
  # C_min = 1/(2 max_j |sum_i y_i x_ij|) is about 1.5e-7 on this shape (from the test
  # rows, scaled): the grid spans the feature counts of the path.
  for C in ${KDD_LIBLINEAR_C:-"3e-7 1e-6 3e-6 1e-5"}; do
    /usr/bin/time -v liblinear-train -s 5 -c "$C" "$W/text/train.svm" "$W/ll-$C.model" > /dev/null 2> "$W/ll-$C.time"
    nnz=$(awk 'f&&$1!=0{n++} /^w$/{f=1} END{print n+0}' "$W/ll-$C.model")
    acc=$(liblinear-predict "$W/text/test.svm" "$W/ll-$C.model" /dev/null | grep -o '[0-9.]*%')
    echo "liblinear -s 5 -c $C: nonzero $nnz accuracy $acc $(grep -E 'Elapsed|Maximum resident' "$W/ll-$C.time" | tr '\n' ' ')"
  done
fi
