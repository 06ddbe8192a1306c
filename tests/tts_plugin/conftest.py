"""A real Orpheus engine server process on CPU (tiny random model), startable and killable by tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class EngineProcess:
    """`python -m plugins.orpheus serve` on a Unix socket; `start()` returns once it printed `ready`."""

    def __init__(self, model_dir: Path, sock: Path, log: Path, max_streams: int = 2) -> None:
        self.model_dir = model_dir
        self.sock = sock
        self.log = log
        self.max_streams = max_streams
        self.proc: subprocess.Popen[str] | None = None

    @property
    def address(self) -> str:
        return f"unix://{self.sock}"

    def start(self, timeout_s: float = 180.0) -> None:
        assert self.proc is None or self.proc.poll() is not None, "engine already running"
        cmd = [sys.executable, "-m", "plugins.orpheus", "serve", "--address", self.address]
        cmd += ["--test-model", str(self.model_dir), "--max-streams", str(self.max_streams)]
        with open(self.log, "a") as err:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
        deadline = time.monotonic() + timeout_s
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("ready"):
                return
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        pytest.fail(f"engine did not start; log tail: {self.log.read_text()[-1500:]}")

    def stop(self) -> None:
        """SIGKILL: the engine dies the way a crashed host does (no goodbye on the socket)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None
        self.sock.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def engine_model(orpheus_test_model: Path) -> Path:
    return orpheus_test_model


@pytest.fixture(scope="session")
def engine(engine_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    """One engine for the session (max 2 streams, so tests can fill it). Tests that kill it restart it."""
    tmp = tmp_path_factory.mktemp("engine")
    sock = tmp / "engine.sock"  # private to this run: nothing else cleans it up or binds it
    assert len(str(sock)) < 100, f"socket path too long for AF_UNIX: {sock}"
    proc = EngineProcess(engine_model, sock, tmp / "engine.log")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def running_engine(engine: EngineProcess) -> EngineProcess:
    """The session engine, restarted if an earlier test killed it."""
    if engine.proc is None or engine.proc.poll() is not None:
        engine.start()
    return engine
