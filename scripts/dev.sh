#!/usr/bin/env bash
# `make dev`: a local LiveKit server, the Parley worker and the browser call page on this machine. Signalling
# and the page listen on loopback; media uses this machine's own interface addresses (no STUN, no external
# address lookup). Prints the URL to open; Ctrl-C stops everything it started.
#
# Ports: PARLEY_DEV_LIVEKIT_PORT (7880), PARLEY_DEV_WEB_PORT (8080); UDP 7882 and TCP 7881 for media.
set -euo pipefail
cd "$(dirname "$0")/.."

LK_PORT="${PARLEY_DEV_LIVEKIT_PORT:-7880}"
WEB_PORT="${PARLEY_DEV_WEB_PORT:-8080}"
export LIVEKIT_API_KEY="${LIVEKIT_API_KEY:-devkey}"
export LIVEKIT_API_SECRET="${LIVEKIT_API_SECRET:-secret}"
export LIVEKIT_URL="ws://127.0.0.1:${LK_PORT}"
PY=.venv/bin/python
LOGS=out/dev
mkdir -p "$LOGS"

need() { command -v "$1" >/dev/null 2>&1 || [ -x "bin/$1" ] || { echo "dev: $1 not found: $2" >&2; exit 1; }; }
need livekit-server "run \`make setup\` (builds bin/livekit-server)"
[ -x "$PY" ] || { echo "dev: .venv missing: run \`make setup\`" >&2; exit 1; }
if [ ! -f web/dist/app.js ]; then
  need npm "install Node.js 20"
  echo "dev: building the call page"
  (cd web && npm ci --no-audit --no-fund --silent && npm run --silent build) >"$LOGS/web-build.log" 2>&1 \
    || { echo "dev: call page build failed, see $LOGS/web-build.log" >&2; exit 1; }
fi

cat >"$LOGS/livekit.yaml" <<EOF
port: ${LK_PORT}
bind_addresses: ["127.0.0.1"]
rtc:
  tcp_port: 7881
  udp_port: 7882
  use_external_ip: false  # this machine's own interface addresses; never a STUN lookup
keys:
  ${LIVEKIT_API_KEY}: ${LIVEKIT_API_SECRET}
room:
  empty_timeout: 30
  departure_timeout: 5
logging:
  level: warn
EOF

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

wait_port() {  # port, name, pid
  for _ in $(seq 1 150); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    kill -0 "$3" 2>/dev/null || { echo "dev: $2 exited, see $LOGS/$2.log" >&2; exit 1; }
    sleep 0.2
  done
  echo "dev: $2 is not listening on port $1 after 30 s, see $LOGS/$2.log" >&2
  exit 1
}

PATH="$PWD/bin:$PATH" livekit-server --dev --config "$LOGS/livekit.yaml" >"$LOGS/livekit-server.log" 2>&1 &
pids+=($!); wait_port "$LK_PORT" livekit-server "$!"
# --dev: /token without a key, allowed only because the page listens on loopback (see web/README.md)
"$PY" -m web.server --host 127.0.0.1 --port "$WEB_PORT" --dev >"$LOGS/web.log" 2>&1 &
pids+=($!); wait_port "$WEB_PORT" web "$!"
"$PY" worker.py dev >"$LOGS/worker.log" 2>&1 &
worker=$!; pids+=("$worker")
for _ in $(seq 1 600); do
  grep -q "registered worker" "$LOGS/worker.log" 2>/dev/null && break
  kill -0 "$worker" 2>/dev/null || { echo "dev: worker exited: $(tail -1 "$LOGS/worker.log")" >&2; exit 1; }
  sleep 0.2
done

echo "parley dev: open http://127.0.0.1:${WEB_PORT}/ and press Join call  (logs in $LOGS/, Ctrl-C to stop)"
wait -n "${pids[@]}" || true
echo "dev: a component stopped; see $LOGS/" >&2
