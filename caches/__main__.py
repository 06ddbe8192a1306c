"""`python -m caches build`: synthesise the phrase set for one voice and language into a cache directory.

    python -m caches build [--voice V] [--language L] [--dir DIR] [--backend cpu|orpheus] [--phrases FILE]
                           [--pronunciations 'Nguyen=win; ...']
    python -m caches show [--dir DIR]

Only missing or stale phrases are synthesised; a second build of the same set does no synthesis.
An agent file's own lines are built by `python -m worker.agent_file phrases FILE`.
Errors end with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import sys
from collections import Counter
from pathlib import Path

from livekit.agents import tts
from tqdm import tqdm

from plugins.pronunciation import PronunciationError, Pronunciations, parse_pronunciations

from .builder import BuildOptions, BuildReport, build_cache, tts_fingerprint
from .phrases import Phrase, PhraseSetError, load_phrases
from .store import CacheStore, CacheStoreError

DEFAULT_DIR = Path("out/phrase-cache")
DEFAULT_VOICES = {"cpu": "heart", "orpheus": "tara"}


class CliError(Exception):
    """A problem the operator can fix; printed as one line."""


def make_tts(
    backend: str,
    voice: str,
    language: str,
    factory: str | None,
    pronunciations: Pronunciations = Pronunciations(),
) -> tuple[tts.TTS, str]:
    """(TTS, fingerprint) for a backend name or a `module:callable` factory taking `voice=`. The built-in
    voices read with `pronunciations`; a factory's TTS reads as it was made."""
    if factory:
        mod_name, _, attr = factory.partition(":")
        try:
            fn = getattr(importlib.import_module(mod_name), attr)
            engine = fn(voice=voice)
        except Exception as e:
            raise CliError(f"cannot create TTS from {factory!r}: {e}") from None
        if not isinstance(engine, tts.TTS):
            raise CliError(f"{factory!r} did not return a livekit tts.TTS")
        return engine, tts_fingerprint(engine, f"voice={voice}")
    if backend == "cpu":
        from hibari.voices import VOICES

        from plugins.cpu_voice import CpuVoiceTTS
        from plugins.cpu_voice.espeak import is_espeak_voice
        from plugins.cpu_voice.voice import check_voice_name

        try:
            check_voice_name(voice)
        except ValueError as e:
            raise CliError(str(e)) from None
        if is_espeak_voice(voice):
            engine = CpuVoiceTTS(voice=voice, pronunciations=pronunciations)
            return engine, tts_fingerprint(engine, f"voice={voice}")
        if language != "en":
            raise CliError(f"hibari speaks English only; build {language!r} with --voice espeak-{language}")
        # the model loads on first synthesis, so a warm rebuild skips it
        engine = CpuVoiceTTS(voice=voice, pronunciations=pronunciations)
        from importlib.metadata import version

        extra = f"hibari=={version('hibari-tts')};{VOICES[voice]['sha256'][:16]}"
        return engine, tts_fingerprint(engine, extra)
    if backend == "orpheus":
        try:
            mod = importlib.import_module("plugins.orpheus.tts")
            cls = mod.OrpheusTTS
        except (ImportError, AttributeError):
            raise CliError(
                "the Orpheus TTS plugin is not available here; use --backend cpu or --tts module:factory"
            ) from None
        try:
            opts = mod.OrpheusOptions(address=mod.DEFAULT_ADDRESS, voice=voice, pronunciations=pronunciations)
            engine = cls(opts)
        except Exception as e:
            raise CliError(f"cannot start the Orpheus TTS: {e}") from None
        return engine, tts_fingerprint(engine, f"voice={voice}")
    raise CliError(f"unknown backend {backend!r}")


async def build_phrases(
    phrases: list[Phrase],
    voice: str,
    language: str,
    dir_: Path,
    backend: str,
    tts_spec: str | None,
    pronunciations: Pronunciations = Pronunciations(),
) -> BuildReport:
    """Synthesise `phrases` into `dir_`; the worker's agent-file command calls this with an agent's lines."""
    engine, fingerprint = make_tts(backend, voice, language, tts_spec, pronunciations)
    said = Pronunciations() if tts_spec else pronunciations  # a factory's TTS reads as written
    opts = BuildOptions(voice=voice, language=language, fingerprint=fingerprint, pronunciations=said)
    bar = tqdm(total=len(phrases), desc=f"phrases {voice}/{language}", unit="phrase", file=sys.stderr)
    counts: Counter[str] = Counter()

    def progress(_: Phrase, what: str) -> None:
        counts[what] += 1
        bar.set_postfix(counts, refresh=False)
        bar.update(1)

    try:
        return await build_cache(CacheStore(dir_), engine, phrases, opts, on_progress=progress)
    finally:
        bar.close()
        await engine.aclose()


async def run_build(args: argparse.Namespace) -> BuildReport:
    voice = args.voice or (
        f"espeak-{args.language}"  # hibari speaks English only
        if args.backend == "cpu" and args.language != "en"
        else DEFAULT_VOICES[args.backend]
    )
    phrases = load_phrases(args.phrases).for_voice(voice, args.language)
    listed = args.pronunciations
    try:
        said = parse_pronunciations(listed or "")
    except PronunciationError as e:
        raise CliError(f"--pronunciations: {e}") from None
    return await build_phrases(phrases, voice, args.language, args.dir, args.backend, args.tts, said)


def show(dir_: Path) -> None:
    entries = CacheStore(dir_).read_manifest(strict=True)
    groups = Counter(
        (e.key.voice, e.key.language, e.key.fingerprint, e.key.sample_rate) for e in entries.values()
    )
    for (voice, lang, fp, rate), n in sorted(groups.items()):
        print(f"{voice:10s} {lang:3s} {rate:6d} Hz  {n:3d} phrases  {fp}")
    if not groups:
        print(f"{dir_}: empty")


def print_report(report: BuildReport, dir_: Path, json_path: Path | None) -> int:
    """One summary line, failures on stderr, the optional JSON; the exit code."""
    print(
        f"synthesised {len(report.synthesised)}, reused {len(report.reused)}, "
        f"stale {len(report.stale)}, failed {len(report.failed)} -> {dir_}"
    )
    for text, reason in report.failed:
        print(f"failed: {text[:40]!r}: {reason}", file=sys.stderr)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(
            json.dumps(
                {
                    "synthesised": len(report.synthesised),
                    "reused": len(report.reused),
                    "stale": len(report.stale),
                    "failed": [{"text": t, "reason": r} for t, r in report.failed],
                },
                indent=1,
            )
        )
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caches", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="synthesise missing or stale phrases")
    b.add_argument("--voice", help="voice name (default: heart for cpu, tara for orpheus)")
    b.add_argument("--language", default="en", help="phrase-set language (en, ko)")
    b.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"cache directory (default {DEFAULT_DIR})")
    b.add_argument("--backend", choices=("cpu", "orpheus"), default="cpu")
    b.add_argument(
        "--tts", help="any livekit TTS as module:factory (called with voice=); overrides --backend"
    )
    b.add_argument("--phrases", type=Path, default=None, help="phrase file (default caches/phrases.yaml)")
    b.add_argument(
        "--pronunciations",
        default=None,
        help="how to say listed words, 'Nguyen=win; Okonkwo=oh-KONK-woh' (an agent's build takes its file's)",
    )
    b.add_argument("--json", type=Path, default=None, help="write the build report as JSON here")
    s = sub.add_parser("show", help="list what a cache directory holds")
    s.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    try:
        if args.cmd == "show":
            show(args.dir)
            return 0
        report = asyncio.run(run_build(args))
    except (CliError, PhraseSetError, CacheStoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted (finished phrases are kept)", file=sys.stderr)
        return 130
    return print_report(report, args.dir, args.json)


if __name__ == "__main__":
    sys.exit(main())
