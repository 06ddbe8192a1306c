"""Make the Korean STT test set: what a caller says to a voice agent (bookings, deliveries, bills, accounts).

    python scripts/make_korean_corpus.py [--out out/corpus-ko] [--seed 33]
    python -m benchmarks.stt --language ko --data out/corpus-ko/test

Why: the project's own speech is English; a Korean agent needs Korean speech to measure its Whisper on,
rendered here from sentences written for this set (scripts/data/korean_corpus.yaml), so a clone makes the
same files with no data beside it.

  - Voice: espeak-ng's `ko` (Debian; no Korean voice we checked installs without a model hub), with a
    male or female variant, rate and pitch drawn per sentence from the seed. It is robotic: error rates
    measured on it are for this voice, well above what recorded callers would give.
  - Numbers are written as they are said (Hangul words), so the audio and the reference agree.
  - Split once by sentence (seeded): every sentence is in `dev` or in `test`, never both.
  - Output: out/corpus-ko/{dev,test}/k{NN}.wav (16 kHz mono PCM_16, 0.2 s of silence before, 0.4 s after)
    with same-name .txt transcripts, the layout benchmarks.stt reads.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
from pathlib import Path

import numpy as np
import soundfile as sf
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_turn_corpus import RATE, espeak

LEAD_S, TAIL_S = 0.2, 0.4
TEST_SHARE = 0.5

SENTENCES: tuple[str, ...] = tuple(
    yaml.safe_load((Path(__file__).resolve().parent / "data" / "korean_corpus.yaml").read_text())["sentences"]
)
VARIANTS = ("", "+m1", "+m3", "+f2", "+f4")


def split(seed: int) -> dict[str, list[int]]:
    """Sentence indices per split, fixed by the seed."""
    order = list(range(len(SENTENCES)))
    random.Random(seed).shuffle(order)
    cut = round(len(order) * TEST_SHARE)
    return {"test": sorted(order[:cut]), "dev": sorted(order[cut:])}


def render(out: Path, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    counts = {}
    for name, indices in split(seed).items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in indices:
            text = SENTENCES[i]
            audio = espeak(
                f"ko{rng.choice(VARIANTS)}", text, wpm=rng.randint(135, 165), pitch=rng.randint(35, 65)
            )
            peak = float(np.max(np.abs(audio))) or 1.0
            audio = audio / peak * 10 ** (-3 / 20)
            pcm = np.concatenate(
                [np.zeros(int(LEAD_S * RATE), np.float32), audio, np.zeros(int(TAIL_S * RATE), np.float32)]
            )
            sf.write(folder / f"k{i + 1:02d}.wav", pcm, RATE, subtype="PCM_16")
            (folder / f"k{i + 1:02d}.txt").write_text(text + "\n", encoding="utf-8")
        counts[name] = len(indices)
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="out/corpus-ko")
    p.add_argument("--seed", type=int, default=33)
    args = p.parse_args(argv)
    if shutil.which("espeak-ng") is None:
        print("error: espeak-ng is not installed (make setup-system installs it)", file=sys.stderr)
        return 2
    out = Path(args.out)
    for name in ("dev", "test"):
        shutil.rmtree(out / name, ignore_errors=True)
    counts = render(out, args.seed)
    print(f"{out}: " + ", ".join(f"{k} {v} files" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
