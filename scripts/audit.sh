#!/usr/bin/env bash
# Dependency vulnerability audit: pip-audit of exactly what uv.lock pins, and `npm audit` of the call page's
# package-lock.json (web/). Fails on any known vulnerability. It also fails when no vulnerability database
# answers (PyPI's JSON API or OSV for Python, the npm registry's audit endpoint for the page): a skip that
# exits 0 reads as "clean" in CI. On a machine that truly cannot reach one, `make audit AUDIT_OFFLINE=1`
# (or AUDIT_OFFLINE=1 in the environment) skips what cannot be checked, saying so in one line.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
offline="${AUDIT_OFFLINE:-0}"

unreachable() {  # $1: what was not checked, $2: why
  if [ "$offline" = 1 ]; then
    echo "audit: $1 NOT checked for known vulnerabilities (AUDIT_OFFLINE=1): $2"
    return 0
  fi
  echo "audit: failed: $1 cannot be checked: $2; run with AUDIT_OFFLINE=1 to skip it knowingly" >&2
  return 1
}

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

status=0
uv export --frozen --no-hashes --no-emit-project --format requirements-txt > out/audit-requirements.txt 2>/dev/null
service=""
if probe "https://pypi.org/pypi/pip/24.0/json"; then  # the per-version page pip-audit reads
  service=pypi
elif probe "https://api.osv.dev/v1/vulns/PYSEC-2021-1"; then
  service=osv
fi
if [ -n "$service" ]; then
  .venv/bin/pip-audit -r out/audit-requirements.txt --no-deps --disable-pip -s "$service" \
    --progress-spinner off || status=1
else
  unreachable "Python packages (uv.lock)" "neither PyPI's JSON API nor OSV answers from this machine" || status=1
fi

# npm exits 1 both for vulnerabilities and for an audit endpoint that refuses: its JSON tells them apart
report=$(cd web && npm audit --package-lock-only --json 2>/dev/null || true)
verdict=$(printf '%s' "$report" | .venv/bin/python -c '
import json, sys
try:
    doc = json.load(sys.stdin)
except ValueError:
    doc = {}
if "auditReportVersion" not in doc:
    print("unreachable")
else:
    print(sum((doc.get("metadata", {}).get("vulnerabilities") or {}).get(k, 0) for k in ("low", "moderate", "high", "critical")))
')
if [ "$verdict" = unreachable ]; then
  unreachable "call page packages (web/package-lock.json)" "the npm registry's audit endpoint does not answer" \
    || status=1
elif [ "$verdict" != 0 ]; then
  (cd web && npm audit --package-lock-only) || true
  echo "audit: failed: $verdict known vulnerabilities in the call page's packages" >&2
  status=1
else
  echo "audit: call page packages: no known vulnerabilities"
fi
exit "$status"
