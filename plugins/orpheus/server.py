"""The engine server: one process per GPU / MIG slice, reached over a persistent local connection.

Listens on a Unix socket (default) or a loopback-only WebSocket with a shared secret; each connection
multiplexes many streams. A dropped connection cancels its streams' generation at once. Admission control
refuses streams past `max_streams` with a clear `full` error; streams opened during warm-up wait for the
models. Optional HTTP on loopback: /metrics (Prometheus), /capacity (JSON), /healthz (200 once ready).
Bad messages get a one-line `error` reply; the connection and every other stream go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from plugins.local_socket import (
    SOCKET_MODE,
    FrameQueue,
    default_address,
    handshake_refusal,
    prepare_socket_dir,
)
from plugins.orpheus import protocol
from plugins.orpheus.engine.core import EngineFull, EngineStream, OrpheusEngine
from plugins.orpheus.engine.text import TextError
from plugins.orpheus.metrics import EngineMetrics

log = logging.getLogger("parley.orpheus.server")

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
MAX_TEXT_CHARS = 20000  # one text message; longer is a bad request


@dataclass(frozen=True)
class ServerOptions:
    address: str = field(default_factory=default_address)  # a private directory (local_socket)
    secret: str = ""  # required for WebSocket; optional extra check on Unix sockets
    http_port: int = 0  # 0 = no HTTP endpoint; else /metrics, /capacity, /healthz on 127.0.0.1
    max_write_buffer: int = 32 * 1024 * 1024  # a client this far behind is dropped


class _Conn(ABC):
    """One client connection: its streams, and how to send to it (the transport subclasses say how)."""

    def __init__(self, server: EngineServer, name: str) -> None:
        self.server = server
        self.name = name
        self.streams: dict[int, EngineStream] = {}
        self.authed = not server.options.secret
        self.closed = False

    # transport-specific
    @abstractmethod
    def send_json(self, obj: dict[str, Any]) -> None: ...

    @abstractmethod
    def send_audio(self, sid: int, pcm: bytes) -> None: ...

    @abstractmethod
    def abort(self) -> None: ...

    # protocol
    def handle(self, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if not self.authed:
            refusal = handshake_refusal(msg, self.server.options.secret)
            if refusal is not None:
                self.send_json(refusal)
                self.abort()
                return
            self.authed = True
        engine = self.server.engine
        if op == "hello":
            self.send_json({"op": "hello", "id": msg.get("id"), "ok": True, "capacity": engine.capacity()})
        elif op == "open":
            self._open(msg)
        elif op in ("text", "flush", "end", "cancel"):
            self._stream_op(op, msg)
        elif op == "capacity":
            self.send_json({"op": "capacity", "id": msg.get("id"), **engine.capacity()})
        elif op == "ping":
            self.send_json({"op": "pong", "id": msg.get("id")})
        else:
            raise protocol.ProtocolError(f"unknown op {op!r}")

    def _sid(self, msg: dict[str, Any]) -> int:
        sid = msg.get("sid")
        if not isinstance(sid, int) or isinstance(sid, bool) or not 0 < sid < 2**32:
            raise protocol.ProtocolError("sid must be an integer 1..2^32-1")
        return sid

    def _open(self, msg: dict[str, Any]) -> None:
        sid = self._sid(msg)
        if sid in self.streams:
            raise protocol.ProtocolError(f"stream {sid} already open")
        voice, language = msg.get("voice", "tara"), msg.get("language")
        request_id = str(msg.get("request_id", ""))[:128]
        if not isinstance(voice, str) or (language is not None and not isinstance(language, str)):
            raise protocol.ProtocolError("voice and language must be strings")
        try:
            stream = self.server.engine.open_stream(_Sink(self, sid), voice, language, request_id)
        except EngineFull as e:
            self.server.metrics.refused.labels("full").inc()
            self.send_json({"op": "event", "sid": sid, "type": "error", "code": "full", "message": str(e)})
            return
        except TextError as e:
            self.server.metrics.refused.labels("bad_request").inc()
            self.send_json(
                {"op": "event", "sid": sid, "type": "error", "code": "bad_request", "message": str(e)}
            )
            return
        self.streams[sid] = stream
        self.send_json({"op": "event", "sid": sid, "type": "opened", "ready": self.server.engine.ready})

    def _stream_op(self, op: str, msg: dict[str, Any]) -> None:
        sid = self._sid(msg)
        stream = self.streams.get(sid)
        if stream is None:
            if op == "cancel":
                return  # cancelling a finished stream is fine
            raise protocol.ProtocolError(f"stream {sid} is not open")
        if op == "text":
            text = msg.get("text")
            if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
                raise protocol.ProtocolError(f"text must be a string of at most {MAX_TEXT_CHARS} characters")
            try:
                stream.push_text(text)
            except TextError as e:
                raise protocol.ProtocolError(str(e)) from None
        elif op == "flush":
            stream.flush()
        elif op == "end":
            stream.end()
        else:
            stream.cancel()

    def on_message(self, msg: dict[str, Any] | None, error: str | None = None) -> None:
        """Never raises: a bad message gets a one-line error back and the connection continues."""
        try:
            if error is not None:
                raise protocol.ProtocolError(error)
            assert msg is not None
            self.handle(msg)
        except protocol.ProtocolError as e:
            self.send_json(
                {"op": "error", "code": "bad_request", "message": str(e), "sid": (msg or {}).get("sid")}
            )
        except Exception as e:
            log.exception("connection %s: message failed", self.name)
            self.send_json({"op": "error", "code": "internal", "message": f"{type(e).__name__}: {e}"})

    def lost(self) -> None:
        """The client is gone: cancel all its generation now."""
        if self.closed:
            return
        self.closed = True
        for stream in list(self.streams.values()):
            stream.cancel()
        self.streams.clear()


class _Sink:
    __slots__ = ("conn", "sid")

    def __init__(self, conn: _Conn, sid: int) -> None:
        self.conn, self.sid = conn, sid

    def on_audio(self, pcm: bytes) -> None:
        if not self.conn.closed:
            self.conn.send_audio(self.sid, pcm)

    def on_event(self, event: dict[str, Any]) -> None:
        conn = self.conn
        if event["type"] == "first_audio":
            conn.server.metrics.first_audio(event["ttfb_ms"])
        if event["type"] in ("done", "error"):
            conn.streams.pop(self.sid, None)
        if not conn.closed:
            conn.send_json({"op": "event", "sid": self.sid, **event})


class _UnixConn(_Conn):
    def __init__(self, server: EngineServer, writer: asyncio.StreamWriter) -> None:
        super().__init__(server, "unix")
        self.writer = writer
        self._out = FrameQueue(writer, server.options.max_write_buffer, lambda: self.closed, self.lost)

    def send_json(self, obj: dict[str, Any]) -> None:
        self._out.put(protocol.json_frame(obj))

    def send_audio(self, sid: int, pcm: bytes) -> None:
        self._out.put(protocol.audio_frame(sid, pcm))

    def abort(self) -> None:
        """Close now; what is already queued (e.g. the error saying why) is still sent."""
        pending = self._out.take()
        self.lost()
        if pending:
            self.writer.write(pending)
        self.writer.close()


class _WsConn(_Conn):
    def __init__(self, server: EngineServer, ws: Any) -> None:
        super().__init__(server, "ws")
        self.ws = ws
        self.queue: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        self.pending_bytes = 0

    def send_json(self, obj: dict[str, Any]) -> None:
        if not self.closed:
            import json

            self.queue.put_nowait(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))

    def send_audio(self, sid: int, pcm: bytes) -> None:
        if self.closed:
            return
        self.pending_bytes += len(pcm)
        if self.pending_bytes > self.server.options.max_write_buffer:
            log.warning("client too far behind; dropping its connection")
            self.abort()
            return
        self.queue.put_nowait(protocol.audio_payload(sid, pcm))

    def abort(self) -> None:
        self.lost()
        self.queue.put_nowait(None)

    async def writer(self) -> None:
        while True:
            item = await self.queue.get()
            if item is None:
                await self.ws.close()
                return
            if isinstance(item, bytes):
                self.pending_bytes -= len(item) - 4
            await self.ws.send(item)


class EngineServer:
    def __init__(self, engine: OrpheusEngine, options: ServerOptions = ServerOptions()) -> None:
        self.engine = engine
        self.options = options
        self.metrics = EngineMetrics(engine)
        self.kind, self.target = protocol.parse_address(options.address)
        if self.kind == "ws":
            u = urlparse(self.target)
            if u.hostname not in _LOOPBACK:
                raise ValueError(f"WebSocket engine binds to loopback only (got host {u.hostname!r})")
            if not options.secret:
                raise ValueError("a WebSocket engine needs a shared secret")
        self._servers: list[Any] = []
        self._conns: set[_Conn] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._http: Any = None
        self.bound_address = options.address

    async def start(self, load_models: bool = True) -> None:
        """Listen first (clients can connect and queue during warm-up), then load and warm the models."""
        if self.kind == "unix":
            path = Path(self.target)
            prepare_socket_dir(path)  # 0700 before bind; refuses a directory others can write to
            srv = await asyncio.start_unix_server(self._unix_client, path=str(path), limit=protocol.MAX_FRAME)
            os.chmod(path, SOCKET_MODE)
            self._servers.append(srv)
        else:
            from websockets.asyncio.server import serve

            u = urlparse(self.target)
            wsrv = await serve(self._ws_client, u.hostname, u.port or 0, max_size=protocol.MAX_FRAME)
            port = next(iter(wsrv.sockets)).getsockname()[1]
            self.bound_address = f"ws://{u.hostname}:{port}"
            self._servers.append(wsrv)
        if self.options.http_port:
            await self._start_http()
        log.info("orpheus engine listening on %s", self.bound_address)
        if load_models:
            await self.engine.start()

    async def close(self) -> None:
        for srv in self._servers:
            srv.close()
        for conn in list(self._conns):
            conn.abort()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=2.0)
        await self.engine.close()
        if self._http is not None:
            await self._http.cleanup()
        if self.kind == "unix":
            with contextlib.suppress(FileNotFoundError):
                Path(self.target).unlink()

    async def _unix_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _UnixConn(self, writer)
        self._track(conn)
        try:
            while not conn.closed:
                try:
                    kind, payload = await protocol.read_frame(reader)
                except protocol.ProtocolError as e:
                    conn.on_message(None, str(e))
                    break  # framing is lost: nothing after this can be trusted
                if kind == protocol.KIND_JSON:
                    try:
                        msg = protocol.parse_json(payload)
                    except protocol.ProtocolError as e:
                        conn.on_message(None, str(e))
                        continue
                    conn.on_message(msg)
                else:
                    conn.on_message(None, "clients send JSON frames only")
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._untrack(conn)
            writer.close()

    async def _ws_client(self, ws: Any) -> None:
        conn = _WsConn(self, ws)
        self._track(conn)
        writer = asyncio.create_task(conn.writer())
        try:
            async for message in ws:
                if isinstance(message, bytes):
                    conn.on_message(None, "clients send JSON text messages only")
                    continue
                try:
                    msg = protocol.parse_json(message)
                except protocol.ProtocolError as e:
                    conn.on_message(None, str(e))
                    continue
                conn.on_message(msg)
                if conn.closed:
                    break
        except Exception:
            pass
        finally:
            self._untrack(conn)
            conn.queue.put_nowait(None)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer, 1.0)

    def _track(self, conn: _Conn) -> None:
        self.metrics.connections.inc()
        self._conns.add(conn)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)

    def _untrack(self, conn: _Conn) -> None:
        self.metrics.connections.dec()
        self._conns.discard(conn)
        conn.lost()
        task = asyncio.current_task()
        if task is not None:
            self._handlers.discard(task)

    async def _start_http(self) -> None:
        from aiohttp import web
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(
                body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
            )

        async def capacity(_: web.Request) -> web.Response:
            return web.json_response(self.engine.capacity())

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(
                status=200 if self.engine.ready else 503, text="ready" if self.engine.ready else "warming"
            )

        app = web.Application()
        app.add_routes(
            [web.get("/metrics", metrics), web.get("/capacity", capacity), web.get("/healthz", healthz)]
        )
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.options.http_port).start()
        self._http = runner
