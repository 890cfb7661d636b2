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
#   yard  pgbench: one-row INSERT commits/s from 1, 4 and 16 clients on
#         the same cluster (what one commit per job costs here, and the
#         database's commit rate with several committers)
#   sub   A_submit (background submissions, each acknowledged by
#         JOB_CREATED) at the harness's concurrency and with many in
#         flight, with what PostgreSQL did for them (issue 33):
#           A_submit      gearload bg -w 0: 4 synchronous libgearman
#                         clients (libgearman's UUID unique per job)
#           A_submit_256  rawload bg -u: SUB_M conns x SUB_D in flight
#                         (4 x 64 = 256), a unique id per job
#         each drained afterwards (rawload drain), so no run starts on a
#         full table, and the server's database vacuumed once it stopped,
#         so its dead rows cost the other side nothing. Around each timed phase: PostgreSQL's
#         write transactions (the next xid, exact at once, unlike
#         pg_stat_database, whose counters a busy backend reports up to a
#         second late) and its CPU (the postmaster, its children and the
#         children it reaped); per server lifetime also pg_stat_database's
#         xact_commit of that server's database (read after it stopped, so
#         its backends have reported). Lines gain pg_xacts and pg_cpu_s,
#         and Gearshift's lines its group commits over the phase (count and
#         seconds, from /metrics' gearshift_store_commit_seconds); the
#         table at the end gives per second and per job figures.
#   subab the sub step with another Gearshift build (GEARSHIFT_BEFORE) in
#         gearmand's place: a change's before and after, interleaved
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
#   perf/postgres-vs-gearmand.sh [STEP ...]     # default: pgq pgqu mem yard sub
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
#   SUB_A_N    jobs of the sub step's A_submit (default 10000)
#   SUB_N, SUB_M, SUB_D  jobs, connections and in flight per connection of
#              its A_submit_256 (default 50000, 4, 64); SUB_T its time cap
#              (default 90 s: gearmand commits a job at a time, 1,500-5,000/s here)
#   GEARSHIFT_BEFORE  the subab step's other build
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
SUB_A_N=${SUB_A_N:-10000}
SUB_N=${SUB_N:-50000}
SUB_M=${SUB_M:-4}
SUB_D=${SUB_D:-64}
SUB_T=${SUB_T:-90}
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

# PostgreSQL's write transactions so far: the next xid to be assigned
# (psql's own read-only query takes none)
next_xid() { q -d postgres -c 'SELECT pg_snapshot_xmax(pg_current_snapshot())'; }
# PostgreSQL's CPU seconds so far: the postmaster, its live children, and
# the children it has reaped (a server's backends exit when it stops)
pg_cpu() {
  python3 - "$(head -1 "$PGDATA_/postmaster.pid")" <<'PY'
import os, sys
pm, ticks = int(sys.argv[1]), 0
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        st = open(f"/proc/{d}/stat").read()
    except OSError:
        continue
    f = st[st.rfind(")") + 2:].split()  # f[1] ppid, f[11..14] utime stime cutime cstime
    if int(d) == pm:
        ticks += sum(int(x) for x in f[11:15])
    elif int(f[1]) == pm:
        ticks += int(f[11]) + int(f[12])
print(f"{ticks / os.sysconf('SC_CLK_TCK'):.2f}")
PY
}
# A_submit at 4 synchronous clients and with SUB_M x SUB_D in flight, with
# PostgreSQL's transactions and CPU around each phase, interleaved A B A B
run_sub() { # name, A name, A cmd, A database, B name, B cmd, B database
  local name=$1 an=$2 ac=$3 adb=$4 bn=$5 bc=$6 bdb=$7 out=$OUTDIR/$1.json lines
  echo "== $name: $an vs $bn (A_submit: gearload bg -c 4 -w 0, $SUB_A_N jobs;" \
    "A_submit_256: rawload bg -u -m $SUB_M -D $SUB_D, $SUB_N jobs; $REPS reps)"
  lines=$(mktemp /tmp/pgvg-lines-XXXXXX)
  (
    set +e
    BENCH_DIR=$BENCH
    . "$BENCH/lib.sh"
    trap 'server_stop' EXIT
    # Gearshift's group commits so far (count, seconds) from its /metrics
    # (the HTTP port is the Gearman port + 1); nothing from gearmand
    store_commits() {
      curl -s -m 2 "http://127.0.0.1:$((SERVER_PORT + 1))/metrics" 2>/dev/null |
        awk '/^gearshift_store_commit_seconds_count/ {c = $2} /^gearshift_store_commit_seconds_sum/ {s = $2}
             END { if (c != "") print c, s }'
    }
    # runs one load command; its JSON line gains the side, the server,
    # PostgreSQL's write transactions and CPU over the command, and
    # Gearshift's group commits
    phase() {
      local x0 c0 x1 c1 m0 m1 line extra=""
      x0=$(next_xid); c0=$(pg_cpu); m0=$(store_commits)
      line=$("$@" | tail -1)
      x1=$(next_xid); c1=$(pg_cpu); m1=$(store_commits)
      [ -n "$line" ] || line='{"error":"no result line","ok":false}'
      if [ -n "$m0" ] && [ -n "$m1" ]; then
        extra=$(awk -v a="$m0" -v b="$m1" 'BEGIN { split(a, x, " "); split(b, y, " ")
          printf "\"store_commits\":%d,\"store_commit_s\":%.6f,", y[1] - x[1], y[2] - x[2] }')
      fi
      printf '%s\n' "$line" | sed "s/^{/{\"side\":\"$side\",\"rep\":$rep,\"server\":\"$sname\",\"pre_busy_cores\":$pre,\"pg_xacts\":$((x1 - x0)),\"pg_cpu_s\":$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }'),$extra/" >>"$lines"
    }
    for rep in $(seq 1 "$REPS"); do
      for side in A B; do
        if [ $side = A ]; then cmd=$ac sname=$an db=$adb; else cmd=$bc sname=$bn db=$bdb; fi
        pre=$(wait_quiet)
        k0=$(q -d postgres -c "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'")
        server_start "$cmd" || { echo "{\"side\":\"$side\",\"rep\":$rep,\"scenario\":\"A_submit\",\"error\":\"server did not start\",\"ok\":false}" >>"$lines"; continue; }
        fa="bench_Sa_$$_$RANDOM" fb="bench_Sb_$$_$RANDOM"
        common=(-p "$SERVER_PORT" -P "$SERVER_PID" -T "$SUB_T")
        phase "$GEARLOAD" bg "${common[@]}" -f "$fa" -c 4 -w 0 -n "$SUB_A_N"
        phase "$RAWLOAD" drain "${common[@]}" -f "$fa" -n "$SUB_A_N" -k 4 -L A_drain_raw
        phase "$RAWLOAD" bg "${common[@]}" -f "$fb" -u -n "$SUB_N" -m "$SUB_M" -D "$SUB_D" -L A_submit_256
        phase "$RAWLOAD" drain "${common[@]}" -f "$fb" -n "$SUB_N" -k 4 -L A_drain_256
        server_stop
        sleep 1   # the server's backends report their counters as they exit
        k1=$(q -d postgres -c "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'")
        # the churn's dead rows are vacuumed now, not by an autovacuum
        # during the other side's run (it waits for one already running)
        q -d "$db" -c 'VACUUM'
        echo "{\"side\":\"$side\",\"rep\":$rep,\"server\":\"$sname\",\"scenario\":\"server_lifetime\",\"database\":\"$db\",\"xact_commit\":$((k1 - k0)),\"jobs\":$((SUB_A_N + SUB_N))}" >>"$lines"
      done
    done
  )
  {
    printf '{"A":{"name":"%s","cmd":"%s"},"B":{"name":"%s","cmd":"%s"},"reps":%s,"params":{"A_N":%s,"R_N":%s,"SUB_M":%s,"SUB_D":%s},"machine":"%s","results":[\n' \
      "$an" "$(printf '%s' "$ac" | sed 's/"/\\"/g')" "$bn" "$(printf '%s' "$bc" | sed 's/"/\\"/g')" "$REPS" "$SUB_A_N" "$SUB_N" "$SUB_M" "$SUB_D" \
      "$(nproc) cores, $(uname -r), PostgreSQL $PG_VERSION"
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
  for c in 1 4 16; do
    printf '  %s client(s): ' "$c"
    pgbench -n -h 127.0.0.1 -p "$PGPORT_" -U gearshift -c "$c" -j "$c" -T 5 -f "$f" gearmand 2>/dev/null |
      awk '/latency average/ {l=$4} /^tps/ {t=$3} END {printf "%.0f commits/s, latency %s ms\n", t, l}' |
      tee "$OUTDIR/yard-c$c.txt"
  done
  q -d gearmand -c 'DROP TABLE yard'
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(pgq pgqu mem yard sub)
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
    sub) if [ $PGQ_OK = 1 ]; then
           run_sub sub gearmand-t0-postgres "$GM_PGQ" gearmand gearshift-postgres "$GS_PG" gearshift
         fi ;;
    subab) [ -x "${GEARSHIFT_BEFORE:-}" ] || { echo "subab needs GEARSHIFT_BEFORE=a gearshift binary" >&2; exit 2; }
           # A database of its own: an older build refuses a newer schema.
           q -d postgres -c 'CREATE DATABASE gearshift_before' >/dev/null 2>&1 || true
           before=$GEARSHIFT_BEFORE${GS_PG#"$GEARSHIFT"}
           run_sub subab gearshift-before "${before%/gearshift}/gearshift_before" gearshift_before \
             gearshift-postgres "$GS_PG" gearshift ;;
    *) echo "unknown step $step (pgq, pgqu, mem, yard, sub, subab)" >&2; exit 2 ;;
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
WORK = ["A_submit", "A_drain", "B_rt", "R_echo", "R_submit", "R_drain", "R_fg", "R_submit_u", "R_drain_u", "A_submit_256"]
TARGET = {("pgq", "A_submit"): 10.0, ("mem", "R_fg"): 0.5, ("sub", "A_submit"): 3.0, ("sub", "A_submit_256"): 20.0}
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
# what PostgreSQL did for the sub step's submissions
for step in ("sub", "subab"):
    path = os.path.join(outdir, f"{step}.json")
    if step not in steps or not os.path.exists(path):
        continue
    d = json.load(open(path))
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    def cm(rs):  # Gearshift's mean commit time and jobs per commit
        rs = [r for r in rs if r.get("store_commits")]
        if not rs:
            return "- | -"
        return (f"{med([r['store_commit_s'] / r['store_commits'] * 1e3 for r in rs]):.3g}"
                f" | {med([r['ops'] / r['store_commits'] for r in rs]):.3g}")
    print()
    print(f"{step}: PostgreSQL per phase ({d.get('machine', '')}), medians over reps")
    print()
    print("| workload | server | jobs/s | server CPU s/Mjob | PostgreSQL write xacts/s | jobs per xact | PostgreSQL CPU s/Mjob | Gearshift's commit ms | jobs per commit |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for w in ("A_submit", "A_submit_256"):
        for side in ("A", "B"):
            rs = [r for r in d["results"] if r.get("scenario") == w and r["side"] == side and r.get("rate")]
            if not rs:
                continue
            print(f"| {w} | {d[side]['name']} | {fmt(med([r['rate'] for r in rs]))}"
                  f" | {med([r['server_cpu_s_per_mop'] for r in rs]):.3g}"
                  f" | {fmt(med([r['pg_xacts'] / r['secs'] for r in rs]))}"
                  f" | {med([r['ops'] / r['pg_xacts'] for r in rs if r['pg_xacts']]):.3g}"
                  f" | {med([r['pg_cpu_s'] / r['ops'] * 1e6 for r in rs]):.3g}"
                  f" | {cm(rs)} |")
    for side in ("A", "B"):
        ls = [r for r in d["results"] if r.get("scenario") == "server_lifetime" and r["side"] == side]
        if ls:
            print(f"\n{d[side]['name']}: pg_stat_database xact_commit per server lifetime"
                  f" (submit and drain, {ls[0]['jobs']} jobs): {', '.join(str(r['xact_commit']) for r in ls)}", end="")
    print()
print()
print(f"JSON and compare.sh's own tables: {outdir}/{{{','.join(steps)}}}.{{json,txt}}")
EOF
