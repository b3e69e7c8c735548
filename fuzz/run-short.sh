#!/usr/bin/env bash
# Builds the libFuzzer harnesses in build-fuzz (clang, ASan+UBSan) and runs each for
# SECONDS seconds (default 60) on a seed corpus made from scenarios/. Exits non-zero on the
# first crash; the crashing input is left in build-fuzz/artifacts/.
# Usage: fuzz/run-short.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
jobs="${FUZZ_BUILD_JOBS:-2}"
if ! command -v clang++ >/dev/null; then
  echo "fuzz/run-short.sh: clang++ not found; skipping the fuzz run"
  exit 0
fi
CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGTRACE_FUZZ=ON \
  -DAGTRACE_TESTS=OFF -DAGTRACE_CUDA=OFF >/dev/null
cmake --build build-fuzz -j "$jobs" --target fuzz_scenario fuzz_statement fuzz_run fuzz_report
fuzz/make-corpus.sh build-fuzz/corpus
mkdir -p build-fuzz/artifacts
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
for h in scenario statement run report; do
  mkdir -p "build-fuzz/corpus/$h-work"
  echo "== fuzz_$h for ${seconds}s"
  # -rss_limit_mb: a leaf within the scenario limits may still be large; the run harness
  # caps element data at 1 MiB itself.
  # LeakSanitizer on for every harness (the interpreter drops every .grad at the end of a
  # run, which breaks the create_graph=True reference cycle a fuzzer once found).
  if ! ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" build-fuzz/fuzz/fuzz_$h "build-fuzz/corpus/$h-work" "build-fuzz/corpus/$h" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
      -artifact_prefix="build-fuzz/artifacts/$h-" -print_final_stats=1 2>"build-fuzz/fuzz_$h.log"; then
    echo "fuzz_$h: FAILED (see build-fuzz/fuzz_$h.log and build-fuzz/artifacts/)"
    tail -n 60 "build-fuzz/fuzz_$h.log"
    status=1
  else
    grep -E '^(stat::number_of_executed_units|Done )' "build-fuzz/fuzz_$h.log" || true
    echo "fuzz_$h: no crash in ${seconds}s"
  fi
done
exit "$status"
