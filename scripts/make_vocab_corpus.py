#!/usr/bin/env python3
"""Render the vocabulary corpus: callers saying a business's own words (names, brands, drugs, streets).

Ten businesses (scripts/data/vocab_corpus.yaml), each with the vocabulary its agent file would list, sentences
that use those terms, sentences that use none, and a few clips of line noise with nobody speaking. The
businesses are split once, half each way: dev (for choosing how the vocabulary is given to Whisper) and test
(for quoting), so no test term or sentence was heard while choosing. Each sentence is rendered `--renders`
times by voices drawn from the turn corpus's eight (hibari, espeak-ng) and Piper's joe, at drawn speeds,
levels and noise, half of them through a phone line (8 kHz, 300-3400 Hz, G.711 mu-law).

    python scripts/make_vocab_corpus.py     # -> out/corpus-vocab/{dev,test}/*.wav + labels.json
    python -m benchmarks.stt --terms --data out/corpus-vocab/dev [--speak heart,espeak-en]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_turn_corpus import HELD_OUT_VOICE, PHONE_RATE, RATE, VOICES, Synth, noise, telephone

CORPUS_TEXT = Path(__file__).resolve().parent / "data" / "vocab_corpus.yaml"

NOISE_CLIPS = 4
"""Clips per business with line noise and no voice: a term written there was invented."""


@dataclass(frozen=True)
class Domain:
    """One business of the corpus text: its listed vocabulary, sentences with and without a term, and how
    each term is said (the respellings `benchmarks.stt --terms --speak` reads with)."""

    name: str
    vocabulary: tuple[str, ...]
    with_terms: tuple[str, ...]
    without_terms: tuple[str, ...]
    pronunciations: dict[str, str]


def load_domains(path: Path = CORPUS_TEXT) -> list[Domain]:
    data = yaml.safe_load(path.read_text())
    return [
        Domain(
            name=name,
            vocabulary=tuple(d["vocabulary"]),
            with_terms=tuple(d["with_terms"]),
            without_terms=tuple(d["without_terms"]),
            pronunciations=dict(d["pronunciations"]),
        )
        for name, d in data.items()
    ]


def split_domains(seed: int) -> dict[str, list[Domain]]:
    order = sorted(load_domains(), key=lambda d: d.name)
    random.Random(seed).shuffle(order)
    half = len(order) // 2
    return {"dev": order[:half], "test": order[half:]}


def render(synth: Synth, text: str, key: str, seed: int) -> tuple[np.ndarray, int, dict]:
    """One caller saying `text` ("" = line noise only), as heard by the agent: web or phone."""
    rng = random.Random(f"{seed}:{key}")
    voice = rng.choice([*VOICES, HELD_OUT_VOICE])
    pieces = [np.zeros(int(rng.uniform(0.2, 0.6) * RATE), np.float32)]
    label: dict = {}
    if text:
        speech = synth(voice, text, rng.uniform(0.9, 1.15), rng.randrange(1000))
        pieces.append(speech / (float(np.sqrt(np.mean(speech**2))) + 1e-12))
        label["voice"] = f"{voice.engine}:{voice.name}{voice.variant}"
    else:
        pieces.append(np.zeros(int(rng.uniform(2.0, 4.0) * RATE), np.float32))
    pieces.append(np.zeros(int(0.8 * RATE), np.float32))
    audio = np.concatenate(pieces)
    level_db = rng.uniform(-30, -16)
    snr_db = rng.uniform(15, 35)
    kind = rng.choice(("white", "pink", "brown", "babble", "hum"))
    audio = audio * 10 ** (level_db / 20) + noise(
        kind, len(audio), np.random.default_rng(rng.randrange(2**32))
    ) * (10 ** ((level_db - snr_db) / 20))
    phone = rng.random() < 0.5
    label.update(channel="phone" if phone else "web", noise=kind, snr_db=round(snr_db, 1))
    audio = np.clip(audio, -1, 1).astype(np.float32)
    return (telephone(audio), PHONE_RATE, label) if phone else (audio, RATE, label)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("out/corpus-vocab"))
    ap.add_argument("--renders", type=int, default=2, help="renderings of each sentence")
    ap.add_argument("--seed", type=int, default=11, help="which businesses go to dev and which to test")
    ap.add_argument("--only", choices=("dev", "test"), help="render one split")
    args = ap.parse_args(argv)
    synth = Synth()
    for split, domains in split_domains(args.seed).items():
        if args.only and split != args.only:
            continue
        folder = args.out / split
        folder.mkdir(parents=True, exist_ok=True)
        labels: dict[str, dict] = {}
        vocabularies = {d.name: list(d.vocabulary) for d in domains}
        pronunciations = {d.name: d.pronunciations for d in domains}
        for d in domains:
            lines = [("term", s) for s in d.with_terms] + [("plain", s) for s in d.without_terms]
            jobs = [(kind, text, i) for kind, text in lines for i in range(args.renders)]
            jobs += [("noise", "", i) for i in range(NOISE_CLIPS)]
            for n, (kind, text, i) in enumerate(jobs):
                name = f"{d.name}_{kind}_{n:03d}.wav"
                audio, rate, label = render(synth, text, f"{d.name}:{kind}:{text}:{i}", args.seed)
                sf.write(str(folder / name), audio, rate, subtype="ULAW" if rate == PHONE_RATE else "PCM_16")
                terms = [t for t in d.vocabulary if t in text]
                labels[name] = {"domain": d.name, "kind": kind, "text": text, "terms": terms, **label}
        (folder / "labels.json").write_text(
            json.dumps(
                {"vocabulary": vocabularies, "pronunciations": pronunciations, "files": labels}, indent=1
            )
        )
        print(f"{split}: {len(labels)} files, businesses {', '.join(vocabularies)} -> {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
