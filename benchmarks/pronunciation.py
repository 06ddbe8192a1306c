"""Pronunciation benchmark: does a listener who knows the business's words hear them in Parley's voice?

Every sentence of a pronunciation corpus (scripts/make_pronunciation_corpus.py) is spoken by Parley's CPU
voices through the same TTS the worker uses (`CpuVoiceTTS`), twice, the two interleaved sentence by sentence:
- `written`: the sentence as the LLM wrote it (what a voice without a pronunciation list says);
- `respelled`: with the business's pronunciation list (`plugins/pronunciation.py`).

The ear is Whisper (`--listener`, default the multilingual base, not the model Parley transcribes callers
with), primed with the business's vocabulary as a caller who knows the names would be. It is a proxy: it
writes a name as listed when the voice said it the way Whisper's training speech says it, so a respelling
of a name's native reading the listener has rarely heard can count as missed though a speaker of that
language would hear it right. What it does measure without doubt is a name said unrecognisably.

Reported per configuration and voice: `term_heard` (of the terms said, the share the listener wrote as
listed), `wer` (the whole sentence, to see what respellings cost the other words), the paired `gained` and
`lost` terms (heard with one configuration and not the other), and synthesis time per sentence.

    python scripts/make_pronunciation_corpus.py
    python -m benchmarks.pronunciation --data out/corpus-pron/test --json out/bench/pron_test.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.cli import emit, fail
from benchmarks.heard import LISTEN_RATE, Listener
from benchmarks.stt import BenchmarkInputError, percent_text, percentiles
from benchmarks.vocabulary import check_businesses, contains
from caches.builder import synthesize_pcm
from caches.frames import resample_pcm
from plugins.cpu_voice import CpuVoiceTTS
from plugins.cpu_voice.voice import CpuVoiceError, open_voice
from plugins.pronunciation import PronunciationError, Pronunciations, check_pronunciations
from plugins.whisper.vocabulary import check_vocabulary, vocabulary_prompt
from plugins.word_error import wer

CONFIGS = ("written", "respelled")
DEFAULT_VOICES = ("heart", "espeak-en", "espeak-en+f3")


@dataclass(frozen=True)
class Sentence:
    domain: str
    text: str
    terms: tuple[str, ...]


@dataclass(frozen=True)
class Business:
    vocabulary: tuple[str, ...]
    pronunciations: Pronunciations


def load_corpus(folder: Path) -> tuple[dict[str, Business], list[Sentence]]:
    path = folder / "labels.json"
    try:
        labels = json.loads(path.read_text())
        businesses = {
            name: Business(check_vocabulary(d["vocabulary"]), check_pronunciations(d["pronunciations"]))
            for name, d in labels["domains"].items()
        }
        sentences = [Sentence(s["domain"], s["text"], tuple(s["terms"])) for s in labels["sentences"]]
    except FileNotFoundError:
        raise BenchmarkInputError(f"{path} not found (python scripts/make_pronunciation_corpus.py)") from None
    except (ValueError, KeyError, TypeError, PronunciationError) as e:
        raise BenchmarkInputError(f"{path}: not a pronunciation corpus ({e})") from None
    check_businesses(path, [s.domain for s in sentences], businesses, "sentences")
    return businesses, sentences


def hear(listener: Listener, pcm: np.ndarray, rate: int, vocabulary: tuple[str, ...]) -> str:
    """The listener primed with the business's vocabulary, as a caller who knows the names would be."""
    audio = resample_pcm(pcm, rate, LISTEN_RATE).astype(np.float32) / 32768.0
    return listener.hear(audio, "en", vocabulary_prompt(vocabulary))


def score(rows: list[tuple[Sentence, str]]) -> dict[str, Any]:
    said = sum(len(s.terms) for s, _ in rows)
    heard = sum(contains(h, t) for s, h in rows for t in s.terms)
    return {
        "term_heard": round(heard / said, 4) if said else None,
        "terms_said": said,
        "terms_heard": heard,
        "wer": round(wer([s.text for s, _ in rows], [h for _, h in rows]), 4),
    }


def paired(rows_a: list[tuple[Sentence, str]], rows_b: list[tuple[Sentence, str]]) -> dict[str, list[str]]:
    """Terms heard with `b` but not `a` (gained) and the other way (lost)."""
    gained, lost = [], []
    for (s, a), (_, b) in zip(rows_a, rows_b, strict=True):
        for t in s.terms:
            if contains(b, t) and not contains(a, t):
                gained.append(t)
            elif contains(a, t) and not contains(b, t):
                lost.append(t)
    return {"gained": gained, "lost": lost}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    businesses, sentences = load_corpus(Path(args.data))
    if args.limit:
        sentences = sentences[: args.limit]
    listener = Listener(args.listener, args.cpu_threads)
    engines = {v: open_voice(v) for v in args.voices}  # one model per voice, shared by its TTSs
    voices = {
        (v, c, d): CpuVoiceTTS(
            voice=v, engine=engines[v], pronunciations=b.pronunciations if c == "respelled" else None
        )
        for v in args.voices
        for c in CONFIGS
        for d, b in businesses.items()
    }
    rows: dict[tuple[str, str], list[tuple[Sentence, str]]] = {
        (v, c): [] for v in args.voices for c in CONFIGS
    }
    synth_ms: dict[str, list[float]] = {c: [] for c in CONFIGS}
    for i, s in enumerate(sentences):
        vocabulary = businesses[s.domain].vocabulary
        for voice in args.voices:
            order = CONFIGS if i % 2 == 0 else CONFIGS[::-1]  # neither configuration always goes first
            for config in order:
                tts = voices[voice, config, s.domain]
                began = time.perf_counter()
                pcm = await synthesize_pcm(tts, s.text)
                synth_ms[config].append((time.perf_counter() - began) * 1000)
                rows[voice, config].append((s, hear(listener, pcm, tts.sample_rate, vocabulary)))
        if args.progress:
            print(f"\r{i + 1}/{len(sentences)}", end="", file=sys.stderr, flush=True)
    if args.progress:
        print(file=sys.stderr)
    out: dict[str, Any] = {"data": str(args.data), "listener": args.listener, "sentences": len(sentences)}
    for config in CONFIGS:
        merged = [r for v in args.voices for r in rows[v, config]]
        out[config] = {
            **score(merged),
            "by_voice": {v: score(rows[v, config]) for v in args.voices},
            "synth_ms": percentiles(synth_ms[config]),
        }
    out["paired"] = {
        v: {k: len(x) for k, x in paired(rows[v, "written"], rows[v, "respelled"]).items()}
        for v in args.voices
    }
    both = [paired(rows[v, "written"], rows[v, "respelled"]) for v in args.voices]
    out["gained_terms"] = sorted({t for p in both for t in p["gained"]})
    out["lost_terms"] = sorted({t for p in both for t in p["lost"]})
    if args.transcripts:
        out["transcripts"] = {f"{v}/{c}": [h for _, h in rows[v, c]] for v in args.voices for c in CONFIGS}
    return out


def print_table(r: dict[str, Any]) -> None:
    print(f"{r['sentences']} sentences, listener {r['listener']}")
    print(f"{'voice':12} {'config':10} {'terms heard':>14} {'WER':>7} {'gained':>7} {'lost':>5}")
    for voice in r["written"]["by_voice"]:
        for config in CONFIGS:
            v = r[config]["by_voice"][voice]
            pair = r["paired"][voice]
            extra = f"{pair['gained']:>7} {pair['lost']:>5}" if config == "respelled" else ""
            heard = f"{percent_text(v['term_heard'])} of {v['terms_said']}"
            print(f"{voice:12} {config:10} {heard:>14} {percent_text(v['wer']):>7} {extra}")
    for config in CONFIGS:
        c = r[config]
        print(
            f"all voices, {config}: {percent_text(c['term_heard'])} of {c['terms_said']} terms heard, "
            f"WER {percent_text(c['wer'])}, synthesis p50 {c['synth_ms']['p50']} ms"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.pronunciation", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--data", type=Path, default=Path("out/corpus-pron/dev"))
    ap.add_argument("--voices", nargs="+", default=list(DEFAULT_VOICES), help="CPU voices to speak with")
    ap.add_argument("--listener", default="base", help="Whisper model that listens (default: base)")
    ap.add_argument("--cpu-threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="first N sentences only")
    ap.add_argument("--transcripts", action="store_true", help="keep every transcript in the JSON")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        result = asyncio.run(run(args))
    except (BenchmarkInputError, CpuVoiceError) as e:
        return fail(e)
    return emit(result, print_table, args.json)


if __name__ == "__main__":
    sys.exit(main())
