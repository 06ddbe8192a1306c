"""Training examples for the end-of-turn text model, from human chat turns (chitchat-dataset 0.9.0, MIT).

Each chat turn is a list of messages its writer sent one after another before the other person answered.
After message k of n (k < n) the writer was not done: a natural pause inside a turn (label 0). After the
last message the turn was over (label 1). A complete message cut at a word boundary is a clause still going
(label 0). The text is written the way the recogniser writes once punctuation is stripped (lower-case, number
words often as digits); the other person's previous turn is the "agent's line". Nothing here comes from the
turn corpus (scripts/make_turn_corpus.py), whose dev split only calibrates the policy.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven"]
_UNITS += ["twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80}
_TENS["ninety"] = 90


@dataclass(frozen=True)
class Example:
    text: str
    agent_line: str
    kind: str
    """"end" (the turn's last message: done), "pause" (between its messages) or "cut" (inside a message)."""
    conversation: str

    @property
    def done(self) -> int:
        return int(self.kind == "end")


def digits_as_whisper(text: str, rng: random.Random) -> str:
    """Number words as digits, as Whisper prints most numbers ("twenty five" -> "25"), for half the turns."""
    if rng.random() < 0.5:
        return text
    words = text.split()
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i].lower().strip(".,!?")
        if w in _TENS:
            value = _TENS[w]
            nxt = words[i + 1].lower().strip(".,!?") if i + 1 < len(words) else ""
            if nxt in _UNITS[1:10]:
                value += _UNITS.index(nxt)
                i += 1
            out.append(str(value) + words[i][len(words[i].rstrip(".,!?")) :])
        elif w in _UNITS and w not in ("zero",):
            out.append(str(_UNITS.index(w)) + words[i][len(words[i].rstrip(".,!?")) :])
        else:
            out.append(words[i])
        i += 1
    return " ".join(out)


def turns(data: dict[str, Any]) -> Iterator[tuple[str, list[str], str]]:
    """(conversation id, this turn's messages, the other person's previous turn) for every turn."""
    for cid, conv in data.items():
        previous = ""
        for turn in conv["messages"]:
            messages = [m["text"].strip() for m in turn if m.get("text", "").strip()]
            if not messages:
                continue
            yield cid, messages, previous
            previous = " ".join(messages)


def examples(data: dict[str, Any], seed: int = 65) -> Iterator[Example]:
    """Every turn's end (done), every pause between its messages and a cut inside each message (not
    done)."""
    rng = random.Random(seed)
    for cid, messages, previous in turns(data):
        agent = previous if rng.random() < 0.8 else ""  # some turns without the line: a call's first words
        joined = [" ".join(messages[: k + 1]) for k in range(len(messages))]
        for k, text in enumerate(joined):
            yield Example(
                digits_as_whisper(text, rng), agent, "end" if k == len(messages) - 1 else "pause", cid
            )
        for k, message in enumerate(messages):
            words = message.split()
            if len(words) >= 2:
                cut = rng.randrange(1, len(words))
                head = " ".join([*messages[:k], " ".join(words[:cut])])
                yield Example(digits_as_whisper(head, rng), agent, "cut", cid)


def held_out(conversation: str, share: float = 0.05) -> bool:
    """A fixed share of the conversations, kept out of training for the validation figures."""
    return (zlib.crc32(conversation.encode()) % 1000) < share * 1000
