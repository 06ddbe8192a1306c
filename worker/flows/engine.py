"""One call's flow: which task the caller wants, which of its slots are filled, and what to say next.

The flow decides; nothing here needs an LLM. Each caller turn is read by the slot parsers
(worker/flows/slots), then an optional extractor (a schema-constrained LLM) for the slot just asked when
the parsers found nothing.
A task whose required slots are filled is read back; on "yes" its tool runs and the result is said; a new
value in any turn replaces the old one ("actually make it Friday"), so corrections need no special case.
Questions off the path are answered from the agent file's facts and the pending question is asked again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from . import slots as parse
from .spec import FlowSpec, SlotSpec, TaskSpec

log = logging.getLogger("parley.flow")

ToolCaller = Callable[[str, dict[str, Any]], Awaitable[Any]]
Extractor = Callable[[str, str, SlotSpec], Awaitable[str | None]]  # (caller text, slot name, spec) -> text

_QUESTION = re.compile(
    r"\?|^\W*(what|when|where|how|do|does|are|is|can|could|will|which|who|why)\b", re.IGNORECASE
)
SAME_TURN_S = 4.0
"""A turn read again this soon after its tool ran, with more words at its end, is the same turn: the
framework dropped the reply it made from the first words (a preemptive one) and asks again with the final
transcript. Too soon for a turn said after hearing the reply ("You're booked …, anything else?" is ~5 s)."""

_CLOSING = re.compile(
    r"\b(that's all|that is all|that's it|that is it|nothing else|goodbye|bye|no thanks|no thank you|"
    r"that'll be all|i'm all set|i'm good)\b",
    re.IGNORECASE,
)


@dataclass
class Flow:
    """The state of one call's flow. `respond` is called with each caller turn and returns the line to say."""

    spec: FlowSpec
    call_tool: ToolCaller
    today: dt.date
    extract: Extractor | None = None
    task: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    asking: str | None = None  # the slot the last line asked for
    confirming: bool = False
    done: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (tool, arguments) that succeeded
    earlier: list[str] = field(default_factory=list)  # caller lines said while no task was under way
    clock: Callable[[], float] = time.monotonic
    _inflight: asyncio.Future[tuple[str, bool]] | None = field(default=None, repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    _outcome: tuple[list[str], float, str] | None = field(default=None, repr=False)
    """(the caller's words, when, the line) of the last turn that ran a tool."""

    async def respond(self, text: str) -> str:
        """The line to say to this caller turn (turns are read one at a time, in order)."""
        async with self._lock:
            if self._inflight is not None:  # the last turn's tool call outlived its reply: say how it went
                line, ok = await asyncio.shield(self._inflight)
                self._inflight = None
                closing = bool(_CLOSING.search(text))
                return self._ran(
                    text,
                    f"{line} {self.spec.goodbye if closing else self.spec.anything_else}" if ok else line,
                )
            if (again := self._same_turn(text)) is not None:
                return again  # its tool ran once; the caller never heard how it went
            self._outcome = None
            return _tidy(await self._respond(text))

    def _ran(self, text: str, line: str) -> str:
        """The line saying how a tool call went, kept in case the framework drops it unsaid."""
        self._outcome = (parse.words(text), self.clock(), _tidy(line))
        return _tidy(line)

    def _same_turn(self, text: str) -> str | None:
        if self._outcome is None:
            return None
        before, when, line = self._outcome
        now = parse.words(text)
        if len(now) > len(before) and now[: len(before)] == before and self.clock() - when <= SAME_TURN_S:
            log.info("flow turn read again after its tool ran: its outcome said again")
            return line
        return None

    async def _respond(self, text: str) -> str:
        text = text.strip()
        question = bool(_QUESTION.search(text))
        answer = self._answer(text) if question else None
        closing = bool(_CLOSING.search(text))
        if not (self.confirming and parse.is_yes(text)):
            wanted = self._intent(text)
            # "how much is a cleaning?" names a service but asks for no booking
            if wanted not in (None, self.task) and (answer is None or _has_verb_intent(text)):
                self._start(wanted)  # type: ignore[arg-type]
        if self.task is None and answer is None and (inferred := self._infer(text)) is not None:
            self._start(inferred)  # "could Doctor Morgan see me" names no task, but a slot of one
        if self.task is None:
            self.earlier.append(text)
            del self.earlier[:-3]
        elif self.earlier:  # what the caller said before the task was clear counts too
            earlier, self.earlier = self.earlier, []
            for line in earlier:
                await self._fill(self.spec.tasks[self.task], line)
        if self.task is None:
            if answer is not None:
                return f"{answer} {self.spec.anything_else}"
            if closing or (self.done and parse.is_no(text)):
                return self.spec.goodbye
            if question:
                return f"{self.spec.unknown} {self.spec.offer}"
            return self.spec.offer
        task = self.spec.tasks[self.task]
        filled = await self._fill(task, text)
        prefix = f"{answer} " if answer else ""
        if self.confirming and not filled:
            if parse.is_yes(text):
                return self._ran(text, prefix + await self._run(task, closing))
            if parse.is_no(text):
                self.confirming = False
                self.asking = None
                return prefix + self.spec.change
            if answer is None and question:
                prefix = f"{self.spec.unknown} "
            return prefix + self._render(task.confirm, task)
        if answer is None and question and not filled:
            prefix = f"{self.spec.unknown} "
        return prefix + self._next(task, filled)

    # --- steps ------------------------------------------------------------------------------------------

    def _start(self, name: str) -> None:
        log.info("flow task", extra={"task": name})
        self.task, self.confirming, self.asking = name, False, None

    def _next(self, task: TaskSpec, filled: list[str]) -> str:
        missing = [n for n, s in task.slots.items() if s.required and self.values.get(n) is None]
        if not missing:
            self.confirming, self.asking = True, None
            return self._render(task.confirm, task)
        self.confirming = False
        self.asking = missing[0]
        ask = self._render(task.slots[missing[0]].ask, task)
        # everything heard so far, not just this turn's: a reply cut off by the caller never said the rest
        heard = [self._said(task, n) for n in task.slots if filled and self.values.get(n) is not None]
        return f"Okay, {' '.join(heard).rstrip('.')}. {ask}" if heard else ask

    async def _run(self, task: TaskSpec, closing: bool) -> str:
        """Call the task's tool. The call is shielded: a reply the framework drops (a preemptive one, or
        one the caller talked over) must not drop a booking the service already made, so the next turn
        collects the outcome instead of calling again."""
        if self._inflight is None:
            self._inflight = asyncio.ensure_future(self._call(task))
        line, ok = await asyncio.shield(self._inflight)
        self._inflight = None
        return f"{line} {self.spec.goodbye if closing else self.spec.anything_else}" if ok else line

    async def _call(self, task: TaskSpec) -> tuple[str, bool]:
        """(the line saying how it went, whether the tool succeeded); the flow's state is settled here."""
        args = {k: self._render(v, task, for_tool=True) for k, v in task.arguments.items()}
        try:
            await self.call_tool(task.tool, args)
        except Exception as e:  # the tool said no (a taken slot, an unknown booking) or could not be reached
            log.warning("flow tool failed", extra={"tool": task.tool, "error": type(e).__name__})
            self.confirming = False
            line = self._render(task.failure, task)
            for name in task.retry:
                self.values.pop(name, None)
            if not task.retry:
                self._finish()
                return f"{line} {self.spec.anything_else}", False
            return f"{line} {self._next(task, [])}", False
        self.done.append((task.tool, args))
        line = self._render(task.done, task)
        self._finish()
        return line, True

    def _finish(self) -> None:
        """The task is over: forget its slots except who the caller is."""
        task = self.spec.tasks[self.task] if self.task else None
        if task is not None:
            for name, slot in task.slots.items():
                if slot.type != "name":
                    self.values.pop(name, None)
        self.task, self.confirming, self.asking = None, False, None

    # --- reading the caller -----------------------------------------------------------------------------

    def _intent(self, text: str) -> str | None:
        """The task the caller asks for: most of its `when` words said; on a tie the task listed last (the
        more specific ones, move and cancel, follow book)."""
        said = " " + " ".join(parse.words(text)) + " "
        best, score = None, 0
        for name, task in self.spec.tasks.items():
            n = sum(1 for w in task.when if f" {' '.join(parse.words(w))} " in said)
            if n and n >= score:
                best, score = name, n
        return best

    def _infer(self, text: str) -> str | None:
        """The task with most slots in the text (a dentist, a day, a service: not a name, which any task
        has); on a tie the first listed, the agent's main task."""
        best, score = None, 0
        for name, task in self.spec.tasks.items():
            n = sum(
                1
                for slot in task.slots.values()
                if slot.type not in ("name", "text") and self._parse(slot, text, asked=False) is not None
            )
            if n > score:
                best, score = name, n
        return best

    def _answer(self, text: str) -> str | None:
        said = " " + " ".join(parse.words(text)) + " "
        for answer in self.spec.answers:
            if any(f" {' '.join(parse.words(w))} " in said for w in answer.about):
                return answer.say
        return None

    async def _fill(self, task: TaskSpec, text: str) -> list[str]:
        """Read every slot of the task from the text; the names of the slots that got a new value."""
        changed = []
        for name, slot in task.slots.items():
            value = self._parse(slot, text, asked=self.asking == name)
            if value is None and self.asking == name and self.extract is not None:
                extracted = await self.extract(text, name, slot)
                if extracted:
                    value = self._parse(slot, extracted, asked=True)
            if value is not None and value != self.values.get(name):
                self.values[name] = value
                changed.append(name)
        return changed

    def _parse(self, slot: SlotSpec, text: str, asked: bool) -> Any:
        kind = slot.type
        if kind == "date":
            return parse.parse_date(text, self.today)
        if kind == "time":
            return parse.parse_time(text, asked=asked)
        if kind == "weekday":
            return parse.parse_weekday(text)
        if kind == "name":
            return parse.parse_name(text, asked=asked)
        if kind == "enum":
            return parse.match_enum(text, slot.values)
        if kind == "phone":
            return parse.parse_phone(text)
        if kind == "email":
            return parse.parse_email(text)
        text = text.strip()
        return text if asked and text else None

    # --- saying it --------------------------------------------------------------------------------------

    def _said(self, task: TaskSpec, name: str) -> str:
        return task.slots[name].said.format(value=spoken(self.values[name]))

    def _render(self, template: str, task: TaskSpec, *, for_tool: bool = False) -> str:
        fmt = machine if for_tool else spoken
        values = {n: fmt(self.values.get(n)) for n in task.slots}
        return template.format_map(values)


def _tidy(line: str) -> str:
    """One full stop after "a.m." at a sentence's end, single spaces."""
    return re.sub(r"\s+", " ", re.sub(r"\.\.(?=\s|$)", ".", line)).strip()


def _has_verb_intent(text: str) -> bool:
    """A question like "how much is a cleaning?" names a service but asks for no booking."""
    return bool(re.search(r"\b(book|schedule|make|like|want|need|see|come in|move|cancel)\b", text, re.I))


def spoken(value: Any) -> str:
    """How a slot value is said: "Tuesday December 8", "9 a.m.", "9:30 p.m."."""
    if value is None:
        return ""
    if isinstance(value, dt.date):
        return f"{value.strftime('%A %B')} {value.day}"
    if isinstance(value, dt.time):
        hour = value.hour % 12 or 12
        minutes = f":{value.minute:02d}" if value.minute else ""
        return f"{hour}{minutes} {'a.m.' if value.hour < 12 else 'p.m.'}"
    if isinstance(value, str) and value in parse.WEEKDAYS:
        return value.capitalize()
    return str(value)


def machine(value: Any) -> str:
    """How a slot value goes to a tool: "2026-12-08", "09:00"."""
    if value is None:
        return ""
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.strftime("%H:%M")
    return str(value)
