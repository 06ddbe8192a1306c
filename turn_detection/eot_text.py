"""Trained end-of-turn text model: how likely the caller's words, as the recogniser wrote them, end the turn.

Why: the zero-shot score of a chat LM (SmolLM2's next-token odds of a full stop) cost ~20 ms a token over
HTTP and missed its deadline at most decisions with three calls at once (issue 65), and it was never trained
for the question. This model was: a logistic regression over hashed word n-grams anchored at the end of the
transcript, the turn's first words and the agent's last line, trained on human chat turns
(`python -m turn_detection.train`, data card in turn_detection/train/DATA_CARD.md). One decision costs
~0.1 ms in process (numpy, no thread, no server), so the score is there when the VAD ends the speech, at
any load.

Input is written the way the recogniser writes once punctuation is gone: lower-case, no punctuation
(`normalise`), digits where Whisper prints them. The recogniser's full stop is not read: it is what the
model predicts, and Whisper closes cut clauses with one.
"""

from __future__ import annotations

import math
import re
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

WEIGHTS = Path(__file__).with_name("data") / "eot_text.npz"
"""The shipped weights (MIT, as the chat data they were trained on; turn_detection/data/LICENSE)."""

_KEEP = re.compile(r"[^\w\s'’-]", re.UNICODE)
_SPACES = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WH = frozenset({"what", "which", "when", "where", "who", "whose", "how", "why"})


class EotTextError(RuntimeError):
    """The weights file is missing or not this model's (one line)."""


def normalise(text: str, max_words: int = 32) -> list[str]:
    """Lower-case words, punctuation out (apostrophes and in-word hyphens kept), the last `max_words`."""
    cleaned = _KEEP.sub(" ", text.lower().replace("’", "'"))
    words = [w.strip("-") for w in _SPACES.split(cleaned) if w.strip("-")]
    return words[-max_words:]


def _shape(word: str) -> str:
    if word.isdigit():
        return f"D{min(len(word), 5)}"
    if any(c.isdigit() for c in word):
        return "Dx"
    if len(word) == 1:
        return "L"
    return "w"


def _len_bucket(n: int) -> str:
    return str(n) if n <= 4 else "5-7" if n <= 7 else "8-12" if n <= 12 else "13+"


def agent_cues(line: str) -> list[str]:
    """What the agent's last line asks: whether it ends in a question and its last sentence's first words
    and wh-word (a caller's "tuesday" answers "which day?" whole; after a statement it may be a start)."""
    sentences = [s for s in _SENTENCE_END.split(line.strip()) if s]
    if not sentences:
        return ["a:none"]
    last = sentences[-1]
    words = normalise(last, 64)
    cues = ["a:q" if last.rstrip().endswith("?") else "a:s"]
    if words:
        cues.append(f"a1:{words[0]}")
        cues.append(f"a2:{' '.join(words[:2])}")
        wh = next((w for w in words if w in _WH), "")
        if wh:
            cues.append(f"awh:{wh}")
    return cues


def features(words: list[str], agent: list[str]) -> list[str]:
    """Feature names of the caller's words (normalised) after the agent's cues (`agent_cues`)."""
    if not words:
        return ["empty"]
    n = len(words)
    w1 = words[-1]
    w2 = " ".join(words[-2:]) if n > 1 else f"^ {w1}"
    w3 = " ".join(words[-3:]) if n > 2 else f"^ {w2}"
    shapes = " ".join(_shape(w) for w in words[-3:])
    out = [
        "bias",
        f"w1:{w1}",
        f"w2:{w2}",
        f"w3:{w3}",
        f"p1:{words[-2] if n > 1 else '^'}",
        f"p2:{words[-3] if n > 2 else '^'}",
        f"s3:{w1[-3:]}",
        f"sh:{shapes}",
        f"len:{_len_bucket(n)}",
        f"f1:{words[0]}",
        f"f2:{' '.join(words[:2])}",
        f"len|w1:{_len_bucket(n)}|{w1}",
    ]
    out += [f"b:{w}" for w in set(words[-8:-1])]
    for a in agent:
        out.append(a)
        out.append(f"{a}|len:{_len_bucket(n)}")
        out.append(f"{a}|w1:{w1}")
    return out


def hashed(names: list[str], bits: int) -> np.ndarray:
    """Indices of the feature names in a 2**bits table (crc32: the same in every process)."""
    mask = (1 << bits) - 1
    return np.fromiter((zlib.crc32(n.encode()) & mask for n in names), dtype=np.int64, count=len(names))


@dataclass(frozen=True)
class EotTextOptions:
    weights: Path = WEIGHTS
    max_words: int = 32
    """Only the transcript's last words are read (the end of a turn is decided by its last clause)."""
    cache_size: int = 512


class EotTextModel:
    """The trained scorer; `probability` is P(the caller is done) for the words so far. Thread-safe reads."""

    def __init__(self, opts: EotTextOptions | None = None) -> None:
        self.opts = opts or EotTextOptions()
        try:
            data = np.load(self.opts.weights)
            self._w = data["w"].astype(np.float32)
            self._bits = int(data["bits"])
        except (OSError, KeyError, ValueError) as e:
            raise EotTextError(f"cannot load end-of-turn text weights {self.opts.weights}: {e}") from e
        if self._w.shape != (1 << self._bits,):
            raise EotTextError(f"{self.opts.weights}: weight table does not match its {self._bits} bits")
        self._cache: OrderedDict[tuple[str, str], float] = OrderedDict()
        self.query_ms: list[float] = []
        """Wall time of each score computed (not cached): its cost, and its latency on benchmarks.turns'
        clock."""

    def probability(self, text: str, agent_line: str = "") -> float | None:
        """P(the turn is over) for `text` said after `agent_line`; None when no words are left."""
        words = normalise(text, self.opts.max_words)
        if not words:
            return None
        key = (" ".join(words), agent_line)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        start = time.perf_counter()
        z = float(self._w[hashed(features(words, agent_cues(agent_line)), self._bits)].sum())
        p = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
        self.query_ms.append((time.perf_counter() - start) * 1000)
        self._cache[key] = p
        while len(self._cache) > self.opts.cache_size:
            self._cache.popitem(last=False)
        return p

    def score_sync(self, text: str, agent_line: str = "") -> float | None:
        """`probability` under the name offline tools call a scorer by (benchmarks.turns)."""
        return self.probability(text, agent_line)


_SHARED: EotTextModel | None = None


def shared_model() -> EotTextModel:
    """One model per process (the weights are read once; calls share it)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = EotTextModel()
    return _SHARED
