"""How full the Orpheus engine is, for the worker's load report: `engine_fill()` (0..1), read from the
engine's `capacity` op and cached for about a second, and `query_capacity`, the one blocking exchange it
makes (no event loop needed: LiveKit runs the load function in an executor).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from plugins.orpheus import protocol
from plugins.orpheus.client import EngineError

log = logging.getLogger("parley.orpheus.tts")


@dataclass
class _FillProbe:
    address: str
    secret: str = ""
    timeout_s: float = 0.5
    max_age_s: float = 1.0
    unreachable_fill: float = 1.0  # 1.0 sends calls to other hosts; lower lets the CPU voice take them
    value: float = 0.0
    read_at: float = float("-inf")
    reachable: bool | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


_fill: _FillProbe | None = None


def configure_engine_fill(
    address: str,
    secret: str = "",
    timeout_s: float = 0.5,
    max_age_s: float = 1.0,
    unreachable_fill: float = 1.0,
) -> None:
    """Tell `engine_fill()` which engine to ask (the worker's settings, or a test's server)."""
    global _fill
    _fill = _FillProbe(address, secret, min(timeout_s, 0.5), max_age_s, unreachable_fill) if address else None


def engine_fill() -> float:
    """The engine's fill 0..1 (active / max streams; 1.0 while warming or unreachable; 0 with no engine).

    Blocking (LiveKit runs the load function in an executor); at most one engine query per `max_age_s`.
    Unconfigured (no `configure_engine_fill` yet), there is no engine to ask: 0.
    """
    probe = _fill
    if probe is None:
        return 0.0
    with probe.lock:
        now = time.monotonic()
        if now - probe.read_at < probe.max_age_s:
            return probe.value
        try:
            cap = query_capacity(probe.address, probe.secret, probe.timeout_s)
            value = float(cap.get("load", 1.0)) if cap.get("ready") else 1.0
            reachable = True
        except (OSError, ValueError, EngineError) as e:
            value, reachable = probe.unreachable_fill, False
            if probe.reachable is not False:
                log.warning(
                    "engine capacity unavailable at %s (%s); reporting fill %.2f",
                    probe.address,
                    e,
                    probe.unreachable_fill,
                )
        if reachable and probe.reachable is False:
            log.info("engine capacity readable again at %s", probe.address)
        probe.value, probe.read_at, probe.reachable = min(1.0, max(0.0, value)), now, reachable
        return probe.value


def query_capacity(address: str, secret: str = "", timeout_s: float = 0.5) -> dict[str, Any]:
    """One blocking hello + capacity exchange (no event loop needed). Raises OSError / EngineError."""
    kind, target = protocol.parse_address(address)
    hello = {"op": "hello", "id": 1, "secret": secret}
    ask = {"op": "capacity", "id": 2}
    if kind == "ws":
        import json

        from websockets.sync.client import connect

        with connect(target, open_timeout=timeout_s, close_timeout=timeout_s) as ws:
            ws.send(json.dumps(hello))
            ws.send(json.dumps(ask))
            while True:
                msg = protocol.parse_json(ws.recv(timeout=timeout_s))
                if (reply := _capacity_reply(msg)) is not None:
                    return reply
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(target)
        sock.sendall(protocol.json_frame(hello) + protocol.json_frame(ask))
        buf = b""
        while True:
            while len(buf) < 5:
                buf += _recv(sock)
            length = int.from_bytes(buf[:4], "big")
            while len(buf) < 4 + length:
                buf += _recv(sock)
            kind_byte, payload, buf = buf[4:5], buf[5 : 4 + length], buf[4 + length :]
            if kind_byte == protocol.KIND_JSON and (reply := _capacity_reply(protocol.parse_json(payload))):
                return reply


def _recv(sock: socket.socket) -> bytes:
    data = sock.recv(65536)
    if not data:
        raise ConnectionError("engine closed the connection")
    return data


def _capacity_reply(msg: dict[str, Any]) -> dict[str, Any] | None:
    if msg.get("op") == "error":
        raise EngineError(str(msg.get("code", "error")), str(msg.get("message", "")))
    if msg.get("op") == "capacity":
        return msg
    return None
