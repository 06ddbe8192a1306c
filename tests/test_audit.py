"""scripts/audit.sh with no vulnerability database in reach (every request sent to a closed loopback port):
it fails, in one line per unchecked part, unless AUDIT_OFFLINE=1 says to skip knowingly (issue 66)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def audit(**env: str) -> subprocess.CompletedProcess[str]:
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens, nothing leaves the machine
    proxy = {k: dead for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "npm_config_proxy")}
    proxy |= {"npm_config_https_proxy": dead, "npm_config_fetch_retries": "0", "NO_PROXY": "", "no_proxy": ""}
    return subprocess.run(
        ["bash", "scripts/audit.sh"],
        cwd=ROOT,
        env={**os.environ, **proxy, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_audit_fails_when_no_vulnerability_database_answers() -> None:
    run = audit(AUDIT_OFFLINE="0")
    assert run.returncode == 1, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 2 and all("AUDIT_OFFLINE=1" in line for line in lines), lines
    assert "uv.lock" in lines[0] and "web/package-lock.json" in lines[1]


def test_audit_offline_flag_skips_and_says_so() -> None:
    run = audit(AUDIT_OFFLINE="1")
    assert run.returncode == 0, run.stdout + run.stderr
    said = [line for line in run.stdout.splitlines() if "NOT checked" in line]
    assert len(said) == 2 and "uv.lock" in said[0] and "web/package-lock.json" in said[1]
