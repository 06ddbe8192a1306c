"""LiveKit adapter for the CPU voice: a native streaming TTS fed by the LLM's token stream.

Pieces are cut with `SpeechChunker` (first audio after the first clause, not the first sentence) and
synthesised off the event loop, one after another, so the next piece is ready while the current one plays.
When the LLM is slower than speech, `PlayoutClock` says when the listener is about to run out and the
words already written go out without waiting for the clause to end.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from livekit.agents import APIConnectionError, APIConnectOptions, tts
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS

from plugins.playout import PlayoutClock, PlayoutOptions, cut_before_dry
from plugins.pronunciation import Pronunciations
from plugins.text_chunker import ChunkerOptions, SpeechChunker, split_text

from .espeak import EspeakVoice, is_espeak_voice
from .voice import SAMPLE_RATE, CpuVoice, CpuVoiceError, open_voice


@dataclass(frozen=True)
class CpuVoiceOptions:
    voice: str = "heart"
    chunker: ChunkerOptions = field(default_factory=ChunkerOptions)
    playout: PlayoutOptions = field(default_factory=PlayoutOptions)
    pronunciations: Pronunciations = field(default_factory=Pronunciations)  # read out as respelled


class CpuVoiceTTS(tts.TTS):
    def __init__(
        self,
        *,
        voice: str = "heart",
        engine: CpuVoice | EspeakVoice | None = None,
        pronunciations: Pronunciations | None = None,
    ) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True),
            sample_rate=SAMPLE_RATE,
            num_channels=1,
        )
        self._opts = CpuVoiceOptions(voice=voice, pronunciations=pronunciations or Pronunciations())
        self._engine = engine
        self.active_streams = 0  # open synthesis streams; a leak shows up here (load benchmark)
        self.piece_listeners: list[Callable[[str], None]] = []  # told when a piece is sent for synthesis
        self._timings: deque[tuple[float, float, float]] = deque(maxlen=64)  # (done at, synth s, audio s)

    @property
    def model(self) -> str:
        return "espeak-ng" if is_espeak_voice(self._opts.voice) else "hibari"

    @property
    def provider(self) -> str:
        return "parley-cpu-voice"

    @property
    def pronunciations(self) -> Pronunciations:
        return self._opts.pronunciations

    @property
    def engine(self) -> CpuVoice | EspeakVoice:
        if self._engine is None:
            self._engine = open_voice(self._opts.voice)
        return self._engine

    @property
    def cpu_s(self) -> float:
        """CPU seconds this process's voice has spent synthesising (0 before it is opened)."""
        return float(getattr(self._engine, "cpu_s", 0.0))

    def prewarm(self) -> None:
        self.engine.synthesize("Hi.")

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        return _CpuChunkedStream(tts=self, input_text=text, conn_options=conn_options)

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.SynthesizeStream:
        return _CpuSynthesizeStream(tts=self, conn_options=conn_options)

    async def synth_piece(self, text: str) -> bytes:
        for listener in self.piece_listeners:
            listener(text)
        began = time.monotonic()
        try:
            pcm = await asyncio.to_thread(self.engine.synthesize, self._opts.pronunciations.speak(text))
        except CpuVoiceError as e:
            raise APIConnectionError(str(e), retryable=False) from None
        done = time.monotonic()
        self._timings.append((done, done - began, len(pcm) / SAMPLE_RATE))
        return pcm.tobytes()

    def recent_rtf(self, window_s: float) -> float:
        """Seconds of synthesis per second of speech over the pieces of the last `window_s` (0 when none):
        above 1 the voice cannot keep up with playback (worker/headroom.py reads it)."""
        since = time.monotonic() - window_s
        synth = sum(s for at, s, _ in self._timings if at >= since)
        audio = sum(a for at, _, a in self._timings if at >= since)
        return synth / audio if audio > 0 else 0.0


class _CpuChunkedStream(tts.ChunkedStream):
    def __init__(self, *, tts: CpuVoiceTTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._voice = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id=uuid.uuid4().hex, sample_rate=SAMPLE_RATE, num_channels=1, mime_type="audio/pcm"
        )
        for piece in split_text(self._input_text):
            output_emitter.push(await self._voice.synth_piece(piece))
        output_emitter.flush()


class _CpuSynthesizeStream(tts.SynthesizeStream):
    def __init__(self, *, tts: CpuVoiceTTS, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, conn_options=conn_options)
        self._voice = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id=uuid.uuid4().hex,
            sample_rate=SAMPLE_RATE,
            num_channels=1,
            mime_type="audio/pcm",
            stream=True,
        )
        pieces: asyncio.Queue[str | None] = asyncio.Queue()
        chunker = SpeechChunker(self._voice._opts.chunker)
        clock = PlayoutClock(self._voice._opts.playout)
        synthesizing = False

        async def read_input() -> None:
            async for data in self._input_ch:
                if isinstance(data, self._FlushSentinel):
                    for p in chunker.flush():
                        pieces.put_nowait(p)
                    continue
                for p in chunker.push(data):
                    pieces.put_nowait(p)
            for p in chunker.flush():
                pieces.put_nowait(p)
            pieces.put_nowait(None)

        reader = asyncio.create_task(read_input())
        watcher = asyncio.create_task(cut_before_dry(clock, chunker, pieces, busy=lambda: synthesizing))
        segment_started = False
        self._voice.active_streams += 1
        try:
            while (piece := await pieces.get()) is not None:
                if not segment_started:
                    output_emitter.start_segment(segment_id=uuid.uuid4().hex)
                    segment_started = True
                self._mark_started()
                synthesizing, began = True, time.monotonic()
                pcm = await self._voice.synth_piece(piece)
                synthesizing = False
                clock.synthesized(time.monotonic() - began)
                clock.sent(len(pcm) / 2 / SAMPLE_RATE)
                output_emitter.push(pcm)
            if segment_started:
                output_emitter.end_segment()
            await reader
        finally:
            self._voice.active_streams -= 1
            watcher.cancel()
            if not reader.done():
                reader.cancel()
