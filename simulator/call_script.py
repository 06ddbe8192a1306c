"""Test calls people write themselves: a call script (YAML, caller lines as text) rendered to caller audio
with the CPU voice, and the agent's replies checked against the words each turn expects.

Script format (see examples/calls/):

    voice: heart                      # the caller's voice: hibari, espeak-ko, or piper-joe (optional)
    turns:
      - say: "Could someone fix the gate [pause 1.2] before the weekend?"
        expect: [gate]                # words the agent's reply should contain (case-insensitive)
      - say: "Tuesday at nine works."
        delay_ms: 400                 # silence after the agent finished before the caller speaks
                                      # (default: the simulator's settle time)
      - say: "Sorry, one more thing."
        barge_in: true                # spoken over the agent's reply, delay_ms after its first audio
      - say: "Mm-hmm."
        backchannel: true             # said over the reply as listening: the agent should keep talking
                                      # and not answer it (implies barge_in)

`{{variable}}` in lines and expected words is filled from the agent file's variables.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import yaml

RATE = 16_000
LEAD_S, TAIL_S = 0.3, 1.0  # silence before and after each line, as in a phone call
PLAN_KEYS = ("start", "delay_ms", "expect", "backchannel")
"""A parsed turn's fields that turns.json carries as they are (simulator/call_plan.py reads them)."""
_PAUSE = re.compile(r"\[pause\s+([0-9]*\.?[0-9]+)\s*\]")
_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _fail(script: Path, where: str, what: str) -> ValueError:
    return ValueError(f"script {script}: {where}: {what}")


def _fill(text: str, variables: dict[str, str], script: Path, where: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(1) not in variables:
            raise _fail(script, where, f"unknown variable {{{{{m.group(1)}}}}} (no agent file defines it)")
        return variables[m.group(1)]

    return _VAR.sub(one, text)


def parse_script(script: Path, agent_file: Path | None = None) -> tuple[str, list[dict[str, Any]]]:
    """(caller voice, turns) with every field checked; ValueError names the field in one line."""
    try:
        raw = yaml.safe_load(Path(script).read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"script {script}: cannot read it ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        raise ValueError(f"script {script}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("turns"), list) or not raw["turns"]:
        raise _fail(script, "turns", "must be a non-empty list of caller lines")
    unknown = set(raw) - {"voice", "turns", "agent", "description"}
    if unknown:
        raise _fail(script, sorted(unknown)[0], "unknown field")
    variables: dict[str, str] = {}
    if agent_file is not None:
        from worker.agent_file import load_agent_file

        variables = {k: str(v) for k, v in load_agent_file(agent_file).variables.items()}
    voice = raw.get("voice", "heart")
    try:
        _check_caller_voice(str(voice))
    except ValueError as e:
        raise _fail(script, "voice", str(e)) from None
    turns = []
    for i, t in enumerate(raw["turns"]):
        where = f"turns[{i}]"
        if isinstance(t, str):
            t = {"say": t}
        if not isinstance(t, dict):
            raise _fail(script, where, "must be a line of text or a mapping with 'say'")
        extra = set(t) - {"say", "expect", "delay_ms", "barge_in", "backchannel"}
        if extra:
            raise _fail(script, f"{where}.{sorted(extra)[0]}", "unknown field")
        say = t.get("say")
        if not isinstance(say, str) or not _PAUSE.sub(" ", say).strip():
            raise _fail(script, f"{where}.say", "must be non-empty text")
        expect = t.get("expect", [])
        if isinstance(expect, str):
            expect = [expect]
        if not isinstance(expect, list) or not all(isinstance(w, str) and w.strip() for w in expect):
            raise _fail(script, f"{where}.expect", "must be a list of words")
        delay = t.get("delay_ms")
        if delay is not None and (
            not isinstance(delay, int) or isinstance(delay, bool) or not 0 <= delay <= 60_000
        ):
            raise _fail(script, f"{where}.delay_ms", "must be a whole number of ms from 0 to 60000")
        for flag in ("barge_in", "backchannel"):
            if not isinstance(t.get(flag, False), bool):
                raise _fail(script, f"{where}.{flag}", "must be true or false")
        barge, backchannel = t.get("barge_in", False), t.get("backchannel", False)
        if backchannel and t.get("barge_in") is False:
            raise _fail(script, f"{where}.backchannel", "is said over the reply: leave barge_in out")
        turns.append(
            {
                "say": _fill(say, variables, script, f"{where}.say"),
                "expect": [_fill(w, variables, script, f"{where}.expect") for w in expect],
                "delay_ms": delay,
                "start": "during_reply" if barge or backchannel else "after_reply",
                "backchannel": backchannel,
            }
        )
    return voice, turns


def _check_caller_voice(name: str) -> None:
    """A CPU voice (hibari, espeak-<language>) or the caller-only Piper voice; ValueError (one line)."""
    from plugins.cpu_voice.voice import check_voice_name

    from .piper_caller import NAME as PIPER

    if name == PIPER:
        return
    try:
        check_voice_name(name)
    except ValueError as e:
        raise ValueError(f"{e}, or {PIPER} (a caller-only voice)") from None


def _open_caller_voice(name: str) -> Any:
    from plugins.cpu_voice.voice import open_voice

    from .piper_caller import NAME as PIPER
    from .piper_caller import PiperCaller

    return PiperCaller() if name == PIPER else open_voice(name)


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", _PAUSE.sub(" ", text).lower())[:4]
    return "-".join(words) or "line"


def render_line(voice: Any, text: str, lead_s: float = LEAD_S, tail_s: float = TAIL_S) -> np.ndarray:
    """One caller line at 16 kHz: lead silence, the parts with exact-zero pauses between (`[pause S]`), tail
    silence; peak at −3 dBFS. The one renderer every scripted caller line goes through."""
    from caches.frames import resample_pcm

    pieces: list[np.ndarray] = [np.zeros(int(RATE * lead_s), np.int16)]
    parts = _PAUSE.split(text)  # text, seconds, text, seconds, ...
    for j, part in enumerate(parts):
        if j % 2 == 1:
            pieces.append(np.zeros(int(RATE * float(part)), np.int16))
        elif part.strip():
            pieces.append(resample_pcm(voice.synthesize(part.strip()), voice.sample_rate, RATE))
    pieces.append(np.zeros(int(RATE * tail_s), np.int16))
    pcm = np.concatenate(pieces).astype(np.float32)
    peak = float(np.abs(pcm).max()) or 1.0
    return (pcm * (32767 * 10 ** (-3 / 20) / peak)).astype(np.int16)  # peak at -3 dBFS


def render_script(
    script: Path, out_dir: Path, agent_file: Path | None = None, voice: str | None = None
) -> Path:
    """Synthesise the caller's lines (the CPU voice: hibari, or espeak-ng for Korean; `voice` overrides the
    script's) into out_dir and return out_dir, which then holds NN-*.wav (16 kHz mono, in name order) plus
    turns.json; a bad script or voice raises ValueError (one line)."""
    voice_name, turns = parse_script(Path(script), Path(agent_file) if agent_file else None)
    if voice is not None:
        _check_caller_voice(voice)
        voice_name = voice
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("[0-9][0-9]-*.wav"):
        old.unlink()
    speaker = _open_caller_voice(voice_name)
    listing = []
    for i, t in enumerate(turns, 1):
        name = f"{i:02d}-{_slug(t['say'])}.wav"
        sf.write(out_dir / name, render_line(speaker, t["say"]), RATE, subtype="PCM_16")
        text = " ".join(_PAUSE.sub(" ", t["say"]).split())
        listing.append({"file": name, "text": text, **{k: t[k] for k in PLAN_KEYS}})
    (out_dir / "turns.json").write_text(json.dumps(listing, indent=1, ensure_ascii=False))
    return out_dir


def check_expectations(turns_json: Path, replies: list[str]) -> list[dict[str, Any]]:
    """Per turn {"file", "expect", "missing": [...], "held": bool}: which expected words the agent's reply to
    that turn lacks (case-insensitive, whole words; a turn with no reply misses all)."""
    turns = json.loads(Path(turns_json).read_text(encoding="utf-8"))
    out = []
    for i, t in enumerate(turns):
        reply = replies[i] if i < len(replies) else ""
        words = " ".join(re.findall(r"\w+", reply.lower()))
        missing = [w for w in t.get("expect", []) if not _has(words, w)]
        out.append(
            {"file": t["file"], "expect": t.get("expect", []), "missing": missing, "held": not missing}
        )
    return out


def _has(words: str, expected: str) -> bool:
    want = " ".join(re.findall(r"\w+", expected.lower()))
    return bool(want) and re.search(rf"(?<!\w){re.escape(want)}(?!\w)", words) is not None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulator.call_script", description="render a call script")
    ap.add_argument("script", type=Path, help="a call script (YAML), e.g. simulator/calls/reschedule.yaml")
    ap.add_argument("--out", type=Path, required=True, help="folder for the WAVs and turns.json")
    ap.add_argument("--agent", type=Path, default=None, help="agent file whose variables fill {{...}}")
    ap.add_argument(
        "--voice",
        default=None,
        help="the caller's voice instead of the script's (e.g. piper-joe: a held-out voice)",
    )
    args = ap.parse_args(argv)
    try:
        print(render_script(args.script, args.out, args.agent, args.voice))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
