"""`benchmarks.load --livekit`: N concurrent scripted calls through a real local room, in production shape.

One livekit-server and one Parley worker (`worker.py start`: a job process per call, the LLM and the speech
engine shared); N caller processes repeat the call back to back until the time is up. Reported: worker
failures apart from the model's apologies, underruns, v2v, calls a full host refused or never dispatched,
memory per job process and long-lived part, the headroom signals, and CPU per part (cores, seconds per
call-minute served), the scripted callers' share apart: real callers are not on the host.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from plugins.local_socket import default_socket_path
from simulator.audio_io import Track, voiced_windows
from simulator.call_plan import default_filler_texts, load_plan, worker_failures
from simulator.livekit_stack import E2EStack
from simulator.offline import CallResult
from simulator.room_caller import RoomCallRecord
from simulator.room_result import to_call_result
from simulator.room_runner import LiveKitCallOptions, run_caller, stack_options, wait_until_quiet
from worker.headroom import VERDICT_FILE, HeadroomOptions, host_busy_s
from worker.measurement import SpeechReport, first_voiced_at

from .heard import listen_runs, replies_heard
from .report import pct, turn_errors

UNDERRUN_S, PAUSE_SLACK_S = 0.3, 0.25
CALL_S_PER_TURN = 40.0  # the caller's wait for a whole call, per turn (at least 10 minutes; a slow host)
NEXT_CALLER_GAP_S = 3.0
"""A line's next caller arrives this long after the last one hung up: a slot freed reaches LiveKit only in
the worker's status update (every 2.5 s); sooner, a full host's refusal would leave the call with no agent."""
NOT_HOST = ("callers", "benchmark", "other")  # not the host's parts: real callers run elsewhere
BUSY = HeadroomOptions.full_line  # what a full host says before it ends the call


@dataclass
class RoomLoad:
    results: list[CallResult] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)  # underruns: silences the voice did not make
    pauses: list[float] = field(default_factory=list)  # the voice's own pauses
    errors: list[str] = field(default_factory=list)
    rss: list[tuple[float, dict[int, float]]] = field(default_factory=list)  # (t, {job pid: MB})
    uss: dict[int, float] = field(default_factory=dict)  # job pid -> largest USS (MB): its own pages
    parts_series: list[tuple[float, dict[str, float]]] = field(default_factory=list)  # (t, {part: MB})
    cpu: list[dict[int, tuple[str, float]]] = field(default_factory=list)  # {pid: (part, CPU s)} per sample
    headroom: list[dict[str, Any]] = field(default_factory=list)  # the worker's verdicts (worker/headroom.py)
    seconds: float = 0.0
    host_busy_cores: float | None = None
    refused: int = 0  # calls the worker turned away in-call (its "call refused" lines)
    audits: list[dict[str, float]] = field(default_factory=list)  # each ended call's "call ended" line
    jitter_buffer_ms: list[float] = field(default_factory=list)  # per call (RoomCallRecord.receive)
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


def _voice_pauses(record: RoomCallRecord) -> list[tuple[float, list[tuple[float, float]]]]:
    """Per reply speech: (caller time of its offset 0, the pauses in its own published audio)."""
    out = []
    track = record.agent
    for m in record.marks:
        if not isinstance(m, SpeechReport) or m.source != "reply":
            continue
        start = m.marks.get("published_first_voiced")
        heard = first_voiced_at(track.chunks, track.sample_rate, start, float("inf")) if start else None
        if heard is not None:
            out.append((heard - m.offsets_s.get("published_first_voiced", 0.0), list(m.silences_s)))
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


PARTS = (
    ("callers", "simulator.room_caller"), ("benchmark", "benchmarks.load"),
    ("livekit-server", "livekit-server"), ("stt-engine", "plugins.whisper serve"),
    ("llm", "worker.llm_server"), ("other", "multiprocessing.resource_tracker"),
)  # fmt: skip


def host_part(cmdline: str, child_of_worker: bool) -> str:
    """Which part of the stack a process is: one of PARTS, or job | forkserver | worker | other. Job
    processes and the forkserver share a command line; the forkserver is the worker's own child, jobs are
    its children (under `spawn` a job is the worker's child)."""
    part = next((part for part, key in PARTS if key in cmdline), None)
    if part is None and "multiprocessing" in cmdline:
        part = "forkserver" if "multiprocessing.forkserver" in cmdline and child_of_worker else "job"
    return part or ("worker" if "worker.py" in cmdline else "other")


def _sample(worker_pid: int, state: RoomLoad, t: float) -> None:
    """CPU seconds per part, job RSS and USS, long-lived parts' RSS, of every process this benchmark started
    (the stack, the worker's tree, the callers): other work on the machine shows only in `host_busy_cores`."""
    me = psutil.Process()
    cpu: dict[int, tuple[str, float]] = {}
    jobs: dict[int, float] = {}  # RSS MB
    parts: dict[str, float] = {}
    for p in [me, *me.children(recursive=True)]:
        try:
            with p.oneshot():
                cmd, child = " ".join(p.cmdline()), p.ppid() == worker_pid
                part = "worker" if p.pid == worker_pid else host_part(cmd, child)
                times = p.cpu_times()
                cpu[p.pid] = ("jobs" if part == "job" else part, times.user + times.system)
                rss = p.memory_info().rss / 1e6
            if part == "job":
                jobs[p.pid] = rss
                state.uss[p.pid] = max(state.uss.get(p.pid, 0.0), p.memory_full_info().uss / 1e6)
            elif part in ("worker", "stt-engine", "llm", "forkserver"):
                parts[part.replace("stt-", "")] = rss
        except psutil.Error:
            continue
    state.cpu.append(cpu)
    state.rss.append((t, jobs))
    state.parts_series.append((t, parts))


def cpu_cores(samples: list[dict[int, tuple[str, float]]], seconds: float) -> dict[str, float]:
    """Average cores each part used over the run: per process, its last CPU total minus its first (a
    process already running at the first sample counts from there)."""
    first: dict[int, float] = {}
    last: dict[int, tuple[str, float]] = {}
    for i, sample in enumerate(samples):
        for pid, (part, used) in sample.items():
            first.setdefault(pid, used if i == 0 else 0.0)
            last[pid] = (part, used)
    cores: dict[str, float] = {}
    for pid, (part, used) in last.items():
        cores[part] = cores.get(part, 0.0) + (used - first[pid]) / max(seconds, 1e-9)
    return {g: round(c, 2) for g, c in sorted(cores.items())}


def cpu_per_call_minute(cores: dict[str, float], seconds: float, call_minutes: float) -> dict[str, float]:
    """CPU seconds each part spent per minute of call served (by the admitted calls' own durations);
    `host_parts` sums the host's: a host of C cores holds about C x 60 / host_parts calls at full use."""
    per = {g: round(c * seconds / max(call_minutes, 1e-9), 1) for g, c in cores.items()}
    per["host_parts"] = round(sum(v for g, v in per.items() if g not in NOT_HOST), 1)
    return per


def slope(samples: list[tuple[float, float]]) -> float | None:
    """MB/min over the second half of the samples (warm-up left out)."""
    half = samples[len(samples) // 2 :]
    if len(half) < 10:
        return None
    t = np.array([s[0] for s in half]) / 60
    return round(float(np.polyfit(t, [s[1] for s in half], 1)[0]), 2)


def shared_rss_slope(series: list[tuple[float, dict[str, float]]]) -> float | None:
    """MB/min over the run's second half of the long-lived parts' summed RSS (worker, forkserver, speech
    engine, LLM): anything that outlives a call and leaks shows here."""
    return slope([(t, sum(parts.values())) for t, parts in series if parts])


def headroom_summary(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """What the admission saw while calls ran (worker/headroom.py): the share of samples it read full, and
    its pressure and each signal as p50/p95/max."""
    busy = [v for v in verdicts if v.get("calls")]
    seen = [{"pressure": v["pressure"], **v.get("signals", {})} for v in busy]
    out: dict[str, Any] = {"samples": len(seen)}
    if seen:
        out["full_share"] = round(sum(not v.get("admits", True) for v in busy) / len(busy), 2)
        for name in seen[-1]:
            vals = [float(v.get(name, 0.0)) for v in seen]
            out[name] = {
                q: round(float(np.percentile(vals, p)), 3)
                for q, p in (("p50", 50), ("p95", 95), ("max", 100))
            }
    return out


def run_room_load(
    calls: int, minutes: float, data: Path, out: Path, caller_nice: int = 0, listen: str = ""
) -> dict[str, Any]:
    """`listen`: a Whisper model that checks what the callers heard (`replies_heard`); empty: not checked."""
    plan, state, stop, fillers = load_plan(data), RoomLoad(), threading.Event(), default_filler_texts()
    env = {k: v for k, v in os.environ.items() if k.startswith("PARLEY_")} | {
        "PARLEY_MAX_CALLS": str(max(calls, 4))
    }
    worker = {"num_idle_processes": str(calls)}
    timeout_s = max(600.0, CALL_S_PER_TURN * len(plan))
    opts = LiveKitCallOptions(
        out / "stack", base_env=env, worker_options=worker, call_timeout_s=timeout_s, caller_nice=caller_nice
    )
    with E2EStack(stack_options(opts)) as stack:
        wait_until_quiet(stack)
        worker_pid = next(p.popen.pid for p in stack.procs if p.name == "worker")
        verdicts = default_socket_path(f"headroom-{os.getpgid(worker_pid)}")  # worker/headroom.default_folder
        t0, host0 = time.monotonic(), host_busy_s()
        deadline = t0 + minutes * 60

        def sample() -> None:
            while not stop.is_set():
                _sample(worker_pid, state, time.monotonic() - t0)
                with contextlib.suppress(OSError, ValueError):
                    state.headroom.append(json.loads((verdicts / VERDICT_FILE).read_text(encoding="utf-8")))
                stop.wait(2.0)

        def caller(i: int) -> None:
            time.sleep(i * 2.5)  # staggered arrivals
            for k in itertools.takewhile(lambda _: time.monotonic() < deadline, itertools.count()):
                time.sleep(NEXT_CALLER_GAP_S if k else 0.0)
                try:
                    record = run_caller(stack, plan, out / f"call{i}-{k}", opts)
                    if any(t.who == "agent" and t.text.strip() == BUSY for t in record.transcripts):
                        continue  # refused (the worker's log counts it): no call was served
                    res = to_call_result(record, fillers, pipeline=f"call{i}")
                    starved, own = underruns(res, record)
                except Exception as e:  # one failed call is an error, not the end of the run
                    with state.lock:
                        state.errors.append(f"call{i}-{k}: {type(e).__name__}: {str(e)[:160]}")
                    continue
                with state.lock:
                    state.results.append(res)
                    if "jitter_buffer_ms" in record.receive:
                        state.jitter_buffer_ms.append(record.receive["jitter_buffer_ms"])
                    state.gaps += starved
                    state.pauses += own

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        with ThreadPoolExecutor(calls) as pool:
            list(pool.map(caller, range(calls)))
        stop.set()
        sampler.join(5)
        _sample(worker_pid, state, time.monotonic() - t0)
        state.seconds = time.monotonic() - t0
        state.host_busy_cores = round((host_busy_s() - host0) / state.seconds, 2)
        worker_log = next(p.log_path for p in stack.procs if p.name == "worker")
    # the stack is closed: every job process has ended its call and written its audit line
    worker_text = worker_log.read_text(errors="replace")
    state.audits = stream_audits(worker_text)
    state.refused = worker_text.count("host full: call refused")
    (out / "memory.json").write_text(json.dumps({"jobs": state.rss, "parts": state.parts_series}))
    heard = None
    if listen and listen_runs(state.results, listen):
        heard = replies_heard([t.as_json() for res in state.results for t in res.turns])
    return {**report(state, calls, minutes), "caller_nice": caller_nice, "replies_heard": heard}


def stream_audits(worker_log: str) -> list[dict[str, float]]:
    """The open-stream counts (and the CPU voice's seconds, when given) each job process logs when its call
    ends (worker/call.py `audit_open_streams`)."""
    audits = []
    for line in worker_log.splitlines():
        with contextlib.suppress(ValueError):
            rec = json.loads(line) if '"call ended"' in line else {}
            if rec.get("message") == "call ended" and "open_stt_streams" in rec:
                audit = {k: int(rec[k]) for k in ("open_stt_streams", "open_tts_streams") if k in rec}
                audits.append({**audit, **{k: float(rec[k]) for k in ("voice_cpu_s",) if k in rec}})
    return audits


def call_figures(results: list[CallResult], errors: list[str], gaps: list[float]) -> dict[str, Any]:
    """What the calls heard: `errors` are the worker's failures only (calls that failed, turns that timed
    out or got no or a silent reply, the worker's own apology / repeat / hold lines); `apologies` are the
    ones the LLM wrote itself (the embedded 135M model's content: reported, not failures)."""
    heard = errors + [f"{res.pipeline}: {e}" for res in results for e in [*res.errors, *turn_errors(res)]]
    failures = worker_failures(heard)
    apologies = [e for e in heard if e not in failures]
    v2v = [t.v2v_ms for res in results for t in res.turns if t.v2v_ms is not None]
    return {
        "conversations": len(results),
        "turns": len(v2v),
        "errors": len(failures),
        "error_list": failures[:50],
        "apologies": len(apologies),
        "apology_list": apologies[:20],
        "underruns": len(gaps),
        "underrun_gaps_ms": sorted(round(g * 1000) for g in gaps)[-20:],
        "v2v_ms": {"p50": pct(v2v, 50), "p95": pct(v2v, 95), "p99": pct(v2v, 99)},
    }


def report(state: RoomLoad, calls: int, minutes: float) -> dict[str, Any]:
    """A caller no agent joined was not dispatched (the worker reported itself full): counted apart from
    the worker's failures, as `not_dispatched`, like the calls it refused in-call (`refused`)."""
    unsent = [e for e in state.errors if "no agent joined" in e]
    served = sum(max(0.0, res.end - res.t0) for res in state.results) / 60  # call-minutes
    per_pid: dict[int, float] = {}  # each job process's largest RSS
    for _, by_pid in state.rss:
        per_pid.update({pid: max(mb, per_pid.get(pid, 0.0)) for pid, mb in by_pid.items()})
    largest = {
        k: max((p.get(k, 0.0) for _, p in state.parts_series), default=0.0)
        for k in ("engine", "llm", "forkserver")
    }
    cores = cpu_cores(state.cpu, state.seconds)
    voice_s = sum(a.get("voice_cpu_s", 0.0) for a in state.audits)
    if voice_s and "jobs" in cores:  # the voice runs inside the job processes: shown apart from them
        cores["voice"] = round(voice_s / max(state.seconds, 1e-9), 2)
        cores["jobs"] = round(max(0.0, cores["jobs"] - cores["voice"]), 2)
    job_max = round(max(per_pid.values()), 1) if per_pid else None
    leaked = (
        sum(a["open_stt_streams"] + a["open_tts_streams"] for a in state.audits) if state.audits else None
    )
    return {
        "calls": calls,
        "minutes": minutes,
        "livekit": True,
        **call_figures(state.results, [e for e in state.errors if e not in unsent], state.gaps),
        "refused": state.refused,
        "not_dispatched": len(unsent),
        "voice_pauses_ms": sorted(round(g * 1000) for g in state.pauses)[-20:],
        "jitter_buffer_ms": {"p50": pct(state.jitter_buffer_ms, 50), "max": pct(state.jitter_buffer_ms, 100)},
        # streams still open when a call ended, summed over every call the worker audited (None: no audit)
        "leaked_streams": leaked,
        "calls_audited": len(state.audits),
        "rss_mb_max": job_max,
        "rss_mb_per_call_max": job_max,
        "uss_mb_per_call_max": round(max(state.uss.values()), 1) if state.uss else None,
        "rss_slope_mb_per_min": slope([(t, max(by_pid.values())) for t, by_pid in state.rss if by_pid]),
        "rss_slope_mb_per_min_shared": shared_rss_slope(state.parts_series),
        **{f"rss_mb_{k}": round(v, 1) if v else None for k, v in largest.items()},
        "job_processes": len(per_pid),
        "headroom": headroom_summary(state.headroom),
        "cpu_cores": {**cores, "host": state.host_busy_cores},
        "call_minutes_served": round(served, 2),
        "cpu_s_per_call_minute": cpu_per_call_minute(cores, state.seconds, served),
    }
