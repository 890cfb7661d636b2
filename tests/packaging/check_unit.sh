#!/usr/bin/env bash
# Checks packaging/systemd/gearshift.service with `systemd-analyze verify`
# (its ExecStart pointed at the binary under test, since /usr/bin/gearshift
# is not installed here), and that the binary takes the unit's flags.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${GEARSHIFT:-$PWD/target/debug/gearshift}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s#/usr/bin/gearshift#$BIN#" packaging/systemd/gearshift.service > "$tmp/gearshift.service"
# The unit's Documentation= names the man page: generate it where man looks.
"$BIN" man --out "$tmp/man/man1"
out=$(MANPATH="$tmp/man" systemd-analyze verify "$tmp/gearshift.service" 2>&1) || { echo "$out"; echo "FAIL unit"; exit 1; }
# Warnings about this machine (no systemd running) are not the unit's.
if echo "$out" | grep -v -e "Failed to connect" -e "^$" | grep -i "gearshift.service"; then
  echo "FAIL unit: systemd-analyze complained"
  exit 1
fi
help=$("$BIN" serve --help)
grep -q -- "--data-dir" <<<"$help" || { echo "FAIL flags"; exit 1; }
echo "PASS unit"
