"""A job process's view of the host speech engine: a `Transcriber` that holds a connection, not a model.

    client = SpeechEngineClient(SpeechClientOptions("unix:///run/parley/engine/stt.sock"))
    client.probe()                                   # prewarm: model name and languages (blocking, once)
    result = await client.transcribe(audio, DecodeRequest(priority=PRIORITY_FINAL))

When the engine is gone (killed, restarting) a partial fails at once (the next one will try again), while a
final or pause decode waits for the engine to come back, up to `wait_s`, and is sent again: the caller's
words are decoded after the restart instead of being lost. The first final that has to wait in an outage
(the caller has finished their turn: a pause decode may come while they still speak) calls the outage
listeners (the call says one hold line); the first answer after it calls them again with False.

An engine that is there but does not answer (frozen, stopped, its decoders hung) is an outage too: every
decode has a deadline (`deadline_floor_s` plus `deadline_per_audio_s` per second of audio, or twice the
slowest of the last 20 answers when that is longer: a starved host is slow, not down). A partial past
it fails and marks the connection stalled; a final past it, or sent on a stalled connection, calls the
outage listeners at once and goes on waiting for its answer (a slow engine still answers it; a restarted
one drops the connection, and the final is sent again to the new engine; issue 66).
A decode cancelled by its stream is cancelled on the engine too. No livekit import.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from plugins import wire

from .engine import DecodeDropped
from .model import PRIORITY_PARTIAL, SAMPLE_RATE, DecodeRequest, DecodeResult, Segment, WhisperModelError
from .words import Word

log = logging.getLogger("parley.stt.client")


PARTIAL_PATIENCE = 3.0
"""A partial past its deadline marks the connection stalled but is only given up at this many times it: a
busy engine's late partial is still worth having, and the next final does not wait for it."""


class SpeechEngineUnavailable(WhisperModelError):
    """The speech engine cannot be reached (not started, restarting, or the connection dropped)."""


@dataclass(frozen=True)
class SpeechClientOptions:
    address: str
    secret: str = ""
    connect_timeout_s: float = 1.0
    wait_s: float = 8.0
    """How long a final/pause decode waits for an engine that is down before it fails."""
    retry_s: float = 0.1
    """Between connection attempts while waiting."""
    model_name: str = ""
    """What the engine serves, when it cannot be asked (probe failed): the STT checks languages with it."""
    deadline_floor_s: float = 1.0
    deadline_per_audio_s: float = 0.1
    """A decode of `n` seconds of audio is due within `deadline_floor_s + n * deadline_per_audio_s`."""

    def deadline_s(self, audio_s: float) -> float:
        return self.deadline_floor_s + max(0.0, audio_s) * self.deadline_per_audio_s


Listener = Callable[[bool], None]


class _Connection:
    def __init__(
        self, client: SpeechEngineClient, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.client = client
        self.writer = writer
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.alive = True
        self.stalled = False
        """A decode on it missed its deadline and nothing has been answered since."""
        self.loop = asyncio.get_running_loop()
        self.reader_task = asyncio.create_task(self._read(reader), name="stt-engine-reader")

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                kind, payload = await wire.read_frame(reader)
                if kind != wire.KIND_JSON:
                    continue
                msg = wire.parse_json(payload)
                self.stalled = False
                key = msg.get("rid") if msg.get("rid") is not None else msg.get("id")
                fut = self.pending.pop(key, None) if isinstance(key, int) else None
                if fut is not None and not fut.done():
                    fut.set_result(msg)
                elif msg.get("op") == "error":
                    log.warning("speech engine reported: %s", str(msg.get("message"))[:200])
        except (asyncio.IncompleteReadError, ConnectionError, wire.ProtocolError, OSError):
            pass
        finally:
            self.lost()

    def lost(self) -> None:
        self.alive = False
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(SpeechEngineUnavailable("speech engine connection lost"))

    def send(self, *frames: bytes) -> None:
        if not self.alive:
            raise SpeechEngineUnavailable("speech engine connection is closed")
        self.writer.write(b"".join(frames))

    def start(self, rid: int, *frames: bytes) -> asyncio.Future[dict[str, Any]]:
        fut: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self.pending[rid] = fut
        try:
            self.send(*frames)
        except BaseException:
            self.pending.pop(rid, None)
            raise
        return fut

    async def request(self, rid: int, *frames: bytes) -> dict[str, Any]:
        fut = self.start(rid, *frames)
        try:
            return await fut
        finally:
            self.pending.pop(rid, None)

    async def close(self) -> None:
        self.alive = False
        self.writer.close()
        self.reader_task.cancel()
        with contextlib.suppress(BaseException):
            await self.reader_task
        self.lost()


class SpeechEngineClient:
    """Implements `Transcriber` (model.py) over the host speech engine."""

    def __init__(self, options: SpeechClientOptions) -> None:
        kind, self._path = wire.parse_address(options.address)
        if kind != "unix":
            raise ValueError(f"the speech engine is reached over a Unix socket (got {options.address!r})")
        self.options = options
        self._model_name = options.model_name
        self._multilingual: bool | None = None
        self._conn: _Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._probed_at = -1e9
        self._ids = itertools.count(1)
        self._listeners: list[Listener] = []
        self.in_outage = False
        self.outages = 0
        self._answered_s: deque[float] = deque(maxlen=20)  # the last answers' round trips (s)

    # ---- Transcriber ------------------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def multilingual(self) -> bool:
        if self._multilingual is None and time.monotonic() - self._probed_at > 5.0:
            self._probed_at = time.monotonic()  # at most one blocking try per 5 s (it may run on a loop)
            with contextlib.suppress(SpeechEngineUnavailable):
                self.probe()
        if self._multilingual is None:  # engine not up: Whisper's English-only models are named *.en
            return not self._model_name.endswith(".en")
        return self._multilingual

    def probe(self) -> dict[str, Any]:
        """Ask the engine what it serves (blocking; for prewarm, before any event loop runs)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.options.connect_timeout_s)
                s.connect(self._path)
                s.sendall(wire.json_frame({"op": "hello", "id": 1, "secret": self.options.secret}))
                header = _recv_exactly(s, 5)
                length, _kind = struct.unpack(">IB", header)
                if length < 1 or length > wire.MAX_FRAME:
                    raise SpeechEngineUnavailable("speech engine sent a bad frame")
                reply = wire.parse_json(_recv_exactly(s, length - 1))
        except (OSError, wire.ProtocolError) as e:
            raise SpeechEngineUnavailable(f"no speech engine at {self.options.address} ({e})") from None
        if not reply.get("ok"):
            raise SpeechEngineUnavailable(f"speech engine refused: {reply.get('message', reply.get('code'))}")
        self._model_name = str(reply.get("model", self._model_name))
        self._multilingual = bool(reply.get("multilingual"))
        return reply

    async def transcribe(self, audio: np.ndarray, request: DecodeRequest) -> DecodeResult:
        rid = next(self._ids)
        pcm = (np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
        msg: dict[str, Any] = {
            "op": "decode",
            "rid": rid,
            "stream": request.stream_id[:128],
            "language": request.language,
            "beam_size": request.beam_size,
            "with_timestamps": request.with_timestamps,
            "initial_prompt": request.initial_prompt,
            "priority": request.priority,
            "window_s": request.window_s,
        }
        frames = (wire.json_frame(msg), wire.audio_frame(rid, pcm))
        waits = request.priority != PRIORITY_PARTIAL
        # on a host so busy that answers take seconds, twice the slowest recent one is no outage yet
        due_s = max(self.options.deadline_s(len(audio) / SAMPLE_RATE), 2 * max(self._answered_s, default=0))
        began = deadline = time.monotonic()
        deadline += self.options.wait_s
        outages = self.outages
        while True:
            try:
                conn = await self._connection()
                give_up = deadline if waits else time.monotonic() + PARTIAL_PATIENCE * due_s
                reply = await self._send(conn, rid, frames, due_s, give_up, holds=waits)
            except SpeechEngineUnavailable:
                if not waits or time.monotonic() >= deadline:
                    raise
                # a final or a pause's settle: the caller has stopped and waits for an answer (a partial
                # never waits, so a caller mid-sentence is not told to hold)
                self._outage()
                await asyncio.sleep(self.options.retry_s)
                continue
            break
        self._restored()
        if reply.get("op") == "result":
            if self.outages == outages:  # an answer that waited out an outage says nothing of speed
                self._answered_s.append(time.monotonic() - began)
            return _result(reply)
        code = str(reply.get("code", "internal"))
        if code in ("superseded", "cancelled", "closed"):
            raise DecodeDropped(code)
        raise WhisperModelError(f"speech engine: {code}: {str(reply.get('message', ''))[:200]}")

    # ---- outage listeners -------------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """`listener(True)` when a decode first has to wait for the engine, `listener(False)` once it
        answers again. Returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _outage(self) -> None:
        if self.in_outage:
            return
        self.in_outage = True
        self.outages += 1
        log.warning("speech engine unavailable; decodes wait for it", extra={"address": self.options.address})
        self._notify(True)

    def _restored(self) -> None:
        if not self.in_outage:
            return
        self.in_outage = False
        log.info("speech engine back", extra={"address": self.options.address})
        self._notify(False)

    def _notify(self, down: bool) -> None:
        for listener in list(self._listeners):
            try:
                listener(down)
            except Exception:
                log.exception("speech engine listener failed")

    # ---- connection -------------------------------------------------------------------------------------

    async def _send(
        self,
        conn: _Connection,
        rid: int,
        frames: tuple[bytes, ...],
        due_s: float,
        give_up: float,
        holds: bool,
    ) -> dict[str, Any]:
        """The engine's answer to one decode. Past `due_s` the connection is stalled, and a final
        (`holds`) tells the listeners; either waits on for its answer until `give_up`."""
        due = time.monotonic() + due_s
        late = False
        fut = conn.start(rid, *frames)
        try:
            while True:
                now = time.monotonic()
                if now >= due and not late:
                    late = conn.stalled = True
                    log.warning("speech engine missed a decode deadline", extra={"due_s": round(due_s, 2)})
                if conn.stalled and holds:
                    self._outage()  # the caller is waiting: one hold line, and this final waits on
                limit = due if now < due else give_up
                if now >= limit:
                    self._cancel(conn, rid)
                    if holds:  # a final waited `wait_s` in vain: this connection is frozen,
                        await conn.close()  # the next decode opens a fresh one
                    raise SpeechEngineUnavailable(
                        f"speech engine did not answer within {now - due + due_s:.1f} s"
                    )
                await asyncio.wait((fut,), timeout=limit - now)
                if fut.done():
                    return fut.result()
        except asyncio.CancelledError:
            self._cancel(conn, rid)  # the stream moved on: free the engine of it too
            raise
        finally:
            conn.pending.pop(rid, None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # a lost connection's error on a decode nobody waits for any more: seen

    @staticmethod
    def _cancel(conn: _Connection, rid: int) -> None:
        if conn.alive:
            with contextlib.suppress(SpeechEngineUnavailable):
                conn.send(wire.json_frame({"op": "cancel", "rid": rid}))

    async def _connection(self) -> _Connection:
        conn = self._conn
        if conn is not None and conn.alive and conn.loop is asyncio.get_running_loop():
            return conn
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.alive and conn.loop is asyncio.get_running_loop():
                return conn
            self._conn = await self._open()
            return self._conn

    async def _open(self) -> _Connection:
        timeout = self.options.connect_timeout_s
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self._path, limit=wire.MAX_FRAME), timeout
            )
        except (OSError, TimeoutError) as e:
            raise SpeechEngineUnavailable(f"no speech engine at {self.options.address} ({e})") from None
        conn = _Connection(self, reader, writer)
        try:
            hello = await asyncio.wait_for(
                conn.request(0, wire.json_frame({"op": "hello", "id": 0, "secret": self.options.secret})),
                timeout,
            )
        except (TimeoutError, SpeechEngineUnavailable) as e:
            await conn.close()
            raise SpeechEngineUnavailable(f"speech engine handshake failed ({e})") from None
        if not hello.get("ok"):
            await conn.close()
            raise SpeechEngineUnavailable(f"speech engine refused: {hello.get('message', hello.get('code'))}")
        self._model_name = str(hello.get("model", self._model_name))
        self._multilingual = bool(hello.get("multilingual"))
        return conn

    async def capacity(self) -> dict[str, Any]:
        conn = await self._connection()
        rid = next(self._ids)
        try:
            reply = await asyncio.wait_for(
                conn.request(rid, wire.json_frame({"op": "capacity", "id": rid})),
                self.options.deadline_floor_s,
            )
        except TimeoutError:
            raise SpeechEngineUnavailable("speech engine did not answer `capacity`") from None
        return {k: v for k, v in reply.items() if k not in ("op", "id")}

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


def _result(msg: dict[str, Any]) -> DecodeResult:
    segs = tuple(
        Segment(str(t), float(a), float(b), float(n), float(lp), float(cr))
        for t, a, b, n, lp, cr in msg["segments"]
    )
    return DecodeResult(
        segments=segs,
        language=str(msg.get("language", "en")),
        audio_s=float(msg.get("audio_s", 0.0)),
        decode_s=float(msg.get("decode_s", 0.0)),
        queued_s=float(msg.get("queued_s", 0.0)),
        words=_words(msg.get("words")),
    )


def _words(rows: Any) -> tuple[Word, ...]:
    """The result's words; () when the engine sent none or sent them malformed (they only refine the
    end-of-turn decision: a bad list never costs the transcript)."""
    try:
        return tuple(Word(str(t), min(1.0, max(0.0, float(p)))) for t, p in rows or [])
    except (TypeError, ValueError):
        return ()


__all__ = ["DecodeDropped", "SpeechClientOptions", "SpeechEngineClient", "SpeechEngineUnavailable"]
