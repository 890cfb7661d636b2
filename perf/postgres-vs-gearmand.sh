#!/usr/bin/env bash
# Needs the harness (../shared/bench, or BENCH=DIR): its compare.sh, load
# tools and report.py. Needs PostgreSQL's server programs (initdb, pg_ctl;
# the newest /usr/lib/postgresql/*/bin, or PG_BIN=DIR) and psql.
#
# One Gearshift node on PostgreSQL (`--store postgres://...`) against
# gearmand 1.1.20, both on the same throwaway PostgreSQL cluster (issue 19):
#
#   pgq   gearmand -t 0 -q Postgres   vs  gearshift --store postgres://...
#   pgqu  the same two, R_submit and R_drain with a unique id per job
#   mem   gearmand -t 0 (in memory)   vs  gearshift --store postgres://...
#   yard  pgbench: one-row INSERT commits/s from 1 and 4 clients on the
#         same cluster (what one commit per job costs here)
#
# pgq and mem are each one interleaved run of the harness's compare.sh
# (A B A B ..., a fresh server per scenario group) over groups A, B and R.
# pgqu exists because the harness's R_submit sends an empty unique id, and
# gearmand's Postgres queue keeps UNIQUE (unique_key, function_name): every
# background job after the first is refused with QUEUE_ERROR. pgqu runs
# `rawload bg -u` (a unique id per job) and `rawload drain`, with the
# harness's own server start/stop (lib.sh), interleaved the same way. The
# table at the end gives, per workload, both sides' median rates and the
# median of the per-repetition ratios Gearshift / gearmand (min..max).
#
# The cluster is started here, in a temporary directory, on 127.0.0.1 and a
# free port, with trust authentication, and stopped and removed on exit. It
# keeps PostgreSQL's default durability: fsync=on, synchronous_commit=on
# (set explicitly and checked), so every commit waits for the disk.
# gearmand creates its own queue table (`CREATE TABLE gearman_queue ...` on
# start when missing); Gearshift its `gearshift_*` tables. Each server has
# its own database, both in the one cluster.
#
#   perf/postgres-vs-gearmand.sh [STEP ...]     # default: pgq pgqu mem yard
#
# Environment:
#   BENCH      the harness (default ../shared/bench beside the repository)
#   GEARSHIFT  the binary (default target/release/gearshift; built if missing)
#   REPS       repetitions per step (default 3)
#   SCENARIOS  harness groups (default "A B R")
#   PGQ_A_N, PGQ_R_N  job counts of the pgq step (default 10000 each):
#              gearmand's Postgres queue commits every job on its own, so at
#              the harness's defaults (100,000 / 200,000) its phases would
#              hit the 25 s cap. pgqu uses PGQ_R_N too.
#   MEM_A_N    A_N of the mem step (default 20000: Gearshift on PostgreSQL
#              would need ~30 s for the harness's 100,000). R_N stays 200,000.
#   GM_EXTRA   extra gearmand flags for both gearmand sides (default none)
#   OUTDIR     where the JSON goes (default /tmp/postgres-vs-gearmand)
#   PG_BIN     PostgreSQL's server programs
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-../shared/bench}
BENCH=$(cd "$BENCH" && pwd)
REPS=${REPS:-3}
SCENARIOS=${SCENARIOS:-"A B R"}
PGQ_A_N=${PGQ_A_N:-10000}
PGQ_R_N=${PGQ_R_N:-10000}
MEM_A_N=${MEM_A_N:-20000}
GM_EXTRA=${GM_EXTRA:-}
OUTDIR=${OUTDIR:-/tmp/postgres-vs-gearmand}
GEARSHIFT=${GEARSHIFT:-$PWD/target/release/gearshift}
[ -x "$BENCH/compare.sh" ] || { echo "no harness at $BENCH (set BENCH=...)" >&2; exit 2; }
if [ ! -x "$GEARSHIFT" ]; then
  cargo build --release -p gearshift
fi
mkdir -p "$OUTDIR"

# ---- PostgreSQL's programs ------------------------------------------------
if [ -z "${PG_BIN:-}" ]; then
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
fi
[ -x "$PG_BIN/initdb" ] || { echo "no initdb in '$PG_BIN' (set PG_BIN=...)" >&2; exit 2; }
PSQL=$(command -v psql || echo "$PG_BIN/psql")
AS=()
if [ "$(id -u)" = 0 ]; then AS=(runuser -u postgres --); fi   # PostgreSQL refuses root

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ---- the throwaway cluster --------------------------------------------------
PGDIR=$(mktemp -d /tmp/gs-pg-bench.XXXXXX)
PGPORT_=$(free_port)
PGDATA_=$PGDIR/data
cleanup() {
  cp "$PGDIR/log" "$OUTDIR/postgres.log" 2>/dev/null || true
  if [ -f "$PGDATA_/postmaster.pid" ]; then
    "${AS[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA_" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$PGDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ ${#AS[@]} -gt 0 ] && chown postgres:postgres "$PGDIR"
"${AS[@]}" "$PG_BIN/initdb" -D "$PGDATA_" -U gearshift --auth=trust -E UTF8 >/dev/null
"${AS[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA_" -l "$PGDIR/log" -w -t 60 \
  -o "-k $PGDIR -p $PGPORT_ -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=50" \
  start >/dev/null
q() { "$PSQL" -X -q -At -h 127.0.0.1 -p "$PGPORT_" -U gearshift "$@"; }
q -d postgres -c 'CREATE DATABASE gearshift' -c 'CREATE DATABASE gearmand'
PG_VERSION=$(q -d postgres -c 'SHOW server_version')
PG_DUR=$(q -d postgres -c 'SHOW fsync' -c 'SHOW synchronous_commit' -c 'SHOW wal_sync_method' | paste -sd' ')
echo "PostgreSQL $PG_VERSION on 127.0.0.1:$PGPORT_ ($PGDIR); fsync, synchronous_commit, wal_sync_method: $PG_DUR"
case $PG_DUR in "on on "*) ;; *) echo "PostgreSQL is not at its default durability: $PG_DUR" >&2; exit 1 ;; esac

GS_URL="postgres://gearshift@127.0.0.1:$PGPORT_/gearshift"
GM_CONNINFO="host=127.0.0.1 port=$PGPORT_ dbname=gearmand user=gearshift"
GM="/usr/sbin/gearmand -L 127.0.0.1 -p {port} -t 0 --log-file=none -P /tmp/gearmand-bench-{port}.pid${GM_EXTRA:+ $GM_EXTRA}"
GM_PGQ="$GM -q Postgres --libpq-conninfo '$GM_CONNINFO' --libpq-table gearman_queue"
GS_PG="$GEARSHIFT serve -L 127.0.0.1 -p {port} --log-file none --store $GS_URL"

# ---- gearmand -q Postgres: does it start? -------------------------------------
# Run once with its log on, so a failure is recorded with gearmand's own words.
preflight() {
  local port log pid ok=0 i
  port=$(free_port); log=$OUTDIR/gearmand-postgres-preflight.log
  /usr/sbin/gearmand -L 127.0.0.1 -p "$port" -t 0 --verbose INFO --log-file="$log" \
    -P "$OUTDIR/gearmand-preflight.pid" \
    -q Postgres --libpq-conninfo "$GM_CONNINFO" --libpq-table gearman_queue &
  pid=$!
  for i in $(seq 1 50); do
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then ok=1; break; fi
    sleep 0.2
  done
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ $ok = 1 ]; then
    echo "gearmand -q Postgres started; its table:"
    q -d gearmand -c '\d gearman_queue' | sed 's/^/  /'
  else
    echo "gearmand -q Postgres did NOT start; its log ($log):" >&2
    cat "$log" >&2
    return 1
  fi
}
PGQ_OK=1
preflight || PGQ_OK=0

# ---- the runs ------------------------------------------------------------------
run() { # name, A name, A cmd, B name, B cmd, [extra env...]
  local name=$1 an=$2 ac=$3 bn=$4 bc=$5
  shift 5
  echo "== $name: $an vs $bn ($SCENARIOS, $REPS reps) $*"
  env "$@" SCENARIOS="$SCENARIOS" REPS="$REPS" A_NAME="$an" A_CMD="$ac" B_NAME="$bn" B_CMD="$bc" \
    OUT="$OUTDIR/$name.json" "$BENCH/compare.sh" > "$OUTDIR/$name.txt"
  grep -E '^NOT ok' "$OUTDIR/$name.txt" || true
}
# R_submit / R_drain with a unique id per job, interleaved like compare.sh
run_unique() { # name, A name, A cmd, B name, B cmd
  local name=$1 an=$2 ac=$3 bn=$4 bc=$5 out=$OUTDIR/$1.json lines rep side cmd sname fn
  echo "== $name: $an vs $bn (R_submit_u, R_drain_u: rawload bg -u, drain; R_N=$PGQ_R_N, $REPS reps)"
  lines=$(mktemp /tmp/pgvg-lines-XXXXXX)
  (
    set +e
    BENCH_DIR=$BENCH
    . "$BENCH/lib.sh"
    trap 'server_stop' EXIT
    for rep in $(seq 1 "$REPS"); do
      for side in A B; do
        if [ $side = A ]; then cmd=$ac sname=$an; else cmd=$bc sname=$bn; fi
        pre=$(wait_quiet)
        server_start "$cmd" || { echo "{\"side\":\"$side\",\"rep\":$rep,\"scenario\":\"R_submit_u\",\"error\":\"server did not start\",\"ok\":false}" >>"$lines"; continue; }
        fn="bench_Ru_$$_$RANDOM"
        {
          "$RAWLOAD" bg -p "$SERVER_PORT" -P "$SERVER_PID" -T "$T_LIMIT" -f "$fn" -u -n "$PGQ_R_N" -m "$R_M" -D "$R_DEPTH" -L R_submit_u
          "$RAWLOAD" drain -p "$SERVER_PORT" -P "$SERVER_PID" -T "$T_LIMIT" -f "$fn" -n "$PGQ_R_N" -k "$R_K" -L R_drain_u
        } | sed -u "s/^{/{\"side\":\"$side\",\"rep\":$rep,\"server\":\"$sname\",\"pre_busy_cores\":$pre,/" >>"$lines"
        server_stop
      done
    done
  )
  {
    printf '{"A":{"name":"%s","cmd":"%s"},"B":{"name":"%s","cmd":"%s"},"reps":%s,"params":{"A_N":"-","R_N":%s},"results":[\n' \
      "$an" "$(printf '%s' "$ac" | sed 's/"/\\"/g')" "$bn" "$(printf '%s' "$bc" | sed 's/"/\\"/g')" "$REPS" "$PGQ_R_N"
    sed '$!s/$/,/' "$lines"
    printf ']}\n'
  } >"$out"
  rm -f "$lines"
}

# the cost of one commit per job on this cluster and disk
yardstick() {
  local f=$OUTDIR/yard.sql c
  q -d gearmand -c 'CREATE TABLE IF NOT EXISTS yard (id BIGSERIAL PRIMARY KEY, data BYTEA)'
  echo "INSERT INTO yard (data) VALUES ('\\x$(printf '%0200d' 0)');" >"$f"
  echo "== yard: pgbench, one-row INSERT per transaction (fsync=on, synchronous_commit=on), 5 s each"
  for c in 1 4; do
    printf '  %s client(s): ' "$c"
    pgbench -n -h 127.0.0.1 -p "$PGPORT_" -U gearshift -c "$c" -j "$c" -T 5 -f "$f" gearmand 2>/dev/null |
      awk '/latency average/ {l=$4} /^tps/ {t=$3} END {printf "%.0f commits/s, latency %s ms\n", t, l}' |
      tee "$OUTDIR/yard-c$c.txt"
  done
  q -d gearmand -c 'DROP TABLE yard'
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(pgq pgqu mem yard)
for step in "${steps[@]}"; do
  case $step in
    pgq) if [ $PGQ_OK = 1 ]; then
           run pgq gearmand-t0-postgres "$GM_PGQ" gearshift-postgres "$GS_PG" A_N="$PGQ_A_N" R_N="$PGQ_R_N"
         else
           echo "== pgq skipped: gearmand -q Postgres does not start (above)"
         fi ;;
    pgqu) if [ $PGQ_OK = 1 ]; then
            run_unique pgqu gearmand-t0-postgres "$GM_PGQ" gearshift-postgres "$GS_PG"
          fi ;;
    mem) run mem gearmand-t0 "$GM" gearshift-postgres "$GS_PG" A_N="$MEM_A_N" ;;
    yard) yardstick ;;
    *) echo "unknown step $step (pgq, pgqu, mem, yard)" >&2; exit 2 ;;
  esac
  # a cluster that died (e.g. a full disk) makes every later run meaningless
  q -d postgres -c 'SELECT 1' >/dev/null ||
    { echo "PostgreSQL stopped during step $step; its log: $OUTDIR/postgres.log" >&2; exit 1; }
done
echo "rows left in the databases: gearshift_jobs $(q -d gearshift -c 'SELECT count(*) FROM gearshift_jobs' 2>/dev/null || echo -)," \
  "gearman_queue $(q -d gearmand -c 'SELECT count(*) FROM gearman_queue' 2>/dev/null || echo -)"

# ---- the table -------------------------------------------------------------------
python3 - "$OUTDIR" "${steps[@]}" <<'EOF'
import json, os, statistics, sys
outdir, steps = sys.argv[1], sys.argv[2:]
WORK = ["A_submit", "A_drain", "B_rt", "R_echo", "R_submit", "R_drain", "R_fg", "R_submit_u", "R_drain_u"]
TARGET = {("pgq", "A_submit"): 10.0, ("mem", "R_fg"): 0.5}
def fmt(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"
print()
print("| step | workload | gearmand rate/s | Gearshift-on-PostgreSQL rate/s | Gearshift / gearmand | gearmand CPU s/Mjob | Gearshift CPU s/Mjob | ok gearmand / Gearshift | target |")
print("|---|---|---:|---:|---:|---:|---:|---|---|")
for step in steps:
    path = os.path.join(outdir, f"{step}.json")
    if step == "yard" or not os.path.exists(path):
        continue
    d = json.load(open(path))
    label = f"{step} ({d['A']['name']}, A_N={d['params']['A_N']} R_N={d['params']['R_N']})"
    by = {}
    for r in d["results"]:
        if "scenario" in r:
            by.setdefault((r["scenario"], r["side"]), {})[r["rep"]] = r
    for w in WORK:
        A, B = by.get((w, "A"), {}), by.get((w, "B"), {})
        if not A and not B:
            continue
        ratios = [B[k]["rate"] / A[k]["rate"] for k in A if k in B and A[k].get("rate") and B[k].get("rate") is not None]
        med = lambda side, key: statistics.median([r[key] for r in side.values() if r.get(key) is not None] or [0])
        oka = sum(1 for r in A.values() if r.get("ok")); okb = sum(1 for r in B.values() if r.get("ok"))
        ratio = f"**{statistics.median(ratios):.2f}** ({min(ratios):.2f}..{max(ratios):.2f})" if ratios else "-"
        t = TARGET.get((step, w))
        tgt = ""
        if t is not None and ratios:
            tgt = f"≥ {t:g}: " + ("met" if statistics.median(ratios) >= t else "NOT met")
        print(f"| {label} | {w} | {fmt(med(A,'rate'))} | {fmt(med(B,'rate'))} | {ratio} | {med(A,'server_cpu_s_per_mop'):.3g} | {med(B,'server_cpu_s_per_mop'):.3g} | {oka}/{len(A)} {okb}/{len(B)} | {tgt} |")
        label = ""
print()
print(f"JSON and compare.sh's own tables: {outdir}/{{{','.join(steps)}}}.{{json,txt}}")
EOF
