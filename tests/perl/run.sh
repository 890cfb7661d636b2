#!/usr/bin/env bash
# The Perl Gearman library's own test suite (libgearman-client-perl's t/),
# run against Gearshift: each test file starts its servers through the
# suite's t::Server (GEARMAND_PATH), here a wrapper that runs
# `gearshift serve` with gearmand's --port/--listen.
#
# usage: GEARSHIFT=target/debug/gearshift tests/perl/run.sh
#        SERVER=/usr/sbin/gearmand tests/perl/run.sh   (the same files against gearmand)
# The suite is not in the binary package: its source tarball comes from
# Debian's archive through apt (checked against the signed Sources index)
# into a cache, once. Prints `N passed, N failed, N skipped` (one per file).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${GEARSHIFT_TEST_CACHE:-$HOME/.cache/gearshift-tests}/perl
mkdir -p "$CACHE/lists/partial"

# t/14-sleep.t is left out: against gearmand 1.1.20 too, its worker's late
# WORK_FAIL for a job already timed out gets ERROR JOB_NOT_FOUND, which
# Gearman::Worker dies on, and the file hangs.
# t/09-connect.t (AUTHOR_TESTING), t/18-ssl.t and t/20-send-work-command.t
# skip themselves (prove's NOTESTS), counted as skipped.
FILES="00-use 01-object 02-client 03-worker 04-task 05-taskset 06-response-parser
07-response-parser-taskset 08-jobstatus 09-connect 10-job 11-unit 12-sum 13-fail
15-priority 16-background 17-status 18-ssl 20-send-work-command 25-work-finish-command
40-prefix 50-wait_timeout 65-responseparser"

version=$(dpkg-query -W -f='${Version}' libgearman-client-perl)
upstream=${version%-*}
src="$CACHE/Gearman-$upstream"
if [ ! -d "$src/t" ]; then
  sources="$CACHE/debian.sources"
  cat > "$sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $(. /etc/os-release && echo "$VERSION_CODENAME")
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt=(apt-get -qq -o "Dir::Etc::SourceList=$sources" -o Dir::Etc::SourceParts=/dev/null
       -o "Dir::State::Lists=$CACHE/lists" -o APT::Sandbox::User=root)
  "${apt[@]}" update
  (cd "$CACHE" && "${apt[@]}" --download-only --tar-only source "libgearman-client-perl=$version")
  tar -xzf "$CACHE/libgearman-client-perl_${upstream}.orig.tar.gz" -C "$CACHE"
fi

server=${SERVER:-}
if [ -z "$server" ]; then
  bin=$(cd "$(dirname "${GEARSHIFT:-target/debug/gearshift}")" && pwd)/$(basename "${GEARSHIFT:-target/debug/gearshift}")
  server="$CACHE/gearshift-as-gearmand"
  # t::Server passes --port and --listen (and --log-file only to a binary
  # file, which a script is not).
  printf '#!/bin/sh\nexec %q serve --store memory --http off --log-file none --verbose ERROR "$@"\n' "$bin" > "$server"
  chmod +x "$server"
fi

passed=0 failed=0 skipped=0
cd "$src"
for f in $FILES; do
  log=$(mktemp)
  start=$SECONDS
  # The installed library (what the interop suite uses too); `.` for t::Server.
  if GEARMAND_PATH=$server timeout -k 5 120 prove "t/$f.t" > "$log" 2>&1; then
    if grep -q "^Result: NOTESTS" "$log"; then
      skipped=$((skipped + 1)); verdict=SKIP
    else
      passed=$((passed + 1)); verdict=ok
    fi
  else
    failed=$((failed + 1)); verdict=FAIL
    sed 's/^/    /' "$log"
  fi
  echo "$verdict t/$f.t ($((SECONDS - start))s)"
  rm -f "$log"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
