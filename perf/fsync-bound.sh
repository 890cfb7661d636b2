#!/usr/bin/env bash
# Needs the harness in ../shared/bench (rawload.c and gearload.c, compiled
# by perf/fsync-common.sh), beside this repository's root; BENCH=DIR points
# elsewhere.
#
# The ceiling on `--durability fsync` A_submit that this machine allows any
# server, measured next to the real figure. A_submit is libgearman's 4
# synchronous clients: each waits for its JOB_CREATED before it sends the
# next job. A server that answers only after the job is on disk makes each
# client's cycle at least
#   F  (one device flush: the mean of a loop of small durable writes into
#       a preallocated file on the data directory's file system, the faster
#       of fdatasync and O_DIRECT|O_DSYNC; see flush_us), plus
#   T1 (one client's whole turnaround when no flush is needed: the cycle of
#       a single libgearman client against Gearshift --store memory, on an
#       otherwise idle machine, so no CPU contention),
# so even if every flush were shared by all four clients, no server can
# acknowledge more than 4 / (F + T1) jobs per second. That ceiling ignores
# that the clients, the server and the flushes share 2 cores, so the script
# also runs a yardstick, the least a durable server must do
# (crates/gearshift-server/examples/fsync_ceiling.rs: one epoll loop, group
# commit, no job table; the better of its fdatasync and O_DIRECT|O_DSYNC
# runs is shown). It sets both against gearmand -t 0 in memory with the
# same 4 clients, with its default hash table (the baseline of
# perf/tables-2026-11-22.md's durable tables) and tuned (--hashtable-buckets
# 200003, gearmand at its best here), and against Gearshift fsync itself,
# REPS times.
#
#   perf/fsync-bound.sh [GEARSHIFT_BINARY]      (idle machine, ~3 min)
#
# Environment: BENCH (the harness dir with rawload.c and gearload.c, default
# ../shared/bench), REPS (3), DIR (where the data directory and the flush
# test file go, default /tmp), YARD (the yardstick binary, built when
# missing).
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=fsync-bound source perf/fsync-common.sh

# Mean microseconds of one small durable write, the faster of two ways:
# a 256-byte pwrite + fdatasync inside a file that was written (not just
# allocated) first, as Gearshift's log is, and a 4 KiB O_DIRECT|O_DSYNC
# pwrite into such a file (what a server bypassing the page cache would do).
flush_us() {
  python3 - "$WORK/flush.bin" <<'EOF'
import mmap, os, sys, time
path, n = sys.argv[1], 2000

def prepared(size):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b'\0' * size)
    os.fsync(fd)
    return fd

def timed(fd, buf, step, sync):
    t0 = time.perf_counter()
    for i in range(n):
        os.pwrite(fd, buf, i * step)
        if sync:
            os.fdatasync(fd)
    return (time.perf_counter() - t0) / n * 1e6

fd = prepared(n * 256 + 4096)
buffered = timed(fd, b'x' * 256, 256, True)
os.close(fd)
os.close(prepared(n * 4096))
fd = os.open(path, os.O_RDWR | os.O_DIRECT | os.O_DSYNC)
block = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT needs
block.write(b'x' * 4096)
direct = timed(fd, block, 4096, False)
os.close(fd)
os.unlink(path)
print('%.1f %.1f' % (buffered, direct))
EOF
}

# gearload bg against one server; prints jobs/s. Args: clients, jobs, command with {port}
rate() {
  local clients=$1 jobs=$2 port cmd pid out
  port=$("$RAW" freeport)
  cmd=${3//\{port\}/$port}
  $cmd &
  pid=$!
  for _ in $(seq 50); do "$RAW" ping -p "$port" >/dev/null 2>&1 && break; sleep 0.1; done
  out=$("$GL" bg -p "$port" -P "$pid" -w 0 -c "$clients" -n "$jobs" 2>/dev/null | head -1)
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  python3 -c 'import json,sys; print(int(json.loads(sys.argv[1])["rate"]))' "$out"
}

GEARMAND="/usr/sbin/gearmand -L 127.0.0.1 -p {port} -t 0 --log-file=none"
TUNED="$GEARMAND --hashtable-buckets 200003"
MEMORY="$GS serve -L 127.0.0.1 -p {port} --log-file none --store memory"
printf '%-4s %10s %10s %7s %10s %10s %10s %9s %9s | %-31s | %-24s\n' rep fdatasync O_DIRECT T1 ceiling/s 'gmd/s' 'tuned/s' 'yard/s' 'fsync/s' 'gearmand: ceiling yard fsync' 'tuned: ceiling fsync'
for rep in $(seq "$REPS"); do
  f=$(flush_us)
  t1=$(rate 1 20000 "$MEMORY" | awk '{printf "%.1f", 1e6 / $1}')
  g4=$(rate 4 100000 "$GEARMAND")
  tg4=$(rate 4 100000 "$TUNED")
  y4=$(rate 4 100000 "$YARD {port} $WORK")
  yd4=$(rate 4 100000 "$YARD {port} $WORK --direct")
  rm -f "$WORK/fsync-ceiling.log"
  rm -rf "$WORK/data"
  s4=$(rate 4 100000 "$GS serve -L 127.0.0.1 -p {port} --log-file none --data-dir $WORK/data --durability fsync")
  python3 -c '
import sys
rep, t1, g4, tg4, s4 = sys.argv[1], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
y4 = max(int(sys.argv[7]), int(sys.argv[8]))
buffered, direct = (float(x) for x in sys.argv[2].split())
c = 4e6 / (min(buffered, direct) + t1)
print("%-4s %8.1fus %8.1fus %5.1fus %10d %10d %10d %9d %9d | %11.2f %5.2f %12.2f | %11.2f %12.2f"
      % (rep, buffered, direct, t1, c, g4, tg4, y4, s4, c / g4, y4 / g4, s4 / g4, c / tg4, s4 / tg4))
' "$rep" "$f" "$t1" "$g4" "$tg4" "$s4" "$y4" "$yd4"
done
