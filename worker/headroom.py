"""Whether this host can take one more call, measured rather than counted (issue 66).

Calls on a host degrade together when its CPU runs out (4 calls on 2 cores: every caller waited 5-19 s for
each answer), and a fixed call count cannot know a host's speed. So the worker admits a call only while
three measured signals have headroom:

- the job processes' event-loop lag (how late a 100 ms sleep wakes in each call's loop);
- the host speech engine's queue delay (how long its oldest waiting decode has waited);
- the voice's real-time factor (seconds of synthesis per second of speech, CPU voice).

Each job process in a call writes its lag and its voice's factor to a small file in a private folder once
a second (`JobSignals`); the worker reads them, with the speech engine's last `capacity` (its keeper polls
it), whenever LiveKit asks for its load (`HostHeadroom`). Pressure is the worst signal against its limit
over the last `window_s`. At 1.0 the worker reports itself full to LiveKit's dispatcher, and writes its
verdict where job processes read it: a call dispatched anyway (the load travels every 0.5 s) hears
`full_line` and is ended instead of joining a host that cannot serve it. A host with no call admits one
whatever the signals say: a busy neighbour must not close it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from plugins.local_socket import default_socket_path, ensure_private_dir

log = logging.getLogger("parley.headroom")

VERDICT_FILE = "host.json"


def default_folder() -> Path:
    """Private to this worker: its process group (its job processes and engines share it)."""
    return default_socket_path(f"headroom-{os.getpgrp()}")


@dataclass(frozen=True)
class HeadroomOptions:
    max_loop_lag_s: float = 0.15
    max_stt_queue_s: float = 0.5
    max_voice_rtf: float = 0.5
    """Limits: a signal at its limit is a full host. Below them every admitted call keeps a margin."""
    window_s: float = 5.0
    """The worst reading of this long counts (a burst of lag marks the host full for this long)."""
    stale_s: float = 10.0
    """A job's reading or the worker's verdict older than this is ignored (its process is gone)."""
    full_line: str = "Sorry, all our lines are busy right now. Please call again in a few minutes."
    folder: Path = field(default_factory=default_folder)


@dataclass(frozen=True)
class Reading:
    loop_lag_s: float = 0.0
    stt_queue_s: float = 0.0
    voice_rtf: float = 0.0


@dataclass(frozen=True)
class Verdict:
    pressure: float  # the worst signal against its limit: 1.0 = full
    why: str  # which signal ("" when none pressed)
    calls: int
    admits: bool  # whether one more call may join
    at: float = 0.0


def pressure(readings: Iterable[Reading], opts: HeadroomOptions) -> tuple[float, str]:
    worst, why = 0.0, ""
    for r in readings:
        for value, limit, name in (
            (r.loop_lag_s, opts.max_loop_lag_s, "loop_lag"),
            (r.stt_queue_s, opts.max_stt_queue_s, "stt_queue"),
            (r.voice_rtf, opts.max_voice_rtf, "voice_rtf"),
        ):
            if limit > 0 and value / limit > worst:
                worst, why = value / limit, name
    return worst, why


class HostHeadroom:
    """The worker's view: its job processes' readings and its speech engine's queue, over the window."""

    def __init__(
        self,
        opts: HeadroomOptions | None = None,
        speech_engine: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.opts = opts or HeadroomOptions()
        self.speech_engine = speech_engine  # worker/speech_engine.HostSpeechEngine, or None
        self._clock = clock
        self._samples: deque[tuple[float, Reading]] = deque()
        self._seen: dict[str, float] = {}  # job file -> the `at` of its reading already counted

    def add(self, reading: Reading, at: float | None = None) -> None:
        self._samples.append((self._clock() if at is None else at, reading))

    def collect(self) -> None:
        """The job processes' files and the speech engine's last capacity, as new readings."""
        now = self._clock()
        for path in self.opts.folder.glob("job-*.json"):
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                at = float(doc["at"])
                reading = Reading(loop_lag_s=float(doc["loop_lag_s"]), voice_rtf=float(doc["voice_rtf"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if now - at > self.opts.stale_s:
                with contextlib.suppress(OSError):
                    path.unlink()  # a job process that died without cleaning up
                self._seen.pop(path.name, None)
                continue
            if self._seen.get(path.name) != at:
                self._seen[path.name] = at
                self.add(reading, at)
        capacity = getattr(self.speech_engine, "last_capacity", None)
        if capacity is not None:
            at, doc = capacity
            self.add(Reading(stt_queue_s=float(doc.get("queue_delay_s") or 0.0)), at)

    def verdict(self, calls: int) -> Verdict:
        now = self._clock()
        while self._samples and now - self._samples[0][0] > self.opts.window_s:
            self._samples.popleft()
        worst, why = pressure((r for _, r in self._samples), self.opts)
        return Verdict(round(worst, 3), why, calls, admits=calls == 0 or worst < 1.0, at=now)

    def publish(self, v: Verdict) -> None:
        """Where job processes read it (`admits_new_call`); atomically, so no reader sees half a file."""
        folder = self.opts.folder
        try:
            ensure_private_dir(folder)  # 0700, refused when others may write to it
            tmp = folder / f".{VERDICT_FILE}.{os.getpid()}"
            tmp.write_text(json.dumps(asdict(v)), encoding="utf-8")
            tmp.replace(folder / VERDICT_FILE)
        except OSError as e:
            log.warning("headroom verdict not written", extra={"error": str(e)[:200]})

    def close(self) -> None:
        """The worker is stopping: its folder goes (job processes have removed their own files)."""
        import shutil

        shutil.rmtree(self.opts.folder, ignore_errors=True)


def admits_new_call(opts: HeadroomOptions | None = None, clock: Callable[[], float] = time.time) -> Verdict:
    """In a job process about to take a call: the worker's last verdict (admits when there is none fresh)."""
    opts = opts or HeadroomOptions()
    try:
        doc = json.loads((opts.folder / VERDICT_FILE).read_text(encoding="utf-8"))
        v = Verdict(**doc)
    except (OSError, ValueError, TypeError):
        return Verdict(0.0, "", 0, True)
    if clock() - v.at > opts.stale_s:
        return Verdict(0.0, "", v.calls, True)
    return v


class JobSignals:
    """In a job process during a call: its loop lag and its voice's factor, written once a second."""

    def __init__(self, voice: Any, opts: HeadroomOptions | None = None, tick_s: float = 0.1) -> None:
        self.opts = opts or HeadroomOptions()
        self.voice = voice  # has `recent_rtf(window_s)` (plugins/cpu_voice/tts.py), or not
        self.tick_s = tick_s
        self.path = self.opts.folder / f"job-{os.getpid()}.json"
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        ensure_private_dir(self.path.parent)
        self._task = asyncio.create_task(self._run(), name="headroom-signals")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            lag = 0.0
            until = loop.time() + 1.0
            while loop.time() < until:
                before = loop.time()
                await asyncio.sleep(self.tick_s)
                lag = max(lag, loop.time() - before - self.tick_s)
            recent = getattr(self.voice, "recent_rtf", None)
            rtf = float(recent(self.opts.window_s)) if callable(recent) else 0.0
            doc = {"at": time.time(), "loop_lag_s": round(lag, 4), "voice_rtf": round(rtf, 3)}
            tmp = self.path.with_suffix(".tmp")
            try:
                tmp.write_text(json.dumps(doc), encoding="utf-8")
                tmp.replace(self.path)
            except OSError:
                pass

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(OSError):
            self.path.unlink()
