"""Streaming STT benchmark (DESIGN §6): WER, end of speech -> FINAL delay, transcripts from noise.

Each WAV is pushed frame by frame, paced like a live call (`--speed 1`), then silence continues and a flush
is sent `--flush-delay-ms` after the last voiced sample, as AgentSession does when its VAD ends the turn
(Silero's default min_silence_duration is 0.55 s). The same model's whole-file WER is reported beside the
streaming WER.
No-speech inputs: every file whose .txt is empty, `--noise DIR`, plus generated silence/noise files.
Unreadable inputs (`--unreadable DIR`): speech the model cannot read, such as another language said to
tiny.en. A caller saying it should be asked to repeat (`unreadable_asked`), not answered: every FINAL with
words is text Whisper invented, which the agent would reply to (`unreadable_answered`).

    python scripts/make_korean_corpus.py
    python -m benchmarks.stt --data "$(python -m simulator.test_speech)/asr" --unreadable out/corpus-ko/test

    python -m benchmarks.stt --data "$(python -m simulator.test_speech)/asr" --json out/stt.json
    python scripts/make_korean_corpus.py && python -m benchmarks.stt --language ko --data out/corpus-ko/test

`cer` (characters, spaces and punctuation removed) is reported beside `wer`: it is the figure for Korean,
where a word split is a matter of spelling. The model defaults to the language's (tiny.en for English, the
multilingual base otherwise).

A business's own words (`--terms`, a corpus of scripts/make_vocab_corpus.py): does Whisper write the names,
drugs, brands and streets a business lists as listed, and what does the list cost (terms written where nobody
said them, WER, decode time)? Each file is streamed with the style prompt alone (`none`) and with the
business's vocabulary (`listed`). `--speak VOICES` asks the other edge: the corpus's sentences spoken by
Parley's CPU voices as written and with the business's pronunciation list, heard by a listener primed with
the vocabulary.

    python scripts/make_vocab_corpus.py && python -m benchmarks.stt --terms --data out/corpus-vocab/test
    python -m benchmarks.stt --terms --speak heart,espeak-en,espeak-en+f3 --data out/corpus-vocab/test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from livekit import rtc
from livekit.agents import stt as lkstt

from benchmarks.cli import emit, fail, percentiles
from plugins.cpu_voice.voice import CpuVoiceError
from plugins.pronunciation import PronunciationError, Pronunciations, check_pronunciations
from plugins.whisper.guard import phrase_key
from plugins.whisper.model import (
    PRIORITY_PARTIAL,
    SAMPLE_RATE,
    DecodeRequest,
    ModelOptions,
    WhisperModelError,
    default_model,
    shared_runner,
)
from plugins.whisper.stream import turn_text
from plugins.whisper.stt import StreamingOptions, WhisperConfigError, WhisperSTT, WhisperSTTOptions
from plugins.whisper.vocabulary import check_vocabulary, vocabulary_prompt
from plugins.word_error import cer, compare_form, wer
from worker.measurement import VOICED_AMPLITUDE
from worker.pipeline import WHOLE_TURN_GAP_S
from worker.settings import ENGLISH_STYLE_PROMPT

FRAME_MS = 20
"""The frames a call's audio arrives in."""


class BenchmarkInputError(ValueError):
    """Unreadable input; reported as one line."""


@dataclass
class FileResult:
    file: str
    ref: str
    hyp: str
    speech: bool
    unreadable: bool = False
    asked_to_repeat: bool = False
    final_delay_ms: float | None = None
    final_after_flush_ms: float | None = None
    preflight_before_flush: bool = False
    interims: int = 0
    events: list[str] = field(default_factory=list)


def load_audio(path: Path) -> np.ndarray:
    """16 kHz mono int16, whatever the file holds."""
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError) as e:
        raise BenchmarkInputError(f"cannot read {path}: {e}") from None
    mono = data.mean(axis=1)
    if sr != SAMPLE_RATE:
        import soxr

        mono = soxr.resample(mono, sr, SAMPLE_RATE)
    return (np.clip(mono, -1.0, 1.0) * 32767).astype(np.int16)


def last_voiced_s(pcm: np.ndarray) -> float:
    """Time just after the last sample above -50 dBFS (0 for silence)."""
    loud = np.nonzero(np.abs(pcm.astype(np.int32)) > VOICED_AMPLITUDE)[0]
    return float(loud[-1] + 1) / SAMPLE_RATE if len(loud) else 0.0


def make_noise_files(folder: Path, seconds: float = 3.0, seed: int = 7) -> list[Path]:
    """Silence and noises that must produce no transcript: digital silence, white and pink noise, mains hum,
    clicks, noise with a syllable-rate envelope, and note-like tones."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    white = rng.standard_normal(n)
    spectrum = np.fft.rfft(rng.standard_normal(n))
    pink = np.fft.irfft(spectrum / np.sqrt(np.maximum(np.arange(len(spectrum)), 1)), n)
    hum = np.sum([np.sin(2 * np.pi * 50 * k * t) / k for k in range(1, 6)], axis=0)
    clicks = np.zeros(n)
    clicks[rng.integers(0, n - 80, 12)[:, None] + np.arange(80)] = rng.standard_normal((12, 80))
    syllables = (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t)) ** 2  # speech-like 4 Hz loudness envelope
    notes = np.sum(
        [
            np.sin(2 * np.pi * f * t) * (np.sin(2 * np.pi * 2 * t + k) > 0)
            for k, f in enumerate((262, 330, 392))
        ],
        axis=0,
    )
    sources: dict[str, np.ndarray] = {
        "silence": np.zeros(n),
        "white_noise": white,
        "pink_noise": pink,
        "mains_hum": hum + 0.05 * white,
        "clicks": clicks + 0.01 * white,
        "modulated_noise": pink * syllables,
        "tones": notes,
    }
    out = []
    for name, x in sources.items():
        peak = float(np.max(np.abs(x))) or 1.0
        level = 0.0 if name == "silence" else 10 ** (-12 / 20)
        path = folder / f"noise_{name}.wav"
        sf.write(str(path), (x / peak * level).astype(np.float32), SAMPLE_RATE, subtype="PCM_16")
        path.with_suffix(".txt").write_text("")
        out.append(path)
    return out


def _frame(pcm: np.ndarray) -> rtc.AudioFrame:
    return rtc.AudioFrame(pcm.tobytes(), SAMPLE_RATE, 1, len(pcm))


async def stream_file(
    stt: WhisperSTT,
    pcm: np.ndarray,
    *,
    speed: float,
    frame_ms: int,
    flush_delay_s: float,
    flush_at_s: list[float] | None = None,
) -> tuple[str, dict[str, float], list[str]]:
    """Push one file like a live call; returns the FINAL text(s), timings (perf_counter s) and event names.

    One flush `flush_delay_s` after the last voiced sample, or one at each time in `flush_at_s` (the VAD's
    ends of speech, as Parley's turn hooks flush in a call); the text is every FINAL joined, and
    "final"/"flush" mark the last flush and the FINAL it produced.
    """
    stream = stt.stream()
    step = SAMPLE_RATE * frame_ms // 1000
    marks: dict[str, float] = {}
    names: list[str] = []
    finals: list[str] = []
    speech_end = last_voiced_s(pcm)
    if not flush_at_s:
        flush_at_s = [(speech_end if speech_end > 0 else len(pcm) / SAMPLE_RATE) + flush_delay_s]
    last = asyncio.get_running_loop().create_future()

    async def consume() -> None:
        async for ev in stream:
            names.append(ev.type.value)
            if ev.type == lkstt.SpeechEventType.PREFLIGHT_TRANSCRIPT:
                marks.setdefault("preflight", time.perf_counter())
            if ev.type == lkstt.SpeechEventType.FINAL_TRANSCRIPT:
                text = ev.alternatives[0].text if ev.alternatives else ""
                whole = turn_text(ev)
                if whole is not None:  # the whole turn decoded again: it replaces the earlier FINALs
                    finals[:] = [whole]
                elif text.strip():
                    finals.append(text.strip())
                if "flush" in marks and not last.done():
                    marks["final"] = time.perf_counter()
                    last.set_result(None)

    consumer = asyncio.create_task(consume())
    pending = sorted(flush_at_s)
    silence = np.zeros(step, dtype=np.int16)
    t0 = time.perf_counter()
    marks["speech_end"] = t0 + speech_end / speed
    i = 0
    try:
        while not last.done():
            audio_t = i * step / SAMPLE_RATE
            if audio_t > max(flush_at_s) + 3.0:
                break
            chunk = pcm[i * step : (i + 1) * step]
            stream.push_frame(_frame(chunk if len(chunk) == step else silence))
            i += 1
            while pending and i * step / SAMPLE_RATE >= pending[0]:
                pending.pop(0)
                stream.flush()
                if not pending:
                    marks["flush"] = time.perf_counter()
            delay = t0 + i * step / SAMPLE_RATE / speed - time.perf_counter()
            await asyncio.sleep(max(0.0, delay))
        await asyncio.sleep(0)  # let the consumer take a FINAL that is already queued
    finally:
        await stream.aclose()
        consumer.cancel()
    return " ".join(finals), marks, names


async def vad_flush_times(pcm: np.ndarray) -> list[float]:
    """Where a call flushes the STT: the web profile's Silero VAD's ends of speech (benchmarks.turns)."""
    from benchmarks.turns import vad_segments
    from turn_detection import Profile, TurnOptions, params_for

    audio = pcm.astype(np.float32) / 32768.0
    return [seg.eos for seg in await vad_segments(audio, params_for(Profile.WEB, TurnOptions()).vad)]


def stt_options(args: argparse.Namespace, vocabulary: tuple[str, ...] = ()) -> WhisperSTTOptions:
    """The streaming recogniser the flags describe (`vocabulary`: a business's listed terms)."""
    return WhisperSTTOptions(
        model=ModelOptions(
            model=args.model or default_model(args.language),
            device=args.device,
            cpu_threads=args.cpu_threads,
            num_workers=args.workers,
        ),
        language=args.language,
        streaming=StreamingOptions(
            partial_interval_s=args.partial_interval,
            context_gap_s=args.context_gap,
            whole_turn=not args.new_words_only,
            style_prompt=args.prompt,
            vocabulary=vocabulary,
        ),
    )


async def run(args: argparse.Namespace) -> dict[str, object]:
    options = stt_options(args)
    stt = WhisperSTT(options)
    stt.prewarm()
    unheard: list[float] = []
    stt.unheard_listeners.append(unheard.append)
    runner = shared_runner(options.model)

    wavs = sorted(Path(args.data).glob("*.wav"))
    if not wavs:
        raise SystemExit(f"no .wav files in {args.data}")
    noise_wavs = sorted(Path(args.noise).glob("*.wav")) if args.noise else []
    tmp = tempfile.TemporaryDirectory(prefix="parley-stt-noise-")
    if not args.no_generated_noise:
        noise_wavs += make_noise_files(Path(tmp.name))
    unreadable_wavs = sorted(Path(args.unreadable).glob("*.wav")) if args.unreadable else []
    if args.whole_file_only:
        noise_wavs, unreadable_wavs = [], []

    whole_language = None if args.language == "auto" else args.language
    whole_decode_s: list[float] = []
    load_before = round(os.getloadavg()[0], 2)
    results: list[FileResult] = []
    whole_refs: list[str] = []
    whole_hyps: list[str] = []
    marks: dict[str, float]
    names: list[str]
    for path in wavs + noise_wavs + unreadable_wavs:
        unreadable = path in unreadable_wavs
        txt = path.with_suffix(".txt")
        ref = txt.read_text().strip() if txt.exists() and not unreadable else ""
        pcm = load_audio(path)
        flushes = await vad_flush_times(pcm) if args.fragments else None
        text, marks, names = "", {}, []  # --whole-file-only: nothing streamed
        unheard.clear()
        if not args.whole_file_only:
            text, marks, names = await stream_file(
                stt,
                pcm,
                speed=args.speed,
                frame_ms=FRAME_MS,
                flush_delay_s=args.flush_delay_ms / 1000,
                flush_at_s=flushes,
            )
        r = FileResult(
            file=path.name,
            ref=ref,
            hyp=text,
            speech=bool(ref),
            unreadable=unreadable,
            asked_to_repeat=bool(unheard),
            events=names,
        )
        r.interims = names.count("interim_transcript")
        if "final" in marks and ref:
            r.final_delay_ms = (marks["final"] - marks["speech_end"]) * 1000
            if "flush" in marks:
                r.final_after_flush_ms = max(0.0, marks["final"] - marks["flush"]) * 1000
            r.preflight_before_flush = marks.get("preflight", float("inf")) < marks.get("flush", 0.0)
        results.append(r)
        if ref:
            whole = runner.decode(
                pcm.astype(np.float32) / 32768.0,
                DecodeRequest(
                    language=whole_language,
                    beam_size=StreamingOptions.final_beam_size,
                    initial_prompt=args.prompt or None,
                ),
            )
            whole_decode_s.append(whole.decode_s)
            whole_refs.append(ref)
            whole_hyps.append(whole.text)
            if args.whole_file_only:
                r.hyp = whole.text
        if not args.quiet:
            delay = f"{r.final_delay_ms:7.0f} ms" if r.final_delay_ms is not None else "      - "
            print(f"{path.name:28s} final {delay}  {compare_form(r.hyp)[:60]!r}", file=sys.stderr)
    tmp.cleanup()

    settle = [st for st in runner.recent if st.priority != PRIORITY_PARTIAL]
    partial = [st for st in runner.recent if st.priority == PRIORITY_PARTIAL]
    speech = [r for r in results if r.speech]
    noise_results = [r for r in results if not r.speech and not r.unreadable]
    unreadable_results = [r for r in results if r.unreadable]
    delays = [r.final_delay_ms for r in speech if r.final_delay_ms is not None]
    after_flush = [r.final_after_flush_ms for r in speech if r.final_after_flush_ms is not None]
    runner.close()
    refs, hyps = [r.ref for r in speech], [r.hyp for r in speech]
    streamed = not args.whole_file_only
    return {
        "wer": round(wer(refs, hyps), 4) if streamed else None,
        "whole_file_wer": round(wer(whole_refs, whole_hyps), 4),
        "cer": round(cer(refs, hyps, args.language), 4) if streamed else None,
        "whole_file_cer": round(cer(whole_refs, whole_hyps, args.language), 4),
        "whole_file_decode_ms": percentiles([d * 1000 for d in whole_decode_s]),
        "final_delay_ms": percentiles(delays),
        "final_after_flush_ms": percentiles(after_flush),
        "preflight_before_flush_rate": round(sum(r.preflight_before_flush for r in speech) / len(speech), 3)
        if speech and streamed
        else None,
        "noise_transcripts": sum(1 for r in noise_results if compare_form(r.hyp)),
        "noise_files": len(noise_results),
        "unreadable_answered": sum(1 for r in unreadable_results if compare_form(r.hyp)),
        "unreadable_asked": sum(1 for r in unreadable_results if r.asked_to_repeat),
        "unreadable_files": len(unreadable_results),
        "missing_finals": sum(1 for r in speech if r.final_delay_ms is None),
        "settle_decode_ms": percentiles([(st.decode_s + st.queued_s) * 1000 for st in settle]),
        "partial_decode_ms": percentiles([(st.decode_s + st.queued_s) * 1000 for st in partial]),
        "load_avg_1m": [load_before, round(os.getloadavg()[0], 2)],
        "flush_delay_ms": args.flush_delay_ms,
        "flushes": "at each VAD end of speech (web profile)" if args.fragments else "once per file",
        "speed": args.speed,
        "context_gap_s": args.context_gap,
        "whole_turn": args.context_gap > 0 and not args.new_words_only,
        "model": runner.model_name,
        "language": args.language,
        "cpu_threads": args.cpu_threads,
        "files": [
            {
                "file": r.file,
                "ref": r.ref,
                "hyp": r.hyp,
                "final_delay_ms": None if r.final_delay_ms is None else round(r.final_delay_ms, 1),
                "final_after_flush_ms": None
                if r.final_after_flush_ms is None
                else round(r.final_after_flush_ms, 1),
                "interims": r.interims,
                **({"asked_to_repeat": r.asked_to_repeat} if r.unreadable else {}),
            }
            for r in results
        ],
    }


def _pair(p: object) -> str:
    assert isinstance(p, dict)
    return f"{p['p50']} / {p['p95']} ms"


def percent_text(value: object) -> str:
    """A rate as the tables print it ("-" when there is none)."""
    return "-" if value is None else f"{float(value) * 100:.1f} %"  # type: ignore[arg-type]


def print_table(report: dict[str, object]) -> None:
    fd = report["final_delay_ms"]
    ff = report["final_after_flush_ms"]
    assert isinstance(fd, dict) and isinstance(ff, dict)
    rows = [
        ("streaming WER", percent_text(report["wer"])),
        ("whole-file WER (same model)", percent_text(report["whole_file_wer"])),
        ("streaming CER", percent_text(report["cer"])),
        ("whole-file CER (same model)", percent_text(report["whole_file_cer"])),
        ("whole-file decode p50 / p95", _pair(report["whole_file_decode_ms"])),
        ("end of speech -> FINAL p50 / p95", f"{fd['p50']} / {fd['p95']} ms"),
        ("flush -> FINAL p50 / p95", f"{ff['p50']} / {ff['p95']} ms"),
        ("PREFLIGHT before flush", f"{report['preflight_before_flush_rate']}"),
        ("settle/final decode p50 / p95", _pair(report["settle_decode_ms"])),
        ("partial decode p50 / p95", _pair(report["partial_decode_ms"])),
        ("1-min load average (start, end)", f"{report['load_avg_1m']}"),
        ("noise transcripts", f"{report['noise_transcripts']} of {report['noise_files']} no-speech files"),
        (
            "unreadable: answered / asked again",
            f"{report['unreadable_answered']} / {report['unreadable_asked']} of {report['unreadable_files']}",
        ),
        ("flush after last voiced sample", f"{report['flush_delay_ms']} ms"),
    ]
    for name, value in rows:
        print(f"{name:36s} {value}")


# --- a business's own words (`--terms`) ------------------------------------------------------------------
TERM_CONFIGS = {"listen": ("none", "listed"), "speak": ("written", "respelled")}


@dataclass(frozen=True)
class TermFile:
    """One file of the vocabulary corpus (scripts/make_vocab_corpus.py), or one sentence of it spoken."""

    file: str
    domain: str
    kind: str  # term | plain | noise
    text: str
    terms: tuple[str, ...]
    voice: str = ""  # the synthesis engine ("hibari", "espeak", "piper"), or the CPU voice that spoke it


def contains(text: str, term: str) -> bool:
    """The term's words, in order, as whole words of the text (case, punctuation and apostrophes ignored)."""
    return f" {phrase_key(term)} " in f" {phrase_key(text)} "


def load_terms_corpus(
    folder: Path,
) -> tuple[dict[str, tuple[str, ...]], dict[str, Pronunciations], list[TermFile]]:
    """The businesses' vocabularies and pronunciation lists, and the files, from the corpus's labels.json."""
    path = folder / "labels.json"
    try:
        labels = json.loads(path.read_text())
        vocabularies = {name: check_vocabulary(terms) for name, terms in labels["vocabulary"].items()}
        said = {name: check_pronunciations(p) for name, p in labels.get("pronunciations", {}).items()}
        files = [
            TermFile(
                name, f["domain"], f["kind"], f["text"], tuple(f["terms"]), f.get("voice", "").split(":")[0]
            )
            for name, f in sorted(labels["files"].items())
        ]
    except FileNotFoundError:
        raise BenchmarkInputError(f"{path} not found (python scripts/make_vocab_corpus.py)") from None
    except (ValueError, KeyError, TypeError, PronunciationError) as e:
        raise BenchmarkInputError(f"{path}: not a vocabulary corpus ({e})") from None
    unknown = sorted({f.domain for f in files} - set(vocabularies))
    if unknown or not files:
        what = f"files of business {unknown[0]!r}, which has no vocabulary" if unknown else "no files"
        raise BenchmarkInputError(f"{path}: {what}")
    return vocabularies, said, files


def score_terms(
    files: list[TermFile], hyps: list[str], vocabularies: dict[str, tuple[str, ...]], *, by_voice: bool = True
) -> dict[str, Any]:
    """Of the terms said, the share written as listed; listed terms written where nobody said them; the WER
    of every speech file (what the list costs the other words); noise clips with any text."""
    said = heard = invented = 0
    for f, hyp in zip(files, hyps, strict=True):
        said += len(f.terms)
        heard += sum(contains(hyp, term) for term in f.terms)
        invented += sum(1 for t in vocabularies[f.domain] if contains(hyp, t) and not contains(f.text, t))
    speech = [(f.text, h) for f, h in zip(files, hyps, strict=True) if f.kind != "noise"]
    per_voice = {}
    for v in sorted({f.voice for f in files if f.voice}) if by_voice else []:
        pairs = [(f, h) for f, h in zip(files, hyps, strict=True) if f.voice == v]
        r = score_terms([f for f, _ in pairs], [h for _, h in pairs], vocabularies, by_voice=False)
        per_voice[v] = {k: r[k] for k in ("term_recall", "terms_said", "invented_terms", "wer")}
    return {
        "term_recall": round(heard / said, 4) if said else None,
        "terms_said": said,
        "terms_heard": heard,
        "invented_terms": invented,
        "wer": round(wer([r for r, _ in speech], [h for _, h in speech]), 4),
        "noise_transcripts": sum(1 for f, h in zip(files, hyps, strict=True) if f.kind == "noise" and h),
        "noise_files": sum(1 for f in files if f.kind == "noise"),
        **({"by_voice": per_voice} if by_voice else {}),
    }


async def listen_terms(
    args: argparse.Namespace, vocabularies: dict[str, tuple[str, ...]], files: list[TermFile]
) -> tuple[list[TermFile], dict[str, list[str]], dict[str, list[float]]]:
    """Each file streamed like a call, with the style prompt alone (`none`) and with the business's vocabulary
    (`listed`), the two interleaved file by file; the settle/final decode times."""
    stts = {
        (c, d): WhisperSTT(stt_options(args, terms if c == "listed" else ()))
        for c in TERM_CONFIGS["listen"]
        for d, terms in vocabularies.items()
    }
    runner = shared_runner(stt_options(args).model)
    runner.load()
    hyps: dict[str, list[str]] = {c: [] for c in TERM_CONFIGS["listen"]}
    ms: dict[str, list[float]] = {c: [] for c in TERM_CONFIGS["listen"]}
    for f in files:
        pcm = load_audio(Path(args.data) / f.file)
        for config in TERM_CONFIGS["listen"]:
            runner.recent.clear()
            text, _, _ = await stream_file(
                stts[config, f.domain],
                pcm,
                speed=args.speed,
                frame_ms=FRAME_MS,
                flush_delay_s=args.flush_delay_ms / 1000,
            )
            hyps[config].append(text)
            ms[config] += [
                (st.decode_s + st.queued_s) * 1000 for st in runner.recent if st.priority != PRIORITY_PARTIAL
            ]
            if not args.quiet:
                print(f"{f.file:32s} {config:9s} {text[:70]!r}", file=sys.stderr)
    runner.close()
    return files, hyps, ms


async def speak_terms(
    args: argparse.Namespace,
    vocabularies: dict[str, tuple[str, ...]],
    said: dict[str, Pronunciations],
    files: list[TermFile],
) -> tuple[list[TermFile], dict[str, list[str]], dict[str, list[float]]]:
    """Each sentence with a term spoken by the CPU voices `--speak`, as written and with the business's
    pronunciation list (interleaved, neither always first), and heard whole by `--model` (default the
    multilingual base, not the model callers are transcribed with) primed with the business's vocabulary,
    as a caller who knows the names. A proxy: a respelling of a name's native reading that Whisper has
    rarely heard can count as missed; a name said unrecognisably is missed without doubt."""
    from benchmarks.heard import LISTEN_RATE, Listener
    from caches.builder import synthesize_pcm
    from caches.frames import resample_pcm
    from plugins.cpu_voice import CpuVoiceTTS
    from plugins.cpu_voice.voice import open_voice

    voices = [v.strip() for v in args.speak.split(",") if v.strip()]
    listener = Listener(args.model or "base", args.cpu_threads)
    sentences = sorted({(f.domain, f.text) for f in files if f.kind == "term"})
    spoken = [
        TermFile(f"{v}/{i}", d, "term", text, tuple(t for t in vocabularies[d] if contains(text, t)), voice=v)
        for i, (d, text) in enumerate(sentences)
        for v in voices
    ]
    engines = {v: open_voice(v) for v in voices}  # one model per voice, shared by its TTSs
    configs = TERM_CONFIGS["speak"]
    hyps: dict[str, list[str]] = {c: [] for c in configs}
    ms: dict[str, list[float]] = {c: [] for c in configs}
    for i, f in enumerate(spoken):
        for config in configs if i % 2 == 0 else configs[::-1]:
            listed = said.get(f.domain) if config == "respelled" else None
            tts = CpuVoiceTTS(voice=f.voice, engine=engines[f.voice], pronunciations=listed)
            began = time.perf_counter()
            pcm = await synthesize_pcm(tts, f.text)
            ms[config].append((time.perf_counter() - began) * 1000)
            audio = resample_pcm(pcm, tts.sample_rate, LISTEN_RATE).astype(np.float32) / 32768.0
            hyps[config].append(listener.hear(audio, "en", vocabulary_prompt(vocabularies[f.domain])))
    return spoken, hyps, ms


async def run_terms(args: argparse.Namespace) -> dict[str, Any]:
    vocabularies, said, files = load_terms_corpus(Path(args.data))
    if args.speak and not said:  # a corpus written before the labels carried them
        raise BenchmarkInputError(
            f"{args.data}: no pronunciations in labels.json (scripts/make_vocab_corpus.py)"
        )
    if args.speak:
        files, hyps, ms = await speak_terms(args, vocabularies, said, files)
    else:
        files, hyps, ms = await listen_terms(args, vocabularies, files)
    return {
        "configs": {
            c: {
                **score_terms(files, h, vocabularies),
                "decode_ms" if not args.speak else "synth_ms": percentiles(ms[c]),
            }
            for c, h in hyps.items()
        },
        "files_scored": len(files),
        "terms_listed": {d: len(t) for d, t in vocabularies.items()},
        "model": args.model or ("base" if args.speak else default_model(args.language)),
        "voices": args.speak or None,
        "files": [
            {"file": f.file, "ref": f.text, "terms": list(f.terms), **{c: h[i] for c, h in hyps.items()}}
            for i, f in enumerate(files)
        ],
    }


def print_terms_table(report: dict[str, Any]) -> None:
    configs = report["configs"]
    print(f"{'':28s}" + "".join(f"{c:>16s}" for c in configs))
    rows = [
        ("term recall", lambda r: f"{r['terms_heard']}/{r['terms_said']} {percent_text(r['term_recall'])}"),
        ("invented terms", lambda r: str(r["invented_terms"])),
        ("WER, all speech", lambda r: percent_text(r["wer"])),
        ("noise clips with text", lambda r: f"{r['noise_transcripts']} of {r['noise_files']}"),
    ]
    for name, cell in rows:
        print(f"{name:28s}" + "".join(f"{cell(r):>16s}" for r in configs.values()))
    for config, r in configs.items():
        times = r.get("decode_ms") or r["synth_ms"]
        print(f"{config}: {'decode' if 'decode_ms' in r else 'synthesis'} p50 / p95 {_pair(times)}")
        for voice, v in r["by_voice"].items():
            print(
                f"  {voice:13s} recall {percent_text(v['term_recall'])} of {v['terms_said']}, "
                f"invented {v['invented_terms']}, WER {percent_text(v['wer'])}"
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.stt", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="folder of 16 kHz mono *.wav + same-name *.txt")
    p.add_argument("--json", help="write the report here")
    p.add_argument("--noise", help="extra folder of no-speech *.wav files")
    p.add_argument(
        "--unreadable", help="folder of speech the model cannot read (*.wav; e.g. Korean to tiny.en)"
    )
    p.add_argument("--no-generated-noise", action="store_true", help="skip the generated silence/noise files")
    p.add_argument("--model", help="default: tiny.en for --language en, the multilingual base otherwise")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    p.add_argument("--cpu-threads", type=int, default=0, help="threads per decode (0 = cores, at most 4)")
    p.add_argument("--workers", type=int, default=2, help="decodes that may run at once")
    p.add_argument("--language", default="en", choices=["en", "ko", "auto"])
    p.add_argument(
        "--partial-interval", type=float, default=0.5, help="seconds of new audio between partials"
    )
    p.add_argument(
        "--context-gap",
        type=float,
        default=WHOLE_TURN_GAP_S,
        help="an utterance this soon after a FINAL is decoded behind the turn's audio "
        "(default: the worker's, worker/pipeline.py WHOLE_TURN_GAP_S; 0 = every part alone)",
    )
    p.add_argument(
        "--new-words-only",
        action="store_true",
        help="with a context gap, a FINAL keeps only the words after the earlier one (not the whole turn)",
    )
    p.add_argument("--speed", type=float, default=1.0, help="playback speed (1 = real time)")
    p.add_argument("--flush-delay-ms", type=float, default=550.0, help="last voiced sample -> flush")
    p.add_argument(
        "--fragments",
        action="store_true",
        help="flush at each VAD end of speech, as calls do (a hesitation splits a turn into fragments)",
    )
    p.add_argument(
        "--whole-file-only",
        action="store_true",
        help="skip streaming: decode each speech file once, whole (a quick comparison of models)",
    )
    p.add_argument(
        "--terms",
        action="store_true",
        help="--data is a vocabulary corpus (scripts/make_vocab_corpus.py): term recall without and with the "
        "business's vocabulary",
    )
    p.add_argument(
        "--speak",
        default="",
        help="with --terms: the corpus's sentences said by these CPU voices (e.g. heart,espeak-en) as "
        "written and with the business's pronunciations, heard by --model (default base)",
    )
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    args.prompt = ENGLISH_STYLE_PROMPT if args.language == "en" else ""  # the worker's style prompt
    if not Path(args.data).is_dir():
        print(f"error: --data {args.data!r} is not a folder", file=sys.stderr)
        return 2
    try:
        report = asyncio.run(run_terms(args) if args.terms or args.speak else run(args))
    except (WhisperModelError, WhisperConfigError, BenchmarkInputError, CpuVoiceError) as e:
        return fail(e, 2)
    return emit(report, print_terms_table if args.terms or args.speak else print_table, args.json)


if __name__ == "__main__":
    sys.exit(main())
