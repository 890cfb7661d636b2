#!/usr/bin/env bash
# The test suite's short fuzz run: builds every fuzz target with stable cargo
# (fuzz/build.sh, profile fuzz-short: no cargo-fuzz, no nightly) and runs
# each for FUZZ_SECONDS (default 10) over its corpus in fuzz/corpus/<target>
# (FUZZ_TARGETS picks targets). New inputs go to a temporary directory, so
# the repo's corpus stays as it is. A crash, a failed check, an input that
# takes over 10 s or a run over 2 GB fails the script; the input is kept in
# fuzz/artifacts/<target>/. Ends with `N passed, N failed, 0 skipped`
# (one per target).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-10}
targets=${FUZZ_TARGETS:-$(fuzz/targets.sh)}

# libfuzzer-sys compiles libFuzzer itself, which takes a C++ compiler.
if ! command -v c++ >/dev/null; then
  echo "== installing g++"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq g++ >/dev/null
fi

echo "== building fuzz targets"
bin=$(FUZZ_PROFILE=${FUZZ_PROFILE:-fuzz-short} fuzz/build.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=""
for t in $targets; do
  echo "== fuzz $t for ${secs}s"
  mkdir -p "$work/$t" "fuzz/artifacts/$t"
  if ! "$bin/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" \
      "$work/$t" "fuzz/corpus/$t" >"$work/$t.log" 2>&1; then
    failed="$failed $t"
    tail -n 60 "$work/$t.log"
  fi
  # (A crashed run may print no stats: no match must not end the script.)
  { grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec' "$work/$t.log" || true; } \
    | tr '\n' ' '
  echo
done
n=$(echo $targets | wc -w)
nfailed=$(echo $failed | wc -w)
if [ -n "$failed" ]; then
  echo "fuzz: crashes in:$failed (inputs in fuzz/artifacts/)"
else
  echo "fuzz: no crash in $n targets"
fi
echo "$((n - nfailed)) passed, $nfailed failed, 0 skipped"
[ -z "$failed" ]
