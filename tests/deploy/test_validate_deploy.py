"""scripts/validate_deploy.sh: hadolint + kubeconform over deploy/, offline, failing on any finding."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "validate_deploy.sh"

pytestmark = pytest.mark.skipif(
    shutil.which("go") is None and not (ROOT / "bin" / "kubeconform").exists(),
    reason="needs Go (to install kubeconform) or bin/kubeconform",
)


def run_validator(*targets: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, targets)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_dockerfiles_and_manifests_pass_with_no_finding() -> None:
    res = run_validator()
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "deploy/Dockerfile.engine: ok" in out
    assert "deploy/Dockerfile.worker: ok" in out
    assert "Invalid: 0, Errors: 0, Skipped: 0" in out
    found = int(out.split("Summary: ")[1].split(" resource")[0])
    assert found >= 20, out  # every manifest was actually read


def test_an_unknown_field_fails_validation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad}\n"
        "spec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n"
        "    spec:\n      containers:\n        - {name: c, image: 'x:1', imagePullPolcy: Always}\n"
    )
    res = run_validator(bad)
    assert res.returncode != 0
    assert "imagePullPolcy" in res.stdout + res.stderr


def test_a_kind_without_schema_fails_validation(tmp_path: Path) -> None:
    bad = tmp_path / "crd.yaml"
    bad.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    assert run_validator(bad).returncode != 0


def test_hadolint_config_rejects_a_bad_dockerfile(tmp_path: Path) -> None:
    assert run_validator().returncode == 0  # installs bin/hadolint when missing
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM python:latest\nRUN pip install requests\nUSER root\n")
    res = subprocess.run(
        [str(ROOT / "bin" / "hadolint"), "--config", str(ROOT / "deploy" / "hadolint.yaml"), str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode != 0
    assert "DL3007" in res.stdout  # :latest
    assert "DL3013" in res.stdout  # unpinned pip install
