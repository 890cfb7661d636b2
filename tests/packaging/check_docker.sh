#!/usr/bin/env bash
# The Dockerfile without a Docker engine (none runs on the test machines):
# the directives an operator relies on are there, and what the image runs
# works with the binary under test: the entrypoint's flags start a server
# on a data dir, and the HEALTHCHECK command passes against it and fails
# once it is gone.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${GEARSHIFT:-$PWD/target/debug/gearshift}
f=Dockerfile
for want in '^FROM .* AS build$' '^FROM debian:bookworm-slim$' '^USER gearshift$' \
    '^VOLUME \["/var/lib/gearshift"\]$' '^HEALTHCHECK ' '^EXPOSE 4730 4731$' '^ENTRYPOINT '; do
  grep -Eq "$want" "$f" || { echo "FAIL docker: no line matching $want"; exit 1; }
done
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# The ENTRYPOINT and CMD as JSON arrays, run here with ports of our own.
entry=$(sed -n 's/^ENTRYPOINT \(.*\)$/\1/p' "$f")
cmd=$(sed -n 's/^CMD \(.*\)$/\1/p' "$f")
health=$(sed -n 's/^  CMD \(.*\)$/\1/p' "$f")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mapfile -t argv < <(python3 - "$entry" "$cmd" "$BIN" "$tmp/data" "$port" <<'PY'
import json, sys
entry, cmd, binary, data, port = json.loads(sys.argv[1]), json.loads(sys.argv[2]), *sys.argv[3:]
argv = [binary] + entry[1:] + cmd
argv = [data if a == "/var/lib/gearshift" else a for a in argv]
argv = ["127.0.0.1" if a == "0.0.0.0" else a for a in argv]
argv = ["127.0.0.1:0" if a == "127.0.0.1:4731" else a for a in argv]
print("\n".join(argv + ["-p", port]))
PY
)
"${argv[@]}" > "$tmp/log" 2>&1 &
pid=$!
mapfile -t check < <(python3 - "$health" "$BIN" "$port" <<'PY'
import json, sys
argv, binary, port = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
print("\n".join([binary] + [a.replace("127.0.0.1:4730", "127.0.0.1:" + port) for a in argv[1:]]))
PY
)
for _ in $(seq 50); do "${check[@]}" >/dev/null 2>&1 && break; sleep 0.2; done
"${check[@]}" >/dev/null || { echo "FAIL docker: the healthcheck fails on a running server"; cat "$tmp/log"; exit 1; }
kill "$pid"; wait "$pid" || true; pid=""
if "${check[@]}" >/dev/null 2>&1; then echo "FAIL docker: the healthcheck passes with no server"; exit 1; fi
echo "PASS docker"
