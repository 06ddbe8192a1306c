#!/usr/bin/env bash
# Dependency vulnerability audit (pip-audit) of exactly what uv.lock pins. Fails on any known vulnerability.
# pip-audit needs a vulnerability service (PyPI's JSON API or OSV); where neither answers (a registry mirror
# without the JSON API, no route to OSV) it says so in one line and skips, rather than report a false "clean".
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
uv export --frozen --no-hashes --no-emit-project --format requirements-txt > out/audit-requirements.txt 2>/dev/null
probe() {
  .venv/bin/python - "$1" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=8) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
PY
}
if probe "https://pypi.org/pypi/pip/24.0/json"; then
  service=pypi
elif probe "https://api.osv.dev/v1/vulns/PYSEC-2021-1"; then
  service=osv
else
  echo "audit: skipped — no vulnerability service reachable from this machine (PyPI JSON API and OSV both unreachable)"
  exit 0
fi
.venv/bin/pip-audit -r out/audit-requirements.txt --no-deps --disable-pip -s "$service" --progress-spinner off
