"""Whether this host can take one more call, measured rather than counted (issue 66).

Calls on a host degrade together when its CPU runs out (4 calls on 2 cores: every caller waited 5-19 s for
each answer), and a fixed call count cannot know a host's speed. So the worker admits a call only while one
more call fits under these limits:

- CPU, projected: the host's busy cores that are not this worker's (neighbours; niced processes give way
  and are left out) plus what a call of this worker costs times (calls + 1), against the cores. What a
  call costs is measured on this host: the CPU of the worker's process tree (job processes, speech
  engine, LLM) per second of call over the last minutes, starting from `call_cores_prior`. The only
  signal that turns a call away *before* the calls degrade: the others show degradation under way.
- the job processes' event-loop lag (how late a 100 ms sleep wakes in each call's loop), sustained;
- the host speech engine's queue delay (how long its oldest waiting decode has waited);
- the voice's real-time factor (seconds of synthesis per second of speech, CPU voice).

Each job process in a call writes its lag and its voice's factor to a small file in a private folder once
a second (`JobSignals`); the worker reads them, with the speech engine's last `capacity` (its keeper polls
it) and the CPU counters, whenever LiveKit asks for its load (`HostHeadroom`). Pressure is the worst signal
against its limit over the last `window_s`. At 1.0 the worker reports itself full to LiveKit's dispatcher,
and writes its verdict where job processes read it: a call dispatched anyway (the load travels every
0.5 s) hears `full_line` and is ended instead of joining a host that cannot serve it. A host with no call
admits one whatever the signals say: a busy neighbour must not close it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from plugins.local_socket import default_socket_path, ensure_private_dir

log = logging.getLogger("parley.headroom")

VERDICT_FILE = "host.json"


def default_folder() -> Path:
    """Private to this worker: its process group (its job processes and engines share it)."""
    return default_socket_path(f"headroom-{os.getpgrp()}")


@dataclass(frozen=True)
class HeadroomOptions:
    max_cpu_use: float = 0.75
    """Projected share of the host's cores in use with one more call. On the 2-core dev machine, runs
    whose host was busy ≤ ~0.7 of its cores held v2v p95 ≤ 2 s, and every run at ≥ 0.8 missed it (2-6x
    the p95): 21 room runs of 2-4 calls, 2026-11-25 to 12-07 (benchmarks/RESULTS.md history). Past ~3/4
    every part queues for the CPU in bursts, and the caller hears it."""
    call_cores_prior: float = 0.35
    """What a call costs (cores) until the host has measured its own: the room benchmark's host parts
    on the 2-core dev machine, 20-28 CPU-s per call-minute (2026-12). Too high only refuses early."""
    prior_weight_s: float = 60.0
    """The prior counts as this many call-seconds; measured calls take over as they add up."""
    memory_s: float = 300.0
    """A call's measured cost forgets at this time constant (a model or agent change shows within
    minutes)."""
    max_loop_lag_s: float = 0.2
    """Mean over the window of each call's worst lag per second. A 20 ms audio frame handled 0.2 s late
    on average delays every end of turn by as much; a single burst (an import, a GC pause) is no full
    host, so bursts are averaged out."""
    max_stt_queue_s: float = 0.5
    """A final transcript that waits 0.5 s for the engine puts a ~1.2 s answer past 1.7 s."""
    max_voice_rtf: float = 0.7
    """The voice synthesises a piece while the one before it plays: at 1.0 the listener runs dry, and
    the factor (wall time, so CPU waits count) reads 0.7 a little before it does."""
    window_s: float = 5.0
    """Readings of this long count."""
    stale_s: float = 10.0
    """A job's reading or the worker's verdict older than this is ignored (its process is gone)."""
    full_line: str = "Sorry, all our lines are busy right now. Please call again in a few minutes."
    folder: Path = field(default_factory=default_folder)


@dataclass(frozen=True)
class Reading:
    loop_lag_s: float = 0.0
    stt_queue_s: float = 0.0
    voice_rtf: float = 0.0
    job: bool = True  # a job process's (its lag counts, even at 0), not the speech engine's


@dataclass(frozen=True)
class Verdict:
    pressure: float  # one more call against the limits: 1.0 = full (what the dispatcher hears)
    why: str  # which signal ("" when none pressed)
    calls: int
    admits: bool  # whether one more call may join
    at: float = 0.0
    over: float = 0.0  # the calls it has against the same limits: ≥ 1.0 = already past them
    signals: dict[str, float] = field(default_factory=dict)  # each signal's value, for the record


def signal_values(readings: Iterable[Reading]) -> dict[str, float]:
    """Each signal over the readings: the loop lag's mean (sustained lag), the others' worst."""
    rs = list(readings)
    lags = [r.loop_lag_s for r in rs if r.job]
    return {
        "loop_lag": sum(lags) / len(lags) if lags else 0.0,
        "stt_queue": max((r.stt_queue_s for r in rs), default=0.0),
        "voice_rtf": max((r.voice_rtf for r in rs), default=0.0),
    }


def pressure(values: dict[str, float], opts: HeadroomOptions) -> tuple[float, str]:
    """The worst signal against its limit, and its name."""
    limits = {
        "cpu": opts.max_cpu_use,
        "loop_lag": opts.max_loop_lag_s,
        "stt_queue": opts.max_stt_queue_s,
        "voice_rtf": opts.max_voice_rtf,
    }
    worst, why = 0.0, ""
    for name, value in values.items():
        limit = limits.get(name, 0.0)
        if limit > 0 and value / limit > worst:
            worst, why = value / limit, name
    return worst, why


def host_busy_s(niced: bool = True) -> float:
    """CPU seconds the host's cores have been busy since boot; `niced=False` leaves out what niced
    processes used (they give way to the calls, so they take nothing from them)."""
    t = psutil.cpu_times()
    busy = sum(getattr(t, k, 0.0) for k in ("user", "system", "irq", "softirq", "steal"))  # guest is in user
    return float(busy + (t.nice if niced else 0.0))


class CallCost:
    """What a call costs this host (cores), and how busy the rest of the host is, from CPU counters.

    `update(calls)` reads the host's busy seconds (`busy`) and the CPU seconds the worker's process tree
    used since the last look (`tree`); while calls run, the tree's seconds per call-second feed a decaying
    average that starts at the prior."""

    def __init__(
        self,
        opts: HeadroomOptions,
        clock: Callable[[], float] = time.time,
        busy: Callable[[], float] = lambda: host_busy_s(niced=False),
        tree: Callable[[], float] | None = None,
    ) -> None:
        self.opts = opts
        self.cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self._clock = clock
        self._busy = busy
        self._tree = tree or self._tree_delta
        self._cpu: dict[int, float] = {}  # pid -> its CPU seconds at the last look
        self._last: tuple[float, float] | None = None  # (time, host busy seconds)
        self._spent = 0.0  # decayed tree CPU seconds while calls ran
        self._served = 0.0  # decayed call-seconds
        self._others: deque[tuple[float, float, float]] = deque()  # (time, seconds, neighbours' CPU s)

    def per_call(self) -> float:
        o = self.opts
        return (o.call_cores_prior * o.prior_weight_s + self._spent) / (o.prior_weight_s + self._served)

    def neighbours(self) -> float:
        """Cores the host spent on other processes over the window."""
        seconds = sum(s for _, s, _ in self._others)
        return sum(c for *_, c in self._others) / seconds if seconds > 0 else 0.0

    def projected(self, calls: int) -> float:
        """Share of the cores in use with `calls` calls of this worker."""
        return (self.neighbours() + self.per_call() * calls) / self.cores

    def update(self, calls: int) -> None:
        now = self._clock()
        busy = self._busy()
        tree = self._tree()
        if self._last is not None:
            dt = now - self._last[0]
            if dt > 0:
                keep = math.exp(-dt / self.opts.memory_s)
                self._spent *= keep
                self._served *= keep
                if calls:
                    self._spent += tree
                    self._served += calls * dt
                self._others.append((now, dt, max(0.0, busy - self._last[1] - tree)))
        while self._others and now - self._others[0][0] > self.opts.window_s:
            self._others.popleft()
        self._last = (now, busy)

    def _tree_delta(self) -> float:
        """CPU seconds this worker's tree used since the last look (a new process counts from its start)."""
        seen: dict[int, float] = {}
        try:
            root = psutil.Process()
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0.0
        for p in procs:
            try:
                t = p.cpu_times()
                seen[p.pid] = t.user + t.system
            except psutil.Error:
                continue
        delta = sum(max(0.0, used - self._cpu.get(pid, 0.0)) for pid, used in seen.items())
        self._cpu = seen
        return delta


class HostHeadroom:
    """The worker's view: its job processes' readings, its speech engine's queue and the CPU, over the
    window."""

    def __init__(
        self,
        opts: HeadroomOptions | None = None,
        speech_engine: Any = None,
        clock: Callable[[], float] = time.time,
        cost: CallCost | None = None,
    ) -> None:
        self.opts = opts or HeadroomOptions()
        self.speech_engine = speech_engine  # worker/speech_engine.HostSpeechEngine, or None
        self.cost = cost  # None: no CPU signal (tests of the other signals)
        self._clock = clock
        self._samples: deque[tuple[float, Reading]] = deque()
        self._seen: dict[str, float] = {}  # job file -> the `at` of its reading already counted

    def add(self, reading: Reading, at: float | None = None) -> None:
        self._samples.append((self._clock() if at is None else at, reading))

    def collect(self, calls: int = 0) -> None:
        """The job processes' files, the speech engine's last capacity and the CPU counters."""
        now = self._clock()
        if self.cost is not None:
            self.cost.update(calls)
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
            self.add(Reading(stt_queue_s=float(doc.get("queue_delay_s") or 0.0), job=False), at)

    def verdict(self, calls: int) -> Verdict:
        now = self._clock()
        while self._samples and now - self._samples[0][0] > self.opts.window_s:
            self._samples.popleft()
        values = signal_values(r for _, r in self._samples)
        now_values = dict(values)
        if self.cost is not None and calls:
            values["cpu"] = self.cost.projected(calls + 1)
            now_values["cpu"] = self.cost.projected(calls)
        worst, why = pressure(values, self.opts)
        over, _ = pressure(now_values, self.opts)
        shown = {k: round(v, 3) for k, v in values.items()}
        if self.cost is not None:
            shown["call_cores"] = round(self.cost.per_call(), 3)
        return Verdict(round(worst, 3), why, calls, calls == 0 or worst < 1.0, now, round(over, 3), shown)

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


def admits_new_call(
    opts: HeadroomOptions | None = None, since: float = 0.0, clock: Callable[[], float] = time.time
) -> Verdict:
    """In a job process about to take a call (dispatched at `since`): whether the worker's last verdict
    lets it in (admits when there is none fresh). A verdict made after the dispatch already counts this
    call: it is let in while the calls counted fit (`over` < 1), else while one more fits (`admits`)."""
    opts = opts or HeadroomOptions()
    try:
        doc = json.loads((opts.folder / VERDICT_FILE).read_text(encoding="utf-8"))
        v = Verdict(**doc)
    except (OSError, ValueError, TypeError):
        return Verdict(0.0, "", 0, True)
    if clock() - v.at > opts.stale_s:
        return Verdict(0.0, "", v.calls, True)
    if since and v.at >= since:
        from dataclasses import replace

        return replace(v, admits=v.calls <= 1 or v.over < 1.0)
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
