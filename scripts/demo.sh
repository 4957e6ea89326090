#!/usr/bin/env bash
# make demo: Section 8.2 synthetic data -> fgm train (configs/demo.toml) ->
# planted features recovered and test accuracy.
set -euo pipefail
fgm=${1:-build/fgm}
out=${2:-demo-out}
cd "$(dirname "$0")/.."
if [ ! -f "$out/data/truth.txt" ]; then
  echo "== generating Section 8.2 synthetic data (4096 x 4096, 300 planted features)" >&2
  "$fgm" synth --out "$out/data" --rows 4096 --test-rows 4096 --features 4096 --relevant 300 --seed 1
fi
echo "== training FGM with configs/demo.toml" >&2
"$fgm" train --config configs/demo.toml "output.dir=$out/run" "engine.cache_dir=$out/cache" \
  "data.train=$out/data/train.svm" "data.test=$out/data/test.svm" "data.truth=$out/data/truth.txt"
echo "== run log: $out/run/run.json; model: $out/run/model.fgm (fgm inspect $out/run/model.fgm)" >&2
