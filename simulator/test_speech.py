"""The speech the project's own tests listen to, rendered by the project itself (the CPU voice, hibari
"heart", deterministic), so a plain clone tests itself with no data beside it.

    python -m simulator.test_speech [--out DIR]

Layout (16 kHz mono PCM_16 WAVs, each with a same-name .txt holding the words as spoken):
- `asr/a01.wav` … `a10.wav`: single requests a voice agent hears (orders, accounts, times, directions),
  0.1 s of silence before the speech and 0.2 s after;
- `conversation/c1.wav` … `c4.wav`: a caller booking a dental cleaning, picking a day, moving it and
  confirming, 0.3 s before and 1.0 s after.

`PARLEY_TEST_AUDIO=DIR` points the tests at another folder of the same layout instead (a larger recorded
set, for example). The rendered set is cached under `out/test-speech/<content hash>/`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import soundfile as sf

from .call_script import RATE, render_line

ROOT = Path(__file__).resolve().parent.parent
VOICE = "heart"

# Numbers are written as words, the way they are spoken; the tests normalise Whisper's digits to match.
ASR = [
    "Please bring two large pizzas to the office by noon.",
    "Could you change the email address you have for me?",
    "Please move forty dollars out of checking and into savings.",
    "Can I meet with my manager on Thursday at four?",
    "Which bus goes from the train station to the airport?",
    "Cancel the order I placed yesterday morning, please.",
    "Is the restaurant open for dinner this Saturday night?",
    "My phone stopped working and I need a new charger.",
    "Please move my dentist visit to the third of June.",
    "Turn left at the bank and walk for about two blocks.",
]
CONVERSATION = [
    "Hello, could I book a teeth cleaning for next week, please?",
    "Wednesday works best for me, before lunch if you can.",
    "Sorry, can we move it to Friday afternoon instead?",
    "Yes, Friday afternoon suits me. Thank you very much.",
]
SETS: dict[str, tuple[str, list[str], float, float]] = {
    # folder: (file prefix, lines, lead s, tail s)
    "asr": ("a", ASR, 0.1, 0.2),
    "conversation": ("c", CONVERSATION, 0.3, 1.0),
}


def content_key() -> str:
    """Changes whenever the lines, the silences or the voice change (the cache folder's name)."""
    spec = json.dumps({"voice": VOICE, "sets": SETS}, sort_keys=True)
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


def render(out: Path) -> Path:
    """Render every set into `out` (created) and return it."""
    from plugins.cpu_voice.voice import CpuVoice

    voice = CpuVoice(voice=VOICE)
    for folder, (prefix, lines, lead_s, tail_s) in SETS.items():
        (out / folder).mkdir(parents=True, exist_ok=True)
        width = 2 if prefix == "a" else 1
        for i, text in enumerate(lines, 1):
            name = f"{prefix}{i:0{width}d}"
            pcm = render_line(voice, text, lead_s, tail_s)
            sf.write(out / folder / f"{name}.wav", pcm, RATE, subtype="PCM_16")
            (out / folder / f"{name}.txt").write_text(text + "\n")
    return out


def speech_dir(cache_root: Path | None = None) -> Path:
    """The test speech folder: `PARLEY_TEST_AUDIO` when set, else the rendered set (rendered on first use;
    written to a temporary folder and renamed, so a half-rendered set is never used)."""
    override = os.environ.get("PARLEY_TEST_AUDIO")
    if override:
        return Path(override)
    root = cache_root or ROOT / "out" / "test-speech"
    final = root / content_key()
    if (final / "complete").is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".rendering-", dir=root))
    try:
        render(tmp)
        (tmp / "complete").write_text("ok\n")
        try:
            tmp.rename(final)
        except OSError:  # another process finished first: use theirs
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulator.test_speech", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="render into this folder instead of the cache")
    args = ap.parse_args(argv)
    out = render(args.out) if args.out else speech_dir()
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
