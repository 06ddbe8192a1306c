"""The baselines Parley is measured against, served by the same worker (`--set pipeline=stock|stock-tuned`).

Both wire the same local models as Parley (Silero, faster-whisper tiny.en, the embedded LLM, the hibari CPU
voice) through LiveKit Agents' own building blocks: a non-streaming STT behind the framework's StreamAdapter,
a non-streaming TTS behind its sentence adapter, VAD turn detection.

- `stock`: the defaults a first integration gets (DESIGN §8).
- `stock-tuned`: what an informed LiveKit Agents user sets with an option or a few lines: the CPU voice's
  leading silence trimmed, Silero `min_silence_duration` 0.2 s, minimum endpointing delay 0.2 s,
  faster-whisper beam 1, the TTS prewarmed, the greeting played from audio made once per process with
  `session.say(audio=...)`.

Parley's own wiring is worker/pipeline.py; keeping these apart keeps the comparison honest.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import numpy as np
from livekit import rtc
from livekit.agents import APIConnectOptions, llm, stt, tts, utils, vad
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr
from livekit.agents.voice import Agent, AgentSession

from .settings import Settings

TTS_RATE = 24_000
STT_RATE = 16_000
PIPELINES = ("parley", "stock-tuned", "stock")


@dataclass(frozen=True)
class StockOptions:
    """One baseline's knobs; None keeps the library's default."""

    name: str
    vad_min_silence_s: float | None = None  # Silero plugin default 0.55 s
    min_endpointing_delay_s: float | None = None  # AgentSession default 0.5 s
    whisper_beam_size: int = 5  # faster-whisper's default
    trim_leading_silence: bool = False  # hibari puts ~0.3 s of silence before every utterance
    prewarm_tts: bool = False
    premade_greeting: bool = False  # say(audio=...) instead of synthesising the greeting per call


STOCK = StockOptions(name="stock")
STOCK_TUNED = StockOptions(
    name="stock-tuned",
    vad_min_silence_s=0.2,
    min_endpointing_delay_s=0.2,
    whisper_beam_size=1,
    trim_leading_silence=True,
    prewarm_tts=True,
    premade_greeting=True,
)


def stock_options(pipeline: str) -> StockOptions:
    for opts in (STOCK, STOCK_TUNED):
        if opts.name == pipeline:
            return opts
    raise ValueError(f"not a stock pipeline: {pipeline!r} (one of stock, stock-tuned)")


# --- the models as a plain integration uses them -------------------------------------------------------


class PlainWhisperSTT(stt.STT):
    """faster-whisper on the whole buffer, the way its README shows it."""

    def __init__(self, model_dir: str, beam_size: int = 5, cpu_threads: int = 2) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=False, interim_results=False))
        from faster_whisper import WhisperModel

        self._beam = beam_size
        self._model = WhisperModel(model_dir, device="cpu", compute_type="int8", cpu_threads=cpu_threads)

    @property
    def model(self) -> str:
        return "tiny.en"

    @property
    def provider(self) -> str:
        return "faster-whisper"

    def transcribe(self, audio: np.ndarray) -> str:
        segments, _ = self._model.transcribe(audio, language="en", beam_size=self._beam)
        return " ".join(s.text.strip() for s in segments).strip()

    async def _recognize_impl(
        self,
        buffer: utils.AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        frame = rtc.combine_audio_frames(buffer)
        pcm = np.frombuffer(frame.data, dtype=np.int16).reshape(-1, frame.num_channels).mean(axis=1)
        if frame.sample_rate != STT_RATE:
            import soxr

            pcm = soxr.resample(pcm, frame.sample_rate, STT_RATE)
        text = await asyncio.to_thread(self.transcribe, (pcm / 32768.0).astype(np.float32))
        return stt.SpeechEvent(
            type=stt.SpeechEventType.FINAL_TRANSCRIPT,
            alternatives=[stt.SpeechData(language="en", text=text)],  # type: ignore[arg-type]
        )


def trim_leading(
    pcm: np.ndarray, rate: int = TTS_RATE, gate_dbfs: float = -45.0, pad_ms: float = 20.0
) -> np.ndarray:
    """Drop near-silence before the first voiced 10 ms window (keeping a short pad before it)."""
    win = rate // 100
    n = len(pcm) // win
    if n == 0:
        return pcm
    frames = pcm[: n * win].reshape(n, win).astype(np.float64)
    rms = np.sqrt(np.mean(frames * frames, axis=1) + 1e-12)
    voiced = np.flatnonzero(20 * np.log10(rms) > gate_dbfs)
    if voiced.size == 0:
        return pcm
    return pcm[max(0, voiced[0] * win - int(rate * pad_ms / 1000)) :]


class PlainHibariTTS(tts.TTS):
    """hibari as a non-streaming TTS: whole text in, whole audio out. `piece_listeners` hear (text, seconds)
    of every synthesised piece (the latency marks use it to find a reply's first full piece)."""

    def __init__(self, voice: str = "heart", trim: bool = False, prewarm: bool = False) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False), sample_rate=TTS_RATE, num_channels=1
        )
        from hibari import Hibari

        self._model = Hibari(voice=voice)
        self._trim = trim
        self._prewarm = prewarm
        self._lock = asyncio.Lock()
        self.piece_listeners: list[Callable[[str, float], None]] = []

    @property
    def model(self) -> str:
        return "hibari"

    @property
    def provider(self) -> str:
        return "hibari"

    def prewarm(self) -> None:
        """One synthesis so the first reply does not pay the model's cold start (stock-tuned only)."""
        if self._prewarm:
            self._prewarm = False  # AgentSession calls this again at every session start
            self.pcm("Hello.")

    def pcm(self, text: str) -> np.ndarray:
        audio = np.clip(np.asarray(self._model(text), np.float32), -1, 1)
        if self._trim:
            audio = trim_leading(audio)
        return (audio * 32767).astype(np.int16)

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
            request_id=uuid.uuid4().hex, sample_rate=TTS_RATE, num_channels=1, mime_type="audio/pcm"
        )
        async with self._plain._lock:
            pcm = await asyncio.to_thread(self._plain.pcm, self._input_text)
        for listener in self._plain.piece_listeners:
            listener(self._input_text, len(pcm) / TTS_RATE)
        output_emitter.push(pcm.tobytes())
        output_emitter.flush()


# --- per process and per call ----------------------------------------------------------------------


@dataclass
class StockComponents:
    """Per-process models of a stock wiring (loaded in the job process's prewarm)."""

    options: StockOptions
    vad: vad.VAD
    stt: PlainWhisperSTT
    tts: PlainHibariTTS
    llm: llm.LLM
    greeting_pcm: np.ndarray | None = None  # stock-tuned: made once, played with say(audio=...)
    live: dict[str, str] = field(default_factory=dict)


def load_stock_components(settings: Settings, llm_base_url: str, opts: StockOptions) -> StockComponents:
    from livekit.plugins import silero

    from plugins.whisper import resolve_model_path

    from .pipeline import agent_options, load_llm

    stt_model = PlainWhisperSTT(
        str(resolve_model_path(settings.effective_stt_model)), beam_size=opts.whisper_beam_size
    )
    # one decode now: a process serves many calls, so the cold first decode is not a per-call cost
    stt_model.transcribe(np.zeros(STT_RATE // 2, np.float32))
    tts_model = PlainHibariTTS(
        voice=settings.cpu_voice, trim=opts.trim_leading_silence, prewarm=opts.prewarm_tts
    )
    tts_model.prewarm()
    greeting = agent_options(settings).spoken_greeting
    return StockComponents(
        options=opts,
        vad=silero.VAD.load()
        if opts.vad_min_silence_s is None
        else silero.VAD.load(min_silence_duration=opts.vad_min_silence_s),
        stt=stt_model,
        tts=tts_model,
        llm=load_llm(settings, llm_base_url),
        greeting_pcm=tts_model.pcm(greeting) if opts.premade_greeting and greeting else None,
        live={"pipeline": opts.name},
    )


async def _frames(pcm: np.ndarray, frame_ms: int = 20) -> AsyncIterator[rtc.AudioFrame]:
    step = TTS_RATE * frame_ms // 1000
    for i in range(0, len(pcm), step):
        chunk = pcm[i : i + step]
        yield rtc.AudioFrame(chunk.tobytes(), TTS_RATE, 1, len(chunk))


class StockAgent(Agent):
    """Instructions and greeting from the same agent options as Parley's; nothing else."""

    def __init__(self, instructions: str, greeting: str, greeting_pcm: np.ndarray | None) -> None:
        super().__init__(instructions=instructions)
        self._greeting = greeting
        self._greeting_pcm = greeting_pcm

    async def on_enter(self) -> None:
        if not self._greeting:
            return
        if self._greeting_pcm is not None:
            self.session.say(self._greeting, audio=_frames(self._greeting_pcm))
        else:
            self.session.say(self._greeting)


def turn_handling(opts: StockOptions) -> dict[str, object]:
    """VAD turn detection pinned (never LiveKit Cloud, DESIGN §3); endpointing only where tuned."""
    handling: dict[str, object] = {"turn_detection": "vad", "interruption": {"mode": "vad"}}
    if opts.min_endpointing_delay_s is not None:
        handling["endpointing"] = {"min_delay": opts.min_endpointing_delay_s}
    return handling


def build_stock_call(settings: Settings, comp: StockComponents) -> tuple[AgentSession, StockAgent]:
    from .pipeline import agent_options

    session: AgentSession = AgentSession(
        vad=comp.vad,
        stt=stt.StreamAdapter(stt=comp.stt, vad=comp.vad),
        llm=comp.llm,
        tts=comp.tts,
        turn_handling=turn_handling(comp.options),  # type: ignore[arg-type]
        user_away_timeout=None,
    )
    opts = agent_options(settings)
    return session, StockAgent(opts.spoken_instructions, opts.spoken_greeting, comp.greeting_pcm)
