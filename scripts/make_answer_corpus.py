#!/usr/bin/env python3
"""Render the answer corpus: what an outbound call hears when someone picks up, a person or a machine.

Each file starts at the answer and runs until well after the point where the agent should speak:
- a person: a pick-up line (short, or a receptionist's longer one), then waiting silence;
- a machine: a voicemail greeting, a gap, a beep (most of them: several pitches and lengths, some double),
  then the silence it records;
- a number not in service: the special information tone's three rising tones, then the carrier's recording.

The voices are the turn corpus's eight (hibari, espeak-ng) plus Piper's joe; levels, line noise and the
phone channel (8 kHz, 300-3400 Hz, G.711 mu-law) are drawn per file. Lines are split once, half each way
(dev for choosing the detector's settings, test for quoting), so no test sentence was heard while tuning.

    python scripts/make_answer_corpus.py            # -> out/corpus-answer/{dev,test}/ + labels.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_turn_corpus import HELD_OUT_VOICE, PHONE_RATE, RATE, VOICES, Synth, noise, telephone

PERSON_SHORT = [
    "Hello?",
    "Hello.",
    "Hi.",
    "Yeah, hello?",
    "Hello, who's this?",
    "Yes?",
    "Hi, this is Dana.",
    "Hello, Mark speaking.",
    "Speaking.",
    "Hey, what's up?",
    "Good morning.",
    "Hello, this is Priya.",
    "Uh, hello?",
    "Yep, hello.",
    "Hi there.",
    "This is Tom.",
    "Hello, Garcia residence.",
    "Hi, can I help you?",
    "Hello, yes?",
    "Who is this?",
    "Hi, it's Lena.",
    "Good evening.",
    "Hello, Kim here.",
    "Yeah?",
]
PERSON_LONG = [
    "Good afternoon, Lakeside Veterinary, this is Jen, how can I help you?",
    "Thanks for calling Northside Plumbing, Mike speaking.",
    "Hello, you've got Sarah, what can I do for you?",
    "Good morning, Bright Smile Dental, how may I help you today?",
    "Hi, this is Carlos at the front desk, who am I speaking with?",
    "Hello, Miller and Sons Hardware, this is Dave.",
]
MACHINE = [
    "Hi, you've reached Alex. I can't come to the phone right now, please leave a message after the tone.",
    "The person you are calling is not available. Please leave a message after the beep.",
    "Hey, it's Jordan, leave me a message.",
    "You have reached the voicemail of five five five, one two three, four five six seven. Please record "
    "your message after the tone.",
    "Thank you for calling Harbor Dental. Our office is currently closed. Please leave your name and number "
    "and we will call you back.",
    "Hi, this is Maria. Sorry I missed you. Leave your name and number and I'll get back to you soon.",
    "Leave a message.",
    "Hello, you've reached the Thompsons. We're not home right now. Leave a message.",
    "This is Sam. I'm away from my desk. Please leave a brief message.",
    "Your call has been forwarded to an automated voice messaging system. The person is not available.",
    "Hi, it's Chris. You know what to do.",
    "Welcome to the mailbox of Doctor Patel. Please leave your message after the tone.",
    "You've reached Green Valley Landscaping. We're out on a job. Leave a message and we'll call back.",
    "Hey, this is Nina, I can't talk right now. Text me or leave a message.",
    "The number you have dialed is not available. At the tone, please record your message.",
    "Hi, you've reached Ben and Claire. Please leave a message and have a great day.",
    "This is the voicemail for the billing department. Please leave your account number and a message.",
    "Hello. I'm not available to take your call. Please leave a message after the beep.",
    "Sorry we missed your call. Please leave a message.",
    "Hi, this is Omar's phone. Leave a message.",
]
INTERCEPT = [
    "The number you have dialed is not in service. Please check the number and dial again.",
    "We're sorry, your call cannot be completed as dialed.",
    "The number you have reached has been disconnected or is no longer in service.",
    "This number is not in service. If you feel you have reached this recording in error, please hang up.",
]
BEEP_HZ = (440.0, 800.0, 850.0, 950.0, 1000.0, 1400.0, 1800.0)


def split_lines(seed: int) -> dict[str, list[str]]:
    """Half of each kind's lines for dev, half for test, fixed by the seed."""
    rng = random.Random(seed)
    out: dict[str, list[str]] = {"dev": [], "test": []}
    for group in (
        PERSON_SHORT,
        PERSON_LONG,
        MACHINE,
        INTERCEPT,
    ):  # a new group last: the others keep their split
        lines = list(group)
        rng.shuffle(lines)
        half = len(lines) // 2
        out["dev"] += lines[:half]
        out["test"] += lines[half:]
    return out


def beep(rng: random.Random) -> tuple[np.ndarray, str]:
    """A voicemail beep: one tone (most), or two short ones; a soft attack and release."""
    hz = rng.choice(BEEP_HZ) * rng.uniform(0.97, 1.03)
    double = rng.random() < 0.15
    lengths = [rng.uniform(0.15, 0.25)] * 2 if double else [rng.uniform(0.2, 1.0)]
    pieces = []
    for i, seconds in enumerate(lengths):
        t = np.arange(int(seconds * RATE)) / RATE
        tone = np.sin(2 * np.pi * hz * t).astype(np.float32)
        ramp = min(len(tone) // 4, int(0.01 * RATE))
        tone[:ramp] *= np.linspace(0, 1, ramp)
        tone[-ramp:] *= np.linspace(1, 0, ramp)
        if i:
            pieces.append(np.zeros(int(0.1 * RATE), np.float32))
        pieces.append(tone)
    return np.concatenate(pieces), f"{'double' if double else 'single'} {hz:.0f} Hz"


def sit_tone(rng: random.Random) -> np.ndarray:
    """A special information tone (ITU-T E.180): three rising segments, each short (274 ms) or long (380 ms),
    before the carrier's recording."""
    pieces = []
    for choices in ((913.8, 985.2), (1370.6, 1428.5), (1776.7,)):
        t = np.arange(int(rng.choice((0.274, 0.380)) * RATE)) / RATE
        pieces.append(np.sin(2 * np.pi * rng.choice(choices) * t).astype(np.float32))
    return np.concatenate(pieces)


def render(synth: Synth, kind: str, text: str, index: int, seed: int) -> tuple[np.ndarray, dict]:
    rng = random.Random(f"{seed}:{kind}:{text}:{index}")
    voice = rng.choice([*VOICES, HELD_OUT_VOICE])
    speech = synth(voice, text, rng.uniform(0.9, 1.15), rng.randrange(1000))
    lead = rng.uniform(0.3, 1.2) if kind.startswith("person") else rng.uniform(0.1, 0.8)
    pieces = [np.zeros(int(lead * RATE), np.float32)]
    speech_rms = float(np.sqrt(np.mean(speech**2))) + 1e-12
    if kind == "intercept":
        pieces += [sit_tone(rng) * speech_rms * 1.4, np.zeros(int(rng.uniform(0.05, 0.3) * RATE), np.float32)]
    start = sum(len(p) for p in pieces) / RATE
    pieces.append(speech)
    speech_end = start + len(speech) / RATE
    label: dict = {"kind": kind, "text": text, "voice": f"{voice.engine}:{voice.name}{voice.variant}"}
    label["speech_end_s"] = round(speech_end, 3)
    level_db = rng.uniform(-30, -16)
    if kind == "machine" and rng.random() < 0.85:
        gap = rng.uniform(0.2, 1.5)
        tone, what = beep(rng)
        tone *= speech_rms * 10 ** (rng.uniform(-3, 6) / 20)  # beeps are often louder than the voice
        pieces += [np.zeros(int(gap * RATE), np.float32), tone]
        label["beep_end_s"] = round(speech_end + gap + len(tone) / RATE, 3)
        label["beep"] = what
    pieces.append(np.zeros(int(6.0 * RATE), np.float32))
    audio = np.concatenate(pieces)
    audio *= 10 ** (level_db / 20) / speech_rms
    snr_db = rng.uniform(12, 30)
    kind_n = rng.choice(("white", "pink", "brown", "babble", "hum"))
    audio += noise(kind_n, len(audio), np.random.default_rng(rng.randrange(2**32))) * 10 ** (
        (level_db - snr_db) / 20
    )
    label.update(noise=kind_n, snr_db=round(snr_db, 1), level_dbfs=round(level_db, 1))
    return telephone(np.clip(audio, -1, 1).astype(np.float32)), label


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("out/corpus-answer"))
    ap.add_argument("--renders", type=int, default=4, help="renderings of each line (voices, levels, noise)")
    ap.add_argument("--seed", type=int, default=7, help="which lines go to dev and which to test")
    ap.add_argument(
        "--render-seed",
        type=int,
        help="voices, levels, noise and beeps (default: --seed); a new one renders "
        "the same split again, unheard",
    )
    ap.add_argument("--only", choices=("dev", "test"), help="render one split")
    args = ap.parse_args(argv)
    render_seed = args.seed if args.render_seed is None else args.render_seed
    synth = Synth()
    kinds = {
        **dict.fromkeys(PERSON_SHORT, "person"),
        **dict.fromkeys(PERSON_LONG, "person_long"),
        **dict.fromkeys(INTERCEPT, "intercept"),
    }
    for split, lines in split_lines(args.seed).items():
        if args.only and split != args.only:
            continue
        folder = args.out / split
        folder.mkdir(parents=True, exist_ok=True)
        labels: dict[str, dict] = {}
        for li, text in enumerate(lines):
            kind = kinds.get(text, "machine")
            renders = args.renders * (2 if kind == "machine" else 1)  # beeps vary more than pick-ups
            for i in range(renders):
                audio, label = render(synth, kind, text, i, render_seed)
                name = f"{kind}_{li:02d}_{i}.wav"
                sf.write(str(folder / name), audio, PHONE_RATE, subtype="ULAW")
                labels[name] = label
        (folder / "labels.json").write_text(json.dumps(labels, indent=1))
        print(f"{split}: {len(labels)} files -> {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
