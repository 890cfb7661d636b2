#!/usr/bin/env bash
# A long fuzz campaign: fuzz/campaign.sh SECONDS [TARGET...] runs each target
# (default: all) for SECONDS, one after the other, at the lowest CPU priority
# in one process (-jobs=1), starting from its corpus in fuzz/corpus/<target>.
# After a crash the target starts again for the time left, so one bug does
# not end the campaign; crashing inputs are kept in fuzz/artifacts/<target>/.
# The campaign's corpus grows in fuzz/target/campaign/<target>; logs and a
# summary (executions, exec/s, coverage, crashes per target) are written to
# fuzz/target/campaign/. Then `fuzz/minimize.sh` merges what it found into
# fuzz/corpus.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:?usage: campaign.sh SECONDS [TARGET...]}
shift
targets=${*:-$(./targets.sh)}

out=target/campaign
# A copy of the binaries, so a rebuild during the campaign does not change it.
mkdir -p "$out/bin"
built=$(./build.sh)
for t in $targets; do cp "$built/$t" "$out/bin/$t"; done
bin=$out/bin
summary="$out/summary.txt"
echo "# $(date -u +%FT%TZ) $(rustc --version), $secs s per target" >>"$summary"
for t in $targets; do
  mkdir -p "$out/$t" "artifacts/$t"
  log="$out/$t.log"
  : >"$log"
  end=$(($(date +%s) + secs))
  crashes=0 execs=0
  while left=$((end - $(date +%s))) && [ "$left" -gt 0 ]; do
    # -jobs=1 would send the output to fuzz-0.log in the working directory;
    # one plain process is the same run with its log where we want it.
    if nice -n 19 "$bin/$t" -max_total_time="$left" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="artifacts/$t/" \
        "$out/$t" "corpus/$t" >"$log.run" 2>&1; then
      :
    else
      crashes=$((crashes + 1))
    fi
    cat "$log.run" >>"$log"
    # The last progress line counts the executions of this run.
    n=$(grep -Eo '^#[0-9]+' "$log.run" | tail -n 1 | tr -d '#')
    execs=$((execs + ${n:-0}))
  done
  rm -f "$log.run"
  cov=$(grep -E '^#[0-9]+' "$log" | grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[^ ]+' | tail -n 1)
  printf '%s: %d executions, %d exec/s, %s, %d crashes\n' \
    "$t" "$execs" $((execs / secs)) "$cov" "$crashes" | tee -a "$summary"
done
