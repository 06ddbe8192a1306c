"""`benchmarks.load --livekit`: N concurrent scripted calls through a real local room, in production shape.

One livekit-server and one Parley worker (`python worker.py start`: one job process per call, N idle
processes prewarmed, the embedded LLM and the speech engine shared by the host); N caller processes each
repeat the call back to back until the time is up. Reported from the callers' received tracks, the worker's
marks and its log: worker failures apart from the model's own apologies, underruns (a silence of ≥ 300 ms
inside a reply the worker's own audio did not have), v2v, calls refused or never dispatched by a full host,
memory per job process and per long-lived part, the host's headroom signals, and CPU per part (cores, and
seconds per call-minute served), the scripted callers' share apart: real callers are not on the host.
"""

from __future__ import annotations

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
from simulator.call_plan import default_filler_texts, load_plan
from simulator.livekit_stack import E2EStack
from simulator.offline import CallResult
from simulator.room_caller import RoomCallRecord
from simulator.room_result import to_call_result
from simulator.room_runner import LiveKitCallOptions, run_caller, stack_options, wait_until_quiet
from worker.headroom import VERDICT_FILE
from worker.measurement import SpeechReport, first_voiced_at

from .heard import listen_runs, replies_heard

UNDERRUN_S = 0.3
PAUSE_SLACK_S = 0.25
IN_CALL_MB = 20.0
"""A job process is in its call once its RSS is this far above its first sample (the prewarmed idle size)."""
CALL_S_PER_TURN = 40.0
"""The caller's wait for a whole call: this much per turn (at least 10 minutes; a slow 2-core host)."""
NEXT_CALLER_GAP_S = 3.0
"""A line's next caller arrives this long after the last one hung up: a slot freed reaches LiveKit only in
the worker's status update (every 2.5 s); sooner, a full host's refusal would leave the call with no agent."""
NOT_HOST = ("callers", "benchmark", "other")
"""Parts that are not the host's: real callers run elsewhere."""


@dataclass
class RoomLoad:
    results: list[CallResult] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)  # underruns: silences the voice did not make
    pauses: list[float] = field(default_factory=list)  # the voice's own pauses
    errors: list[str] = field(default_factory=list)
    rss: list[tuple[float, dict[int, float]]] = field(default_factory=list)  # (t, {job pid: MB})
    uss: dict[int, float] = field(default_factory=dict)  # job pid -> largest USS (MB): its own pages
    parts_rss: dict[str, float] = field(default_factory=dict)  # long-lived part -> largest RSS (MB)
    parts_series: list[tuple[float, dict[str, float]]] = field(default_factory=list)  # (t, {part: MB})
    cpu: list[dict[int, tuple[str, float]]] = field(default_factory=list)  # {pid: (part, CPU s)} per sample
    headroom: list[dict[str, Any]] = field(default_factory=list)  # the worker's verdicts (worker/headroom.py)
    seconds: float = 0.0
    host_busy_cores: float | None = None
    refused: int = 0  # calls the worker turned away in-call (its "call refused" lines)
    audits: list[dict[str, float]] = field(default_factory=list)  # each ended call's "call ended" line
    jitter_buffer_ms: list[float] = field(default_factory=list)  # per call (RoomCallRecord.receive)
    lock: threading.Lock = field(default_factory=threading.Lock)


# --- what the caller heard ---


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


# --- the host's parts: CPU and memory ---


def host_part(cmdline: str, child_of_worker: bool) -> str:
    """Which part of the stack a process is: callers | benchmark | livekit-server | stt-engine | llm | job |
    forkserver | worker | other. Job processes and the forkserver share a command line; the forkserver is
    the worker's own child, jobs are its children (under `spawn` a job is the worker's child)."""
    for part, key in (
        ("callers", "simulator.room_caller"),
        ("benchmark", "benchmarks.load"),
        ("livekit-server", "livekit-server"),
        ("stt-engine", "plugins.whisper serve"),
        ("llm", "worker.llm_server"),
        ("other", "multiprocessing.resource_tracker"),
    ):
        if key in cmdline:
            return part
    if "multiprocessing.forkserver" in cmdline:
        return "forkserver" if child_of_worker else "job"
    if "multiprocessing" in cmdline:
        return "job"
    return "worker" if "worker.py" in cmdline else "other"


def _sample(worker_pid: int, state: RoomLoad, t: float) -> None:
    """One look at every process this benchmark started (the stack, the worker's tree, the callers): CPU
    seconds per part; job RSS and USS; the long-lived parts' RSS. Other work on the machine is not counted
    (it shows only in `host_busy_cores`)."""
    me = psutil.Process()
    cpu: dict[int, tuple[str, float]] = {}
    jobs: dict[int, float] = {}
    parts: dict[str, float] = {}
    for p in [me, *me.children(recursive=True)]:
        try:
            with p.oneshot():
                part = (
                    "worker"
                    if p.pid == worker_pid
                    else host_part(" ".join(p.cmdline()), p.ppid() == worker_pid)
                )
                times = p.cpu_times()
                cpu[p.pid] = ("jobs" if part == "job" else part, times.user + times.system)
                rss = p.memory_info().rss / 1e6
            if part == "job":
                jobs[p.pid] = rss
                state.uss[p.pid] = max(state.uss.get(p.pid, 0.0), p.memory_full_info().uss / 1e6)
            elif part in ("worker", "stt-engine", "llm", "forkserver"):
                parts[part] = rss
                state.parts_rss[part] = max(state.parts_rss.get(part, 0.0), rss)
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
    """CPU seconds each part spent per minute of call served (the admitted calls, by their own durations);
    `host_parts` sums the host's own: a host with C cores holds about C x 60 / host_parts calls at full
    use (the scripted callers and the benchmark are not the host's: real callers run elsewhere)."""
    per = {g: round(c * seconds / max(call_minutes, 1e-9), 1) for g, c in cores.items()}
    per["host_parts"] = round(sum(v for g, v in per.items() if g not in NOT_HOST), 1)
    return per


def _slope(samples: list[tuple[float, float]]) -> float | None:
    """MB/min over the second half of the samples (warm-up left out)."""
    half = samples[len(samples) // 2 :]
    if len(half) < 3:
        return None
    t = np.array([s[0] for s in half]) / 60
    return round(float(np.polyfit(t, [s[1] for s in half], 1)[0]), 2)


def _by_pid(samples: list[tuple[float, dict[int, float]]]) -> dict[int, list[tuple[float, float]]]:
    series: dict[int, list[tuple[float, float]]] = {}
    for t, by_pid in samples:
        for pid, mb in by_pid.items():
            series.setdefault(pid, []).append((t, mb))
    return series


def shared_rss_slope(series: list[tuple[float, dict[str, float]]]) -> float | None:
    """MB/min over the run's second half of the long-lived parts' summed RSS (worker, forkserver, speech
    engine, LLM): anything that outlives a call and leaks shows here."""
    return _slope([(t, sum(parts.values())) for t, parts in series if parts])


def job_rss_growth(samples: list[tuple[float, dict[int, float]]]) -> dict[str, float | int | None]:
    """Each job process's RSS slope (MB/min) over the second half of its time in a call (a job's RSS grows
    ~100 MB over its first turns as it loads what it uses lazily): median and largest over the processes
    with at least 20 s of such samples. A leak inside a call shows here."""
    slopes = []
    for series in _by_pid(samples).values():
        began = next((at for at, mb in series if mb > series[0][1] + IN_CALL_MB), None)
        if began is None:
            continue
        in_call = [(at, mb) for at, mb in series if at >= began]
        settled = in_call[len(in_call) // 2 :]
        slope = _slope(in_call)
        if slope is not None and settled[-1][0] - settled[0][0] >= 20.0:
            slopes.append(slope)
    return {
        "p50": round(float(np.median(slopes)), 2) if slopes else None,
        "max": round(max(slopes), 2) if slopes else None,
        "processes": len(slopes),
    }


def job_peak_slope(samples: list[tuple[float, dict[int, float]]]) -> float | None:
    """MB/min of each job process's peak RSS against when it started, over the calls of the run: a host
    whose every new call ends larger than the last grows here (the largest job at any one time rises with
    every call that warms up, and says nothing of this)."""
    peaks = [(series[0][0], max(mb for _, mb in series)) for series in _by_pid(samples).values()]
    peaks = [(t, mb) for t, mb in sorted(peaks) if mb > IN_CALL_MB]
    if len(peaks) < 4:
        return None
    t = np.array([p[0] for p in peaks]) / 60
    return round(float(np.polyfit(t, [p[1] for p in peaks], 1)[0]), 2)


def _read_verdict(folder: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((folder / VERDICT_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def headroom_summary(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """The worker's headroom signals over the run (each the worst of its window), as p50/p95/max, and the
    share of samples it read full: what the admission saw while the calls ran."""
    with_calls = [v for v in verdicts if v.get("calls")]
    out: dict[str, Any] = {"samples": len(with_calls)}
    if not with_calls:
        return out
    out["full_share"] = round(sum(not v.get("admits", True) for v in with_calls) / len(with_calls), 2)
    names = sorted({k for v in with_calls for k in v.get("signals", {})})
    for name in ["pressure", *names]:
        vals = [
            float(v["pressure"] if name == "pressure" else v.get("signals", {}).get(name, 0.0))
            for v in with_calls
        ]
        out[name] = {
            q: round(float(np.percentile(vals, p)), 3) for q, p in (("p50", 50), ("p95", 95), ("max", 100))
        }
    return out


# --- the run ---


def run_room_load(
    calls: int, minutes: float, data: Path, out: Path, caller_nice: int = 0, listen: str = ""
) -> dict[str, Any]:
    """`listen`: a Whisper model that checks, after the run, what the callers heard of each reply
    (benchmarks/heard.py: `replies_heard`); empty = not checked."""
    plan = load_plan(data)
    env = {k: v for k, v in os.environ.items() if k.startswith("PARLEY_")}
    env["PARLEY_MAX_CALLS"] = str(max(calls, 4))
    opts = LiveKitCallOptions(
        out_dir=out / "stack",
        base_env=env,
        worker_options={"num_idle_processes": str(calls)},
        call_timeout_s=max(600.0, CALL_S_PER_TURN * len(plan)),
        caller_nice=caller_nice,
    )
    state = RoomLoad()
    stop = threading.Event()
    fillers = default_filler_texts()
    with E2EStack(stack_options(opts)) as stack:
        wait_until_quiet(stack)
        worker_pid = next(p.popen.pid for p in stack.procs if p.name == "worker")
        verdicts = default_socket_path(f"headroom-{os.getpgid(worker_pid)}")  # worker/headroom.default_folder
        t0 = time.monotonic()
        host0 = psutil.cpu_times()
        deadline = t0 + minutes * 60

        def sample() -> None:
            while not stop.is_set():
                _sample(worker_pid, state, time.monotonic() - t0)
                verdict = _read_verdict(verdicts)
                if verdict is not None:
                    state.headroom.append(verdict)
                stop.wait(2.0)

        def caller(i: int) -> None:
            time.sleep(i * 2.5)  # staggered arrivals
            k = 0
            while time.monotonic() < deadline:
                if k:
                    time.sleep(NEXT_CALLER_GAP_S)
                k += 1
                try:
                    record = run_caller(stack, plan, out / f"call{i}-{k - 1}", opts)
                    res = to_call_result(record, fillers, pipeline=f"call{i}")
                    starved, own = underruns(res, record)
                except Exception as e:  # one failed call is an error, not the end of the run
                    with state.lock:
                        state.errors.append(f"call{i}-{k - 1}: {type(e).__name__}: {str(e)[:160]}")
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
        host1 = psutil.cpu_times()
        busy = (sum(host1) - host1.idle - host1.iowait) - (sum(host0) - host0.idle - host0.iowait)
        state.host_busy_cores = round(busy / state.seconds, 2)
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
        if '"call ended"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("message") == "call ended" and "open_stt_streams" in rec:
            keys = ("open_stt_streams", "open_tts_streams")
            audit: dict[str, float] = {k: int(rec.get(k, 0)) for k in keys}
            if "voice_cpu_s" in rec:
                audit["voice_cpu_s"] = float(rec["voice_cpu_s"])
            audits.append(audit)
    return audits


def report(state: RoomLoad, calls: int, minutes: float) -> dict[str, Any]:
    """`errors` are the worker's failures only (calls that failed, turns that timed out or got no or a
    silent reply, and the worker's own apology / repeat / hold lines); `apologies` are the ones the LLM
    wrote itself (the embedded 135M model's content: reported, not failures). A caller no agent joined
    was not dispatched (the worker reported itself full): counted apart, as `not_dispatched`."""
    from simulator.call_plan import worker_failures

    from .report import pct, turn_errors

    unsent = [e for e in state.errors if "no agent joined" in e]
    heard = [e for e in state.errors if e not in unsent]
    for res in state.results:
        heard += [f"{res.pipeline}: {e}" for e in [*res.errors, *turn_errors(res)]]
    errors = worker_failures(heard)
    model_apologies = [e for e in heard if e not in errors]
    v2v = [t.v2v_ms for res in state.results for t in res.turns if t.v2v_ms is not None]
    served = sum(max(0.0, res.end - res.t0) for res in state.results) / 60  # call-minutes
    per_pid = {pid: max(mb for _, mb in series) for pid, series in _by_pid(state.rss).items()}
    biggest = [(t, max(by_pid.values())) for t, by_pid in state.rss if by_pid]
    cores = cpu_cores(state.cpu, state.seconds)
    voice_s = sum(a.get("voice_cpu_s", 0.0) for a in state.audits)
    if voice_s and "jobs" in cores:  # the voice runs inside the job processes: shown apart from them
        cores["voice"] = round(voice_s / max(state.seconds, 1e-9), 2)
        cores["jobs"] = round(max(0.0, cores["jobs"] - cores["voice"]), 2)
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
        "refused": state.refused,
        "not_dispatched": len(unsent),
        "underruns": len(state.gaps),
        "underrun_gaps_ms": sorted(round(g * 1000) for g in state.gaps)[-20:],
        "voice_pauses_ms": sorted(round(g * 1000) for g in state.pauses)[-20:],
        "v2v_ms": {"p50": pct(v2v, 50), "p95": pct(v2v, 95), "p99": pct(v2v, 99)},
        "jitter_buffer_ms": {"p50": pct(state.jitter_buffer_ms, 50), "max": pct(state.jitter_buffer_ms, 100)},
        # streams still open when a call ended, summed over every call the worker audited (None: no audit)
        "leaked_streams": (
            sum(a["open_stt_streams"] + a["open_tts_streams"] for a in state.audits) if state.audits else None
        ),
        "calls_audited": len(state.audits),
        "rss_mb_max": round(max(per_pid.values()), 1) if per_pid else None,
        "rss_mb_per_call_max": round(max(per_pid.values()), 1) if per_pid else None,
        "uss_mb_per_call_max": round(max(state.uss.values()), 1) if state.uss else None,
        "rss_slope_mb_per_min": _slope(biggest),
        "rss_slope_mb_per_min_shared": shared_rss_slope(state.parts_series),
        "job_rss_growth_mb_per_min": job_rss_growth(state.rss),
        "job_peak_rss_slope_mb_per_min": job_peak_slope(state.rss),
        "rss_mb_engine": _mb(state.parts_rss.get("stt-engine")),
        "rss_mb_llm": _mb(state.parts_rss.get("llm")),
        "rss_mb_forkserver": _mb(state.parts_rss.get("forkserver")),
        "job_processes": len(per_pid),
        "headroom": headroom_summary(state.headroom),
        "cpu_cores": {**cores, "host": state.host_busy_cores},
        "call_minutes_served": round(served, 2),
        "cpu_s_per_call_minute": cpu_per_call_minute(cores, state.seconds, served),
    }


def _mb(v: float | None) -> float | None:
    return round(v, 1) if v is not None else None
