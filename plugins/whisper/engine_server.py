"""The host speech engine's server: one process per host, every job process's decodes over a Unix socket.

Same framing, size cap and auth rule as the Orpheus engine (plugins/wire.py): a connection with a wrong or
missing secret (when one is set) is refused with `unauthorized` and closed; a bad message gets a one-line
`error` reply and the connection goes on; a frame that breaks the framing (oversized, truncated) gets one
and closes that connection only. A connection that drops cancels everything it still had queued.

Client → server: hello{id, secret?}; decode{rid, stream, priority, language, beam_size, window_s,
with_timestamps, initial_prompt} followed by an `A` frame with the same id (int16 PCM, 16 kHz mono);
cancel{rid}; capacity{id}; ping{id}. Server → client: hello{id, ok, model, multilingual, ready};
result{rid, language, audio_s, decode_s, queued_s, segments: [[text, start, end, no_speech_prob,
avg_logprob, compression_ratio], ...]}; error{rid?, code, message} with code bad_request | superseded |
cancelled | closed | internal | unauthorized; capacity{id, ...}; pong{id}.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plugins import wire
from plugins.local_socket import (
    SOCKET_MODE,
    FrameQueue,
    default_address,
    handshake_refusal,
    prepare_socket_dir,
)

from .engine import DecodeDropped, EngineJob, SpeechEngine
from .model import SAMPLE_RATE, DecodeRequest, DecodeResult

log = logging.getLogger("parley.stt.server")

MAX_AUDIO_S = 120  # one decode; longer is a bad request (a stream trims its turn long before this)
MAX_PROMPT_CHARS = 1000


@dataclass(frozen=True)
class SpeechServerOptions:
    address: str = field(default_factory=lambda: default_address("stt.sock"))  # a private 0700 folder
    secret: str = ""  # optional extra check on the Unix socket (its file mode already limits who connects)
    max_write_buffer: int = 8 * 1024 * 1024  # a client this far behind is dropped


def parse_request(msg: dict[str, Any]) -> DecodeRequest:
    """A DecodeRequest from a decode message; ProtocolError (one line) on any bad field."""

    def pick(name: str, kind: type | tuple[type, ...], default: Any) -> Any:
        value = msg.get(name, default)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool) != (kind is bool)):
            raise wire.ProtocolError(f"{name} has the wrong type")
        return value

    language = pick("language", str, "en")
    if language is not None and not 0 < len(language) <= 16:
        raise wire.ProtocolError("language must be a short code or null")
    beam = pick("beam_size", int, 1)
    priority = pick("priority", int, 2)
    window = pick("window_s", int, 30)
    prompt = pick("initial_prompt", str, None)
    stamps = pick("with_timestamps", bool, False)
    if beam is None or not 1 <= beam <= 10:
        raise wire.ProtocolError("beam_size must be 1..10")
    if priority is None or not 0 <= priority <= 2:
        raise wire.ProtocolError("priority must be 0..2")
    if window is None or not 1 <= window <= 30:
        raise wire.ProtocolError("window_s must be 1..30")
    if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
        raise wire.ProtocolError(f"initial_prompt longer than {MAX_PROMPT_CHARS} characters")
    return DecodeRequest(
        language=language,
        beam_size=beam,
        with_timestamps=bool(stamps),
        initial_prompt=prompt,
        priority=priority,
        window_s=window,
    )


def result_message(rid: int, r: DecodeResult) -> dict[str, Any]:
    return {
        "op": "result",
        "rid": rid,
        "language": r.language,
        "audio_s": r.audio_s,
        "decode_s": round(r.decode_s, 4),
        "queued_s": round(r.queued_s, 4),
        "segments": [
            [s.text, s.start, s.end, s.no_speech_prob, s.avg_logprob, s.compression_ratio] for s in r.segments
        ],
        "words": [[w.text, round(w.probability, 4)] for w in r.words],
    }


class _Conn:
    """One job process's connection: its decodes in flight and its send queue."""

    def __init__(self, server: SpeechServer, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.authed = not server.options.secret
        self.closed = False
        self.headers: dict[int, tuple[DecodeRequest, str]] = {}  # decode sent, audio not yet
        self.jobs: dict[int, EngineJob] = {}
        self.out = FrameQueue(writer, server.options.max_write_buffer, lambda: self.closed, self.lost)

    def send(self, obj: dict[str, Any]) -> None:
        self.out.put(wire.json_frame(obj))

    def error(self, code: str, message: str, rid: Any = None) -> None:
        self.send({"op": "error", "rid": rid, "code": code, "message": message})

    def on_json(self, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if not self.authed:
            refusal = handshake_refusal(msg, self.server.options.secret)
            if refusal is not None:
                self.send(refusal)
                self.out.flush()
                self.lost()
                self.writer.close()
                return
            self.authed = True
        engine = self.server.engine
        if op == "hello":
            self.send({"op": "hello", "id": msg.get("id"), "ok": True, **self.server.describe()})
        elif op == "decode":
            rid = self._rid(msg)
            if rid in self.headers or rid in self.jobs:
                raise wire.ProtocolError(f"decode {rid} already in flight")
            stream = msg.get("stream", "")
            if not isinstance(stream, str) or len(stream) > 128:
                raise wire.ProtocolError("stream must be a string of at most 128 characters")
            self.headers[rid] = (parse_request(msg), stream)
        elif op == "cancel":
            job = self.jobs.get(self._rid(msg))
            if job is not None:
                engine.cancel(job)
        elif op == "capacity":
            self.send({"op": "capacity", "id": msg.get("id"), **self.server.capacity()})
        elif op == "ping":
            self.send({"op": "pong", "id": msg.get("id")})
        else:
            raise wire.ProtocolError(f"unknown op {op!r}")

    def on_audio(self, payload: bytes) -> None:
        rid, pcm = wire.split_audio(payload)
        header = self.headers.pop(rid, None)
        if header is None:
            raise wire.ProtocolError(f"audio for {rid} without a decode message before it")
        if len(pcm) % 2:
            raise wire.ProtocolError("audio must be int16 samples (an even number of bytes)")
        if len(pcm) // 2 > MAX_AUDIO_S * SAMPLE_RATE:
            raise wire.ProtocolError(f"audio longer than {MAX_AUDIO_S} s")
        request, stream = header
        audio = np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768.0
        job = EngineJob(
            audio, request, f"{id(self)}:{stream}" if stream else f"{id(self)}:#{rid}", self._done_cb(rid)
        )
        self.jobs[rid] = job
        self.server.engine.submit(job)

    def _done_cb(self, rid: int) -> Any:
        def done(result: DecodeResult | None, error: BaseException | None) -> None:
            self.loop.call_soon_threadsafe(self._finish, rid, result, error)

        return done

    def _finish(self, rid: int, result: DecodeResult | None, error: BaseException | None) -> None:
        self.jobs.pop(rid, None)
        if result is not None:
            self.send(result_message(rid, result))
        elif isinstance(error, DecodeDropped):
            self.error(error.reason, str(error), rid)
        else:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            self.error("internal", first[:300], rid)

    @staticmethod
    def _rid(msg: dict[str, Any]) -> int:
        rid = msg.get("rid")
        if not isinstance(rid, int) or isinstance(rid, bool) or not 0 < rid < 2**32:
            raise wire.ProtocolError("rid must be an integer 1..2^32-1")
        return rid

    def handle(self, kind: bytes, payload: bytes) -> None:
        """Never raises: a bad message gets a one-line error back and the connection continues."""
        msg: dict[str, Any] | None = None
        try:
            if kind == wire.KIND_JSON:
                msg = wire.parse_json(payload)
                self.on_json(msg)
            elif kind == wire.KIND_AUDIO:
                self.on_audio(payload)
            else:
                raise wire.ProtocolError(f"unknown frame kind {kind!r}")
        except wire.ProtocolError as e:
            self.error("bad_request", str(e), (msg or {}).get("rid"))
        except Exception as e:
            log.exception("speech engine: message failed")
            self.error("internal", f"{type(e).__name__}: {e}")

    def lost(self) -> None:
        """The client is gone: nothing it queued is worth decoding now."""
        if self.closed:
            return
        self.closed = True
        self.headers.clear()
        for job in list(self.jobs.values()):
            self.server.engine.cancel(job)
        self.jobs.clear()


class SpeechServer:
    def __init__(self, engine: SpeechEngine, options: SpeechServerOptions = SpeechServerOptions()) -> None:
        kind, self.path = wire.parse_address(options.address)
        if kind != "unix":
            raise ValueError(f"the speech engine listens on a Unix socket (got {options.address!r})")
        self.engine = engine
        self.options = options
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[_Conn] = set()

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.engine.model_name,
            "multilingual": self.engine.multilingual,
            "ready": self.engine.ready,
        }

    def capacity(self) -> dict[str, Any]:
        return {
            "ready": self.engine.ready,
            "connections": len(self._conns),
            "queued": self.engine.queued(),
            "stalled_s": round(self.engine.stalled_s(), 3),
            "slowest_batch_s": round(self.engine.slowest_batch_s(), 3),
            "queue_delay_s": round(self.engine.queue_delay_s(), 3),
            **asdict(self.engine.stats),
        }

    async def start(self) -> None:
        """Load the model (off the loop), then listen: a client that connects is served at once."""
        await asyncio.to_thread(self.engine.start)
        path = Path(self.path)
        prepare_socket_dir(path)  # private folder made before bind; a stale socket replaced, nothing else
        self._server = await asyncio.start_unix_server(self._client, path=str(path), limit=wire.MAX_FRAME)
        os.chmod(path, SOCKET_MODE)
        log.info(
            "speech engine listening",
            extra={"address": self.options.address, "model": self.engine.model_name},
        )

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.lost()
            conn.writer.close()
        await asyncio.to_thread(self.engine.close)
        with contextlib.suppress(FileNotFoundError):
            Path(self.path).unlink()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(self, writer)
        self._conns.add(conn)
        try:
            while not conn.closed:
                try:
                    kind, payload = await wire.read_frame(reader)
                except wire.ProtocolError as e:
                    conn.error("bad_request", str(e))
                    conn.out.flush()
                    break  # framing is lost: nothing after this can be trusted
                conn.handle(kind, payload)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._conns.discard(conn)
            conn.lost()
            writer.close()
