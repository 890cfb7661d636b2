#!/usr/bin/env bash
# Runs a Gearshift server with what watches it in production: a Prometheus
# scraper on /metrics every 100 ms and an open dashboard (the live event
# stream, and the overview, functions and workers read every 2 s, as the
# page does). For the harness's SERVER_CMD / A_CMD / B_CMD, which stop the
# server by its pid: the watchers start first, then the server replaces this
# shell (same pid), and the watchers end when it does.
#
#   perf/with-observers.sh /path/gearshift serve -L 127.0.0.1 -p {port} --store memory ...
#
# The HTTP port is the Gearman port (`-p`) + 1, the server's default.
set -u
port=""
prev=""
for a in "$@"; do
  [ "$prev" = "-p" ] && port=$a
  prev=$a
done
[ -n "$port" ] || { echo "with-observers.sh: no -p PORT in the command" >&2; exit 2; }
http="http://127.0.0.1:$((port + 1))"
server=$$
watch() { # run "$@" until the server is gone
  sleep 0.5
  while kill -0 "$server" 2> /dev/null; do "$@" > /dev/null 2>&1; done
}
scrape() { curl -s -o /dev/null --max-time 2 "$http/metrics"; sleep 0.1; }
stream() { curl -s -N -o /dev/null --max-time 3600 "$http/api/v1/events"; sleep 0.2; }
page() {
  for p in overview functions workers; do
    curl -s -o /dev/null --max-time 2 "$http/api/v1/$p"
  done
  sleep 2
}
watch scrape &
watch stream &
watch page &
exec "$@"
