#!/usr/bin/env bash
# Runs every test of Gearshift on a fresh Debian machine: installs what the
# tests need (Debian packages for the third-party clients and gearmand),
# checks formatting and lints, runs the Rust test suites, then the interop
# suite (real gearman CLI, PHP, Perl clients), the differential suite
# (byte-for-byte admin sessions against gearmand 1.1.20) and the import suite
# (a real gearmand's sqlite and Postgres queues migrated with `gearshift
# import`; the Postgres test starts its own throwaway PostgreSQL cluster).
# The crash suite (tests/crash) SIGKILLs the durable server under load and
# checks that no acknowledged job is lost.
#
# Every suite ends with `N passed, N failed, N skipped`; a failing suite
# does not stop the run (a failing format check, lint or build does). The
# summary at the end lists each stage's counts and time, and the exit
# status is 1 if any stage failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's start, with the time since the script began.
stage() {
  stage_start=$SECONDS
  echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"
}

# The summary: one line per stage; a test run in two modes (the server and
# client crates' tests) is on two lines, every other test on one.
SUMMARY_RE='^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$'
results=()
all_passed=0 all_failed=0 all_skipped=0

# record NAME STATUS COUNTS: one stage's `N passed, N failed, N skipped`
# (empty: the suite printed none). No counts, or a non-zero exit status
# with no failure counted, is one failure more.
record() {
  local name=$1 status=$2 counts=$3 p=0 f=0 s=0 note=""
  if [ -n "$counts" ]; then
    read -r p _ f _ s _ <<< "${counts//,/}"
  else
    f=1 note=" (no summary line)"
  fi
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1 note="$note (exit status $status)"
  fi
  all_passed=$((all_passed + p)) all_failed=$((all_failed + f)) all_skipped=$((all_skipped + s))
  results+=("$(printf '%-34s %4d passed, %d failed, %d skipped  %4ds%s' \
    "$name:" "$p" "$f" "$s" $((SECONDS - stage_start)) "$note")")
}

# suite NAME LOG COMMAND...: runs COMMAND, its output shown and kept in LOG,
# and records the last summary line it printed.
suite() {
  local name=$1 log=$2 status=0
  shift 2
  "$@" 2>&1 | tee "$log" || status=$?
  record "$name" "$status" "$(grep -E "$SUMMARY_RE" "$log" | tail -n 1 || true)"
}

# cargo's `test result: ok. N passed; N failed; N ignored; ...` lines of LOG,
# added up (ignored tests are skipped ones).
rust_counts() {
  sed -nE 's/^test result: .* ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored;.*/\1 \2 \3/p' "$1" \
    | awk '{p += $1; f += $2; s += $3} END {printf "%d passed, %d failed, %d skipped\n", p, f, s}'
}

PKGS="gearman-tools gearman-job-server php-cli php-gearman libgearman-client-perl postgresql chromium chromium-driver curl systemd man-db openssl socat"
# What the Perl library's own t/ suite uses besides the library.
PKGS="$PKGS libtest-exception-perl libtest-timer-perl libproc-guard-perl libtest-tcp-perl libfile-which-perl"
# The GearMonkey bridge suite: a real Redis, and redis-py for its GearMonkey client and worker.
PKGS="$PKGS redis-server python3-redis"
# The etcd bridge: etcd-client's build runs protoc; its suite starts a real etcd.
PKGS="$PKGS protobuf-compiler etcd-server etcd-client"
# The import suite's MySQL queue: a throwaway MariaDB server of its own.
PKGS="$PKGS mariadb-server"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "== installing:$missing"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

# A fresh build gains nothing from incremental compilation, and line tables
# are all the debug info a test failure's backtrace needs (faster to build
# and link). Every cargo command below shares these, so none rebuilds.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
# The etcd bridge is a feature (its build needs protoc); every build below
# has it, so the tests cover it and nothing is built twice.
FEATURES="--features gearshift/etcd"

stage "cargo fmt --check"
cargo fmt --all -- --check

stage "cargo clippy"
cargo clippy --workspace --all-targets $FEATURES --quiet -- -D warnings

stage "cargo test: build"
cargo test --workspace $FEATURES --no-run --quiet

# Two ways to run the hub: on this 2-core machine the default is one I/O
# thread that runs the hub itself; with more cores (or --io-threads N) the
# I/O threads share it. Each is covered, and no suite runs twice over:
#   - the Rust suites in the default mode, and the server and client crates'
#     tests (in-process servers, written against the hub) again with 3 I/O
#     threads sharing it;
#   - the interop suites once each: differential.py (byte for byte against
#     gearmand) in the default mode, the third-party client suites
#     (interop.py, library.py, lifecycle.py) with 3 I/O threads, the only
#     real PHP/Perl/CLI clients that meet the shared hub;
#   - every later suite (the Perl library's t/, crash, import, cluster, TLS,
#     packaging, soak, dashboard) in the default mode.
stage "cargo test"
status=0
cargo test --workspace $FEATURES --no-fail-fast --quiet 2>&1 | tee /tmp/gearshift-cargo-test.log || status=$?
record "rust" "$status" "$(rust_counts /tmp/gearshift-cargo-test.log)"

stage "store checks that need (or must lack) root"
# The store tests ignored for want of privileges (or for having them) run
# where they apply: as root the tmpfs mounts and a repair of another user's
# file, else the read-only directory.
status=0
if [ "$(id -u)" -eq 0 ]; then only=(--test disk_full --test repair_owner); else only=(--test faults); fi
cargo test --workspace $FEATURES "${only[@]}" --quiet -- --ignored 2>&1 \
  | tee /tmp/gearshift-cargo-privileged.log || status=$?
record "rust, store privilege checks" "$status" "$(rust_counts /tmp/gearshift-cargo-privileged.log)"

stage "server and client suites again with 3 I/O threads sharing the hub"
# The test binaries built above run again as they are (`cargo test -p`
# would build both crates again, with the features of those two packages
# alone).
cargo test --workspace $FEATURES --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        pkg = os.path.dirname(m["manifest_path"])
        if os.path.basename(pkg) in ("gearshift-server", "gearshift-client"):
            print(pkg, m["executable"])
' > /tmp/gearshift-test-binaries.txt
[ "$(wc -l < /tmp/gearshift-test-binaries.txt)" -ge 10 ] || { echo "too few test binaries found" >&2; exit 1; }
: > /tmp/gearshift-cargo-test-threads.log
status=0
while read -r dir exe; do
  (cd "$dir" && GEARSHIFT_TEST_IO_THREADS=3 "$exe" --quiet) 2>&1 \
    | tee -a /tmp/gearshift-cargo-test-threads.log || status=$?
done < /tmp/gearshift-test-binaries.txt
record "rust server+client, 3 I/O threads" "$status" "$(rust_counts /tmp/gearshift-cargo-test-threads.log)"

stage "differential suite against target/debug/gearshift and gearmand 1.1.20"
cargo build --quiet -p gearshift $FEATURES
# --verbose ERROR: gearmand's default level, so `verbose` answers alike in the
# differential suite; --store memory: gearmand's default queue, and every test
# server starts empty (the durable store has its own restart and crash tests).
# (tests/interop/run.sh runs the four interop suites in one mode.)
export SERVER_CMD="$PWD/target/debug/gearshift serve -L 127.0.0.1 -p {port} --http 127.0.0.1:0 --store memory --log-file none --verbose ERROR"
# Each suite bounds its own waits; the outer timeout is a last-resort guard.
suite "differential" /tmp/gearshift-differential.log \
  timeout -k 10 900 python3 tests/interop/differential.py

for s in interop library lifecycle; do
  stage "$s suite with 3 I/O threads sharing the hub (real PHP, Perl and CLI clients)"
  SERVER_CMD="$SERVER_CMD --io-threads 3" suite "$s, 3 I/O threads" "/tmp/gearshift-$s.log" \
    timeout -k 10 900 python3 "tests/interop/$s.py"
done

stage "the Perl Gearman library's own t/ suite (libgearman-client-perl) against gearshift serve"
# Its source tarball comes from Debian's archive once (tests/perl/run.sh).
GEARSHIFT="$PWD/target/debug/gearshift" suite "perl t/" /tmp/gearshift-perl.log \
  timeout -k 10 600 bash tests/perl/run.sh

stage "crash suite: SIGKILL under load, restart, no acknowledged job lost"
# Its own servers: the durable log store in fresh temp data dirs.
GEARSHIFT_BIN="$PWD/target/debug/gearshift" suite "crash" /tmp/gearshift-crash.log \
  timeout -k 10 600 python3 tests/crash/crash.py

stage "gearmonkey suite: the GearMonkey bridge against a real redis-server"
# Its own redis-server per test (free port, append-only file in a temp dir),
# GearMonkey's client and worker in Python (tests/gearmonkey/gearmonkey.py),
# the gearman CLI, PHP and Perl clients on the Gearman side. redis-py: Debian's
# python3-redis serves Debian's python3; another python3 (pyenv) gets it from pip.
python3 -c 'import redis' 2>/dev/null || python3 -m pip install -q redis
GEARSHIFT="$PWD/target/debug/gearshift" suite "gearmonkey" /tmp/gearshift-gearmonkey.log \
  timeout -k 10 300 python3 tests/gearmonkey/test_gearmonkey.py

stage "etcd suite: the etcd bridge against a real etcd"
# Its own etcd per test (free ports, temp data dir); the seed's
# queue in Python on etcd's JSON gateway (tests/etcd/etcdqueue.py), proven
# alone first; PHP, Perl and CLI workers on the Gearman side.
suite "etcd harness" /tmp/gearshift-etcd-harness.log \
  timeout -k 10 120 python3 tests/etcd/test_harness.py
GEARSHIFT="$PWD/target/debug/gearshift" suite "etcd" /tmp/gearshift-etcd.log \
  timeout -k 10 300 python3 tests/etcd/test_etcd.py

stage "import suite: real gearmand libsqlite3, Postgres and MySQL queues through gearshift import"
# Needs gearman-job-server (gearmand with its libsqlite3, Postgres and MySQL
# queues), postgresql (initdb, pg_ctl and psql for a cluster of the test's
# own, on a free port of 127.0.0.1), mariadb-server (mariadb-install-db,
# mariadbd and the mariadb client, likewise) and python3's stdlib.
GEARSHIFT="$PWD/target/debug/gearshift" suite "import" /tmp/gearshift-import.log \
  timeout -k 10 300 python3 tests/import/test_import.py

stage "cluster suite: nodes on one PostgreSQL, leader and partitioned, takeover, fencing, chaos"
# A throwaway PostgreSQL cluster of its own (postgresql), PHP and Perl
# clients; the chaos tests' seeds are printed (CHAOS_SEED to replay one).
GEARSHIFT="$PWD/target/debug/gearshift" suite "cluster" /tmp/gearshift-cluster.log \
  timeout -k 10 600 python3 tests/cluster/test_cluster.py

stage "TLS suite: TLS listeners, client certificates, access rules, a socat sidecar"
# Certificates from openssl; libgearman's gearman tool through socat;
# gearmand (gearman-job-server) for its plaintext --ssl.
GEARSHIFT="$PWD/target/debug/gearshift" suite "tls" /tmp/gearshift-tls.log \
  timeout -k 10 300 python3 tests/tls/test_tls.py

stage "packaging: the systemd unit (systemd-analyze verify), the man pages, the Dockerfile, the Debian package"
# Three checks, each one test. `PROFILE=dev packaging/deb/build.sh`: cargo deb
# around the debug binary built above (installs cargo-deb once);
# `packaging/deb/build.sh` alone makes the release package.
packaging() {
  local passed=0 failed=0 check
  for check in tests/packaging/check_unit.sh tests/packaging/check_docker.sh packaging/deb/build.sh; do
    if GEARSHIFT="$PWD/target/debug/gearshift" PROFILE=dev bash "$check"; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
    fi
  done
  echo "$passed passed, $failed failed, 0 skipped"
}
suite "packaging" /tmp/gearshift-packaging.log packaging

stage "soak, short: 20 s of mixed load with worker kills and durable restarts"
# The hour-long run and its figures: docs/soak.md. Its counts are its
# checks; the growth checks need a longer run (`not judged`: skipped).
suite "soak (checks)" /tmp/gearshift-soak.log \
  timeout -k 10 180 python3 perf/soak.py --bin "$PWD/target/debug/gearshift" --duration 20

stage "fuzz: every cargo-fuzz target for a few seconds over its corpus"
# Built with stable cargo (fuzz/build.sh); the long campaign is
# fuzz/campaign.sh (docs/fuzzing.md). Its counts are targets.
FUZZ_SECONDS=${FUZZ_SECONDS:-5} suite "fuzz (targets)" /tmp/gearshift-fuzz.log \
  bash scripts/fuzz-short.sh

stage "dashboard suite: the web dashboard in real headless Chromium"
# Needs chromium and chromium-driver (WebDriver spoken from python3's stdlib).
GEARSHIFT_BIN="$PWD/target/debug/gearshift" suite "dashboard" /tmp/gearshift-dashboard.log \
  timeout -k 10 300 python3 tests/dashboard/test_dashboard.py

echo "== summary (stage: counts, seconds)"
printf '%s\n' "${results[@]}"
echo "all stages: $all_passed passed, $all_failed failed, $all_skipped skipped" \
  "(the server and client tests counted in both modes)"
echo "total: $((SECONDS / 60))m$((SECONDS % 60))s"
[ "$all_failed" -eq 0 ]
