#!/usr/bin/env bash
# Run the interop, library, differential and lifecycle suites against the server
# under test. lifecycle.py tests Gearshift's policy file (--config): when
# SERVER_CMD does not run gearshift it prints why it skips and counts nothing.
#
# usage: SERVER_CMD='<command with {port}>' [REF_CMD='...'] [GEARSHIFT_BIN=...] tests/interop/run.sh [name-substring ...]
#   SERVER_CMD  default: gearmand 1.1.20 (see harness.py DEFAULT_GEARMAND), e.g.
#               SERVER_CMD='/work/main/target/debug/gearshift serve -L 127.0.0.1 -p {port}'
#   REF_CMD     reference for differential.py; default: the same gearmand command.
#   GEARSHIFT_BIN  the gearshift binary library.py drives (submit/work/admin);
#               default: target/debug/gearshift of this repository.
#   Arguments are passed to every suite as test-name filters.
# Prints each suite's results, then the combined `N passed, N failed, N skipped`.
# Exit status: 0 only if every test of every suite passed.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
GEARMAND_CMD='/usr/sbin/gearmand -L 127.0.0.1 -p {port} -t 0 --log-file=none -P /tmp/gm-{port}.pid'
export SERVER_CMD="${SERVER_CMD:-$GEARMAND_CMD}"
export REF_CMD="${REF_CMD:-$GEARMAND_CMD}"

total_passed=0
total_failed=0
total_skipped=0
rc=0
start=$(date +%s)
for suite in interop.py library.py differential.py lifecycle.py; do
    log=$(mktemp)
    # Each suite bounds its own waits; the outer timeout is a last-resort guard.
    timeout -k 10 900 python3 "$HERE/$suite" "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
    rm -f "$log"
    if [ -z "$summary" ]; then
        echo "!! $suite ended without a summary line (exit status $status)"
        total_failed=$((total_failed + 1))
        rc=1
        continue
    fi
    read -r passed _ failed _ skipped _ <<< "${summary//,/}"
    total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed))
    total_skipped=$((total_skipped + skipped))
    [ "$status" -eq 0 ] || rc=1
done
echo "== all suites finished in $(( $(date +%s) - start ))s"
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
[ "$total_failed" -eq 0 ] || rc=1
exit $rc
