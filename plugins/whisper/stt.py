"""LiveKit adapter: a streaming `stt.STT` over the shared Whisper model.

How a stream works (the policy is documented here because it is the point of the plugin):
- The session sends every frame and a flush when its VAD / turn detector ends the turn. An in-stream speech
  gate (Silero VAD, its bundled ONNX; a second, cheap copy so the STT owns where utterances start and end)
  cuts out the speech, so Whisper never decodes silence or noise.
- While the caller speaks, the utterance is re-decoded from its start every `partial_interval_s` (beam 1, no
  timestamps), never while another decode of the same stream is running. Words two consecutive hypotheses
  agree on are confirmed; INTERIM = confirmed + tentative.
- When the gate hears a pause, the whole utterance is decoded at once with the final settings: its text
  goes out as PREFLIGHT (so the LLM can start during the endpointing delay) and is kept. When the flush comes
  and no speech arrived since, that text is the FINAL immediately.
- Long turns: past `commit_after_s` a partial asks for segment timestamps; whole confirmed sentences at the
  start are committed and their audio trimmed, so a decode never exceeds Whisper's 30 s window.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from livekit import rtc
from livekit.agents import APIConnectOptions, stt
from livekit.agents.language import LanguageCode
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr
from livekit.agents.utils import AudioBuffer, is_given

from .agreement import LocalAgreement, find_sentence_commit
from .guard import GuardOptions, clean_text
from .model import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    PRIORITY_PAUSE,
    SAMPLE_RATE,
    DecodeRequest,
    DecodeResult,
    ModelOptions,
    Transcriber,
    WhisperModelError,
    WhisperModelRunner,
    shared_runner,
)
from .speech_gate import GateEvent, GateOptions, SpeechGate, SpeechProb

logger = logging.getLogger("parley.stt")

LANGUAGES = ("en", "ko", "auto")


class WhisperConfigError(ValueError):
    """A configuration that cannot work (e.g. Korean with an English-only model); one line."""


@dataclass(frozen=True)
class StreamingOptions:
    partial_interval_s: float = 0.5
    """New audio needed before the next partial re-decode (the cadence bound)."""
    partial_beam_size: int = 1
    partial_window_s: int = 10
    """Encoder window for partials (see DecodeRequest.window_s): cheap, slightly less accurate."""
    final_window_s: int = 15
    """Encoder window for settle/final decodes: 2.4x cheaper than 30 s, same WER on the benchmark set."""
    partial_load_factor: float = 2.0
    """Partials wait at least this many times the recent decode time, so a slow or busy machine re-decodes
    less often instead of falling behind."""
    final_beam_size: int = 1
    """Beam for the pause/final decode; more costs latency on CPU."""
    min_speech_s: float = 0.2
    """Utterances with less detected speech produce no transcript."""
    settle_s: float = 0.064
    """Silence after speech that starts the speculative whole-utterance decode (its text becomes PREFLIGHT at
    the gate's pause and FINAL at the flush if the caller says nothing more)."""
    commit_after_s: float = 12.0
    """Utterance length after which whole confirmed sentences are committed and trimmed."""
    max_utterance_s: float = 25.0
    """Hard cap: commit whatever is confirmed (or everything) so a decode stays inside the 30 s window."""
    gate: GateOptions = field(default_factory=GateOptions)
    guard: GuardOptions = field(default_factory=GuardOptions)


@dataclass(frozen=True)
class WhisperSTTOptions:
    model: ModelOptions = field(default_factory=ModelOptions)
    language: str = "en"
    """en, ko or auto (auto and ko need a multilingual model)."""
    streaming: StreamingOptions = field(default_factory=StreamingOptions)


def check_language(language: str, *, multilingual: bool, model_name: str) -> str | None:
    """Validate the language setting against the model; returns the code to decode with (None = detect)."""
    if language not in LANGUAGES:
        raise WhisperConfigError(f"STT language must be one of {', '.join(LANGUAGES)} (got {language!r})")
    if language != "en" and not multilingual:
        raise WhisperConfigError(
            f"STT model {model_name!r} is English-only but the language is {language!r}; "
            "use a multilingual model (e.g. 'small') or language 'en'"
        )
    return None if language == "auto" else language


@functools.lru_cache(maxsize=1)
def _silero_session() -> object:
    from livekit.plugins.silero import onnx_model

    return onnx_model.new_inference_session(force_cpu=True)


def silero_speech_prob() -> SpeechProb:
    """A fresh Silero state (one per stream) over the process's shared ONNX session."""
    from livekit.plugins.silero import onnx_model

    return onnx_model.OnnxModel(onnx_session=_silero_session(), sample_rate=SAMPLE_RATE)


def frame_to_float(frame: rtc.AudioFrame) -> np.ndarray:
    pcm = np.frombuffer(frame.data, dtype=np.int16)
    if frame.num_channels > 1:
        pcm = pcm.reshape(-1, frame.num_channels).mean(axis=1)
    return (pcm.astype(np.float32)) / 32768.0


class WhisperSTT(stt.STT):
    """Streaming faster-whisper STT: one shared model, per-stream speech gate and agreement policy."""

    def __init__(
        self,
        options: WhisperSTTOptions = WhisperSTTOptions(),
        *,
        transcriber: Transcriber | None = None,
        speech_prob_factory: Callable[[], SpeechProb] | None = None,
    ) -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(
                streaming=True, interim_results=True, manual_flush=True, offline_recognize=True
            )
        )
        self._opts = options
        self._transcriber: Transcriber = transcriber or shared_runner(options.model)
        try:
            self._language = check_language(
                options.language,
                multilingual=self._transcriber.multilingual,
                model_name=self._transcriber.model_name,
            )
        except WhisperModelError as e:
            raise WhisperConfigError(str(e)) from None
        self._speech_prob_factory: Callable[[], SpeechProb] = speech_prob_factory or silero_speech_prob
        self._streams: set[WhisperStream] = set()

    @property
    def model(self) -> str:
        return self._transcriber.model_name

    @property
    def provider(self) -> str:
        return "faster-whisper"

    @property
    def options(self) -> WhisperSTTOptions:
        return self._opts

    @property
    def transcriber(self) -> Transcriber:
        return self._transcriber

    def prewarm(self) -> None:
        """Load the model and the VAD before the first call (the worker's prewarm)."""
        if isinstance(self._transcriber, WhisperModelRunner):
            self._transcriber.load()
            self._transcriber.warmup()
        self._speech_prob_factory()

    def _decode_language(self, language: NotGivenOr[str]) -> str | None:
        if not is_given(language) or not language:
            return self._language
        return check_language(
            language, multilingual=self._transcriber.multilingual, model_name=self._transcriber.model_name
        )

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> WhisperStream:
        s = WhisperStream(stt=self, language=self._decode_language(language), conn_options=conn_options)
        self._streams.add(s)
        return s

    async def _recognize_impl(
        self,
        buffer: AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        """Whole-buffer recognition: gate the speech, decode once with the final settings."""
        lang = self._decode_language(language)
        frame = rtc.combine_audio_frames(buffer)
        if frame.sample_rate != SAMPLE_RATE:
            resampler = rtc.AudioResampler(frame.sample_rate, SAMPLE_RATE, num_channels=frame.num_channels)
            frame = rtc.combine_audio_frames([*resampler.push(frame), *resampler.flush()])
        gate = SpeechGate(self._speech_prob_factory(), self._opts.streaming.gate)
        pcm = frame_to_float(frame)
        gate.push(pcm)
        text, language_out, confidence = "", lang or "en", 0.0
        if gate.active and gate.speech_s >= self._opts.streaming.min_speech_s:
            request = DecodeRequest(
                lang, beam_size=self._opts.streaming.final_beam_size, priority=PRIORITY_FINAL
            )
            try:
                result = await self._transcriber.transcribe(gate.audio(), request)
            except Exception as e:  # the caller gets an empty transcript, not a traceback
                logger.warning(
                    "whisper decode failed: %s", (str(e).strip().splitlines() or [type(e).__name__])[0]
                )
            else:
                text = clean_text(result, speech_s=gate.speech_s, opts=self._opts.streaming.guard)
                language_out, confidence = result.language, result.confidence
        return stt.SpeechEvent(
            type=stt.SpeechEventType.FINAL_TRANSCRIPT,
            request_id=uuid.uuid4().hex,
            alternatives=[
                stt.SpeechData(language=LanguageCode(language_out), text=text, confidence=confidence)
            ],
        )

    async def aclose(self) -> None:
        for s in list(self._streams):
            await s.aclose()
        self._streams.clear()


@dataclass
class _Decode:
    """One decode in flight, and what audio it covers, so its result can be judged current or stale."""

    kind: str  # partial (cadence) | settle (at the first silence, final settings) | final (at flush)
    epoch: int
    """Bumped at each FINAL and each trim: results from an older epoch describe other audio."""
    revision: int
    length: int
    complete: bool
    """At submit the audio held all speech so far plus a tail: if no speech comes, its text is final."""
    task: asyncio.Task[DecodeResult | None]


@dataclass(frozen=True)
class _Settled:
    revision: int
    text: str
    result: DecodeResult


class WhisperStream(stt.RecognizeStream):
    def __init__(self, *, stt: WhisperSTT, language: str | None, conn_options: APIConnectOptions) -> None:
        super().__init__(stt=stt, conn_options=conn_options, sample_rate=SAMPLE_RATE)
        self._w = stt
        self._opts = stt.options.streaming
        self._language = language
        self._gate = SpeechGate(stt._speech_prob_factory(), self._opts.gate)
        self._agreement = LocalAgreement()
        self._epoch = 0
        self._partial: _Decode | None = None
        self._settle: _Decode | None = None
        self._stale: _Decode | None = None  # a settle decode overtaken by new speech, still running
        self._decode_s = 0.0
        self._settled: _Settled | None = None
        self._committed: list[str] = []
        self._last_decode_len = 0
        self._last_sent: dict[str, str] = {}
        self._finalizing = False
        self._request_id = uuid.uuid4().hex
        self._usage_samples = 0
        self._settle_samples = round(self._opts.settle_s * SAMPLE_RATE)

    # ---- events -------------------------------------------------------------------------------------------

    def _speech(self, text: str, result: DecodeResult | None) -> stt.SpeechData:
        start = self._gate.start_sample / SAMPLE_RATE + self.start_time_offset
        end = (self._gate.start_sample + self._gate.speech_end) / SAMPLE_RATE + self.start_time_offset
        language = result.language if result is not None else (self._language or "en")
        confidence = result.confidence if result is not None else 0.0
        return stt.SpeechData(
            language=LanguageCode(language), text=text, start_time=start, end_time=end, confidence=confidence
        )

    def _emit(self, kind: stt.SpeechEventType, text: str = "", result: DecodeResult | None = None) -> None:
        alternatives = [self._speech(text, result)] if kind in _TEXT_EVENTS else []
        self._event_ch.send_nowait(
            stt.SpeechEvent(type=kind, request_id=self._request_id, alternatives=alternatives)
        )

    def _emit_text(self, kind: stt.SpeechEventType, text: str, result: DecodeResult) -> None:
        full = " ".join([*self._committed, text]).strip()
        # an unchanged INTERIM is not repeated; a PREFLIGHT goes out even when an INTERIM said the same
        if full and full != self._last_sent.get(kind.value):
            self._emit(kind, full, result)
            self._last_sent[kind.value] = full

    def _emit_usage(self) -> None:
        if self._usage_samples <= 0:
            return
        usage = stt.RecognitionUsage(audio_duration=self._usage_samples / SAMPLE_RATE)
        self._usage_samples = 0
        self._event_ch.send_nowait(
            stt.SpeechEvent(
                type=stt.SpeechEventType.RECOGNITION_USAGE,
                request_id=self._request_id,
                recognition_usage=usage,
            )
        )

    # ---- main loop ----------------------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            async for item in self._input_ch:
                if isinstance(item, self._FlushSentinel):
                    await self._finalize(flushed=True)
                    continue
                pcm = frame_to_float(item)
                self._usage_samples += len(pcm)
                for ev in self._gate.push(pcm):
                    await self._on_gate(ev)
                self._maybe_decode()
            await self._finalize(flushed=False)
        finally:
            for d in (self._partial, self._settle, self._stale):
                if d is not None:
                    d.task.cancel()
            self._w._streams.discard(self)

    async def _on_gate(self, ev: GateEvent) -> None:
        if ev is GateEvent.STARTED:
            self._request_id = uuid.uuid4().hex
            self._emit(stt.SpeechEventType.START_OF_SPEECH)
        elif ev is GateEvent.PAUSED:
            self._send_preflight()
        elif ev is GateEvent.RESUMED and self._settle is not None:
            # speech came back: the running settle decode is now just a partial; the next pause gets its
            # own settle decode at once instead of waiting behind this one
            self._stale, self._settle = self._settle, None
        elif ev is GateEvent.ENDED:
            await self._finalize(flushed=False)

    def _is_settled(self) -> bool:
        return self._settled is not None and self._settled.revision == self._gate.revision

    def _send_preflight(self) -> None:
        if self._settled is not None and self._is_settled():
            self._emit_text(
                stt.SpeechEventType.PREFLIGHT_TRANSCRIPT, self._settled.text, self._settled.result
            )

    # ---- decoding -----------------------------------------------------------------------------------------

    def _maybe_decode(self) -> None:
        """Start at most one partial and one settle decode per stream; never queue one behind another."""
        gate = self._gate
        if self._finalizing or not gate.active:
            return
        if gate.silence_s >= self._opts.settle_s:
            # the speaker may have stopped: decode everything now with the final settings, without waiting
            # for a partial still running on older audio
            if self._settle is None and not self._is_settled():
                self._start("settle")
            return
        if self._partial is not None or self._settle is not None or self._stale is not None:
            return
        if gate.silence_s > 0:
            return  # the speaker may be stopping: leave the CPU to the settle decode that may follow
        interval = max(self._opts.partial_interval_s, self._opts.partial_load_factor * self._decode_s)
        if gate.length - self._last_decode_len >= interval * SAMPLE_RATE:
            self._start("partial")

    def _start(self, kind: str) -> _Decode:
        gate = self._gate
        audio = gate.audio()
        partial = kind == "partial"
        request = DecodeRequest(
            language=self._language,
            beam_size=self._opts.partial_beam_size if partial else self._opts.final_beam_size,
            with_timestamps=partial and len(audio) >= self._opts.commit_after_s * SAMPLE_RATE,
            initial_prompt=" ".join(self._committed)[-200:] or None,
            priority={"final": PRIORITY_FINAL, "settle": PRIORITY_PAUSE}.get(kind, PRIORITY_PARTIAL),
            window_s=self._opts.partial_window_s if partial else self._opts.final_window_s,
        )
        complete = not partial or gate.length >= gate.speech_end + self._settle_samples
        if partial:
            self._last_decode_len = gate.length
        task = asyncio.create_task(self._decode(audio, request), name=f"whisper-{kind}")
        d = _Decode(kind, self._epoch, gate.revision, len(audio), complete, task)
        if partial:
            self._partial = d
        else:
            self._settle = d
        task.add_done_callback(lambda _t: self._on_decoded(d))
        return d

    async def _decode(self, audio: np.ndarray, request: DecodeRequest) -> DecodeResult | None:
        try:
            return await self._w.transcriber.transcribe(audio, request)
        except Exception as e:  # a failed decode costs this transcript, never the call
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            logger.warning("whisper decode failed: %s", first)
            return None

    def _on_decoded(self, d: _Decode) -> None:
        if self._partial is d:
            self._partial = None
        if self._settle is d:
            self._settle = None
        if self._stale is d:
            self._stale = None
        if d.task.cancelled() or d.epoch != self._epoch or d.kind == "final" or self._finalizing:
            return
        result = d.task.result()
        if result is not None:
            # recent decode time (queueing included), for the partial cadence
            self._decode_s = 0.7 * self._decode_s + 0.3 * (result.decode_s + result.queued_s)
            self._use_result(d, result)
        if not self._event_ch.closed:
            self._maybe_decode()

    def _use_result(self, d: _Decode, result: DecodeResult) -> None:
        gate = self._gate
        text = clean_text(result, speech_s=gate.speech_s, opts=self._opts.guard)
        if d.complete and d.revision == gate.revision:
            self._settled = _Settled(d.revision, text, result)
            if gate.paused:
                self._send_preflight()
            return
        if self._is_settled():
            return  # an older partial finishing after the settle decode: nothing new
        interim = self._agreement.update(text)
        if d.kind == "partial" and len(result.segments) > 1:
            self._maybe_commit(result, d.length)
        self._emit_text(stt.SpeechEventType.INTERIM_TRANSCRIPT, interim.text, result)

    def _maybe_commit(self, result: DecodeResult, decoded_len: int) -> None:
        """Commit whole confirmed sentences of a long turn and trim their audio."""
        if decoded_len < self._opts.commit_after_s * SAMPLE_RATE:
            return
        segs = result.segments
        commit = find_sentence_commit(
            segs, self._agreement.confirmed_words, audio_s=decoded_len / SAMPLE_RATE
        )
        if commit is not None:
            self._committed.append(commit.text)
            self._gate.trim(round(commit.end_s * SAMPLE_RATE))
            self._agreement.drop_prefix(commit.n_words)
        elif decoded_len >= self._opts.max_utterance_s * SAMPLE_RATE:
            # no clean sentence boundary: cut after the second-last segment to stay inside 30 s
            self._committed.append(" ".join(s.text.strip() for s in segs[:-1]))
            self._gate.trim(round(segs[-2].end * SAMPLE_RATE))
            self._agreement.reset()
        else:
            return
        self._epoch += 1
        self._last_decode_len = 0
        self._settled = None

    # ---- end of an utterance ------------------------------------------------------------------------------

    async def _finalize(self, *, flushed: bool) -> None:
        """Emit the FINAL for the current utterance (normally settled already) and start afresh."""
        gate = self._gate
        if not gate.active:
            if flushed and self._usage_samples > 0:
                # audio but no speech: an empty FINAL lets a waiting manual commit go on at once
                self._emit(stt.SpeechEventType.FINAL_TRANSCRIPT, "")
                self._emit_usage()
            return
        self._finalizing = True
        try:
            text, result = "", None
            if gate.speech_s >= self._opts.min_speech_s or self._committed:
                text, result = await self._final_text()
            self._emit(
                stt.SpeechEventType.FINAL_TRANSCRIPT, " ".join([*self._committed, text]).strip(), result
            )
            self._emit(stt.SpeechEventType.END_OF_SPEECH)
            self._emit_usage()
        finally:
            for d in (self._partial, self._stale):
                if d is not None:
                    d.task.cancel()
            self._epoch += 1
            self._finalizing = False
            gate.finish()
            self._agreement.reset()
            self._committed = []
            self._settled = None
            self._last_decode_len = 0
            self._last_sent = {}

    async def _final_text(self) -> tuple[str, DecodeResult | None]:
        """The settled text if current; else the running decode that covers everything; else decode now."""
        gate = self._gate
        guard = self._opts.guard
        for _ in range(2):
            if self._settled is not None and self._is_settled():
                return self._settled.text, self._settled.result
            running = [
                d
                for d in (self._settle, self._partial)
                if d is not None and d.complete and d.revision == gate.revision and d.epoch == self._epoch
            ]
            if not running:
                break
            result = await running[0].task
            if result is not None:
                return clean_text(result, speech_s=gate.speech_s, opts=guard), result
        if len(gate.audio()) == 0:
            return "", None
        result = await self._start("final").task
        if result is None:
            return "", None
        return clean_text(result, speech_s=gate.speech_s, opts=guard), result


_TEXT_EVENTS = (
    stt.SpeechEventType.INTERIM_TRANSCRIPT,
    stt.SpeechEventType.PREFLIGHT_TRANSCRIPT,
    stt.SpeechEventType.FINAL_TRANSCRIPT,
)
