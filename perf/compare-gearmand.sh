#!/usr/bin/env bash
# Needs the harness in ../shared/bench (its compare.sh, load tools and
# report.py), beside this repository's root; BENCH=DIR points elsewhere.
#
# Regenerates the 2-core side-by-side tables (perf/tables-2026-11-22.md,
# summed up in docs/benchmarks.md): Gearshift
# against gearmand 1.1.20 on this machine, through the independent harness in
# ../shared/bench (compare.sh runs the two servers interleaved, A B A B ...).
#
#   perf/compare-gearmand.sh [STEP ...]         # default: every step
#
# Steps (each writes perf/results/tables/<name>.json; run them one after another,
# never in parallel, on an otherwise idle machine):
#   tuned     all scenario groups, gearmand -t 0 --hashtable-buckets 200003
#             vs Gearshift --store memory                        (~12 min)
#   default   groups A and R, gearmand -t 0 (default buckets) vs Gearshift
#             --store memory                                     (~4 min)
#   interval  groups A and R, gearmand -t 0 vs Gearshift --durability interval=50
#   fsync     groups A and R, gearmand -t 0 vs Gearshift --durability fsync
#   sqlite    groups A and R at 10,000 jobs, gearmand -t 0 with its libsqlite3
#             queue vs Gearshift --durability fsync
#   depth10k  group R with 10,000 jobs queued, tuned gearmand vs Gearshift memory
#   depth1m   group R with 1,000,000 jobs queued, the same servers
#   threads   group R and B, Gearshift on one thread vs --io-threads 2
#
# Environment: BENCH (harness dir, default ../shared/bench), REPS (3),
# GEARSHIFT (binary, default target/release/gearshift; built if missing),
# OUTDIR (default perf/results/tables).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-../shared/bench}
REPS=${REPS:-3}
GEARSHIFT=${GEARSHIFT:-$PWD/target/release/gearshift}
OUTDIR=${OUTDIR:-perf/results/tables}
[ -x "$BENCH/compare.sh" ] || { echo "no harness at $BENCH (set BENCH=...)" >&2; exit 2; }
if [ ! -x "$GEARSHIFT" ]; then
  cargo build --release -p gearshift
fi
mkdir -p "$OUTDIR"
DATA=$(mktemp -d /tmp/gs-bench.XXXXXX)
trap 'rm -rf "$DATA"' EXIT

GM='/usr/sbin/gearmand -L 127.0.0.1 -p {port} -t 0 --log-file=none -P /tmp/gearmand-bench-{port}.pid'
GM_TUNED="$GM --hashtable-buckets 200003"
GM_SQL="$GM -q libsqlite3 --libsqlite3-db /tmp/gm-bench-{port}.sqlite"
GS="$GEARSHIFT serve -L 127.0.0.1 -p {port} --log-file none"
GS_MEM="$GS --store memory"
GS_DISK="$GS --data-dir $DATA/{port}"

run() { # name, scenarios, A name, A cmd, B name, B cmd, [extra env...]
  local name=$1 scen=$2 an=$3 ac=$4 bn=$5 bc=$6
  shift 6
  echo "== $name: $an vs $bn ($scen)"
  env "$@" SCENARIOS="$scen" REPS="$REPS" A_NAME="$an" A_CMD="$ac" B_NAME="$bn" B_CMD="$bc" \
    OUT="$OUTDIR/$name.json" "$BENCH/compare.sh"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tuned default interval fsync sqlite depth10k depth1m threads)
for step in "${steps[@]}"; do
  case $step in
    tuned)    run tuned "A B C D E R" gearmand-t0-hb200003 "$GM_TUNED" gearshift-memory "$GS_MEM" ;;
    default)  run default "A R" gearmand-t0 "$GM" gearshift-memory "$GS_MEM" ;;
    interval) run interval "A R" gearmand-t0 "$GM" gearshift-interval50 "$GS_DISK --durability interval=50" ;;
    fsync)    run fsync "A R" gearmand-t0 "$GM" gearshift-fsync "$GS_DISK --durability fsync" ;;
    sqlite)   run sqlite "A R" gearmand-t0-sqlite "$GM_SQL" gearshift-fsync "$GS_DISK --durability fsync" A_N=10000 R_N=10000 ;;
    depth10k) run depth10k "R" gearmand-t0-hb200003 "$GM_TUNED" gearshift-memory "$GS_MEM" R_N=10000 ;;
    depth1m)  run depth1m "R" gearmand-t0-hb200003 "$GM_TUNED" gearshift-memory "$GS_MEM" R_N=1000000 T_LIMIT=60 ;;
    threads)  run threads "R B" gearshift-1-thread "$GS_MEM" gearshift-2-threads "$GS_MEM --io-threads 2" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
"$BENCH/report.py" compare "$OUTDIR"/*.json > /dev/null 2>&1 || true
echo "results in $OUTDIR/"
