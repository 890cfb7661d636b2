#!/usr/bin/env bash
# Runs a Gearshift server with what watches it in production (perf/observer.py:
# a Prometheus scraper on /metrics every 100 ms and an open dashboard: its
# event stream and its reads every 2 s). For the harness's SERVER_CMD / A_CMD /
# B_CMD, which stop the server by its pid: the observer starts first, then the
# server replaces this shell (same pid), and the observer ends when it does.
#
#   perf/with-observers.sh /path/gearshift serve -L 127.0.0.1 -p {port} --store memory ...
#
# The HTTP port is the Gearman port (`-p`) + 1, the server's default.
# OBSERVERS picks the watchers (default "scrape,stream,page"); STREAM_QUERY
# the event stream's query (default: the dashboard's kinds; "" for all).
set -u
port=""
prev=""
for a in "$@"; do
  [ "$prev" = "-p" ] && port=$a
  prev=$a
done
[ -n "$port" ] || { echo "with-observers.sh: no -p PORT in the command" >&2; exit 2; }
args=(--server-pid $$ --only "${OBSERVERS:-scrape,stream,page}")
[ -n "${STREAM_QUERY+x}" ] && args+=(--query "$STREAM_QUERY")
python3 "$(dirname "$0")/observer.py" "$((port + 1))" "${args[@]}" &
exec "$@"
