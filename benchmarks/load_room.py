"""`benchmarks.load --livekit`: N concurrent scripted calls through a real local room, in production shape.

One livekit-server and one Parley worker (`python worker.py start`: one job process per call, N idle
processes prewarmed, the embedded LLM shared by the host); N caller processes each repeat the call back to
back until the time is up. Reported from the callers' received tracks and the worker's marks: `errors` (the
worker's failures only: failed calls, timeouts, dropped or silent replies, the worker's own apology, repeat
and hold lines), `apologies` (the ones the LLM wrote itself: reported, not failures), `underruns` after first
audio (a silence of ≥ 300 ms inside a reply as the caller heard it, where the worker's own published audio
had none: the voice's pauses between sentences are reported apart, as `voice_pauses_ms`), `v2v_ms`
p50/p95/p99, every job process's memory over time (`rss_mb_per_call_max`; `uss_mb_per_call_max`, its own
pages without what it shares with the forkserver; `rss_slope_mb_per_min` of the largest;
`job_rss_growth_mb_per_min` inside calls), the host's shared parts (`rss_mb_engine`, `rss_mb_llm`,
`rss_mb_forkserver`, `rss_slope_mb_per_min_shared`) and `cpu_cores` by part, the scripted callers' own share
apart (real callers are not on the host).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from simulator.audio_io import Track, voiced_windows
from simulator.call_plan import TurnPlan, default_filler_texts, load_plan
from simulator.livekit_stack import E2EStack
from simulator.offline import CallResult
from simulator.room_caller import RoomCallRecord
from simulator.room_result import to_call_result
from simulator.room_runner import LiveKitCallOptions, run_caller, stack_options, wait_until_quiet
from worker.measurement import SpeechReport, first_voiced_at

from .heard import listen_runs, replies_heard

log = logging.getLogger("parley.bench.load_room")

UNDERRUN_S = 0.3
PAUSE_SLACK_S = 0.25


@dataclass
class RoomLoad:
    results: list[CallResult] = field(default_factory=list)
    # underruns (the caller heard a silence the voice did not make), and the voice's own pauses
    gaps: list[float] = field(default_factory=list)
    pauses: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rss: list[tuple[float, dict[int, float]]] = field(default_factory=list)  # (t, {job pid: MB})
    uss: dict[int, float] = field(default_factory=dict)  # job pid -> largest USS (MB): its own pages
    parts_rss: dict[str, float] = field(default_factory=dict)  # host part -> largest RSS (MB)
    parts_series: list[tuple[float, dict[str, float]]] = field(default_factory=list)  # (t, {part: MB})
    cpu: list[dict[int, tuple[str, float]]] = field(default_factory=list)  # {pid: (group, CPU s)} per sample
    seconds: float = 0.0
    host_busy_cores: float | None = None
    refused: int = 0
    """Calls the worker turned away, host full (worker/headroom.py), from its "call refused" log lines."""
    audits: list[dict[str, int]] = field(default_factory=list)
    """Each ended call's open-stream counts, from the worker's "call ended" log lines."""
    jitter_buffer_ms: list[float] = field(default_factory=list)
    """Each call's mean wait of the agent's audio in the caller's jitter buffer (RoomCallRecord.receive)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def reply_gap_spans(
    track: Track, start: float, end: float, min_gap_s: float = UNDERRUN_S
) -> list[tuple[float, float]]:
    """(time the audio came back, seconds) of each silence of at least `min_gap_s` between voiced audio the
    caller heard in [start, end)."""
    spans: list[tuple[float, float]] = []
    last_voiced: float | None = None
    for t, pcm in track.chunks:
        if not start <= t < end:
            continue
        v = voiced_windows(pcm, track.sample_rate)
        if v.size and v.any():
            if last_voiced is not None and t - last_voiced >= min_gap_s:
                spans.append((t, t - last_voiced))
            last_voiced = t + len(pcm) / track.sample_rate
    return spans


def reply_gaps(track: Track, start: float, end: float, min_gap_s: float = UNDERRUN_S) -> list[float]:
    """Silences of at least `min_gap_s` between voiced audio the caller heard in [start, end)."""
    return [gap for _, gap in reply_gap_spans(track, start, end, min_gap_s)]


def _voice_pauses(record: RoomCallRecord) -> list[tuple[float, list[tuple[float, float]]]]:
    """Per reply speech: (caller time of its offset 0, the pauses in its own published audio)."""
    out = []
    track = record.agent
    for m in record.marks:
        if not isinstance(m, SpeechReport) or m.source != "reply":
            continue
        start = m.marks.get("published_first_voiced")
        heard = first_voiced_at(track.chunks, track.sample_rate, start, float("inf")) if start else None
        if heard is None:
            continue
        zero = heard - m.offsets_s.get("published_first_voiced", 0.0)
        out.append((zero, list(m.silences_s)))
    return sorted(out)


def underruns(res: CallResult, record: RoomCallRecord | None = None) -> tuple[list[float], list[float]]:
    """Gaps inside each reply, from the answer the caller heard to the next turn's start, split into
    (underruns, the voice's own pauses). A gap is the voice's own when the worker's published audio of that
    reply was silent there too: a pause ending at the same point, about as long (within PAUSE_SLACK_S)."""
    pauses = _voice_pauses(record) if record is not None else []
    starved: list[float] = []
    own: list[float] = []
    for i, tr in enumerate(res.turns):
        if tr.v2v_ms is None:
            continue
        start = tr.speech_end + tr.v2v_ms / 1000
        end = res.turns[i + 1].speech_start if i + 1 < len(res.turns) else res.end
        for back, gap in reply_gap_spans(res.speaker.track, start, end):
            zero, silences = next(((z, p) for z, p in reversed(pauses) if z <= back), (0.0, []))
            at = back - zero  # offset into that reply's audio where the sound came back
            explained = any(
                abs(o + d - at) <= PAUSE_SLACK_S and d >= gap - PAUSE_SLACK_S for o, d in silences
            )
            (own if explained else starved).append(gap)
    return starved, own


def _job_rss(worker_pid: int, uss: dict[int, float] | None = None) -> dict[int, float]:
    """RSS (MB) of the worker's job processes (multiprocessing children, not the LLM server, not the
    forkserver or the resource tracker). With `uss`, each job's largest USS (MB) is kept there too: RSS
    counts the pages a job shares copy-on-write with the forkserver, USS only its own."""
    found: dict[int, float] = {}
    for p in _worker_children(worker_pid):
        try:
            if host_part(" ".join(p.cmdline()), p.ppid() == worker_pid) == "job":
                found[p.pid] = p.memory_info().rss / 1e6
                if uss is not None:
                    uss[p.pid] = max(uss.get(p.pid, 0.0), p.memory_full_info().uss / 1e6)
        except psutil.Error:
            continue
    return found


def _worker_children(worker_pid: int) -> list[psutil.Process]:
    try:
        return list(psutil.Process(worker_pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def host_part(cmdline: str, child_of_worker: bool) -> str:
    """Which part of the host a worker's descendant is: job | forkserver | stt-engine | llm | other. Job
    processes and the forkserver share a command line; the forkserver is the worker's own child, jobs are
    its children (under `spawn` a job is the worker's child, with no forkserver in its command line)."""
    if "plugins.whisper serve" in cmdline:
        return "stt-engine"
    if "worker.llm_server" in cmdline:
        return "llm"
    if "multiprocessing.resource_tracker" in cmdline:
        return "other"
    if "multiprocessing.forkserver" in cmdline:
        return "forkserver" if child_of_worker else "job"
    return "job" if "multiprocessing" in cmdline else "other"


def _parts_rss(worker_pid: int, into: dict[str, float]) -> dict[str, float]:
    """The RSS (MB) of the host's long-lived parts now (the worker itself, the speech engine, the LLM, the
    forkserver); the largest seen of each is kept in `into`."""
    now: dict[str, float] = {}
    try:
        now["worker"] = psutil.Process(worker_pid).memory_info().rss / 1e6
    except psutil.Error:
        pass
    for p in _worker_children(worker_pid):
        try:
            part = host_part(" ".join(p.cmdline()), p.ppid() == worker_pid)
            if part in ("stt-engine", "llm", "forkserver"):
                now[part] = p.memory_info().rss / 1e6
        except psutil.Error:
            continue
    for part, mb in now.items():
        into[part] = max(into.get(part, 0.0), mb)
    return now


CPU_GROUPS = (
    ("callers", "simulator.room_caller caller"),
    ("benchmark", "benchmarks.load"),
    ("livekit-server", "livekit-server"),
    ("llm", "worker.llm_server"),
    ("stt-engine", "plugins.whisper serve"),
    ("jobs", "multiprocessing"),
    ("worker", "worker.py"),
)
"""Where the host's CPU goes, by command line: the scripted callers run on this machine too, while real
callers do not, so their share is reported apart."""


def _cpu_by_process() -> dict[int, tuple[str, float]]:
    """pid -> (group, CPU seconds used so far) for every process of the stack."""
    found: dict[int, tuple[str, float]] = {}
    for p in psutil.process_iter(["pid", "cmdline", "cpu_times"]):
        cmd = " ".join(p.info["cmdline"] or [])
        group = next((g for g, key in CPU_GROUPS if key in cmd), None)
        times = p.info["cpu_times"]
        if group and times is not None:
            found[p.info["pid"]] = (group, times.user + times.system)
    return found


def cpu_cores(samples: list[dict[int, tuple[str, float]]], seconds: float) -> dict[str, float]:
    """Average cores each group used over the run: per process, its last CPU total minus its first (a
    process already running at the first sample counts from there)."""
    first: dict[int, float] = {}
    last: dict[int, tuple[str, float]] = {}
    for i, sample in enumerate(samples):
        for pid, (group, used) in sample.items():
            first.setdefault(pid, used if i == 0 else 0.0)
            last[pid] = (group, used)
    cores: dict[str, float] = {}
    for pid, (group, used) in last.items():
        cores[group] = cores.get(group, 0.0) + (used - first[pid]) / max(seconds, 1e-9)
    return {g: round(c, 2) for g, c in sorted(cores.items())}


def _slope(samples: list[tuple[float, float]]) -> float | None:
    half = samples[len(samples) // 2 :]
    if len(half) < 3:
        return None
    t = np.array([s[0] for s in half]) / 60
    return round(float(np.polyfit(t, [s[1] for s in half], 1)[0]), 2)


IN_CALL_MB = 20.0
"""A job process is in its call once its RSS is this far above its first sample (the prewarmed idle size)."""


def _by_pid(samples: list[tuple[float, dict[int, float]]]) -> dict[int, list[tuple[float, float]]]:
    """Each job process's (t, MB) samples."""
    series: dict[int, list[tuple[float, float]]] = {}
    for t, by_pid in samples:
        for pid, mb in by_pid.items():
            series.setdefault(pid, []).append((t, mb))
    return series


def shared_rss_slope(series: list[tuple[float, dict[str, float]]]) -> float | None:
    """MB/min over the run's second half of the summed RSS of the host's long-lived parts (worker,
    forkserver, speech engine, LLM): anything that outlives a call and leaks shows here."""
    return _slope([(t, sum(parts.values())) for t, parts in series if parts])


def job_rss_growth(samples: list[tuple[float, dict[int, float]]]) -> dict[str, float | int | None]:
    """Each job process's RSS slope (MB/min) over the second half of its time in a call (a job's RSS grows
    ~100 MB over its first turns as it loads what it uses lazily): median and largest over the processes
    with at least 20 s of such samples. A leak inside a call shows here; the slope of the largest process
    over the run mostly shows new calls warming up."""
    slopes = []
    for series in _by_pid(samples).values():
        idle = series[0][1]
        began = next((at for at, mb in series if mb > idle + IN_CALL_MB), None)
        if began is None:
            continue
        in_call = [(at, mb) for at, mb in series if at >= began]
        settled = in_call[len(in_call) // 2 :]
        slope = _slope(in_call)  # over the same second half
        if slope is not None and settled[-1][0] - settled[0][0] >= 20.0:
            slopes.append(slope)
    return {
        "p50": round(float(np.median(slopes)), 2) if slopes else None,
        "max": round(max(slopes), 2) if slopes else None,
        "processes": len(slopes),
    }


def _mb(v: float | None) -> float | None:
    return round(v, 1) if v is not None else None


CALL_S_PER_TURN = 40.0
"""The caller's wait for a whole call: this much per turn (at least 10 minutes)."""
NEXT_CALLER_GAP_S = 3.0
"""A line's next caller arrives this long after the last one hung up. The worker tells LiveKit that a slot
is free only in its status update (every 2.5 s), so a call placed the instant another ends can still find
a full host refused by livekit-server (on a single host, that call never gets an agent)."""


def run_room_load(
    calls: int, minutes: float, data: Path, out: Path, caller_nice: int = 0, listen: str = ""
) -> dict[str, Any]:
    """`listen`: a Whisper model that checks, after the run, what the callers heard of each reply
    (benchmarks/heard.py: `replies_heard`); empty = not checked."""
    plan: list[TurnPlan] = load_plan(data)
    env = {k: v for k, v in os.environ.items() if k.startswith("PARLEY_")}
    env["PARLEY_MAX_CALLS"] = str(max(calls, 4))
    # a long call (simulator/calls/long_call.yaml) takes ~15 s a turn on a slow 2-core host
    timeout_s = max(600.0, CALL_S_PER_TURN * len(plan))
    opts = LiveKitCallOptions(
        out_dir=out / "stack",
        base_env=env,
        worker_options={"num_idle_processes": str(calls)},
        call_timeout_s=timeout_s,
        caller_nice=caller_nice,
    )
    state = RoomLoad()
    stop = threading.Event()
    stack = E2EStack(stack_options(opts))
    fillers = default_filler_texts()
    with stack:
        wait_until_quiet(stack)
        worker_pid = next(p.popen.pid for p in stack.procs if p.name == "worker")
        t0 = time.monotonic()
        host0 = psutil.cpu_times()
        deadline = t0 + minutes * 60

        def sample() -> None:
            while not stop.is_set():
                t = time.monotonic() - t0
                state.rss.append((t, _job_rss(worker_pid, state.uss)))
                state.parts_series.append((t, _parts_rss(worker_pid, state.parts_rss)))
                state.cpu.append(_cpu_by_process())
                stop.wait(2.0)

        def caller(i: int) -> None:
            time.sleep(i * 2.5)  # staggered arrivals
            k = 0
            while time.monotonic() < deadline:
                if k:
                    time.sleep(NEXT_CALLER_GAP_S)
                try:
                    record = run_caller(stack, plan, out / f"call{i}-{k}", opts)
                    res = to_call_result(record, fillers, pipeline=f"call{i}")
                    starved, own = underruns(res, record)
                except Exception as e:  # one failed call is an error, not the end of the run
                    with state.lock:
                        state.errors.append(f"call{i}-{k}: {type(e).__name__}: {str(e)[:160]}")
                    k += 1
                    continue
                with state.lock:
                    state.results.append(res)
                    if "jitter_buffer_ms" in record.receive:
                        state.jitter_buffer_ms.append(record.receive["jitter_buffer_ms"])
                    state.gaps += starved
                    state.pauses += own
                k += 1

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        with ThreadPoolExecutor(calls) as pool:
            list(pool.map(caller, range(calls)))
        stop.set()
        sampler.join(5)
        state.cpu.append(_cpu_by_process())
        state.seconds = time.monotonic() - t0
        host1 = psutil.cpu_times()
        busy = (sum(host1) - host1.idle - host1.iowait) - (sum(host0) - host0.idle - host0.iowait)
        state.host_busy_cores = round(busy / state.seconds, 2)
        worker_log = next(p.log_path for p in stack.procs if p.name == "worker")
    # the stack is closed: every job process has ended its call and written its audit line
    worker_text = worker_log.read_text(errors="replace")
    state.audits = stream_audits(worker_text)
    state.refused = worker_text.count("host full: call refused")
    series = {"jobs": state.rss, "parts": state.parts_series}
    (out / "memory.json").write_text(json.dumps(series))  # every sample, to see where memory grows
    heard = None
    if listen and listen_runs(state.results, listen):
        heard = replies_heard([t.as_json() for res in state.results for t in res.turns])
    return {**report(state, calls, minutes), "caller_nice": caller_nice, "replies_heard": heard}


def stream_audits(worker_log: str) -> list[dict[str, int]]:
    """The open-stream counts every job process logs when its call ends (worker/call.py
    `audit_open_streams`)."""
    audits = []
    for line in worker_log.splitlines():
        if '"call ended"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("message") == "call ended" and "open_stt_streams" in rec:
            audits.append({k: int(rec.get(k, 0)) for k in ("open_stt_streams", "open_tts_streams")})
    return audits


def report(state: RoomLoad, calls: int, minutes: float) -> dict[str, Any]:
    """`errors` are the worker's failures only (calls that failed, turns that timed out or got no or a
    silent reply, and the worker's own apology / repeat / hold lines); `apologies` are the ones the LLM
    wrote itself (the embedded 135M model's content: reported, not failures)."""
    from simulator.call_plan import worker_failures

    from .report import pct, turn_errors

    # a caller no agent joined: the worker reported itself full and LiveKit sent the job nowhere (one host);
    # counted apart from the worker's failures, as the calls a full host turned away before they began
    unsent = [e for e in state.errors if "no agent joined" in e]
    heard = [e for e in state.errors if e not in unsent]
    for res in state.results:
        heard += [f"{res.pipeline}: {e}" for e in [*res.errors, *turn_errors(res)]]
    errors = worker_failures(heard)
    model_apologies = [e for e in heard if e not in errors]
    v2v = [t.v2v_ms for res in state.results for t in res.turns if t.v2v_ms is not None]
    served = sum(max(0.0, res.end - res.t0) for res in state.results) / 60  # call-minutes
    gaps = state.gaps
    per_pid = {pid: max(mb for _, mb in series) for pid, series in _by_pid(state.rss).items()}
    biggest = [(t, max(by_pid.values())) for t, by_pid in state.rss if by_pid]
    return {
        "calls": calls,
        "minutes": minutes,
        "livekit": True,
        "conversations": len(state.results),
        "turns": len(v2v),
        "errors": len(errors),
        "error_list": errors[:50],
        "apologies": len(model_apologies),
        "apology_list": model_apologies[:20],
        "underruns": len(gaps),
        "underrun_gaps_ms": sorted(round(g * 1000) for g in gaps)[-20:],
        "voice_pauses_ms": sorted(round(g * 1000) for g in state.pauses)[-20:],
        "v2v_ms": {"p50": pct(v2v, 50), "p95": pct(v2v, 95), "p99": pct(v2v, 99)},
        # the agent's audio waiting in the callers' jitter buffers (per call means; part of every v2v)
        "jitter_buffer_ms": {"p50": pct(state.jitter_buffer_ms, 50), "max": pct(state.jitter_buffer_ms, 100)},
        # streams still open when a call ended, summed over every call the worker audited (None: no audit)
        "leaked_streams": sum(sum(a.values()) for a in state.audits) if state.audits else None,
        "calls_audited": len(state.audits),
        "rss_mb_max": round(max(per_pid.values()), 1) if per_pid else None,
        "rss_mb_per_call_max": round(max(per_pid.values()), 1) if per_pid else None,
        "uss_mb_per_call_max": round(max(state.uss.values()), 1) if state.uss else None,
        "rss_slope_mb_per_min": _slope(biggest),
        "rss_slope_mb_per_min_shared": shared_rss_slope(state.parts_series),
        "job_rss_growth_mb_per_min": job_rss_growth(state.rss),
        "rss_mb_engine": _mb(state.parts_rss.get("stt-engine")),
        "rss_mb_llm": _mb(state.parts_rss.get("llm")),
        "rss_mb_forkserver": _mb(state.parts_rss.get("forkserver")),
        "job_processes": len(per_pid),
        "refused": state.refused,
        "not_dispatched": len(unsent),
        "cpu_cores": {**cpu_cores(state.cpu, state.seconds), "host": state.host_busy_cores},
        "call_minutes_served": round(served, 2),
        "cpu_s_per_call_minute": cpu_per_call_minute(
            cpu_cores(state.cpu, state.seconds), state.seconds, served
        ),
    }


def cpu_per_call_minute(cores: dict[str, float], seconds: float, call_minutes: float) -> dict[str, float]:
    """CPU seconds each part spent per minute of call served (the calls the host admitted, by their own
    durations): a larger host's capacity is its cores x 60 over `host_parts` (the scripted callers and the
    benchmark are not the host's: real callers run elsewhere)."""
    per = {g: round(c * seconds / max(call_minutes, 1e-9), 1) for g, c in cores.items()}
    per["host_parts"] = round(sum(v for g, v in per.items() if g not in ("callers", "benchmark")), 1)
    return per
