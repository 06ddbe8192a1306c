"""Shared pieces of the end-to-end tests: the stack fixture and the test audio."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.test_speech import speech_dir
from tests.e2e.harness import (
    PYTHON,
    REPO,
    ComponentMissing,
    E2EStack,
    StackOptions,
    missing_reason,
)

CONVERSATION = speech_dir() / "conversation"  # the project's own test speech (simulator/test_speech.py)
WORKER_ENV: dict[str, str] = {}
# the real worker; its load counts its own calls (not host CPU), so a busy test machine never makes it refuse
WORKER_CMD = [str(PYTHON), str(REPO / "worker.py"), "start", "--set", "num_idle_processes=1"]


def start_stack(tmp_path: Path, **kw: object) -> E2EStack:
    """Start a stack or skip the test with the one-line reason a component is missing."""
    if not CONVERSATION.is_dir():
        pytest.skip(f"test audio not found: {CONVERSATION}")
    stack = E2EStack(StackOptions(out_dir=tmp_path, **kw))  # type: ignore[arg-type]
    try:
        stack.start()
    except ComponentMissing as why:
        stack.close()
        pytest.skip(str(why))
    except BaseException:
        stack.close()
        raise
    return stack


@pytest.fixture(scope="module")
def call_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2EStack]:
    """One stack (server, worker, and the call page when it is built) shared by a module's call tests."""
    out = tmp_path_factory.mktemp("stack")
    web = missing_reason("web-page") is None
    stack = start_stack(out, with_worker=True, with_web=web, worker_env=WORKER_ENV, worker_cmd=WORKER_CMD)
    try:
        yield stack
    finally:
        stack.close()


def close_and_check_sealed(stack: E2EStack) -> None:
    """Stop the stack, then fail if its capture holds any packet to or from an address not its own."""
    stack.close()
    count, leaks = stack.capture_summary()
    assert count > 100, "the capture saw no traffic: is it on the right namespace?"
    assert not leaks, f"{len(leaks)} packets left the namespace, first: {leaks[:3]}"


def record_figure(name: str, value: object) -> None:
    """Append a measured figure to $PARLEY_E2E_FIGURES (JSON lines) when set; tests never assert on time."""
    path = os.environ.get("PARLEY_E2E_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"name": name, "value": value}) + "\n")


def ulaw_wav(src: Path, dst: Path) -> Path:
    subprocess.run(["sox", str(src), "-r", "8000", "-c", "1", "-e", "u-law", str(dst)], check=True)
    return dst
