"""LiveKit adapter: `WhisperSTT`, a streaming `stt.STT` over the process's shared Whisper model.

The streaming policy lives in stream.py, the model in model.py, the options in options.py.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable

from livekit import rtc
from livekit.agents import APIConnectOptions, stt
from livekit.agents.language import LanguageCode
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr
from livekit.agents.utils import AudioBuffer, is_given

from .guard import clean_text
from .model import (
    PRIORITY_FINAL,
    SAMPLE_RATE,
    DecodeRequest,
    Transcriber,
    WhisperModelError,
    WhisperModelRunner,
    shared_runner,
)
from .options import LANGUAGES, StreamingOptions, WhisperConfigError, WhisperSTTOptions, check_language
from .speech_gate import SpeechGate, SpeechProb
from .stream import WhisperStream, frame_to_float
from .vocabulary import vocabulary_prompt

__all__ = [
    "LANGUAGES",
    "StreamingOptions",
    "WhisperConfigError",
    "WhisperSTT",
    "WhisperSTTOptions",
    "WhisperStream",
    "check_language",
    "silero_speech_prob",
]

logger = logging.getLogger("parley.stt")


@functools.lru_cache(maxsize=1)
def _silero_session() -> object:
    from livekit.plugins.silero import onnx_model

    return onnx_model.new_inference_session(force_cpu=True)


def silero_speech_prob() -> SpeechProb:
    """A fresh Silero state (one per stream) over the process's shared ONNX session."""
    from livekit.plugins.silero import onnx_model

    return onnx_model.OnnxModel(onnx_session=_silero_session(), sample_rate=SAMPLE_RATE)


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
        self.unheard_listeners: list[Callable[[float], None]] = []
        """Told (seconds of speech) when a caller's utterance held speech but no words the guard kept
        (`guard.unintelligible`): the app can ask the caller to repeat instead of staying silent."""

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

    def new_speech_prob(self) -> SpeechProb:
        """A speech-probability function with its own state, for one stream's gate."""
        return self._speech_prob_factory()

    @property
    def open_streams(self) -> int:
        """Streams not closed yet: 0 once a call has ended, or a stream leaked."""
        return len(self._streams)

    def forget_stream(self, stream: WhisperStream) -> None:
        self._streams.discard(stream)

    def new_turn(self) -> None:
        """The agent answered the caller: no open stream decodes the caller's next words with the answered
        turn's audio in front (`StreamingOptions.context_gap_s`)."""
        for s in self._streams:
            s.new_turn()

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
        gate = SpeechGate(self.new_speech_prob(), self._opts.streaming.gate)
        pcm = frame_to_float(frame)
        gate.push(pcm)
        text, language_out, confidence = "", lang or "en", 0.0
        if gate.active and gate.speech_s >= self._opts.streaming.min_speech_s:
            # the same window as the stream's finals: one audio, one transcript, whichever path decodes it
            request = DecodeRequest(
                lang,
                beam_size=self._opts.streaming.final_beam_size,
                priority=PRIORITY_FINAL,
                window_s=self._opts.streaming.final_window_s,
                initial_prompt=vocabulary_prompt(self._opts.streaming.vocabulary) or None,
            )
            try:
                result = await self._transcriber.transcribe(gate.audio(), request)
            except Exception as e:  # the caller gets an empty transcript, not a traceback
                logger.warning(
                    "whisper decode failed: %s", (str(e).strip().splitlines() or [type(e).__name__])[0]
                )
            else:
                text = clean_text(
                    result,
                    speech_s=gate.speech_s,
                    opts=self._opts.streaming.guard,
                    prompt=request.initial_prompt,
                    terms=self._opts.streaming.vocabulary,
                )
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
