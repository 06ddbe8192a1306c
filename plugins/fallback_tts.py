"""A two-voice fallback chain: the primary TTS (the Orpheus engine) while it can take calls, else the fallback
(the CPU voice), switching back when the primary recovers. One log line per switch.

Why not LiveKit's `tts.FallbackAdapter`: it checks recovery by re-synthesising live utterances on the failed
TTS (GPU time spent on speech nobody hears), logs a traceback per failure, and has no notion of "full".
Here recovery is a cheap `probe()` of the primary (the engine's capacity op), made only while switched.

A reply whose primary stream fails before any audio is replayed, from its first token, into the fallback:
the caller hears the CPU voice instead of silence. A failure after audio started (the engine died or froze
mid-reply) hands the rest of that reply to the fallback: a primary that knows which text it has fully
spoken (`voiced_text()`) loses no words (at most the piece it was in is said again); one that does not
ends the reply there. Either way the next replies are switched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from livekit.agents import APIConnectionError, APIConnectOptions, APIError, tts, utils
from livekit.agents.tts import TTS, SynthesizeStream
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS

log = logging.getLogger("parley.tts.fallback")


@runtime_checkable
class Probeable(Protocol):
    """A primary that can say cheaply whether it would take a stream now (None = yes, else a reason)."""

    def probe(self) -> Awaitable[str | None]: ...


@dataclass(frozen=True)
class FallbackOptions:
    probe_interval_s: float = 0.5  # while switched: how often the primary is asked whether it is back
    primary_name: str = "Orpheus engine"
    fallback_name: str = "CPU voice"


def _reason(err: BaseException) -> str:
    code = getattr(err, "code", None)
    return str(code) if code else (str(err).splitlines()[0] if str(err) else type(err).__name__)


def remainder(full: str, voiced: str) -> str:
    """`full` without its prefix `voiced`, compared without whitespace (the primary may have trimmed it).
    When `voiced` is not a prefix after all, the whole of `full`: words said twice, never lost."""
    i = 0
    for ch in voiced:
        if ch.isspace():
            continue
        while i < len(full) and full[i].isspace():
            i += 1
        if i >= len(full) or full[i] != ch:
            return full
        i += 1
    return full[i:].lstrip()


def _is_unavailable(err: BaseException) -> bool:
    """Errors that say the primary cannot serve now (unreachable, full, lost, timed out), rather than
    that this one text failed: only these switch the chain; others send just this reply to the fallback."""
    return isinstance(err, APIConnectionError)


class FallbackTTS(tts.TTS):
    def __init__(self, primary: tts.TTS, fallback: tts.TTS, options: FallbackOptions | None = None) -> None:
        if primary.sample_rate != fallback.sample_rate or primary.num_channels != fallback.num_channels:
            raise ValueError(
                "fallback TTS must match the primary's format "
                f"({primary.sample_rate} Hz/{primary.num_channels} ch vs "
                f"{fallback.sample_rate} Hz/{fallback.num_channels} ch)"
            )
        if not (primary.capabilities.streaming and fallback.capabilities.streaming):
            raise ValueError("both TTSs of a fallback chain must stream natively")
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True),
            sample_rate=primary.sample_rate,
            num_channels=primary.num_channels,
        )
        self.primary = primary
        self.fallback = fallback
        self._opts = options or FallbackOptions()
        # one list shared with both voices, so the harness hears of every piece whichever voice speaks
        self.piece_listeners: list[Callable[[str], None]] = []
        for voice in (primary, fallback):
            own = getattr(voice, "piece_listeners", None)
            if isinstance(own, list):
                self.piece_listeners.extend(x for x in own if x not in self.piece_listeners)
                voice.piece_listeners = self.piece_listeners  # type: ignore[attr-defined]
        self.active_streams = 0
        self.switches = 0
        self._down: str | None = None  # why the primary is switched out; None while it serves
        self._probe_task: asyncio.Task[None] | None = None

    @property
    def model(self) -> str:
        return f"{self.primary.model}|{self.fallback.model}"

    @property
    def provider(self) -> str:
        return "parley-fallback"

    @property
    def using_fallback(self) -> bool:
        return self._down is not None

    @property
    def phrase_cache(self) -> object:
        return getattr(self.primary, "phrase_cache", None)

    @phrase_cache.setter
    def phrase_cache(self, cache: object) -> None:
        self.primary.phrase_cache = cache  # type: ignore[attr-defined]

    # -- health -----------------------------------------------------------------------------------------
    def mark_down(self, reason: str) -> None:
        """Switch to the fallback (logged once) and start probing the primary."""
        if self._down is None:
            self.switches += 1
            log.warning(
                "tts: %s %s; switching to the %s", self._opts.primary_name, reason, self._opts.fallback_name
            )
        self._down = reason
        self._ensure_probe()

    def mark_up(self) -> None:
        if self._down is not None:
            self.switches += 1
            log.info(
                "tts: %s is back (was %s); switching back from the %s",
                self._opts.primary_name,
                self._down,
                self._opts.fallback_name,
            )
        self._down = None

    def _ensure_probe(self) -> None:
        if self._probe_task is not None and not self._probe_task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # the next stream starts it
        self._probe_task = loop.create_task(self._probe_loop(), name="tts-fallback-probe")

    async def _probe_loop(self) -> None:
        while self._down is not None:
            await asyncio.sleep(self._opts.probe_interval_s)
            if isinstance(self.primary, Probeable):
                try:
                    reason = await self.primary.probe()
                except Exception as e:  # a probe must never kill the loop
                    reason = _reason(e)
            else:
                reason = None  # nothing cheap to ask: let the next reply try the primary
            if reason is None:
                self.mark_up()
            else:
                self._down = reason

    def order(self) -> list[tts.TTS]:
        """Which voices a new reply tries, in order."""
        if self._down is not None:
            self._ensure_probe()
            return [self.fallback]
        return [self.primary, self.fallback]

    # -- lifecycle --------------------------------------------------------------------------------------
    def prewarm(self) -> None:
        self.primary.prewarm()
        self.fallback.prewarm()

    async def warm_up(self) -> None:
        """Connect the primary now (call from the job's event loop), and learn whether it serves."""
        warm = getattr(self.primary, "warm_up", None)
        if warm is not None:
            await warm()
        if isinstance(self.primary, Probeable):
            reason = await self.primary.probe()
            if reason is not None:
                self.mark_down(reason)

    async def aclose(self) -> None:
        if self._probe_task is not None:
            self._probe_task.cancel()
            with contextlib.suppress(BaseException):
                await self._probe_task
        await self.primary.aclose()
        await self.fallback.aclose()
        await super().aclose()

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        return _FallbackChunkedStream(tts=self, input_text=text, conn_options=conn_options)

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.SynthesizeStream:
        return _FallbackStream(tts=self, conn_options=conn_options)


def _inner_options(conn_options: APIConnectOptions) -> APIConnectOptions:
    # the chain is the retry: an inner voice that fails hands over at once instead of retrying itself
    return APIConnectOptions(
        max_retry=0, retry_interval=conn_options.retry_interval, timeout=conn_options.timeout
    )


class _FallbackChunkedStream(tts.ChunkedStream):
    def __init__(self, *, tts: FallbackTTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._chain = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id=utils.shortuuid(),
            sample_rate=self._chain.sample_rate,
            num_channels=self._chain.num_channels,
            mime_type="audio/pcm",
        )
        last: BaseException | None = None
        text = self._input_text
        for voice in self._chain.order():
            heard = False
            inner: tts.ChunkedStream | None = None
            try:
                async with voice.synthesize(text, conn_options=_inner_options(self._conn_options)) as inner:
                    async for ev in inner:
                        heard = True
                        output_emitter.push_frame(ev.frame)
                output_emitter.flush()
                return
            except APIError as e:
                last = e
                if voice is self._chain.primary and _is_unavailable(e):
                    self._chain.mark_down(_reason(e))
                voiced = getattr(inner, "voiced_text", None)
                if heard and (voice is not self._chain.primary or voiced is None):
                    raise
                if heard and voiced is not None:
                    text = remainder(text, voiced())  # the fallback says what was not heard in full
        raise APIConnectionError(f"no voice could speak: {last}", retryable=False)


class _FallbackStream(tts.SynthesizeStream):
    def __init__(self, *, tts: FallbackTTS, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, conn_options=conn_options)
        self._chain = tts
        self.voice: TTS | None = None  # which voice spoke this reply (the last one, after a switch)
        self.inner: SynthesizeStream | None = None
        self.resumed_after: str | None = None  # mid-reply switch: the text the primary had fully spoken

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id=utils.shortuuid(),
            sample_rate=self._chain.sample_rate,
            num_channels=self._chain.num_channels,
            mime_type="audio/pcm",
            stream=True,
        )
        history: list[str | None] = []  # every input item so far (None = flush), replayed on a switch
        ended = False
        current: tts.SynthesizeStream | None = None

        def feed(stream: tts.SynthesizeStream, item: str | None) -> None:
            if item is None:
                stream.flush()
            else:
                stream.push_text(item)

        async def forward_input() -> None:
            nonlocal ended
            async for data in self._input_ch:
                item = None if isinstance(data, self._FlushSentinel) else data
                history.append(item)
                if current is not None:
                    feed(current, item)
            ended = True
            if current is not None:
                current.end_input()

        forwarder = asyncio.create_task(forward_input(), name="tts-fallback-input")
        self._chain.active_streams += 1
        last: BaseException | None = None
        segment_open = False
        try:
            for voice in self._chain.order():
                inner = voice.stream(conn_options=_inner_options(self._conn_options))
                for item in history:  # replay, then go on live (no await in between: nothing is lost)
                    feed(inner, item)
                if ended:
                    inner.end_input()
                current, self.voice, self.inner = inner, voice, inner
                heard = False
                try:
                    async with inner:
                        async for ev in inner:
                            if not heard:
                                heard = True
                                if not self._started_time:
                                    self._started_time = inner._started_time  # TTFB from the piece sent
                                if not segment_open:
                                    segment_open = True
                                    segment = ev.segment_id or utils.shortuuid()
                                    output_emitter.start_segment(segment_id=segment)
                            output_emitter.push_frame(ev.frame)
                    if segment_open:
                        output_emitter.end_segment()
                    return
                except APIError as e:
                    last = e
                    if not self._started_time and inner._started_time:
                        self._started_time = inner._started_time  # TTFB counts the failed try too
                    if voice is self._chain.primary and _is_unavailable(e):
                        self._chain.mark_down(_reason(e))
                    voiced = getattr(inner, "voiced_text", None)
                    if heard and (voice is not self._chain.primary or voiced is None):
                        raise
                    if heard and voiced is not None:
                        # mid-reply: the fallback says the rest (from the piece that was cut off), in the
                        # same segment, and takes the live input from here on
                        said = "".join(i for i in history if i is not None)
                        history[:] = [remainder(said, voiced())]
                        self.resumed_after = voiced()
            if last is not None:
                raise APIConnectionError(f"no voice could speak: {last}", retryable=False)
        finally:
            self._chain.active_streams -= 1
            await utils.aio.cancel_and_wait(forwarder)
