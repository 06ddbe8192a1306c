"""Many calls at once for minutes: does every call stay healthy, and does the host stay flat?

    python -m benchmarks.load --calls 4 --minutes 10 [--data DIR] [--json PATH] [--out DIR]

N scripted callers each repeat the conversation in DIR back to back until the time is up, all through the
offline harness in this process (one shared set of models, as one job process would hold; the embedded LLM
is a child process shared by all). Reported: errors, underruns after first audio (gaps inside a reply at the
loudspeaker), v2v p50/p99, streams left open after the calls end, peak memory (this process + children) and
CPU over time, plus a PNG of latency and memory over time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from simulator.offline import CallOptions, run_call
from worker.memory import release_free_memory, tune_allocator
from worker.settings import SettingsError, load_settings

from . import machine_speed
from .heard import add_listen_arguments, describe

log = logging.getLogger("parley.bench.load")


@dataclass
class LoadStats:
    t0: float
    v2v: list[tuple[float, float]] = field(default_factory=list)  # (time, ms)
    errors: list[str] = field(default_factory=list)
    underruns: list[tuple[float, float]] = field(default_factory=list)
    samples: list[tuple[float, float, float]] = field(default_factory=list)  # (time, rss MB, cpu %)
    own_rss: list[float] = field(default_factory=list)  # the calls' process alone (MB), same sample times
    conversations: int = 0
    apologies: int = 0
    threads: list[int] = field(default_factory=list)
    underrun_causes: list[dict[str, float | None]] = field(default_factory=list)
    marks: list[tuple[int, list[Any]]] = field(default_factory=list)  # (call, its marks), for LLM stalls


def _rss_mb(proc: psutil.Process) -> tuple[float, float]:
    """(this process, its children: the embedded LLM) in MB."""
    children = 0
    for p in proc.children(recursive=True):
        try:
            children += p.memory_info().rss
        except psutil.Error:
            continue
    return proc.memory_info().rss / 1e6, children / 1e6


async def _sample(stats: LoadStats, stop: asyncio.Event, every_s: float = 1.0) -> None:
    proc = psutil.Process()
    psutil.cpu_percent(None)
    while not stop.is_set():
        own, children = _rss_mb(proc)
        stats.samples.append((time.monotonic() - stats.t0, own + children, psutil.cpu_percent(None)))
        stats.own_rss.append(own)
        stats.threads.append(proc.num_threads())
        try:
            await asyncio.wait_for(stop.wait(), every_s)
        except TimeoutError:
            pass


async def _caller(
    idx: int, comp: Any, settings: Any, turns: list[Path], deadline: float, stats: LoadStats
) -> None:
    from worker.pipeline import build_call

    await asyncio.sleep(idx * 2.5)  # stagger the calls like real arrivals
    while time.monotonic() < deadline:
        session, agent = build_call(settings, comp)
        try:
            res = await run_call(f"call{idx}", session, agent, turns, CallOptions(settle_s=0.4))
        except Exception as e:
            stats.errors.append(f"call{idx}: {type(e).__name__}: {str(e)[:160]}")
            continue
        stats.conversations += 1
        await asyncio.to_thread(release_free_memory)  # what the worker does when a call ends
        stats.errors += [f"call{idx}: {e}" for e in res.errors]
        for tr in res.turns:
            if tr.error:
                stats.errors.append(f"call{idx} {tr.file}: {tr.error}")
            if tr.problem:  # an apology or a repeat-request is a failed turn, said politely
                stats.apologies += 1
                stats.errors.append(f"call{idx} {tr.file}: {tr.problem}: {tr.reply_text[:80]!r}")
            if tr.v2v_ms is not None:
                stats.v2v.append((tr.speech_end - stats.t0, tr.v2v_ms))
        stats.underruns += res.speaker.underruns
        stats.marks.append((idx, res.marks))
        stats.underrun_causes += [_underrun_cause(res.marks, t, gap) for t, gap in res.speaker.underruns]


def _underrun_cause(marks: list[Any], starved: float, gap: float) -> dict[str, float | None]:
    """What the loudspeaker waited for: a piece still synthesising when it ran dry (synthesis slower than
    playback), or one whose synthesis began only after (its text, or the piece before it, was late)."""

    def last(kind: str, before: float) -> float | None:
        ts = [m.t for m in marks if m.kind == kind and m.t <= before]
        return ts[-1] if ts else None

    resumed = starved + gap
    piece = last("tts_piece", resumed)
    text = last("llm_text", piece) if piece is not None else None
    ms = lambda a, b: round((a - b) * 1000) if a is not None and b is not None else None  # noqa: E731
    return {
        "gap_ms": round(gap * 1000),
        "synth_ms": ms(resumed, piece),
        "synth_began_after_dry_ms": ms(piece, starved),
        "text_before_synth_ms": ms(piece, text),
    }


def _spans(marks: list[Any], start: str, end: str) -> list[tuple[float, float]]:
    """(start, end) times of each `start` mark up to the next `end` mark."""
    out, began = [], None
    for m in marks:
        if m.kind == start:
            began = m.t
        elif m.kind == end and began is not None:
            out.append((began, m.t))
            began = None
    return out


def _llm_stalls(calls: list[tuple[int, list[Any]]], over_s: float = 0.3) -> dict[str, Any]:
    """Gaps between one reply's LLM text chunks, and what the other calls were doing during the long ones
    (speaking: their Whisper partials run; prefill: their LLM request had no first token yet)."""
    gaps: list[float] = []
    stalls: list[tuple[float, float]] = []
    for _, marks in calls:
        prev = None
        for m in marks:
            if m.kind == "llm_request":
                prev = None
            elif m.kind == "llm_text":
                if prev is not None:
                    gaps.append(m.t - prev)
                    if m.t - prev > over_s:
                        stalls.append((prev, m.t))
                prev = m.t
    speaking = [s for _, mk in calls for s in _spans(mk, "speech_start", "speech_end")]
    prefill = [s for _, mk in calls for s in _spans(mk, "llm_request", "llm_first_token")]
    overlaps = lambda a, b, spans: sum(1 for s, e in spans if s < b and e > a)  # noqa: E731
    gaps_ms = [g * 1000 for g in gaps]
    return {
        "chunk_gap_ms": {"p50": _pct(gaps_ms, 50), "p99": _pct(gaps_ms, 99)},
        "stalls_over_ms": round(over_s * 1000),
        "stalls": len(stalls),
        "stall_context": [
            {
                "gap_ms": round((b - a) * 1000),
                "callers_speaking": overlaps(a, b, speaking),
                "prefills": overlaps(a, b, prefill),
            }
            for a, b in sorted(stalls, key=lambda s: s[0] - s[1])[:20]
        ],
    }


def _task_name(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    return f"{task.get_name()}: {getattr(coro, '__qualname__', type(coro).__name__)}"


def _slope_mb_per_min(samples: list[tuple[float, float]]) -> float | None:
    """Least-squares growth of the second half of a run: warm-up excluded, is memory still climbing?"""
    half = samples[len(samples) // 2 :]
    if len(half) < 10:
        return None
    t, mb = np.array(half).T
    return round(float(np.polyfit(t / 60, mb, 1)[0]), 2)


def _curve(samples: list[tuple[float, float]], points: int = 120) -> list[list[float]]:
    """About `points` (time s, MB) pairs for the JSON report."""
    return [[round(t, 1), round(v, 1)] for t, v in samples[:: max(1, len(samples) // points)]]


def _pct(vals: list[float], q: float) -> float | None:
    return round(float(np.percentile(vals, q)), 1) if vals else None


def _png(stats: LoadStats, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    if stats.v2v:
        t, v = zip(*stats.v2v, strict=True)
        a.plot(np.array(t) / 60, v, ".", ms=4)
    a.set_ylabel("v2v ms")
    a.set_title("Parley load: voice-to-voice per turn and host memory")
    if stats.samples:
        t2, rss, cpu = zip(*stats.samples, strict=True)
        b.plot(np.array(t2) / 60, rss, label="RSS MB (all processes)")
        b2 = b.twinx()
        b2.plot(np.array(t2) / 60, cpu, color="tab:orange", lw=0.5, alpha=0.6, label="CPU %")
        b2.set_ylabel("CPU %")
    b.set_ylabel("MB")
    b.set_xlabel("minutes")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(str(path), dpi=100)
    plt.close(fig)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions
    from worker.pipeline import conversation_prefix, load_components

    settings = load_settings()
    tune_allocator()  # as the worker's prewarm does
    turns = sorted(Path(args.data).glob("*.wav"))
    if not turns:
        raise SystemExit(f"error: no *.wav turns in {args.data}")
    llm_server = None
    llm_url = settings.llm_base_url
    slots = max(settings.max_calls, args.calls)
    if not llm_url:
        llm_server = EmbeddedLLM(
            EmbeddedLLMOptions(
                n_parallel=slots + 1,  # the calls' slots and the end-of-turn scorer's
                threads=settings.llm_embedded_threads,
                log_path=settings.llm_embedded_log,
            )
        )
        llm_url = await asyncio.to_thread(llm_server.start)
        await asyncio.to_thread(llm_server.warm, conversation_prefix(settings))
    try:
        # main thread: LiveKit plugins register on import
        comp = load_components(settings, llm_url, llm_slots=slots)
        baseline_tasks = set(asyncio.all_tasks())
        stats = LoadStats(t0=time.monotonic())
        stop = asyncio.Event()
        sampler = asyncio.create_task(_sample(stats, stop))
        deadline = stats.t0 + args.minutes * 60
        await asyncio.gather(*(_caller(i, comp, settings, turns, deadline, stats) for i in range(args.calls)))
        await asyncio.sleep(2.0)  # let closing sessions finish their cleanup
        stop.set()
        await sampler  # (its own pending wait would otherwise count as a task left behind)
        leaked = list(asyncio.all_tasks() - baseline_tasks)
        leaked_tts = int(getattr(comp.tts, "active_streams", 0))
    finally:
        if llm_server:
            llm_server.close()
    v2v = [v for _, v in stats.v2v]
    rss = [r for _, r, _ in stats.samples]
    own = [(t, o) for (t, _, _), o in zip(stats.samples, stats.own_rss, strict=False)]
    third = max(1, len(rss) // 3)
    report = {
        "calls": args.calls,
        "minutes": args.minutes,
        "conversations": stats.conversations,
        "turns": len(v2v),
        "errors": len(stats.errors),
        "error_list": stats.errors[:50],
        "apologies": stats.apologies,
        "livekit": False,  # every call in this one process, models shared: no per-call process to weigh
        "rss_mb_per_call_max": None,
        "rss_slope_mb_per_min": _slope_mb_per_min([(t, r) for t, r, _ in stats.samples]),
        "underruns": len(stats.underruns),
        "underrun_gaps_ms": sorted(round(g * 1000) for _, g in stats.underruns)[-20:],
        "underrun_causes": stats.underrun_causes[:20],
        "llm_stalls": _llm_stalls(stats.marks),
        "v2v_ms": {"p50": _pct(v2v, 50), "p99": _pct(v2v, 99)},
        "leaked_streams": leaked_tts,
        "leaked_tasks": len(leaked),
        "leaked_task_names": sorted({_task_name(t) for t in leaked})[:20],
        "rss_mb_max": round(max(rss), 1) if rss else None,
        "rss_mb_first_third_median": round(float(np.median(rss[:third])), 1) if rss else None,
        "rss_mb_last_third_median": round(float(np.median(rss[-third:])), 1) if rss else None,
        "own_rss_mb_first_third_median": round(float(np.median(stats.own_rss[:third])), 1) if rss else None,
        "own_rss_mb_last_third_median": round(float(np.median(stats.own_rss[-third:])), 1) if rss else None,
        "rss_growth_second_half_mb_per_min": _slope_mb_per_min([(t, r) for t, r, _ in stats.samples]),
        "own_rss_growth_second_half_mb_per_min": _slope_mb_per_min(own),
        "threads_first_last": [stats.threads[0], stats.threads[-1]] if stats.threads else None,
        "cpu_pct_mean": round(float(np.mean([c for *_, c in stats.samples])), 1) if stats.samples else None,
        "rss_curve_mb": _curve([(t, r) for t, r, _ in stats.samples]),
        "own_rss_curve_mb": _curve(own),
    }
    out = Path(args.out)
    _png(stats, out / "load.png")
    report["png"] = str(out / "load.png")
    return report


def _print(report: dict[str, Any]) -> None:
    rows = [
        ("calls × minutes", f"{report['calls']} × {report['minutes']}"),
        ("conversations / turns", f"{report['conversations']} / {report['turns']}"),
        ("errors", report["errors"]),
        ("underruns after first audio", report["underruns"]),
        (
            f"LLM stalls > {report['llm_stalls']['stalls_over_ms']} ms",
            report["llm_stalls"]["stalls"],
        ),
        ("v2v p50 / p99 ms", f"{report['v2v_ms']['p50']} / {report['v2v_ms']['p99']}"),
        ("leaked streams / tasks", f"{report['leaked_streams']} / {report['leaked_tasks']}"),
        ("RSS max MB", report["rss_mb_max"]),
        (
            "RSS median first → last third MB",
            f"{report['rss_mb_first_third_median']} → {report['rss_mb_last_third_median']}",
        ),
        ("RSS growth, second half MB/min", report["rss_growth_second_half_mb_per_min"]),
        ("CPU mean %", report["cpu_pct_mean"]),
    ]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(w)}  {v}")


def _room(args: argparse.Namespace) -> dict[str, Any]:
    from simulator.room_runner import room_unavailable_reason

    from .load_room import run_room_load

    load_settings()  # a bad setting is one line here
    why = room_unavailable_reason()
    if why:
        print(f"error: no local LiveKit room: {why}", file=sys.stderr)
        sys.exit(2)
    speed = machine_speed.measure()  # before the calls: room figures move with the machine
    print(machine_speed.describe(speed), flush=True)
    if args.capacity:
        from .capacity import CapacityOptions, sweep

        counter = iter(range(1_000_000))

        def one(calls: int, minutes: float) -> dict[str, Any]:
            out = Path(args.out) / f"capacity-{calls}-{next(counter)}"
            return run_room_load(calls, minutes, Path(args.data), out, args.caller_nice, args.listen)

        opts = CapacityOptions(max_calls=args.capacity_max, minutes=args.minutes or 2.0)
        return {**sweep(one, opts), "machine_speed": speed}
    report = run_room_load(
        args.calls, args.minutes or 1.0, Path(args.data), Path(args.out), args.caller_nice, args.listen
    )
    return {**report, "machine_speed": speed}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=None, help="per run (default 1; 2 with --capacity)")
    ap.add_argument("--data", default=None, help="caller turns (default: the project's test conversation)")
    ap.add_argument("--json")
    ap.add_argument("--out", default="out/load")
    ap.add_argument("--log-level", default="WARNING")
    ap.add_argument(
        "--livekit",
        action="store_true",
        help="through a real local room: the worker, one job process per call (benchmarks/load_room.py)",
    )
    ap.add_argument(
        "--capacity",
        action="store_true",
        help="with --livekit: N = 2, 3, … calls × 3 runs; `capacity` = the largest N whose runs all hold "
        "p95 ≤ 1.5 s and no underrun (benchmarks/capacity.py)",
    )
    ap.add_argument("--capacity-max", type=int, default=8, help="the largest N the capacity sweep tries")
    ap.add_argument(
        "--caller-nice",
        type=int,
        default=0,
        choices=range(20),
        metavar="0-19",
        help="with --livekit: run the scripted callers at this nice level, so the host gets the cores first "
        "(real callers are not on the host); reported as `caller_nice`",
    )
    add_listen_arguments(ap, "with --livekit, after the run")
    args = ap.parse_args(argv)
    if args.data is None:
        from simulator.test_speech import speech_dir

        args.data = str(speech_dir() / "conversation")
    if args.calls < 1 or (args.minutes is not None and args.minutes <= 0):
        print("error: --calls must be ≥ 1 and --minutes > 0", file=sys.stderr)
        sys.exit(2)
    if args.capacity and not args.livekit:
        print("error: --capacity measures through the room: add --livekit", file=sys.stderr)
        sys.exit(2)
    if not args.livekit:
        args.minutes = args.minutes or 1.0
    logging.basicConfig(level=args.log_level)
    try:
        report = _room(args) if args.livekit else asyncio.run(main_async(args))
    except SettingsError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    if args.capacity:
        print(f"{'capacity'.ljust(20)}  {report['capacity']}")
        for n, rows in report["runs"].items():
            print(
                f"{(n + ' calls').ljust(20)}  "
                + ", ".join(
                    f"p95 {r['v2v_ms']['p95']} underruns {r['underruns']} errors {r['errors']}" for r in rows
                )
            )
    elif args.livekit:
        for k in (
            "calls",
            "conversations",
            "refused",
            "not_dispatched",
            "turns",
            "errors",
            "apologies",
            "underruns",
            "v2v_ms",
        ):
            print(f"{k.ljust(20)}  {report[k]}")
        print(f"{'jitter_buffer_ms'.ljust(20)}  {report['jitter_buffer_ms']} (the callers' receive side)")
        print(f"{'voice pauses'.ljust(20)}  {len(report['voice_pauses_ms'])} (not underruns)")
        print(describe(report["replies_heard"]))
        for k in (
            "rss_mb_per_call_max",
            "uss_mb_per_call_max",
            "rss_slope_mb_per_min",
            "rss_slope_mb_per_min_shared",
            "job_rss_growth_mb_per_min",
            "rss_mb_engine",
            "job_processes",
            "cpu_cores",
            "call_minutes_served",
            "cpu_s_per_call_minute",
        ):
            print(f"{k.ljust(20)}  {report[k]}")
    else:
        _print(report)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
