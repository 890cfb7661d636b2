#!/usr/bin/env bash
# Needs the harness in ../shared/bench (rawload.c), beside this repository's
# root; BENCH=DIR points elsewhere.
#
# Does paging through a big queue over the JSON API slow job traffic? With
# Q jobs (default 100,000) queued on one function, R_fg (the harness's raw
# foreground load: 4 client conns x 32 in flight, 8 raw echo workers, N jobs)
# runs on another, alternately alone and while a client pages through the
# whole queue over and over (GET /api/v1/jobs?function=...&limit=1000,
# following next_cursor, a page every EVERY seconds: default 0.1, ten pages
# of 1000 jobs a second; EVERY=0 pages flat out). Fresh server per run, REPS
# runs of each, medians.
#
#   perf/listing-under-load.sh [GEARSHIFT_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-../shared/bench}
TOOLS=${TOOLS:-/tmp/gearshift-threadcpu}
REPS=${REPS:-5}
N=${N:-200000}
Q=${Q:-100000}
EVERY=${EVERY:-0.1}
BIN=${1:-$PWD/target/release/gearshift}
mkdir -p "$TOOLS"
[ -x "$TOOLS/rawload" ] || cc -O2 -o "$TOOLS/rawload" "$BENCH/rawload.c" -lm
RAW=$TOOLS/rawload

lister() { # page through function `listed` until killed, over one kept-alive
  # connection; writes the pages read to $2
  python3 - "$1" "$2" "$EVERY" <<'PY'
import http.client, json, sys, time
port, out, every = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
pages, cursor = 0, None
try:
    while True:
        q = "/api/v1/jobs?function=listed&limit=1000" + (f"&cursor={cursor}" if cursor else "")
        c.request("GET", q)
        cursor = json.loads(c.getresponse().read()).get("next_cursor")
        pages += 1
        with open(out, "w") as f:
            f.write(str(pages))
        time.sleep(every)
except (OSError, http.client.HTTPException):
    pass
PY
}

run() { # $1 = alone|listing
  local port pid rate pages=0 lp
  port=$("$RAW" freeport)
  "$BIN" serve -L 127.0.0.1 -p "$port" --store memory --log-file none &
  pid=$!
  for _ in $(seq 100); do "$RAW" ping -p "$port" > /dev/null 2>&1 && break; sleep 0.05; done
  "$RAW" bg -p "$port" -P "$pid" -f listed -n "$Q" -m 4 -D 64 -L queue > /dev/null
  local count; count=$(mktemp)
  if [ "$1" = listing ]; then
    lister "$((port + 1))" "$count" &
    lp=$!
    sleep 0.5
  fi
  rate=$("$RAW" fg -p "$port" -P "$pid" -f "fg$$" -n "$N" -m 4 -k 8 -D 32 -L R_fg \
    | python3 -c 'import json,sys; print(round([json.loads(l) for l in sys.stdin if l.startswith("{")][-1]["rate"]))')
  if [ "$1" = listing ]; then
    kill "$lp" 2> /dev/null || true
    wait "$lp" 2> /dev/null || true
    pages=$(cat "$count")
  fi
  rm -f "$count"
  kill "$pid"
  wait "$pid" 2> /dev/null || true
  echo "$1 rate=$rate pages=$pages"
}

for _ in $(seq "$REPS"); do
  run alone
  run listing
done | tee /tmp/listing-under-load.txt
python3 - /tmp/listing-under-load.txt <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) rate=(\d+) pages=(\d+)", line)
    if m:
        rows.setdefault(m[1], []).append((int(m[2]), int(m[3])))
a = statistics.median(r for r, _ in rows["alone"])
l = statistics.median(r for r, _ in rows["listing"])
p = statistics.median(p for _, p in rows["listing"])
print(f"R_fg alone {a:.0f}/s, while listing {l:.0f}/s: ratio {l / a:.2f}; pages of 1000 read during a run: {p:.0f}")
PY
