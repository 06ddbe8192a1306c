"""Does v1-mini miss the corpus's hesitations because each part of a pause file is synthesised alone?

    python scripts/probe_eot_prosody.py [--split dev]

The turn corpus (scripts/make_turn_corpus.py) synthesises the words before a pause on their own, so they may
end with a finished-sounding fall. This probe scores v1-mini (LiveKit's audio end-of-turn model, as
turn_detection runs it: the 1.2 s ending 200 ms after the last speech) on the words before each pause
synthesised three ways, against finished turns, on clean audio:
  - alone (as the corpus does),
  - inside the whole sentence with the pause made by the engine (hibari: a comma or an ellipsis there;
    espeak-ng: an SSML <break>), cut at that pause, so the prosody is the sentence's own.
It prints each way's AUC (finished turn vs hesitation; 0.5 = no signal). Clean audio, one voice per engine.
"""

from __future__ import annotations

import argparse
import io
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import make_turn_corpus as corpus

from turn_detection.audio_eot import load_model, predict_window

RATE = corpus.RATE


def espeak(text: str, ssml: bool = False, voice: str = "en-us+m3") -> np.ndarray:
    cmd = ["espeak-ng", "-v", voice, "-s", "165", "-p", "50", "--stdout", *(["-m"] if ssml else []), text]
    audio, sr = sf.read(
        io.BytesIO(subprocess.run(cmd, check=True, capture_output=True).stdout), dtype="float32"
    )
    return soxr.resample(audio, sr, RATE).astype(np.float32)


def quiet_run_near(audio: np.ndarray, expect_s: float, floor_db: float) -> int | None:
    """Start (samples) of the longest quiet stretch (10 ms frames) that begins near `expect_s`."""
    frame = RATE // 100
    n = len(audio) // frame
    rms = np.sqrt(np.mean(audio[: n * frame].reshape(n, frame) ** 2, axis=1) + 1e-12)
    quiet = 20 * np.log10(rms / rms.max()) < floor_db
    best: tuple[int, int] | None = None
    i = 0
    while i < n:
        if not quiet[i]:
            i += 1
            continue
        j = i
        while j < n and quiet[j]:
            j += 1
        near = abs(i / 100 - expect_s) < 0.4 * expect_s + 0.15
        if near and (best is None or j - i > best[1] - best[0]):
            best = (i, j)
        i = j
    return None if best is None else best[0] * frame


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    args = ap.parse_args(argv)
    from hibari import Hibari

    model = load_model()
    if model is None:
        print("error: the v1-mini model is not usable here", file=sys.stderr)
        return 2
    hib = Hibari("heart")

    def hibari(text: str) -> np.ndarray:
        return soxr.resample(hib(text, speed=1.0, seed=1), 24000, RATE).astype(np.float32)

    def score(speech: np.ndarray) -> float:
        pcm = np.concatenate(
            [np.zeros(RATE, np.float32), corpus.trim(speech), np.zeros(RATE // 5, np.float32)]
        )
        pcm = pcm / (np.abs(pcm).max() + 1e-9) * 0.3
        return float(predict_window(model, (pcm * 32767).astype(np.int16)) or 0.0)

    splits = corpus.split_templates(16)
    rng = random.Random(3)
    done: dict[str, list[float]] = {"hibari": [], "espeak": []}
    pause: dict[str, list[float]] = {}
    for t in corpus.all_templates():
        if splits[t.id] != args.split:
            continue
        parts = corpus.fill(t, rng)
        if t.case in ("statement", "question", "short_answer", "number_end"):
            done["hibari"].append(score(hibari(parts[0])))
            done["espeak"].append(score(espeak(parts[0])))
            continue
        if t.kind != "pause" or len(parts) < 2:
            continue
        first, rest = parts[0], " ".join(parts[1:])
        pause.setdefault("hibari alone", []).append(score(hibari(first)))
        pause.setdefault("espeak alone", []).append(score(espeak(first)))
        ssml = espeak(f'<speak>{first} <break time="1200ms"/> {rest}</speak>', ssml=True)
        cut = quiet_run_near(ssml, len(corpus.trim(espeak(first))) / RATE, -40)
        if cut:
            pause.setdefault("espeak in sentence (SSML break)", []).append(score(ssml[:cut]))
        for name, mark in (("comma", ","), ("ellipsis", "…")):
            joined = first if first.endswith((",", ".", "?")) else first + mark
            whole = hibari(f"{joined} {rest}")
            cut = quiet_run_near(whole, len(corpus.trim(hibari(first))) / RATE, -35)
            if cut:
                pause.setdefault(f"hibari in sentence ({name})", []).append(score(whole[:cut]))
    for way, scores in pause.items():
        finished = done[way.split()[0]]
        auc = np.mean([(f > p) + 0.5 * (f == p) for f in finished for p in scores])
        print(
            f"{args.split} {way:34s} hesitations {len(scores):3d}  median {np.median(scores):.2f}  "
            f"finished median {np.median(finished):.2f}  AUC {auc:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
