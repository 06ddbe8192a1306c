"""Shared pieces of the end-to-end tests: the stack fixture and the test audio."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import (
    API_KEY,
    API_SECRET,
    PYTHON,
    ComponentMissing,
    E2EStack,
    StackOptions,
    missing_reason,
)

SHARED_AUDIO = Path(__file__).resolve().parents[3] / "shared" / "audio"
CONVERSATION = SHARED_AUDIO / "conversation"
WORKER_ENV = {"PARLEY_NUM_IDLE_PROCESSES": "1"}
WORKER_CMD = [str(PYTHON), "-m", "tests.e2e.worker_launcher", "start"]


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
    # The test machine's 2 cores are shared: a busy CPU must not make the only worker refuse the call.
    web = missing_reason("web-page") is None
    stack = start_stack(out, with_worker=True, with_web=web, worker_env=WORKER_ENV, worker_cmd=WORKER_CMD)
    try:
        yield stack
    finally:
        stack.close()


def run_rtc_call(stack: E2EStack, out: Path, max_turns: int = 0, timeout: float = 240) -> dict:
    cmd = [
        str(PYTHON),
        "-m",
        "tests.e2e.rtc_peer",
        "call",
        "--url",
        stack.livekit_url,
        "--api-key",
        API_KEY,
        "--api-secret",
        API_SECRET,
        "--agent-name",
        stack.opts.agent_name,
        "--turns",
        str(CONVERSATION),
        "--out",
        str(out),
    ]
    if max_turns:
        cmd += ["--max-turns", str(max_turns)]
    res = stack.run_in_ns(cmd, timeout=timeout)
    if res.returncode != 0:
        worker = next((p for p in stack.procs if p.name == "worker"), None)
        tail = worker.log_tail(25) if worker else ""
        raise AssertionError(f"rtc caller failed: {res.stderr[-1500:]}\n--- worker log ---\n{tail}")
    return json.loads((out / "result.json").read_text())


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
