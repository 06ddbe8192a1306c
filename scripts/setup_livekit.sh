#!/usr/bin/env bash
# livekit-server, pinned, built from the Go module proxy into ./bin (DESIGN §4).
set -euo pipefail
cd "$(dirname "$0")/.."
LIVEKIT_SERVER_VERSION=v1.13.5
mkdir -p bin out
LOG=out/livekit-build.log
if [ -x bin/livekit-server ] && [ "$(cat bin/.livekit-server.version 2>/dev/null)" = "$LIVEKIT_SERVER_VERSION" ]; then
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "setup: go not found; livekit-server not installed (end-to-end tests will skip)"; exit 0
fi
echo "setup: building livekit-server $LIVEKIT_SERVER_VERSION (first time only)"
if GOBIN="$PWD/bin" go install "github.com/livekit/livekit-server/cmd/server@$LIVEKIT_SERVER_VERSION" 2>"$LOG"; then
  mv bin/server bin/livekit-server
  echo "$LIVEKIT_SERVER_VERSION" > bin/.livekit-server.version
  rm -f "$LOG"
else
  echo "setup: livekit-server $LIVEKIT_SERVER_VERSION could not be built: $(tail -1 "$LOG")"
fi
