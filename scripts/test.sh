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
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's start, with the time since the script began.
stage() { echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }

PKGS="gearman-tools gearman-job-server php-cli php-gearman libgearman-client-perl postgresql chromium chromium-driver curl systemd man-db openssl socat"
# What the Perl library's own t/ suite uses besides the library.
PKGS="$PKGS libtest-exception-perl libtest-timer-perl libproc-guard-perl libtest-tcp-perl libfile-which-perl"
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

stage "cargo fmt --check"
cargo fmt --all -- --check

stage "cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings

stage "cargo test"
cargo test --workspace --quiet 2>&1 | tee /tmp/gearshift-cargo-test.log
# The store tests ignored for want of privileges (or for having them), run
# where they apply: as root the tmpfs mounts, else the read-only directory.
if [ "$(id -u)" -eq 0 ]; then
  cargo test --workspace --quiet --test disk_full -- --ignored 2>&1 | tee -a /tmp/gearshift-cargo-test.log
else
  cargo test --workspace --quiet --test faults -- --ignored 2>&1 | tee -a /tmp/gearshift-cargo-test.log
fi
rust_passed=$(grep -Eo '[0-9]+ passed' /tmp/gearshift-cargo-test.log | awk '{s+=$1} END {print s+0}')
rust_failed=$(grep -Eo '[0-9]+ failed' /tmp/gearshift-cargo-test.log | awk '{s+=$1} END {print s+0}')

stage "server and client suites again with 3 I/O threads sharing the hub"
# The default on this 2-core machine is one I/O thread that runs the hub
# itself; with more cores the I/O threads share it. The test binaries built
# above run again as they are (`cargo test -p` would build both crates again,
# with the features of those two packages alone).
cargo test --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
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
while read -r dir exe; do
  (cd "$dir" && GEARSHIFT_TEST_IO_THREADS=3 "$exe" --quiet) 2>&1 | tee -a /tmp/gearshift-cargo-test-threads.log
done < /tmp/gearshift-test-binaries.txt
rust_passed=$((rust_passed + $(grep -Eo '[0-9]+ passed' /tmp/gearshift-cargo-test-threads.log | awk '{s+=$1} END {print s+0}')))
rust_failed=$((rust_failed + $(grep -Eo '[0-9]+ failed' /tmp/gearshift-cargo-test-threads.log | awk '{s+=$1} END {print s+0}')))

stage "interop and differential suites against target/debug/gearshift"
cargo build --quiet -p gearshift
# --verbose ERROR: gearmand's default level, so `verbose` answers alike in the
# differential suite; --store memory: gearmand's default queue, and every test
# server starts empty (the durable store has its own restart and crash tests).
export SERVER_CMD="$PWD/target/debug/gearshift serve -L 127.0.0.1 -p {port} --http 127.0.0.1:0 --store memory --log-file none --verbose ERROR"
bash tests/interop/run.sh
stage "the same with 3 I/O threads sharing the hub"
SERVER_CMD="$SERVER_CMD --io-threads 3" bash tests/interop/run.sh

stage "the Perl Gearman library's own t/ suite (libgearman-client-perl) against gearshift serve"
# Its source tarball comes from Debian's archive once (tests/perl/run.sh).
GEARSHIFT="$PWD/target/debug/gearshift" timeout -k 10 600 bash tests/perl/run.sh 2>&1 \
  | tee /tmp/gearshift-perl.log
perl_summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' /tmp/gearshift-perl.log | tail -n 1)

stage "crash suite: SIGKILL under load, restart, no acknowledged job lost"
# Its own servers: the durable log store in fresh temp data dirs.
GEARSHIFT_BIN="$PWD/target/debug/gearshift" timeout -k 10 600 python3 tests/crash/crash.py 2>&1 \
  | tee /tmp/gearshift-crash.log
crash_summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' /tmp/gearshift-crash.log | tail -n 1)
crash_passed=${crash_summary%% passed*}
crash_failed=${crash_summary#*, }
crash_failed=${crash_failed%% failed}

stage "import suite: real gearmand libsqlite3 and Postgres queues through gearshift import"
# Needs gearman-job-server (gearmand with its libsqlite3 and Postgres queues),
# postgresql (initdb, pg_ctl and psql for a cluster of the test's own, on a
# free port of 127.0.0.1) and python3's stdlib.
GEARSHIFT="$PWD/target/debug/gearshift" timeout -k 10 300 python3 tests/import/test_import.py

stage "cluster suite: three nodes on one PostgreSQL, takeover, fencing, chaos"
# A throwaway PostgreSQL cluster of its own (postgresql), PHP and Perl
# clients; the chaos test's seed is printed (CHAOS_SEED to replay one).
GEARSHIFT="$PWD/target/debug/gearshift" timeout -k 10 300 python3 tests/cluster/test_cluster.py 2>&1 \
  | tee /tmp/gearshift-cluster.log
cluster_summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' /tmp/gearshift-cluster.log | tail -n 1)

stage "TLS suite: TLS listeners, client certificates, access rules, a socat sidecar"
# Certificates from openssl; libgearman's gearman tool through socat;
# gearmand (gearman-job-server) for its plaintext --ssl.
GEARSHIFT="$PWD/target/debug/gearshift" timeout -k 10 300 python3 tests/tls/test_tls.py 2>&1 \
  | tee /tmp/gearshift-tls.log
tls_summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' /tmp/gearshift-tls.log | tail -n 1)

stage "packaging: the systemd unit (systemd-analyze verify), the man pages, the Dockerfile, the Debian package"
GEARSHIFT="$PWD/target/debug/gearshift" bash tests/packaging/check_unit.sh
GEARSHIFT="$PWD/target/debug/gearshift" bash tests/packaging/check_docker.sh
# cargo deb around the debug binary built above (installs cargo-deb once);
# `packaging/deb/build.sh` alone makes the release package.
PROFILE=dev bash packaging/deb/build.sh

stage "soak, short: 20 s of mixed load with worker kills and durable restarts"
# The hour-long run and its figures: docs/soak.md.
timeout -k 10 180 python3 perf/soak.py --bin "$PWD/target/debug/gearshift" --duration 20

stage "fuzz: every cargo-fuzz target for a few seconds over its corpus"
# Built with stable cargo (fuzz/build.sh); the long campaign is
# fuzz/campaign.sh (docs/fuzzing.md).
FUZZ_SECONDS=${FUZZ_SECONDS:-5} bash scripts/fuzz-short.sh

stage "dashboard suite: the web dashboard in real headless Chromium"
# Needs chromium and chromium-driver (WebDriver spoken from python3's stdlib).
GEARSHIFT_BIN="$PWD/target/debug/gearshift" timeout -k 10 300 python3 tests/dashboard/test_dashboard.py 2>&1 \
  | tee /tmp/gearshift-dashboard.log
dash_summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' /tmp/gearshift-dashboard.log | tail -n 1)

echo "rust: ${rust_passed} passed, ${rust_failed} failed"
echo "crash: ${crash_passed} passed, ${crash_failed} failed"
echo "cluster: ${cluster_summary}"
echo "tls: ${tls_summary}"
echo "perl t/: ${perl_summary}"
echo "dashboard: ${dash_summary}"
echo "total: $((SECONDS / 60))m$((SECONDS % 60))s"
