#!/usr/bin/env bash
# Minimizes each target's corpus, like `cargo fuzz cmin` but smaller: a
# small set of inputs from fuzz/corpus/<target> and the campaign's corpus in
# fuzz/target/campaign/<target> that covers every code edge either covers
# (libFuzzer's set-cover merge on edges, not hit counts) replaces
# fuzz/corpus/<target>. Keeping hit counts too (FUZZ_MERGE_FLAGS=
# -use_counters=1) keeps several times more files, megabytes for config.
set -euo pipefail
cd "$(dirname "$0")"
targets=${*:-$(./targets.sh)}
bin=$(./build.sh)
for t in $targets; do
  new=$(mktemp -d)
  mkdir -p "target/campaign/$t"
  "$bin/$t" -set_cover_merge=1 ${FUZZ_MERGE_FLAGS:--use_counters=0} -timeout=10 "$new" "corpus/$t" "target/campaign/$t" >"target/campaign/$t.merge.log" 2>&1
  rm -rf "corpus/$t"
  mv "$new" "corpus/$t"
  chmod 755 "corpus/$t"
  echo "$t: $(ls "corpus/$t" | wc -l) inputs, $(cat "corpus/$t"/* | wc -c) bytes"
done
