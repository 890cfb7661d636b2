#!/usr/bin/env bash
# Minimizes each target's corpus (what `cargo fuzz cmin` does): the smallest
# set of inputs from fuzz/corpus/<target> and the campaign's corpus in
# fuzz/target/campaign/<target> that keeps all their coverage replaces
# fuzz/corpus/<target>.
set -euo pipefail
cd "$(dirname "$0")"
targets=${*:-"decode admin config core core_model store_ops"}
bin=$(./build.sh)
for t in $targets; do
  new=$(mktemp -d)
  mkdir -p "target/campaign/$t"
  "$bin/$t" -merge=1 -timeout=10 "$new" "corpus/$t" "target/campaign/$t" >"target/campaign/$t.merge.log" 2>&1
  rm -rf "corpus/$t"
  mv "$new" "corpus/$t"
  chmod 755 "corpus/$t"
  echo "$t: $(ls "corpus/$t" | wc -l) inputs, $(du -sk "corpus/$t" | cut -f1) KiB"
done
