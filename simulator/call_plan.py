"""What a scripted caller says and when, and how its replies are judged; shared by both call harnesses.

A call is a folder of turn WAVs (16 kHz mono), played in name order after each reply, or, when the folder
holds `turns.json` (simulator/call_script.py writes it), in that file's order with its timing:
`[{"file", "text", "start": "after_reply"|"during_reply", "delay_ms", "expect": [...]}, ...]` where
`after_reply` waits for the agent's reply to finish, then `delay_ms`; `during_reply` starts speaking
`delay_ms` after the first audio of the agent's reply to the previous turn (a barge-in or a backchannel).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

TURNS_JSON = "turns.json"
Start = Literal["after_reply", "during_reply"]


class PlanError(ValueError):
    """A call folder that cannot be played; the message is one line."""


@dataclass(frozen=True)
class TurnPlan:
    path: Path
    start: Start = "after_reply"
    delay_ms: float | None = None  # None: the harness's own settle time
    text: str = ""
    expect: list[Any] = field(default_factory=list)
    backchannel: bool = False
    """Said over the agent's reply as listening ("mm-hmm"): the agent should neither stop nor answer it."""


def load_plan(data: Path) -> list[TurnPlan]:
    """The turns of the call in `data` (turns.json when present, else *.wav in name order)."""
    spec = data / TURNS_JSON
    if not spec.is_file():
        wavs = sorted(data.glob("*.wav"))
        if not wavs:
            raise PlanError(f"no *.wav turns in {data}")
        return [TurnPlan(w) for w in wavs]
    try:
        items = json.loads(spec.read_text())
    except ValueError as e:
        raise PlanError(f"{spec}: not JSON ({e})") from None
    if not isinstance(items, list) or not items:
        raise PlanError(f"{spec}: expected a non-empty list of turns")
    plan = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "file" not in item:
            raise PlanError(f"{spec}: turn {i} has no 'file'")
        path = data / str(item["file"])
        if not path.is_file():
            raise PlanError(f"{spec}: turn {i}: no such file {path.name}")
        start = item.get("start", "after_reply")
        if start not in ("after_reply", "during_reply"):
            raise PlanError(f"{spec}: turn {i}: start must be after_reply or during_reply (got {start!r})")
        if i == 0 and start == "during_reply":
            raise PlanError(f"{spec}: the first turn cannot start during a reply")
        delay = item.get("delay_ms")
        plan.append(
            TurnPlan(
                path,
                start,
                None if delay is None else float(delay),
                str(item.get("text", "")),
                list(item.get("expect", []) or []),
                bool(item.get("backchannel", False)) and start == "during_reply",
            )
        )
    return plan


def plan_to_json(plan: list[TurnPlan]) -> list[dict[str, Any]]:
    return [{"file": str(t.path), **{k: v for k, v in asdict(t).items() if k != "path"}} for t in plan]


def plan_from_json(items: list[dict[str, Any]]) -> list[TurnPlan]:
    keys = ("start", "delay_ms", "text", "expect", "backchannel")
    return [TurnPlan(Path(i["file"]), **{k: i[k] for k in keys if k in i}) for i in items]


# --- judging replies --------------------------------------------------------------------------------------

_WORD = re.compile(r"[^\w']+")
# an agent saying it failed, or asking the caller to say it again: either means the turn did not work
_APOLOGY = re.compile(r"^(?:(?:i'm|i am|so|oh) )?(?:sorry|apologies|my apologies)\b|\bsomething went wrong\b")
_REPEAT = re.compile(
    r"\b(repeat that|say that again|(?:did not|didn't|couldn't|could not) (?:catch|hear|understand)|"
    r"come again|pardon)\b"
)


def norm_text(text: str) -> str:
    return " ".join(_WORD.sub(" ", text.lower()).split())


def reply_problem(text: str, agent_lines: dict[str, set[str]] | None = None) -> str:
    """'apology' | 'repeat_request' | '' for one reply; `agent_lines` holds the agent's own fixed lines
    (worker.agent's APOLOGY / REPEAT) by kind."""
    t = norm_text(text)
    if not t:
        return ""
    for kind, lines in (agent_lines or {}).items():
        if any(norm_text(line) and norm_text(line) in t for line in lines):
            return kind
    if _APOLOGY.search(t):
        return "apology"
    if _REPEAT.search(t):
        return "repeat_request"
    return ""


def worker_failures(errors: list[str]) -> list[str]:
    """The errors that are the pipeline's own: everything except an apology or repeat-request the LLM wrote
    itself. Benchmarks count those too (a caller hears a failed turn); plumbing tests use this instead, since
    the embedded 135M model opens replies with "I'm sorry…" on its own. The worker's own apology and
    repeat lines (an LLM that failed, a reply that was empty) still count."""
    fixed = [norm_text(line) for lines in agent_fixed_lines().values() for line in lines if norm_text(line)]
    out = []
    for err in errors:
        _, sep, text = err.partition(": apology: ")
        if not sep:
            _, sep, text = err.partition(": repeat_request: ")
        said = norm_text(text.strip("'\""))  # a quoted reply, cut at 80 characters by the report
        if sep and said and not any(line in said or line.startswith(said) for line in fixed):
            continue
        out.append(err)
    return out


@functools.lru_cache(maxsize=1)
def agent_fixed_lines() -> dict[str, set[str]]:
    """The worker's own apology and repeat-request lines, in every language it has."""
    lines: dict[str, set[str]] = {"apology": set(), "repeat_request": set()}
    try:
        from worker.agent import APOLOGY, REPEAT

        lines["apology"].update(APOLOGY.values())
        lines["repeat_request"].update(REPEAT.values())
    except ImportError:  # pragma: no cover - an agent without fixed lines
        pass
    try:  # the hold line said while the host speech engine restarts: a worker failure too
        from worker.stt_hold import HOLD

        lines["apology"].update(HOLD.values())
    except ImportError:  # pragma: no cover
        pass
    try:  # the cached apology lines the filler controller may play
        lines["apology"].update(_phrase_lines("apology"))
    except Exception:  # pragma: no cover - no phrase set in this checkout
        pass
    return lines


def _phrase_lines(*kinds: str) -> set[str]:
    """The phrase set's lines of these kinds, the defaults and every voice's own."""
    from caches.phrases import load_phrases

    phrases = load_phrases()
    out: set[str] = set()
    for by_kind in [
        *phrases.defaults.values(),
        *(v for b in phrases.voice_overrides.values() for v in b.values()),
    ]:
        for kind in kinds:
            out.update(by_kind.get(kind, ()))  # type: ignore[call-overload]
    return out


def default_filler_texts() -> set[str]:
    """Every acknowledgement and hold line of the phrase set (what the worker may play as a filler)."""
    return _phrase_lines("acknowledgement", "hold")


def is_filler_text(text: str, norm_fillers: set[str]) -> bool:
    """The agent line is one of the fillers (`norm_fillers`: their `norm_text` forms)."""
    return norm_text(text) in norm_fillers


# --- statistics ---------------------------------------------------------------------------------------


def median_ci(values: list[float], n_boot: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """Bootstrap 95 % interval of the median (percentile method, resampling the values)."""
    vals = np.asarray([v for v in values if v is not None], float)
    if vals.size == 0:
        return None
    rng = np.random.default_rng(seed)
    meds = np.median(rng.choice(vals, size=(n_boot, vals.size), replace=True), axis=1)
    return float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))


def ratio_ci(
    num: list[float], den: list[float], n_boot: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """Bootstrap 95 % interval of median(num) / median(den), each side resampled on its own."""
    a = np.asarray([v for v in num if v is not None], float)
    b = np.asarray([v for v in den if v is not None], float)
    if a.size == 0 or b.size == 0:
        return None
    rng = np.random.default_rng(seed)
    ma = np.median(rng.choice(a, size=(n_boot, a.size), replace=True), axis=1)
    mb = np.median(rng.choice(b, size=(n_boot, b.size), replace=True), axis=1)
    ratios = ma / np.where(mb == 0, np.nan, mb)
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return None
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def rotated(names: list[str], round_index: int) -> list[str]:
    """Round r runs the pipelines starting at r mod n, so none always goes first (or warm after another)."""
    k = round_index % len(names) if names else 0
    return names[k:] + names[:k]
