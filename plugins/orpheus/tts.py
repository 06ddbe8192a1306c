"""LiveKit adapter for the Orpheus engine: a native streaming `tts.TTS` at 24 kHz mono.

The LLM's token stream is cut with `SpeechChunker` (the first piece leaves after the first clause) and each
piece is pushed into ONE engine stream over the pooled, already-handshaken connection, so the engine starts
generating the next piece while the current one plays. When the LLM writes slower than the voice speaks,
the words already written go out before the listener runs out (`plugins.playout`). Closing the stream
(barge-in) sends `cancel` at once. A whole utterance found in the phrase cache is played with no engine
round trip. How full the engine is (the worker's load report) is plugins/orpheus/capacity.py. Protocol
details stay in `plugins.orpheus.client` / `protocol`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from livekit.agents import APIConnectionError, APIConnectOptions, APIStatusError, tts, utils
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS

from plugins.local_socket import default_address
from plugins.orpheus import protocol
from plugins.orpheus.capacity import configure_engine_fill
from plugins.orpheus.client import ClientStream, EngineClient, EngineError, EngineEvent
from plugins.playout import PlayoutClock, PlayoutOptions, cut_before_dry
from plugins.pronunciation import Pronunciations
from plugins.text_chunker import ChunkerOptions, SpeechChunker, split_text

if TYPE_CHECKING:
    from caches import PhraseCache

log = logging.getLogger("parley.orpheus.tts")

SAMPLE_RATE = 24_000
DEFAULT_ADDRESS = default_address()  # where `python -m plugins.orpheus serve` listens (a private dir)
NUM_CHANNELS = 1
# engine error codes that mean "this engine cannot take the call now" (the fallback chain switches)
UNAVAILABLE_CODES = frozenset(
    {"full", "connection_lost", "not_connected", "unreachable", "unauthorized", "stalled"}
)


class EngineUnavailableError(APIConnectionError):
    """The engine is unreachable, full or lost the connection before any audio (`code` says which)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"orpheus engine {code}: {message}", retryable=True)
        self.code = code


@dataclass(frozen=True)
class OrpheusOptions:
    address: str  # unix:///path.sock or ws://127.0.0.1:PORT
    secret: str = ""
    voice: str = "tara"
    language: str = "en"
    pool_size: int = 1  # pooled connections per job process; streams are multiplexed over them
    connect_timeout_s: float = 1.0
    chunker: ChunkerOptions = field(default_factory=ChunkerOptions)
    playout: PlayoutOptions = field(default_factory=PlayoutOptions)
    frame_size_ms: int = 50  # LiveKit frame size (the first frame is 20 ms either way)
    cache_wait_turns: int = 8  # event-loop turns to wait for end of input before a whole-utterance lookup
    # A frozen engine keeps its socket open and says nothing. Silent this long while a stream is open, the
    # engine is pinged; no answer within ping_timeout_s = stalled. Owing audio (text sent, nothing back;
    # or the stream ended) for audio_timeout_s = stalled even if it answers pings (a wedged generator).
    silence_timeout_s: float = 0.5
    ping_timeout_s: float = 0.4
    audio_timeout_s: float = 3.0
    pronunciations: Pronunciations = field(default_factory=Pronunciations)  # pieces are sent respelled


def _unavailable(err: BaseException) -> EngineUnavailableError:
    if isinstance(err, EngineError):
        return EngineUnavailableError(err.code, err.message)
    text = str(err) or type(err).__name__
    return EngineUnavailableError("unreachable", text.splitlines()[0])


class OrpheusTTS(tts.TTS):
    """Streams text into the Orpheus engine; see the module docstring for the data path."""

    def __init__(
        self,
        options: OrpheusOptions | None = None,
        *,
        voice: str | None = None,
        address: str | None = None,
        phrase_cache: PhraseCache | None = None,
    ) -> None:
        """`OrpheusTTS(options)`, or `OrpheusTTS(voice="tara")` for the engine at its default address."""
        options = options or OrpheusOptions(address=address or DEFAULT_ADDRESS)
        if voice or address:
            options = replace(options, voice=voice or options.voice, address=address or options.address)
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True),
            sample_rate=SAMPLE_RATE,
            num_channels=NUM_CHANNELS,
        )
        protocol.parse_address(options.address)  # a bad address fails here, in one line
        self._opts = options
        self.phrase_cache = phrase_cache
        self.active_streams = 0  # open synthesis streams; a leak shows up here (load benchmark)
        self.piece_listeners: list[Callable[[str], None]] = []  # told when a piece is sent for synthesis
        self._client: EngineClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._warm_task: asyncio.Task[None] | None = None

    @classmethod
    def from_settings(
        cls, settings: Any, *, fallback: tts.TTS | None = None, phrase_cache: PhraseCache | None = None
    ) -> tts.TTS:
        """The worker's constructor: Orpheus, wrapped in the engine → `fallback` chain when one is given."""
        secret = settings.engine_secret
        opts = OrpheusOptions(
            address=settings.engine_address,
            secret=secret.get_secret_value() if hasattr(secret, "get_secret_value") else str(secret),
            voice=settings.tts_voice,
            language=settings.language,
            connect_timeout_s=settings.engine_connect_timeout_s,
            pool_size=int(getattr(settings, "engine_pool_size", 1)),
            silence_timeout_s=float(getattr(settings, "engine_silence_timeout_s", 0.5)),
            ping_timeout_s=float(getattr(settings, "engine_ping_timeout_s", 0.4)),
            audio_timeout_s=float(getattr(settings, "engine_audio_timeout_s", 3.0)),
            pronunciations=getattr(settings, "tts_pronunciation_list", None) or Pronunciations(),
        )
        configure_engine_fill(
            opts.address,
            opts.secret,
            opts.connect_timeout_s,
            unreachable_fill=float(getattr(settings, "engine_unreachable_load", 1.0)),
        )
        orpheus = cls(opts, phrase_cache=phrase_cache)
        if fallback is None:
            return orpheus
        from plugins.fallback_tts import FallbackOptions, FallbackTTS

        probe_s = float(getattr(settings, "tts_fallback_probe_s", 0.5))
        return FallbackTTS(orpheus, fallback, FallbackOptions(probe_interval_s=probe_s))

    @property
    def options(self) -> OrpheusOptions:
        return self._opts

    @property
    def model(self) -> str:
        return "orpheus"

    @property
    def provider(self) -> str:
        return "parley-orpheus"

    # -- connection -------------------------------------------------------------------------------------
    async def client(self) -> EngineClient:
        """The pooled client of this event loop, connected (raises EngineUnavailableError)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = EngineClient(
                self._opts.address, self._opts.secret, self._opts.pool_size, self._opts.connect_timeout_s
            )
            self._client_loop = loop
        client = self._client
        if not client.connected:
            try:
                await client.connect()
            except (TimeoutError, OSError, EngineError) as e:
                raise _unavailable(e) from None
        return client

    async def warm_up(self) -> None:
        """Open the pooled connection now, so no handshake happens on the first reply's hot path."""
        with contextlib.suppress(EngineUnavailableError):
            await self.client()

    def prewarm(self) -> None:
        """Connect in the background when called on a running loop (LiveKit's prewarm runs before one)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._warm_task is None or self._warm_task.done():
            self._warm_task = loop.create_task(self.warm_up())

    async def probe(self) -> str | None:
        """None when the engine can take a stream now, else a short reason (fallback chain health)."""
        try:
            cap = await (await self.client()).capacity(self._opts.ping_timeout_s)
        except EngineUnavailableError as e:
            return e.code
        except TimeoutError:
            return "stalled"  # connected, but it does not answer: frozen or wedged
        except (OSError, EngineError) as e:
            return _unavailable(e).code
        if not cap.get("ready", False):
            return "warming"
        if int(cap.get("free", 0)) <= 0:
            return "full"
        return None

    async def aclose(self) -> None:
        if self._warm_task is not None:
            self._warm_task.cancel()
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.close()
        self._client = None
        await super().aclose()

    # -- synthesis --------------------------------------------------------------------------------------
    def cached_pcm(self, text: str) -> bytes | None:
        """The whole utterance from the phrase cache (int16 PCM at 24 kHz), or None on a miss."""
        if self.phrase_cache is None or not text.strip():
            return None
        hit = self.phrase_cache.lookup(text, self._opts.voice, self._opts.language)
        return None if hit is None else hit.pcm_at(SAMPLE_RATE).tobytes()

    def _notify(self, piece: str) -> None:
        for listener in self.piece_listeners:
            listener(piece)

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        return OrpheusChunkedStream(tts=self, input_text=text, conn_options=conn_options)

    def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> OrpheusStream:
        return OrpheusStream(tts=self, conn_options=conn_options)


async def _next_or_stall(stream: ClientStream, opts: OrpheusOptions) -> bytes | EngineEvent | None:
    """The stream's next item, or EngineUnavailableError("stalled") when the engine has gone quiet: no
    answer to a ping after `silence_timeout_s` of silence, or owed audio for `audio_timeout_s`."""
    silent_since = time.monotonic()
    while True:
        try:
            return await stream.next_item(opts.silence_timeout_s)
        except TimeoutError:
            pass
        owed_since = max(stream.last_text_at or 0.0, stream.last_audio_at or 0.0, silent_since)
        if stream.owes_audio() and time.monotonic() - owed_since >= opts.audio_timeout_s:
            raise EngineUnavailableError("stalled", f"no audio for {opts.audio_timeout_s:.1f} s") from None
        if not await stream.ping(opts.ping_timeout_s):
            if stream.finished:  # the final event came while pinging
                continue
            raise EngineUnavailableError("stalled", "the engine does not answer") from None


async def _pump_audio(
    stream: ClientStream,
    emitter: tts.AudioEmitter,
    on_first: Callable[[], None],
    opts: OrpheusOptions,
    clock: PlayoutClock | None = None,
) -> EngineEvent:
    """Engine audio → emitter until the stream's final event; engine errors (and a frozen engine) become
    APIErrors."""
    first = True
    while (item := await _next_or_stall(stream, opts)) is not None:
        if isinstance(item, bytes):
            if first:
                first = False
                on_first()
            if clock is not None:
                clock.sent(len(item) / 2 / NUM_CHANNELS / SAMPLE_RATE)
            emitter.push(item)
    final = stream.final_event
    if final is None:  # iteration ended without a final event: the connection went away
        raise EngineUnavailableError("connection_lost", "engine stream ended without a final event")
    if final.type == "error":
        message = str(final.data.get("message", ""))
        if final.code in UNAVAILABLE_CODES:
            raise EngineUnavailableError(final.code, message)
        raise APIStatusError(f"orpheus engine {final.code}: {message}", status_code=400, retryable=False)
    return final


class OrpheusChunkedStream(tts.ChunkedStream):
    """A whole text: one engine stream, pieces pushed at once (the engine pipelines them)."""

    def __init__(self, *, tts: OrpheusTTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._orpheus = tts
        self.engine_stream: ClientStream | None = None

    def voiced_text(self) -> str:
        """The text the listener has heard in full (the fallback chain speaks the rest)."""
        return self.engine_stream.voiced_text() if self.engine_stream is not None else ""

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        request_id = utils.shortuuid()
        output_emitter.initialize(
            request_id=request_id,
            sample_rate=SAMPLE_RATE,
            num_channels=NUM_CHANNELS,
            mime_type="audio/pcm",
            frame_size_ms=self._orpheus.options.frame_size_ms,
        )
        cached = self._orpheus.cached_pcm(self._input_text)
        if cached is not None:
            output_emitter.push(cached)
            output_emitter.flush()
            return
        pieces = split_text(self._input_text, self._orpheus.options.chunker)
        if not pieces:
            return
        opts = self._orpheus.options
        client = await self._orpheus.client()
        try:
            stream = client.open_stream(opts.voice, request_id, opts.language)
        except EngineError as e:
            raise _unavailable(e) from None
        try:
            for piece in pieces:
                self._orpheus._notify(piece)
                await stream.push_text(opts.pronunciations.speak(piece), written=piece)
                await stream.flush()
            await stream.end()
            self.engine_stream = stream
            await _pump_audio(stream, output_emitter, lambda: None, opts)
            output_emitter.flush()
        except EngineError as e:
            raise _unavailable(e) from None
        finally:
            if not stream.finished:
                await stream.cancel()


class OrpheusStream(tts.SynthesizeStream):
    """One reply: LLM tokens in, engine audio out, in a single engine stream."""

    def __init__(self, *, tts: OrpheusTTS, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, conn_options=conn_options)
        self._orpheus = tts
        self.piece_sent_at: float | None = None  # perf_counter when the first piece left (TTFB anchor)
        self.engine_ttfb_ms: float | None = None  # the engine's own TTFB for this stream
        self.engine_stream: ClientStream | None = None  # the engine side of this reply, once opened
        self.served_from_cache = False

    def voiced_text(self) -> str:
        """The text the listener has heard in full (the fallback chain speaks the rest)."""
        return self.engine_stream.voiced_text() if self.engine_stream is not None else ""

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        opts = self._orpheus.options
        request_id = utils.shortuuid()
        output_emitter.initialize(
            request_id=request_id,
            sample_rate=SAMPLE_RATE,
            num_channels=NUM_CHANNELS,
            mime_type="audio/pcm",
            frame_size_ms=opts.frame_size_ms,
            stream=True,
        )
        pieces: asyncio.Queue[str | None] = asyncio.Queue()
        text_parts: list[str] = []
        input_ended = asyncio.Event()
        chunker = SpeechChunker(opts.chunker)
        clock = PlayoutClock(opts.playout)

        async def read_input() -> None:
            try:
                async for data in self._input_ch:
                    if isinstance(data, self._FlushSentinel):
                        for p in chunker.flush():
                            pieces.put_nowait(p)
                        continue
                    text_parts.append(data)
                    for p in chunker.push(data):
                        pieces.put_nowait(p)
                for p in chunker.flush():
                    pieces.put_nowait(p)
                input_ended.set()
            finally:
                pieces.put_nowait(None)  # the sender never waits on input that can no longer come

        reader = asyncio.create_task(read_input(), name="orpheus-read-input")
        watcher = asyncio.create_task(cut_before_dry(clock, chunker, pieces), name="orpheus-cut-before-dry")
        stream: ClientStream | None = None
        self._orpheus.active_streams += 1
        try:
            first = await pieces.get()
            if first is None:
                return  # no speakable text
            output_emitter.start_segment(segment_id=request_id)
            if self._orpheus.phrase_cache is not None and await self._serve_from_cache(
                output_emitter, input_ended, text_parts
            ):
                output_emitter.end_segment()
                return
            client = await self._orpheus.client()
            try:
                stream = self.engine_stream = client.open_stream(opts.voice, request_id, opts.language)
            except EngineError as e:
                raise _unavailable(e) from None
            sender = asyncio.create_task(self._send_pieces(stream, first, pieces), name="orpheus-send")
            try:
                first_audio = self._on_first_audio(stream, clock)
                final = await _pump_audio(stream, output_emitter, first_audio, opts, clock)
            finally:
                if not sender.done():
                    sender.cancel()
            if sender.done() and not sender.cancelled():
                sender.result()  # surfaces a send failure after the engine finished
            if final.data.get("reason") == "completed":
                output_emitter.end_segment()
        finally:
            self._orpheus.active_streams -= 1
            watcher.cancel()
            if stream is not None and not stream.finished:
                await stream.cancel()  # barge-in or failure: the engine stops generating now
            if not reader.done():
                reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _serve_from_cache(
        self,
        emitter: tts.AudioEmitter,
        input_ended: asyncio.Event,
        text_parts: list[str],
    ) -> bool:
        """When the whole input is already here (say(), greetings), play it from cache if it is there."""
        for _turn in range(self._orpheus.options.cache_wait_turns):
            if input_ended.is_set():
                break
            await asyncio.sleep(0)
        if not input_ended.is_set():
            return False
        pcm = self._orpheus.cached_pcm("".join(text_parts))
        if pcm is None:
            return False
        self._mark_started()
        self.served_from_cache = True
        emitter.push(pcm)
        return True

    def _on_first_audio(self, stream: ClientStream, clock: PlayoutClock) -> Callable[[], None]:
        def record() -> None:
            self.engine_ttfb_ms = stream.first_audio_ms
            if stream.first_audio_ms is not None:
                clock.synthesized(stream.first_audio_ms / 1000)  # how long the engine takes to start a piece

        return record

    async def _send_pieces(self, stream: ClientStream, first: str, pieces: asyncio.Queue[str | None]) -> None:
        """Each piece goes out as soon as it is cut; the engine queues it behind the one speaking."""
        piece: str | None = first
        try:
            while piece is not None:
                self._orpheus._notify(piece)
                if self.piece_sent_at is None:
                    self.piece_sent_at = time.perf_counter()
                self._mark_started()
                await stream.push_text(self._orpheus.options.pronunciations.speak(piece), written=piece)
                await stream.flush()
                piece = await pieces.get()
            await stream.end()
        except EngineError:
            return  # the connection is gone; the audio side reports it
