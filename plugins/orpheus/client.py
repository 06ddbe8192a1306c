"""Async client of the Orpheus engine server: what the LiveKit TTS plugin (and benchmarks) call.

    client = EngineClient("unix:///tmp/parley-orpheus.sock")      # or ("ws://127.0.0.1:8765", secret)
    await client.connect()                                         # prewarm: connect + handshake now
    stream = client.open_stream(voice="tara", request_id="turn-7")
    await stream.push_text("Hello there. ")
    await stream.end()
    async for item in stream:                                      # bytes (int16 PCM 24 kHz) or EngineEvent
        ...
    await stream.cancel()                                          # at any time (barge-in)
    await client.capacity()                                        # {"ready", "active_streams", ...}

Connections are persistent and pooled: streams are multiplexed over `pool_size` connections (opened up
front by `connect()`), and a lost connection is re-established for the next stream. A lost connection ends
its open streams with an `error` event (code `connection_lost`) rather than hanging. A frozen engine (alive
socket, no answers) is found with `next_item(timeout)` and `ping(timeout)`; `marks` counts the flushes the
engine has fully spoken, so `voiced_text()` is what the listener has heard in full. No livekit import.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from plugins.orpheus import protocol

log = logging.getLogger("parley.orpheus.client")


class EngineError(RuntimeError):
    """The engine refused or failed a request; `code` is machine-readable (full, bad_request, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class EngineEvent:
    """opened | first_audio | done | error, with the server's fields in `data`."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def code(self) -> str:
        return str(self.data.get("code", ""))


class _Connection:
    def __init__(self, client: EngineClient) -> None:
        self.client = client
        self.streams: dict[int, ClientStream] = {}
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.alive = False
        self._reader_task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ws: Any = None
        self._ws_queue: asyncio.Queue[str | None] | None = None
        self._ws_task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        kind, target = protocol.parse_address(self.client.address)
        timeout = self.client.connect_timeout_s
        if kind == "unix":
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(target, limit=protocol.MAX_FRAME), timeout
            )
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read_unix(reader))
        else:
            from websockets.asyncio.client import connect

            self._ws = await asyncio.wait_for(connect(target, max_size=protocol.MAX_FRAME), timeout)
            self._ws_queue = asyncio.Queue()
            self._ws_task = asyncio.create_task(self._write_ws())
            self._reader_task = asyncio.create_task(self._read_ws())
        self.alive = True
        hello = await asyncio.wait_for(self.request({"op": "hello", "secret": self.client.secret}), timeout)
        if not hello.get("ok"):
            raise EngineError(hello.get("code", "refused"), hello.get("message", "handshake refused"))

    def send(self, obj: dict[str, Any]) -> None:
        if not self.alive:
            raise EngineError("connection_lost", "engine connection is closed")
        if self._writer is not None:
            self._writer.write(protocol.json_frame(obj))
        elif self._ws_queue is not None:
            self._ws_queue.put_nowait(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))

    async def drain(self) -> None:
        if self._writer is not None and self.alive:
            with contextlib.suppress(ConnectionError):
                await self._writer.drain()

    async def request(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Send an op that is answered by id (hello, capacity, ping)."""
        rid = next(self.client._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        try:
            self.send({**obj, "id": rid})
            return await fut
        finally:
            self.pending.pop(rid, None)

    async def _read_unix(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                kind, payload = await protocol.read_frame(reader)
                if kind == protocol.KIND_AUDIO:
                    sid, pcm = protocol.split_audio(payload)
                    s = self.streams.get(sid)
                    if s is not None:
                        s._on_audio(pcm)
                else:
                    self._on_json(protocol.parse_json(payload))
        except (asyncio.IncompleteReadError, ConnectionError, protocol.ProtocolError, OSError):
            pass
        finally:
            self._lost()

    async def _read_ws(self) -> None:
        try:
            async for message in self._ws:
                if isinstance(message, bytes):
                    sid, pcm = protocol.split_audio(message)
                    s = self.streams.get(sid)
                    if s is not None:
                        s._on_audio(pcm)
                else:
                    self._on_json(protocol.parse_json(message))
        except Exception:
            pass
        finally:
            self._lost()

    async def _write_ws(self) -> None:
        assert self._ws_queue is not None
        with contextlib.suppress(Exception):
            while True:
                item = await self._ws_queue.get()
                if item is None:
                    return
                await self._ws.send(item)

    def _on_json(self, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if op == "event":
            s = self.streams.get(msg.get("sid", -1))
            if s is not None:
                s._on_event(msg)
            return
        rid = msg.get("id")
        if rid is not None and rid in self.pending:
            fut = self.pending[rid]
            if not fut.done():
                fut.set_result(msg)
            return
        if op == "error":
            sid = msg.get("sid")
            s = self.streams.get(sid) if isinstance(sid, int) else None
            if s is not None:
                s._on_event(
                    {
                        "type": "error",
                        "code": msg.get("code", "bad_request"),
                        "message": msg.get("message", ""),
                    }
                )
            else:
                log.warning("engine reported: %s", msg.get("message"))

    def _lost(self) -> None:
        if not self.alive and not self.streams and not self.pending:
            return
        self.alive = False
        for s in list(self.streams.values()):
            s._on_event({"type": "error", "code": "connection_lost", "message": "engine connection lost"})
        self.streams.clear()
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(EngineError("connection_lost", "engine connection lost"))

    async def close(self) -> None:
        self.alive = False
        if self._writer is not None:
            self._writer.close()
        if self._ws is not None:
            if self._ws_queue is not None:
                self._ws_queue.put_nowait(None)
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(BaseException):
                await self._reader_task
        self._lost()


class EngineClient:
    def __init__(
        self, address: str, secret: str = "", pool_size: int = 1, connect_timeout_s: float = 1.0
    ) -> None:
        protocol.parse_address(address)  # fail early on a bad address
        self.address = address
        self.secret = secret
        self.pool_size = max(1, pool_size)
        self.connect_timeout_s = connect_timeout_s
        self._pool: list[_Connection] = []
        self._ids = itertools.count(1)
        self._sids = itertools.count(1)
        self._rr = itertools.count()
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return any(c.alive for c in self._pool)

    async def connect(self) -> None:
        """Open (or re-open) the pooled connections and handshake (EngineError, OSError, TimeoutError)."""
        async with self._lock:
            self._pool = [c for c in self._pool if c.alive]
            while len(self._pool) < self.pool_size:
                conn = _Connection(self)
                try:
                    await conn.open()
                except BaseException:
                    await conn.close()
                    raise
                self._pool.append(conn)

    def _conn(self) -> _Connection:
        live = [c for c in self._pool if c.alive]
        if not live:
            raise EngineError(
                "not_connected", f"no connection to the engine at {self.address}; call connect()"
            )
        return min(live, key=lambda c: (len(c.streams), next(self._rr)))

    def open_stream(
        self, voice: str = "tara", request_id: str = "", language: str | None = None
    ) -> ClientStream:
        """Start a stream on the least busy connection (sent at once; a refusal arrives as an error event)."""
        conn = self._conn()
        sid = next(self._sids)
        stream = ClientStream(conn, sid)
        conn.streams[sid] = stream
        msg: dict[str, Any] = {"op": "open", "sid": sid, "voice": voice, "request_id": request_id}
        if language:
            msg["language"] = language
        conn.send(msg)
        return stream

    async def capacity(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The engine's readiness and headroom (for the worker's load report); TimeoutError past
        `timeout_s` (a frozen engine keeps its socket open but never answers)."""
        if not self.connected:
            await self.connect()
        reply = await asyncio.wait_for(self._conn().request({"op": "capacity"}), timeout_s)
        reply.pop("op", None)
        reply.pop("id", None)
        return reply

    async def ensure_connected(self) -> None:
        if not self.connected:
            await self.connect()

    async def close(self) -> None:
        pool, self._pool = self._pool, []
        for c in pool:
            await c.close()


_END = object()


class ClientStream:
    """One synthesis stream. Iterate it for PCM `bytes` and `EngineEvent`s; it ends after done/error."""

    def __init__(self, conn: _Connection, sid: int) -> None:
        self._conn = conn
        self.sid = sid
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.finished = False
        self.final_event: EngineEvent | None = None
        self.first_audio_ms: float | None = None
        self.texts: list[str] = []  # text sent between flushes, one entry per flush (for voiced_text)
        self.marks = 0  # flushes whose text the engine has sent in full as audio
        self.ended = False  # `end` sent: the engine owes audio (or done) until it finishes
        self.last_audio_at: float | None = None  # monotonic
        self.last_text_at: float | None = None
        self._flushed_last = False

    async def push_text(self, text: str, written: str | None = None) -> None:
        """Send `text`; `voiced_text` reports `written` for it when given (the words before a respelling)."""
        self._send({"op": "text", "sid": self.sid, "text": text})
        if not self.texts or self._flushed_last:
            self.texts.append("")
        self.texts[-1] += text if written is None else written
        self._flushed_last = False
        self.last_text_at = time.monotonic()
        await self._conn.drain()

    async def flush(self) -> None:
        self._send({"op": "flush", "sid": self.sid})
        if not self.texts or self._flushed_last:
            self.texts.append("")  # an empty flush still counts as one mark
        self._flushed_last = True

    async def end(self) -> None:
        self._send({"op": "end", "sid": self.sid})
        self.ended = True

    def voiced_text(self) -> str:
        """The text (as pushed) the engine has fully sent as audio: every flush up to its last `mark`."""
        return "".join(self.texts[: self.marks])

    def owes_audio(self) -> bool:
        """Whether the engine should be sending audio now: the stream ended, or text came after the last
        audio. (Between pieces, waiting for the LLM, it owes nothing.)"""
        if self.finished:
            return False
        if self.ended:
            return True
        return self.last_text_at is not None and (self.last_audio_at or 0.0) < self.last_text_at

    async def next_item(self, timeout_s: float | None) -> bytes | EngineEvent | None:
        """The next PCM chunk or event (None once the stream has ended); TimeoutError past `timeout_s`."""
        item = await asyncio.wait_for(self._queue.get(), timeout_s)
        return None if item is _END else item

    async def ping(self, timeout_s: float) -> bool:
        """Whether the engine answers at all within `timeout_s` (a SIGSTOPped or wedged one does not)."""
        try:
            await asyncio.wait_for(self._conn.request({"op": "ping"}), timeout_s)
        except (TimeoutError, EngineError):
            return False
        return True

    async def cancel(self) -> None:
        """Stop generation now; iteration ends with a `done` (reason cancelled) event."""
        if self.finished:
            return
        with contextlib.suppress(EngineError):
            self._send({"op": "cancel", "sid": self.sid})

    def _send(self, msg: dict[str, Any]) -> None:
        if self.finished:
            raise EngineError("stream_closed", f"stream {self.sid} already finished")
        self._conn.send(msg)

    def __aiter__(self) -> AsyncIterator[bytes | EngineEvent]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[bytes | EngineEvent]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            yield item

    async def collect(self) -> tuple[bytes, EngineEvent]:
        """Convenience: all PCM and the final event."""
        chunks = [item async for item in self if isinstance(item, bytes)]
        assert self.final_event is not None
        return b"".join(chunks), self.final_event

    def _on_audio(self, pcm: bytes) -> None:
        if not self.finished:
            self.last_audio_at = time.monotonic()
            self._queue.put_nowait(pcm)

    def _on_event(self, msg: dict[str, Any]) -> None:
        if self.finished:
            return
        data = {k: v for k, v in msg.items() if k not in ("op", "sid", "type")}
        if msg.get("type") == "mark":
            self.marks = max(self.marks, int(data.get("flushes", 0)))
            return
        event = EngineEvent(str(msg.get("type")), data)
        if event.type == "first_audio":
            self.first_audio_ms = data.get("ttfb_ms")
        self._queue.put_nowait(event)
        if event.type in ("done", "error"):
            self.finished = True
            self.final_event = event
            self._conn.streams.pop(self.sid, None)
            self._queue.put_nowait(_END)
