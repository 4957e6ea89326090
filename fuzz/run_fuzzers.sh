#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan) and runs each for
# FUZZ_SECONDS seconds. Exits 1 if any harness found something (crash, leak,
# timeout, out-of-memory, sanitizer report) and prints the reproducer's path.
# Usage: fuzz/run_fuzzers.sh <build_dir> <seconds> [harness...]
#   (harnesses: libsvm_reader config model_reader store_open; default all)
# Environment: FUZZ_SEED (default 1), FUZZ_RSS_MB (2048), FUZZ_TIMEOUT (25 s
# per input: generous, shared CI machines are slow), FUZZ_NICE (niceness, default 0), FUZZ_NO_BUILD=1 (reuse an
# existing build and seeds, e.g. for harnesses run in parallel).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:?build dir}
seconds=${2:?seconds per harness}
shift 2
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(libsvm_reader config model_reader store_open)
seed=${FUZZ_SEED:-1}
rss_mb=${FUZZ_RSS_MB:-2048}
timeout_s=${FUZZ_TIMEOUT:-25}
niceness=${FUZZ_NICE:-0}

seeds="$build_dir/fuzz-seeds"
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DFGM_FUZZ=ON \
    -DFGM_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
  cmake --build "$build_dir" -j "$(nproc 2>/dev/null || echo 2)" --target fuzzers
  # Binary seeds (models, stores) are written by fgm's own writers at run time.
  rm -rf "$seeds"
  "$build_dir/fuzz/fuzz_make_seeds" "$seeds"
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for h in "${harnesses[@]}"; do
  work="$build_dir/fuzz-corpus/$h"      # grows during the run; the committed seeds stay as they are
  findings="$build_dir/fuzz-findings/$h"
  rm -rf "$work" "$findings"
  mkdir -p "$work" "$findings"
  inputs=("$work")
  [ -d "fuzz/corpus/$h" ] && inputs+=("fuzz/corpus/$h")
  [ -d "$seeds/$h" ] && inputs+=("$seeds/$h")
  log="$build_dir/fuzz-$h.log"
  echo "fuzz: $h for ${seconds}s (seed $seed, log $log)" >&2
  status=0
  nice -n "$niceness" "$build_dir/fuzz/fuzz_$h" -max_total_time="$seconds" -seed="$seed" \
    -rss_limit_mb="$rss_mb" -malloc_limit_mb="$rss_mb" -timeout="$timeout_s" -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$findings/" "${inputs[@]}" >"$log" 2>&1 || status=$?
  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE' "$log" | sed "s/^/fuzz: $h: /" >&2 || true
  echo "fuzz: $h: corpus $(find "$work" -type f | wc -l) files" >&2
  reproducers=$(find "$findings" -type f | sort)
  if [ "$status" -ne 0 ] || [ -n "$reproducers" ]; then
    failed+=("$h")
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|fgm internal error|uncaught exception' "$log" >&2 || true
    for r in $reproducers; do
      echo "fuzz: $h: FINDING, reproducer $r (rerun: $build_dir/fuzz/fuzz_$h $r)" >&2
    done
    [ -z "$reproducers" ] && echo "fuzz: $h: exit status $status, see $log" >&2
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: findings in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no findings (${#harnesses[@]} harnesses, ${seconds}s each)" >&2
