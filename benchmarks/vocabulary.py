"""Vocabulary benchmark: does Whisper write a business's own words when the agent lists them?

Each file of a vocabulary corpus (scripts/make_vocab_corpus.py) is streamed through Parley's Whisper STT like
a live call (`benchmarks.stt.stream_file`: paced frames, partials, one flush after the last voiced sample),
once per configuration, the configurations interleaved file by file:
- `none`: the style prompt alone (what an agent without a vocabulary gets);
- `listed`: the style prompt and the business's vocabulary (`StreamingOptions.vocabulary`).

Reported per configuration:
- `term_recall`: of the terms said, the share whose listed spelling is in the FINAL transcript;
- `invented_terms`: listed terms written where nobody said them (in other sentences or over line noise);
- `wer`: every speech file's word error rate, to see what the prompt costs the other words;
- `noise_transcripts`: noise clips that produced any text; `decode_ms`: the settle/final decodes.

    python scripts/make_vocab_corpus.py
    python -m benchmarks.vocabulary --data out/corpus-vocab/test --json out/bench/vocab_test.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cli import emit, fail
from benchmarks.stt import BenchmarkInputError, load_audio, percent_text, percentiles, stream_file
from plugins.whisper.guard import phrase_key
from plugins.whisper.model import PRIORITY_PARTIAL, ModelOptions, WhisperModelError, shared_runner
from plugins.whisper.options import WhisperConfigError
from plugins.whisper.stt import StreamingOptions, WhisperSTT, WhisperSTTOptions
from plugins.whisper.vocabulary import check_vocabulary
from plugins.word_error import wer
from worker.settings import ENGLISH_STYLE_PROMPT

CONFIGS = ("none", "listed")


@dataclass(frozen=True)
class Sample:
    file: str
    domain: str
    kind: str  # term | plain | noise
    text: str
    terms: tuple[str, ...]
    channel: str
    voice: str = ""  # the synthesis engine ("hibari", "espeak", "piper"); "" for noise


def contains(text: str, term: str) -> bool:
    """The term's words, in order, as whole words of the text (case, punctuation and apostrophes ignored)."""
    return f" {phrase_key(term)} " in f" {phrase_key(text)} "


def load_corpus(folder: Path) -> tuple[dict[str, tuple[str, ...]], list[Sample]]:
    labels_path = folder / "labels.json"
    try:
        labels = json.loads(labels_path.read_text())
        vocabularies = {name: check_vocabulary(terms) for name, terms in labels["vocabulary"].items()}
        samples = [
            Sample(
                name,
                f["domain"],
                f["kind"],
                f["text"],
                tuple(f["terms"]),
                f.get("channel", "web"),
                f.get("voice", "").split(":")[0],
            )
            for name, f in sorted(labels["files"].items())
        ]
    except FileNotFoundError:
        raise BenchmarkInputError(f"{labels_path} not found (python scripts/make_vocab_corpus.py)") from None
    except (ValueError, KeyError, TypeError) as e:
        raise BenchmarkInputError(f"{labels_path}: not a vocabulary corpus ({e})") from None
    check_businesses(labels_path, [s.domain for s in samples], vocabularies, "files")
    return vocabularies, samples


def check_businesses(path: Path, used: list[str], described: Collection[str], items: str) -> None:
    """One line for a corpus with no items, or items of a business its labels do not describe."""
    unknown = sorted(set(used) - set(described))
    if unknown:
        raise BenchmarkInputError(f"{path}: {items} of business {unknown[0]!r} but no entry for it")
    if not used:
        raise BenchmarkInputError(f"{path}: no {items}")


def score(
    samples: list[Sample], hyps: list[str], vocabularies: dict[str, tuple[str, ...]], *, by_voice: bool = True
) -> dict[str, Any]:
    said = heard = invented = 0
    by_channel: dict[str, list[int]] = {}
    for s, hyp in zip(samples, hyps, strict=True):
        for term in s.terms:
            ok = contains(hyp, term)
            said, heard = said + 1, heard + ok
            counts = by_channel.setdefault(s.channel, [0, 0])
            counts[0], counts[1] = counts[0] + 1, counts[1] + ok
        invented += sum(1 for t in vocabularies[s.domain] if contains(hyp, t) and not contains(s.text, t))
    speech = [(s.text, h) for s, h in zip(samples, hyps, strict=True) if s.kind != "noise"]
    voices = sorted({s.voice for s in samples if s.voice}) if by_voice else []
    per_voice = {}
    for v in voices:  # the recogniser hears some voices far better than others: the list's effect on each
        pairs = [(s, h) for s, h in zip(samples, hyps, strict=True) if s.voice == v]
        r = score([s for s, _ in pairs], [h for _, h in pairs], vocabularies, by_voice=False)
        per_voice[v] = {k: r[k] for k in ("term_recall", "terms_said", "invented_terms", "wer")}
    return {
        "term_recall": round(heard / said, 4) if said else None,
        "terms_said": said,
        "terms_heard": heard,
        "term_recall_by_channel": {c: round(h / n, 4) for c, (n, h) in sorted(by_channel.items())},
        "invented_terms": invented,
        "wer": round(wer([r for r, _ in speech], [h for _, h in speech]), 4),
        "noise_transcripts": sum(1 for s, h in zip(samples, hyps, strict=True) if s.kind == "noise" and h),
        "noise_files": sum(1 for s in samples if s.kind == "noise"),
        **({"by_voice": per_voice} if by_voice else {}),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    vocabularies, samples = load_corpus(Path(args.data))
    if args.limit:
        samples = samples[: args.limit]
    model = ModelOptions(cpu_threads=args.cpu_threads)
    stts: dict[tuple[str, str], WhisperSTT] = {}
    for config in args.configs:
        for domain, terms in vocabularies.items():
            streaming = StreamingOptions(
                style_prompt=args.prompt,
                vocabulary=terms if config == "listed" else (),
                context_gap_s=3.0,
                whole_turn=True,
            )
            stts[config, domain] = WhisperSTT(WhisperSTTOptions(model=model, streaming=streaming))
    runner = shared_runner(model)
    runner.load()
    hyps: dict[str, list[str]] = {c: [] for c in args.configs}
    decode_ms: dict[str, list[float]] = {c: [] for c in args.configs}
    load_before = round(os.getloadavg()[0], 2)
    for s in samples:
        pcm = load_audio(Path(args.data) / s.file)
        for config in args.configs:
            runner.recent.clear()
            text, _, _ = await stream_file(
                stts[config, s.domain], pcm, speed=args.speed, frame_ms=20, flush_delay_s=0.6
            )
            hyps[config].append(text)
            decode_ms[config] += [
                (st.decode_s + st.queued_s) * 1000 for st in runner.recent if st.priority != PRIORITY_PARTIAL
            ]
            if not args.quiet:
                print(f"{s.file:32s} {config:7s} {text[:70]!r}", file=sys.stderr)
    runner.close()
    return {
        "configs": {
            c: {**score(samples, hyps[c], vocabularies), "decode_ms": percentiles(decode_ms[c])}
            for c in args.configs
        },
        "files_scored": len(samples),
        "terms_listed": {d: len(t) for d, t in vocabularies.items()},
        "style_prompt": args.prompt,
        "model": runner.model_name,
        "speed": args.speed,
        "load_avg_1m": [load_before, round(os.getloadavg()[0], 2)],
        "files": [
            {"file": s.file, "ref": s.text, "terms": list(s.terms), **{c: hyps[c][i] for c in args.configs}}
            for i, s in enumerate(samples)
        ],
    }


def print_table(report: dict[str, Any]) -> None:
    configs = report["configs"]
    print(f"{'':28s}" + "".join(f"{c:>16s}" for c in configs))
    rows = [
        ("term recall", lambda r: f"{r['terms_heard']}/{r['terms_said']} {percent_text(r['term_recall'])}"),
        ("invented terms", lambda r: str(r["invented_terms"])),
        ("WER, all speech", lambda r: percent_text(r["wer"])),
        ("noise clips with text", lambda r: f"{r['noise_transcripts']} of {r['noise_files']}"),
        ("final decode p50 / p95", lambda r: f"{r['decode_ms']['p50']} / {r['decode_ms']['p95']}"),
    ]
    for name, cell in rows:
        print(f"{name:28s}" + "".join(f"{cell(r):>16s}" for r in configs.values()))
    for config, r in configs.items():
        by = ", ".join(f"{c} {percent_text(v)}" for c, v in r["term_recall_by_channel"].items())
        print(f"term recall by channel, {config}: {by}")
        for voice, v in r["by_voice"].items():
            print(
                f"  {voice:7s} {config:7s} recall {percent_text(v['term_recall'])} of {v['terms_said']}, "
                f"invented {v['invented_terms']}, WER {percent_text(v['wer'])}"
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.vocabulary", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="a split of scripts/make_vocab_corpus.py (with labels.json)")
    p.add_argument("--json", help="write the report here")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    p.add_argument(
        "--prompt", default=ENGLISH_STYLE_PROMPT, help="the style prompt (the worker's English one)"
    )
    p.add_argument(
        "--speed", type=float, default=4.0, help="pacing (1 = real time; finals do not depend on it)"
    )
    p.add_argument("--cpu-threads", type=int, default=0, help="threads per decode (0 = auto)")
    p.add_argument("--limit", type=int, default=0, help="score only the first N files (a quick look)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in args.configs if c not in CONFIGS]
    if bad or not args.configs:
        return fail(
            ValueError(f"--configs: unknown {bad[0] if bad else '(none given)'!r}; of {', '.join(CONFIGS)}")
        )
    try:
        report = asyncio.run(run(args))
    except (BenchmarkInputError, WhisperConfigError, WhisperModelError, OSError) as e:
        return fail(e)
    return emit(report, print_table, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
