#!/usr/bin/env bash
# Needs the harness in ../shared/bench (its rawload, built by its lib.sh),
# resolved from the current directory: run from the repository's root, or
# set BENCH=DIR or RAWLOAD=PATH.
#
# How long a submission's JOB_CREATED can wait while the durable store
# compacts its log: a queue of N jobs is drained by rawload's workers (the
# ends make the log compact several times) while a probe submits one
# background job at a time to another function and times each answer.
# Two builds alternate, REPS times each.
#
#   perf/compaction-pause.sh OLD_BINARY NEW_BINARY
#
# Environment: BENCH (harness dir, default ../shared/bench: rawload is built
# there by its lib.sh, or taken from RAWLOAD), N (600000), REPS (2),
# DURABILITY (interval=50), PORT (4779).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
BENCH=${BENCH:-../shared/bench}
RAWLOAD=${RAWLOAD:-$BENCH/rawload}
N=${N:-600000}; REPS=${REPS:-2}; DURABILITY=${DURABILITY:-interval=50}; PORT=${PORT:-4779}
[ -x "$RAWLOAD" ] || { echo "no rawload at $RAWLOAD (set RAWLOAD=...)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/gs-pause.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

cat > "$WORK/probe.py" <<'PY'
import socket, struct, sys, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def read(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit("server closed the connection")
        b += c
    return b
lat, end = [], time.time() + secs
while time.time() < end:
    body = b"probe\0\0" + b"x" * 100
    t0 = time.perf_counter()
    s.sendall(struct.pack(">4sII", b"\0REQ", 18, len(body)) + body)  # SUBMIT_JOB_BG
    _, typ, ln = struct.unpack(">4sII", read(12))
    read(ln)
    if typ != 8:
        sys.exit("expected JOB_CREATED, got packet type %d" % typ)
    lat.append(time.perf_counter() - t0)
    time.sleep(0.0005)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))] * 1e3
print("submits=%d p50=%.2fms p99=%.2fms p99.9=%.2fms max=%.2fms" % (
    len(lat), q(0.5), q(0.99), q(0.999), lat[-1] * 1e3), end="")
PY

run() { # label, binary
  local dir="$WORK/data-$1" log="$WORK/$1.log"
  rm -rf "$dir" "$log"
  "$2" serve -L 127.0.0.1 -p "$PORT" --log-file "$log" --data-dir "$dir" --durability "$DURABILITY" &
  local pid=$!
  sleep 0.5
  "$RAWLOAD" bg -p "$PORT" -n "$N" -m 4 -D 64 -f pause >/dev/null
  python3 "$WORK/probe.py" "$PORT" 6 > "$WORK/probe.txt" &
  local probe=$!
  sleep 0.3
  local drain
  drain=$("$RAWLOAD" drain -p "$PORT" -n "$N" -k 8 -f pause | tail -1 |
          python3 -c 'import json,sys; print(int(json.loads(sys.stdin.read())["rate"]))')
  wait "$probe"
  kill "$pid"; wait "$pid" || true
  echo "$1: drain ${drain}/s; $(cat "$WORK/probe.txt"); compactions=$(grep -c 'compacted the queue' "$log" || true)"
}

for rep in $(seq "$REPS"); do
  run old "$1"
  run new "$2"
done
