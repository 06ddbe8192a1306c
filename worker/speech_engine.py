"""The host speech engine, started and kept alive by the worker (like the embedded LLM, worker/llm_server.py).

One engine process per host serves every job process's Whisper decodes (plugins/whisper/engine_server.py),
so a job process holds a socket instead of a model. The worker starts it before LiveKit's job processes,
hands them its address through the environment, and restarts it whenever it exits or stops making progress
(it answers no `capacity` within `stall_s`, or has had decodes that long without finishing one: frozen,
stopped, its decoders hung; issue 66): calls on it wait (one hold line) and get transcripts again as soon
as it listens (plugins/whisper/engine_client.py).

The engine runs `--supervised`: it ignores the SIGTERM/SIGINT a process-group stop sends, and exits when
the worker closes its stdin (on `close()`, or because the worker died), so it is never an orphan.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from plugins import wire

log = logging.getLogger("parley.stt.host")


class SpeechEngineStartError(RuntimeError):
    """The speech engine did not come up (one line for the operator)."""


@dataclass(frozen=True)
class HostSpeechEngineOptions:
    address: str = ""  # empty = a fresh socket in a private temporary folder
    model: str = "tiny.en"
    device: str = "cpu"
    backend: str = "ctranslate2"
    compute_type: str = "default"
    cpu_threads: int = 0
    workers: int = 2
    max_batch: int = 16
    secret: str = ""
    start_timeout_s: float = 60.0
    restart_delay_s: float = 0.2
    """First wait before a restart; doubles (to 5 s) while the engine keeps dying young."""
    log_path: str = ""  # the engine's stderr; empty = the worker's own stderr
    stall_s: float = 4.0
    """An engine that answers nothing, or has had decodes this long (or three times its slowest recent
    batch, if longer) without finishing one, is restarted; the client tells the caller to hold long before."""
    check_every_s: float = 0.5


class HostSpeechEngine:
    def __init__(self, options: HostSpeechEngineOptions = HostSpeechEngineOptions()) -> None:
        self.options = options
        self._own_dir = "" if options.address else tempfile.mkdtemp(prefix="parley-stt-")
        self.address = options.address or f"unix://{self._own_dir}/stt.sock"
        self._proc: subprocess.Popen[bytes] | None = None
        self._closing = threading.Event()
        self._monitor: threading.Thread | None = None
        self._lock = threading.Lock()
        self.restarts = 0
        self.last_capacity: tuple[float, dict[str, Any]] | None = None
        """(time.time(), answer) of the keeper's last `capacity` check: the worker's headroom reads it."""
        self.ready_at: float = 0.0
        """time.monotonic() when the engine last became ready (tests and logs measure restarts from it)."""

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _command(self) -> list[str]:
        o = self.options
        return [
            sys.executable,
            "-m",
            "plugins.whisper",
            "serve",
            "--supervised",
            "--address",
            self.address,
            "--model",
            o.model,
            "--device",
            o.device,
            "--backend",
            o.backend,
            "--compute-type",
            o.compute_type,
            "--cpu-threads",
            str(o.cpu_threads),
            "--workers",
            str(o.workers),
            "--max-batch",
            str(o.max_batch),
        ]

    def _spawn(self) -> None:
        env = {**os.environ, "PARLEY_STT_ENGINE_SECRET": self.options.secret}
        err = open(self.options.log_path, "ab") if self.options.log_path else None  # noqa: SIM115
        proc = subprocess.Popen(
            self._command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env
        )
        if err is not None:
            err.close()  # the child has its own copy
        line: list[bytes] = []

        def read() -> None:
            assert proc.stdout is not None
            for out in proc.stdout:
                if out.startswith(b"READY "):
                    line.append(out)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(self.options.start_timeout_s)
        if not line:
            status = proc.poll()
            _stop(proc)
            why = f"exited with status {status}" if status is not None else "timed out"
            raise SpeechEngineStartError(
                f"speech engine did not start ({why}, limit {self.options.start_timeout_s:.0f} s)"
            )
        with self._lock:
            self._proc = proc
        self.ready_at = time.monotonic()
        log.info("speech engine ready", extra={"address": self.address, "pid": proc.pid})

    def start(self) -> str:
        """Start the engine and its keeper; returns the address job processes connect to."""
        self._spawn()
        self._monitor = threading.Thread(target=self._keep_alive, name="stt-engine-keeper", daemon=True)
        self._monitor.start()
        return self.address

    def _keep_alive(self) -> None:
        delay = self.options.restart_delay_s
        while not self._closing.is_set():
            proc = self._proc
            if proc is None:
                return
            stalled = self._watch(proc)
            if self._closing.is_set():
                return
            lived = time.monotonic() - self.ready_at
            if stalled:
                log.warning(
                    "speech engine stalled; restarting", extra={"why": stalled, "lived_s": round(lived, 1)}
                )
                proc.kill()  # SIGKILL ends a stopped or wedged process too
                proc.wait()
            else:
                log.warning(
                    "speech engine exited; restarting",
                    extra={"status": proc.returncode, "lived_s": round(lived, 1)},
                )
            delay = self.options.restart_delay_s if lived > 30 else min(5.0, delay * 2)
            while not self._closing.wait(delay):
                try:
                    self._spawn()
                except SpeechEngineStartError as e:
                    log.error("speech engine restart failed", extra={"error": str(e)})
                    continue
                self.restarts += 1
                break

    def _watch(self, proc: subprocess.Popen[bytes]) -> str:
        """Wait until the engine exits ("") or stops making progress (why, one line). An engine that does
        not answer or finishes no decode while it still burns CPU is slow (a starved host), not stalled:
        restarting it would cost every call its decodes and a model load on a host that has no CPU."""
        o = self.options
        path = wire.parse_address(self.address)[1]
        used: deque[tuple[float, float]] = deque()  # (time, the engine's CPU seconds so far)
        while True:
            try:
                proc.wait(o.check_every_s)
                return ""
            except subprocess.TimeoutExpired:
                pass
            if self._closing.is_set():
                return ""
            _note_cpu(used, proc.pid, o.stall_s / 2)
            why = ""
            try:
                capacity = ask_capacity(path, o.secret, o.stall_s)
            except TimeoutError:
                why = f"no capacity answer within {o.stall_s:.1f} s"
            except (OSError, ValueError) as e:
                if proc.poll() is not None or self._closing.is_set():
                    return ""
                log.info("speech engine check failed", extra={"error": str(e)[:200]})
                continue
            else:
                self.last_capacity = (time.time(), capacity)
                stalled_s = float(capacity.get("stalled_s") or 0.0)
                # a host so busy that a real batch takes seconds gets three of them before it is a stall
                if stalled_s >= max(o.stall_s, 3 * float(capacity.get("slowest_batch_s") or 0.0)):
                    why = f"no decode finished for {stalled_s:.1f} s with decodes waiting"
            if not why or self._closing.is_set():
                continue
            _note_cpu(used, proc.pid, o.stall_s / 2)
            busy = used[-1][1] - used[0][1] if len(used) > 1 else 0.0
            if busy >= MIN_BUSY_CPU_S_PER_S * (used[-1][0] - used[0][0]):
                log.warning("speech engine slow but working", extra={"why": why, "cpu_s": round(busy, 2)})
                continue
            return why

    def close(self) -> None:
        self._closing.set()
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc)
        if self._monitor is not None:
            self._monitor.join(5.0)
        if self._own_dir:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    def __enter__(self) -> HostSpeechEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_HEADER = struct.Struct(">IB")
MIN_BUSY_CPU_S_PER_S = 0.05
"""An engine using this much CPU is decoding, however slowly; a stopped or hung one uses none."""


def _note_cpu(used: deque[tuple[float, float]], pid: int, window_s: float) -> None:
    """Append the engine's CPU seconds now; keep about `window_s` of them."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    except (OSError, ValueError, IndexError):
        return  # no /proc: every stall counts
    now = time.monotonic()
    used.append((now, cpu))
    while len(used) > 2 and now - used[1][0] >= window_s:
        used.popleft()


def ask_capacity(path: str, secret: str, timeout_s: float) -> dict[str, Any]:
    """hello + capacity on the engine's socket, blocking; the answer within `timeout_s` or TimeoutError."""
    deadline = time.monotonic() + timeout_s
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(path)
        sock.sendall(
            wire.json_frame({"op": "hello", "id": 1, "secret": secret})
            + wire.json_frame({"op": "capacity", "id": 2})
        )
        while True:
            length, kind = _HEADER.unpack(_recv(sock, _HEADER.size, deadline))
            if not 1 <= length <= wire.MAX_FRAME:
                raise wire.ProtocolError(f"frame length {length} out of range")
            payload = _recv(sock, length - 1, deadline)
            if bytes([kind]) != wire.KIND_JSON:
                continue
            msg = wire.parse_json(payload)
            if msg.get("op") == "error":
                raise ConnectionError(f"speech engine refused: {msg.get('code')}")
            if msg.get("op") == "capacity":
                return msg


def _recv(sock: socket.socket, n: int, deadline: float) -> bytes:
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer")
        sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Close its stdin (a supervised engine exits on that), then insist."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    if proc.poll() is None:
        proc.kill()
        proc.wait(5)
