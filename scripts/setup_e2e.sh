#!/usr/bin/env bash
# End-to-end stack (DESIGN §4): livekit-sip built from the Go module proxy into ./bin, plus the Debian tools
# the e2e tests drive (Redis, sipp, tshark, Chromium, SoX, iproute2) and the web page's npm packages.
# Idempotent; every missing part is reported in ONE line and is not fatal (the tests that need it skip).
set -uo pipefail
cd "$(dirname "$0")/.."
LIVEKIT_SIP_VERSION=v1.11.0
DEB_PKGS=(redis-server sip-tester tshark chromium sox iproute2 pkg-config libopus-dev libopusfile-dev libsoxr-dev)
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for p in "${DEB_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-e2e: installing Debian packages: ${missing[*]}"
  # tshark asks whether non-root users may capture; answer once, non-interactively.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections 2>/dev/null
  if ! { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}"; } >out.setup-e2e-apt.log 2>&1; then
    still=()
    for p in "${missing[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || still+=("$p"); done
    echo "setup-e2e: Debian packages not installed: ${still[*]} ($(tail -1 out.setup-e2e-apt.log))"
  else
    rm -f out.setup-e2e-apt.log
  fi
fi

mkdir -p bin
if [ -x bin/livekit-sip ] && [ "$(cat bin/.livekit-sip.version 2>/dev/null)" = "$LIVEKIT_SIP_VERSION" ]; then
  :
elif ! command -v go >/dev/null 2>&1; then
  echo "livekit-sip not installed: go not found" | tee bin/.livekit-sip.missing | sed 's/^/setup-e2e: /'
elif ! pkg-config --exists opus opusfile soxr 2>/dev/null; then
  echo "livekit-sip not built: opus/opusfile/soxr development files missing" \
    | tee bin/.livekit-sip.missing | sed 's/^/setup-e2e: /'
else
  echo "setup-e2e: building livekit-sip $LIVEKIT_SIP_VERSION with cgo (first time only, several minutes)"
  if CGO_ENABLED=1 GOBIN="$PWD/bin" go install "github.com/livekit/sip/cmd/livekit-sip@$LIVEKIT_SIP_VERSION" \
      >out.livekit-sip-build.log 2>&1; then
    echo "$LIVEKIT_SIP_VERSION" > bin/.livekit-sip.version
    rm -f out.livekit-sip-build.log
  else
    status="$(grep -m1 -oE ': [0-9]{3} [A-Za-z ]+$' out.livekit-sip-build.log | sed 's/^: //')"
    detail="$(grep -m1 -E 'server response:|error|cannot|not found' out.livekit-sip-build.log | sed 's/^[[:space:]]*//')"
    why="${status:+module proxy answered $status, }$detail"
    echo "livekit-sip $LIVEKIT_SIP_VERSION could not be installed: ${why:-$(tail -1 out.livekit-sip-build.log)}" \
      | tee bin/.livekit-sip.missing | sed 's/^/setup-e2e: /'
  fi
fi
[ -x bin/livekit-sip ] && rm -f bin/.livekit-sip.missing

if [ -f web/package-lock.json ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "setup-e2e: npm not found; web call page not built (browser test will skip)"
  elif [ ! -f web/dist/app.js ] || [ web/package-lock.json -nt web/dist/app.js ] || [ web/src/app.ts -nt web/dist/app.js ]; then
    if ! (cd web && npm ci --no-audit --no-fund --silent && npm run --silent build) >out.web-build.log 2>&1; then
      echo "setup-e2e: web call page could not be built: $(tail -1 out.web-build.log)"
    else
      rm -f out.web-build.log
    fi
  fi
fi
exit 0
